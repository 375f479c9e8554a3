//! LinkBench driver: distributions, mixes and their C:R:U:D ratios, count maintenance,
//! determinism, against the in-process store.

use bson::doc;
use std::collections::HashMap;
use std::sync::atomic::AtomicI64;
use std::sync::Arc;
use workload::linkbench::dist::{geometric, lognormal, nlinks_at, LbZipf, Shuffler, NLINKS_CDF};
use workload::linkbench::{
    self, LinkBenchConfig, LinkOp, Mix, Model, Requester, Shared, COUNT, LINK, NODE,
};
use workload::measure::{Measurements, Progress};
use workload::store::{InProc, Query, Store, Traced};

fn small(mix: Mix) -> LinkBenchConfig {
    LinkBenchConfig {
        maxid1: 1001,
        mix,
        requests: Some(2000),
        nlinks_cap: Some(200),
        fixed_time_ms: Some(1_700_000_000_000),
        ..LinkBenchConfig::default()
    }
}

#[test]
fn mixes_reproduce_seed_crud_ratios() {
    // Nominal: the seeds' Table 1.
    let round = |m: &Mix| m.crud().map(|x| x.round() as i64);
    assert_eq!(round(&Mix::Original), [12, 69, 15, 4]);
    assert_eq!(round(&Mix::Mixed), [12, 0, 84, 4]);
    assert_eq!(round(&Mix::UpdateOnly), [0, 0, 100, 0]);
    for m in [Mix::Original, Mix::Mixed, Mix::UpdateOnly] {
        let s: f64 = m.percentages().iter().sum();
        assert!((s - 100.0).abs() < 1e-5, "{m:?} sums to {s}");
    }
    // Measured over the op chooser with a fixed seed.
    for m in [Mix::Original, Mix::Mixed, Mix::UpdateOnly] {
        let cfg = small(m.clone());
        let model = Arc::new(Model::new(&cfg).unwrap());
        let shared = Arc::new(Shared {
            next_node_id: AtomicI64::new(cfg.maxid1),
        });
        let mut r = Requester::new(model, shared, 0);
        let n = 200_000;
        let mut classes = [0u64; 4];
        let mut per_op: HashMap<LinkOp, u64> = HashMap::new();
        for _ in 0..n {
            let op = r.next_op();
            classes[op.class()] += 1;
            *per_op.entry(op).or_default() += 1;
        }
        let nominal = m.crud();
        for c in 0..4 {
            let got = classes[c] as f64 * 100.0 / n as f64;
            assert!(
                (got - nominal[c]).abs() < 0.4,
                "{m:?} class {c}: {got} vs {}",
                nominal[c]
            );
        }
        for (i, op) in LinkOp::ALL.iter().enumerate() {
            let got = *per_op.get(op).unwrap_or(&0) as f64 * 100.0 / n as f64;
            let want = m.percentages()[i];
            assert!((got - want).abs() < 0.35, "{m:?} {op:?}: {got} vs {want}");
            if want == 0.0 {
                assert_eq!(got, 0.0);
            }
        }
    }
}

#[test]
fn shuffler_is_an_invertible_permutation() {
    for n in [1i64, 7, 1000, 5003] {
        let s = Shuffler::new(99, n);
        let mut seen = vec![false; n as usize];
        for i in 0..n {
            let p = s.permute(i);
            assert!((0..n).contains(&p));
            assert!(!seen[p as usize]);
            seen[p as usize] = true;
            assert_eq!(s.invert(p), i);
        }
    }
}

