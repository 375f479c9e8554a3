//! Benchmark (not a test; `--ignored`): a `$text` search over 100 000 documents against the
//! same filter evaluated by a collection scan, and a `$facet` pagination query (page + total),
//! with latency percentiles. Writes `target/bench/text_facet.json`.
//!
//! Run: `cargo test --release -p docdb --test text_bench -- --ignored --nocapture`
//! (`FLASHDOC_TEXT_BENCH_DOCS` changes the document count).
use bson::{doc, Bson, Document};
use docdb::{AggregateOpts, DocDb, DocDbConfig, FindQuery, WriteOpts};
use query::text::{TextOperand, TextSpec};
use rand::{Rng, SeedableRng};
use std::time::Instant;

const VOCABULARY: usize = 5_000;
const SEED: u64 = 14;

/// A word of the synthetic vocabulary: pronounceable, distinct, not an English stop word.
fn word(i: usize) -> String {
    const C: &[u8] = b"bcdfghjklmnprstvz";
    const V: &[u8] = b"aeiou";
    let mut s = String::new();
    let mut n = i + 1;
    while n > 0 {
        s.push(C[n % C.len()] as char);
        n /= C.len();
        s.push(V[n % V.len()] as char);
        n /= V.len();
    }
    s.push('x');
    s
}

/// A Zipf-like pick: rank r with weight 1/(r+1).
fn zipf(rng: &mut impl Rng, cdf: &[f64]) -> usize {
    let x: f64 = rng.gen::<f64>() * cdf[cdf.len() - 1];
    cdf.partition_point(|&c| c < x)
}

fn corpus(n: usize) -> Vec<Document> {
    let mut rng = rand::rngs::StdRng::seed_from_u64(SEED);
    let mut cdf = Vec::with_capacity(VOCABULARY);
    let mut acc = 0.0;
    for r in 0..VOCABULARY {
        acc += 1.0 / (r as f64 + 1.0);
        cdf.push(acc);
    }
    (0..n)
        .map(|i| {
            let mut sentence = |len: usize| {
                (0..len)
                    .map(|_| word(zipf(&mut rng, &cdf)))
                    .collect::<Vec<_>>()
                    .join(" ")
            };
            let title = sentence(5);
            let body = sentence(30);
            doc! {
                "_id": i as i64,
                "title": title,
                "body": body,
                "category": (i % 50) as i32,
                "created": i as i64,
            }
        })
        .collect()
}

fn percentile(sorted: &[f64], p: f64) -> f64 {
    let i = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted[i]
}

