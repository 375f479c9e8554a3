//! Views (`create` with `viewOn` and `pipeline`): a read-only namespace whose documents are
//! its source's documents run through its pipeline, as mongod's.
//!
//! A view is one catalog entry (`{ns, view: {viewOn, pipeline, collation?}}`), so it survives
//! restarts like a collection and owns no table. Reads of a view are aggregations of the
//! collection at the end of its `viewOn` chain: the chain's pipelines (innermost first), then
//! the read's own filter, sort, skip and limit as stages; a find's projection is applied to
//! what comes out, with find's semantics. A view's collation is the collation of every read
//! of it (a read asking for another one is refused with 167, as mongod). Writes, index
//! commands and stats on a view are CommandNotSupportedOnView (166). The graph of views (each
//! view depends on its `viewOn` and on the collections its `$lookup`, `$graphLookup`,
//! `$unionWith` and `$facet` stages read) is checked at every definition: no cycle
//! (GraphContainsCycle 93) and no chain of more than 20 views (ViewDepthLimitExceeded 165).

use super::*;
use std::collections::HashMap;

/// mongod's `ViewGraph::kMaxViewDepth`: views on one dependency path.
const MAX_VIEW_DEPTH: usize = 20;

/// The collection mongod keeps its views in: here a read-only listing of the view
/// definitions, shown by `listCollections` while the database has a view.
pub const SYSTEM_VIEWS: &str = "system.views";

/// Writes to `system.views` are refused, as mongod 4.7+ does: views change through
/// `create`, `collMod` and `drop` only.
pub(super) fn refuse_system_views(db: &str, coll: &str) -> DocResult<()> {
    if coll == SYSTEM_VIEWS {
        return Err(DocError::invalid_namespace(format!(
            "cannot write to '{}': views are created, changed and dropped with create, collMod and drop",
            catalog::ns(db, coll)
        )));
    }
    Ok(())
}

/// One view's definition, as stored in the catalog and reported by `listCollections`.
#[derive(Clone, Debug, PartialEq)]
pub struct ViewDef {
    /// The collection or view it reads, in the same database.
    pub view_on: String,
    pub pipeline: Vec<Document>,
    /// Its collation as in use (`simple` is none).
    pub collation: Option<Document>,
}

impl ViewDef {
    /// The options `listCollections` reports (mongod's order: viewOn, pipeline, collation).
    pub fn options(&self) -> Document {
        let mut o = doc! {
            "viewOn": self.view_on.clone(),
            "pipeline": self.pipeline.iter().cloned().map(Bson::Document).collect::<Vec<_>>(),
        };
        if let Some(c) = &self.collation {
            o.insert("collation", c.clone());
        }
        o
    }

    /// The catalog entry naming the view `ns`.
    pub fn to_entry(&self, ns: &str) -> Document {
        doc! {"ns": ns, "view": self.options()}
    }

    /// A stored view (the catalog entry's `view` document).
    pub fn from_stored(d: &Document) -> DocResult<ViewDef> {
        let bad = || DocError::internal_error(format!("corrupt view entry in the catalog: {d}"));
        let view_on = d.get_str("viewOn").map_err(|_| bad())?.to_string();
        let pipeline = d
            .get_array("pipeline")
            .map_err(|_| bad())?
            .iter()
            .map(|s| s.as_document().cloned().ok_or_else(bad))
            .collect::<DocResult<Vec<_>>>()?;
        Ok(ViewDef {
            view_on,
            pipeline,
            collation: d.get_document("collation").ok().cloned(),
        })
    }

