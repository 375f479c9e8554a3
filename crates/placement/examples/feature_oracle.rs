//! The feature oracle: an offline upper bound on any online policy that places a write by what
//! a shim trace of a real WiredTiger carries (docs/placement.md, "The feature oracle").
//!
//! Each write gets a feature bucket from what is known when it is issued: its file (and so
//! its kind), the octave of the age of the data it overwrites at its offset (`fresh` if
//! none), the octave of the host pages written since the last checkpoint commit, the octave
//! of its offset, whether it continues the file's previous write, and the octave of its
//! length. Then, clairvoyantly, every write of a bucket is given the bucket's *true* typical
//! device lifetime over the whole trace (the page-weighted median, a bucket whose median
//! write never dies never dies), and `oracle`'s grouping (log-spaced lifetime buckets between
//! the 1st and 99th percentiles, never-dying writes on the last stream) places the writes by
//! those lifetimes. An online policy over the same features can at best learn each bucket's
//! typical lifetime, so it cannot beat this, up to how the features are bucketed.
//!
//! The device and replay are the score (`flashdoc placement replay TRACE --streams 8
//! --op 0.07 --gc greedy --size-to-trace --device-fill 0.8 --fs-discard=off --precondition
//! --no-timing`: sized to the trace at 80 % fill, every LBA valid before the run, next-fit
//! layout, TRIM batch 20 000 without discard); `file` and `oracle` are replayed on the same
//! plan as the check.
//!
//! `cargo run --release -p placement --features sim --example feature_oracle -- TRACE
//! [POLICY...]` prints one JSON line per row; with policies it replays only those, on the
//! same job (the score of an online policy beside the bound).
use placement::policy::{
    Lifetimes, OracleGrouping, OraclePolicy, PlacementConfig, WriteLife, PAGE_SIZE,
};
use placement::sim::{
    read_events, replay_planned, replay_planned_with, scan_events, DevicePlan, ReplayConfig,
    RunLoops, TraceReplay, TrimConfig,
};
use placement::{Event, FileKind, Policy, TrimWhen, WriteEvent};
use std::collections::HashMap;

type Error = Box<dyn std::error::Error + Send + Sync>;

/// What a write shows when it is issued, each as a small integer.
#[derive(Clone, Copy)]
struct Features {
    kind: FileKind,
    file: u32,
    age: u8,
    since_commit: u8,
    offset: u8,
    sequential: u8,
    len: u8,
}

/// The feature sets compared, by name: which features make the bucket.
const SETS: &[(&str, [bool; 5])] = &[
    // [age, since_commit, offset, sequential, len], the file always.
    ("file", [false, false, false, false, false]),
    ("file+age", [true, false, false, false, false]),
    ("file+since-commit", [false, true, false, false, false]),
    ("file+offset", [false, false, true, false, false]),
    ("file+sequential+len", [false, false, false, true, true]),
    ("all", [true, true, true, true, true]),
];

fn octave(x: u64) -> u8 {
    (64 - x.leading_zeros()) as u8
}

/// Every write's features, in trace order, from the events alone (online).
fn features(events: &[Event]) -> Vec<Features> {
    let mut out = Vec::new();
    let mut clock = 0u64;
    let mut commit_clock = 0u64;
    let mut written: HashMap<u32, HashMap<u64, u64>> = HashMap::new();
    let mut last_end: HashMap<u32, u64> = HashMap::new();
    for ev in events {
        match ev {
            Event::CheckpointCommit { .. } => commit_clock = clock,
            Event::FileRemove { file, .. } => {
                written.remove(file);
                last_end.remove(file);
            }
            Event::Write(w) => {
                let pages = (w.len as u64).div_ceil(PAGE_SIZE).max(1);
                let page = w.offset / PAGE_SIZE;
                let age = written
                    .entry(w.file)
                    .or_default()
                    .insert(page, clock)
                    .map_or(0, |t| octave(clock - t + 1));
                let sequential = last_end.insert(w.file, w.offset + w.len as u64) == Some(w.offset);
                out.push(Features {
                    kind: w.file_kind,
                    file: w.file,
                    age,
                    since_commit: octave(clock - commit_clock),
                    offset: octave(page),
                    sequential: sequential as u8,
                    len: octave(pages),
                });
                clock += pages;
            }
            _ => {}
        }
    }
    out
}

