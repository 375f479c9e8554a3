//! A synthetic WiredTiger-like event stream with the two-region heat swap of seed 000 Fig. 3
//! (and seed 003 Fig. 2), for tests and for `flashdoc placement replay` without an engine.
//!
//! The model (deterministic given the seed):
//! - **Load**: each table file gets a 4 KB descriptor block, then its pages written once, in
//!   order, appended at the end of the file; tables interleaved; checkpoints every
//!   `load_window_writes` table writes. `end_of_load` is the index of the first event after the
//!   load's last checkpoint (and its `Free`s).
//! - **Update windows** (one checkpoint each): a table's page writes pick a *hot* page
//!   (`hot_share` of writes, uniform over `hot_fraction` of its pages) or a cold one. In window
//!   k a table file has an *active* region ((k + phase) mod 2): hot pages are written there,
//!   cold pages in the other one — the asymmetric, swapping region heat of Fig. 3. Region 0 is
//!   the file as loaded, region 1 what lies past it.
//! - **Space reuse as in WiredTiger** (docs/engine.md): a page image moves at every write
//!   (copy-on-write). Its old extent is reusable at once (and announced `Free` at once) if it
//!   was written in the same window; otherwise the last durable checkpoint still references
//!   it, and it is freed (`Free`) right after the next checkpoint commit. Allocation takes the
//!   lowest free slot of the wanted region, else appends at the end of the file. The active
//!   region's free slots are exactly what the previous commit released — the hot pages'
//!   images of two windows ago — which is what makes the heat swap.
//! - **Append-only tables** (a primary `_id` index under inserts): write their rightmost page
//!   or a new page at the end, a sequential pattern.
//! - **Checkpoint**: every table's internal pages (their own page ids, hot) and an extent-list
//!   block (`page_id` 0) in the active region; the previous checkpoint's extent-list block is
//!   freed after the commit. Metadata: `flashdoc.turtle.set` created, written, the old turtle
//!   removed, the new one renamed into place. Journal: a new file per window, appended in
//!   4 KB group commits (`journal_share` of the table bytes), files before the current one
//!   removed after the commit.

use crate::event::{Event, FileId, FileKind, PageKind, WriteEvent};
use std::collections::BTreeSet;

const UNIT: u64 = 4096;

/// One table file of the synthetic database.
#[derive(Clone, Debug)]
pub struct SynthTable {
    pub name: String,
    pub kind: FileKind,
    pub id_index: bool,
    pub pages: u32,
    /// 4 KB units per page.
    pub page_units: u32,
    /// Share of the update phase's page writes.
    pub share: f64,
    pub hot_fraction: f64,
    pub hot_share: f64,
    /// Offsets this table's region swap by one window.
    pub phase: u32,
    pub append_only: bool,
}

#[derive(Clone, Debug)]
pub struct SynthConfig {
    pub seed: u64,
    pub windows: u32,
    pub window_ns: u64,
    /// Table page writes per update window (checkpoint writes excluded).
    pub writes_per_window: u32,
    pub load_window_writes: u32,
    /// Journal bytes per table byte written.
    pub journal_share: f64,
    pub tables: Vec<SynthTable>,
}

impl SynthConfig {
    /// A LinkBench-like database: two collections, a secondary index, a primary index.
    pub fn linkbench_like(seed: u64) -> SynthConfig {
        let t = |name: &str, kind, pages, units, share, hf, hs, phase, append| SynthTable {
            name: name.into(),
            kind,
            id_index: append,
            pages,
            page_units: units,
            share,
            hot_fraction: hf,
            hot_share: hs,
            phase,
            append_only: append,
        };
        SynthConfig {
            seed,
            windows: 100,
            window_ns: 1_000_000_000,
            writes_per_window: 600,
            load_window_writes: 1000,
            journal_share: 0.1,
            tables: vec![
                t(
                    "collection-link",
                    FileKind::Collection,
                    3000,
                    2,
                    0.55,
                    0.1,
                    0.8,
                    0,
                    false,
                ),
                t(
                    "collection-count",
                    FileKind::Collection,
                    1000,
                    1,
                    0.1,
                    0.2,
                    0.7,
                    1,
                    false,
                ),
                t(
                    "index-link-id1",
                    FileKind::Index,
                    1500,
                    1,
                    0.3,
                    0.1,
                    0.8,
                    1,
                    false,
                ),
                t(
                    "index-link-_id",
                    FileKind::Index,
                    500,
                    1,
                    0.05,
                    0.0,
                    0.0,
                    0,
                    true,
                ),
            ],
        }
    }
}