    /// A view from `create`'s or `collMod`'s options (`viewOn`, `pipeline`, `collation`),
    /// checked as mongod checks them. `verb` names the command in messages.
    pub fn parse(options: &Document, verb: &str) -> DocResult<ViewDef> {
        let mut def = ViewDef {
            view_on: String::new(),
            pipeline: Vec::new(),
            collation: None,
        };
        let mut has_view_on = false;
        for (k, v) in options {
            match (k.as_str(), v) {
                ("viewOn", Bson::String(s)) => {
                    if s.is_empty() {
                        return Err(DocError::bad_value("'viewOn' cannot be empty"));
                    }
                    def.view_on = s.clone();
                    has_view_on = true;
                }
                ("viewOn", other) => return Err(wrong_type(verb, k, other, "string")),
                ("pipeline", Bson::Array(stages)) => {
                    def.pipeline = stages
                        .iter()
                        .map(|s| match s {
                            Bson::Document(d) => Ok(d.clone()),
                            other => Err(DocError::type_mismatch(format!(
                                "'pipeline' must be an array of objects, found {}",
                                query::matcher::bson_type_name(other)
                            ))),
                        })
                        .collect::<DocResult<_>>()?;
                }
                ("pipeline", other) => return Err(wrong_type(verb, k, other, "array")),
                ("collation", Bson::Document(c)) => {
                    def.collation = collation::Collation::parse(c)?.map(|c| c.spec().clone());
                }
                ("collation", other) => return Err(wrong_type(verb, k, other, "object")),
                (other, _) => {
                    return Err(DocError::invalid_options(format!(
                        "option '{other}' is not supported with a view (a view has only 'viewOn', 'pipeline' and 'collation')"
                    )))
                }
            }
        }
        if !has_view_on {
            return Err(DocError::invalid_options(
                "'pipeline' requires 'viewOn' to also be specified",
            ));
        }
        def.check_pipeline()?;
        Ok(def)
    }

    /// The pipeline parses, and writes nowhere (mongod's 167 for a top-level `$out`/`$merge`;
    /// nested ones get their stage's own code from the parser).
    fn check_pipeline(&self) -> DocResult<()> {
        for stage in &self.pipeline {
            if let Some(name) = stage
                .keys()
                .next()
                .filter(|k| matches!(k.as_str(), "$out" | "$merge"))
            {
                return Err(DocError::with_code(
                    167,
                    "OptionNotSupportedOnView",
                    format!("{name} cannot be used in a view definition"),
                ));
            }
        }
        aggregate::validate_pipeline(&self.pipeline)
    }

    /// The namespaces (in the view's database) the view reads: `viewOn` and every
    /// collection its stages join, at any nesting (the query crate's rule for each stage).
    fn dependencies(&self) -> Vec<String> {
        let joined = aggregate::stage_namespaces(&self.pipeline)
            .into_iter()
            .filter(|s| s.reach == aggregate::Reach::Read && s.ns.db.is_none())
            .map(|s| s.ns.coll);
        std::iter::once(self.view_on.clone())
            .chain(joined)
            .collect()
    }
}

fn wrong_type(verb: &str, field: &str, v: &Bson, expected: &str) -> DocError {
    DocError::type_mismatch(format!(
        "BSON field '{verb}.{field}' is the wrong type '{}', expected type '{expected}'",
        query::matcher::bson_type_name(v)
    ))
}

/// A view resolved to the collection it finally reads.
#[derive(Clone, Debug)]
pub(super) struct ResolvedView {
    /// The collection at the end of the `viewOn` chain.
    pub base: String,
    /// The chain's pipelines, innermost first.
    pub pipeline: Vec<Document>,
    /// The collation of the outermost view (the chain shares it).
    pub collation: Option<Document>,
}

pub(super) fn not_on_view(ns: &str) -> DocError {
    DocError::with_code(
        166,
        "CommandNotSupportedOnView",
        format!("Namespace {ns} is a view, not a collection"),
    )
}

impl DocDb {
    /// The definition of view `db.name`, or None when it is not a view (what authorization
    /// resolves a view's sources with).
    pub fn view(&self, db: &str, name: &str) -> Option<ViewDef> {
        self.views.read().get(&catalog::ns(db, name)).cloned()
    }

