//! Variables a query names as `$$name` besides an expression's own (`$let`, `$map`, ...):
//!
//! - a command's `let` (find, aggregate, update, delete, findAndModify): a [`Scope`], evaluated
//!   once before the command reads a document (`expr::command_let`), and carried as a value by what evaluates
//!   expressions for that command (the matcher, the projection, the pipeline's stages, the
//!   update), so a cursor's later batches see the same values on whatever thread runs them;
//! - a stage's variables for the sub-pipeline it runs (`$lookup`'s `let`), in a per-thread
//!   stack of frames, like the collation in effect: a sub-pipeline runs to completion on the
//!   thread that binds its variables (`run_pipeline` collects its output), so a frame is in
//!   effect exactly while its sub-pipeline runs.
//!
//! An expression's own variables shadow a stage's, which shadow the command's.

use std::cell::RefCell;
use std::sync::Arc;

use bson::Bson;

use crate::error::{DocError, DocResult};

/// A variable's value; `None` is "missing" (a `let` of an absent field).
pub type Binding = (String, Option<Bson>);

thread_local! {
    static FRAMES: RefCell<Vec<Vec<Binding>>> = const { RefCell::new(Vec::new()) };
}

/// Pops its frame when dropped.
pub struct Frame {
    depth: usize,
}

impl Drop for Frame {
    fn drop(&mut self) {
        FRAMES.with(|f| {
            let mut f = f.borrow_mut();
            assert_eq!(f.len(), self.depth, "variable frames are popped in order");
            f.pop();
        });
    }
}

/// Binds `vars` until the returned frame is dropped; inner frames shadow outer ones.
pub fn bind(vars: Vec<Binding>) -> Frame {
    FRAMES.with(|f| {
        let mut f = f.borrow_mut();
        f.push(vars);
        Frame { depth: f.len() }
    })
}

/// The innermost binding of `name`: `Some(None)` when it is bound to a missing value, `None`
/// when nothing binds it.
pub fn lookup(name: &str) -> Option<Option<Bson>> {
    FRAMES.with(|f| {
        f.borrow()
            .iter()
            .rev()
            .find_map(|frame| frame.iter().find(|(n, _)| n == name))
            .map(|(_, v)| v.clone())
    })
}

/// A command's `let` variables, evaluated: cheap to clone (shared), empty by default.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Scope(Option<Arc<[Binding]>>);

/// The scope of a command without `let`.
pub static EMPTY: Scope = Scope(None);

impl Scope {
    /// A scope of these bindings (evaluated values); none is the empty scope.
    pub(crate) fn of(bound: Vec<Binding>) -> Scope {
        Scope(if bound.is_empty() {
            None
        } else {
            Some(bound.into())
        })
    }

    /// The bindings, in the order they were bound.
    pub(crate) fn bindings(&self) -> &[Binding] {
        self.0.as_deref().unwrap_or_default()
    }

    /// The binding of `name`: `Some(None)` when it is bound to a missing value (`$$REMOVE`),
    /// `None` when the scope does not bind it.
    pub fn get(&self, name: &str) -> Option<Option<&Bson>> {
        self.0
            .as_deref()?
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_ref())
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_none()
    }
}

/// mongod's `Variables::validateNameForUserWrite`: a lowercase letter or a non-ASCII character
/// first, then letters, digits, `_` or non-ASCII characters. (`$$ROOT`, `$$CURRENT` and the
/// other system variables start with a capital, so a user variable never overrides one.)
pub(crate) fn check_var_name(name: &str) -> DocResult<()> {
    let Some(first) = name.chars().next() else {
        return Err(DocError::with_code(
            16866,
            "Location16866",
            "empty variable names are not allowed",
        ));
    };
    if first.is_ascii() && !first.is_ascii_lowercase() {
        return Err(DocError::with_code(
            16867,
            "Location16867",
            format!("'{name}' starts with an invalid character for a user variable name"),
        ));
    }
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || *c == '_' || !c.is_ascii()))
    {
        return Err(DocError::with_code(
            16868,
            "Location16868",
            format!("'{name}' contains an invalid character for a variable name: '{c}'"),
        ));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_nest_and_pop() {
        assert_eq!(lookup("a"), None);
        let outer = bind(vec![("a".into(), Some(Bson::Int32(1))), ("b".into(), None)]);
        {
            let _inner = bind(vec![("a".into(), Some(Bson::Int32(2)))]);
            assert_eq!(lookup("a"), Some(Some(Bson::Int32(2))));
            assert_eq!(lookup("b"), Some(None));
        }
        assert_eq!(lookup("a"), Some(Some(Bson::Int32(1))));
        drop(outer);
        assert_eq!(lookup("a"), None);
    }
}