/// Milliseconds of each of `runs` calls, sorted.
fn timed(runs: usize, mut f: impl FnMut() -> usize) -> (Vec<f64>, usize) {
    let mut out = Vec::with_capacity(runs);
    let mut n = 0;
    for _ in 0..runs {
        let t = Instant::now();
        n = f();
        out.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    out.sort_by(|a, b| a.partial_cmp(b).unwrap());
    (out, n)
}

fn summary(ms: &[f64]) -> Bson {
    Bson::Document(doc! {
        "runs": ms.len() as i64,
        "p50_ms": percentile(ms, 0.5),
        "p99_ms": percentile(ms, 0.99),
        "min_ms": ms[0],
        "max_ms": ms[ms.len() - 1],
    })
}

#[test]
#[ignore]
fn text_search_and_facet_pagination() {
    let n: usize = std::env::var("FLASHDOC_TEXT_BENCH_DOCS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(100_000);
    let db = DocDb::open(DocDbConfig::in_memory()).unwrap();
    let (load_s, index_s) = load_and_index(&db, n);

    // A term of middling frequency (rank 200 of the Zipf vocabulary) and a two-term query.
    let searches = [word(200), format!("{} {}", word(300), word(1200))];
    let spec = TextSpec::parse(
        &["title".into(), "body".into()],
        Some(&Bson::Document(doc! {"title": 5})),
        None,
        None,
        None,
    )
    .unwrap();
    let results: Vec<Bson> = searches
        .iter()
        .map(|search| text_search_against_scan(&db, &spec, search))
        .collect();

    let facets = facet_pagination(&db, &searches[0]);
    println!(
        "$facet page+total: p50 {:.2} ms p99 {:.2} ms; over $text: p50 {:.2} ms p99 {:.2} ms",
        percentile(&facets.page_ms, 0.5),
        percentile(&facets.page_ms, 0.99),
        percentile(&facets.text_page_ms, 0.5),
        percentile(&facets.text_page_ms, 0.99)
    );
    let report = doc! {
        "benchmark": "text_facet",
        "documents": n as i64,
        "engine": "in-memory (DocDbConfig::in_memory)",
        "build": if cfg!(debug_assertions) { "debug" } else { "release" },
        "vocabulary": VOCABULARY as i64,
        "words_per_document": 35,
        "seed": SEED as i64,
        "load_s": load_s,
        "index_build_s": index_s,
        "text_search": results,
        "facet_pagination": {
            "pipeline": format!("{:?}", facets.page),
            "latency": summary(&facets.page_ms),
        },
        "text_facet_pagination": {
            "pipeline": format!("{:?}", facets.text_page),
            "latency": summary(&facets.text_page_ms),
        },
    };
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../target/bench");
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("text_facet.json");
    let json =
        serde_json::to_string_pretty(&Bson::Document(report).into_relaxed_extjson()).unwrap();
    std::fs::write(&path, json).unwrap();
    println!("wrote {}", path.display());
}

/// Loads the corpus of `n` documents and builds its text and category indexes; returns the
/// seconds each took.
fn load_and_index(db: &DocDb, n: usize) -> (f64, f64) {
    let docs = corpus(n);
    let t = Instant::now();
    for chunk in docs.chunks(1000) {
        let out = db.insert("b", "posts", chunk.to_vec(), WriteOpts::default());
        assert!(out.write_errors.is_empty());
    }
    let load_s = t.elapsed().as_secs_f64();
    let t = Instant::now();
    db.create_indexes(
        "b",
        "posts",
        &[
            doc! {"key": {"title": "text", "body": "text"}, "weights": {"title": 5}},
            doc! {"key": {"category": 1, "created": -1}},
        ],
    )
    .unwrap();
    (load_s, t.elapsed().as_secs_f64())
}

/// One `$text` search timed through the index and by a collection scan holding every
/// document to the same predicate; both must find the same documents.
fn text_search_against_scan(db: &DocDb, spec: &TextSpec, search: &str) -> Bson {
    let filter = doc! {"$text": {"$search": search}};
    let q = FindQuery {
        filter: filter.clone(),
        ..Default::default()
    };
    assert_eq!(
        db.plan_summary("b", "posts", &q).unwrap(),
        "IXSCAN title_text_body_text"
    );
    let (text_ms, text_n) = timed(20, || db.find("b", "posts", &q).unwrap().count());
    // The same filter by a collection scan: every document read and held to the same
    // text predicate (tokenized and stemmed as the index would).
    let resolved = TextOperand::parse(filter.get("$text").unwrap())
        .unwrap()
        .resolve(spec.default_language)
        .unwrap();
    let all = FindQuery::default();
    let (scan_ms, scan_n) = timed(5, || {
        db.find("b", "posts", &all)
            .unwrap()
            .filter(|d| spec.matches(d.as_ref().unwrap(), &resolved).unwrap())
            .count()
    });
    assert_eq!(text_n, scan_n, "the index and the scan agree on {search}");
    let speedup = percentile(&scan_ms, 0.5) / percentile(&text_ms, 0.5);
    println!(
        "$text {search:?}: {text_n} matches, p50 {:.2} ms; collection scan p50 {:.1} ms; {speedup:.0}x",
        percentile(&text_ms, 0.5),
        percentile(&scan_ms, 0.5)
    );
    Bson::Document(doc! {
        "search": search,
        "matches": text_n as i64,
        "text_index": summary(&text_ms),
        "collection_scan": summary(&scan_ms),
        "speedup_p50": speedup,
    })
}

/// The two pagination pipelines and their latencies.
struct FacetPagination {
    page: Vec<Document>,
    page_ms: Vec<f64>,
    text_page: Vec<Document>,
    text_page_ms: Vec<f64>,
}

/// "Page plus total" pagination timed by category and over a text search.
fn facet_pagination(db: &DocDb, search: &str) -> FacetPagination {
    // "Page plus total" pagination: one category, newest first, page 3 of 20.
    let page = vec![
        doc! {"$match": {"category": 7}},
        doc! {"$sort": {"created": -1}},
        doc! {"$facet": {
            "items": [{"$skip": 40}, {"$limit": 20}],
            "total": [{"$count": "n"}],
        }},
    ];
    let (facet_ms, _) = timed(200, || {
        let out: Vec<Document> = db
            .aggregate("b", "posts", &page, &AggregateOpts::default())
            .unwrap()
            .map(|d| d.unwrap())
            .collect();
        assert_eq!(out[0].get_array("items").unwrap().len(), 20);
        out.len()
    });
    // The same over a text search, ranked by score.
    let text_page = vec![
        doc! {"$match": {"$text": {"$search": search}}},
        doc! {"$sort": {"score": {"$meta": "textScore"}}},
        doc! {"$facet": {
            "items": [{"$skip": 20}, {"$limit": 20}, {"$project": {"title": 1, "score": {"$meta": "textScore"}}}],
            "total": [{"$count": "n"}],
        }},
    ];
    let (text_facet_ms, _) = timed(200, || {
        db.aggregate("b", "posts", &text_page, &AggregateOpts::default())
            .unwrap()
            .count()
    });
    FacetPagination {
        page,
        page_ms: facet_ms,
        text_page,
        text_page_ms: text_facet_ms,
    }
}