    /// Fails with 166 when `db.name` is a view (writes, indexes, stats).
    pub(super) fn refuse_view(&self, db: &str, name: &str) -> DocResult<()> {
        let ns = catalog::ns(db, name);
        if self.views.read().contains_key(&ns) {
            return Err(not_on_view(&ns));
        }
        Ok(())
    }

    /// The views of database `db`, by name.
    pub(super) fn views_of(&self, db: &str) -> Vec<(String, ViewDef)> {
        let prefix = format!("{db}.");
        self.views
            .read()
            .iter()
            .filter_map(|(ns, v)| Some((ns.strip_prefix(&prefix)?.to_string(), v.clone())))
            .collect()
    }

    /// The view `db.name` resolved to its collection, or None when it is not a view.
    pub(super) fn resolve_view(&self, db: &str, name: &str) -> DocResult<Option<ResolvedView>> {
        let views = self.views.read();
        let Some(first) = views.get(&catalog::ns(db, name)) else {
            return Ok(None);
        };
        let mut chain = vec![first];
        let mut base = first.view_on.clone();
        while let Some(next) = views.get(&catalog::ns(db, &base)) {
            if chain.len() >= MAX_VIEW_DEPTH {
                return Err(depth_exceeded());
            }
            chain.push(next);
            base = next.view_on.clone();
        }
        let pipeline = chain
            .iter()
            .rev()
            .flat_map(|v| v.pipeline.iter().cloned())
            .collect();
        Ok(Some(ResolvedView {
            base,
            pipeline,
            collation: first.collation.clone(),
        }))
    }

    /// The collation a read of a view runs under: the view's; a read that names another one
    /// is refused (mongod's 167).
    fn view_collation(view: &ResolvedView, asked: Option<&Document>) -> DocResult<Document> {
        let own = match &view.collation {
            Some(c) => collation::Collation::parse(c)?,
            None => None,
        };
        if let Some(asked) = asked {
            if !collation::same(collation::Collation::parse(asked)?.as_ref(), own.as_ref()) {
                return Err(DocError::with_code(
                    167,
                    "OptionNotSupportedOnView",
                    "Cannot override a view's default collation",
                ));
            }
        }
        // Explicit, so the base collection's default does not apply to the view.
        Ok(view
            .collation
            .clone()
            .unwrap_or_else(|| doc! {"locale": "simple"}))
    }

    /// Creates view `db.name` (from `create`'s options).
    pub(super) fn create_view(&self, db: &str, name: &str, options: &Document) -> DocResult<()> {
        if name.starts_with("system.") {
            return Err(DocError::invalid_namespace(format!(
                "Cannot create a view called '{name}': 'system.' collections are reserved"
            )));
        }
        let def = ViewDef::parse(options, "create")?;
        let _g = self.ddl.lock();
        let ns = catalog::ns(db, name);
        if self.get_coll(db, name).is_some() || self.views.read().contains_key(&ns) {
            return Err(DocError::namespace_exists(format!(
                "Namespace already exists: {ns}"
            )));
        }
        self.put_view_locked(db, name, def, "create")
    }

    /// Checks the view graph with `db.name` defined as `def`, then writes the entry (synced)
    /// and publishes it. The caller holds `ddl`. On a replica-set member the entry is logged
    /// in the same batch as `{verb: name, viewOn, pipeline, collation}` (`create` or
    /// `collMod`, mongod's oplog form for a view, without `ui`: a view has no UUID).
    pub(super) fn put_view_locked(
        &self,
        db: &str,
        name: &str,
        def: ViewDef,
        verb: &str,
    ) -> DocResult<()> {
        // A view on a view must share its collation (mongod's 166 wording).
        if let Some(inner) = self.view(db, &def.view_on) {
            if inner.collation != def.collation {
                return Err(DocError::with_code(
                    166,
                    "CommandNotSupportedOnView",
                    format!(
                        "View {} has a collation that does not match the collation of view {}",
                        catalog::ns(db, name),
                        catalog::ns(db, &def.view_on)
                    ),
                ));
            }
        }
        self.check_view_graph(db, name, &def)?;
        let ns = catalog::ns(db, name);
        let mut b = WriteBatch::new();
        b.put(
            self.catalog_table,
            ns.as_bytes().to_vec(),
            encode_doc(&def.to_entry(&ns))?,
        );
        let mut logged = doc! {verb: name};
        logged.extend(def.options());
        self.write_catalog_logged(&mut b, db, None, logged)?;
        self.views.write().insert(ns, def);
        Ok(())
    }

