//! Writes: insert, update, delete, findAndModify and the TTL pass. Update, delete and
//! findAndModify share one loop over the matching documents (`modify_matching`).

use super::statements::run_statements;
use super::*;

/// How many times an upsert that lost its insert to another client's is tried (the loop in
/// `update_one_stmt` says why more than twice).
const UPSERT_ATTEMPTS: u32 = 8;

impl DocDb {
    pub fn insert(
        &self,
        db: &str,
        coll: &str,
        docs: Vec<Document>,
        opts: WriteOpts,
    ) -> WriteOutcome {
        // A time-series collection's measurements go into its buckets.
        if let Some(buckets) = self.timeseries_buckets(db, coll) {
            return self.insert_measurements(db, coll, buckets, docs, opts);
        }
        run_statements(db, coll, docs, opts.ordered, |_, doc, out| {
            collection::prepare_insert(doc).and_then(|doc| {
                self.with_write(db, coll, true, |c, st| {
                    c.insert_doc(st, &doc, opts.journal, opts.bypass_validation)
                })?
                .expect("created")
            })?;
            out.n += 1;
            Ok(())
        })
    }

    pub fn update(
        &self,
        db: &str,
        coll: &str,
        stmts: &[UpdateStatement],
        opts: WriteOpts,
    ) -> WriteOutcome {
        run_statements(db, coll, stmts, opts.ordered, |i, s, out| {
            let (matched, modified, upserted) = self.update_one_stmt(db, coll, s, &opts)?;
            out.n += matched;
            out.n_modified += modified;
            if let Some(id) = upserted {
                out.n += 1;
                out.upserted.push((i, id));
            }
            Ok(())
        })
    }

    /// (matched, modified, upserted _id).
    pub(super) fn update_one_stmt(
        &self,
        db: &str,
        coll: &str,
        s: &UpdateStatement,
        opts: &WriteOpts,
    ) -> DocResult<(u64, u64, Option<Bson>)> {
        let (sync, interrupt) = (opts.journal, &opts.interrupt);
        interrupt.check()?;
        let filter = Matcher::new_with_text(&s.q)?.with_scope(&s.vars);
        let modifier = statement_update(s)?;
        let _logged_as = crate::oplog::UpdateStyle::of(&modifier).enter();
        if s.multi && modifier.is_replacement() {
            return Err(DocError::failed_to_parse(
                "multi update is not supported for replacement-style update",
            ));
        }
        let matching = Matching {
            filter: &filter,
            query: &s.q,
            sort: None,
            collation: s.collation.as_ref(),
            hint: s.hint.as_ref(),
            interrupt,
            reach: if s.multi { Reach::All } else { Reach::One },
            journal: sync,
            bypass_validation: opts.bypass_validation,
        };
        // An upsert that matched nothing inserts; another client's upsert of the same key may
        // insert between the two, and the insert then fails on a unique index. MongoDB 4.2+
        // retries such an upsert as an update that now matches; so does this. The retry sees the
        // other insert (the unique check ran after that write returned), but a third client may
        // delete or change the document again before the retry matches it, so the attempts are
        // bounded, with a short backoff (127 ms in all).
        for attempt in 0..UPSERT_ATTEMPTS {
            if attempt > 0 {
                std::thread::sleep(std::time::Duration::from_millis(1 << (attempt - 1)));
            }
            let r = self.with_write(db, coll, s.upsert, |c, st| -> DocResult<(u64, u64)> {
                let (mut matched, mut modified) = (0, 0);
                self.modify_matching(c, st, &matching, |old, pos| {
                    matched += 1;
                    let new = updated_doc(old, &modifier, pos)?;
                    if new == *old {
                        return Ok(Change::Keep);
                    }
                    modified += 1;
                    Ok(Change::Replace(new))
                })?;
                Ok((matched, modified))
            })?;
            let (matched, modified) = match r {
                Some(x) => x?,
                None => (0, 0),
            };
            if matched > 0 || !s.upsert {
                return Ok((matched, modified, None));
            }
            let doc = upsert_doc(&s.q, &modifier)?;
            let id = doc.get("_id").cloned().unwrap_or(Bson::Null);
            let inserted = self
                .with_write(db, coll, true, |c, st| {
                    c.insert_doc(st, &doc, sync, opts.bypass_validation)
                })?
                .expect("created");
            match inserted {
                Err(e) if e.code == DocError::DUPLICATE_KEY && attempt + 1 < UPSERT_ATTEMPTS => {
                    continue
                }
                Err(e) => return Err(e),
                Ok(_) => return Ok((0, 0, Some(id))),
            }
        }
        unreachable!("the last attempt returns")
    }

