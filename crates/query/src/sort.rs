//! Sort specifications and MongoDB's sort order on documents. Parsing a specification, which
//! checks a `$meta` key with the expression parser, is in `sort_parse.rs`: the expression
//! operator `$sortArray` sorts with a [`SortSpec`] too.
//!
//! A field holding an array sorts by its smallest element ascending and its largest element
//! descending; an empty array sorts before null; a missing field sorts as null.

use std::cmp::Ordering;

use bson::{Bson, Document};

use crate::compare::compare_bson;
use crate::path::traverse_path;

/// A parsed sort specification (`{a: 1, b: -1}`).
#[derive(Clone, Debug, PartialEq)]
pub struct SortSpec {
    pub fields: Vec<(String, i32)>,
}

impl SortSpec {
    /// The sort key of one field: the smallest reachable value ascending, the largest
    /// descending (array elements count individually; an empty array counts as undefined,
    /// which sorts before null; missing counts as null).
    pub fn key_for(doc: &Document, path: &str, dir: i32) -> Bson {
        let mut best: Option<Bson> = None;
        for r in traverse_path(doc, path) {
            let mut consider = |v: &Bson| {
                let better = match &best {
                    None => true,
                    Some(b) => {
                        let o = compare_bson(v, b);
                        if dir > 0 {
                            o == Ordering::Less
                        } else {
                            o == Ordering::Greater
                        }
                    }
                };
                if better {
                    best = Some(v.clone());
                }
            };
            match r.value {
                None => consider(&Bson::Null),
                Some(Bson::Array(a)) if a.is_empty() => consider(&Bson::Undefined),
                Some(Bson::Array(a)) => a.iter().for_each(&mut consider),
                Some(v) => consider(v),
            }
        }
        best.unwrap_or(Bson::Null)
    }

    /// The sort keys of a document, one per field.
    pub fn keys(&self, doc: &Document) -> Vec<Bson> {
        self.fields
            .iter()
            .map(|(p, d)| Self::key_for(doc, p, *d))
            .collect()
    }

    /// Compares precomputed keys (from [`SortSpec::keys`]).
    pub fn compare_keys(&self, a: &[Bson], b: &[Bson]) -> Ordering {
        for ((_, dir), (x, y)) in self.fields.iter().zip(a.iter().zip(b.iter())) {
            let o = compare_bson(x, y);
            let o = if *dir < 0 { o.reverse() } else { o };
            if o != Ordering::Equal {
                return o;
            }
        }
        Ordering::Equal
    }

    /// Compares two documents under this sort.
    pub fn compare(&self, a: &Document, b: &Document) -> Ordering {
        self.compare_keys(&self.keys(a), &self.keys(b))
    }

    /// Stable-sorts documents (keys computed once per document).
    pub fn sort(&self, docs: &mut Vec<Document>) {
        if self.fields.is_empty() {
            return;
        }
        let mut keyed: Vec<(Vec<Bson>, Document)> =
            docs.drain(..).map(|d| (self.keys(&d), d)).collect();
        keyed.sort_by(|a, b| self.compare_keys(&a.0, &b.0));
        docs.extend(keyed.into_iter().map(|(_, d)| d));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use bson::doc;

    fn sorted(spec: Document, docs: Vec<Document>) -> Vec<i32> {
        let s = SortSpec::parse(&spec).unwrap();
        let mut docs = docs;
        s.sort(&mut docs);
        docs.iter().map(|d| d.get_i32("_id").unwrap()).collect()
    }

    #[test]
    fn parse() {
        let s = SortSpec::parse(&doc! {"a": 1, "b": -1.0, "c": Bson::Int64(1)}).unwrap();
        assert_eq!(
            s.fields,
            vec![("a".into(), 1), ("b".into(), -1), ("c".into(), 1)]
        );
        assert_eq!(SortSpec::parse(&doc! {"a": 2}).unwrap_err().code, 15975);
        assert_eq!(SortSpec::parse(&doc! {"a": "x"}).unwrap_err().code, 15974);
        assert!(SortSpec::parse(&doc! {"a": {"$meta": "textScore"}}).is_ok());
        assert!(SortSpec::parse(&doc! {"a": {"$meta": "bogus"}}).is_err());
        assert!(SortSpec::parse(&doc! {}).unwrap().fields.is_empty());
    }

    #[test]
    fn mixed_types_missing_and_arrays() {
        let docs = vec![
            doc! {"_id": 1, "a": "x"},
            doc! {"_id": 2, "a": 5},
            doc! {"_id": 3},
            doc! {"_id": 4, "a": null},
            doc! {"_id": 5, "a": [3, 10]},
            doc! {"_id": 6, "a": []},
            doc! {"_id": 7, "a": {"b": 1}},
            doc! {"_id": 8, "a": 1.5},
        ];
        // Ascending: [] (undefined) < null/missing (stable) < 1.5 < [3,10] (min 3) < 5 < "x" < {}.
        assert_eq!(
            sorted(doc! {"a": 1}, docs.clone()),
            vec![6, 3, 4, 8, 5, 2, 1, 7]
        );
        // Descending: [3,10] uses its max, 10.
        assert_eq!(
            sorted(doc! {"a": -1}, docs.clone()),
            vec![7, 1, 5, 2, 8, 3, 4, 6]
        );
    }

    #[test]
    fn compound_and_dotted() {
        let docs = vec![
            doc! {"_id": 1, "a": 1, "b": {"c": 2}},
            doc! {"_id": 2, "a": 1, "b": {"c": 3}},
            doc! {"_id": 3, "a": 0, "b": {"c": 1}},
            doc! {"_id": 4, "a": 1, "b": [{"c": 0}, {"c": 9}]},
        ];
        assert_eq!(
            sorted(doc! {"a": -1, "b.c": 1}, docs.clone()),
            vec![4, 1, 2, 3]
        );
        assert_eq!(
            sorted(doc! {"a": -1, "b.c": -1}, docs.clone()),
            vec![4, 2, 1, 3]
        );
        let s = SortSpec::parse(&doc! {"a": 1}).unwrap();
        assert_eq!(s.compare(&docs[2], &docs[0]), Ordering::Less);
        assert_eq!(s.compare(&docs[0], &docs[1]), Ordering::Equal);
    }
}
