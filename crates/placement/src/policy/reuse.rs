//! `reuse` (flashdoc's own, after SepBIT, FAST'22, and MiDAS, FAST'24): a table write goes to
//! the stream of the *age of the data it overwrites at the same address*.
//!
//! Why: without TRIM the device learns that a block is dead only when its LBA is written
//! again, so a block's device lifetime is the time until its *address* is reused — decided by
//! the allocator's reuse order, not by the page's history (docs/placement.md, "what predicts
//! a death": a page's previous lifetime says nothing, correlation 0.003). SepBIT's
//! observation is about addresses: a write that invalidates a block which lived a short
//! time tends itself to be invalidated soon, because the address sits in a part of the
//! address space that is reused quickly. A file's offset is an address the policy sees
//! without knowing the filesystem: while a file lives its offsets keep their LBAs, so the
//! age of the data at an offset when it is overwritten is the age of that LBA's block on the
//! device. Nothing here needs a logical page id, so it works on real WiredTiger traces
//! captured through the shim (file, offset, length, kind only).
//!
//! SepBIT uses the overwritten block's age as the new block's lifetime directly. Measured on
//! real WiredTiger traces that alone predicts little (YCSB: the mean device lifetime moves by
//! under half an octave across 10 octaves of overwritten age; LinkBench: by about two, and
//! the files differ by as much), so, as DOGI does, `reuse` *learns* what each signal means:
//!
//! - **Clock**: host 4 KB pages written (every write, journal included).
//! - **Signal** of a table write: its file and the octave of the age of the data it
//!   overwrites (the geometric mean over its pages that held data; `fresh` when none did:
//!   the file grows, or the load).
//! - **Learning**: every page remembers when it was written and its write's signal. When the
//!   page is overwritten, its age then is the *realized* lifetime of that block on the device
//!   (the address is reused). Means of realized lifetimes are biased: the short lives are
//!   realized first, the long ones late or never (measured: a signal's mean learned that way
//!   sent long-lived writes of a WiredTiger YCSB trace to the short stream). So `reuse`
//!   counts instead, per signal and per file kind (collections, indexes): the pages written,
//!   and the pages that died *young* — before the kind's typical lifetime (the running mean
//!   of its realized log₂ lifetimes, older samples × `memory` per new one). Recent writes
//!   have not had the time to die young for every signal alike, so the ratio of two young
//!   shares is fair while each alone is not. Counts are multiplied by `decay` at each
//!   checkpoint commit, so the policy follows a workload that changes.
//! - **Classes** (MiDAS adapts its groups to the workload; here the reference adapts): a
//!   signal with at least `min_samples` pages written is *long* when its young share is at
//!   most 1/`ratio` of its kind's, *short* when its old share (not dead young) is at most
//!   1/`ratio` of its kind's; anything else is *usual*. Usual writes take `file`'s streams
//!   (collections 2, indexes 3), so a trace whose signals all predict the same is placed
//!   exactly as `file` places it: splitting writes by a signal that predicts nothing costs
//!   more than it buys (measured: splitting the usual writes of a real WiredTiger YCSB trace
//!   into age classes raised WAF from 4.65 to 4.96), because it separates blocks written
//!   together, which tend to die together.
//! - **A class opens its stream only when it carries `min_share` of its kind's writes**
//!   (page-weighted, counted per checkpoint window and decayed like the counts) at
//!   `OPEN_AFTER` commits in a row, and closes at the first commit where it falls below:
//!   every open stream holds a partly written erase block, so a stream that
//!   takes a trickle costs the device over-provisioning for nothing (measured on the same
//!   trace: moving 0.3 % of the writes to a long stream raised WAF by 3 %). A class below
//!   its share is placed as usual.
//! - **GC-rewritten blocks** are the device's business: the simulator's garbage collector
//!   (like a real drive's) relocates into its own write point (`ssd::GcDest`), which no host
//!   policy can steer. SepBIT's separation of user from GC writes is that write point; its
//!   age classes for GC writes are not available to a host.
//!
//! | streams | metadata | journal | collections usual, long, short | indexes usual, long, short |
//! | --- | --- | --- | --- | --- |
//! | ≥ 8 | 0 | 1 | 2, 4, 6 | 3, 5, 7 |
//! | 7 | 0 | 1 | 2, 4, 6 | 3, 5, 3 |
//! | 6 | 0 | 1 | 2, 4, 2 | 3, 5, 3 |
//! | 5 | 0 | 1 | 2, 4, 2 | 3, 4, 3 |
//! | 4 | 0 | 1 | 2 | 3 |
//! | 3 | 0 | 0 | 1 | 2 |
//! | 2 | 0 | 0 | 1 | 1 |
//!
//! The long classes get streams before the short ones: a long-lived block mixed with usual
//! ones is what GC copies again and again.
//!
//! Deterministic and online: its state is a function of the events it has seen, in order
//! (tested: the streams it chose on a prefix of a trace are those it chooses on the whole).

