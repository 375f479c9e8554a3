//! The TRIM batcher: turns the engine's `Free` events into batched TRIMs (seed 002 §3, §4.6:
//! "trim frequency" k — save k freed extents, then trim them at once; k = 15 000–20 000 was
//! best there).
//!
//! [`TrimBatcher`] (`trim.when: free`, the default and the only mode usable online): collects
//! `Free` extents — space that no durable checkpoint can reach any more — and releases them
//! when k extents have been collected since the last release, adjacent extents of one file
//! merged, in (file, offset) order. Because the engine may reuse a freed extent at once, a
//! later `Write` that overlaps a pending extent clips it (the overlapped part is dropped, the
//! rest stays pending); a truncation clips what lies past the new end; removing a file drops
//! its pending extents (the filesystem frees the whole file itself). [`TrimBatcher::flush`]
//! releases everything now (on demand, e.g. at shutdown).
//!
//! `trim.when: replace` ([`ReplaceTrimmer`], simulator only): the paper's "trim at address
//! replacement" — when a page (`page_id`) is written at a new offset, its previous extent is
//! queued for TRIM at once (batched the same way), without waiting for the `Free`. On a real
//! file that is unsafe: the previous extent still belongs to the last durable checkpoint until
//! the next checkpoint commits, and a crash before then would recover from a checkpoint whose
//! blocks were discarded (reads of trimmed blocks return zeroes → checksum failures, a lost
//! database). WiredTiger 2.x in seed 002 got away with it only because nobody crashed it. The
//! type can therefore only be built inside this crate, by the offline replay
//! ([`crate::sim`]); `Free` events are ignored in this mode (as in the paper, which trimmed
//! only at replacement).

use crate::event::{Event, FileId};
use std::collections::BTreeMap;
#[cfg(any(test, feature = "sim"))]
use std::collections::HashMap;

/// When freed space is trimmed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum TrimWhen {
    /// At the `Free` event (safe; online and offline).
    Free,
    /// At address replacement (simulator only; see the module doc).
    Replace,
}

impl TrimWhen {
    pub fn parse(s: &str) -> Result<TrimWhen, String> {
        match s {
            "free" => Ok(TrimWhen::Free),
            "replace" => Ok(TrimWhen::Replace),
            o => Err(format!("unknown trim mode {o:?} (free, replace)")),
        }
    }
    pub fn name(self) -> &'static str {
        match self {
            TrimWhen::Free => "free",
            TrimWhen::Replace => "replace",
        }
    }
}

/// One byte range of a file to trim (punch a hole in).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TrimExtent {
    pub file: FileId,
    pub offset: u64,
    pub len: u64,
}

/// What the batcher did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct TrimStats {
    /// Extents collected (`Free` events, or replaced extents).
    pub collected: u64,
    pub collected_bytes: u64,
    /// Batches released (automatic and flushes that released something).
    pub batches: u64,
    /// Merged extents released, and their bytes.
    pub released_extents: u64,
    pub released_bytes: u64,
    /// Pending bytes dropped because a later write overlapped them.
    pub cancelled_bytes: u64,
    /// Pending bytes dropped by truncation or file removal.
    pub dropped_bytes: u64,
}

/// `Free` extents → batched, merged TRIMs (see the module doc).
#[derive(Clone, Debug)]
pub struct TrimBatcher {
    batch: usize,
    /// Pending extents, disjoint and non-adjacent: (file, offset) → end.
    pending: BTreeMap<(FileId, u64), u64>,
    since_release: usize,
    stats: TrimStats,
}

impl TrimBatcher {
    /// Releases after every `batch` collected extents (`batch` ≥ 1; 1 = trim each at once).
    pub fn new(batch: usize) -> Self {
        TrimBatcher {
            batch: batch.max(1),
            pending: BTreeMap::new(),
            since_release: 0,
            stats: TrimStats::default(),
        }
    }

    pub fn stats(&self) -> TrimStats {
        self.stats
    }