/// Every write's lifetime replaced by its bucket's page-weighted median (in trace order).
fn bucket_lifetimes(l: &Lifetimes, f: &[Features], set: [bool; 5]) -> (Lifetimes, usize) {
    let key = |x: &Features| {
        let pick = |on: bool, v: u8| if on { v } else { 0 };
        (
            x.file,
            pick(set[0], x.age),
            pick(set[1], x.since_commit),
            pick(set[2], x.offset),
            pick(set[3], x.sequential),
            pick(set[4], x.len),
        )
    };
    let mut buckets: HashMap<_, Vec<(u64, u32)>> = HashMap::new();
    for ((birth, w), x) in l.with_births().zip(f) {
        let life = if w.death == u64::MAX {
            u64::MAX
        } else {
            w.death - birth
        };
        buckets.entry(key(x)).or_default().push((life, w.pages));
    }
    let median: HashMap<_, u64> = buckets
        .into_iter()
        .map(|(k, mut v)| {
            v.sort_unstable();
            let total: u64 = v.iter().map(|&(_, p)| p as u64).sum();
            let mut run = 0u64;
            let m = v
                .iter()
                .find(|&&(_, p)| {
                    run += p as u64;
                    2 * run >= total
                })
                .map_or(u64::MAX, |&(life, _)| life);
            (k, m)
        })
        .collect();
    let n = median.len();
    let writes = l
        .with_births()
        .zip(f)
        .map(|((birth, w), x)| WriteLife {
            death: match median[&key(x)] {
                u64::MAX => u64::MAX,
                m => birth + m,
            },
            ..*w
        })
        .collect();
    (
        Lifetimes {
            writes,
            clock: l.clock,
        },
        n,
    )
}

/// Streams chosen before the replay, one per write in trace order.
struct Chosen {
    streams: Vec<u8>,
    next: usize,
}

impl Policy for Chosen {
    fn name(&self) -> &'static str {
        "feature-oracle"
    }
    fn place(&mut self, _: &WriteEvent) -> u8 {
        self.next += 1;
        self.streams[self.next - 1]
    }
    fn observe(&mut self, _: &Event) {}
}

/// How table writes are cut into classes by their predicted lifetimes.
#[derive(Clone, Copy)]
enum Spacing {
    /// Log-spaced between the 1st and 99th percentiles (the oracle's).
    Log,
    /// Equal page weight per class.
    Quantile,
}

/// `file`'s separation of what is not a table write (metadata 0, journal 1), and the table
/// writes in 5 classes by predicted lifetime (2..6, shortest first) and a class of writes
/// predicted never to die (7).
fn kind_and_class(l: &Lifetimes, f: &[Features], spacing: Spacing) -> Vec<u8> {
    let lives: Vec<(u64, u32)> = l
        .with_births()
        .map(|(birth, w)| (w.death.saturating_sub(birth), w.pages))
        .collect();
    let mut finite: Vec<(u64, u32)> = lives
        .iter()
        .zip(f)
        .filter(|((life, _), x)| is_table(x.kind) && *life < u64::MAX / 2)
        .map(|(&p, _)| p)
        .collect();
    finite.sort_unstable();
    let total: u64 = finite.iter().map(|&(_, p)| p as u64).sum();
    let at = |q: f64| -> u64 {
        let mut run = 0u64;
        for &(life, p) in &finite {
            run += p as u64;
            if run as f64 >= q * total as f64 {
                return life;
            }
        }
        finite.last().map_or(1, |&(life, _)| life)
    };
    const CLASSES: usize = 5;
    let cuts: Vec<u64> = match spacing {
        Spacing::Quantile => (1..CLASSES)
            .map(|k| at(k as f64 / CLASSES as f64))
            .collect(),
        Spacing::Log => {
            let (lo, hi) = (
                (at(0.01).max(1) as f64).log2(),
                (at(0.99).max(1) as f64).log2(),
            );
            (1..CLASSES)
                .map(|k| (lo + (hi - lo) * k as f64 / CLASSES as f64).exp2() as u64)
                .collect()
        }
    };
    lives
        .iter()
        .zip(f)
        .map(|(&(life, _), x)| match x.kind {
            FileKind::Metadata => 0,
            FileKind::Journal => 1,
            _ if life >= u64::MAX / 2 => 7,
            _ => 2 + cuts.iter().take_while(|&&c| c <= life).count() as u8,
        })
        .collect()
}