    /// No cycle through `name` and no path of more than [`MAX_VIEW_DEPTH`] views, with `name`
    /// defined as `def` (mongod's checks, in its order: cycle, then depth).
    fn check_view_graph(&self, db: &str, name: &str, def: &ViewDef) -> DocResult<()> {
        let views = self.views.read();
        let prefix = format!("{db}.");
        let mut deps: HashMap<&str, Vec<String>> = views
            .iter()
            .filter_map(|(ns, v)| Some((ns.strip_prefix(&prefix)?, v.dependencies())))
            .collect();
        deps.insert(name, def.dependencies());
        // Cycle: a path from the new view back to itself.
        let mut path = vec![name.to_string()];
        let mut seen = HashSet::new();
        if find_cycle(&deps, name, &mut path, &mut seen) {
            let names: Vec<String> = path.iter().map(|n| catalog::ns(db, n)).collect();
            return Err(DocError::with_code(
                93,
                "GraphContainsCycle",
                format!("View cycle detected: [{}]", names.join(" -> ")),
            ));
        }
        // Depth: the views below the new one plus the views above it.
        let mut below = HashMap::new();
        let down = height(&deps, name, &mut below);
        let mut users: HashMap<&str, Vec<&str>> = HashMap::new();
        for (v, ds) in &deps {
            for d in ds {
                users.entry(d.as_str()).or_default().push(v);
            }
        }
        let mut above = HashMap::new();
        let up = height_up(&users, name, &mut above) - 1;
        if down + up > MAX_VIEW_DEPTH {
            return Err(depth_exceeded());
        }
        Ok(())
    }

    /// Drops view `db.name` (caller holds `ddl`); whether it was one.
    pub(super) fn drop_view_locked(&self, db: &str, name: &str) -> DocResult<bool> {
        let ns = catalog::ns(db, name);
        if !self.views.read().contains_key(&ns) {
            return Ok(false);
        }
        let mut b = WriteBatch::new();
        b.delete(self.catalog_table, ns.as_bytes().to_vec());
        self.write_catalog_logged(&mut b, db, None, doc! {"drop": name})?;
        self.views.write().remove(&ns);
        Ok(true)
    }

    /// `collMod` of a view: a new `viewOn` and `pipeline` (both required, as mongod), keeping
    /// its collation.
    pub(super) fn modify_view(&self, db: &str, name: &str, options: &Document) -> DocResult<()> {
        for k in options.keys() {
            if !matches!(k.as_str(), "viewOn" | "pipeline") {
                return Err(DocError::invalid_options(format!(
                    "option '{k}' is not supported on a view: collMod of a view takes 'viewOn' and 'pipeline'"
                )));
            }
        }
        if !(options.contains_key("viewOn") && options.contains_key("pipeline")) {
            return Err(DocError::invalid_options(
                "must specify both 'viewOn' and 'pipeline' when modifying a view",
            ));
        }
        let _g = self.ddl.lock();
        let old = self.view(db, name).ok_or_else(|| {
            DocError::namespace_not_found(format!("ns does not exist: {}", catalog::ns(db, name)))
        })?;
        let mut def = ViewDef::parse(options, "collMod")?;
        def.collation = old.collation;
        self.put_view_locked(db, name, def, "collMod")
    }

