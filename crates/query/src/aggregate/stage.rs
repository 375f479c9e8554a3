//! The parsed pipeline: the [`Stage`] enum, and the stages that hold sub-pipelines
//! (`$facet`, `$lookup`, `$unionWith`), declared beside the enum they recurse through. Each
//! stage's parsing and running live in its own file (`facet.rs`, `lookup.rs`, ...); the
//! parser that builds a `Stage` from its document is `parse.rs`.

use super::bucket::{Bucket, BucketAuto, Sample};
use super::current_op::CurrentOpSpec;
use super::graph::GraphLookup;
use super::group::Acc;
use super::out::{Merge, Out};
use super::sessions::ListSessionsSpec;
use super::stats::CollStats;
use super::window::SetWindowFields;
use crate::expr::Expr;
use crate::matcher::Matcher;
use crate::projection::Projection;
use crate::sort::SortSpec;

#[derive(Clone, Debug)]
pub(super) enum Stage {
    Match(Matcher),
    Project(Projection),
    AddFields(Vec<(Vec<String>, Expr)>),
    Unset(Vec<Vec<String>>),
    Group(Expr, Vec<(String, Acc, Expr)>),
    Sort(SortSpec),
    Skip(u64),
    Limit(u64),
    Unwind {
        path: Vec<String>,
        index: Option<String>,
        preserve: bool,
    },
    Count(String),
    Lookup(Lookup),
    UnionWith(UnionWith),
    Facet(Facet),
    Bucket(Bucket),
    BucketAuto(BucketAuto),
    Sample(Sample),
    GraphLookup(GraphLookup),
    SetWindowFields(SetWindowFields),
    CollStats(CollStats),
    /// `$geoNear`: run by the storage crate as the pipeline's source (first stage only).
    GeoNear,
    CurrentOp(CurrentOpSpec),
    /// `$listLocalSessions`: the server's logical sessions (first stage of `{aggregate: 1}`).
    ListLocalSessions(ListSessionsSpec),
    /// `$documents`: the documents of an array expression (first stage of `{aggregate: 1}`).
    Documents(Expr),
    Out(Out),
    Merge(Merge),
    ReplaceRoot(Expr),
    SortByCount(Expr),
}

impl Stage {
    /// A `$match` with `$text` (only the first stage of a pipeline may be one: the text index
    /// scan answers it).
    pub(super) fn is_text_match(&self) -> bool {
        matches!(self, Stage::Match(m) if m.text().is_some())
    }

    /// The name of a stage that writes (`$out`, `$merge`).
    pub(super) fn writes(&self) -> Option<&'static str> {
        match self {
            Stage::Out(_) => Some("$out"),
            Stage::Merge(_) => Some("$merge"),
            _ => None,
        }
    }
}

#[derive(Clone, Debug)]
pub(super) struct Facet {
    pub(super) facets: Vec<(String, Vec<Stage>)>,
}

#[derive(Clone, Debug)]
pub(super) struct Lookup {
    pub(super) from: String,
    /// `localField` and `foreignField`, when given.
    pub(super) equality: Option<(Vec<String>, String)>,
    pub(super) as_: Vec<String>,
    /// `let`: variables evaluated on each input document, read as `$$name` in `pipeline`.
    pub(super) let_: Vec<(String, Expr)>,
    pub(super) pipeline: Option<Vec<Stage>>,
}

/// `$unionWith`: the input, then another collection's documents through an optional pipeline.
#[derive(Clone, Debug)]
pub(super) struct UnionWith {
    pub(super) coll: String,
    pub(super) pipeline: Vec<Stage>,
}