    /// Pending (merged) extents.
    pub fn pending(&self) -> usize {
        self.pending.len()
    }

    /// Feeds one event (in trace order, writes included); extents to trim now are appended to
    /// `out`.
    pub fn observe(&mut self, ev: &Event, out: &mut Vec<TrimExtent>) {
        match ev {
            Event::Free {
                file, offset, len, ..
            } => self.add(*file, *offset, *len, out),
            Event::Write(w) => {
                let n = self.clip(w.file, w.offset, w.offset + w.len as u64);
                self.stats.cancelled_bytes += n;
            }
            Event::FileTruncate { file, len, .. } => {
                let n = self.clip(*file, *len, u64::MAX);
                self.stats.dropped_bytes += n;
            }
            Event::FileRemove { file, .. } => {
                let n = self.clip(*file, 0, u64::MAX);
                self.stats.dropped_bytes += n;
            }
            _ => {}
        }
    }

    /// Collects one extent; releases a batch when `batch` have been collected.
    pub fn add(&mut self, file: FileId, offset: u64, len: u64, out: &mut Vec<TrimExtent>) {
        if len == 0 {
            return;
        }
        self.stats.collected += 1;
        self.stats.collected_bytes += len;
        let (mut start, mut end) = (offset, offset + len);
        // Merge with a predecessor that overlaps or touches.
        if let Some((&(f, s), &e)) = self.pending.range(..=(file, start)).next_back() {
            if f == file && e >= start {
                start = s;
                end = end.max(e);
                self.pending.remove(&(f, s));
            }
        }
        // And with successors that start at or before the end.
        while let Some((&(f, s), &e)) = self.pending.range((file, start)..).next() {
            if f != file || s > end {
                break;
            }
            end = end.max(e);
            self.pending.remove(&(f, s));
        }
        self.pending.insert((file, start), end);
        self.since_release += 1;
        if self.since_release >= self.batch {
            self.flush(out);
        }
    }

    /// Releases every pending extent now.
    pub fn flush(&mut self, out: &mut Vec<TrimExtent>) {
        self.since_release = 0;
        if self.pending.is_empty() {
            return;
        }
        self.stats.batches += 1;
        for ((file, offset), end) in std::mem::take(&mut self.pending) {
            self.stats.released_extents += 1;
            self.stats.released_bytes += end - offset;
            out.push(TrimExtent {
                file,
                offset,
                len: end - offset,
            });
        }
    }

    /// Removes `[start, end)` of `file` from the pending extents; returns the bytes removed.
    fn clip(&mut self, file: FileId, start: u64, end: u64) -> u64 {
        if self.pending.is_empty() || start >= end {
            return 0;
        }
        let mut hit: Vec<(u64, u64)> = Vec::new();
        if let Some((&(f, s), &e)) = self.pending.range(..(file, start)).next_back() {
            if f == file && e > start {
                hit.push((s, e));
            }
        }
        for (&(f, s), &e) in self.pending.range((file, start)..) {
            if f != file || s >= end {
                break;
            }
            hit.push((s, e));
        }
        let mut removed = 0;
        for (s, e) in hit {
            self.pending.remove(&(file, s));
            if s < start {
                self.pending.insert((file, s), start);
            }
            if e > end {
                self.pending.insert((file, end), e);
            }
            removed += e.min(end) - s.max(start);
        }
        removed
    }
}

/// `trim.when: replace` — simulator only (see the module doc); built by [`crate::sim`].
#[cfg(any(test, feature = "sim"))]
#[derive(Clone, Debug)]
pub struct ReplaceTrimmer {
    batcher: TrimBatcher,
    /// (file, page_id) → its current extent (offset, len).
    pages: HashMap<(FileId, u64), (u64, u64)>,
    /// (file, offset) → (end, page_id): extents still holding the image their page wrote.
    owner: BTreeMap<(FileId, u64), (u64, u64)>,
}

