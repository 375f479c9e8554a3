//! The write paths' assertions, each tripped by a write that breaks its invariant: calls of
//! the guarded internal functions with inconsistent input, as no public call can make one.

use super::*;
use crate::collection::stage_index_writes;

/// A database with `t.c` holding `{_id: 1, a: 1}`, an index on `a`, and the collection.
fn setup() -> (Arc<DocDb>, Arc<Coll>) {
    let db = DocDb::open(DocDbConfig::in_memory()).unwrap();
    db.create_indexes("t", "c", &[doc! {"key": {"a": 1}, "name": "a_1"}])
        .unwrap();
    let out = db.insert(
        "t",
        "c",
        vec![doc! {"_id": 1, "a": 1}],
        WriteOpts::default(),
    );
    assert_eq!(out.n, 1);
    let c = db.get_coll("t", "c").unwrap();
    (db, c)
}

#[test]
fn consistent_writes_pass_the_assertions() {
    let (db, c) = setup();
    let st = c.state.read();
    let old = doc! {"_id": 1, "a": 1};
    let new = doc! {"_id": 1, "a": 2};
    c.write_doc(&st, 1, Some(&old), Some(&new), false).unwrap();
    c.write_doc(&st, 1, Some(&new), None, false).unwrap();
    c.insert_doc(&st, &doc! {"_id": 2, "a": 3}, false, false)
        .unwrap();
    drop(st);
    db.rename_collection("t", "c", "t", "d", false).unwrap();
    db.drop_indexes("t", "d", &Bson::String("a_1".into()))
        .unwrap();
    db.drop_collection("t", "d").unwrap();
}

#[test]
#[should_panic(expected = "RecordIds are positive")]
fn stage_refuses_a_record_id_that_is_not_positive() {
    let (_db, c) = setup();
    let st = c.state.read();
    let d = doc! {"_id": 1, "a": 1};
    let keys = c.keys_for(&st, &d).unwrap();
    stage_index_writes(
        &st.indexes,
        0,
        None,
        Some((&d, &keys)),
        &mut WriteBatch::new(),
    );
}

#[test]
#[should_panic(expected = "one key set per index")]
fn stage_refuses_keys_for_fewer_indexes() {
    let (_db, c) = setup();
    let st = c.state.read();
    let d = doc! {"_id": 1, "a": 1};
    let keys = c.keys_for(&st, &d).unwrap();
    let short = &keys[..1];
    stage_index_writes(
        &st.indexes,
        1,
        Some((&d, short)),
        None,
        &mut WriteBatch::new(),
    );
}

#[test]
#[cfg(debug_assertions)]
#[should_panic(expected = "the index keys given are the document's own")]
fn stage_refuses_keys_of_another_document() {
    let (_db, c) = setup();
    let st = c.state.read();
    let written = doc! {"_id": 1, "a": 2};
    let other = c.keys_for(&st, &doc! {"_id": 1, "a": 1}).unwrap();
    stage_index_writes(
        &st.indexes,
        1,
        None,
        Some((&written, &other)),
        &mut WriteBatch::new(),
    );
}

#[test]
#[should_panic(expected = "a write stores or removes a document")]
fn write_doc_refuses_a_write_of_nothing() {
    let (_db, c) = setup();
    let st = c.state.read();
    let _ = c.write_doc(&st, 1, None, None, false);
}

#[test]
#[should_panic(expected = "a stored document has an _id")]
fn write_doc_refuses_a_document_without_id() {
    let (_db, c) = setup();
    let st = c.state.read();
    let _ = c.write_doc(&st, 5, None, Some(&doc! {"a": 1}), false);
}

#[test]
#[should_panic(expected = "an update keeps the document's _id")]
fn write_doc_refuses_an_update_of_the_id() {
    let (_db, c) = setup();
    let st = c.state.read();
    let old = doc! {"_id": 1, "a": 1};
    let _ = c.write_doc(&st, 1, Some(&old), Some(&doc! {"_id": 1.0, "a": 1}), false);
}

#[test]
#[cfg(debug_assertions)]
#[should_panic(expected = "names no stored document")]
fn write_doc_refuses_an_insert_over_a_stored_record() {
    let (_db, c) = setup();
    let st = c.state.read();
    let _ = c.write_doc(&st, 1, None, Some(&doc! {"_id": 9, "a": 9}), false);
}

#[test]
#[should_panic(expected = "an insert into the dropped")]
fn insert_doc_refuses_a_dropped_collection() {
    let (_db, c) = setup();
    c.state.write().dropped = true;
    let st = c.state.read();
    let _ = c.insert_doc(&st, &doc! {"_id": 2}, false, false);
}

#[test]
#[should_panic(expected = "its _id leads")]
fn insert_doc_refuses_an_unprepared_document() {
    let (_db, c) = setup();
    let st = c.state.read();
    let _ = c.insert_doc(&st, &doc! {"a": 2, "_id": 2}, false, false);
}

