//! Reads: planning a query (`exec_under`), find, index scans, count, distinct, aggregate.

use super::*;

impl DocDb {
    pub(super) fn exec_for(&self, c: &Coll, st: &CollState, q: &FindQuery) -> DocResult<Exec> {
        let coll = collation::resolve(q.collation.as_ref(), c.default_collation.as_ref())?;
        self.exec_under(c, st, q, coll)
    }

    /// The execution of `q` under `coll`, the collation the caller resolved for it (once per
    /// statement: `q.collation` is not parsed again).
    pub(super) fn exec_under(
        &self,
        c: &Coll,
        st: &CollState,
        q: &FindQuery,
        coll: Option<Arc<collation::Collation>>,
    ) -> DocResult<Exec> {
        let filter = Matcher::new_for_find(&q.filter)?.with_scope(&q.vars);
        let sort = match &q.sort {
            Some(s) if !s.is_empty() => Some(Arc::new(SortSpec::parse(s)?)),
            _ => None,
        };
        let projection = match &q.projection {
            Some(p) if !p.is_empty() => Some(Arc::new(Projection::parse(p)?.with_scope(&q.vars))),
            _ => None,
        };
        let wants_score = |d: &Option<Document>| {
            d.as_ref()
                .is_some_and(|d| query::text::mentions_text_score(&Bson::Document(d.clone())))
        };
        if filter.text().is_none() && (wants_score(&q.sort) || wants_score(&q.projection)) {
            return Err(query::text::no_text_score());
        }
        if q.tailable && filter.text().is_some() {
            return Err(DocError::bad_value(
                "error processing query: a tailable cursor cannot answer $text (it reads in natural order, the text index answers $text)",
            ));
        }
        if q.tailable {
            check_tailable(c, q)?;
        }
        // Index bounds are encoded under the query's collation, and only indexes built with
        // it can answer the query; hidden indexes answer none.
        let _in_effect = collation::scope(coll.clone());
        let plan = plan_for(st, q, &filter, sort.as_ref(), coll.as_ref())?;
        Ok(Exec {
            engine: self.engine.clone(),
            table: c.table,
            plan,
            filter: if q.filter.is_empty() {
                None
            } else {
                Some(Arc::new(filter))
            },
            ownership: scope::current_ownership(),
            sort,
            projection,
            skip: q.skip,
            limit: q.limit.map(|l| l.unsigned_abs()).filter(|&l| l > 0),
            stats: Arc::new(ExecStats::default()),
            interrupt: q.interrupt.clone(),
            collation: coll,
            keep_score: false,
            return_key: q.return_key,
            show_record_id: q.show_record_id,
        })
    }

    pub fn find(&self, db: &str, coll: &str, q: &FindQuery) -> DocResult<DocCursor> {
        self.open_find(db, coll, q, false)
    }

    /// A find whose `$text` scores stay on the documents (a pipeline's input: its stages may
    /// read them; `aggregate` takes them off at the end).
    fn open_find(
        &self,
        db: &str,
        coll: &str,
        q: &FindQuery,
        keep_score: bool,
    ) -> DocResult<DocCursor> {
        catalog::validate_coll_name(db, coll)?;
        if coll == super::views::SYSTEM_VIEWS {
            return self.find_system_views(db, q);
        }
        if let Some(view) = self.resolve_view(db, coll)? {
            return self.find_view(db, view, q);
        }
        let Some(c) = self.get_coll(db, coll) else {
            // Parse anyway so bad input errors even on a missing collection.
            Matcher::new_for_find(&q.filter)?;
            let coll = collation::resolve(q.collation.as_ref(), None)?;
            return Ok(DocCursor::with_collation(
                Box::new(std::iter::empty()),
                coll,
            ));
        };
        let st = c.state.read();
        let mut exec = self.exec_for(&c, &st, q)?;
        drop(st);
        if q.tailable {
            return Ok(exec.tail(c.tail.clone()));
        }
        exec.keep_score = keep_score;
        exec.run()
    }

