//! `$facet`: several sub-pipelines over the same input, their outputs as arrays of one document
//! (the "page plus total" pattern: `{data: [{$skip}, {$limit}], total: [{$count: "n"}]}`).

use bson::{Bson, Document};

use super::common::{check_output_name, stage_err, DocIter, Memory};
use super::parse::parse_sub_pipeline;
use super::run::run_stages;
use super::source::Env;
use super::stage::Facet;
use crate::compare::type_name;
use crate::error::DocResult;

/// Stages mongod refuses inside a `$facet` sub-pipeline (40600): they write, must come first,
/// or are themselves a `$facet`.
const NOT_IN_FACET: &[&str] = &[
    "$facet",
    "$out",
    "$merge",
    "$collStats",
    "$indexStats",
    "$geoNear",
    "$planCacheStats",
    "$changeStream",
    "$currentOp",
    "$search",
    "$searchMeta",
];

/// mongod's internalQueryFacetMaxOutputDocSizeBytes: the document `$facet` builds may not be
/// larger than this (4031700), so one stage cannot gather a whole collection into memory twice.
const MAX_FACET_OUTPUT_BYTES: usize = 100 * 1024 * 1024;

impl Facet {
    pub(super) fn parse(arg: &Bson) -> DocResult<Facet> {
        let spec = match arg {
            Bson::Document(d) if !d.is_empty() => d,
            other => {
                return Err(stage_err(
                    40169,
                    format!(
                    "the $facet specification must be a non-empty object, but found: $facet: {}",
                    crate::compare::shell_repr(other)
                ),
                ))
            }
        };
        let mut facets = Vec::with_capacity(spec.len());
        for (name, v) in spec {
            check_output_name(name)?;
            let Bson::Array(stages) = v else {
                return Err(stage_err(
                    40170,
                    format!(
                        "arguments to $facet must be arrays, {name} is type {}",
                        type_name(v)
                    ),
                ));
            };
            for s in stages {
                match s {
                    Bson::Document(sd) if !sd.is_empty() => {
                        let stage = sd.keys().next().expect("non-empty");
                        if NOT_IN_FACET.contains(&stage.as_str()) {
                            return Err(stage_err(
                                40600,
                                format!("{stage} is not allowed to be used within a $facet stage"),
                            ));
                        }
                    }
                    other => {
                        return Err(stage_err(
                            40171,
                            format!(
                                "elements of arrays in $facet spec must be non-empty objects, {name} argument contained an element of type {}: {}",
                                type_name(other),
                                crate::compare::shell_repr(other)
                            ),
                        ))
                    }
                }
            }
            facets.push((name.clone(), parse_sub_pipeline(stages, "$facet")?));
        }
        Ok(Facet { facets })
    }

    /// Buffers the input once and runs every sub-pipeline over it; one output document even when
    /// the input is empty.
    pub(super) fn run(self, input: DocIter, env: Env) -> DocResult<DocIter> {
        let docs = Memory::new("$facet").collect(input)?;
        let mut out = Document::new();
        let mut bytes = 0usize;
        for (name, stages) in self.facets {
            let results = run_stages(stages, Box::new(docs.clone().into_iter().map(Ok)), env)?;
            for d in &results {
                bytes += bson::to_vec(d).map(|b| b.len()).unwrap_or(0);
                if bytes > MAX_FACET_OUTPUT_BYTES {
                    return Err(stage_err(
                        4031700,
                        format!(
                            "document constructed by $facet is {bytes} bytes, which exceeds the limit of {MAX_FACET_OUTPUT_BYTES} bytes"
                        ),
                    ));
                }
            }
            out.insert(
                name,
                // A document's text score is metadata: it does not become a field of the
                // facet's output.
                Bson::Array(
                    results
                        .into_iter()
                        .map(|mut d| {
                            d.remove(crate::text::SCORE_FIELD);
                            Bson::Document(d)
                        })
                        .collect(),
                ),
            );
        }
        Ok(Box::new(std::iter::once(Ok(out))))
    }
}
