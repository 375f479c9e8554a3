//! The one place the storage side calls the document functions (compare, path, matcher, update,
//! projection, sort, aggregate). Everything else in the storage modules goes through these
//! wrappers, so an interface change on that side is absorbed here.
#![allow(clippy::result_large_err)]

use crate::aggregate;
use crate::compare;
use crate::error::DocResult;
use crate::interrupt::Interrupt;
use crate::matcher::Matcher;
use crate::path;
use crate::projection::Projection;
use crate::sort::SortSpec;
use crate::update::{self, Update};
use bson::{Bson, Document};
use std::cmp::Ordering;
use std::sync::Arc;

pub type DocIter = Box<dyn Iterator<Item = DocResult<Document>> + Send>;
/// Reads a whole collection of the current database (for `$lookup`).
pub type LookupFn = Arc<dyn Fn(&str) -> DocResult<Vec<Document>> + Send + Sync>;

pub fn compare(a: &Bson, b: &Bson) -> Ordering {
    compare::compare_bson(a, b)
}

pub fn type_rank(v: &Bson) -> i32 {
    compare::canonical_type_rank(v) as i32
}

/// A parsed filter; `Send + Sync` so cursors can carry it across getMore calls.
pub struct Filter(Matcher);

impl Filter {
    pub fn new(filter: &Document) -> DocResult<Filter> {
        Ok(Filter(Matcher::new(filter)?))
    }
    pub fn matches(&self, doc: &Document) -> bool {
        self.0.matches(doc)
    }
    /// Whether the document matches, and the array index it matched at (positional `$`).
    pub fn matches_with_position(&self, doc: &Document) -> (bool, Option<usize>) {
        self.0.matches_with_position(doc)
    }
}

pub struct Modifier(Update);

impl Modifier {
    pub fn parse(u: &Bson, array_filters: Option<&[Document]>) -> DocResult<Modifier> {
        Ok(Modifier(Update::parse(u, array_filters)?))
    }
    pub fn is_replacement(&self) -> bool {
        self.0.is_replacement()
    }
    /// Applies the update to `doc`; `inserting` is true for the document an upsert creates
    /// (`$setOnInsert`); `pos` is the array index the query matched at (positional `$`).
    /// Returns whether the document changed.
    pub fn apply(
        &self,
        doc: &mut Document,
        inserting: bool,
        pos: Option<usize>,
    ) -> DocResult<bool> {
        self.0.apply_with_position(doc, inserting, pos)
    }
    /// The document an upsert starts from: the filter's equality fields.
    pub fn upsert_seed(&self, filter: &Document) -> DocResult<Document> {
        update::upsert_seed(filter)
    }
}

pub struct Proj(Projection);

impl Proj {
    pub fn parse(p: &Document) -> DocResult<Proj> {
        Ok(Proj(Projection::parse(p)?))
    }
    /// Applies the projection; a positional projection (`a.$`) re-matches `filter` to find the
    /// array index.
    pub fn apply(&self, doc: &Document, filter: Option<&Filter>) -> DocResult<Document> {
        if self.0.needs_position() {
            let pos = filter.and_then(|f| f.matches_with_position(doc).1);
            self.0.apply_with_position(doc, pos)
        } else {
            Ok(self.0.apply(doc))
        }
    }
}

pub struct Sort(SortSpec);

impl Sort {
    pub fn parse(s: &Document) -> DocResult<Sort> {
        Ok(Sort(SortSpec::parse(s)?))
    }
    pub fn compare(&self, a: &Document, b: &Document) -> Ordering {
        self.0.compare(a, b)
    }
}

pub fn run_pipeline(
    pipeline: &[Document],
    input: DocIter,
    lookup: LookupFn,
    interrupt: &Interrupt,
) -> DocResult<DocIter> {
    let out = aggregate::run_pipeline(pipeline, input, &*lookup, interrupt)?;
    Ok(Box::new(out.into_iter().map(Ok)))
}

/// Values at a dotted path with multikey semantics (leaf arrays expanded one level; used by
/// distinct).
pub fn path_values(doc: &Document, path: &str) -> Vec<Bson> {
    path::lookup_path(doc, path).into_iter().cloned().collect()
}