/// The events and where the load phase ends.
#[derive(Clone, Debug)]
pub struct SynthTrace {
    pub events: Vec<Event>,
    /// Index of the first event after the load phase (call `end_of_load` before it).
    pub end_of_load: usize,
}

/// splitmix64: a small deterministic generator (no dependency).
struct Rng(u64);
impl Rng {
    fn next(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n.max(1)
    }
    fn unit(&mut self) -> f64 {
        (self.next() >> 11) as f64 / (1u64 << 53) as f64
    }
}

struct Page {
    id: u64,
    offset: u64,
    /// Window of its current image (its extent is reusable at once if rewritten in it).
    window: u32,
}

struct TableState {
    cfg: SynthTable,
    file: FileId,
    table: u32,
    pages: Vec<Page>,
    internal: Vec<Page>,
    extent_list: Option<Page>,
    avail: [BTreeSet<u64>; 2],
    pending: Vec<u64>,
    /// Free 4 KB slots of internal pages and extent lists, per region, and those waiting for
    /// the next commit.
    units_free: [BTreeSet<u64>; 2],
    pending_unit: Vec<u64>,
    eof: u64,
    boundary: u64,
    len: u64,
}

/// Whose page a write is: the file, its kind, the table (0: none) and whether it is an `_id`
/// index.
#[derive(Clone, Copy)]
struct Owner {
    file: FileId,
    kind: FileKind,
    table: u32,
    id_index: bool,
}

struct Gen {
    rng: Rng,
    ev: Vec<Event>,
    t: u64,
    next_file: FileId,
    next_page: u64,
    journal: Vec<FileId>,
    journal_off: u64,
    journal_debt: f64,
    journal_share: f64,
    turtle: Option<FileId>,
    ckpt: u64,
    window: u32,
}

impl Gen {
    fn tick(&mut self) -> u64 {
        self.t += 1000;
        self.t
    }
    fn file(&mut self, kind: FileKind, name: String) -> FileId {
        let f = self.next_file;
        self.next_file += 1;
        let t = self.tick();
        self.ev.push(Event::FileCreate {
            time_ns: t,
            file: f,
            kind,
            name,
        });
        f
    }
    fn write(&mut self, owner: Owner, pk: PageKind, off: u64, len: u64, page_id: u64) {
        let Owner {
            file,
            kind,
            table,
            id_index,
        } = owner;
        let t = self.tick();
        self.ev.push(Event::Write(WriteEvent {
            time_ns: t,
            file,
            file_kind: kind,
            table,
            page_kind: pk,
            offset: off,
            len: len as u32,
            id_index,
            stream: 0,
            page_id,
            cause: crate::event::WriteCause::Other,
        }));
    }
    fn free(&mut self, file: FileId, off: u64, len: u64) {
        let t = self.tick();
        self.ev.push(Event::Free {
            time_ns: t,
            file,
            offset: off,
            len,
        });
    }
    fn journal_bytes(&mut self, table_bytes: u64) {
        self.journal_debt += table_bytes as f64 * self.journal_share;
        while self.journal_debt >= UNIT as f64 {
            self.journal_debt -= UNIT as f64;
            let f = *self.journal.last().expect("a journal file");
            let off = self.journal_off;
            self.journal_off += UNIT;
            let journal = Owner {
                file: f,
                kind: FileKind::Journal,
                table: 0,
                id_index: false,
            };
            self.write(journal, PageKind::Log, off, UNIT, 0);
        }
    }
    fn new_journal(&mut self) {
        let n = self.journal.len() as u64 + self.ckpt;
        let f = self.file(FileKind::Journal, format!("journal/FlashdocLog.{n:010}"));
        self.journal.push(f);
        self.journal_off = 0;
    }
}

impl TableState {
    fn region_of(&self, off: u64) -> usize {
        (off >= self.boundary) as usize
    }
    fn alloc(&mut self, region: usize) -> u64 {
        let units = self.cfg.page_units as u64 * UNIT;
        let r =
            if self.avail[region].is_empty() && !self.avail[1 - region].is_empty() && region == 0 {
                1 - region
            } else {
                region
            };
        if let Some(off) = self.avail[r].pop_first() {
            off
        } else {
            let off = self.eof;
            self.eof += units;
            off
        }
    }
    fn owner(&self) -> Owner {
        Owner {
            file: self.file,
            kind: self.cfg.kind,
            table: self.table,
            id_index: self.cfg.id_index,
        }
    }
    fn alloc_unit(&mut self, region: usize) -> u64 {
        let r = if self.units_free[region].is_empty() {
            1 - region
        } else {
            region
        };
        if let Some(off) = self.units_free[r].pop_first() {
            off
        } else {
            let off = self.eof;
            self.eof += UNIT;
            off
        }
    }
    fn release(&mut self, off: u64) {
        let r = self.region_of(off);
        self.avail[r].insert(off);
    }
}