use super::{PlacementConfig, Policy, ReuseConfig, PAGE_SIZE};
use crate::event::{Event, FileId, FileKind, WriteEvent};
use std::collections::HashMap;

/// The age octave of a write that overwrote nothing.
const FRESH: u8 = u8::MAX;
/// A page slot: 1 + the clock at its last write, shifted past the 8-bit age octave of that
/// write's signal; 0 = never written.
const SIGNAL_BITS: u32 = 8;
/// Commits in a row at which a class must have its share before its stream opens.
const OPEN_AFTER: u8 = 3;

/// A prediction's class against its file kind's mean.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Class {
    Usual = 0,
    Long = 1,
    Short = 2,
}

/// Pages written and pages that died young, for a signal or a file kind.
#[derive(Clone, Copy, Debug, Default)]
struct Deaths {
    written: f64,
    young: f64,
}

impl Deaths {
    fn young_share(&self) -> f64 {
        self.young / self.written.max(1.0)
    }
    fn old_share(&self) -> f64 {
        1.0 - self.young_share()
    }
}

#[derive(Clone, Debug)]
pub struct ReusePolicy {
    cfg: ReuseConfig,
    metadata: u8,
    journal: u8,
    /// `table[class][kind]`: the stream of a collection (kind 0) or index (1) write.
    table: [[u8; 2]; 3],
    /// Host pages written so far.
    clock: u64,
    /// Per table file, per 4 KB page of it: a slot (see [`SIGNAL_BITS`]).
    pages: HashMap<FileId, Vec<u64>>,
    /// Per (file, age octave) signal and per file kind.
    by_signal: HashMap<(FileId, u8), Deaths>,
    by_kind: [Deaths; 2],
    /// Per file kind, the running mean of realized log₂ lifetimes: a death before it is young.
    typical: [f64; 2],
    /// Pages each class drew per file kind (`[kind][class]`), decayed at each commit, and
    /// whether the class had its share at the last commit.
    drawn: [[f64; 3]; 2],
    open: [[bool; 3]; 2],
    /// Commits in a row at which each class had its share.
    streak: [[u8; 3]; 2],
}

/// The stream map of the module's table.
fn stream_table(streams: u8) -> (u8, u8, [[u8; 2]; 3]) {
    match streams {
        s if s >= 8 => (0, 1, [[2, 3], [4, 5], [6, 7]]),
        7 => (0, 1, [[2, 3], [4, 5], [6, 3]]),
        6 => (0, 1, [[2, 3], [4, 5], [2, 3]]),
        5 => (0, 1, [[2, 3], [4, 4], [2, 3]]),
        4 => (0, 1, [[2, 3]; 3]),
        3 => (0, 0, [[1, 2]; 3]),
        _ => (0, 0, [[1, 1]; 3]),
    }
}

impl ReusePolicy {
    pub fn new(cfg: &PlacementConfig) -> Self {
        assert!(cfg.streams >= 2, "reuse needs at least 2 streams");
        let (metadata, journal, table) = stream_table(cfg.streams);
        ReusePolicy {
            cfg: cfg.reuse.clone(),
            metadata,
            journal,
            table,
            clock: 0,
            pages: HashMap::new(),
            by_signal: HashMap::new(),
            by_kind: [Deaths::default(); 2],
            typical: [f64::INFINITY; 2],
            drawn: [[0.0; 3]; 2],
            open: [[true, false, false]; 2],
            streak: [[0; 3]; 2],
        }
    }

    /// Learns from the pages `w` overwrites, marks them written now with the write's signal,
    /// and returns that signal (the age octave, [`FRESH`] when nothing was overwritten).
    fn overwrite(&mut self, w: &WriteEvent, kind: usize, now: u64) -> u8 {
        let first = (w.offset / PAGE_SIZE) as usize;
        let end = (w.offset + w.len as u64).div_ceil(PAGE_SIZE) as usize;
        let slots = self.pages.entry(w.file).or_default();
        if slots.len() < end {
            slots.resize(end, 0);
        }
        let memory = self.cfg.memory;
        let (mut sum, mut n) = (0.0, 0u32);
        for slot in &slots[first..end] {
            if *slot == 0 {
                continue;
            }
            let written = (*slot >> SIGNAL_BITS) - 1;
            debug_assert!(written < now, "a page was written in the future");
            let signal = (*slot & 0xff) as u8;
            let life = ((now - written).max(1) as f64).log2();
            let typical = &mut self.typical[kind];
            *typical = if typical.is_finite() {
                *typical * memory + life * (1.0 - memory)
            } else {
                life
            };
            if life < *typical {
                self.by_signal.entry((w.file, signal)).or_default().young += 1.0;
                self.by_kind[kind].young += 1.0;
            }
            sum += life;
            n += 1;
        }
        let signal = if n == 0 {
            FRESH
        } else {
            (sum / n as f64).floor().clamp(0.0, 254.0) as u8
        };
        slots[first..end].fill(((now + 1) << SIGNAL_BITS) | signal as u64);
        let pages = (end - first) as f64;
        self.by_signal.entry((w.file, signal)).or_default().written += pages;
        self.by_kind[kind].written += pages;
        signal
    }

