//! YCSB driver: key vectors, distribution statistics with fixed seeds, operation proportions,
//! determinism, and load + run against the in-process store.

use std::collections::HashMap;
use std::sync::Arc;
use workload::measure::Progress;
use workload::store::{collection_checksum, InProc, Store, Traced};
use workload::ycsb::{
    self, zeta, AcknowledgedCounterGenerator, HotspotIntegerGenerator, KeyCounter, NumberGenerator,
    Op, RequestDistribution, ScrambledZipfianGenerator, SkewedLatestGenerator, ThreadWorkload,
    Workload, YcsbConfig, ZipfianGenerator,
};

fn shared(cfg: &YcsbConfig) -> Arc<ycsb::workload::Shared> {
    Arc::new(ycsb::workload::Shared::new(cfg))
}

#[test]
fn key_names_match_ycsb_vectors() {
    let cfg = YcsbConfig::default();
    assert_eq!(cfg.key(0), "user6284781860667377211");
    assert_eq!(cfg.key(1), "user8517097267634966620");
    assert_eq!(cfg.key(2), "user1820151046732198393");
    assert_eq!(cfg.key(3), "user4052466453699787802");
    let ordered = YcsbConfig {
        insert_hashed: false,
        zero_padding: 5,
        ..YcsbConfig::default()
    };
    assert_eq!(ordered.key(42), "user00042");
}

/// The rank distribution YCSB's zipfian (Gray et al.'s method) induces: ranks 0 and 1 from
/// the exact branches, rank k ≥ 2 where ⌊n·(ηu − η + 1)^α⌋ = k for u above the two-item
/// threshold. Computed from the formula, in closed form per rank.
fn gray_pmf(n: i64, theta: f64) -> Vec<f64> {
    let zn = zeta(n, theta);
    let alpha = 1.0 / (1.0 - theta);
    let eta = (1.0 - (2.0 / n as f64).powf(1.0 - theta)) / (1.0 - zeta(2, theta) / zn);
    let t0 = 1.0 / zn;
    let t1 = (1.0 + 0.5f64.powf(theta)) / zn;
    // u at which n·(ηu − η + 1)^α reaches x.
    let u_of = |x: f64| ((x / n as f64).powf(1.0 / alpha) - 1.0 + eta) / eta;
    let mut p = vec![0.0; n as usize];
    p[0] = t0;
    p[1] = t1 - t0;
    for k in 0..n {
        let lo = u_of(k as f64).max(t1);
        let hi = u_of((k + 1) as f64).min(1.0);
        if hi > lo {
            p[k as usize] += hi - lo;
        }
    }
    p
}

/// Chi-square of the zipfian's rank frequencies against the distribution its formula induces
/// (all ranks, tail bins merged to ≥ 20 expected draws), and a KS bound against the ideal
/// Zipf law 1/i^θ / ζ(n), which Gray's method approximates.
#[test]
fn zipfian_rank_frequencies_match_theory() {
    let n = 1000i64;
    let theta = 0.99;
    let draws = 200_000u64;
    let mut g = ZipfianGenerator::from_items(n);
    let mut rng = workload::rng(7);
    let mut counts = vec![0u64; n as usize];
    for _ in 0..draws {
        counts[g.next_value(&mut rng) as usize] += 1;
    }
    let pmf = gray_pmf(n, theta);
    assert!((pmf.iter().sum::<f64>() - 1.0).abs() < 1e-9);
    let (mut chi, mut bins) = (0.0, 0);
    let (mut obs, mut exp) = (0.0, 0.0);
    for k in 0..n as usize {
        obs += counts[k] as f64;
        exp += pmf[k] * draws as f64;
        if exp >= 20.0 || k == n as usize - 1 {
            chi += (obs - exp).powi(2) / exp;
            bins += 1;
            obs = 0.0;
            exp = 0.0;
        }
    }
    // χ² with bins − 1 dof: mean bins − 1, sd √(2(bins − 1)); allow 5 sd.
    let dof = (bins - 1) as f64;
    assert!(
        chi < dof + 5.0 * (2.0 * dof).sqrt(),
        "chi-square {chi} over {bins} bins"
    );
    // KS distance to the ideal Zipf law: Gray's approximation stays close.
    let zn = zeta(n, theta);
    let (mut fe, mut ft, mut ks) = (0.0, 0.0, 0.0f64);
    for (i, &c) in counts.iter().enumerate() {
        fe += c as f64 / draws as f64;
        ft += 1.0 / ((i + 1) as f64).powf(theta) / zn;
        ks = ks.max((fe - ft).abs());
    }
    assert!(ks < 0.05, "KS distance {ks}");
}