    /// The documents whose keys in the index with key pattern `key` fall in `[lo, hi)`-style
    /// byte bounds over its KeyString keys, in index order (a shard clones, deletes and
    /// splits chunk ranges this way; for a hashed index the keys are the hashes).
    pub fn scan_index(
        &self,
        db: &str,
        coll: &str,
        key: &Document,
        lo: Bound<Vec<u8>>,
        hi: Bound<Vec<u8>>,
    ) -> DocResult<DocCursor> {
        catalog::validate_coll_name(db, coll)?;
        let Some(c) = self.get_coll(db, coll) else {
            return Ok(DocCursor::empty());
        };
        let st = c.state.read();
        let index = st
            .indexes
            .iter()
            .find(|i| &i.def.key == key)
            .cloned()
            .ok_or_else(|| {
                DocError::index_not_found(format!("no index with key pattern {key} on {db}.{coll}"))
            })?;
        let collation = index.def.collation.clone();
        let exec = Exec {
            engine: self.engine.clone(),
            table: c.table,
            plan: Plan {
                access: Access::IxScan {
                    index,
                    ranges: vec![(lo, hi)],
                    bounds: doc! {"range": "chunk bounds"},
                },
                reverse: false,
                sort_provided: true,
            },
            filter: None,
            ownership: scope::current_ownership(),
            sort: None,
            projection: None,
            skip: 0,
            limit: None,
            stats: Arc::new(ExecStats::default()),
            interrupt: Interrupt::none(),
            // The keys were encoded under the index's collation.
            collation,
            keep_score: false,
            return_key: false,
            show_record_id: false,
        };
        drop(st);
        exec.run()
    }

    /// The number of documents a query (filter, skip, limit, collation) returns.
    pub fn count(&self, db: &str, coll: &str, q: &FindQuery) -> DocResult<u64> {
        // A count has no order: `$near` is refused here as in a `$match` (5626500).
        Matcher::new_with_text(&q.filter)?;
        if q.filter.is_empty()
            && q.skip == 0
            && q.limit.is_none_or_zero()
            && scope::current_ownership().is_none()
            && crate::txn::current().is_none()
            && self.view(db, coll).is_none()
            && coll != super::views::SYSTEM_VIEWS
        {
            catalog::validate_coll_name(db, coll)?;
            return match self.get_coll(db, coll) {
                Some(c) => Ok(c.counts()?.0 as u64),
                None => Ok(0),
            };
        }
        let q = FindQuery {
            projection: None,
            sort: None,
            ..q.clone()
        };
        let mut n = 0;
        for d in self.find(db, coll, &q)? {
            d?;
            n += 1;
        }
        Ok(n)
    }

    /// The distinct values at `key` among the documents `q` matches, in BSON order (under the
    /// query's collation, strings equal under it count once).
    pub fn distinct(&self, db: &str, coll: &str, key: &str, q: &FindQuery) -> DocResult<Vec<Bson>> {
        if key.is_empty() {
            return Err(DocError::bad_value(
                "FieldPath cannot be constructed with empty string",
            ));
        }
        query::limits::check_path(key)?;
        let q = FindQuery {
            projection: None,
            sort: None,
            ..q.clone()
        };
        let mut out = Vec::new();
        let cursor = self.find(db, coll, &q)?;
        let _in_effect = collation::scope(cursor.collation().cloned());
        for d in cursor {
            let d = d?;
            for v in path::lookup_path(&d, key).into_iter().cloned() {
                match v {
                    Bson::Array(a) => out.extend(a),
                    other => out.push(other),
                }
            }
        }
        // Values equal under the collation count once.
        sort_unique_bson(&mut out);
        Ok(out)
    }

    /// An aggregation of collection or view `db.coll`.
    pub fn aggregate(
        &self,
        db: &str,
        coll: &str,
        pipeline: &[Document],
        opts: &AggregateOpts,
    ) -> DocResult<DocCursor> {
        catalog::validate_coll_name(db, coll)?;
        match self.resolve_view(db, coll)? {
            Some(view) => self.aggregate_view(db, coll, view, pipeline, opts),
            None => self.aggregate_collection(db, coll, pipeline, opts),
        }
    }

