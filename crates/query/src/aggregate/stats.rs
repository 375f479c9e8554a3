//! `$collStats`: the pipeline's own collection's statistics, as one document (the first
//! stage only; what it reports comes from the storage side's `collStats`).

use bson::{Bson, Document};

use super::common::{stage_err, DocIter};
use super::source::Env;
use crate::compare::{type_name, Num};
use crate::error::{DocError, DocResult};

#[derive(Clone, Debug)]
pub(super) struct CollStats {
    /// `storageStats: {scale}`.
    storage: Option<i64>,
    count: bool,
}

fn not_supported(what: &str) -> DocError {
    DocError::with_code(
        238,
        "NotImplemented",
        format!("$collStats {what} is not supported by flashdoc"),
    )
}

impl CollStats {
    pub(super) fn parse(arg: &Bson) -> DocResult<CollStats> {
        let Bson::Document(d) = arg else {
            return Err(stage_err(
                5447000,
                format!(
                    "$collStats must take a nested object but found: {}",
                    type_name(arg)
                ),
            ));
        };
        let mut stats = CollStats {
            storage: None,
            count: false,
        };
        for (k, v) in d {
            match (k.as_str(), v) {
                ("storageStats", Bson::Document(s)) => {
                    let mut scale = 1;
                    for (sk, sv) in s {
                        match sk.as_str() {
                            "scale" => {
                                let n =
                                    Num::of(sv).map(|n| n.as_f64().trunc()).ok_or_else(|| {
                                        DocError::type_mismatch("scale has to be a number")
                                    })?;
                                if n < 1.0 {
                                    return Err(stage_err(51024, "scale has to be >= 1"));
                                }
                                scale = n.min(i64::MAX as f64) as i64;
                            }
                            other => {
                                return Err(not_supported(&format!(
                                    "storageStats option '{other}'"
                                )))
                            }
                        }
                    }
                    stats.storage = Some(scale);
                }
                ("count", Bson::Document(c)) if c.is_empty() => stats.count = true,
                ("storageStats" | "count", other) => {
                    return Err(DocError::type_mismatch(format!(
                    "BSON field '$collStats.{k}' is the wrong type '{}', expected type 'object'",
                    type_name(other)
                )))
                }
                // flashdoc keeps no per-collection latency histograms or query counters.
                ("latencyStats" | "queryExecStats", _) => return Err(not_supported(k)),
                (other, _) => {
                    return Err(stage_err(
                        40415,
                        format!("BSON field '$collStats.{other}' is an unknown field."),
                    ))
                }
            }
        }
        Ok(stats)
    }

    /// One document: `ns`, `localTime`, and the parts asked for. The input (the collection's
    /// documents) is not read.
    pub(super) fn run(self, _input: DocIter, env: Env) -> DocResult<DocIter> {
        let stats = env
            .source
            .collection_stats(self.storage.unwrap_or(1))
            .unwrap_or_else(|| {
                Err(DocError::illegal_operation(
                    "$collStats has no collection to report on in this pipeline",
                ))
            })?;
        let mut out = Document::new();
        out.insert("ns", stats.get("ns").cloned().unwrap_or(Bson::Null));
        out.insert("localTime", bson::DateTime::now());
        if self.count {
            out.insert(
                "count",
                stats.get("count").cloned().unwrap_or(Bson::Int32(0)),
            );
        }
        if self.storage.is_some() {
            let mut storage = stats;
            storage.remove("ok");
            out.insert("storageStats", storage);
        }
        Ok(Box::new(std::iter::once(Ok(out))))
    }
}
