//! flashdoc's document layer (being written).
pub mod error;
pub mod aggregate;
pub mod compare;
pub mod expr;
pub mod matcher;
pub mod path;
pub mod projection;
pub mod sort;
pub mod update;
pub use error::{DocError, DocResult};
