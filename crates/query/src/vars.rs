//! Pipeline variables bound by a stage for the sub-pipeline it runs (`$lookup`'s `let`): `$$name`
//! inside that sub-pipeline, in `$expr`, `$project`, `$addFields` or any other stage, reads them.
//!
//! They live in a per-thread stack of frames, like the collation in effect: the matcher and the
//! projection build their evaluation contexts themselves, and a sub-pipeline runs to completion
//! on the thread that binds its variables (`run_pipeline` collects its output), so a frame is in
//! effect exactly while its sub-pipeline runs. An expression's own `$let`/`$map` variables shadow
//! these (they are looked up first).

use std::cell::RefCell;

use bson::Bson;

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
