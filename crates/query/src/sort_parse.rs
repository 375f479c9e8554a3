//! Parsing a sort specification into a [`SortSpec`]. Apart from the order itself (`sort.rs`)
//! because a `{$meta: "textScore"}` key is checked by the expression parser, and expressions
//! (`$sortArray`) sort with a `SortSpec`.

use bson::{Bson, Document};

use crate::compare::Num;
use crate::error::{DocError, DocResult};
use crate::sort::SortSpec;

fn bad_order() -> DocError {
    DocError::with_code(
        15975,
        "Location15975",
        "$sort key ordering must be 1 (for ascending) or -1 (for descending)",
    )
}

impl SortSpec {
    /// Parses a sort document. Each value must be 1 or -1 (any numeric type); an empty document
    /// is an empty spec (no ordering); `{$meta: "textScore"}` sorts by the text score, descending.
    pub fn parse(s: &Document) -> DocResult<SortSpec> {
        let mut fields = Vec::new();
        for (k, v) in s {
            crate::limits::check_path(k)?;
            if k.is_empty() {
                return Err(DocError::with_code(
                    40352,
                    "Location40352",
                    "FieldPath cannot be constructed with empty string",
                ));
            }
            let dir = match Num::of(v) {
                Some(n) if n.as_f64() == 1.0 => 1,
                Some(n) if n.as_f64() == -1.0 => -1,
                Some(_) => return Err(bad_order()),
                None => match v {
                    Bson::Document(d) if d.contains_key("$meta") => {
                        // `{$meta: "textScore"}` sorts by the text score, highest first.
                        crate::expr::parse_expr(v)?;
                        if d.len() != 1 {
                            return Err(DocError::bad_value(
                                "Cannot have additional keys in a $meta sort specification",
                            ));
                        }
                        fields.push((crate::text::SCORE_FIELD.to_string(), -1));
                        continue;
                    }
                    _ => {
                        return Err(DocError::with_code(
                            15974,
                            "Location15974",
                            "Illegal key in $sort specification: the values must be 1 (for ascending) or -1 (for descending)",
                        ))
                    }
                },
            };
            fields.push((k.clone(), dir));
        }
        Ok(SortSpec { fields })
    }
}
