//! Geospatial queries with mongod's 2dsphere semantics: geometries on a sphere of radius
//! 6378.1 km with great-circle edges ([`shape`], [`sphere`]), the S2-style cells the
//! 2dsphere index keys are made of ([`cell`]), and the query operators `$geoWithin`,
//! `$geoIntersects`, `$near` and `$nearSphere` ([`GeoQuery`]).
//!
//! Legacy `$box`, `$polygon` and `$center` are flat (2d) shapes in mongod: they are evaluated
//! here on the plane of the coordinates, for legacy points only; a `2d` index ([`flat`])
//! bounds their scans. `$near` with a legacy pair is flat too (distances on the plane) and
//! needs a 2d index, as in mongod.
pub mod cell;
pub mod flat;
mod near_stage;
pub mod shape;
pub mod sphere;

mod query;

pub use near_stage::GeoNearSpec;
pub use query::{stored_shapes, FlatRegion, GeoQuery, NearQuery};

#[cfg(test)]
mod tests;
