//! `oracle` (offline only): from the whole trace, each write's true remaining lifetime, grouped
//! on a log scale. It is the bound an online policy can approach, not a policy the engine can
//! run.
//!
//! - **Clock**: host bytes written (as `lifetime`).
//! - **Death** of a write: the moment its *last* 4 KB unit stops holding live data on the
//!   device, which is the first of: a later write overlapping the unit (the filesystem
//!   overwrites in place), the file's truncation below it or its removal, and — per
//!   [`DeathRules`], matching the replay's TRIM mode — a `Free` covering it (`free`, for
//!   `trim.when: free`) or the next write of the same `page_id` elsewhere (`replace`, for
//!   `trim.when: replace`). With TRIM off neither applies: freed space dies when it is reused.
//!   (Batched TRIMs land a little after the `Free`; the oracle ignores that delay.)
//! - Writes still alive at the end of the trace have infinite lifetime.
//! - **Streams**: all of them (stream 0 included: the oracle has no kernel or metadata to
//!   keep apart — metadata is just data with a lifetime). With S streams, the finite
//!   lifetimes go to S − 1 buckets with boundaries evenly spaced in log₂ between the 1st and
//!   99th percentile (byte-weighted) of finite lifetimes; shortest on stream 0; writes that
//!   never die on stream S − 1.

use super::{PlacementConfig, Policy, PAGE_SIZE};
use crate::event::{Event, FileId, WriteEvent};
use std::collections::HashMap;

/// Which events end a block's life on the device (see the module doc).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub struct DeathRules {
    /// A `Free` kills what it covers (TRIM at free).
    pub free: bool,
    /// A page's next write elsewhere kills its previous extent (TRIM at address replacement).
    pub replace: bool,
}

#[derive(Clone, Debug)]
pub struct OraclePolicy {
    streams: Vec<u8>,
    next: usize,
}

impl OraclePolicy {
    /// Computes every write's stream from the whole event sequence (the same sequence must
    /// then be replayed, writes in the same order).
    pub fn from_events<I, E>(events: I, cfg: &PlacementConfig, rules: DeathRules) -> Result<Self, E>
    where
        I: IntoIterator<Item = Result<Event, E>>,
    {
        cfg.validate().expect("valid placement config");
        let mut clock = 0u64;
        let mut birth: Vec<u64> = Vec::new();
        let mut bytes: Vec<u32> = Vec::new();
        let mut alive: Vec<u32> = Vec::new();
        let mut death: Vec<u64> = Vec::new();
        // Per write: its 4 KB units [first, end).
        let mut span: Vec<(u64, u64)> = Vec::new();
        // Per file: 4 KB unit → index of the write whose data it holds.
        let mut units: HashMap<FileId, HashMap<u64, u32>> = HashMap::new();
        // Per (file, page_id): index of its last write.
        let mut pages: HashMap<(FileId, u64), u32> = HashMap::new();
        fn kill(i: u32, clock: u64, alive: &mut [u32], death: &mut [u64]) {
            let i = i as usize;
            alive[i] -= 1;
            if alive[i] == 0 {
                death[i] = clock;
            }
        }
        for ev in events {
            let ev = ev?;
            match &ev {
                Event::Write(w) => {
                    let i = birth.len() as u32;
                    let first = w.offset / PAGE_SIZE;
                    let end = (w.offset + w.len as u64).div_ceil(PAGE_SIZE);
                    if rules.replace && w.page_id != 0 {
                        if let Some(prev) = pages.insert((w.file, w.page_id), i) {
                            let (pf, pe) = span[prev as usize];
                            if let Some(m) = units.get_mut(&w.file) {
                                for u in pf..pe {
                                    if m.get(&u) == Some(&prev) {
                                        m.remove(&u);
                                        kill(prev, clock, &mut alive, &mut death);
                                    }
                                }
                            }
                        }
                    }
                    birth.push(clock);
                    span.push((first, end.max(first + 1)));
                    bytes.push(w.len);
                    alive.push(0);
                    death.push(u64::MAX);
                    let m = units.entry(w.file).or_default();
                    for u in first..end.max(first + 1) {
                        if let Some(old) = m.insert(u, i) {
                            kill(old, clock, &mut alive, &mut death);
                        }
                        alive[i as usize] += 1;
                    }
                    clock += w.len as u64;
                }
                Event::Free {
                    file, offset, len, ..
                } if rules.free => {
                    if let Some(m) = units.get_mut(file) {
                        for u in offset.div_ceil(PAGE_SIZE)..(offset + len) / PAGE_SIZE {
                            if let Some(old) = m.remove(&u) {
                                kill(old, clock, &mut alive, &mut death);
                            }
                        }
                    }
                }
                Event::FileTruncate { file, len, .. } => {
                    if let Some(m) = units.get_mut(file) {
                        let cut = len.div_ceil(PAGE_SIZE);
                        m.retain(|&u, v| {
                            if u >= cut {
                                kill(*v, clock, &mut alive, &mut death);
                                false
                            } else {
                                true
                            }
                        });
                    }
                }
                Event::FileRemove { file, .. } => {
                    if let Some(m) = units.remove(file) {
                        for (_, v) in m {
                            kill(v, clock, &mut alive, &mut death);
                        }
                    }
                    pages.retain(|k, _| k.0 != *file);
                }
                _ => {}
            }
        }
        Ok(Self::bucket(cfg.streams, &birth, &death, &bytes))
    }

