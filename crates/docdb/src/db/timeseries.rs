//! Time-series collections as mongod 5+ keeps them: `create` with `timeseries` makes a bucket
//! collection `system.buckets.<name>` and a view `<name>` over it whose pipeline is one
//! `$_internalUnpackBucket` stage. A measurement inserted through the view joins the open
//! bucket of its meta value when its time falls in that bucket's span and the bucket holds
//! fewer than [`BUCKET_MAX_COUNT`] measurements; otherwise it opens a new bucket. A bucket is
//! mongod's version 1 (uncompressed) document: `{_id, control: {version: 1, min, max}, meta?,
//! data: {<field>: {"0": v0, "1": v1, …}}}`. Reads of the view unpack buckets back into
//! measurements (`unpack`). `expireAfterSeconds` deletes buckets whose newest measurement is
//! older (the TTL pass, `ttl_field`).

use super::*;
use crate::collection::OpenBucket;

/// Measurements a bucket holds at most (mongod's `timeseriesBucketMaxCount`).
const BUCKET_MAX_COUNT: u32 = 1000;
/// The bucket collection of time-series collection `<name>` is `system.buckets.<name>`.
pub(super) const BUCKETS_PREFIX: &str = "system.buckets.";
/// The stage of a time-series view's pipeline.
pub(super) const UNPACK_STAGE: &str = "$_internalUnpackBucket";
/// mongod's upper bound on `bucketMaxSpanSeconds` and `bucketRoundingSeconds` (a year).
const MAX_SPAN_SECONDS: i64 = 31_536_000;

/// A time-series collection's `timeseries` options, as mongod resolves them.
#[derive(Clone, Debug, PartialEq)]
pub(super) struct TimeseriesSpec {
    pub time_field: String,
    pub meta_field: Option<String>,
    /// `seconds`, `minutes` or `hours`; None when the bucketing was given in seconds.
    pub granularity: Option<String>,
    /// A bucket spans at most this long from its rounded start.
    pub max_span_secs: i64,
    /// A bucket's start is its first measurement's time rounded down to a multiple of this.
    pub rounding_secs: i64,
}

fn wrong_type(field: &str, expected: &str) -> DocError {
    DocError::type_mismatch(format!(
        "BSON field 'create.timeseries.{field}' is the wrong type, expected type '{expected}'"
    ))
}

/// A granularity's bucketing: (max span, rounding), in seconds.
fn granularity_bucketing(g: &str) -> DocResult<(i64, i64)> {
    match g {
        "seconds" => Ok((3600, 60)),
        "minutes" => Ok((86_400, 3600)),
        "hours" => Ok((2_592_000, 86_400)),
        _ => Err(DocError::bad_value(format!(
            "Enumeration value '{g}' for field 'create.timeseries.granularity' is not a valid value."
        ))),
    }
}

fn seconds_field(field: &str, v: &Bson) -> DocResult<i64> {
    let n = match v {
        Bson::Int32(i) => *i as i64,
        Bson::Int64(i) => *i,
        Bson::Double(d) if d.fract() == 0.0 => *d as i64,
        _ => return Err(wrong_type(field, "int")),
    };
    if !(1..=MAX_SPAN_SECONDS).contains(&n) {
        return Err(DocError::invalid_options(format!(
            "Timeseries '{field}' needs to be between 1 and {MAX_SPAN_SECONDS}"
        )));
    }
    Ok(n)
}

/// The fields of `timeseries`, each checked for its type.
#[derive(Default)]
struct RawSpec {
    time_field: Option<String>,
    meta_field: Option<String>,
    granularity: Option<String>,
    max_span: Option<i64>,
    rounding: Option<i64>,
}