    /// `find` on a view: the resolved pipeline, then the filter, sort, skip and limit as
    /// stages, then the projection.
    pub(super) fn find_view(
        &self,
        db: &str,
        view: ResolvedView,
        q: &FindQuery,
    ) -> DocResult<DocCursor> {
        if q.tailable {
            return Err(DocError::bad_value(
                "error processing query: a tailable cursor cannot read a view",
            ));
        }
        let filter = Matcher::new(&q.filter)?.with_scope(&q.vars);
        let projection = match &q.projection {
            Some(p) if !p.is_empty() => Some(Projection::parse(p)?.with_scope(&q.vars)),
            _ => None,
        };
        let pipeline = view_find_pipeline(&view, q);
        // As mongod, a hint goes with the resolved aggregation: it picks the index of the
        // base collection's scan.
        let opts = AggregateOpts {
            interrupt: q.interrupt.clone(),
            collation: Some(Self::view_collation(&view, q.collation.as_ref())?),
            current_ops: None,
            hint: q.hint.clone(),
            vars: q.vars.clone(),
            bypass_validation: false,
        };
        let cursor = self.aggregate_collection(db, &view.base, &pipeline, &opts)?;
        let Some(projection) = projection else {
            return Ok(cursor);
        };
        let coll = cursor.collation().cloned();
        let docs = cursor
            .into_inner()
            .map(move |d| d.and_then(|d| projection.apply_matched(&d, Some(&filter))));
        Ok(DocCursor::with_collation(Box::new(docs), coll))
    }

    /// A read of `<db>.system.views`: the view definitions as mongod stores them
    /// (`{_id: "<db>.<view>", viewOn, pipeline, collation?}`, by `_id`), through the filter,
    /// sort, skip, limit and projection.
    pub(super) fn find_system_views(&self, db: &str, q: &FindQuery) -> DocResult<DocCursor> {
        if q.tailable || q.hint.is_some() {
            return Err(DocError::bad_value(format!(
                "{}.{SYSTEM_VIEWS} is a listing of the views: it takes no hint and no tailable cursor",
                db
            )));
        }
        let filter = Matcher::new(&q.filter)?.with_scope(&q.vars);
        let projection = match &q.projection {
            Some(p) if !p.is_empty() => Some(Projection::parse(p)?.with_scope(&q.vars)),
            _ => None,
        };
        let mut defs = self.views_of(db);
        defs.sort_by(|a, b| a.0.cmp(&b.0));
        let dbname = db.to_string();
        let docs = defs.into_iter().map(move |(name, v)| {
            let mut d = doc! {"_id": catalog::ns(&dbname, &name)};
            d.extend(v.options());
            Ok(d)
        });
        let none = ResolvedView {
            base: String::new(),
            pipeline: Vec::new(),
            collation: None,
        };
        let pipeline = view_find_pipeline(&none, q);
        let storage = super::pipeline::PipelineStorage {
            db: self.me.clone(),
            dbname: db.to_string(),
            coll: SYSTEM_VIEWS.to_string(),
            interrupt: q.interrupt.clone(),
            current_ops: None,
            // A find writes nothing.
            bypass_validation: false,
        };
        let out = aggregate::run_pipeline_scoped(
            &pipeline,
            Box::new(docs),
            &storage,
            &q.interrupt,
            &q.vars,
        )?;
        let out = out.into_iter().map(move |d| match &projection {
            Some(p) => p.apply_matched(&d, Some(&filter)),
            None => Ok(d),
        });
        Ok(DocCursor::with_collation(Box::new(out), None))
    }