#[test]
fn scrambled_zipfian_spreads_hot_keys() {
    let items = 10_000i64;
    let mut g = ScrambledZipfianGenerator::from_items(items);
    let mut rng = workload::rng(11);
    let mut counts: HashMap<i64, u64> = HashMap::new();
    let draws = 200_000;
    for _ in 0..draws {
        let v = g.next_value(&mut rng);
        assert!((0..items).contains(&v));
        *counts.entry(v).or_default() += 1;
    }
    // The 100 hottest items are spread over the key space: every decile holds some, none
    // holds more than a third.
    let mut hot: Vec<(i64, u64)> = counts.into_iter().collect();
    hot.sort_by_key(|b| std::cmp::Reverse(b.1));
    let mut deciles = [0u32; 10];
    for (k, _) in hot.iter().take(100) {
        deciles[(*k * 10 / items) as usize] += 1;
    }
    assert!(
        deciles.iter().all(|&d| (1..=33).contains(&d)),
        "{deciles:?}"
    );
    // The hottest item is the image of rank 0 and has about 1/ζ(10¹⁰) of the draws.
    assert_eq!(hot[0].0, g.item_of_rank(0));
    let f = hot[0].1 as f64 / draws as f64;
    assert!((f - 1.0 / ycsb::SCRAMBLED_ZETAN).abs() < 0.006, "{f}");
    // Still skewed: the top 1 % of items take far more than 1 % of the draws.
    let top: u64 = hot.iter().take(100).map(|x| x.1).sum();
    assert!(top as f64 / draws as f64 > 0.15);
}

#[test]
fn latest_favours_recent_keys() {
    let ack = Arc::new(AcknowledgedCounterGenerator::new(1000));
    let mut g = SkewedLatestGenerator::new(ack.clone());
    let mut rng = workload::rng(3);
    let draws = 100_000;
    let mut recent = 0;
    let mut newest = 0;
    for _ in 0..draws {
        let v = g.next_value(&mut rng);
        assert!((0..=999).contains(&v));
        if v >= 900 {
            recent += 1;
        }
        if v == 999 {
            newest += 1;
        }
    }
    let share = recent as f64 / draws as f64;
    assert!(share > 0.6, "newest 10 % got {share}");
    assert!(newest as f64 / draws as f64 > 0.1);
    // After more inserts are acknowledged the favourite moves with them.
    for _ in 0..100 {
        let k = ack.next_value();
        ack.acknowledge(k).unwrap();
    }
    assert_eq!(ack.last_value(), 1099);
    let mut top = 0;
    for _ in 0..10_000 {
        if g.next_value(&mut rng) >= 1050 {
            top += 1;
        }
    }
    assert!(top > 5000, "{top}");
}

#[test]
fn hotspot_shares() {
    let mut g = HotspotIntegerGenerator::new(0, 9999, 0.2, 0.8);
    let mut rng = workload::rng(5);
    let draws = 100_000;
    let hot = (0..draws).filter(|_| g.next_value(&mut rng) < 2000).count();
    let share = hot as f64 / draws as f64;
    assert!((share - 0.8).abs() < 0.01, "{share}");
}

