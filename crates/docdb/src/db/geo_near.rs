//! The `$geoNear` stage as a pipeline's source: a `$nearSphere` find over the 2dsphere or 2d
//! index of `key` (or the collection's only one; a flat `$near` over a 2d index unless
//! `spherical`), each document annotated with its distance.

use super::*;
use query::geo::GeoNearSpec;

impl DocDb {
    pub(super) fn geo_near_source(
        &self,
        db: &str,
        coll: &str,
        arg: &Document,
        opts: &AggregateOpts,
    ) -> DocResult<DocCursor> {
        let mut spec = GeoNearSpec::parse(&Bson::Document(arg.clone()))?;
        let Some(c) = self.get_coll(db, coll) else {
            return Ok(DocCursor::empty());
        };
        let st = c.state.read();
        let geo_fields: Vec<String> = st
            .indexes
            .iter()
            .filter(|i| !i.def.hidden)
            .flat_map(|i| i.def.geo_paths().map(str::to_string).collect::<Vec<_>>())
            .collect();
        let flat_fields: Vec<String> = st
            .indexes
            .iter()
            .filter(|i| !i.def.hidden && matches!(i.def.kind, IndexKind::Geo2d(_)))
            .map(|i| i.def.fields[0].0.clone())
            .collect();
        let geo_fields: Vec<String> = geo_fields
            .into_iter()
            .chain(flat_fields.iter().cloned())
            .collect();
        let key = match (&spec.key, geo_fields.as_slice()) {
            (Some(k), _) if geo_fields.contains(k) => k.clone(),
            (Some(k), _) => {
                return Err(DocError::bad_value(format!(
                    "no 2d or 2dsphere index with key {{{k}: ...}} on {db}.{coll} for $geoNear"
                )))
            }
            (None, [one]) => one.clone(),
            (None, []) => {
                return Err(DocError::index_not_found(
                    "$geoNear requires a 2d or 2dsphere index, but none were found",
                ))
            }
            (None, _) => {
                return Err(DocError::index_not_found(format!(
                    "There is more than one 2d or 2dsphere index on {db}.{coll}; unsure which to use for $geoNear"
                )))
            }
        };
        // Over a 2d index (and no 2dsphere one on the key), `spherical: false` is flat.
        spec.set_flat(
            flat_fields.contains(&key) && geo_fields.iter().filter(|f| **f == key).count() == 1,
        )?;
        let q = FindQuery {
            filter: spec.filter(&key),
            interrupt: opts.interrupt.clone(),
            collation: opts.collation.clone(),
            ..Default::default()
        };
        let exec = self.exec_for(&c, &st, &q)?;
        drop(st);
        let collation = exec.collation.clone();
        let _in_effect = collation::scope(collation.clone());
        let docs = exec.scored_source()?.map(move |r| {
            let (_, mut d, dist) = r?;
            spec.annotate(&mut d, &key, dist.unwrap_or(0.0))?;
            Ok(d)
        });
        Ok(DocCursor::with_collation(Box::new(docs), collation))
    }
}
