//! The namespace computation on its own: commands as documents, views from a map.

use super::*;
use crate::commands::table;
use bson::doc;
use std::collections::HashMap;

/// View definitions by `db.name`.
#[derive(Default)]
struct Catalog(HashMap<String, (String, Vec<Document>)>);

impl Catalog {
    fn with(mut self, ns: &str, view_on: &str, pipeline: Vec<Document>) -> Catalog {
        self.0.insert(ns.into(), (view_on.into(), pipeline));
        self
    }
}

impl Views for Catalog {
    fn view(&self, db: &str, name: &str) -> Option<(String, Vec<Document>)> {
        self.0.get(&format!("{db}.{name}")).cloned()
    }
}

fn rows(name: &str) -> Option<&'static Spec> {
    table::lookup(name).map(|c| &c.spec)
}

/// (namespace, action) of every access of `cmd` run on `db`.
fn reached(views: &Catalog, db: &str, cmd: Document) -> Vec<(String, Action)> {
    let name = cmd.keys().next().unwrap().clone();
    accesses(views, &rows, rows(&name), &name, db, &cmd)
        .into_iter()
        .map(|a| (a.namespace(), a.action))
        .collect()
}

fn find(ns: &str) -> (String, Action) {
    (ns.to_string(), Action::Find)
}

#[test]
fn a_view_on_a_view_resolves_to_its_sources() {
    let views = Catalog::default()
        .with("admin.v1", "system.users", vec![])
        .with("admin.v2", "v1", vec![doc! {"$match": {}}]);
    assert_eq!(
        reached(&views, "admin", doc! {"find": "v2"}),
        [
            find("admin.v2"),
            find("admin.v1"),
            find("admin.system.users")
        ]
    );
    for cmd in [
        doc! {"count": "v2"},
        doc! {"distinct": "v2", "key": "a"},
        doc! {"aggregate": "v2", "pipeline": []},
        doc! {"explain": {"find": "v2"}},
        doc! {"explain": {"aggregate": "v2", "pipeline": []}},
    ] {
        let got = reached(&views, "admin", cmd.clone());
        assert!(got.contains(&find("admin.system.users")), "{cmd}: {got:?}");
    }
    // Writes on a view (refused later with 166) reach its sources too.
    let got = reached(&views, "admin", doc! {"update": "v2", "updates": []});
    assert_eq!(got[0], ("admin.v2".to_string(), Action::Update));
    assert!(got.contains(&find("admin.system.users")));
}

#[test]
fn a_view_pipeline_joins_are_reads_and_resolved() {
    let views = Catalog::default()
        .with(
            "app.v",
            "base",
            vec![
                doc! {"$facet": {"f": [{"$lookup": {"from": "inner", "as": "x",
                "pipeline": [{"$unionWith": "w"}]}}]}},
            ],
        )
        .with(
            "app.inner",
            "deep",
            vec![doc! {"$graphLookup": {"from": "g"}}],
        );
    assert_eq!(
        reached(
            &views,
            "app",
            doc! {"aggregate": "src", "pipeline": [
                {"$lookup": {"from": "v", "localField": "a", "foreignField": "b", "as": "c"}},
            ]}
        ),
        [
            find("app.src"),
            find("app.v"),
            find("app.base"),
            find("app.inner"),
            find("app.deep"),
            find("app.g"),
            find("app.w"),
        ]
    );
}

#[test]
fn out_and_merge_are_writes_wherever_they_go() {
    let views = Catalog::default();
    assert_eq!(
        reached(
            &views,
            "app",
            doc! {"aggregate": 1, "pipeline": [
                {"$unionWith": "a"}, {"$out": {"db": "other", "coll": "t"}},
            ]}
        ),
        [
            find("app"),
            find("app.a"),
            ("other.t".to_string(), Action::Insert),
            ("other.t".to_string(), Action::Remove),
        ]
    );
    assert_eq!(
        reached(
            &views,
            "app",
            doc! {"aggregate": "s", "pipeline": [{"$merge": {"into": "t"}}]}
        ),
        [
            find("app.s"),
            ("app.t".to_string(), Action::Insert),
            ("app.t".to_string(), Action::Update),
        ]
    );
}

#[test]
fn creating_a_view_reads_its_sources() {
    let views = Catalog::default().with("admin.v1", "system.users", vec![]);
    assert_eq!(
        reached(
            &views,
            "admin",
            doc! {"create": "v2", "viewOn": "v1", "pipeline": [
                {"$lookup": {"from": "system.roles", "as": "r", "pipeline": []}},
            ]}
        ),
        [
            ("admin.v2".to_string(), Action::CreateCollection),
            find("admin.v1"),
            find("admin.system.users"),
            find("admin.system.roles"),
        ]
    );
    assert_eq!(
        reached(
            &views,
            "app",
            doc! {"collMod": "v", "viewOn": "s", "pipeline": []}
        ),
        [("app.v".to_string(), Action::CollMod), find("app.s")]
    );
}