    /// Explain of a read of a view, as mongod's: the resolved aggregation — the base
    /// collection's scan (a leading `$match` is its filter, with the read's hint and the
    /// view's collation) as a `$cursor` stage holding that scan's explain, then the rest of the
    /// pipeline's stages.
    pub(super) fn explain_view(
        &self,
        db: &str,
        view: ResolvedView,
        q: &FindQuery,
    ) -> DocResult<Document> {
        let mut pipeline = view_find_pipeline(&view, q);
        if let Some(p) = q.projection.as_ref().filter(|p| !p.is_empty()) {
            Projection::parse(p)?;
            pipeline.push(doc! {"$project": p.clone()});
        }
        aggregate::validate_pipeline(&pipeline)?;
        let (filter, rest) = match pipeline.first().and_then(|s| s.get_document("$match").ok()) {
            Some(f) if pipeline[0].len() == 1 => (f.clone(), &pipeline[1..]),
            _ => (Document::new(), &pipeline[..]),
        };
        let scan = self.explain_find(
            db,
            &view.base,
            &FindQuery {
                filter,
                hint: q.hint.clone(),
                collation: Some(Self::view_collation(&view, q.collation.as_ref())?),
                interrupt: q.interrupt.clone(),
                ..Default::default()
            },
        )?;
        let mut stages = vec![Bson::Document(doc! {"$cursor": scan})];
        stages.extend(rest.iter().cloned().map(Bson::Document));
        Ok(doc! {"stages": stages})
    }

    /// `aggregate` on a view: the resolved pipeline, then the caller's.
    pub(super) fn aggregate_view(
        &self,
        db: &str,
        name: &str,
        view: ResolvedView,
        pipeline: &[Document],
        opts: &AggregateOpts,
    ) -> DocResult<DocCursor> {
        aggregate::validate_pipeline(pipeline)?;
        // The view has no storage of its own to report on.
        if pipeline
            .first()
            .is_some_and(|s| s.contains_key("$collStats"))
        {
            return Err(not_on_view(&catalog::ns(db, name)));
        }
        let mut full = view.pipeline.clone();
        full.extend(pipeline.iter().cloned());
        let opts = AggregateOpts {
            collation: Some(Self::view_collation(&view, opts.collation.as_ref())?),
            ..opts.clone()
        };
        self.aggregate_collection(db, &view.base, &full, &opts)
    }
}

/// A find on a view as a pipeline: the view's, then the filter, sort, skip and limit as
/// stages (the projection is applied to what comes out).
fn view_find_pipeline(view: &ResolvedView, q: &FindQuery) -> Vec<Document> {
    let mut pipeline = view.pipeline.clone();
    if !q.filter.is_empty() {
        pipeline.push(doc! {"$match": q.filter.clone()});
    }
    if let Some(s) = q.sort.as_ref().filter(|s| !s.is_empty()) {
        pipeline.push(doc! {"$sort": s.clone()});
    }
    if q.skip > 0 {
        pipeline.push(doc! {"$skip": q.skip as i64});
    }
    if let Some(l) = q.limit.map(|l| l.unsigned_abs()).filter(|&l| l > 0) {
        pipeline.push(doc! {"$limit": l.min(i64::MAX as u64) as i64});
    }
    pipeline
}

fn depth_exceeded() -> DocError {
    DocError::with_code(
        165,
        "ViewDepthLimitExceeded",
        format!("View depth too deep or view cycle detected; maximum depth is {MAX_VIEW_DEPTH}"),
    )
}

/// Depth-first search for a path from `from` back to `path[0]`; on success `path` holds it
/// (ending with `path[0]` again). `seen` keeps each node visited once.
fn find_cycle(
    deps: &HashMap<&str, Vec<String>>,
    from: &str,
    path: &mut Vec<String>,
    seen: &mut HashSet<String>,
) -> bool {
    let Some(next) = deps.get(from) else {
        return false;
    };
    for d in next {
        if *d == path[0] {
            path.push(d.clone());
            return true;
        }
        if deps.contains_key(d.as_str()) && seen.insert(d.clone()) {
            path.push(d.clone());
            if find_cycle(deps, d, path, seen) {
                return true;
            }
            path.pop();
        }
    }
    false
}