    pub fn delete(
        &self,
        db: &str,
        coll: &str,
        stmts: &[DeleteStatement],
        opts: WriteOpts,
    ) -> WriteOutcome {
        run_statements(db, coll, stmts, opts.ordered, |_, s, out| {
            if s.limit != 0 && s.limit != 1 {
                return Err(DocError::failed_to_parse(format!(
                    "The limit field in delete objects must be 0 or 1. Got {}",
                    s.limit
                )));
            }
            let filter = Matcher::new_with_text(&s.q)?.with_scope(&s.vars);
            let matching = Matching {
                filter: &filter,
                query: &s.q,
                sort: None,
                collation: s.collation.as_ref(),
                hint: s.hint.as_ref(),
                interrupt: &opts.interrupt,
                reach: if s.limit == 1 { Reach::One } else { Reach::All },
                journal: opts.journal,
                bypass_validation: opts.bypass_validation,
            };
            let r = self.with_write(db, coll, false, |c, st| -> DocResult<u64> {
                let mut n = 0;
                self.modify_matching(c, st, &matching, |_, _| {
                    n += 1;
                    Ok(Change::Delete)
                })?;
                Ok(n)
            })?;
            out.n += r.unwrap_or(Ok(0))?;
            Ok(())
        })
    }

    pub fn find_and_modify(
        &self,
        db: &str,
        coll: &str,
        spec: &FindAndModify,
    ) -> DocResult<FindAndModifyOutcome> {
        catalog::validate_coll_name(db, coll)?;
        let modifier = fam_modifier(spec)?.map(|m| m.with_scope(&spec.vars));
        let _logged_as = modifier
            .as_ref()
            .map(|m| crate::oplog::UpdateStyle::of(m).enter());
        let filter = Matcher::new_with_text(&spec.query)?.with_scope(&spec.vars);
        let proj = match &spec.fields {
            Some(p) if !p.is_empty() => Some(Projection::parse(p)?.with_scope(&spec.vars)),
            _ => None,
        };
        let project = |d: Document| -> DocResult<Document> {
            match &proj {
                Some(p) => p.apply_matched(&d, Some(&filter)),
                None => Ok(d),
            }
        };
        let sync = spec.journal;
        let matching = Matching {
            filter: &filter,
            query: &spec.query,
            sort: spec.sort.clone(),
            collation: spec.collation.as_ref(),
            hint: spec.hint.as_ref(),
            interrupt: &spec.interrupt,
            reach: Reach::One,
            journal: sync,
            bypass_validation: spec.bypass_validation,
        };
        let r = self.with_write(
            db,
            coll,
            spec.upsert,
            |c, st| -> DocResult<Option<FindAndModifyOutcome>> {
                // The document found, and for an update what it became.
                let mut found: Option<(Document, Option<Document>)> = None;
                self.modify_matching(c, st, &matching, |old, pos| {
                    let Some(m) = &modifier else {
                        found = Some((old.clone(), None));
                        return Ok(Change::Delete);
                    };
                    let new = updated_doc(old, m, pos)?;
                    let change = if new == *old {
                        Change::Keep
                    } else {
                        Change::Replace(new.clone())
                    };
                    found = Some((old.clone(), Some(new)));
                    Ok(change)
                })?;
                let Some((old, new)) = found else {
                    return Ok(None);
                };
                Ok(Some(match new {
                    None => FindAndModifyOutcome {
                        value: Some(project(old)?),
                        n: 1,
                        ..Default::default()
                    },
                    Some(new) => FindAndModifyOutcome {
                        value: Some(project(if spec.new { new } else { old })?),
                        n: 1,
                        updated_existing: true,
                        upserted: None,
                    },
                }))
            },
        )?;
        if let Some(Some(outcome)) = r.transpose()? {
            return Ok(outcome);
        }
        match (&modifier, spec.upsert) {
            (Some(m), true) => {
                let doc = upsert_doc(&spec.query, m)?;
                let id = doc.get("_id").cloned().unwrap_or(Bson::Null);
                self.with_write(db, coll, true, |c, st| {
                    c.insert_doc(st, &doc, sync, spec.bypass_validation)
                })?
                .expect("created")?;
                Ok(FindAndModifyOutcome {
                    value: if spec.new { Some(project(doc)?) } else { None },
                    n: 1,
                    updated_existing: false,
                    upserted: Some(id),
                })
            }
            _ => Ok(FindAndModifyOutcome::default()),
        }
    }