/// Generates the trace.
pub fn generate(cfg: &SynthConfig) -> SynthTrace {
    let mut g = Gen {
        rng: Rng(cfg.seed),
        ev: Vec::new(),
        t: 0,
        next_file: 1,
        next_page: 1,
        journal: Vec::new(),
        journal_off: 0,
        journal_debt: 0.0,
        journal_share: cfg.journal_share,
        turtle: None,
        ckpt: 0,
        window: 0,
    };
    g.new_journal();
    let mut tables = create_tables(&mut g, cfg);
    load(&mut g, &mut tables, cfg);
    for ts in tables.iter_mut() {
        ts.boundary = ts.eof;
    }
    let end_of_load = g.ev.len();
    for k in 1..=cfg.windows {
        run_window(&mut g, &mut tables, cfg, k);
    }
    SynthTrace {
        events: g.ev,
        end_of_load,
    }
}

/// Creates each table's file with its descriptor and numbers its internal pages.
fn create_tables(g: &mut Gen, cfg: &SynthConfig) -> Vec<TableState> {
    let mut tables: Vec<TableState> = Vec::new();
    for (i, tc) in cfg.tables.iter().enumerate() {
        let file = g.file(tc.kind, format!("{}.fdb", tc.name));
        let len = tc.page_units as u64 * UNIT;
        let owner = Owner {
            file,
            kind: tc.kind,
            table: i as u32 + 1,
            id_index: tc.id_index,
        };
        g.write(owner, PageKind::Descriptor, 0, UNIT, 0);
        let n_internal = (tc.pages / 100).max(1);
        let internal = (0..n_internal)
            .map(|_| {
                let id = g.next_page;
                g.next_page += 1;
                Page {
                    id,
                    offset: u64::MAX,
                    window: u32::MAX,
                }
            })
            .collect();
        tables.push(TableState {
            cfg: tc.clone(),
            file,
            table: i as u32 + 1,
            pages: Vec::new(),
            internal,
            extent_list: None,
            avail: [BTreeSet::new(), BTreeSet::new()],
            pending: Vec::new(),
            units_free: [BTreeSet::new(), BTreeSet::new()],
            pending_unit: Vec::new(),
            eof: UNIT,
            boundary: u64::MAX,
            len,
        });
    }
    tables
}

/// The load: round-robin appends of every page, a checkpoint every `load_window_writes`
/// pages and one at the end.
fn load(g: &mut Gen, tables: &mut [TableState], cfg: &SynthConfig) {
    let mut loaded = 0u32;
    let max_pages = cfg.tables.iter().map(|t| t.pages).max().unwrap_or(0);
    for p in 0..max_pages {
        for ti in 0..tables.len() {
            let ts = &mut tables[ti];
            if p >= ts.cfg.pages {
                continue;
            }
            let id = g.next_page;
            g.next_page += 1;
            let off = ts.alloc(1);
            g.write(ts.owner(), PageKind::Leaf, off, ts.len, id);
            g.journal_bytes(ts.len);
            ts.pages.push(Page {
                id,
                offset: off,
                window: 0,
            });
            loaded += 1;
            if loaded.is_multiple_of(cfg.load_window_writes.max(1)) {
                checkpoint(g, tables, 0);
            }
        }
    }
    checkpoint(g, tables, 0);
}

/// Window `k`: each table's share of the window's writes in a random interleaving, then a
/// checkpoint.
fn run_window(g: &mut Gen, tables: &mut [TableState], cfg: &SynthConfig, k: u32) {
    g.window = k;
    let start_t = g.t;
    let mut order: Vec<usize> = Vec::new();
    for (i, ts) in tables.iter().enumerate() {
        let n = (cfg.writes_per_window as f64 * ts.cfg.share).round() as usize;
        order.extend(std::iter::repeat_n(i, n));
    }
    for i in (1..order.len()).rev() {
        let j = g.rng.below(i as u64 + 1) as usize;
        order.swap(i, j);
    }
    for &i in &order {
        rewrite_page(g, &mut tables[i], k);
    }
    // Spread the window to its nominal length.
    g.t = g.t.max(start_t + cfg.window_ns - 100_000);
    checkpoint(g, tables, k);
}

