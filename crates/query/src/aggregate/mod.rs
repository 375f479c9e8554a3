//! The aggregation pipeline over documents.
//!
//! Each stage family has its room: the `Stage` enum (and the stages that hold
//! sub-pipelines) in `stage.rs`; building a stage from its document in `parse.rs`; running a
//! pipeline in `run.rs`; what every stage shares (the document stream, the memory bound, the
//! numbered errors) in `common.rs`; the storage a pipeline reaches in `source.rs`;
//! `$group`/`$sortByCount` and the accumulators in `group.rs`; the `$addFields`/`$unset`/
//! `$unwind` helpers in `fields.rs`; `$lookup`/`$unionWith` in `lookup.rs`; `$graphLookup` in
//! `graph.rs`; `$facet` in `facet.rs`; `$bucket`, `$bucketAuto` and `$sample` in `bucket.rs`;
//! `$setWindowFields` in `window.rs`; `$out`/`$merge` in `out.rs`; `$collStats` in
//! `stats.rs`; `$currentOp` in `current_op.rs`; `$listLocalSessions` in `sessions.rs`; the
//! namespaces the stages name (for authorization and the view graph) in `namespaces.rs`. A
//! stage with a spec struct parses itself (`X::parse`) and runs itself (`X::run`); adding one
//! is a variant in `Stage`, one arm in `parse_stage`, one in `run_stages` and its rule in
//! `namespaces.rs`. Streaming stages are chained lazily; blocking ones (`$group`, `$sort`,
//! `$count`, `$facet`, `$bucketAuto`, ...) consume their input, within their memory budget (`budget.rs`; `$group` spills to disk).

mod bucket;
pub mod budget;
mod common;
mod current_op;
mod facet;
mod fields;
mod graph;
mod group;
mod lookup;
mod namespaces;
mod out;
mod parse;
mod run;
mod script;
mod sessions;
mod source;
mod spill;
mod stage;
mod stats;
#[cfg(test)]
mod tests;
mod window;

pub use common::DocIter;
pub use current_op::CurrentOpSpec;
pub use namespaces::{
    namespace_rule, stage_namespaces, NamespaceRule, Reach, StageNamespace, STAGE_NAMESPACE_RULES,
};
pub use out::{CollectionSink, Namespace};
pub use parse::{parse_update_pipeline, validate_pipeline};
pub use run::{run_pipeline, run_pipeline_scoped};
pub use sessions::ListSessionsSpec;
pub use source::CollectionSource;