#[test]
fn distributions_have_linkbench_statistics() {
    let mut rng = workload::rng(1);
    // Log-normal sizes: the median is the configured one.
    let mut v: Vec<u64> = (0..20_001)
        .map(|_| lognormal(128.0, 1.0, 1 << 20, &mut rng))
        .collect();
    v.sort();
    let med = v[10_000];
    assert!((120..=136).contains(&med), "node median {med}");
    let mut v: Vec<u64> = (0..20_001)
        .map(|_| lognormal(8.0, 1.0, 255, &mut rng))
        .collect();
    v.sort();
    assert!((7..=9).contains(&v[10_000]));
    assert!(v.iter().all(|&x| x < 255));
    // Geometric(0.382) on [1, 128]: mean 1 + 0.618 / 0.382 ≈ 2.62.
    let n = 50_000;
    let mean = (0..n)
        .map(|_| geometric(0.382, 1, 128, &mut rng))
        .sum::<u64>() as f64
        / n as f64;
    assert!((mean - 2.618).abs() < 0.05, "{mean}");
    // The degree CDF: monotone, 0 below the first anchor, capped by the last one.
    assert!(NLINKS_CDF
        .windows(2)
        .all(|w| w[0].0 < w[1].0 && w[0].1 < w[1].1));
    assert_eq!(nlinks_at(0.1), 0);
    assert_eq!(nlinks_at(0.5), 1);
    assert_eq!(nlinks_at(1.0), 961_963);
    let mean_deg: f64 = (0..100_000)
        .map(|i| nlinks_at((i as f64 + 0.5) / 1e5) as f64)
        .sum::<f64>()
        / 1e5;
    assert!((2.0..8.0).contains(&mean_deg), "mean degree {mean_deg}");
    // LinkBench's zipf: rank 0 most popular, frequencies fall with rank.
    let z = LbZipf::new(10_000, 0.8);
    let mut c = [0u32; 4];
    for _ in 0..100_000 {
        let r = z.sample(&mut rng);
        assert!((0..10_000).contains(&r));
        if r < 4 {
            c[r as usize] += 1;
        }
    }
    assert!(c[0] > c[1] && c[1] > c[2] && c[2] > c[3], "{c:?}");
}

#[test]
fn zipf_classes_hold_the_head_share_as_the_ids_grow() {
    // The share of draws on the hottest 1 % of ranks, by exact frequency (ranks counted).
    let head = |z: &LbZipf, n: i64| {
        let mut rng = workload::rng(5);
        let mut count = vec![0u32; n as usize];
        for _ in 0..400_000 {
            let r = z.sample(&mut rng);
            assert!((0..n).contains(&r), "{r} outside 0..{n}");
            count[r as usize] += 1;
        }
        count.sort_unstable_by(|a, b| b.cmp(a));
        count[..n as usize / 100].iter().sum::<u32>() as f64 / 400_000.0
    };
    let (few, many) = (10_000, 160_000);
    // LinkBench's own Zipf (shape 0.8): its head grows with the ids (finite ζ).
    let (own_few, own_many) = (
        head(&LbZipf::new(few, 0.8), few),
        head(&LbZipf::new(many, 0.8), many),
    );
    assert!(own_many > own_few + 0.02, "{own_few} → {own_many}");
    // Over 10 000 classes it stays, within the sampling spread.
    let classes = |n| LbZipf::with_classes(n, 0.8, 10_000);
    let (held_few, held_many) = (head(&classes(few), few), head(&classes(many), many));
    assert!(
        (held_many - held_few).abs() < 0.01,
        "{held_few} → {held_many}"
    );
    let cfg = LinkBenchConfig {
        zipf_classes: Some(1_001),
        ..small(Mix::Original)
    };
    assert!(Model::new(&cfg).is_err(), "more classes than ids");
}

#[test]
fn model_ids_stay_in_range_and_degrees_correlate() {
    let cfg = small(Mix::Original);
    let m = Model::new(&cfg).unwrap();
    let mut rng = workload::rng(2);
    for _ in 0..10_000 {
        let a = m.link_read_id1(&mut rng);
        let b = m.link_write_id1(&mut rng);
        let c = m.node_read_id(&mut rng);
        let d = m.node_update_id(&mut rng);
        let e = m.node_delete_id(&mut rng);
        for x in [a, b, c, d, e] {
            assert!((1..1001).contains(&x));
        }
    }
    // The per-type split (LinkBench's quirk): 1 → 1+0, 2 → 2+1, tot ≥ 3 → ⌊tot/2⌋+1 each.
    let total: u64 = (1..1001).map(|id| m.nlinks(id)).sum();
    assert!(total > 0);
    for id in 1..1001 {
        let tot = m.nlinks(id);
        let (t0, t1) = (m.nlinks_of_type(id, 0), m.nlinks_of_type(id, 1));
        match tot {
            0 => assert_eq!((t0, t1), (0, 0)),
            1 => assert_eq!((t0, t1), (1, 0)),
            2 => assert_eq!((t0, t1), (2, 1)),
            t => assert_eq!((t0, t1), (t / 2 + 1, t / 2 + 1)),
        }
    }
}

