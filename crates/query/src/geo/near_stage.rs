//! The `$geoNear` aggregation stage's options (mongod 7/8): `near`, `distanceField`,
//! `spherical`, `maxDistance`, `minDistance`, `query`, `includeLocs`, `distanceMultiplier`,
//! `key`. The storage crate runs it as a `$nearSphere` scan of a 2dsphere index; this is the
//! spec and its output fields. Its parsing, which checks `query` with the matcher (and the
//! matcher parses geo predicates), is in `crate::geo_near`.

use super::NearQuery;
use crate::error::DocResult;
use bson::{doc, Bson, Document};

#[derive(Clone, Debug)]
pub struct GeoNearSpec {
    pub near: NearQuery,
    /// `near` as given, for the `$nearSphere` filter the scan runs.
    pub(crate) near_arg: Bson,
    pub(crate) min_arg: Option<Bson>,
    pub(crate) max_arg: Option<Bson>,
    pub distance_field: String,
    pub include_locs: Option<String>,
    pub multiplier: f64,
    /// The field holding the geometries (None: the collection's one 2dsphere index's).
    pub key: Option<String>,
    pub query: Document,
    /// `spherical`: `$nearSphere` semantics even on a 2d index.
    pub spherical: bool,
}

impl GeoNearSpec {
    /// `{$nearSphere: near, $minDistance, $maxDistance}` for the scan's filter.
    pub(crate) fn near_filter_ops(&self) -> Document {
        let near = match &self.near_arg {
            Bson::Document(d) if d.contains_key("type") => {
                Bson::Document(doc! {"$geometry": d.clone()})
            }
            other => other.clone(),
        };
        let op = if self.near.flat {
            "$near"
        } else {
            "$nearSphere"
        };
        let mut ops = doc! {op: near};
        if let Some(m) = &self.min_arg {
            ops.insert("$minDistance", m.clone());
        }
        if let Some(m) = &self.max_arg {
            ops.insert("$maxDistance", m.clone());
        }
        ops
    }

    /// Whether `near` is a legacy pair (not GeoJSON).
    fn legacy(&self) -> bool {
        matches!(&self.near_arg, Bson::Array(_))
            || matches!(&self.near_arg, Bson::Document(d) if !d.contains_key("type"))
    }

    /// Sets the stage's semantics for the index it runs on: flat (`$near`) over a 2d index
    /// (`over_2d`) when `spherical` is false and `near` is a legacy pair, as mongod does —
    /// distances on the plane, in the coordinates' units — else `$nearSphere`.
    pub fn set_flat(&mut self, over_2d: bool) -> DocResult<()> {
        let flat = over_2d && !self.spherical && self.legacy();
        self.near.flat = flat;
        let op = if flat { "$near" } else { "$nearSphere" };
        match super::GeoQuery::parse_near(op, &self.near_filter_ops())? {
            super::GeoQuery::Near(n) => self.near = n,
            _ => unreachable!("parse_near returns Near"),
        }
        Ok(())
    }

    /// The find filter of the stage's scan: `query` and the `$nearSphere` on `key`.
    pub fn filter(&self, key: &str) -> Document {
        let near = doc! {key: self.near_filter_ops()};
        if self.query.is_empty() {
            near
        } else {
            doc! {"$and": [self.query.clone(), near]}
        }
    }

    /// Sets the stage's output fields on a document found at `radians` from the point.
    pub fn annotate(&self, doc: &mut Document, key: &str, radians: f64) -> DocResult<()> {
        let dist = self.near.in_units(radians) * self.multiplier;
        crate::path::set_path(
            doc,
            &crate::path::split_path(&self.distance_field)?,
            Bson::Double(dist),
        )?;
        if let Some(locs) = &self.include_locs {
            let loc = nearest_location(doc, key, &self.near);
            crate::path::set_path(doc, &crate::path::split_path(locs)?, loc)?;
        }
        Ok(())
    }
}

/// The location the distance was measured to: the value at `key`, or the nearest element
/// of an array of locations.
fn nearest_location(doc: &Document, key: &str, near: &NearQuery) -> Bson {
    let mut best: Option<(f64, Bson)> = None;
    for r in crate::path::traverse_path(doc, key) {
        let Some(v) = r.value else { continue };
        let cands: Vec<&Bson> = match v {
            Bson::Array(a) if super::shape::legacy_pair(v).is_none() => a.iter().collect(),
            other => vec![other],
        };
        for c in cands {
            if let Some(d) = near.distance(c) {
                if best.as_ref().is_none_or(|b| d < b.0) {
                    best = Some((d, c.clone()));
                }
            }
        }
    }
    best.map(|b| b.1).unwrap_or(Bson::Null)
}
