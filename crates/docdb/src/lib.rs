//! flashdoc's document layer: catalog, collections, `_id` and secondary indexes, queries,
//! updates, aggregation, over the engine's KV interface (docs/docdb.md).
pub mod aggregate;
pub mod compare;
pub mod error;
pub mod expr;
pub mod hash;
pub mod jsonschema;
pub mod matcher;
pub mod path;
pub mod projection;
pub mod scope;
pub mod sort;
pub mod update;
pub mod validation;
pub use error::{DocError, DocResult};
pub mod catalog;
pub mod collation;
pub mod collection;
pub mod config;
pub mod cursor;
pub mod db;
pub mod index;
pub mod interop;
pub mod interrupt;
pub mod keystring;
pub mod limits;
pub mod planner;
pub use config::{DocDbConfig, StorageSettings};
pub use cursor::DocCursor;
pub use db::{
    AggregateOpts, CollectionInfo, CreateIndexesOutcome, DatabaseInfo, DeleteStatement, DocDb,
    FindAndModify, FindAndModifyOutcome, FindQuery, UpdateStatement, WriteError, WriteOpts,
    WriteOutcome,
};
pub use interrupt::Interrupt;