    /// An aggregation of collection `db.coll` (a leading `$match` is planned as a find).
    pub(super) fn aggregate_collection(
        &self,
        db: &str,
        coll: &str,
        pipeline: &[Document],
        opts: &AggregateOpts,
    ) -> DocResult<DocCursor> {
        if let Some(spec) = pipeline
            .first()
            .and_then(|s| s.get(super::timeseries::UNPACK_STAGE))
        {
            return self.aggregate_buckets(db, coll, spec, &pipeline[1..], opts);
        }
        // Stages are checked where they stand in the whole pipeline (a leading $match is
        // taken off below as the scan's filter).
        aggregate::validate_pipeline(pipeline)?;
        if pipeline
            .first()
            .is_some_and(|s| s.contains_key("$currentOp"))
        {
            return Err(current_op_namespace());
        }
        if let Some(stage) = pipeline
            .first()
            .and_then(|s| s.keys().next())
            .filter(|k| DATABASE_SOURCES.contains(&k.as_str()))
        {
            return Err(DocError::invalid_namespace(format!(
                "{stage} must be run against the database with {{aggregate: 1}}, not a collection"
            )));
        }
        let coll_name = coll.to_string();
        if let Some(spec) = pipeline
            .first()
            .and_then(|s| s.get_document("$geoNear").ok())
        {
            let input = self.geo_near_source(db, coll, spec, opts)?;
            return self.run_rest(db, coll, input, &pipeline[1..], opts);
        }
        let (filter, rest) = match pipeline.first() {
            Some(first) if first.len() == 1 && first.contains_key("$match") => {
                match first.get("$match") {
                    Some(Bson::Document(f)) => (f.clone(), &pipeline[1..]),
                    _ => {
                        return Err(DocError::with_code(
                            15959,
                            "Location15959",
                            "the match filter must be an expression in an object",
                        ))
                    }
                }
            }
            _ => (Document::new(), pipeline),
        };
        let text = Matcher::new_with_text(&filter)?.text().is_some();
        if !text
            && rest
                .iter()
                .any(|s| query::text::mentions_text_score(&Bson::Document(s.clone())))
        {
            return Err(query::text::no_text_score());
        }
        let input = self.open_find(
            db,
            coll,
            &FindQuery {
                filter,
                interrupt: opts.interrupt.clone(),
                collation: opts.collation.clone(),
                hint: opts.hint.clone(),
                vars: opts.vars.clone(),
                ..Default::default()
            },
            true,
        )?;
        self.run_rest(db, &coll_name, input, rest, opts)
    }

    /// An aggregation of time-series buckets `db.coll` that starts by unpacking them into
    /// measurements (a time-series view's read).
    fn aggregate_buckets(
        &self,
        db: &str,
        coll: &str,
        spec: &Bson,
        rest: &[Document],
        opts: &AggregateOpts,
    ) -> DocResult<DocCursor> {
        let unpack = super::timeseries::UnpackSpec::parse(spec)?;
        aggregate::validate_pipeline(rest)?;
        let q = FindQuery {
            interrupt: opts.interrupt.clone(),
            collation: opts.collation.clone(),
            ..Default::default()
        };
        let buckets = self.open_find(db, coll, &q, false)?;
        let collation = buckets.collation().cloned();
        let measurements = buckets.into_inner().flat_map(move |b| match b {
            Ok(b) => super::timeseries::unpack(&b, &unpack)
                .into_iter()
                .map(Ok)
                .collect::<Vec<_>>(),
            Err(e) => vec![Err(e)],
        });
        let input = DocCursor::with_collation(Box::new(measurements), collation);
        self.run_rest(db, coll, input, rest, opts)
    }

    /// The stages after a pipeline's source (a find's cursor), under the collation the find
    /// resolved.
    fn run_rest(
        &self,
        db: &str,
        coll_name: &str,
        input: DocCursor,
        rest: &[Document],
        opts: &AggregateOpts,
    ) -> DocResult<DocCursor> {
        let coll = input.collation().cloned();
        let input = input.into_inner();
        let storage = super::pipeline::PipelineStorage {
            db: self.me.clone(),
            dbname: db.to_string(),
            coll: coll_name.to_string(),
            interrupt: opts.interrupt.clone(),
            current_ops: None,
            bypass_validation: opts.bypass_validation,
        };
        let _in_effect = collation::scope(coll.clone());
        Ok(DocCursor::with_collation(
            Box::new(
                aggregate::run_pipeline_scoped(rest, input, &storage, &opts.interrupt, &opts.vars)?
                    .into_iter()
                    .map(|mut d| {
                        d.remove(query::text::SCORE_FIELD);
                        Ok(d)
                    }),
            ),
            coll,
        ))
    }
}

/// The first stages that make a database-level pipeline's documents on any database (and are
/// refused on a collection, as mongod refuses them).
const DATABASE_SOURCES: &[&str] = &["$listLocalSessions", "$documents"];

fn current_op_namespace() -> DocError {
    DocError::invalid_namespace(
        "$currentOp must be run against the 'admin' database with {aggregate: 1}",
    )
}