fn is_table(k: FileKind) -> bool {
    matches!(k, FileKind::Collection | FileKind::Index)
}

fn main() -> Result<(), Error> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [trace, only @ ..] = args.as_slice() else {
        return Err("usage: feature_oracle TRACE [POLICY...]".into());
    };
    let trace = std::path::Path::new(trace);
    let events = read_events(trace)?;
    let ext = scan_events(events.iter().map(Ok::<_, Error>), false)?;
    let pages = (ext.peak_file_pages as f64 / 0.8).ceil() as u64;
    let mut device = ssd::SsdConfig::with_op(pages, 0.07)?;
    device.streams = 8;
    device.set_op(0.07)?;
    device.validate()?;
    let placement = PlacementConfig::default();
    let mut job = TraceReplay {
        trace,
        policy: "file",
        placement: &placement,
        device,
        precondition: Some(ssd::PreconditionConfig {
            mode: ssd::PreconditionMode::parse("fill")?,
            seed: 1,
            ..Default::default()
        }),
        alloc: ssd::AllocPolicy::NextFit,
        fs_discard: false,
        replay: ReplayConfig {
            trim: TrimConfig {
                batch: Some(20_000),
                when: TrimWhen::Free,
            },
            end_of_load_at: None,
            reset_stats_at: 0,
        },
        loops: RunLoops::once(),
    };
    let plan = DevicePlan::new(&job, &events)?;
    let name = trace
        .file_stem()
        .and_then(|s| s.to_str())
        .unwrap_or("trace");
    let checks = ["file", "oracle", "oracle-death"].map(String::from);
    let replayed = if only.is_empty() { &checks[..] } else { only };
    for policy in replayed {
        job.policy = policy;
        let waf = replay_planned(&job, &events, &plan, |_, _| {})?
            .report
            .write_amplification;
        println!(
            "{}",
            serde_json::json!({"trace": name, "policy": policy, "waf": waf})
        );
    }
    if !only.is_empty() {
        return Ok(());
    }
    let (lifetimes, _) = plan.oracle_lifetimes(&job);
    let f = features(&events);
    assert_eq!(f.len(), lifetimes.len(), "one feature row per write");
    for &(set, on) in SETS {
        let (l, buckets) = bucket_lifetimes(lifetimes, &f, on);
        let groupings: [(&str, Box<dyn Policy>); 3] = [
            (
                "oracle-grouping",
                Box::new(OraclePolicy::from_lifetimes(
                    &l,
                    8,
                    OracleGrouping::Lifetime,
                )),
            ),
            (
                "kind+log-classes",
                Box::new(Chosen {
                    streams: kind_and_class(&l, &f, Spacing::Log),
                    next: 0,
                }),
            ),
            (
                "kind+quantile-classes",
                Box::new(Chosen {
                    streams: kind_and_class(&l, &f, Spacing::Quantile),
                    next: 0,
                }),
            ),
        ];
        for (grouping, policy) in groupings {
            job.policy = "oracle";
            let waf = replay_planned_with(&job, &events, &plan, policy, |_, _| {})?
                .report
                .write_amplification;
            let policy = format!("feature-oracle:{set}");
            println!(
                "{}",
                serde_json::json!({"trace": name, "policy": policy, "grouping": grouping,
                    "buckets": buckets, "waf": waf})
            );
        }
    }
    Ok(())
}
