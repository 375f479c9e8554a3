//! flashdoc's document layer (being written).
pub mod error;
pub use error::{DocError, DocResult};