    /// One pass of the TTL monitor: for every TTL index, deletes the documents whose indexed
    /// date (the earliest, for an array) is more than `expireAfterSeconds` in the past, in
    /// batches of [`TTL_BATCH`] (each batch re-checks its documents under their locks, so a
    /// document updated meanwhile is kept if it no longer qualifies). Returns how many.
    pub fn ttl_pass(&self) -> DocResult<u64> {
        let now = bson::DateTime::now().timestamp_millis();
        let colls: Vec<Arc<Coll>> = self.colls.read().values().cloned().collect();
        let mut deleted = 0;
        for c in colls {
            let st = c.state.read();
            let mut ttl: Vec<(String, i64)> = st
                .indexes
                .iter()
                .filter_map(|i| Some((i.def.fields[0].0.clone(), i.def.expire_after?)))
                .collect();
            // A clustered collection's TTL is by `_id`, a time-series one's by bucket time.
            ttl.extend(super::timeseries::ttl_field(&st.options));
            drop(st);
            for (field, secs) in ttl {
                let cutoff =
                    bson::DateTime::from_millis(now.saturating_sub(secs.saturating_mul(1000)));
                let q = FindQuery {
                    filter: doc! {field: {"$lt": cutoff}},
                    ..Default::default()
                };
                let filter = Matcher::new(&q.filter)?;
                // Each batch is (candidates found, documents deleted); a full batch that
                // deleted something may have more behind it.
                loop {
                    let (found, n) = self
                        .with_write(&c.db, &c.name, false, |c, st| -> DocResult<(usize, u64)> {
                            let coll = c.default_collation.clone();
                            let rids = self.targets(c, st, &q, coll, TTL_BATCH)?;
                            let mut n = 0;
                            for rid in &rids {
                                let _lock = c.lock_doc(*rid);
                                let Some(old) = c.get(*rid)? else { continue };
                                if filter.matches(&old) {
                                    c.write_doc(st, *rid, Some(&old), None, false)?;
                                    n += 1;
                                }
                            }
                            Ok((rids.len(), n))
                        })?
                        .unwrap_or(Ok((0, 0)))?;
                    deleted += n;
                    if found < TTL_BATCH || n == 0 {
                        break;
                    }
                }
            }
        }
        Ok(deleted)
    }

