//! Explain: the chosen plan as `queryPlanner` output and a one-line plan summary.

use super::*;

impl DocDb {
    pub fn explain_find(&self, db: &str, coll: &str, q: &FindQuery) -> DocResult<Document> {
        catalog::validate_coll_name(db, coll)?;
        let ns = catalog::ns(db, coll);
        if let Some(view) = self.resolve_view(db, coll)? {
            return self.explain_view(db, view, q);
        }
        let Some(c) = self.get_coll(db, coll) else {
            Matcher::new_for_find(&q.filter)?;
            return Ok(doc! {
                "queryPlanner": {
                    "namespace": ns, "indexFilterSet": false, "parsedQuery": q.filter.clone(),
                    "winningPlan": {"stage": "EOF"}, "rejectedPlans": [],
                },
                "executionStats": {
                    "executionSuccess": true, "nReturned": 0, "executionTimeMillis": 0,
                    "totalKeysExamined": 0, "totalDocsExamined": 0,
                    "executionStages": {"stage": "EOF", "nReturned": 0, "executionTimeMillisEstimate": 0},
                },
            });
        };
        let st = c.state.read();
        let exec = self.exec_for(&c, &st, q)?;
        drop(st);
        let winning = plan_doc(&exec, q);
        let stats = exec.stats.clone();
        let skip = exec.skip;
        let started = std::time::Instant::now();
        let mut n = 0i64;
        for d in exec.run()? {
            d?;
            n += 1;
        }
        let millis = started.elapsed().as_millis() as i64;
        let counts = StageCounts {
            returned: n as u64,
            matched: stats.matched.load(AtomicOrdering::Relaxed),
            skip,
            keys: stats.keys_examined.load(AtomicOrdering::Relaxed),
            docs: stats.docs_examined.load(AtomicOrdering::Relaxed),
            millis,
        };
        let stages = execution_stages(winning.clone(), &counts);
        Ok(doc! {
            "queryPlanner": {
                "namespace": ns,
                "indexFilterSet": false,
                "parsedQuery": q.filter.clone(),
                "winningPlan": winning,
                "rejectedPlans": [],
            },
            "executionStats": {
                "executionSuccess": true,
                "nReturned": n,
                "executionTimeMillis": millis,
                "totalKeysExamined": counts.keys as i64,
                "totalDocsExamined": counts.docs as i64,
                "executionStages": stages,
            },
        })
    }

    /// The plan a find would use, for tests and the server's explain of other commands.
    pub fn plan_summary(&self, db: &str, coll: &str, q: &FindQuery) -> DocResult<String> {
        let Some(c) = self.get_coll(db, coll) else {
            return Ok("EOF".into());
        };
        let st = c.state.read();
        let exec = self.exec_for(&c, &st, q)?;
        Ok(match exec.plan.index_name() {
            Some(n) if matches!(exec.plan.access, Access::GeoNear { .. }) => {
                format!("{} {n}", geo_index::near_stage_name(&exec.plan))
            }
            Some(n) => format!("IXSCAN {n}"),
            None => "COLLSCAN".into(),
        })
    }
}

