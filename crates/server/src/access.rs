//! What a command reaches: every namespace it reads or writes, each with the action
//! authorization checks there ([`accesses`]). It is computed from the command alone (its row in
//! the command table, its fields) and the view definitions, before anything runs:
//!
//! - the namespace the command's row names (`spec::Namespace`), with the row's action;
//! - a view, resolved to its sources: its `viewOn`, recursively (a view on a view on
//!   `system.users`), and the collections its pipeline joins; a read of a view reads them all;
//! - an aggregation's stages: every collection a `$lookup`, `$graphLookup` or `$unionWith`
//!   reads (in sub-pipelines of `$lookup`, `$unionWith` and `$facet` too, at any depth; each a
//!   view resolved in turn), and the `$out` (insert and remove) or `$merge` (insert and update)
//!   target, whatever its database;
//! - `create` and `collMod` of a view: its `viewOn` and its pipeline, as reads;
//! - `explain`: what the command it explains reaches;
//! - `renameCollection`: both namespaces.
//!
//! `auth::check_accesses` consumes the list: the users' and roles' collections are refused to
//! everyone, and with authorization on each access needs its action on its database.

use crate::roles::Action;
use crate::spec::{Namespace, Spec};
use bson::{Bson, Document};
use query::aggregate::{self, Reach};
use std::collections::HashSet;

/// The collections only the user commands (`createUser`, `usersInfo`, …) reach, in any
/// database: the users' credentials and the roles.
pub const PROTECTED_COLLECTIONS: &[&str] = &["system.users", "system.roles"];

/// Whether `coll` is one of [`PROTECTED_COLLECTIONS`].
pub fn is_protected(coll: &str) -> bool {
    PROTECTED_COLLECTIONS.contains(&coll)
}

/// One namespace a command reaches and the action it needs there.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Access {
    pub db: String,
    /// None: the database as a whole (its listing, the server's state).
    pub coll: Option<String>,
    pub action: Action,
    /// How the command reaches it, for the error that refuses it (`aggregate app.v -> view
    /// app.v on -> $lookup`).
    pub via: String,
}

impl Access {
    /// `db.coll`, or `db` for the database as a whole.
    pub fn namespace(&self) -> String {
        match &self.coll {
            Some(c) => format!("{}.{c}", self.db),
            None => self.db.clone(),
        }
    }
}

/// The view definitions [`accesses`] resolves views with: `viewOn` and the pipeline of view
/// `db.name`, or None when it is not a view.
pub trait Views {
    fn view(&self, db: &str, name: &str) -> Option<(String, Vec<Document>)>;
}

impl Views for docdb::DocDb {
    fn view(&self, db: &str, name: &str) -> Option<(String, Vec<Document>)> {
        docdb::DocDb::view(self, db, name).map(|v| (v.view_on, v.pipeline))
    }
}

/// The command table's rows by name (what `explain` looks its inner command up in).
pub type Rows<'a> = &'a dyn Fn(&str) -> Option<&'static Spec>;

/// Everything command `name` (row `spec`, None for a command without one) run on `db` reaches.
/// The first access is the command's own: its row's action on its row's namespace.
pub fn accesses(
    views: &dyn Views,
    rows: Rows<'_>,
    spec: Option<&Spec>,
    name: &str,
    db: &str,
    cmd: &Document,
) -> Vec<Access> {
    let mut walk = Walk {
        views,
        out: Vec::new(),
        resolved: HashSet::new(),
    };
    match spec {
        Some(spec) => walk.command(rows, spec, name, db, cmd, name),
        // A hook's command: the collection its first field names, if it names one (with
        // authorization on, a command without a row is refused before this matters).
        None => {
            let coll = cmd.get_str(name).ok().map(str::to_string);
            walk.push(db, coll, Action::Find, name.to_string());
        }
    }
    walk.out
}

struct Walk<'v> {
    views: &'v dyn Views,
    out: Vec<Access>,
    /// The views already resolved (`db.name`): each is followed once, so a cycle in a
    /// damaged catalog cannot loop (definitions refuse cycles).
    resolved: HashSet<String>,
}