/// Every count document equals the number of visible links of its (id1, link_type).
fn check_counts(store: &dyn Store) {
    let links = store.find(LINK, &Query::default()).unwrap();
    let mut visible: HashMap<(i64, i64), i64> = HashMap::new();
    for l in &links {
        let k = (l.get_i64("id1").unwrap(), l.get_i64("link_type").unwrap());
        let e = visible.entry(k).or_default();
        if l.get_i32("visibility").unwrap() == 1 {
            *e += 1;
        }
    }
    let counts = store.find(COUNT, &Query::default()).unwrap();
    let mut seen = 0;
    for c in &counts {
        let k = (c.get_i64("id").unwrap(), c.get_i64("link_type").unwrap());
        let want = visible.get(&k).copied().unwrap_or(0);
        assert_eq!(
            c.get_i64("count").unwrap(),
            want,
            "count of {k:?}: {c}, visible {want}"
        );
        seen += 1;
    }
    // Every (id1, type) with a visible link has a count document.
    let with_links = visible.values().filter(|&&v| v > 0).count();
    assert!(seen >= with_links);
}

#[test]
fn load_then_every_mix_keeps_counts_correct() {
    for mix in [Mix::Original, Mix::Mixed, Mix::UpdateOnly] {
        let cfg = LinkBenchConfig {
            requesters: 2,
            loaders: 2,
            ..small(mix.clone())
        };
        let s = InProc::in_memory("linkbench").unwrap();
        linkbench::prepare_load(&s).unwrap();
        let load = linkbench::run_load(&cfg, &s, Progress::Hidden).unwrap();
        assert_eq!(load.counters["nodes"], 1000);
        assert_eq!(s.count(NODE, doc! {}, 0, 0).unwrap(), 1000);
        let nlinks = s.count(LINK, doc! {}, 0, 0).unwrap();
        assert_eq!(nlinks, load.counters["links"]);
        assert!(nlinks > 500, "{nlinks}");
        check_counts(&s);
        let run = linkbench::run_ops(&cfg, &s, Progress::Hidden).unwrap();
        assert_eq!(run.operations, 2000);
        for (name, m) in &run.metrics {
            assert!(
                !name.ends_with("-FAILED"),
                "{mix:?} {name}: {m:?} {:?}",
                run.counters
            );
        }
        let crud = run.crud_percent.unwrap();
        let nominal = mix.crud();
        for c in 0..4 {
            assert!(
                (crud[c] - nominal[c]).abs() < 3.0,
                "{mix:?}: {crud:?} vs {nominal:?}"
            );
        }
        check_counts(&s);
        if mix == Mix::UpdateOnly {
            // No creates or deletes were issued, but updatelink upserts new links (LinkBench's
            // id2 chooser targets a missing link part of the time).
            assert_eq!(crud[2], 100.0);
            assert!(run.counters.get("link_inserted").copied().unwrap_or(0) > 0);
        }
    }
}

#[test]
fn racing_requesters_on_few_links_keep_counts_exact() {
    // Eight requesters on 21 nodes: adds and deletes of one link race all the time. Two deletes
    // that both find a link visible, or a delete whose −1 lands before a concurrent add's +1,
    // broke the counts with LinkBenchX's bodies (an unconditional hide; a floor that clamps).
    let cfg = LinkBenchConfig {
        maxid1: 21,
        requesters: 8,
        loaders: 2,
        requests: Some(40_000),
        nlinks_cap: Some(4),
        ..small(Mix::Original)
    };
    let s = InProc::in_memory("linkbench").unwrap();
    linkbench::prepare_load(&s).unwrap();
    linkbench::run_load(&cfg, &s, Progress::Hidden).unwrap();
    let run = linkbench::run_ops(&cfg, &s, Progress::Hidden).unwrap();
    assert!(run.counters.get("link_hidden").copied().unwrap_or(0) > 100);
    check_counts(&s);
}

