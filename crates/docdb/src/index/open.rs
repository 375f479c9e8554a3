//! An index as a collection holds it open: its definition, table and multikey flag, and how
//! a request names one.

use super::spec::IndexDef;
use bson::Bson;
use engine::TableId;
use query::error::{DocError, DocResult};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

pub struct Index {
    pub def: IndexDef,
    pub ident: String,
    pub table: TableId,
    pub multikey: AtomicBool,
}

impl Index {
    pub fn is_multikey(&self) -> bool {
        self.multikey.load(Ordering::Acquire)
    }
}

/// The index `which` names: by name (unique), or by key pattern — which several indexes may
/// share (partial indexes with different filters, or different collations): then
/// `ambiguous(first, second)` is the error, as mongod refuses to guess. `Ok(None)`: no index.
pub fn find_index(
    indexes: &[Arc<Index>],
    which: &Bson,
    ambiguous: impl FnOnce(&Index, &Index) -> DocError,
) -> DocResult<Option<usize>> {
    let mut found = indexes.iter().enumerate().filter(|(_, i)| match which {
        Bson::String(n) => &i.def.name == n,
        Bson::Document(k) => &i.def.key == k,
        _ => false,
    });
    let first = found.next();
    if let (Some((_, a)), Some((_, b))) = (first, found.next()) {
        return Err(ambiguous(a, b));
    }
    Ok(first.map(|(pos, _)| pos))
}

/// mongod's AmbiguousIndexKeyPattern (181): a key pattern that names more than one index
/// where one is needed (dropIndexes, collMod).
pub fn ambiguous_key_pattern(key: &Bson, a: &Index, b: &Index) -> DocError {
    DocError::with_code(
        181,
        "AmbiguousIndexKeyPattern",
        format!(
            "2 or more indexes found for key: {key}, identify by name instead. Conflicting indexes: {}, {}",
            a.def.spec, b.def.spec
        ),
    )
}