impl RawSpec {
    fn read(d: &Document) -> DocResult<RawSpec> {
        let mut raw = RawSpec::default();
        for (k, v) in d {
            match (k.as_str(), v) {
                ("timeField", Bson::String(s)) => raw.time_field = Some(s.clone()),
                ("metaField", Bson::String(s)) => raw.meta_field = Some(s.clone()),
                ("granularity", Bson::String(s)) => raw.granularity = Some(s.clone()),
                ("timeField" | "metaField" | "granularity", _) => {
                    return Err(wrong_type(k, "string"))
                }
                ("bucketMaxSpanSeconds", v) => raw.max_span = Some(seconds_field(k, v)?),
                ("bucketRoundingSeconds", v) => raw.rounding = Some(seconds_field(k, v)?),
                _ => {
                    return Err(DocError::with_code(
                        40415,
                        "Location40415",
                        format!("BSON field 'create.timeseries.{k}' is an unknown field."),
                    ))
                }
            }
        }
        Ok(raw)
    }
}

impl TimeseriesSpec {
    /// `create`'s `timeseries` option, checked as mongod checks it.
    pub(super) fn parse(v: &Bson) -> DocResult<TimeseriesSpec> {
        let Bson::Document(d) = v else {
            return Err(DocError::type_mismatch(
                "BSON field 'create.timeseries' is the wrong type, expected type 'object'",
            ));
        };
        let raw = RawSpec::read(d)?;
        let time_field = raw.time_field.ok_or_else(|| {
            DocError::with_code(
                40414,
                "Location40414",
                "BSON field 'create.timeseries.timeField' is missing but a required field",
            )
        })?;
        check_field_names(&time_field, raw.meta_field.as_deref())?;
        let (granularity, max_span_secs, rounding_secs) =
            match (raw.granularity, raw.max_span, raw.rounding) {
                (Some(_), Some(_), _) | (Some(_), _, Some(_)) => {
                    return Err(DocError::invalid_options(
                        "Timeseries 'bucketMaxSpanSeconds' and 'bucketRoundingSeconds' are not allowed with 'granularity'",
                    ))
                }
                (None, Some(span), Some(rounding)) if span == rounding => (None, span, rounding),
                (None, Some(_), Some(_)) => {
                    return Err(DocError::invalid_options(
                        "Timeseries 'bucketMaxSpanSeconds' and 'bucketRoundingSeconds' need to be equal",
                    ))
                }
                (None, Some(_), None) | (None, None, Some(_)) => {
                    return Err(DocError::invalid_options(
                        "Timeseries 'bucketMaxSpanSeconds' and 'bucketRoundingSeconds' need to be set alongside each other",
                    ))
                }
                (g, None, None) => {
                    let g = g.unwrap_or_else(|| "seconds".to_string());
                    let (span, rounding) = granularity_bucketing(&g)?;
                    (Some(g), span, rounding)
                }
            };
        Ok(TimeseriesSpec {
            time_field,
            meta_field: raw.meta_field,
            granularity,
            max_span_secs,
            rounding_secs,
        })
    }

    /// As stored on the bucket collection and listed on the view (mongod's shape).
    pub(super) fn to_doc(&self) -> Document {
        let mut d = doc! {"timeField": self.time_field.clone()};
        if let Some(m) = &self.meta_field {
            d.insert("metaField", m.clone());
        }
        match &self.granularity {
            Some(g) => {
                d.insert("granularity", g.clone());
            }
            None => {
                d.insert("bucketRoundingSeconds", self.rounding_secs as i32);
            }
        }
        d.insert("bucketMaxSpanSeconds", self.max_span_secs as i32);
        d
    }

    /// From the stored form ([`TimeseriesSpec::to_doc`]).
    pub(super) fn from_stored(d: &Document) -> Option<TimeseriesSpec> {
        let max_span_secs = i64::from(d.get_i32("bucketMaxSpanSeconds").ok()?);
        let granularity = d.get_str("granularity").ok().map(str::to_string);
        let rounding_secs = match &granularity {
            Some(g) => granularity_bucketing(g).ok()?.1,
            None => i64::from(d.get_i32("bucketRoundingSeconds").ok()?),
        };
        Some(TimeseriesSpec {
            time_field: d.get_str("timeField").ok()?.to_string(),
            meta_field: d.get_str("metaField").ok().map(str::to_string),
            granularity,
            max_span_secs,
            rounding_secs,
        })
    }

