//! LinkBench's distributions and data generators (facebookarchive/linkbench, `distributions/*`,
//! `generators/*`, `RealDistribution`), reimplemented from notes/workloads.md §3.
//!
//! Where LinkBench's behaviour depends on `java.util.Random`'s exact stream (which ids the
//! shufflers make hot) or on the shipped `Distribution.dat`, we keep the statistics and not
//! the exact values: see docs/workloads.md.

use rand::Rng as _;
use rand::RngCore;
use rand_distr::{Distribution as _, StandardNormal};

/// LinkBench's `ZipfDistribution` over ranks 0..n (Gray et al.'s method, as YCSB's), with
/// LinkBench's approximation of ζ(n) for n ≥ 100 000 (`ApproxHarmonic`).
#[derive(Clone, Debug)]
pub struct LbZipf {
    /// Items the Zipf ranks (the classes, with [`LbZipf::with_classes`]).
    n: i64,
    /// Ranks a draw returns: `n`, or more when each class spreads over several.
    ranks: i64,
    shape: f64,
    zetan: f64,
    eta: f64,
    alpha: f64,
    two_point: f64,
}

impl LbZipf {
    pub fn new(n: i64, shape: f64) -> LbZipf {
        let n = n.max(1);
        let zetan = if n >= 100_000 {
            (n as f64).powf(1.0 - shape) / (1.0 - shape) + (0.58 - 1.0 / (1.0 - shape))
        } else {
            (1..=n).map(|i| 1.0 / (i as f64).powf(shape)).sum()
        };
        let zeta2 = 1.0 + 0.5f64.powf(shape);
        let eta = (1.0 - (2.0 / n as f64).powf(1.0 - shape)) / (1.0 - zeta2 / zetan);
        LbZipf {
            n,
            ranks: n,
            shape,
            zetan,
            eta,
            alpha: 1.0 / (1.0 - shape),
            two_point: zeta2,
        }
    }

    /// Not in LinkBench: the same Zipf over a fixed number of classes, each spread uniformly
    /// over its share of the `n` ranks (class `c` holds ranks `c, c + classes, …`), so the
    /// share of draws on the hottest tenth of the ranks does not grow with `n` (for a shape
    /// below 1 the head of a finite Zipf grows with its item count; docs/placement.md, "Why
    /// the absolute figures do not converge"). `1 ≤ classes ≤ n`.
    pub fn with_classes(n: i64, shape: f64, classes: i64) -> LbZipf {
        assert!((1..=n.max(1)).contains(&classes), "1 ≤ classes ≤ n");
        LbZipf {
            ranks: n.max(1),
            ..LbZipf::new(classes, shape)
        }
    }

    pub fn shape(&self) -> f64 {
        self.shape
    }

    /// The rank (0 = most popular) at quantile `p` ∈ [0, 1).
    pub fn quantile(&self, p: f64) -> i64 {
        let uz = p * self.zetan;
        if uz < 1.0 {
            return 0;
        }
        if uz < self.two_point {
            return 1.min(self.n - 1);
        }
        let r = (self.n as f64 * (self.eta * p - self.eta + 1.0).powf(self.alpha)) as i64;
        r.clamp(0, self.n - 1)
    }

    pub fn sample(&self, rng: &mut dyn RngCore) -> i64 {
        let class = self.quantile(rng.gen::<f64>());
        if self.ranks == self.n {
            return class;
        }
        crate::class_member(class, self.n, self.ranks, rng)
    }
}

/// LinkBench's `InvertibleShuffler`: a permutation of 0..n built from `groups` residue
/// classes, each rotated by its own random offset. Rotations come from our seeded RNG, not
/// `java.util.Random`, so the hot ids differ from Java LinkBench's (the statistics do not).
#[derive(Clone, Debug)]
pub struct Shuffler {
    n: i64,
    groups: i64,
    rot: Vec<i64>,
}

impl Shuffler {
    pub fn new(seed: u64, n: i64) -> Shuffler {
        let n = n.max(1);
        let groups = n.min(1024);
        let mut rng = crate::rng(seed);
        let rot = (0..groups)
            .map(|g| {
                let cnt = Self::class_size(n, groups, g);
                (rng.next_u64() % cnt as u64) as i64
            })
            .collect();
        Shuffler { n, groups, rot }
    }

    fn class_size(n: i64, groups: i64, g: i64) -> i64 {
        (n - g + groups - 1) / groups
    }

    pub fn permute(&self, i: i64) -> i64 {
        let g = i % self.groups;
        let j = i / self.groups;
        let cnt = Self::class_size(self.n, self.groups, g);
        g + ((j + self.rot[g as usize]) % cnt) * self.groups
    }

    pub fn invert(&self, x: i64) -> i64 {
        let g = x % self.groups;
        let j = x / self.groups;
        let cnt = Self::class_size(self.n, self.groups, g);
        g + ((j - self.rot[g as usize]).rem_euclid(cnt)) * self.groups
    }
}

