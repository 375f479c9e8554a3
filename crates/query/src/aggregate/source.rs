//! The storage a pipeline reaches ([`CollectionSource`]), and what running a stage needs
//! besides its input ([`Env`]).

use bson::Document;

use super::current_op::CurrentOpSpec;
use super::out::CollectionSink;
use super::sessions::ListSessionsSpec;
use crate::error::DocResult;
use crate::interrupt::Interrupt;
use crate::vars::Scope;

/// What a pipeline needs from storage, and the only way `query` reaches it: a stage that reads
/// another collection (`$lookup`, `$unionWith`) asks its source, and the storage side (docdb's
/// `DocDb`, the router) decides how to read it. Stages that write (`$out`, `$merge`) reach its
/// [`CollectionSink`], so the pipeline stays BSON-only.
pub trait CollectionSource {
    /// Every document of collection `name` in the pipeline's database.
    fn read_collection(&self, name: &str) -> DocResult<Vec<Document>>;

    /// Where `$out` and `$merge` write; `None` where a pipeline cannot write (a router's
    /// merge, an update's pipeline), and those stages are refused.
    fn sink(&self) -> Option<&dyn CollectionSink> {
        None
    }

    /// `$collStats`: the pipeline's own collection's statistics as `collStats` reports them
    /// (sizes divided by `scale`); `None` where the pipeline has no collection of its own.
    fn collection_stats(&self, _scale: i64) -> Option<DocResult<Document>> {
        None
    }

    /// `$currentOp`: the server's operations in progress as `currentOp` describes them;
    /// `None` where the pipeline runs without a server (the stage is then refused).
    fn current_ops(&self, _spec: &CurrentOpSpec) -> Option<DocResult<Vec<Document>>> {
        None
    }

    /// `$listLocalSessions`: the logical sessions the server has seen, as mongod lists them;
    /// `None` where the pipeline runs without a server (the stage is then refused).
    fn local_sessions(&self, _spec: &ListSessionsSpec) -> Option<DocResult<Vec<Document>>> {
        None
    }
}

impl<F: Fn(&str) -> DocResult<Vec<Document>>> CollectionSource for F {
    fn read_collection(&self, name: &str) -> DocResult<Vec<Document>> {
        self(name)
    }
}

/// What running a stage needs besides its input: the storage it reads, writes or reports on,
/// the operation's interrupt, and the command's `let` variables its expressions read.
#[derive(Clone, Copy)]
pub(super) struct Env<'a> {
    pub(super) source: &'a dyn CollectionSource,
    pub(super) interrupt: &'a Interrupt,
    pub(super) scope: &'a Scope,
}