    fn bucket(streams: u8, birth: &[u64], death: &[u64], bytes: &[u32]) -> Self {
        let last = streams - 1;
        let mut finite: Vec<(f64, u32)> = birth
            .iter()
            .zip(death)
            .zip(bytes)
            .filter(|((_, &d), _)| d != u64::MAX)
            .map(|((&b, &d), &n)| (((d - b).max(1) as f64).log2(), n))
            .collect();
        finite.sort_by(|a, b| a.0.total_cmp(&b.0));
        let total: u64 = finite.iter().map(|x| x.1 as u64).sum();
        let q = |p: f64| {
            let target = (p * total as f64) as u64;
            let mut acc = 0u64;
            for &(l, n) in &finite {
                acc += n as u64;
                if acc >= target {
                    return l;
                }
            }
            finite.last().map_or(0.0, |x| x.0)
        };
        let (lo, hi) = (q(0.01), q(0.99));
        let nb = last as usize; // finite buckets
        let streams_of = birth
            .iter()
            .zip(death)
            .map(|(&b, &d)| {
                if d == u64::MAX {
                    return last;
                }
                if nb <= 1 || hi <= lo {
                    return 0;
                }
                let l = ((d - b).max(1) as f64).log2();
                let x = ((l - lo) / (hi - lo) * nb as f64).floor();
                x.clamp(0.0, (nb - 1) as f64) as u8
            })
            .collect();
        OraclePolicy {
            streams: streams_of,
            next: 0,
        }
    }

    /// Streams of all writes, in trace order.
    pub fn streams(&self) -> &[u8] {
        &self.streams
    }
}

impl Policy for OraclePolicy {
    fn name(&self) -> &'static str {
        "oracle"
    }
    fn place(&mut self, _w: &WriteEvent) -> u8 {
        let s = self.streams.get(self.next).copied().unwrap_or(0);
        self.next += 1;
        s
    }
    fn observe(&mut self, _ev: &Event) {}
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{FileKind, PageKind};
    use std::convert::Infallible;

    fn w(file: FileId, offset: u64, page_id: u64) -> Event {
        Event::Write(WriteEvent {
            time_ns: 0,
            file,
            file_kind: FileKind::Collection,
            table: 1,
            page_kind: PageKind::Leaf,
            offset,
            len: 4096,
            id_index: false,
            stream: 0,
            page_id,
        })
    }

    #[test]
    fn death_rules() {
        // w0 @0 (page 1), w1 @4096 (page 1 moved), Free @0, w2 @0 (reuse), w3 file 2, remove 2.
        let evs = [
            w(1, 0, 1),
            w(1, 4096, 1),
            Event::Free {
                time_ns: 0,
                file: 1,
                offset: 0,
                len: 4096,
            },
            w(1, 8192, 2),
            w(1, 0, 3),
            w(2, 0, 0),
            Event::FileRemove {
                time_ns: 0,
                file: 2,
            },
        ];
        let cfg = PlacementConfig {
            streams: 4,
            ..Default::default()
        };
        let run = |rules| {
            OraclePolicy::from_events(evs.iter().cloned().map(Ok::<_, Infallible>), &cfg, rules)
                .unwrap()
                .streams
                .clone()
        };
        // Writes 0..4 (the 5th is file 2's). Free counts: write 0 lives 8192 B (born at clock 0,
        // the Free comes after writes 0 and 1), log2 13; file 2's write is born at 16384 and
        // removed at 20480: 4096 B, log2 12. Writes 1, 2, 3 never die → stream 3.
        // lo = 12, hi = 13, 3 buckets: write 0 → floor((13 − 12)/1 · 3) = 3 → clamped 2;
        // file 2's → 0.
        assert_eq!(
            run(DeathRules {
                free: true,
                replace: false
            }),
            vec![2, 3, 3, 3, 0]
        );
        // No TRIM: write 0 dies when write 3 overwrites unit 0 (12288 B, log2 13.58): → 2.
        assert_eq!(run(DeathRules::default()), vec![2, 3, 3, 3, 0]);
        // Replace: w0 dies at w1 (4096 B, log2 12) and the file-2 write lives 4096 B too:
        // lo = hi = 12, no spread: every finite lifetime on stream 0.
        let r = run(DeathRules {
            free: false,
            replace: true,
        });
        assert_eq!(r, vec![0, 3, 3, 3, 0]);
    }
}