/// One leaf write of window `k` to table `ts`: a new page of an append-only table, else a
/// hot page to the active region or a cold one to the other; the old copy is freed at once
/// when written this window, else at the next checkpoint.
fn rewrite_page(g: &mut Gen, ts: &mut TableState, k: u32) {
    let active = ((k + ts.cfg.phase) % 2) as usize;
    let (idx, region) = if ts.cfg.append_only {
        if g.rng.unit() < 0.5 {
            let id = g.next_page;
            g.next_page += 1;
            ts.pages.push(Page {
                id,
                offset: u64::MAX,
                window: u32::MAX,
            });
        }
        (ts.pages.len() - 1, 1)
    } else {
        let hot_n = ((ts.pages.len() as f64 * ts.cfg.hot_fraction) as usize).max(1);
        if g.rng.unit() < ts.cfg.hot_share {
            (g.rng.below(hot_n as u64) as usize, active)
        } else {
            let cold = ts.pages.len() - hot_n;
            (hot_n + g.rng.below(cold as u64) as usize, 1 - active)
        }
    };
    let off = ts.alloc(region);
    let old = std::mem::replace(
        &mut ts.pages[idx],
        Page {
            id: 0,
            offset: off,
            window: k,
        },
    );
    ts.pages[idx].id = old.id;
    let (file, len) = (ts.file, ts.len);
    g.write(ts.owner(), PageKind::Leaf, off, len, old.id);
    if old.offset != u64::MAX {
        if old.window == k {
            ts.release(old.offset);
            g.free(file, old.offset, len);
        } else {
            ts.pending.push(old.offset);
        }
    }
    g.journal_bytes(len);
}

fn checkpoint(g: &mut Gen, tables: &mut [TableState], k: u32) {
    g.ckpt += 1;
    let id = g.ckpt;
    let t = g.tick();
    g.ev.push(Event::CheckpointBegin { time_ns: t, id });
    for ts in tables.iter_mut() {
        let active = if ts.boundary == u64::MAX {
            1
        } else {
            ((k + ts.cfg.phase) % 2) as usize
        };
        let owner = ts.owner();
        // Internal pages and root (one internal-page unit each).
        for j in 0..ts.internal.len() {
            let off = ts.alloc_unit(active);
            let old = std::mem::replace(&mut ts.internal[j].offset, off);
            let pk = if j == 0 {
                PageKind::Root
            } else {
                PageKind::Internal
            };
            g.write(owner, pk, off, UNIT, ts.internal[j].id);
            if old != u64::MAX {
                ts.pending_unit.push(old);
            }
        }
        // Extent list (page_id 0); the previous checkpoint's goes to discard.
        let off = ts.alloc_unit(active);
        g.write(owner, PageKind::ExtentList, off, UNIT, 0);
        if let Some(old) = ts.extent_list.replace(Page {
            id: 0,
            offset: off,
            window: k,
        }) {
            ts.pending_unit.push(old.offset);
        }
    }
    // Metadata commit.
    let set = g.file(FileKind::Metadata, "flashdoc.turtle.set".into());
    let metadata = Owner {
        file: set,
        kind: FileKind::Metadata,
        table: 0,
        id_index: false,
    };
    g.write(metadata, PageKind::Descriptor, 0, UNIT, 0);
    let t = g.tick();
    if let Some(old) = g.turtle.replace(set) {
        g.ev.push(Event::FileRemove {
            time_ns: t,
            file: old,
        });
    }
    let t = g.tick();
    g.ev.push(Event::FileRename {
        time_ns: t,
        file: set,
        name: "flashdoc.turtle".into(),
    });
    let t = g.tick();
    g.ev.push(Event::CheckpointCommit { time_ns: t, id });
    // Resolve: what only the previous checkpoint held is free now.
    for ts in tables.iter_mut() {
        for off in std::mem::take(&mut ts.pending) {
            ts.release(off);
            g.free(ts.file, off, ts.len);
        }
        for off in std::mem::take(&mut ts.pending_unit) {
            let r = ts.region_of(off);
            ts.units_free[r].insert(off);
            g.free(ts.file, off, UNIT);
        }
    }
    // Journal files the checkpoint covers are removed; a new one starts.
    let old: Vec<FileId> = std::mem::take(&mut g.journal);
    g.new_journal();
    for f in old {
        let t = g.tick();
        g.ev.push(Event::FileRemove {
            time_ns: t,
            file: f,
        });
    }
}