    /// The view's pipeline: one unpack stage.
    fn unpack_stage(&self) -> Document {
        let mut spec = doc! {"timeField": self.time_field.clone()};
        if let Some(m) = &self.meta_field {
            spec.insert("metaField", m.clone());
        }
        spec.insert("bucketMaxSpanSeconds", self.max_span_secs as i32);
        doc! {UNPACK_STAGE: spec}
    }
}

fn check_field_names(time: &str, meta: Option<&str>) -> DocResult<()> {
    if time.is_empty() || time.contains('.') || time.starts_with('$') {
        return Err(DocError::invalid_options(
            "'timeField' must be a non-empty top-level field name, without '.' or a leading '$'",
        ));
    }
    let Some(meta) = meta else { return Ok(()) };
    if meta == time {
        return Err(DocError::invalid_options(
            "'metaField' cannot be the same as 'timeField'",
        ));
    }
    if meta == "_id" || meta.is_empty() || meta.contains('.') || meta.starts_with('$') {
        return Err(DocError::invalid_options(
            "'metaField' cannot be \"_id\", empty, contain '.' or start with '$'",
        ));
    }
    Ok(())
}

/// The options besides `timeseries` a time-series `create` takes: `expireAfterSeconds`.
fn bucket_options(options: &Document, spec: &TimeseriesSpec) -> DocResult<Document> {
    let mut out = doc! {"clusteredIndex": true, "timeseries": spec.to_doc()};
    for (k, v) in options {
        match k.as_str() {
            "timeseries" => {}
            "expireAfterSeconds" => {
                out.insert(k.clone(), catalog::parse_expire_after("create", v)?);
            }
            _ => {
                return Err(DocError::invalid_options(format!(
                    "the '{k}' option is not supported with a time-series collection"
                )))
            }
        }
    }
    Ok(out)
}

/// The unpack stage's parameters.
pub(super) struct UnpackSpec {
    time_field: String,
    meta_field: Option<String>,
}

impl UnpackSpec {
    pub(super) fn parse(v: &Bson) -> DocResult<UnpackSpec> {
        let bad = || {
            DocError::failed_to_parse(format!(
                "{UNPACK_STAGE} specification must be an object with a string 'timeField'"
            ))
        };
        let Bson::Document(d) = v else {
            return Err(bad());
        };
        Ok(UnpackSpec {
            time_field: d.get_str("timeField").map_err(|_| bad())?.to_string(),
            meta_field: d.get_str("metaField").ok().map(str::to_string),
        })
    }
}

/// The measurements of a bucket, in the order they were inserted: the time field, then the
/// meta field (the bucket's `meta`), then the other fields as the bucket's columns have them.
pub(super) fn unpack(bucket: &Document, spec: &UnpackSpec) -> Vec<Document> {
    let Ok(data) = bucket.get_document("data") else {
        return Vec::new();
    };
    let rows = data
        .get_document(&spec.time_field)
        .map(|t| t.len())
        .unwrap_or(0);
    let meta = spec
        .meta_field
        .as_ref()
        .and_then(|m| Some((m, bucket.get("meta")?)));
    (0..rows)
        .map(|row| {
            let key = row.to_string();
            let mut m = Document::new();
            if let Some(t) = data
                .get_document(&spec.time_field)
                .ok()
                .and_then(|c| c.get(&key))
            {
                m.insert(spec.time_field.clone(), t.clone());
            }
            if let Some((name, value)) = meta {
                m.insert(name.clone(), value.clone());
            }
            for (field, column) in data {
                if field == &spec.time_field {
                    continue;
                }
                if let Some(v) = column.as_document().and_then(|c| c.get(&key)) {
                    m.insert(field.clone(), v.clone());
                }
            }
            m
        })
        .collect()
}

/// A new bucket's `_id`: an ObjectId whose timestamp is the bucket's start (mongod's, so the
/// buckets' `_id` order is their time order).
fn bucket_id(min_time_ms: i64) -> bson::oid::ObjectId {
    let mut bytes = bson::oid::ObjectId::new().bytes();
    let secs = u32::try_from(min_time_ms.div_euclid(1000)).unwrap_or(0);
    bytes[..4].copy_from_slice(&secs.to_be_bytes());
    bson::oid::ObjectId::from_bytes(bytes)
}