    /// A checkpoint commit: decides which classes have their stream (see the module doc),
    /// then ages every count.
    fn commit(&mut self) {
        let (decay, min_share) = (self.cfg.decay, self.cfg.min_share);
        let kinds = self
            .drawn
            .iter_mut()
            .zip(&mut self.streak)
            .zip(&mut self.open);
        for ((drawn, streak), open) in kinds {
            let total: f64 = drawn.iter().sum();
            for class in [Class::Long as usize, Class::Short as usize] {
                let has_share = total > 0.0 && drawn[class] >= min_share * total;
                streak[class] = if has_share {
                    streak[class].saturating_add(1)
                } else {
                    0
                };
                open[class] = streak[class] >= OPEN_AFTER;
            }
            drawn.iter_mut().for_each(|d| *d *= decay);
        }
        for d in self.by_signal.values_mut().chain(self.by_kind.iter_mut()) {
            d.written *= decay;
            d.young *= decay;
        }
    }

    /// The class of a write of `kind` with this signal.
    fn class_of(&self, file: FileId, kind: usize, signal: u8) -> Class {
        let Some(own) = self.by_signal.get(&(file, signal)) else {
            return Class::Usual;
        };
        let all = &self.by_kind[kind];
        let ratio = self.cfg.ratio;
        if own.written < self.cfg.min_samples || all.young <= 0.0 {
            Class::Usual
        } else if own.young_share() * ratio < all.young_share() {
            Class::Long
        } else if own.old_share() * ratio < all.old_share() {
            Class::Short
        } else {
            Class::Usual
        }
    }
}

