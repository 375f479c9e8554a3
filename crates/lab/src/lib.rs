//! flashdoc's lab (being written).
pub mod plot;