/// Adds measurement `m` as row `row` of `bucket`'s columns, widening `control.min`/`max`.
fn add_measurement(bucket: &mut Document, m: &Document, row: u32, meta_field: Option<&str>) {
    let key = row.to_string();
    for (field, value) in m {
        if Some(field.as_str()) == meta_field {
            continue;
        }
        for (bound, keep) in [("min", Ordering::Less), ("max", Ordering::Greater)] {
            let control = bucket
                .get_document_mut("control")
                .and_then(|c| c.get_document_mut(bound))
                .expect("a bucket has control.min and control.max");
            let wider = control
                .get(field)
                .is_none_or(|old| compare_bson(value, old) == keep);
            if wider {
                control.insert(field.clone(), value.clone());
            }
        }
        let data = bucket.get_document_mut("data").expect("a bucket has data");
        if !data.contains_key(field) {
            data.insert(field.clone(), Document::new());
        }
        if let Ok(column) = data.get_document_mut(field) {
            column.insert(key.clone(), value.clone());
        }
    }
}

/// A bucket holding measurement `m` alone, starting at `min_time` (rounded).
fn new_bucket(
    id: bson::oid::ObjectId,
    min_time: i64,
    meta: Option<&Bson>,
    m: &Document,
    spec: &TimeseriesSpec,
) -> Document {
    let mut bucket = doc! {
        "_id": id,
        "control": {"version": 1, "min": {}, "max": {}},
    };
    if let Some(meta) = meta {
        bucket.insert("meta", meta.clone());
    }
    bucket.insert("data", Document::new());
    add_measurement(&mut bucket, m, 0, spec.meta_field.as_deref());
    // mongod's control.min.<time> is the bucket's rounded start.
    if let Ok(min) = bucket
        .get_document_mut("control")
        .and_then(|c| c.get_document_mut("min"))
    {
        min.insert(
            spec.time_field.clone(),
            bson::DateTime::from_millis(min_time),
        );
    }
    bucket
}

impl DocDb {
    /// `create` of time-series collection `db.name`: its bucket collection, then its view
    /// (the bucket collection goes again when the view cannot be made).
    pub(super) fn create_timeseries(
        &self,
        db: &str,
        name: &str,
        options: &Document,
    ) -> DocResult<()> {
        let spec = TimeseriesSpec::parse(options.get("timeseries").unwrap_or(&Bson::Null))?;
        let bucket_opts = bucket_options(options, &spec)?;
        let buckets = format!("{BUCKETS_PREFIX}{name}");
        catalog::validate_coll_name(db, &buckets)?;
        let _g = self.ddl.lock();
        for ns in [name, buckets.as_str()] {
            if self.get_coll(db, ns).is_some() || self.view(db, ns).is_some() {
                return Err(DocError::namespace_exists(format!(
                    "Namespace already exists: {}",
                    catalog::ns(db, ns)
                )));
            }
        }
        let c = self.create_locked(db, &buckets, bucket_opts)?;
        let view = ViewDef {
            view_on: buckets,
            pipeline: vec![spec.unpack_stage()],
            collation: None,
        };
        if let Err(e) = self.put_view_locked(db, name, view, "create") {
            self.drop_locked(&c)?;
            return Err(e);
        }
        Ok(())
    }

    /// The bucket collection and spec of time-series collection `db.name`, if it is one.
    pub(super) fn timeseries_buckets(
        &self,
        db: &str,
        name: &str,
    ) -> Option<(Arc<Coll>, TimeseriesSpec)> {
        let view = self.view(db, name)?;
        view.view_on.strip_prefix(BUCKETS_PREFIX)?;
        let c = self.get_coll(db, &view.view_on)?;
        let spec =
            TimeseriesSpec::from_stored(c.state.read().options.get_document("timeseries").ok()?)?;
        Some((c, spec))
    }

