//! Benchmark (not a test; `--ignored`): `$near` top-10 and `$geoWithin` over 100 000 points,
//! through the 2dsphere index and by collection scan, with latency percentiles. Writes
//! `target/bench/geo.json`.
//!
//! Run: `cargo test --release -p docdb --test geo_bench -- --ignored --nocapture`
//! (`FLASHDOC_GEO_BENCH_DOCS` changes the point count).
use bson::{doc, Bson, Document};
use docdb::{DocDb, DocDbConfig, FindQuery, WriteOpts};
use query::geo::sphere::V3;
use rand::{Rng, SeedableRng};
use std::time::Instant;

const SEED: u64 = 14;
/// Points are uniform in longitude/latitude over this box (western Europe).
const LNG: (f64, f64) = (-10.0, 20.0);
const LAT: (f64, f64) = (35.0, 60.0);

fn percentile(sorted: &[f64], p: f64) -> f64 {
    sorted[((sorted.len() as f64 - 1.0) * p).round() as usize]
}

/// Milliseconds of each call (one per query), sorted, and the last call's result.
fn timed<T>(queries: &[T], mut f: impl FnMut(&T) -> Vec<i64>) -> (Vec<f64>, Vec<Vec<i64>>) {
    let mut ms = Vec::with_capacity(queries.len());
    let mut out = Vec::with_capacity(queries.len());
    for q in queries {
        let t = Instant::now();
        out.push(f(q));
        ms.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    ms.sort_by(|a, b| a.total_cmp(b));
    (ms, out)
}

fn summary(ms: &[f64]) -> Bson {
    Bson::Document(doc! {
        "runs": ms.len() as i64,
        "p50_ms": percentile(ms, 0.5),
        "p99_ms": percentile(ms, 0.99),
        "max_ms": ms[ms.len() - 1],
    })
}

fn ids(db: &DocDb, q: &FindQuery) -> Vec<i64> {
    db.find("b", "pts", q)
        .unwrap()
        .map(|d| d.unwrap().get_i64("_id").unwrap())
        .collect()
}

#[test]
#[ignore]
fn near_and_within_index_vs_scan() {
    let n: usize = std::env::var("FLASHDOC_GEO_BENCH_DOCS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(100_000);
    let mut rng = rand::rngs::StdRng::seed_from_u64(SEED);
    let pts: Vec<(f64, f64)> = (0..n)
        .map(|_| (rng.gen_range(LNG.0..LNG.1), rng.gen_range(LAT.0..LAT.1)))
        .collect();
    let db = DocDb::open(DocDbConfig::in_memory()).unwrap();
    let (load_s, index_s) = load_points(&db, &pts);

    let centers: Vec<(f64, f64)> = (0..100)
        .map(|_| {
            (
                rng.gen_range(LNG.0 + 1.0..LNG.1 - 1.0),
                rng.gen_range(LAT.0 + 1.0..LAT.1 - 1.0),
            )
        })
        .collect();

    // $near top 10 through the index; the scan computes every distance and keeps the 10 least.
    let (near_ms, near_ids) = timed(&centers, |(x, y)| {
        let q = FindQuery {
            filter: doc! {"loc": {"$near": {"$geometry": {"type": "Point", "coordinates": [x, y]}}}},
            limit: Some(10),
            ..Default::default()
        };
        ids(&db, &q)
    });
    let scan_centers = &centers[..10];
    let (near_scan_ms, near_scan_ids) = timed(scan_centers, |(x, y)| {
        let c = V3::from_lng_lat(*x, *y);
        let mut all: Vec<(f64, i64)> = db
            .find("b", "pts", &FindQuery::default())
            .unwrap()
            .map(|d| {
                let d = d.unwrap();
                let p = d
                    .get_document("loc")
                    .unwrap()
                    .get_array("coordinates")
                    .unwrap();
                let (px, py) = (p[0].as_f64().unwrap(), p[1].as_f64().unwrap());
                (c.angle(V3::from_lng_lat(px, py)), d.get_i64("_id").unwrap())
            })
            .collect();
        all.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
        all.iter().take(10).map(|p| p.1).collect()
    });
    for (i, got) in near_scan_ids.iter().enumerate() {
        assert_eq!(&near_ids[i], got, "index and scan agree on the 10 nearest");
    }

    let (within_ms, within_scan_ms, matched) = within_index_vs_scan(&db, &centers);

    let p50 = |v: &[f64]| percentile(v, 0.5);
    println!(
        "$near top 10: index p50 {:.2} ms p99 {:.2} ms; scan p50 {:.1} ms ({:.0}x)",
        p50(&near_ms),
        percentile(&near_ms, 0.99),
        p50(&near_scan_ms),
        p50(&near_scan_ms) / p50(&near_ms)
    );
    println!(
        "$geoWithin 1° square (~{matched} points): index p50 {:.2} ms p99 {:.2} ms; scan p50 {:.1} ms ({:.0}x)",
        p50(&within_ms),
        percentile(&within_ms, 0.99),
        p50(&within_scan_ms),
        p50(&within_scan_ms) / p50(&within_ms)
    );
    let report = doc! {
        "benchmark": "geo",
        "points": n as i64,
        "engine": "in-memory (DocDbConfig::in_memory)",
        "build": if cfg!(debug_assertions) { "debug" } else { "release" },
        "seed": SEED as i64,
        "area": format!("uniform lng {LNG:?} lat {LAT:?}"),
        "load_s": load_s,
        "index_build_s": index_s,
        "near_top10": {"index": summary(&near_ms), "collection_scan": summary(&near_scan_ms)},
        "within_1deg_square": {
            "mean_matches": matched as i64,
            "index": summary(&within_ms),
            "collection_scan": summary(&within_scan_ms),
        },
    };
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/bench");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("geo.json");
    let json =
        serde_json::to_string_pretty(&Bson::Document(report).into_relaxed_extjson()).unwrap();
    std::fs::write(&path, json).unwrap();
    println!("wrote {}", path.display());
}

/// Loads the points as GeoJSON documents and builds their 2dsphere index; returns the seconds
/// each took.
fn load_points(db: &DocDb, pts: &[(f64, f64)]) -> (f64, f64) {
    let t = Instant::now();
    for (c, chunk) in pts.chunks(1000).enumerate() {
        let docs: Vec<Document> = chunk
            .iter()
            .enumerate()
            .map(|(i, (x, y))| doc! {"_id": (c * 1000 + i) as i64, "loc": {"type": "Point", "coordinates": [x, y]}})
            .collect();
        assert!(db
            .insert("b", "pts", docs, WriteOpts::default())
            .write_errors
            .is_empty());
    }
    let load_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    db.create_indexes("b", "pts", &[doc! {"key": {"loc": "2dsphere"}}])
        .unwrap();
    (load_s, t.elapsed().as_secs_f64())
}

/// `$geoWithin` squares around the centers through the index and by `$natural` scans (which
/// must agree): the latencies of both, and the mean matches per square.
fn within_index_vs_scan(db: &DocDb, centers: &[(f64, f64)]) -> (Vec<f64>, Vec<f64>, usize) {
    // $geoWithin a 1° × 1° square (~0.13 % of the box: ~130 points), index vs $natural.
    let squares: Vec<Document> = centers
        .iter()
        .map(|(x, y)| doc! {"loc": {"$geoWithin": {"$geometry": {"type": "Polygon", "coordinates": [[
            [x - 0.5, y - 0.5], [x + 0.5, y - 0.5], [x + 0.5, y + 0.5], [x - 0.5, y + 0.5], [x - 0.5, y - 0.5]
        ]]}}}})
        .collect();
    let within = |f: &Document, hint: Option<Bson>| {
        let q = FindQuery {
            filter: f.clone(),
            hint,
            ..Default::default()
        };
        let mut v = ids(db, &q);
        v.sort_unstable();
        v
    };
    let (within_ms, within_ids) = timed(&squares, |f| within(f, None));
    let (within_scan_ms, within_scan_ids) = timed(&squares[..10], |f| {
        within(f, Some(Bson::Document(doc! {"$natural": 1})))
    });
    for (i, got) in within_scan_ids.iter().enumerate() {
        assert_eq!(&within_ids[i], got, "index and scan agree on $geoWithin");
    }
    let matched: usize = within_ids.iter().map(Vec::len).sum::<usize>() / within_ids.len();
    (within_ms, within_scan_ms, matched)
}