impl Walk<'_> {
    fn push(&mut self, db: &str, coll: Option<String>, action: Action, via: String) {
        self.out.push(Access {
            db: db.to_string(),
            coll,
            action,
            via,
        });
    }

    /// The accesses of one command, its own first; `via` is how it was reached (its name, or
    /// `explain -> find`).
    fn command(
        &mut self,
        rows: Rows<'_>,
        spec: &Spec,
        name: &str,
        db: &str,
        cmd: &Document,
        via: &str,
    ) {
        let via = via.to_string();
        let first = cmd.get(name);
        match spec.namespace {
            Namespace::Collection | Namespace::IndexList => {
                let coll = first.and_then(Bson::as_str).map(str::to_string);
                self.push(db, coll.clone(), spec.action, via.clone());
                if let Some(coll) = coll {
                    self.resolve(db, &coll, &format!("{via} {db}.{coll}"));
                }
                self.view_definition(db, cmd, &via);
                if name.eq_ignore_ascii_case("mapReduce") {
                    self.map_reduce_out(db, cmd, &via);
                }
            }
            Namespace::CollectionOrDatabase => self.aggregate(db, cmd, spec.action, &via),
            Namespace::Cursors => {
                let coll = match first {
                    Some(Bson::String(c)) => Some(c.clone()),
                    _ => cmd.get_str("collection").ok().map(str::to_string),
                };
                self.push(db, coll, spec.action, via);
            }
            Namespace::Explained => self.explained(rows, spec, db, cmd, &via),
            Namespace::Namespaces => {
                self.push(db, None, spec.action, via.clone());
                for field in [name, "to"] {
                    if let Some((d, c)) = cmd.get_str(field).ok().and_then(|ns| ns.split_once('.'))
                    {
                        self.push(d, Some(c.to_string()), spec.action, via.clone());
                    }
                }
            }
            Namespace::AuthorizedDatabases => {
                // Any user may list the databases they hold privileges on (the handler
                // filters); every database, asked for with `authorizedDatabases: false`, needs
                // the listDatabases action.
                let action = match cmd.get("authorizedDatabases") {
                    Some(Bson::Boolean(false)) => spec.action,
                    _ => Action::Session,
                };
                self.push(db, None, action, via);
            }
            Namespace::Server | Namespace::Database | Namespace::Users | Namespace::Databases => {
                self.push(db, None, spec.action, via)
            }
        }
    }

    /// mapReduce's `out`: a collection name replaces it; `{replace|merge|reduce: coll, db?}`
    /// replaces, merges into, or reads and rewrites it; `{inline: 1}` writes nothing.
    fn map_reduce_out(&mut self, db: &str, cmd: &Document, via: &str) {
        let (mode, coll, target_db) = match cmd.get("out") {
            Some(Bson::String(coll)) => ("replace", coll.clone(), db.to_string()),
            Some(Bson::Document(out)) => {
                let Some((mode, coll)) = ["replace", "merge", "reduce"]
                    .into_iter()
                    .find_map(|m| out.get_str(m).ok().map(|c| (m, c.to_string())))
                else {
                    return;
                };
                let target_db = out.get_str("db").unwrap_or(db).to_string();
                (mode, coll, target_db)
            }
            _ => return,
        };
        let actions: &[Action] = match mode {
            "replace" => &[Action::Insert, Action::Remove],
            "merge" => &[Action::Insert, Action::Update],
            _ => &[Action::Find, Action::Insert, Action::Update],
        };
        for action in actions {
            self.push(
                &target_db,
                Some(coll.clone()),
                *action,
                format!("{via} -> out {target_db}.{coll}"),
            );
        }
    }

    /// `create` or `collMod` of a view reads its `viewOn` and its pipeline's collections.
    fn view_definition(&mut self, db: &str, cmd: &Document, via: &str) {
        if let Ok(view_on) = cmd.get_str("viewOn") {
            self.read(db, view_on, &format!("{via} -> viewOn"));
        }
        if let Ok(pipeline) = cmd.get_array("pipeline") {
            let stages: Vec<Document> = pipeline
                .iter()
                .filter_map(Bson::as_document)
                .cloned()
                .collect();
            self.pipeline(db, &stages, via);
        }
    }

    /// aggregate: its collection (a view resolved) or the database, its stages' namespaces,
    /// and the server's operations for `$currentOp: {allUsers: true}`.
    fn aggregate(&mut self, db: &str, cmd: &Document, action: Action, via: &str) {
        match cmd.get("aggregate") {
            Some(Bson::String(coll)) => {
                self.push(db, Some(coll.clone()), action, via.to_string());
                self.resolve(db, coll, &format!("{via} {db}.{coll}"));
            }
            _ => self.push(db, None, action, via.to_string()),
        }
        let stages: Vec<Document> = cmd
            .get_array("pipeline")
            .map(|p| p.iter().filter_map(Bson::as_document).cloned().collect())
            .unwrap_or_default();
        if let Some(stage) = stages.first().and_then(others_activity) {
            // Other users' operations or sessions need the cluster monitor's privilege
            // (mongod's `inprog` and `listSessions`).
            self.push(
                db,
                None,
                Action::ClusterMonitor,
                format!("{via} -> {stage} of other users"),
            );
        }
        self.pipeline(db, &stages, via);
    }

    /// explain: what the explained command reaches (explain's own action when the inner
    /// command is not one the table knows, which the handler refuses).
    fn explained(&mut self, rows: Rows<'_>, spec: &Spec, db: &str, cmd: &Document, via: &str) {
        let inner = cmd.get_document("explain").ok();
        let inner_name = inner.and_then(|i| i.keys().next());
        let inner_row = inner_name
            .and_then(|n| rows(n))
            .filter(|r| r.namespace != Namespace::Explained);
        match (inner, inner_name, inner_row) {
            (Some(inner), Some(n), Some(row)) => {
                self.command(rows, row, n, db, inner, &format!("{via} -> {n}"))
            }
            _ => self.push(db, None, spec.action, via.to_string()),
        }
    }

    /// A read of `db.coll`: find there, and when it is a view, its sources too.
    fn read(&mut self, db: &str, coll: &str, via: &str) {
        self.push(db, Some(coll.to_string()), Action::Find, via.to_string());
        self.resolve(db, coll, &format!("{via} {db}.{coll}"));
    }

    /// When `db.coll` is a view: a read of its `viewOn` and of its pipeline's collections.
    fn resolve(&mut self, db: &str, coll: &str, via: &str) {
        let Some((view_on, pipeline)) = self.views.view(db, coll) else {
            return;
        };
        if !self.resolved.insert(format!("{db}.{coll}")) {
            return;
        }
        let via = format!("{via} (a view) -> viewOn");
        self.read(db, &view_on, &via);
        self.pipeline(db, &pipeline, &via);
    }

    /// The namespaces a pipeline run in `db` names.
    fn pipeline(&mut self, db: &str, stages: &[Document], via: &str) {
        for named in aggregate::stage_namespaces(stages) {
            let target_db = named.ns.db.as_deref().unwrap_or(db).to_string();
            let coll = named.ns.coll;
            let via = format!("{via} -> {}", named.stage);
            let writes: &[Action] = match named.reach {
                Reach::Read => {
                    self.read(&target_db, &coll, &via);
                    &[]
                }
                Reach::Replace => &[Action::Insert, Action::Remove],
                Reach::Merge => &[Action::Insert, Action::Update],
            };
            for action in writes {
                self.push(
                    &target_db,
                    Some(coll.clone()),
                    *action,
                    format!("{via} {target_db}.{coll}"),
                );
            }
        }
    }
}

/// The stage name when a pipeline's first stage lists other users' activity: `$currentOp`
/// with `allUsers`, `$listLocalSessions` with `allUsers` or a `users` list.
fn others_activity(first: &Document) -> Option<&'static str> {
    if let Ok(op) = first.get_document("$currentOp") {
        return (op.get_bool("allUsers") == Ok(true)).then_some("$currentOp");
    }
    let sessions = first.get_document("$listLocalSessions").ok()?;
    let others = sessions.get_bool("allUsers") == Ok(true)
        || sessions.get_array("users").is_ok_and(|u| !u.is_empty());
    others.then_some("$listLocalSessions")
}

#[cfg(test)]
mod tests;
