//! mongod's structural limits, enforced wherever a client controls the shape of what the server
//! builds or walks: the nesting of documents and the number of components of a field path.
//!
//! Recursive code in this crate (paths, the matcher, updates, projections, expressions, BSON
//! encoding and decoding in the `bson` crate) recurses at most once per nesting level or path
//! component, so these bounds are what keeps every such walk within a thread's stack. The wire
//! layer refuses messages nested deeper than [`MAX_BSON_DEPTH`] before anything decodes them.

use crate::error::{DocError, DocResult};
use bson::{Bson, Document};

/// BSONDepth's default maximum: no document on the wire or computed by the server is nested
/// deeper than this.
pub const MAX_BSON_DEPTH: usize = 200;
/// The deepest a stored document may be (mongod's `getMaxDepthForUserStorage`: 200 less 20
/// levels kept for the server's own wrapping).
pub const MAX_STORED_DEPTH: usize = 180;
/// The most components a field path may have (mongod's FieldPath: "FieldPath is too long").
pub const MAX_PATH_PARTS: usize = MAX_BSON_DEPTH;
/// The most components of a path in a query filter (mongod: 5729100).
pub const MAX_MATCH_PATH_PARTS: usize = MAX_STORED_DEPTH;

/// Refuses a dotted path with more than [`MAX_PATH_PARTS`] components (Overflow, 15).
pub fn check_path(path: &str) -> DocResult<()> {
    if path_parts(path) > MAX_PATH_PARTS {
        return Err(DocError::with_code(15, "Overflow", "FieldPath is too long"));
    }
    Ok(())
}

/// Refuses a query path with more than [`MAX_MATCH_PATH_PARTS`] components (5729100).
pub fn check_match_path(path: &str) -> DocResult<()> {
    if path_parts(path) > MAX_MATCH_PATH_PARTS {
        return Err(DocError::with_code(
            5729100,
            "Location5729100",
            "FieldPath is too long",
        ));
    }
    Ok(())
}

fn path_parts(path: &str) -> usize {
    path.bytes().filter(|&b| b == b'.').count() + 1
}

/// The nesting depth of a value: 0 for a scalar, 1 for a document or array of scalars, and so
/// on. Walks with an explicit stack (never recursion) and stops as soon as `limit` is passed,
/// so it is safe on any value and cheap on a too-deep one.
pub fn depth_exceeds(v: &Bson, limit: usize) -> bool {
    // Only containers are pushed: a scalar adds no depth.
    let mut stack: Vec<(&Bson, usize)> = Vec::new();
    if is_container(v) {
        stack.push((v, 0));
    }
    while let Some((v, d)) = stack.pop() {
        if d + 1 > limit {
            return true;
        }
        let below = |c: &&Bson| is_container(c);
        match v {
            Bson::Document(doc) => stack.extend(doc.values().filter(below).map(|c| (c, d + 1))),
            Bson::Array(a) => stack.extend(a.iter().filter(below).map(|c| (c, d + 1))),
            Bson::JavaScriptCodeWithScope(c) => {
                stack.extend(c.scope.values().filter(below).map(|c| (c, d + 1)))
            }
            _ => unreachable!("only containers are pushed"),
        }
    }
    false
}

fn is_container(v: &Bson) -> bool {
    matches!(
        v,
        Bson::Document(_) | Bson::Array(_) | Bson::JavaScriptCodeWithScope(_)
    )
}

/// Refuses a document to be stored that is nested deeper than [`MAX_STORED_DEPTH`] (Overflow).
pub fn check_stored_depth(doc: &Document) -> DocResult<()> {
    if doc_depth_exceeds(doc, MAX_STORED_DEPTH) {
        return Err(DocError::with_code(
            15,
            "Overflow",
            format!("cannot store a document nested deeper than {MAX_STORED_DEPTH} levels"),
        ));
    }
    Ok(())
}

/// Refuses a computed document (a pipeline stage's output, an expression's value) nested
/// deeper than [`MAX_BSON_DEPTH`] (Overflow): otherwise a pipeline could build a document no
/// encoder or client could handle.
pub fn check_value_depth(v: &Bson) -> DocResult<()> {
    if depth_exceeds(v, MAX_BSON_DEPTH) {
        return Err(DocError::with_code(
            15,
            "Overflow",
            format!("a computed value is nested deeper than {MAX_BSON_DEPTH} levels"),
        ));
    }
    Ok(())
}

/// [`depth_exceeds`] for a document without cloning it into a `Bson`.
pub fn doc_depth_exceeds(doc: &Document, limit: usize) -> bool {
    if limit == 0 {
        return true;
    }
    doc.values().any(|v| depth_exceeds(v, limit - 1))
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    fn nested(levels: usize) -> Document {
        let mut d = doc! {"x": 1};
        for _ in 1..levels {
            d = doc! {"a": d};
        }
        d
    }

    #[test]
    fn depth_is_counted_without_recursion() {
        assert!(!doc_depth_exceeds(&nested(180), 180));
        assert!(doc_depth_exceeds(&nested(181), 180));
        assert!(check_stored_depth(&nested(180)).is_ok());
        assert_eq!(check_stored_depth(&nested(181)).unwrap_err().code, 15);
        assert!(!depth_exceeds(&Bson::Int32(1), 0));
        assert!(depth_exceeds(&bson::bson!([[1]]), 1));
        assert!(!depth_exceeds(&bson::bson!([[1]]), 2));
    }

    #[test]
    fn paths() {
        let p = vec!["a"; 200].join(".");
        assert!(check_path(&p).is_ok());
        assert_eq!(check_path(&format!("{p}.a")).unwrap_err().code, 15);
        let q = vec!["a"; 180].join(".");
        assert!(check_match_path(&q).is_ok());
        assert_eq!(
            check_match_path(&format!("{q}.a")).unwrap_err().code,
            5729100
        );
    }
}
