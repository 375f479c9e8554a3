//! What the engine's trace tells a placement policy and the replay: each write-back marked as
//! a checkpoint, an overwrite announced as the death of the page it replaces, and one page id
//! per place.

use super::{config, put_sync, table_cfg};
use crate::InPlaceEngine;
use engine::KvEngine;
use placement::{CollectingObserver, Event, FileKind, WriteEvent};
use std::sync::Arc;

fn data_writes(events: &[Event]) -> Vec<&WriteEvent> {
    events
        .iter()
        .filter_map(|e| match e {
            Event::Write(w) if w.file_kind == FileKind::Collection => Some(w),
            _ => None,
        })
        .collect()
}

#[test]
fn a_write_back_is_a_checkpoint_and_an_overwrite_kills_the_page_it_replaces() {
    let dir = tempfile::tempdir().unwrap();
    let obs = Arc::new(CollectingObserver::new());
    let mut cfg = config(dir.path());
    cfg.observer = Some(obs.clone());
    let e = InPlaceEngine::open(cfg).unwrap();
    let t = e.create_table("t", &table_cfg()).unwrap();
    // Formatting a new database writes its first pages before any checkpoint: not these.
    obs.take();
    put_sync(&e, t, b"k", &[1; 100]);
    e.checkpoint().unwrap();
    let first = obs.take();
    put_sync(&e, t, b"k", &[2; 100]);
    e.checkpoint().unwrap();
    let second = obs.take();

    // Each write-back is bracketed by a checkpoint's begin and commit, every data page
    // written between them; the ids count up.
    let mut ids = Vec::new();
    for events in [&first, &second] {
        let marks: Vec<(usize, bool, u64)> = events
            .iter()
            .enumerate()
            .filter_map(|(i, ev)| match ev {
                Event::CheckpointBegin { id, .. } => Some((i, true, *id)),
                Event::CheckpointCommit { id, .. } => Some((i, false, *id)),
                _ => None,
            })
            .collect();
        let [(begin, true, id), (commit, false, same)] = marks[..] else {
            panic!("one begin, then one commit: {marks:?}");
        };
        assert_eq!(id, same);
        let inside = data_writes(&events[begin..commit]).len();
        assert!(
            inside > 0 && inside == data_writes(events).len(),
            "{events:?}"
        );
        ids.push(id);
    }
    assert_eq!(ids[1], ids[0] + 1);
    // The update in place rewrites the record's page where it was: that place's earlier
    // version dies (a Free of the page just before the write), under the same page id.
    let rewritten = data_writes(&second);
    let earlier = data_writes(&first);
    let mut killed = 0;
    for (i, ev) in second.iter().enumerate() {
        let Event::Write(w) = ev else { continue };
        let Some(old) = earlier
            .iter()
            .find(|o| o.file == w.file && o.offset == w.offset)
        else {
            continue;
        };
        assert_eq!(old.page_id, w.page_id, "one page id per place");
        assert!(
            matches!(&second[i - 1], Event::Free { file, offset, len, .. }
                if *file == w.file && *offset == w.offset && *len == u64::from(w.len)),
            "an overwrite follows the death of what it replaces: {:?}",
            &second[i - 1]
        );
        killed += 1;
    }
    assert!(killed > 0 && killed <= rewritten.len(), "{second:?}");
    e.close().unwrap();
}