impl Policy for ReusePolicy {
    fn name(&self) -> &'static str {
        "reuse"
    }

    fn place(&mut self, w: &WriteEvent) -> u8 {
        let now = self.clock;
        self.clock += (w.len as u64).div_ceil(PAGE_SIZE).max(1);
        let kind = match w.file_kind {
            FileKind::Metadata => return self.metadata,
            FileKind::Journal => return self.journal,
            FileKind::Collection => 0,
            FileKind::Index => 1,
        };
        let signal = self.overwrite(w, kind, now);
        let class = self.class_of(w.file, kind, signal) as usize;
        self.drawn[kind][class] += (w.len as u64).div_ceil(PAGE_SIZE) as f64;
        let class = if self.open[kind][class] {
            class
        } else {
            Class::Usual as usize
        };
        self.table[class][kind]
    }

    fn observe(&mut self, ev: &Event) {
        match ev {
            Event::CheckpointCommit { .. } => self.commit(),
            Event::FileRemove { file, .. } => {
                self.pages.remove(file);
                self.by_signal.retain(|&(f, _), _| f != *file);
            }
            Event::FileTruncate { file, len, .. } => {
                if let Some(slots) = self.pages.get_mut(file) {
                    slots.truncate(len.div_ceil(PAGE_SIZE) as usize);
                }
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::policy::tests::{commit, config, streams_of_policy, w};
    use crate::policy::{make_policy, FilePolicy};
    use crate::synth::{generate, SynthConfig};

    fn streams_of(events: &[Event], cfg: &PlacementConfig) -> Vec<Option<u8>> {
        streams_of_policy("reuse", events, cfg)
    }

    /// A collection file of 64 pages: pages 0..32 are rewritten every round (they die
    /// young), pages 32..64 once every 4 rounds (they live four times as long), a commit
    /// after each round of 40 writes.
    fn hot_and_cold(rounds: u64) -> Vec<Event> {
        let c = FileKind::Collection;
        let mut events = Vec::new();
        for round in 0..rounds {
            for page in 0..64u64 {
                if page < 32 || round % 4 == page % 4 {
                    events.push(Event::Write(w(1, c, page * PAGE_SIZE, 4096)));
                }
            }
            events.push(commit());
        }
        events
    }

    #[test]
    fn choices_on_a_prefix_are_the_choices_on_the_whole_trace() {
        let trace = generate(&SynthConfig::linkbench_like(7)).events;
        let mut traces = vec![trace, hot_and_cold(200)];
        traces.retain(|t| t.len() > 100);
        for events in &traces {
            for streams in [2, 4, 8] {
                let whole = streams_of(events, &config(streams));
                for cut in [1, events.len() / 3, events.len() / 2, events.len() - 1] {
                    let prefix = streams_of(&events[..cut], &config(streams));
                    assert_eq!(prefix[..], whole[..cut], "{streams} streams, cut at {cut}");
                }
            }
        }
    }

    #[test]
    fn deterministic_and_inside_the_budget() {
        let events = generate(&SynthConfig::linkbench_like(3)).events;
        for streams in [2, 3, 4, 5, 6, 7, 8, 16] {
            let a = streams_of(&events, &config(streams));
            assert_eq!(
                a,
                streams_of(&events, &config(streams)),
                "{streams} streams"
            );
            for s in a.into_iter().flatten() {
                assert!(s < streams, "stream {s} on a budget of {streams}");
            }
            for s in streams_of(&hot_and_cold(200), &config(streams))
                .into_iter()
                .flatten()
            {
                assert!(s < streams, "stream {s} on a budget of {streams}");
            }
        }
    }

    #[test]
    fn blocks_that_outlive_their_kind_get_the_long_stream_the_others_the_short() {
        let events = hot_and_cold(200);
        let streams = streams_of(&events, &config(8));
        // The last round: the hot pages die young (the collections' short stream, 6), the
        // cold pages written that round outlive them (the long stream, 4).
        let last: Vec<u8> = streams[events.len() - 41..events.len() - 1]
            .iter()
            .map(|s| s.unwrap())
            .collect();
        assert_eq!(last[..32], [6; 32]);
        assert_eq!(last[32..], [4; 8]);
        // The first rounds, before anything is learned: the usual stream.
        assert!(streams[..40].iter().all(|&s| s == Some(2)));
        // With 7 streams the collections keep their short stream; with 6 they lose it.
        let six = streams_of(&events, &config(6));
        assert_eq!(six[events.len() - 41..events.len() - 9], [Some(2); 32]);
        assert_eq!(six[events.len() - 9..events.len() - 1], [Some(4); 8]);
        // On 4 streams there is no long stream: `file`'s layout.
        let four = streams_of(&events, &config(4));
        assert!(four.iter().flatten().all(|&s| s == 2));
    }

    #[test]
    fn without_a_signal_it_places_as_file_does() {
        // Every page of the file is rewritten every round: one lifetime for all.
        let c = FileKind::Collection;
        let mut events = Vec::new();
        for _ in 0..100 {
            for page in 0..64u64 {
                events.push(Event::Write(w(1, c, page * PAGE_SIZE, 4096)));
                events.push(Event::Write(w(2, FileKind::Index, page * PAGE_SIZE, 4096)));
            }
            events.push(Event::Write(w(3, FileKind::Journal, 0, 4096)));
            events.push(Event::Write(w(4, FileKind::Metadata, 0, 4096)));
            events.push(commit());
        }
        for streams in [2, 3, 4, 8] {
            let file = FilePolicy::new(&config(streams));
            let want: Vec<Option<u8>> = events
                .iter()
                .map(|ev| match ev {
                    Event::Write(w) => Some(file.stream_of(w.file_kind)),
                    _ => None,
                })
                .collect();
            assert_eq!(
                streams_of(&events, &config(streams)),
                want,
                "{streams} streams"
            );
        }
    }

    #[test]
    fn a_removed_file_forgets_its_pages() {
        let mut p = ReusePolicy::new(&config(8));
        p.place(&w(1, FileKind::Collection, 0, 8192));
        assert_eq!(p.pages[&1].len(), 2);
        p.observe(&Event::FileTruncate {
            time_ns: 0,
            file: 1,
            len: 4096,
        });
        assert_eq!(p.pages[&1].len(), 1);
        p.observe(&Event::FileRemove {
            time_ns: 0,
            file: 1,
        });
        assert!(!p.pages.contains_key(&1));
        assert!(p.by_signal.keys().all(|&(f, _)| f != 1));
    }

    #[test]
    fn bad_settings_are_refused() {
        for bad in [
            ReuseConfig {
                ratio: 1.0,
                ..Default::default()
            },
            ReuseConfig {
                memory: 1.0,
                ..Default::default()
            },
            ReuseConfig {
                min_share: 1.5,
                ..Default::default()
            },
        ] {
            let cfg = PlacementConfig {
                reuse: bad,
                ..Default::default()
            };
            assert!(make_policy("reuse", &cfg).is_err());
        }
    }

    /// A page stamped later than the clock is a corrupted slot: its age would wrap.
    #[test]
    #[cfg(debug_assertions)]
    #[should_panic(expected = "written in the future")]
    fn a_page_from_the_future_trips_the_assertion() {
        let mut p = ReusePolicy::new(&config(8));
        p.overwrite(&w(1, FileKind::Collection, 0, 4096), 0, 10);
        p.overwrite(&w(1, FileKind::Collection, 0, 4096), 0, 5);
    }
}
