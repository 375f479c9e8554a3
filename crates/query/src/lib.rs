//! flashdoc's query language over BSON documents: the comparison order, dotted paths, the
//! matcher, update operators, projection, sort, expressions, aggregation stages, collation and
//! `$jsonSchema` (docs/DESIGN.md, "query"). Nothing here touches storage: the one stage that
//! reads another collection (`$lookup`) reaches it through [`aggregate::CollectionSource`], which
//! the storage crate (`docdb`) implements.
pub mod aggregate;
pub mod collation;
pub mod compare;
pub mod error;
pub mod expr;
pub mod geo;
mod geo_near;
pub mod hash;
pub mod interrupt;
pub mod js;
pub mod jsonschema;
pub mod limits;
pub mod matcher;
pub mod path;
pub mod projection;
pub mod regex;
pub mod sort;
mod sort_parse;
pub mod text;
pub mod update;
pub mod vars;
pub use error::{DocError, DocResult};
pub use interrupt::Interrupt;
