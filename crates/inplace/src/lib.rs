//! flashdoc's in-place engine in MMAPv1's design (`storage.engine: mmapv1`), beside the
//! copy-on-write engine behind the same [`engine::KvEngine`] interface.
//!
//! # Layout
//!
//! - **Data files** `mmapv1.0`, `mmapv1.1`, … double in size (1 MiB up to 2 GiB; MMAPv1 began
//!   at 64 MiB) and hold **extents**; each table's extents are chained and grow by doubling
//!   (`space`). File 0's first page is the database header, which also holds the catalog's
//!   details. A table's extents, used or not, are its `storageSize` in collStats, as in
//!   MMAPv1 ([`InPlaceEngine::table_extent_bytes`]); `compact` copies a table into fresh
//!   extents and hands the old ones to the free extent list: the data files never shrink.
//! - **Records** are padded to a power of two (MongoDB 3.0's default allocation,
//!   `usePowerOf2Sizes`). An update whose value fits its record is rewritten in place; one that
//!   outgrows it moves to a new record and the old one goes to its table's **free list** for
//!   its size class, linked through its own bytes, reused before the extent's tail (`space`).
//! - Every table's keys are indexed by a **B-tree of fixed-size 8 KiB buckets**, updated in
//!   place, mapping each key to its record's location (MMAPv1's `DiskLoc`) (`btree`). Keys are
//!   limited to 1 024 bytes, MMAPv1's own limit.
//! - The **catalog** (MMAPv1's `.ns` file) is table 0: each table's name mapped to a record of
//!   its namespace details (index root, extents, free list heads, count), rewritten in place,
//!   and its configuration.
//!
//! # Pages and the I/O seam
//!
//! MMAPv1 memory-mapped its files. Here the pages live in an engine-managed pool over file
//! offsets (`pool`) and are written back in place through the engine's I/O seam, so flash
//! placement, write-life hints, traces and the power-loss backend all see every write. An
//! overwrite of a page that held an earlier version is announced as that version's death (a
//! `Free` of the range just before the write). Write-back runs every `storage.syncPeriodSecs`
//! (60 s), at `checkpoint()`, at `close()`, and when dirty pages pass half the cache size.
//!
//! # Journal and crash safety
//!
//! Every batch appends one redo record to the journal (`journal/j._N`), group-committed every
//! `storage.journal.commitIntervalMs` (100 ms); a `sync: true` write waits until its record is
//! synced. The record holds **full page images**: the whole page the first time a page changes
//! after a write-back, only the changed bytes after that (PostgreSQL's `full_page_writes`;
//! MMAPv1 journaled each changed region). The choice against a double-write area: an in-place
//! write-back can tear a page, leaving any mix of old and new sectors (or garbage) in it, and
//! the changed regions alone cannot rebuild the bytes around them; a full image can, and a
//! page is imaged once per write-back interval, where a double-write area writes every page
//! twice at every write-back. So a write-back is: commit the journal, write every dirty page
//! in place, sync the data files, then start a new journal file and remove the old one. A
//! crash anywhere in it leaves the old journal, and recovery rewrites its images and regions
//! onto the data files in order, repairing any torn page; replaying twice is harmless. Without
//! a journal (`storage.journal.enabled: false`) a `sync: true` write waits for a write-back,
//! and a crash during a write-back can tear a page (as MMAPv1 with `--nojournal`).
//!
//! Recovery tells a crash's torn tail from corruption by the copy-on-write journal's rule
//! (`replay`; docs/journal.md, "The in-place engine's journal"): the committer marks each
//! commit's first record, so a damaged record followed by a marked one was synced, and the
//! open is refused, naming the file and the offset, before anything is replayed.
//!
//! # Snapshots and locking
//!
//! The locking granularity is **one lock per database** (the engine), as MMAPv1 2.2–2.8 had
//! (3.0 had one per collection): each batch, point read and cursor batch holds it briefly; a
//! write-back holds it while the dirty pages are written. There is no document-level
//! concurrency. Snapshot reads never hold it between batches: each batch gets a sequence
//! number, a snapshot is a registered sequence number, and while any snapshot is live each
//! write keeps the value it replaces in memory (`versions`); a read at a snapshot takes the
//! kept version when a later batch changed the key. Versions no live snapshot needs are
//! dropped. Readers never block writers for longer than one batch. The kept versions are
//! capped at half the cache size (`cacheSizeGB`), at least 4 MiB: past the cap the oldest
//! live snapshot is given up, and every later read at it fails with `SnapshotTooOld` (239),
//! never with a newer value (`versions`).
//!
//! Not given (the server refuses them by name): transactions, `readConcern: "snapshot"`,
//! change streams, replica sets, block and journal compression, direct I/O, and flash mode's
//! allocation policy and dirty budget (reported `n/a`).

mod btree;
mod compact;
mod db;
mod journal;
mod kv;
mod loc;
mod pool;
mod replay;
mod space;
mod state;
mod stats;
mod versions;

pub use crate::db::InPlaceEngine;

#[cfg(test)]
mod tests;