#[test]
fn commands_reach_their_rows_namespace() {
    let views = Catalog::default();
    assert_eq!(
        reached(
            &views,
            "admin",
            doc! {"renameCollection": "a.x", "to": "b.system.users"}
        ),
        [
            ("admin".to_string(), Action::RenameCollection),
            ("a.x".to_string(), Action::RenameCollection),
            ("b.system.users".to_string(), Action::RenameCollection),
        ]
    );
    assert_eq!(
        reached(&views, "app", doc! {"getMore": 5i64, "collection": "c"}),
        [find("app.c")]
    );
    assert_eq!(
        reached(&views, "app", doc! {"listIndexes": "system.users"}),
        [("app.system.users".to_string(), Action::ListIndexes)]
    );
    assert_eq!(
        reached(&views, "admin", doc! {"usersInfo": 1}),
        [("admin".to_string(), Action::ViewUser)]
    );
    // listDatabases: any user (the handler lists what they may see); every database only
    // with the listDatabases action.
    assert_eq!(
        reached(&views, "admin", doc! {"listDatabases": 1}),
        [("admin".to_string(), Action::Session)]
    );
    assert_eq!(
        reached(
            &views,
            "admin",
            doc! {"listDatabases": 1, "authorizedDatabases": false}
        ),
        [("admin".to_string(), Action::ListDatabases)]
    );
    assert_eq!(
        reached(
            &views,
            "admin",
            doc! {"aggregate": 1, "pipeline": [{"$currentOp": {"allUsers": true}}]}
        ),
        [find("admin"), ("admin".to_string(), Action::ClusterMonitor)]
    );
    // explain of something the table does not know: explain's own action.
    assert_eq!(
        reached(&views, "app", doc! {"explain": {"nope": "c"}}),
        [find("app")]
    );
}

#[test]
fn a_cycle_in_a_damaged_catalog_ends() {
    let views = Catalog::default()
        .with("app.a", "b", vec![])
        .with("app.b", "a", vec![]);
    assert_eq!(
        reached(&views, "app", doc! {"find": "a"}),
        [find("app.a"), find("app.b"), find("app.a")]
    );
}

#[test]
fn protected_collections() {
    assert!(is_protected("system.users") && is_protected("system.roles"));
    assert!(!is_protected("system.views") && !is_protected("users"));
}

#[test]
fn map_reduce_out_is_a_write_to_its_target() {
    let none = Catalog::default();
    let cmd = |out: Bson| doc! {"mapReduce": "src", "map": "", "reduce": "", "out": out};
    let inline = reached(&none, "a", cmd(Bson::Document(doc! {"inline": 1})));
    assert_eq!(inline, [find("a.src")]);
    let replaced = reached(&none, "a", cmd(Bson::String("dst".into())));
    assert!(replaced.contains(&("a.dst".to_string(), Action::Insert)));
    assert!(replaced.contains(&("a.dst".to_string(), Action::Remove)));
    let merged = reached(
        &none,
        "a",
        cmd(Bson::Document(doc! {"merge": "dst", "db": "b"})),
    );
    assert!(merged.contains(&("b.dst".to_string(), Action::Update)));
    let reduced = reached(
        &none,
        "a",
        cmd(Bson::Document(doc! {"reduce": "users", "db": "admin"})),
    );
    assert!(reduced.contains(&("admin.users".to_string(), Action::Find)));
    let leak = reached(
        &none,
        "a",
        cmd(Bson::Document(
            doc! {"replace": "system.users", "db": "admin"},
        )),
    );
    assert!(leak.iter().any(|(ns, _)| ns == "admin.system.users"));
}

#[test]
fn other_users_sessions_need_the_cluster_monitor() {
    let none = Catalog::default();
    let mine = doc! {"aggregate": 1, "pipeline": [{"$listLocalSessions": {}}]};
    assert!(!reached(&none, "admin", mine)
        .iter()
        .any(|(_, a)| *a == Action::ClusterMonitor));
    for spec in [
        doc! {"allUsers": true},
        doc! {"users": [{"user": "u", "db": "a"}]},
    ] {
        let all = doc! {"aggregate": 1, "pipeline": [{"$listLocalSessions": spec}]};
        assert!(
            reached(&none, "admin", all).contains(&("admin".to_string(), Action::ClusterMonitor))
        );
    }
}