    /// The options `listCollections` shows for view `v` when it is a time-series collection's
    /// (`timeseries` and `expireAfterSeconds` of its bucket collection), else None.
    pub(super) fn timeseries_listing(&self, db: &str, v: &ViewDef) -> Option<Document> {
        v.view_on.strip_prefix(BUCKETS_PREFIX)?;
        let c = self.get_coll(db, &v.view_on)?;
        let st = c.state.read();
        let mut out = Document::new();
        if let Some(e) = st.options.get("expireAfterSeconds") {
            out.insert("expireAfterSeconds", e.clone());
        }
        out.insert(
            "timeseries",
            st.options.get_document("timeseries").ok()?.clone(),
        );
        Some(out)
    }

    /// Inserts measurements into time-series collection `db.name` (whose buckets are `c`).
    pub(super) fn insert_measurements(
        &self,
        db: &str,
        name: &str,
        (c, spec): (Arc<Coll>, TimeseriesSpec),
        docs: Vec<Document>,
        opts: WriteOpts,
    ) -> WriteOutcome {
        super::statements::run_statements(db, name, docs, opts.ordered, |_, doc, out| {
            self.insert_measurement(&c, &spec, doc, &opts)?;
            out.n += 1;
            Ok(())
        })
    }

    /// One measurement: into its meta value's open bucket when it fits there, else into a
    /// new bucket. The bucket collection's `open_buckets` lock serializes them.
    fn insert_measurement(
        &self,
        c: &Coll,
        spec: &TimeseriesSpec,
        doc: Document,
        opts: &WriteOpts,
    ) -> DocResult<()> {
        let time = match doc.get(&spec.time_field) {
            Some(Bson::DateTime(t)) => t.timestamp_millis(),
            _ => {
                return Err(DocError::bad_value(format!(
                    "'{}' must be present and contain a valid BSON UTC datetime value",
                    spec.time_field
                )))
            }
        };
        let m = collection::prepare_insert(doc)?;
        let meta = spec.meta_field.as_ref().and_then(|f| m.get(f)).cloned();
        let key = bson::to_vec(&doc! {"m": meta.clone().unwrap_or(Bson::Undefined)})
            .map_err(|e| DocError::bad_value(format!("meta value: {e}")))?;
        let mut open = c.open_buckets.lock();
        let span_ms = spec.max_span_secs.saturating_mul(1000);
        let fits = open.get(&key).filter(|b| {
            b.count < BUCKET_MAX_COUNT && time >= b.min_time && time - b.min_time < span_ms
        });
        if let Some(b) = fits.cloned() {
            if self.append_to_bucket(c, &b, &m, spec, opts)? {
                open.insert(
                    key,
                    OpenBucket {
                        count: b.count + 1,
                        ..b
                    },
                );
                return Ok(());
            }
        }
        let rounding_ms = spec.rounding_secs.saturating_mul(1000);
        let min_time = time.div_euclid(rounding_ms) * rounding_ms;
        let id = bucket_id(min_time);
        let bucket = new_bucket(id, min_time, meta.as_ref(), &m, spec);
        let out = self.insert(&c.db, &c.name, vec![bucket], opts.clone());
        if let Some(e) = out.write_errors.into_iter().next() {
            return Err(e.error);
        }
        open.insert(
            key,
            OpenBucket {
                id,
                min_time,
                count: 1,
            },
        );
        Ok(())
    }

    /// Adds `m` to open bucket `b` (a read and a replacement of the bucket document). False
    /// when the bucket is gone (expired or deleted meanwhile).
    fn append_to_bucket(
        &self,
        c: &Coll,
        b: &OpenBucket,
        m: &Document,
        spec: &TimeseriesSpec,
        opts: &WriteOpts,
    ) -> DocResult<bool> {
        let q = FindQuery {
            filter: doc! {"_id": b.id},
            interrupt: opts.interrupt.clone(),
            ..Default::default()
        };
        let Some(mut bucket) = self.find(&c.db, &c.name, &q)?.next().transpose()? else {
            return Ok(false);
        };
        add_measurement(&mut bucket, m, b.count, spec.meta_field.as_deref());
        let stmt = UpdateStatement {
            q: doc! {"_id": b.id},
            u: Bson::Document(bucket),
            ..Default::default()
        };
        let out = self.update(&c.db, &c.name, &[stmt], opts.clone());
        if let Some(e) = out.write_errors.into_iter().next() {
            return Err(e.error);
        }
        Ok(out.n == 1)
    }
}