fn op_shares(w: Workload, n: usize) -> HashMap<&'static str, f64> {
    let cfg = Arc::new(YcsbConfig::workload(w, 1000, n as u64));
    let sh = shared(&cfg);
    let mut t = ThreadWorkload::new(cfg, sh.clone(), 0);
    let mut c: HashMap<&'static str, f64> = HashMap::new();
    for _ in 0..n {
        let name = match t.next_op() {
            Op::Read { .. } => "read",
            Op::Update { .. } => "update",
            Op::Insert { keynum, .. } => {
                sh.insert_sequence.acknowledge(keynum).unwrap();
                "insert"
            }
            Op::Scan { len, .. } => {
                assert!((1..=100).contains(&len));
                "scan"
            }
            Op::ReadModifyWrite { .. } => "rmw",
        };
        *c.entry(name).or_default() += 1.0 / n as f64;
    }
    c
}

#[test]
fn operation_proportions_within_tolerance() {
    let n = 20_000;
    let tol = 0.015;
    let check = |w, want: &[(&str, f64)]| {
        let got = op_shares(w, n);
        for (k, p) in want {
            let g = got.get(k).copied().unwrap_or(0.0);
            assert!((g - p).abs() < tol, "{w:?} {k}: {g} vs {p}");
        }
        let total: f64 = want.iter().map(|x| x.1).sum();
        assert!((total - 1.0).abs() < 1e-9);
        assert_eq!(
            got.len(),
            want.iter().filter(|x| x.1 > 0.0).count(),
            "{w:?} {got:?}"
        );
    };
    check(Workload::A, &[("read", 0.5), ("update", 0.5)]);
    check(Workload::B, &[("read", 0.95), ("update", 0.05)]);
    check(Workload::C, &[("read", 1.0)]);
    check(Workload::D, &[("read", 0.95), ("insert", 0.05)]);
    check(Workload::E, &[("scan", 0.95), ("insert", 0.05)]);
    check(Workload::F, &[("read", 0.5), ("rmw", 0.5)]);
    check(Workload::UpdateOnly, &[("update", 1.0)]);
    check(Workload::UpdateHeavy, &[("read", 0.5), ("update", 0.5)]);
}

#[test]
fn workload_definitions_follow_ycsb_files() {
    let e = YcsbConfig::workload(Workload::E, 10, 10);
    assert_eq!(e.max_scan_length, 100);
    assert_eq!(e.min_scan_length, 1);
    assert_eq!(e.request_distribution, RequestDistribution::Zipfian);
    let d = YcsbConfig::workload(Workload::D, 10, 10);
    assert_eq!(d.request_distribution, RequestDistribution::Latest);
    let a = YcsbConfig::workload(Workload::A, 10, 10);
    assert_eq!((a.field_count, a.field_length), (10, 100));
    assert!(a.read_all_fields && !a.write_all_fields && a.insert_hashed);
}

fn load_and_run(cfg: &YcsbConfig, store: &dyn Store) -> (ycsb::workload::YcsbReport, ()) {
    ycsb::prepare_load(cfg, store).unwrap();
    let load = ycsb::run_load(cfg, store, Progress::Hidden).unwrap();
    let run = ycsb::run_ops(cfg, store, Progress::Hidden).unwrap();
    (
        ycsb::workload::YcsbReport {
            benchmark: "ycsb".into(),
            target: store.describe(),
            config: cfg.clone(),
            load: Some(load),
            run: Some(run),
        },
        (),
    )
}

#[test]
fn one_thread_one_seed_same_operation_sequence() {
    let mut cfg = YcsbConfig::workload(Workload::A, 200, 500);
    cfg.seed = 42;
    let trace = |cfg: &YcsbConfig| {
        let s = Traced::new(InProc::in_memory("ycsb").unwrap());
        load_and_run(cfg, &s);
        s.take()
    };
    let a = trace(&cfg);
    let b = trace(&cfg);
    assert_eq!(a.len(), 1 + 200 + 500);
    assert_eq!(a, b);
    cfg.seed = 43;
    assert_ne!(trace(&cfg), a);
}