/// Views on the longest dependency path starting at `v` (0 for a collection). The graph has
/// no cycle (checked first) and memoization visits each view once.
fn height<'a>(
    deps: &'a HashMap<&str, Vec<String>>,
    v: &'a str,
    memo: &mut HashMap<&'a str, usize>,
) -> usize {
    let Some(ds) = deps.get(v) else { return 0 };
    if let Some(h) = memo.get(v) {
        return *h;
    }
    let h = 1 + ds
        .iter()
        .map(|d| height(deps, d.as_str(), memo))
        .max()
        .unwrap_or(0);
    memo.insert(v, h);
    h
}

/// Views on the longest path of views that depend on `v`, `v` included.
fn height_up<'a>(
    users: &HashMap<&'a str, Vec<&'a str>>,
    v: &'a str,
    memo: &mut HashMap<&'a str, usize>,
) -> usize {
    if let Some(h) = memo.get(v) {
        return *h;
    }
    let h = 1 + users
        .get(v)
        .map(|us| {
            us.iter()
                .map(|u| height_up(users, u, memo))
                .max()
                .unwrap_or(0)
        })
        .unwrap_or(0);
    memo.insert(v, h);
    h
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deps(list: &[(&'static str, &[&str])]) -> HashMap<&'static str, Vec<String>> {
        list.iter()
            .map(|(v, ds)| (*v, ds.iter().map(|d| d.to_string()).collect()))
            .collect()
    }

    #[test]
    fn dependencies_reach_nested_joins() {
        let def = ViewDef::parse(
            &doc! {"viewOn": "a", "pipeline": [
                {"$lookup": {"from": "b", "as": "x", "pipeline": [{"$unionWith": "c"}]}},
                {"$facet": {"f": [{"$graphLookup": {"from": "d", "startWith": "$x",
                    "connectFromField": "x", "connectToField": "y", "as": "z"}}]}},
                {"$unionWith": {"coll": "e", "pipeline": []}},
            ]},
            "create",
        )
        .unwrap();
        assert_eq!(def.dependencies(), ["a", "b", "c", "d", "e"]);
    }

    #[test]
    fn definitions_are_checked() {
        let code = |o: Document| ViewDef::parse(&o, "create").unwrap_err().code;
        assert_eq!(code(doc! {"viewOn": 1}), 14);
        assert_eq!(code(doc! {"viewOn": ""}), 2);
        assert_eq!(code(doc! {"pipeline": []}), 72);
        assert_eq!(code(doc! {"viewOn": "a", "pipeline": {}}), 14);
        assert_eq!(code(doc! {"viewOn": "a", "pipeline": [1]}), 14);
        assert_eq!(code(doc! {"viewOn": "a", "pipeline": [{"$out": "x"}]}), 167);
        assert_eq!(code(doc! {"viewOn": "a", "capped": true}), 72);
        let stored =
            ViewDef::parse(&doc! {"viewOn": "a", "pipeline": [{"$limit": 1}]}, "create").unwrap();
        assert_eq!(ViewDef::from_stored(&stored.options()).unwrap(), stored);
    }

    #[test]
    fn cycles_and_heights() {
        let g = deps(&[("a", &["b"]), ("b", &["c", "a"]), ("c", &["coll"])]);
        let mut path = vec!["a".to_string()];
        assert!(find_cycle(&g, "a", &mut path, &mut HashSet::new()));
        assert_eq!(path, ["a", "b", "a"]);
        let g = deps(&[("a", &["b", "c"]), ("b", &["c"]), ("c", &["coll"])]);
        let mut path = vec!["a".to_string()];
        assert!(!find_cycle(&g, "a", &mut path, &mut HashSet::new()));
        assert_eq!(height(&g, "a", &mut HashMap::new()), 3);
        assert_eq!(height(&g, "coll", &mut HashMap::new()), 0);
        let users: HashMap<&str, Vec<&str>> =
            HashMap::from([("c", vec!["a", "b"]), ("b", vec!["a"])]);
        assert_eq!(height_up(&users, "c", &mut HashMap::new()), 3);
    }
}
