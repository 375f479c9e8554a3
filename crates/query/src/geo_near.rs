//! Parsing the `$geoNear` stage's options into a [`GeoNearSpec`]. Apart from the spec
//! (`geo/near_stage.rs`) because its `query` is checked with the matcher, which itself parses
//! the geo predicates.

use bson::{Bson, Document};

use crate::error::{DocError, DocResult};
use crate::geo::{GeoNearSpec, NearQuery};
use crate::matcher::Matcher;

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
                center: crate::geo::sphere::V3::new(1.0, 0.0, 0.0),
                min: 0.0,
                max: std::f64::consts::PI,
                metres: true,
                flat: false,
                point: (0.0, 0.0),
            },
            spherical: false,
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
                // `spherical: false` asks for $near semantics: spherical on a 2dsphere index,
                // flat on a 2d index ([`GeoNearSpec::use_flat`]).
                "spherical" => {
                    spec.spherical = match v {
                        Bson::Boolean(b) => *b,
                        other => crate::compare::Num::of(other).is_some_and(|n| n.as_f64() != 0.0),
                    }
                }
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
        // Checked as flat if it may run flat (a 2d index's points need not be longitudes and
        // latitudes); the storage crate settles it once it knows the index.
        spec.set_flat(true)?;
        Ok(spec)
    }
}