#[test]
fn load_and_run_every_workload_in_process() {
    for w in [
        Workload::A,
        Workload::B,
        Workload::C,
        Workload::D,
        Workload::E,
        Workload::F,
        Workload::UpdateOnly,
    ] {
        let mut cfg = YcsbConfig::workload(w, 300, 600);
        cfg.threads = 2;
        let s = InProc::in_memory("ycsb").unwrap();
        let (rep, ()) = load_and_run(&cfg, &s);
        let load = rep.load.unwrap();
        let run = rep.run.unwrap();
        assert_eq!(load.operations, 300);
        assert_eq!(load.metrics["INSERT"].returns["OK"], 300, "{w:?}");
        assert_eq!(run.operations, 600);
        for (name, m) in &run.metrics {
            assert!(!name.ends_with("-FAILED"), "{w:?}: {name} {m:?}");
            assert_eq!(m.returns.get("ERROR"), None, "{w:?} {name}");
        }
        let inserts = run.metrics.get("INSERT").map_or(0, |m| m.operations);
        let n = s.count("usertable", bson::doc! {}, 0, 0).unwrap();
        assert_eq!(n, 300 + inserts, "{w:?}");
        if w == Workload::F {
            let rmw = run.metrics["READ-MODIFY-WRITE"].operations;
            // YCSB counts the inner read and update of an RMW under READ and UPDATE too.
            assert_eq!(run.metrics["UPDATE"].operations, rmw);
            assert_eq!(run.metrics["READ"].operations, 600);
        }
        let text = run.ycsb_text();
        assert!(text.starts_with("[OVERALL], RunTime(ms), "));
        assert!(text.contains("[OVERALL], Throughput(ops/sec), "));
    }
}

#[test]
fn records_are_stored_as_the_mongodb_binding_stores_them() {
    let cfg = YcsbConfig::workload(Workload::C, 5, 5);
    let s = InProc::in_memory("ycsb").unwrap();
    ycsb::run_load(&cfg, &s, Progress::Hidden).unwrap();
    let d = s
        .find_one("usertable", bson::doc! {"_id": cfg.key(0)})
        .unwrap()
        .expect("record 0");
    assert_eq!(d.len(), 11);
    for i in 0..10 {
        match d.get(format!("field{i}")).unwrap() {
            bson::Bson::Binary(b) => {
                assert_eq!(b.subtype, bson::spec::BinarySubtype::Generic);
                assert_eq!(b.bytes.len(), 100);
                assert!(b.bytes.iter().all(|&c| (b' '..=b' ' + 95).contains(&c)));
            }
            other => panic!("field{i} is {other:?}"),
        }
    }
    let (n, h1) = collection_checksum(&s, "usertable").unwrap();
    assert_eq!(n, 5);
    let s2 = InProc::in_memory("ycsb").unwrap();
    ycsb::run_load(&cfg, &s2, Progress::Hidden).unwrap();
    assert_eq!(collection_checksum(&s2, "usertable").unwrap(), (5, h1));
}

#[test]
fn throttled_run_and_interval_series() {
    let mut cfg = YcsbConfig::workload(Workload::A, 100, 100);
    cfg.target_ops_sec = Some(2000.0);
    cfg.status_interval_s = 0.01;
    let s = InProc::in_memory("ycsb").unwrap();
    ycsb::run_load(&cfg, &s, Progress::Hidden).unwrap();
    let r = ycsb::run_ops(&cfg, &s, Progress::Hidden).unwrap();
    assert_eq!(r.operations, 100);
    assert!(!r.intervals.is_empty());
    assert_eq!(r.intervals.last().unwrap().total_ops, 100);
    // The throttle keeps the run at or below the target (no upper bound on time asserted).
    assert!(
        r.throughput_ops_sec <= 2000.0 * 1.05,
        "{}",
        r.throughput_ops_sec
    );
    let json = serde_json::to_string(&r).unwrap();
    assert!(json.contains("\"p99_us\""));
}