/// The out-degree CDF (`nlinks` of `config/Distribution.dat`), coarsened to anchor points:
/// (degree, cumulative fraction of id1s). Between anchors the degree is interpolated in
/// log(1 + degree). An approximation of LinkBench's empirical Facebook distribution (the
/// data file itself is not shipped here); see docs/workloads.md for its statistics.
pub const NLINKS_CDF: &[(u64, f64)] = &[
    (0, 0.19747),
    (1, 0.72985),
    (2, 0.86738),
    (3, 0.91817),
    (4, 0.94459),
    (5, 0.95869),
    (6, 0.96778),
    (8, 0.97817),
    (10, 0.98341),
    (15, 0.98963),
    (20, 0.99222),
    (30, 0.99465),
    (50, 0.99652),
    (100, 0.99774),
    (200, 0.99840),
    (300, 0.99870),
    (500, 0.99900),
    (700, 0.99916),
    (1_000, 0.99935),
    (2_000, 0.99962),
    (4_000, 0.99982),
    (10_000, 0.99996),
    (100_000, 0.999995),
    (961_963, 1.0),
];

/// The degree at CDF value `u` ∈ [0, 1]: the first anchor at or above `u`, interpolated.
pub fn nlinks_at(u: f64) -> u64 {
    let (d0, c0) = NLINKS_CDF[0];
    if u <= c0 {
        return d0;
    }
    for w in NLINKS_CDF.windows(2) {
        let ((da, ca), (db, cb)) = (w[0], w[1]);
        if u <= cb {
            let f = ((u - ca) / (cb - ca)).clamp(0.0, 1.0);
            let la = (1.0 + da as f64).ln();
            let lb = (1.0 + db as f64).ln();
            let d = (la + (lb - la) * f).exp() - 1.0;
            return (d.ceil() as u64).clamp(da + 1, db);
        }
    }
    NLINKS_CDF.last().expect("anchors").0
}

/// LinkBench's `GeometricDistribution(p)` on [min, max]: min + ⌊ln U / ln(1 − p)⌋, capped.
pub fn geometric(p: f64, min: u64, max: u64, rng: &mut dyn RngCore) -> u64 {
    let u: f64 = 1.0 - rng.gen::<f64>(); // (0, 1]
    let k = (u.ln() / (1.0 - p).ln()).floor() as u64;
    (min + k).min(max)
}

/// LinkBench's `LogNormalDistribution`: round(median · e^(σ·N(0,1))), in [0, max).
pub fn lognormal(median: f64, sigma: f64, max: u64, rng: &mut dyn RngCore) -> u64 {
    let z: f64 = StandardNormal.sample(&mut RngWrap(rng));
    let v = (median.ln() + sigma * z).exp().round();
    (v.max(0.0) as u64).min(max.saturating_sub(1))
}

struct RngWrap<'a>(&'a mut dyn RngCore);

impl RngCore for RngWrap<'_> {
    fn next_u32(&mut self) -> u32 {
        self.0.next_u32()
    }
    fn next_u64(&mut self) -> u64 {
        self.0.next_u64()
    }
    fn fill_bytes(&mut self, dest: &mut [u8]) {
        self.0.fill_bytes(dest)
    }
    fn try_fill_bytes(&mut self, dest: &mut [u8]) -> Result<(), rand::Error> {
        self.0.try_fill_bytes(dest)
    }
}

/// LinkBench's `MotifDataGenerator`: chunks of up to 128 bytes, each fresh random bytes in
/// [start, end] with probability `uniqueness`, else a copy of a window of a 512-byte motif
/// (LinkBench never applies `motif_length`, so the motif is always 512 bytes).
#[derive(Clone, Debug)]
pub struct MotifGen {
    start: u8,
    end: u8,
    uniqueness: f64,
    motif: Vec<u8>,
}

const MOTIF_LEN: usize = 512;
const CHUNK: usize = 128;

impl MotifGen {
    pub fn new(start: u8, end: u8, uniqueness: f64, rng: &mut dyn RngCore) -> MotifGen {
        let mut g = MotifGen {
            start,
            end,
            uniqueness,
            motif: Vec::new(),
        };
        g.motif = (0..MOTIF_LEN).map(|_| g.byte(rng)).collect();
        g
    }

    /// Link payloads: bytes 32..100, uniqueness 0.225 (~30 % compression).
    pub fn link(rng: &mut dyn RngCore) -> MotifGen {
        MotifGen::new(32, 100, 0.225, rng)
    }

    /// Node payloads: bytes 50..220, uniqueness 0.63 (~60 % compression).
    pub fn node(rng: &mut dyn RngCore) -> MotifGen {
        MotifGen::new(50, 220, 0.63, rng)
    }

    fn byte(&self, rng: &mut dyn RngCore) -> u8 {
        rng.gen_range(self.start..=self.end)
    }

    pub fn fill(&self, len: usize, rng: &mut dyn RngCore) -> Vec<u8> {
        let mut out = Vec::with_capacity(len);
        while out.len() < len {
            let n = CHUNK.min(len - out.len());
            if rng.gen::<f64>() < self.uniqueness {
                for _ in 0..n {
                    out.push(self.byte(rng));
                }
            } else {
                let off = rng.gen_range(0..=MOTIF_LEN - n);
                out.extend_from_slice(&self.motif[off..off + n]);
            }
        }
        out
    }
}