fn plan_doc(exec: &Exec, q: &FindQuery) -> Document {
    let plan: &Plan = &exec.plan;
    let direction = if plan.reverse { "backward" } else { "forward" };
    let mut stage = match &plan.access {
        Access::CollScan => doc! {
            "stage": "COLLSCAN",
            "filter": q.filter.clone(),
            "direction": direction,
        },
        Access::IxScan { index, bounds, .. } => {
            let mut ixscan = doc! {
                "stage": "IXSCAN",
                "keyPattern": index.def.key.clone(),
                "indexName": index.def.name.clone(),
                "isMultiKey": index.is_multikey(),
                "isUnique": index.def.unique,
                "isSparse": index.def.sparse,
                "isPartial": index.def.partial.is_some(),
                "indexVersion": 2,
                "direction": direction,
                "indexBounds": bounds.clone(),
            };
            // As mongod: the collation the index (and so the query) uses, in full.
            if let Some(c) = &index.def.collation {
                ixscan.insert("collation", c.spec().clone());
            }
            doc! {"stage": "FETCH", "filter": q.filter.clone(), "inputStage": ixscan}
        }
        Access::GeoNear { index, .. } => doc! {
            "stage": "FETCH",
            "inputStage": crate::geo_index::explain_near(index, &q.filter),
        },
        Access::Text {
            index,
            query,
            prefix,
            ..
        } => {
            // mongod's shape: TEXT_MATCH over FETCH over TEXT_OR over one IXSCAN per term;
            // a compound index's prefix equalities are `indexPrefix`.
            let index_prefix: Document = index
                .def
                .regular_before()
                .iter()
                .zip(prefix)
                .map(|((path, _), v)| (path.clone(), v.clone()))
                .collect();
            let scans: Vec<Bson> = query
                .terms_for_bounds
                .iter()
                .map(|t| {
                    Bson::Document(doc! {
                        "stage": "IXSCAN",
                        "keyPattern": index.def.key.clone(),
                        "indexName": index.def.name.clone(),
                        "isMultiKey": false,
                        "isUnique": false,
                        "isSparse": false,
                        "isPartial": index.def.partial.is_some(),
                        "indexVersion": 2,
                        "direction": "backward",
                        "indexBounds": {},
                        "indexPrefix": index_prefix.clone(),
                        "term": t.clone(),
                    })
                })
                .collect();
            doc! {
                "stage": "TEXT_MATCH",
                "indexPrefix": index_prefix,
                "indexName": index.def.name.clone(),
                "parsedTextQuery": query.to_doc(),
                "textIndexVersion": query::text::TEXT_INDEX_VERSION,
                "inputStage": {
                    "stage": "FETCH",
                    "filter": q.filter.clone(),
                    "inputStage": {"stage": "TEXT_OR", "inputStages": scans},
                },
            }
        }
    };
    if exec.sort.is_some() && !plan.sort_provided {
        stage = doc! {"stage": "SORT", "sortPattern": q.sort.clone().unwrap_or_default(), "inputStage": stage};
    }
    if exec.skip > 0 {
        stage = doc! {"stage": "SKIP", "skipAmount": exec.skip as i64, "inputStage": stage};
    }
    if let Some(l) = exec.limit {
        stage = doc! {"stage": "LIMIT", "limitAmount": l as i64, "inputStage": stage};
    }
    if exec.projection.is_some() {
        stage = doc! {"stage": "PROJECTION_DEFAULT", "transformBy": q.projection.clone().unwrap_or_default(), "inputStage": stage};
    }
    stage
}

/// What one execution counted, for [`execution_stages`].
struct StageCounts {
    /// Documents the whole plan returned.
    returned: u64,
    /// Documents that passed the filter (what the scan or fetch stage returned).
    matched: u64,
    skip: u64,
    keys: u64,
    docs: u64,
    millis: i64,
}

/// The winning plan with mongod's per-stage execution figures. Stages are pulled lazily, so a
/// stage returns what its parent pulled: everything above SORT returns the plan's documents;
/// a blocking SORT returns what SKIP consumed plus those; the scan (or FETCH) returns the
/// documents that passed the filter; an IXSCAN the entries that led to a fetch. The time of
/// each stage is the whole execution's (stages run interleaved in one pass; mongod's
/// estimates, too, include a stage's children).
fn execution_stages(mut stage: Document, c: &StageCounts) -> Document {
    let kind = stage.get_str("stage").unwrap_or("").to_string();
    let returned = match kind.as_str() {
        "COLLSCAN" | "FETCH" | "TEXT_MATCH" | "GEO_NEAR_2DSPHERE" | "GEO_NEAR_2D" => c.matched,
        "IXSCAN" | "TEXT_OR" => c.docs,
        "SORT" => c.skip.min(c.matched) + c.returned,
        _ => c.returned,
    };
    stage.insert("nReturned", returned as i64);
    stage.insert("executionTimeMillisEstimate", c.millis);
    match kind.as_str() {
        "COLLSCAN" | "FETCH" => {
            stage.insert("docsExamined", c.docs as i64);
        }
        "IXSCAN" | "TEXT_OR" | "GEO_NEAR_2DSPHERE" | "GEO_NEAR_2D" => {
            stage.insert("keysExamined", c.keys as i64);
        }
        _ => {}
    }
    if let Ok(input) = stage.get_document("inputStage") {
        let input = execution_stages(input.clone(), c);
        stage.insert("inputStage", input);
    }
    stage
}
