//! Geospatial queries with mongod's 2dsphere semantics: geometries on a sphere of radius
//! 6378.1 km with great-circle edges ([`shape`], [`sphere`]), the S2-style cells the
//! 2dsphere index keys are made of ([`cell`]), and the query operators `$geoWithin`,
//! `$geoIntersects`, `$near` and `$nearSphere` ([`GeoQuery`]).
//!
//! Legacy `$box`, `$polygon` and `$center` are flat (2d) shapes in mongod: they are evaluated
//! here on the plane of longitude/latitude, for legacy points only, without an index (flashdoc
//! has no 2d index). `$near` with a legacy pair is a 2d-index query and is refused by the
//! planner, as mongod refuses it without a 2d index.
pub mod cell;
mod near_stage;
pub mod shape;
pub mod sphere;

mod query;

pub use near_stage::GeoNearSpec;
pub use query::{stored_shapes, FlatRegion, GeoQuery, NearQuery};

#[cfg(test)]
mod tests;
