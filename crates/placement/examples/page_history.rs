//! How well a page's last rewrite interval predicts the device lifetime of its next block,
//! with TRIM off and with the lab's safe TRIM: SepBIT's signal on flashdoc's engine, where
//! the policy sees page ids (docs/placement.md, "agegroup").
//!
//! For every run-phase table write of a page written before: the page's previous interval
//! (host pages between its last two writes: the age of the block this write invalidates in
//! the file) and the device lifetime of the block written (`sim::device_lifetimes`, one pass,
//! next-fit layout). Prints the correlation of their log₂ over writes that die, the share of
//! the variance of log₂ lifetime that the interval's octave explains (η²), and per octave the
//! pages, their mean log₂ lifetime and the share that never dies.
//!
//! `cargo run --release -p placement --features sim --example page_history -- TRACE
//! LOGICAL_PAGES END_OF_LOAD_EVENT TRIM_BATCH DISCARD` (the lab's engine JSON gives the first
//! two numbers: `sizing.capacity_bytes / 4096` and `end_of_load_event`; TRIM_BATCH is the
//! scaled batch in extents, 0 for no TRIM; DISCARD 0 or 1).
use placement::sim::{device_lifetimes, TrimConfig};
use placement::trace::TraceReader;
use placement::{Event, TrimWhen};
use std::collections::HashMap;

type Error = Box<dyn std::error::Error>;

/// Page-weighted sums of (x, y) pairs for a correlation.
#[derive(Default)]
struct Moments {
    n: f64,
    x: f64,
    y: f64,
    xx: f64,
    yy: f64,
    xy: f64,
}

impl Moments {
    fn add(&mut self, x: f64, y: f64, w: f64) {
        self.n += w;
        self.x += w * x;
        self.y += w * y;
        self.xx += w * x * x;
        self.yy += w * y * y;
        self.xy += w * x * y;
    }
    fn corr(&self) -> f64 {
        let cov = self.xy / self.n - (self.x / self.n) * (self.y / self.n);
        let vx = self.xx / self.n - (self.x / self.n).powi(2);
        let vy = self.yy / self.n - (self.y / self.n).powi(2);
        cov / (vx * vy).sqrt()
    }
}

/// Per octave of the previous interval: pages, pages that never die, and Σ, Σ² of log₂ life.
#[derive(Default, Clone, Copy)]
struct Octave {
    pages: f64,
    never: f64,
    dying: f64,
    sum: f64,
    sum2: f64,
}

fn main() -> Result<(), Error> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [trace, logical_pages, end_of_load, batch, discard] = args.as_slice() else {
        return Err(
            "usage: page_history TRACE LOGICAL_PAGES END_OF_LOAD_EVENT TRIM_BATCH \
                    DISCARD"
                .into(),
        );
    };
    let trace = std::path::Path::new(trace);
    let logical_pages: u64 = logical_pages.parse()?;
    let end_of_load: u64 = end_of_load.parse()?;
    let batch: usize = batch.parse()?;
    let events = || -> Result<_, Error> {
        Ok(TraceReader::open(trace)
            .map_err(|e| format!("{}: {e}", trace.display()))?
            .map(|e| e.map_err(Error::from)))
    };
    let trim = TrimConfig {
        batch: (batch > 0).then_some(batch),
        when: TrimWhen::Free,
    };
    let lives = device_lifetimes(
        events()?,
        logical_pages,
        ssd::AllocPolicy::NextFit,
        discard == "1",
        trim,
    )?;
    let mut births = lives.with_births();
    let mut last_birth: HashMap<(u32, u64), u64> = HashMap::new();
    let mut m = Moments::default();
    let mut octaves = vec![Octave::default(); 64];
    let mut fresh = Octave::default();
    for (i, ev) in events()?.enumerate() {
        let Event::Write(w) = ev? else { continue };
        let (birth, life) = births.next().ok_or("fewer lives than writes")?;
        if w.table == 0 || w.page_id == 0 {
            continue;
        }
        let prev = last_birth.insert((w.file, w.page_id), birth);
        if (i as u64) < end_of_load {
            continue;
        }
        let pages = life.pages as f64;
        let o = match prev {
            Some(b) => &mut octaves[(63 - (birth - b).max(1).leading_zeros()) as usize],
            None => &mut fresh,
        };
        o.pages += pages;
        if life.death == u64::MAX {
            o.never += pages;
            continue;
        }
        let ll = ((life.death - birth).max(1) as f64).log2();
        o.dying += pages;
        o.sum += pages * ll;
        o.sum2 += pages * ll * ll;
        if let Some(b) = prev {
            m.add(((birth - b).max(1) as f64).log2(), ll, pages);
        }
    }
    report(&m, &octaves, &fresh);
    Ok(())
}

fn report(m: &Moments, octaves: &[Octave], fresh: &Octave) {
    // η²: the share of the variance of log₂ life (dying writes with a previous interval)
    // between the octaves' means.
    let (n, s, s2) = octaves.iter().fold((0.0, 0.0, 0.0), |(n, s, s2), o| {
        (n + o.dying, s + o.sum, s2 + o.sum2)
    });
    let mean = s / n;
    let between: f64 = octaves
        .iter()
        .filter(|o| o.dying > 0.0)
        .map(|o| o.dying * (o.sum / o.dying - mean).powi(2))
        .sum();
    let total = s2 - n * mean * mean;
    println!(
        "corr(log2 prev, log2 life) {:.3}  eta2 {:.3}  pages {:.0}",
        m.corr(),
        between / total,
        n
    );
    println!("prev octave\tpages\tmean log2 life\tsd\tnever");
    let row = |name: String, o: &Octave| {
        let mu = o.sum / o.dying.max(1.0);
        let sd = (o.sum2 / o.dying.max(1.0) - mu * mu).max(0.0).sqrt();
        println!(
            "{name}\t{:.0}\t{mu:.2}\t{sd:.2}\t{:.3}",
            o.pages,
            o.never / o.pages.max(1.0)
        );
    };
    for (k, o) in octaves.iter().enumerate().filter(|(_, o)| o.pages > 0.0) {
        row(format!("2^{k}"), o);
    }
    row("fresh".into(), fresh);
}