#[cfg(any(test, feature = "sim"))]
impl ReplaceTrimmer {
    /// Crate-private on purpose: this mode must never drive a real file.
    pub(crate) fn new(batch: usize) -> Self {
        ReplaceTrimmer {
            batcher: TrimBatcher::new(batch),
            pages: HashMap::new(),
            owner: BTreeMap::new(),
        }
    }

    pub fn stats(&self) -> TrimStats {
        self.batcher.stats()
    }

    pub fn flush(&mut self, out: &mut Vec<TrimExtent>) {
        self.batcher.flush(out);
    }

    fn drop_owners(&mut self, file: FileId, start: u64, end: u64) {
        let mut hit = Vec::new();
        if let Some((&(f, s), &(e, _))) = self.owner.range(..(file, start)).next_back() {
            if f == file && e > start {
                hit.push(s);
            }
        }
        for (&(f, s), _) in self.owner.range((file, start)..) {
            if f != file || s >= end {
                break;
            }
            hit.push(s);
        }
        for s in hit {
            self.owner.remove(&(file, s));
        }
    }

    pub fn observe(&mut self, ev: &Event, out: &mut Vec<TrimExtent>) {
        match ev {
            Event::Write(w) => {
                let end = w.offset + w.len as u64;
                // The overwritten images are gone: never trim them later.
                self.drop_owners(w.file, w.offset, end);
                self.batcher.observe(ev, out);
                if w.page_id != 0 {
                    let key = (w.file, w.page_id);
                    if let Some((off, len)) = self.pages.insert(key, (w.offset, w.len as u64)) {
                        if self.owner.get(&(w.file, off)) == Some(&(off + len, w.page_id)) {
                            self.owner.remove(&(w.file, off));
                            self.batcher.add(w.file, off, len, out);
                        }
                    }
                    self.owner.insert((w.file, w.offset), (end, w.page_id));
                }
            }
            Event::FileTruncate { file, len, .. } => {
                self.drop_owners(*file, *len, u64::MAX);
                self.batcher.observe(ev, out);
            }
            Event::FileRemove { file, .. } => {
                self.drop_owners(*file, 0, u64::MAX);
                self.pages.retain(|k, _| k.0 != *file);
                self.batcher.observe(ev, out);
            }
            // `Free` is ignored: the paper trims at replacement only.
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{FileKind, PageKind, WriteEvent};

    fn free(file: FileId, offset: u64, len: u64) -> Event {
        Event::Free {
            time_ns: 0,
            file,
            offset,
            len,
        }
    }
    fn write(file: FileId, offset: u64, len: u32, page_id: u64) -> Event {
        Event::Write(WriteEvent {
            time_ns: 0,
            file,
            file_kind: FileKind::Collection,
            table: 1,
            page_kind: PageKind::Leaf,
            offset,
            len,
            id_index: false,
            stream: 0,
            page_id,
            cause: crate::event::WriteCause::Other,
        })
    }
    fn ext(file: FileId, offset: u64, len: u64) -> TrimExtent {
        TrimExtent { file, offset, len }
    }

    #[test]
    fn batches_of_k_merge_adjacent_extents_of_one_file() {
        let mut t = TrimBatcher::new(4);
        let mut out = vec![];
        t.observe(&free(1, 8192, 4096), &mut out);
        t.observe(&free(1, 0, 4096), &mut out);
        t.observe(&free(2, 4096, 4096), &mut out); // same offsets, other file: not merged
        assert!(out.is_empty());
        assert_eq!(t.pending(), 3);
        t.observe(&free(1, 4096, 4096), &mut out); // 4th: fills the gap, batch released
        assert_eq!(out, vec![ext(1, 0, 12288), ext(2, 4096, 4096)]);
        assert_eq!(t.pending(), 0);
        let s = t.stats();
        assert_eq!(
            (s.collected, s.batches, s.released_extents, s.released_bytes),
            (4, 1, 2, 16384)
        );
        // The count restarts after a release.
        out.clear();
        for i in 0..3 {
            t.observe(&free(1, i * 65536, 4096), &mut out);
        }
        assert!(out.is_empty());
        t.flush(&mut out);
        assert_eq!(out.len(), 3);
    }

    #[test]
    fn a_later_write_cancels_or_clips_a_pending_trim() {
        let mut t = TrimBatcher::new(100);
        let mut out = vec![];
        t.observe(&free(1, 0, 16384), &mut out);
        t.observe(&free(1, 65536, 4096), &mut out);
        // Reuse of the middle of the first extent, and all of the second.
        t.observe(&write(1, 4096, 8192, 7), &mut out);
        t.observe(&write(1, 65536, 4096, 8), &mut out);
        // Another file's write at the same offsets changes nothing.
        t.observe(&write(2, 0, 16384, 9), &mut out);
        t.flush(&mut out);
        assert_eq!(out, vec![ext(1, 0, 4096), ext(1, 12288, 4096)]);
        assert_eq!(t.stats().cancelled_bytes, 8192 + 4096);
    }

    #[test]
    fn removal_drops_and_truncation_clips_pending_trims() {
        let mut t = TrimBatcher::new(100);
        let mut out = vec![];
        t.observe(&free(1, 0, 8192), &mut out);
        t.observe(&free(2, 0, 8192), &mut out);
        t.observe(&free(3, 0, 8192), &mut out);
        t.observe(
            &Event::FileRemove {
                time_ns: 0,
                file: 2,
            },
            &mut out,
        );
        t.observe(
            &Event::FileTruncate {
                time_ns: 0,
                file: 3,
                len: 4096,
            },
            &mut out,
        );
        t.flush(&mut out);
        assert_eq!(out, vec![ext(1, 0, 8192), ext(3, 0, 4096)]);
        assert_eq!(t.stats().dropped_bytes, 8192 + 4096);
    }

    #[test]
    fn batch_of_one_trims_each_free_at_once() {
        let mut t = TrimBatcher::new(1);
        let mut out = vec![];
        t.observe(&free(1, 0, 4096), &mut out);
        assert_eq!(out, vec![ext(1, 0, 4096)]);
        t.observe(&free(1, 4096, 4096), &mut out);
        assert_eq!(out.len(), 2);
    }

    #[test]
    fn replace_mode_trims_a_pages_previous_extent_when_it_moves() {
        let mut r = ReplaceTrimmer::new(1);
        let mut out = vec![];
        r.observe(&write(1, 0, 8192, 5), &mut out); // page 5 at 0
        r.observe(&write(1, 8192, 4096, 6), &mut out); // page 6 at 8192
        assert!(out.is_empty());
        r.observe(&write(1, 16384, 8192, 5), &mut out); // page 5 moves: trim its old extent
        assert_eq!(out, vec![ext(1, 0, 8192)]);
        // Frees are ignored in this mode.
        r.observe(&free(1, 8192, 4096), &mut out);
        assert_eq!(out.len(), 1);
        // Page 7 takes page 6's extent (it was freed and reused); page 6 then moves: its old
        // extent holds page 7 now and must not be trimmed.
        r.observe(&write(1, 8192, 4096, 7), &mut out);
        r.observe(&write(1, 32768, 4096, 6), &mut out);
        assert_eq!(out.len(), 1);
        // Page 5 rewritten in place (same offset): nothing to trim.
        r.observe(&write(1, 16384, 8192, 5), &mut out);
        assert_eq!(out.len(), 1);
        // Batched like the free mode.
        let mut b = ReplaceTrimmer::new(2);
        let mut out = vec![];
        b.observe(&write(1, 0, 4096, 1), &mut out);
        b.observe(&write(1, 4096, 4096, 2), &mut out);
        b.observe(&write(1, 8192, 4096, 1), &mut out);
        assert!(out.is_empty());
        b.observe(&write(1, 12288, 4096, 2), &mut out);
        assert_eq!(out, vec![ext(1, 0, 8192)]);
    }
}