/// The field the TTL pass compares with its cutoff for a collection with
/// `expireAfterSeconds` in its options: a bucket's newest time, or a clustered collection's
/// `_id`.
pub(super) fn ttl_field(options: &Document) -> Option<(String, i64)> {
    let secs = options.get_i64("expireAfterSeconds").ok()?;
    match options.get_document("timeseries") {
        Ok(ts) => Some((
            format!("control.max.{}", ts.get_str("timeField").ok()?),
            secs,
        )),
        Err(_) => Some(("_id".to_string(), secs)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn granularity_and_bucketing_resolve_as_mongod() {
        let s = TimeseriesSpec::parse(&Bson::Document(
            doc! {"timeField": "t", "metaField": "m", "granularity": "minutes"},
        ))
        .unwrap();
        assert_eq!((s.max_span_secs, s.rounding_secs), (86_400, 3600));
        assert_eq!(
            s.to_doc(),
            doc! {"timeField": "t", "metaField": "m", "granularity": "minutes", "bucketMaxSpanSeconds": 86_400}
        );
        assert_eq!(TimeseriesSpec::from_stored(&s.to_doc()), Some(s));
        let s = TimeseriesSpec::parse(&Bson::Document(
            doc! {"timeField": "t", "bucketMaxSpanSeconds": 600, "bucketRoundingSeconds": 600},
        ))
        .unwrap();
        assert_eq!(s.granularity, None);
        assert_eq!(TimeseriesSpec::from_stored(&s.to_doc()), Some(s));
        let bad = |d: Document| TimeseriesSpec::parse(&Bson::Document(d)).unwrap_err().code;
        assert_eq!(bad(doc! {"metaField": "m"}), 40414);
        assert_eq!(bad(doc! {"timeField": "t", "metaField": "t"}), 72);
        assert_eq!(bad(doc! {"timeField": "t", "granularity": "days"}), 2);
        assert_eq!(bad(doc! {"timeField": "t", "bucketMaxSpanSeconds": 60}), 72);
        assert_eq!(
            bad(doc! {"timeField": "t", "bucketMaxSpanSeconds": 60, "bucketRoundingSeconds": 30}),
            72
        );
        assert_eq!(
            bad(
                doc! {"timeField": "t", "granularity": "hours", "bucketMaxSpanSeconds": 60, "bucketRoundingSeconds": 60}
            ),
            72
        );
        assert_eq!(bad(doc! {"timeField": "t", "other": 1}), 40415);
    }

    #[test]
    fn a_bucket_unpacks_to_its_measurements() {
        let spec =
            TimeseriesSpec::parse(&Bson::Document(doc! {"timeField": "t", "metaField": "m"}))
                .unwrap();
        let t = |ms| Bson::DateTime(bson::DateTime::from_millis(ms));
        let first = doc! {"_id": 1, "t": t(61_000), "m": "a", "v": 5};
        let second = doc! {"_id": 2, "t": t(62_000), "m": "a", "v": 3, "w": true};
        let mut b = new_bucket(
            bucket_id(60_000),
            60_000,
            Some(&Bson::from("a")),
            &first,
            &spec,
        );
        add_measurement(&mut b, &second, 1, Some("m"));
        let control = b.get_document("control").unwrap();
        assert_eq!(
            control.get_document("min").unwrap().get("t"),
            Some(&t(60_000))
        );
        assert_eq!(
            control.get_document("max").unwrap().get("t"),
            Some(&t(62_000))
        );
        assert_eq!(
            control.get_document("min").unwrap().get("v"),
            Some(&Bson::Int32(3))
        );
        assert_eq!(
            b.get_document("data").unwrap().get_document("w").unwrap(),
            &doc! {"1": true}
        );
        let unpack_spec =
            UnpackSpec::parse(&Bson::Document(doc! {"timeField": "t", "metaField": "m"})).unwrap();
        let got = unpack(&b, &unpack_spec);
        assert_eq!(
            got,
            vec![
                doc! {"t": t(61_000), "m": "a", "_id": 1, "v": 5},
                doc! {"t": t(62_000), "m": "a", "_id": 2, "v": 3, "w": true},
            ]
        );
        assert_eq!(
            b.get_object_id("_id")
                .unwrap()
                .timestamp()
                .timestamp_millis(),
            60_000
        );
    }

    fn measurements(db: &DocDb, q: FindQuery) -> Vec<Document> {
        db.find("t", "w", &q)
            .unwrap()
            .collect::<DocResult<Vec<_>>>()
            .unwrap()
    }

    #[test]
    fn inserts_fill_buckets_by_meta_and_span_and_reads_unpack_them() {
        let db = DocDb::open(crate::DocDbConfig::in_memory()).unwrap();
        let opts = doc! {"timeseries": {"timeField": "t", "metaField": "m", "bucketMaxSpanSeconds": 60, "bucketRoundingSeconds": 60}};
        db.create_collection("t", "w", &opts).unwrap();
        assert_eq!(db.create_collection("t", "w", &opts).unwrap_err().code, 48);
        let t = |s: i64| bson::DateTime::from_millis(s * 1000);
        let docs = vec![
            doc! {"_id": 1, "t": t(0), "m": "a"},
            doc! {"_id": 1, "t": t(59), "m": "a"},
            doc! {"t": t(10), "m": "b"},
            doc! {"t": t(60), "m": "a"},
        ];
        let out = db.insert("t", "w", docs, WriteOpts::default());
        assert!(out.write_errors.is_empty());
        assert_eq!(out.n, 4);
        let buckets: Vec<Document> = db
            .find("t", "system.buckets.w", &FindQuery::default())
            .unwrap()
            .collect::<DocResult<_>>()
            .unwrap();
        // a: [0, 59] share a bucket, 60 is past its span; b has its own.
        assert_eq!(buckets.len(), 3);
        let sorted = measurements(
            &db,
            FindQuery {
                filter: doc! {"m": "a"},
                sort: Some(doc! {"t": 1}),
                ..Default::default()
            },
        );
        let times: Vec<_> = sorted
            .iter()
            .map(|d| d.get_datetime("t").unwrap().timestamp_millis())
            .collect();
        assert_eq!(times, [0, 59_000, 60_000]);
        assert_eq!(sorted[0].get_i32("_id").unwrap(), 1);
        assert_eq!(sorted[1].get_i32("_id").unwrap(), 1);
        let bad = db.insert("t", "w", vec![doc! {"t": 5}], WriteOpts::default());
        assert_eq!(bad.write_errors[0].error.code, 2);
        let listed = db.list_collections("t").unwrap();
        let view = listed.iter().find(|c| c.name == "w").unwrap();
        assert_eq!(view.kind, CollectionKind::Timeseries);
        db.drop_collection("t", "w").unwrap();
        assert!(db.list_collections("t").unwrap().is_empty());
    }

    #[test]
    fn expired_buckets_go_in_the_ttl_pass() {
        let db = DocDb::open(crate::DocDbConfig::in_memory()).unwrap();
        let opts = doc! {"timeseries": {"timeField": "t"}, "expireAfterSeconds": 3600};
        db.create_collection("t", "w", &opts).unwrap();
        let now = bson::DateTime::now().timestamp_millis();
        let docs = vec![
            doc! {"t": bson::DateTime::from_millis(now - 86_400_000)},
            doc! {"t": bson::DateTime::from_millis(now)},
        ];
        assert_eq!(db.insert("t", "w", docs, WriteOpts::default()).n, 2);
        assert_eq!(db.ttl_pass().unwrap(), 1);
        assert_eq!(measurements(&db, FindQuery::default()).len(), 1);
    }
}