#[test]
#[should_panic(expected = "index name a_1 twice")]
fn persist_entry_refuses_an_index_twice() {
    let (_db, c) = setup();
    let mut st = c.state.write();
    let again = st.indexes[1].clone();
    st.indexes.push(again);
    let _ = c.persist_entry(&st);
}

#[test]
#[should_panic(expected = "has its table")]
fn persist_entry_refuses_an_index_without_its_table() {
    let (db, c) = setup();
    let st = c.state.read();
    db.engine.drop_table(&st.indexes[1].ident).unwrap();
    let _ = c.persist_entry(&st);
}

#[test]
#[should_panic(expected = "its table")]
fn persist_entry_refuses_a_collection_without_its_table() {
    let (db, c) = setup();
    let st = c.state.read();
    db.engine.drop_table(&c.ident).unwrap();
    let _ = c.persist_entry(&st);
}

#[test]
#[should_panic(expected = "a created namespace is new")]
fn create_refuses_an_existing_namespace() {
    let (db, _c) = setup();
    let _ = db.create_locked("t", "c", Document::new());
}

#[test]
#[should_panic(expected = "a new collection's tables are new")]
fn create_refuses_a_leftover_table() {
    let mut cfg = DocDbConfig::in_memory();
    cfg.uuid_seed = Some(7);
    let db = DocDb::open(cfg).unwrap();
    let uuid = db.collection_uuid("t", "n");
    db.engine
        .create_table(&table_name_index(&uuid, 0), &db.cfg.index_table)
        .unwrap();
    let _ = db.create_locked("t", "n", Document::new());
}

#[test]
#[should_panic(expected = "a collection is dropped once")]
fn drop_refuses_a_dropped_collection() {
    let (db, c) = setup();
    db.drop_locked(&c).unwrap();
    let _ = db.drop_locked(&c);
}

#[test]
#[cfg(debug_assertions)]
#[should_panic(expected = "is gone before its tables")]
fn drop_refuses_to_release_tables_the_catalog_names() {
    let (db, c) = setup();
    let _ = db.release_dropped(&c);
}

#[test]
#[should_panic(expected = "a rename moves the entry")]
fn rename_refuses_the_same_namespace() {
    let (db, c) = setup();
    let entry = c.entry(&c.state.read());
    let _ = db.rename_batch(&c.ns, None, &entry);
}

#[test]
#[should_panic(expected = "a rename's target is the other collection")]
fn rename_refuses_the_source_as_its_target() {
    let (db, c) = setup();
    let mut entry = c.entry(&c.state.read());
    entry.ns = catalog::ns("t", "moved");
    let _ = db.rename_batch(&c.ns, Some(&c), &entry);
}

#[test]
#[should_panic(expected = "is built once")]
fn build_refuses_an_index_built_already() {
    let (db, c) = setup();
    let st = c.state.read();
    let def = st.indexes[1].def.clone();
    let _ = db.build_index(&c, &st, def, 7, &Interrupt::none());
}

#[test]
#[should_panic(expected = "a new index's table is new")]
fn build_refuses_an_existing_table() {
    let (db, c) = setup();
    let st = c.state.read();
    let def = IndexDef::parse(&doc! {"key": {"b": 1}}).unwrap();
    let n = st.next_index_ident;
    db.engine
        .create_table(&table_name_index(&c.uuid, n), &db.cfg.index_table)
        .unwrap();
    let _ = db.build_index(&c, &st, def, n, &Interrupt::none());
}

#[test]
#[should_panic(expected = "index positions ascend")]
fn drop_indexes_refuses_a_position_twice() {
    let (_db, c) = setup();
    let mut st = c.state.write();
    ddl::remove_indexes(&mut st, &[1, 1]);
}

#[test]
#[should_panic(expected = "the _id index is not among them")]
fn drop_indexes_refuses_the_id_index() {
    let (_db, c) = setup();
    let mut st = c.state.write();
    ddl::remove_indexes(&mut st, &[0]);
}

#[test]
#[should_panic(expected = "unique keys are checked on unique indexes only")]
fn unique_checks_refuse_a_non_unique_index() {
    let (_db, c) = setup();
    let st = c.state.read();
    let keys = c.keys_for(&st, &doc! {"_id": 3, "a": 3}).unwrap();
    drop(c.check_unique(&st, 3, &[(1, &keys[1].keys[0])]));
}

#[test]
#[should_panic(expected = "the counts stay whole")]
fn counts_refuse_a_removal_never_counted() {
    let (_db, c) = setup();
    assert_eq!(c.counts().unwrap().0, 1);
    let d = doc! {"_id": 1, "a": 1};
    c.count_write(Some(&d), None).unwrap();
    let _ = c.count_write(Some(&d), None);
}
