//! The `$geoNear` aggregation stage's options (mongod 7/8): `near`, `distanceField`,
//! `spherical`, `maxDistance`, `minDistance`, `query`, `includeLocs`, `distanceMultiplier`,
//! `key`. The storage crate runs it as a `$nearSphere` scan of a 2dsphere index; this is the
//! parsing and the output fields.

use super::{GeoQuery, NearQuery};
use crate::error::{DocError, DocResult};
use crate::matcher::Matcher;
use bson::{doc, Bson, Document};

#[derive(Clone, Debug)]
pub struct GeoNearSpec {
    pub near: NearQuery,
    /// `near` as given, for the `$nearSphere` filter the scan runs.
    near_arg: Bson,
    min_arg: Option<Bson>,
    max_arg: Option<Bson>,
    pub distance_field: String,
    pub include_locs: Option<String>,
    pub multiplier: f64,
    /// The field holding the geometries (None: the collection's one 2dsphere index's).
    pub key: Option<String>,
    pub query: Document,
}

fn bad(msg: impl Into<String>) -> DocError {
    DocError::bad_value(msg)
}

fn field_name(v: &Bson, what: &str) -> DocResult<String> {
    match v {
        Bson::String(s) if !s.is_empty() && !s.starts_with('$') => Ok(s.clone()),
        Bson::String(_) => Err(bad(format!(
            "$geoNear parameter '{what}' must be a non-empty field path not starting with '$'"
        ))),
        _ => Err(DocError::type_mismatch(format!(
            "$geoNear requires that '{what}' option is a String"
        ))),
    }
}

impl GeoNearSpec {
    pub fn parse(arg: &Bson) -> DocResult<GeoNearSpec> {
        let Bson::Document(d) = arg else {
            return Err(DocError::failed_to_parse(
                "$geoNear only takes an object as an argument",
            ));
        };
        let mut near_arg = None;
        let mut distance_field = None;
        let mut spec = GeoNearSpec {
            near: NearQuery {
                center: super::sphere::V3::new(1.0, 0.0, 0.0),
                min: 0.0,
                max: std::f64::consts::PI,
                metres: true,
                flat: false,
            },
            near_arg: Bson::Null,
            min_arg: None,
            max_arg: None,
            distance_field: String::new(),
            include_locs: None,
            multiplier: 1.0,
            key: None,
            query: Document::new(),
        };
        for (k, v) in d {
            match k.as_str() {
                "near" => near_arg = Some(v.clone()),
                "distanceField" => distance_field = Some(field_name(v, "distanceField")?),
                "includeLocs" => spec.include_locs = Some(field_name(v, "includeLocs")?),
                "key" => spec.key = Some(field_name(v, "key")?),
                // Every 2dsphere answer is spherical; `spherical: false` asks for $near
                // semantics, which on a 2dsphere index are the same (mongod's documentation).
                "spherical" => {}
                "maxDistance" => spec.max_arg = Some(v.clone()),
                "minDistance" => spec.min_arg = Some(v.clone()),
                "distanceMultiplier" => {
                    spec.multiplier = crate::compare::Num::of(v)
                        .map(|n| n.as_f64())
                        .filter(|m| *m >= 0.0)
                        .ok_or_else(|| bad("distanceMultiplier must be a non-negative number"))?;
                }
                "query" => match v {
                    Bson::Document(q) => {
                        Matcher::new(q)?;
                        spec.query = q.clone();
                    }
                    _ => return Err(DocError::type_mismatch("query must be an object")),
                },
                other => {
                    return Err(bad(format!("Unknown argument to $geoNear: {other}")));
                }
            }
        }
        spec.near_arg =
            near_arg.ok_or_else(|| bad("$geoNear requires a 'near' option as an Array"))?;
        spec.distance_field = distance_field
            .ok_or_else(|| bad("$geoNear requires a 'distanceField' option as a String"))?;
        match GeoQuery::parse_near("$nearSphere", &spec.near_filter_ops())? {
            GeoQuery::Near(n) => spec.near = n,
            _ => unreachable!("parse_near returns Near"),
        }
        Ok(spec)
    }

    /// `{$nearSphere: near, $minDistance, $maxDistance}` for the scan's filter.
    fn near_filter_ops(&self) -> Document {
        let near = match &self.near_arg {
            Bson::Document(d) if d.contains_key("type") => {
                Bson::Document(doc! {"$geometry": d.clone()})
            }
            other => other.clone(),
        };
        let mut ops = doc! {"$nearSphere": near};
        if let Some(m) = &self.min_arg {
            ops.insert("$minDistance", m.clone());
        }
        if let Some(m) = &self.max_arg {
            ops.insert("$maxDistance", m.clone());
        }
        ops
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