    /// The one "modify the matching documents" loop of update, delete and findAndModify: plans
    /// the candidates under the write's collation, then for each one locks it, re-reads it
    /// (skipped if a concurrent write deleted it), re-checks the filter (skipped if the
    /// document no longer matches), asks `change` what to do with it (given the array index
    /// the filter matched at, for the positional `$`), and does it; a replacement is validated
    /// first. [`Reach::One`] stops after the first document that still matches.
    fn modify_matching(
        &self,
        c: &Coll,
        st: &CollState,
        m: &Matching,
        mut change: impl FnMut(&Document, Option<usize>) -> DocResult<Change>,
    ) -> DocResult<()> {
        let coll = collation::resolve(m.collation, c.default_collation.as_ref())?;
        let _in_effect = collation::scope(coll.clone());
        if let Some(h) = m.hint {
            // mongod's error for a write's hint names no planner (a find's does).
            planner::resolve_hint(&st.visible_indexes(), h, "")?;
        }
        let q = FindQuery {
            filter: m.query.clone(),
            sort: m.sort.clone(),
            hint: m.hint.cloned(),
            interrupt: m.interrupt.clone(),
            // The scan re-checks the filter, `$expr` and its variables included.
            vars: m.filter.scope().clone(),
            ..Default::default()
        };
        let max = match m.reach {
            Reach::One => ONE_TARGET,
            Reach::All => usize::MAX,
        };
        for rid in self.targets(c, st, &q, coll, max)? {
            m.interrupt.check()?;
            let _lock = c.lock_doc(rid);
            let Some(old) = c.get(rid)? else { continue };
            let (hit, pos) = m.filter.matches_with_position(&old);
            if !hit {
                continue;
            }
            match change(&old, pos)? {
                Change::Keep => {}
                Change::Delete => c.write_doc(st, rid, Some(&old), None, m.journal)?,
                Change::Replace(new) => {
                    c.validate(&new, Some(&old), m.bypass_validation)?;
                    c.write_doc(st, rid, Some(&old), Some(&new), m.journal)?;
                }
            }
            if m.reach == Reach::One {
                break;
            }
        }
        Ok(())
    }

    /// RecordIds of the documents a write statement targets (collected before any is changed,
    /// so a document moved by its own update is not seen twice).
    /// At most `max` of them (a single-document statement asks for a few, in case some no
    /// longer match when they are locked; the TTL monitor asks for a batch).
    pub(super) fn targets(
        &self,
        c: &Coll,
        st: &CollState,
        q: &FindQuery,
        coll: Option<Arc<collation::Collation>>,
        max: usize,
    ) -> DocResult<Vec<RecordId>> {
        let exec = self.exec_under(c, st, q, coll)?;
        let sort = exec.sort.clone();
        let mut src = exec.source()?;
        if let (Some(s), false) = (sort, exec.plan.sort_provided) {
            let mut all: Vec<(RecordId, Document)> = src.by_ref().collect::<DocResult<_>>()?;
            all.sort_by(|a, b| s.compare(&a.1, &b.1));
            return Ok(all.into_iter().map(|x| x.0).collect());
        }
        let mut rids = Vec::new();
        for r in src {
            rids.push(r?.0);
            if rids.len() >= max {
                break;
            }
        }
        Ok(rids)
    }
}

/// explain's winningPlan: [PROJECTION_SIMPLE →] [LIMIT →] [SKIP →] [SORT →] FETCH → IXSCAN | COLLSCAN.
/// How many of the matching documents a write changes.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Reach {
    /// The first that still matches when locked (`multi: false`, `limit: 1`, findAndModify).
    One,
    All,
}

/// What a write does to one matching document.
enum Change {
    Keep,
    Delete,
    Replace(Document),
}

/// A write's target: the documents matching `filter` (`query` is the same filter as the
/// planner sees it), found under `collation` (or the collection's default) in `sort` order.
struct Matching<'a> {
    filter: &'a Matcher,
    query: &'a Document,
    sort: Option<Document>,
    collation: Option<&'a Document>,
    /// The index the planner must use (checked to exist first).
    hint: Option<&'a Bson>,
    interrupt: &'a Interrupt,
    reach: Reach,
    journal: bool,
    bypass_validation: bool,
}

/// Applies an update to a stored document and checks the result (`_id` unchanged and first,
/// no `$`-prefixed top-level field written by a modifier).
fn updated_doc(old: &Document, m: &Update, pos: Option<usize>) -> DocResult<Document> {
    let mut new = old.clone();
    m.apply_with_position(&mut new, false, pos)?;
    m.check_written_fields(old, &new)?;
    let old_id = old.get("_id");
    match (old_id, new.get("_id")) {
        (Some(a), Some(b))
            if compare_bson(a, b) == Ordering::Equal && a.element_type() == b.element_type() => {}
        (Some(a), None) => {
            let mut d = doc! {"_id": a.clone()};
            d.extend(new);
            new = d;
        }
        (None, _) => {}
        _ => {
            return Err(DocError::immutable_field(
                "Performing an update on the path '_id' would modify the immutable field '_id'",
            ))
        }
    }
    finish_doc(new)
}