impl DocDb {
    /// `{aggregate: 1}`: a pipeline with no collection, which must start with a stage that
    /// makes its own documents — `$currentOp` on `admin`, `$listLocalSessions` or `$documents`
    /// on any database (mongod's rules and codes).
    pub fn aggregate_database(
        &self,
        db: &str,
        pipeline: &[Document],
        opts: &AggregateOpts,
    ) -> DocResult<DocCursor> {
        catalog::validate_db_name(db)?;
        aggregate::validate_pipeline(pipeline)?;
        let first = pipeline
            .first()
            .and_then(|s| s.keys().next())
            .map(String::as_str);
        match first {
            Some("$currentOp") if db == "admin" => {}
            Some("$currentOp") => return Err(current_op_namespace()),
            Some(first) if DATABASE_SOURCES.contains(&first) => {}
            other => {
                return Err(DocError::invalid_namespace(format!(
                    "{{aggregate: 1}} is not valid for '{}'; a collection is required.",
                    other.unwrap_or("an empty pipeline")
                )))
            }
        }
        let storage = super::pipeline::PipelineStorage {
            db: self.me.clone(),
            dbname: db.to_string(),
            coll: String::new(),
            interrupt: opts.interrupt.clone(),
            current_ops: opts.current_ops.clone(),
            bypass_validation: opts.bypass_validation,
        };
        let coll = collation::resolve(opts.collation.as_ref(), None)?;
        let _in_effect = collation::scope(coll.clone());
        let out = aggregate::run_pipeline_scoped(
            pipeline,
            Box::new(std::iter::empty()),
            &storage,
            &opts.interrupt,
            &opts.vars,
        )?;
        Ok(DocCursor::with_collation(
            Box::new(out.into_iter().map(Ok)),
            coll,
        ))
    }
}

trait LimitExt {
    fn is_none_or_zero(&self) -> bool;
}

impl LimitExt for Option<i64> {
    fn is_none_or_zero(&self) -> bool {
        matches!(self, None | Some(0))
    }
}

/// A tailable cursor's rules: a capped collection, read forward in insertion order (the only
/// sort and hint it honours are `{$natural: 1}`).
fn check_tailable(c: &Coll, q: &FindQuery) -> DocResult<()> {
    if c.capped.is_none() {
        return Err(DocError::bad_value(format!(
            "error processing query: ns={} tailable cursor requested on non capped collection",
            c.ns
        )));
    }
    // A tailable cursor reads the collection forward in insertion order: the only
    // sort and hint it can honour are that order ({$natural: 1}).
    let forward = |d: &Document| {
        d.len() == 1
            && d.get("$natural")
                .and_then(query::compare::Num::of)
                .is_some_and(|n| n.as_f64() > 0.0)
    };
    if q.sort
        .as_ref()
        .is_some_and(|s| !s.is_empty() && !forward(s))
    {
        return Err(DocError::bad_value(
                "error processing query: cannot use tailable option with a sort other than {$natural: 1}",
            ));
    }
    let natural = |h: &Bson| matches!(h, Bson::Document(d) if forward(d));
    if q.hint.as_ref().is_some_and(|h| !natural(h)) {
        return Err(DocError::bad_value(
                "error processing query: a tailable cursor reads in natural order; it cannot use an index hint",
            ));
    }
    Ok(())
}

/// The plan for `q` over the collection's indexes (under `coll`, the query's collation, in
/// effect): natural order for a tailable cursor, the text or `$near` plan for those
/// predicates, else the better of the ordinary and the `$geoWithin` plans.
fn plan_for(
    st: &CollState,
    q: &FindQuery,
    filter: &Matcher,
    sort: Option<&Arc<SortSpec>>,
    coll: Option<&Arc<collation::Collation>>,
) -> DocResult<Plan> {
    let visible = st.visible_indexes();
    let usable: Vec<Arc<Index>> = visible
        .iter()
        .filter(|i| collation::same(i.def.collation.as_ref(), coll))
        .cloned()
        .collect();
    Ok(if q.min.is_some() || q.max.is_some() {
        planner::plan_min_max(&usable, q.hint.as_ref(), q.min.as_ref(), q.max.as_ref())?
    } else if q.tailable {
        // Natural (insertion) order, resumed after the last RecordId returned.
        planner::plan(&[], &Document::new(), None, None)?
    } else if let Some(text) = filter.text() {
        // A text index has no collation of its own: any visible one answers.
        planner::plan_text(&visible, text, &q.filter, q.hint.as_ref())?
    } else if let Some((path, near)) = filter.near() {
        // Geo keys are cells: any visible 2dsphere index answers, whatever the collation.
        geo_index::plan_near(&visible, path, near, &q.filter)?
    } else {
        let geo = geo_index::plan_within(&usable, filter, &q.filter, q.hint.as_ref());
        let plain = planner::plan(
            &usable,
            &q.filter,
            sort.and(q.sort.as_ref()),
            q.hint.as_ref(),
        );
        // An ordinary index plan (or a `$natural` hint) wins over the geo one; a hinted
        // 2dsphere index, which the ordinary planner refuses, is the geo plan.
        match (plain, geo) {
            (Ok(p), None) => p,
            (Ok(p), Some(g)) => {
                if q.hint.is_none() && matches!(p.access, Access::CollScan) {
                    g
                } else {
                    p
                }
            }
            (Err(e), None) => return Err(e),
            (Err(_), Some(g)) => g,
        }
    })
}