fn mask_object_ids(s: &str) -> String {
    let mut out = String::new();
    let mut rest = s;
    while let Some(i) = rest.find("ObjectId(") {
        out.push_str(&rest[..i + 9]);
        rest = &rest[i + 9..];
        let end = rest.find(')').unwrap_or(rest.len());
        out.push('…');
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

#[test]
fn linkbench_one_thread_one_seed_same_operation_sequence() {
    let cfg = LinkBenchConfig {
        requests: Some(500),
        ..small(Mix::Original)
    };
    let trace = |cfg: &LinkBenchConfig| {
        let s = Traced::new(InProc::in_memory("linkbench").unwrap());
        linkbench::prepare_load(&s).unwrap();
        linkbench::run_load(cfg, &s, Progress::Hidden).unwrap();
        linkbench::run_ops(cfg, &s, Progress::Hidden).unwrap();
        // Link `_id`s are ObjectIds the store generates (deletelink hides by `_id`, as
        // LinkBenchX does): mask them.
        s.take()
            .into_iter()
            .map(|l| mask_object_ids(&l))
            .collect::<Vec<_>>()
    };
    let a = trace(&cfg);
    let b = trace(&cfg);
    assert_eq!(a.len(), b.len());
    assert!(a == b, "traces differ");
    let other = LinkBenchConfig { seed: 2, ..cfg };
    assert!(a != trace(&other));
}

#[test]
fn requester_step_records_linkbench_metrics() {
    let cfg = small(Mix::Original);
    let s = InProc::in_memory("linkbench").unwrap();
    linkbench::prepare_load(&s).unwrap();
    linkbench::run_load(&cfg, &s, Progress::Hidden).unwrap();
    let model = Arc::new(Model::new(&cfg).unwrap());
    let shared = Arc::new(Shared {
        next_node_id: AtomicI64::new(cfg.maxid1),
    });
    let mut r = Requester::new(model, shared, 0);
    let mut m = Measurements::new();
    for op in LinkOp::ALL {
        r.execute(&s, op, &mut m).unwrap();
    }
    assert_eq!(s.count(NODE, doc! {"_id": cfg.maxid1}, 0, 0).unwrap(), 1);
    for _ in 0..300 {
        r.step(&s, &mut m);
    }
    let total: u64 = LinkOp::ALL.iter().map(|o| m.operations(o.metric())).sum();
    assert_eq!(total, 300);
    check_counts(&s);
}

/// Under `logical_time` the commands repeat byte for byte, `_id`s included (times from the
/// logical clock, upserted links' and counts' ObjectIds from the driver), and the graph's
/// counts stay right.
#[test]
fn logical_time_makes_every_command_repeat_exactly() {
    let cfg = LinkBenchConfig {
        requests: Some(500),
        logical_time: true,
        ..small(Mix::Mixed)
    };
    let trace = |cfg: &LinkBenchConfig| {
        let s = Traced::new(InProc::in_memory("linkbench").unwrap());
        linkbench::prepare_load(&s).unwrap();
        linkbench::run_load(cfg, &s, Progress::Hidden).unwrap();
        linkbench::run_ops(cfg, &s, Progress::Hidden).unwrap();
        let log = s.take();
        check_counts(&s);
        log
    };
    let a = trace(&cfg);
    assert!(
        a.iter().any(|l| l.contains("ObjectId")),
        "upserts carry ids"
    );
    assert!(a == trace(&cfg), "traces differ");
    let wall = LinkBenchConfig {
        logical_time: false,
        ..cfg.clone()
    };
    assert!(
        a != trace(&wall),
        "the store's ObjectIds differ from the driver's"
    );
    assert!(Model::new(&LinkBenchConfig {
        fixed_time_ms: None,
        ..cfg
    })
    .is_err());
}