/// Checks an updated document's `_id` and puts it first.
fn finish_doc(doc: Document) -> DocResult<Document> {
    if let Some(id) = doc.get("_id") {
        if matches!(id, Bson::Array(_)) {
            return Err(DocError::invalid_id_field(
                "The '_id' value cannot be of type array",
            ));
        }
        collection::check_id(id)?;
    }
    if doc.keys().next().map(String::as_str) != Some("_id") && doc.contains_key("_id") {
        let mut d = doc! {"_id": doc.get("_id").cloned().unwrap()};
        for (k, v) in doc {
            if k != "_id" {
                d.insert(k, v);
            }
        }
        return Ok(d);
    }
    Ok(doc)
}

/// The document an upsert inserts.
fn upsert_doc(filter: &Document, m: &Update) -> DocResult<Document> {
    let seed = update::upsert_seed(filter)?;
    let mut doc = if m.is_replacement() {
        let mut d = Document::new();
        if let Some(id) = seed.get("_id") {
            d.insert("_id", id.clone());
        }
        d
    } else {
        seed
    };
    let seeded = doc.clone();
    m.apply_with_position(&mut doc, true, None)?;
    m.check_written_fields(&seeded, &doc)?;
    let doc = finish_doc(doc)?;
    collection::prepare_insert(doc)
}

/// An update statement's modifier, with the variables its pipeline reads: the command's `let`
/// and the statement's constants (`c`), which mongod takes for a pipeline only (51198).
fn statement_update(s: &UpdateStatement) -> DocResult<Update> {
    let modifier = Update::parse(&s.u, s.array_filters.as_deref())?;
    match &s.constants {
        None => Ok(modifier.with_scope(&s.vars)),
        Some(_) if !modifier.is_pipeline() => Err(DocError::with_code(
            51198,
            "Location51198",
            "Constant values may only be specified for pipeline updates",
        )),
        Some(c) => Ok(modifier.with_scope(&s.vars.bind_let(c)?)),
    }
}

/// What a findAndModify does to the document it finds: the update (parsed), or None to
/// remove it; the spec's contradictions (both, neither, remove with upsert or new) are refused.
fn fam_modifier(spec: &FindAndModify) -> DocResult<Option<Update>> {
    Ok(match (&spec.update, spec.remove) {
        (Some(_), true) => {
            return Err(DocError::failed_to_parse(
                "Cannot specify both an update and remove=true",
            ))
        }
        (None, false) => {
            return Err(DocError::failed_to_parse(
                "Either an update or remove=true must be specified",
            ))
        }
        (Some(u), false) => Some(Update::parse(u, spec.array_filters.as_deref())?),
        (None, true) => {
            if spec.upsert {
                return Err(DocError::failed_to_parse(
                    "Cannot specify both upsert=true and remove=true",
                ));
            }
            if spec.new {
                return Err(DocError::failed_to_parse(
                    "Cannot specify both new=true and remove=true; 'remove' always returns the deleted document",
                ));
            }
            None
        }
    })
}

#[cfg(test)]
mod field_name_tests {
    //! mongod 5.0+'s field-name rules for what a write stores (the drivers' dots-and-dollars
    //! specifications): `$`-prefixed and dotted names are stored as given, except a top-level
    //! `$` field written by a replacement or a modifier, and any inside `_id`.
    use super::*;
    use bson::bson;

    fn parsed(u: Bson) -> Update {
        Update::parse(&u, None).unwrap()
    }

    #[test]
    fn an_insert_stores_dollar_and_dotted_names_at_any_level() {
        for d in [
            doc! {"_id": 1, "$a": 1},
            doc! {"_id": 1, "a.b": 1},
            doc! {"_id": 1, "a": {"$b": 1}},
            doc! {"_id": 1, "a": {"b.c": 1}},
            doc! {"_id": {"a.b": 1}},
            doc! {"_id": 1, "a": {"$db": "foo"}},
            doc! {"_id": 1, "$ref": 1, "$id": 1, "$db": 1},
        ] {
            assert_eq!(collection::prepare_insert(d.clone()).unwrap(), d);
        }
        let moved = collection::prepare_insert(doc! {"$a": 1, "_id": 2}).unwrap();
        assert_eq!(moved, doc! {"_id": 2, "$a": 1});
    }

    #[test]
    fn an_insert_refuses_a_dollar_field_inside_id() {
        for d in [doc! {"_id": {"$a": 1}}, doc! {"_id": {"a": 1, "$b": 1}}] {
            let e = collection::prepare_insert(d).unwrap_err();
            assert_eq!((e.code, e.code_name), (52, "DollarPrefixedFieldName"));
        }
    }

    #[test]
    fn a_pipeline_update_may_write_a_top_level_dollar_field() {
        let m = parsed(bson!([{"$replaceWith": {"$setField": {
            "field": {"$literal": "$a"}, "value": 1, "input": "$$ROOT"}}}]));
        let new = updated_doc(&doc! {"_id": 1, "foo": {}}, &m, None).unwrap();
        assert_eq!(new, doc! {"_id": 1, "foo": {}, "$a": 1});
        let m = parsed(bson!([{"$replaceWith": {"$literal": {"$in": 2, "x": 3}}}]));
        let up = upsert_doc(&doc! {"_id": 2}, &m).unwrap();
        assert_eq!(up, doc! {"_id": 2, "$in": 2, "x": 3});
    }

    #[test]
    fn a_modifier_keeps_a_stored_dollar_field_but_may_not_write_one() {
        let old = doc! {"_id": 1, "$a": 1};
        let new = updated_doc(&old, &parsed(bson!({"$set": {"b": 2}})), None).unwrap();
        assert_eq!(new, doc! {"_id": 1, "$a": 1, "b": 2});
        // Setting it to the value it has writes nothing.
        updated_doc(&old, &parsed(bson!({"$set": {"$a": 1}})), None).unwrap();
        let unset = updated_doc(&old, &parsed(bson!({"$unset": {"$a": ""}})), None).unwrap();
        assert_eq!(unset, doc! {"_id": 1});
        for u in [
            bson!({"$set": {"$a": 2}}),
            bson!({"$inc": {"$a": 1}}),
            bson!({"$set": {"$b": 1}}),
        ] {
            let e = updated_doc(&old, &parsed(u), None).unwrap_err();
            assert_eq!(e.code, 52, "{e}");
        }
        let e = upsert_doc(&doc! {"x": 1}, &parsed(bson!({"$setOnInsert": {"$b": 1}})));
        assert_eq!(e.unwrap_err().code, 52);
        // A nested one a modifier writes is stored.
        let new = updated_doc(&old, &parsed(bson!({"$set": {"c": {"$d": 1}}})), None).unwrap();
        assert_eq!(new.get_document("c").unwrap(), &doc! {"$d": 1});
    }

    #[test]
    fn an_upsert_refuses_a_dollar_field_inside_id() {
        for u in [
            bson!({"_id": {"$invalid": 1}}),
            bson!({"$set": {"_id": {"$invalid": 1}}}),
            bson!({"$setOnInsert": {"_id": {"$invalid": 1}}}),
        ] {
            let e = upsert_doc(&doc! {"a.b": 1}, &parsed(u)).unwrap_err();
            assert_eq!(e.code, 52, "{e}");
        }
    }

    #[test]
    fn a_replacement_stores_nested_dollar_fields() {
        let m = parsed(bson!({"_id": 1, "a": {"$b": 1}, "c": {"$ref": 1}}));
        let new = updated_doc(&doc! {"_id": 1}, &m, None).unwrap();
        assert_eq!(new, doc! {"_id": 1, "a": {"$b": 1}, "c": {"$ref": 1}});
    }
}
