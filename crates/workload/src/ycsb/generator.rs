//! YCSB 0.17.0's number generators (`core/src/main/java/site/ycsb/generator/*`), the key hash
//! (`Utils.fnvhash64`) and key names (`CoreWorkload.buildKeyName`).
//!
//! Values are `i64`, as Java's `long`: YCSB's arithmetic (`Math.abs` of a signed hash, `%` of
//! signed longs) is reproduced bit for bit, including the corner cases where Java yields a
//! negative number. Randomness comes from the caller's RNG: `rng.gen::<f64>()` stands for
//! `nextDouble()` (53 random bits in [0, 1), as Java's) and `rng.next_u64() as i64` for
//! `nextLong()`.
//!
//! Per-thread generators (`ZipfianGenerator`, `ScrambledZipfianGenerator`, …) take `&mut self`;
//! clone one per thread. The counters (`CounterGenerator`, `AcknowledgedCounterGenerator`) are
//! shared by all threads, as in YCSB, and take `&self`.

use parking_lot::Mutex;
use rand::{Rng, RngCore};
use std::fmt::Write as _;
use std::sync::atomic::{AtomicBool, AtomicI64, Ordering};
use std::sync::Arc;

/// YCSB's θ (`ZipfianGenerator.ZIPFIAN_CONSTANT`). There is no property to change it in YCSB.
pub const ZIPFIAN_CONSTANT: f64 = 0.99;

/// `ScrambledZipfianGenerator.ITEM_COUNT`: the inner zipfian draws from 0..=ITEM_COUNT, i.e.
/// over ITEM_COUNT + 1 items (its `max` is inclusive).
pub const SCRAMBLED_ITEM_COUNT: i64 = 10_000_000_000;

/// `ScrambledZipfianGenerator.ZETAN`: ζ(10¹⁰, 0.99), precomputed by YCSB and used as is (YCSB
/// does not recompute it for the 10¹⁰ + 1 items the inner generator really has).
pub const SCRAMBLED_ZETAN: f64 = 26.46902820178302;

const FNV_OFFSET_BASIS_64: u64 = 0xCBF2_9CE4_8422_2325;
const FNV_PRIME_64: u64 = 1_099_511_628_211;

/// `Utils.fnvhash64`: FNV-1a over the 8 bytes of `val`, least significant first, then Java's
/// `Math.abs` of the hash read as a signed long (so a hash of `i64::MIN` stays negative).
pub fn fnvhash64(val: i64) -> i64 {
    let mut h = FNV_OFFSET_BASIS_64;
    let mut v = val as u64;
    for _ in 0..8 {
        h ^= v & 0xff;
        h = h.wrapping_mul(FNV_PRIME_64);
        v >>= 8;
    }
    (h as i64).wrapping_abs()
}

/// CoreWorkload's `insertorder`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Default)]
pub enum KeyOrder {
    /// `hashed` (the default): the key number is replaced by `fnvhash64(keynum)`.
    #[default]
    Hashed,
    /// Any other value: the key number itself.
    Ordered,
}

/// `CoreWorkload.buildKeyName`: `"user"` + zero padding + the decimal key number (hashed first
/// for [`KeyOrder::Hashed`]). Padding counts the whole decimal string, a '-' sign included, and
/// goes in front of it, as YCSB does. `zeropadding` defaults to 1 in YCSB (no padding).
pub fn build_key_name(keynum: i64, order: KeyOrder, zeropadding: usize) -> String {
    let mut s = String::with_capacity(24);
    write_key_name(&mut s, keynum, order, zeropadding);
    s
}

/// [`build_key_name`] into a reused buffer (cleared first): no allocation on a hot path.
pub fn write_key_name(out: &mut String, keynum: i64, order: KeyOrder, zeropadding: usize) {
    let n = match order {
        KeyOrder::Hashed => fnvhash64(keynum),
        KeyOrder::Ordered => keynum,
    };
    out.clear();
    out.push_str("user");
    let digits = decimal_len(n);
    for _ in digits..zeropadding {
        out.push('0');
    }
    write!(out, "{n}").expect("writing to a String");
}

fn decimal_len(n: i64) -> usize {
    let sign = usize::from(n < 0);
    let mut m = n.unsigned_abs();
    let mut d = 1;
    while m >= 10 {
        m /= 10;
        d += 1;
    }
    d + sign
}

/// ζ(n, θ) = Σ_{i=1..n} 1/i^θ, summed in YCSB's order (`ZipfianGenerator.zetastatic(n, θ)`).
pub fn zeta(n: i64, theta: f64) -> f64 {
    zeta_incremental(0, n, theta, 0.0)
}

/// ζ extended from `st` to `n` items: `initialsum` + Σ_{i=st+1..n} 1/i^θ
/// (`zetastatic(st, n, θ, initialsum)`).
pub fn zeta_incremental(st: i64, n: i64, theta: f64, initialsum: f64) -> f64 {
    let mut sum = initialsum;
    let mut i = st;
    while i < n {
        sum += 1.0 / ((i + 1) as f64).powf(theta);
        i += 1;
    }
    sum
}

/// A per-thread source of numbers (YCSB's `NumberGenerator`).
pub trait NumberGenerator {
    /// The next number (YCSB's `nextValue()`).
    fn next_value(&mut self, rng: &mut dyn RngCore) -> i64;
    /// The number most recently returned (YCSB's `lastValue()`).
    fn last_value(&self) -> i64;
}

/// YCSB's `ZipfianGenerator` (Gray et al., "Quickly Generating Billion-Record Synthetic
/// Databases", SIGMOD 1994): items `base..base+items`, item `base` the most popular.
#[derive(Clone, Debug)]
pub struct ZipfianGenerator {
    items: i64,
    base: i64,
    theta: f64,
    zeta2theta: f64,
    alpha: f64,
    zetan: f64,
    eta: f64,
    countforzeta: i64,
    allow_itemcount_decrease: bool,
    last: i64,
}

impl ZipfianGenerator {
    /// `ZipfianGenerator(items)`: items 0..items−1, θ = 0.99.
    pub fn from_items(items: i64) -> Self {
        Self::new(0, items - 1)
    }

    /// `ZipfianGenerator(min, max)`: items min..=max, θ = 0.99.
    pub fn new(min: i64, max: i64) -> Self {
        Self::with_constant(min, max, ZIPFIAN_CONSTANT)
    }

    /// `ZipfianGenerator(min, max, θ)`: computes ζ(max − min + 1, θ) by the plain loop
    /// (O(items); about 1 s per 10⁸ items).
    pub fn with_constant(min: i64, max: i64, theta: f64) -> Self {
        Self::with_zetan(min, max, theta, zeta(max - min + 1, theta))
    }

    /// `ZipfianGenerator(min, max, θ, zetan)` with a precomputed ζ.
    ///
    /// YCSB's constructor also draws one value (its `nextValue()` call); ours has no RNG to
    /// draw from, so `last_value()` starts at `min` instead.
    pub fn with_zetan(min: i64, max: i64, theta: f64, zetan: f64) -> Self {
        let items = max - min + 1;
        let zeta2theta = zeta(2, theta);
        ZipfianGenerator {
            items,
            base: min,
            theta,
            zeta2theta,
            alpha: 1.0 / (1.0 - theta),
            zetan,
            eta: (1.0 - (2.0 / items as f64).powf(1.0 - theta)) / (1.0 - zeta2theta / zetan),
            countforzeta: items,
            allow_itemcount_decrease: false,
            last: min,
        }
    }

    /// YCSB's `allowitemcountdecrease` (false): when true, a smaller item count recomputes ζ
    /// from scratch; when false, a smaller item count keeps the current ζ and η.
    pub fn set_allow_itemcount_decrease(&mut self, allow: bool) {
        self.allow_itemcount_decrease = allow;
    }

    pub fn items(&self) -> i64 {
        self.items
    }
    pub fn zetan(&self) -> f64 {
        self.zetan
    }
    pub fn eta(&self) -> f64 {
        self.eta
    }
    pub fn theta(&self) -> f64 {
        self.theta
    }

    /// `nextLong(itemcount)`: a draw over `itemcount` items. A larger count than the one ζ was
    /// computed for extends ζ incrementally. **YCSB quirk, kept:** η is then recomputed with the
    /// constructor's item count, not `itemcount` (this only affects the `latest` distribution).
    /// `last_value()` is updated only by draws past the first two items, as in YCSB.
    pub fn next_long(&mut self, itemcount: i64, rng: &mut dyn RngCore) -> i64 {
        if itemcount != self.countforzeta {
            if itemcount > self.countforzeta {
                self.zetan = zeta_incremental(self.countforzeta, itemcount, self.theta, self.zetan);
                self.countforzeta = itemcount;
                self.eta = self.eta_for_items();
            } else if self.allow_itemcount_decrease {
                self.zetan = zeta(itemcount, self.theta);
                self.countforzeta = itemcount;
                self.eta = self.eta_for_items();
            }
        }
        let u: f64 = rng.gen();
        let uz = u * self.zetan;
        if uz < 1.0 {
            return self.base;
        }
        if uz < 1.0 + 0.5f64.powf(self.theta) {
            return self.base + 1;
        }
        let ret = self.base
            + (itemcount as f64 * (self.eta * u - self.eta + 1.0).powf(self.alpha)) as i64;
        self.last = ret;
        ret
    }

    fn eta_for_items(&self) -> f64 {
        (1.0 - (2.0 / self.items as f64).powf(1.0 - self.theta))
            / (1.0 - self.zeta2theta / self.zetan)
    }
}

impl NumberGenerator for ZipfianGenerator {
    fn next_value(&mut self, rng: &mut dyn RngCore) -> i64 {
        self.next_long(self.items, rng)
    }
    fn last_value(&self) -> i64 {
        self.last
    }
}

/// YCSB's `ScrambledZipfianGenerator`: a zipfian over 10¹⁰ + 1 items with the precomputed
/// ζ = [`SCRAMBLED_ZETAN`], mapped onto min..=max by `min + fnvhash64(z) % itemcount`. The hot
/// items are spread over the key space, and which ones are hot depends only on the item count.
#[derive(Clone, Debug)]
pub struct ScrambledZipfianGenerator {
    gen: ZipfianGenerator,
    min: i64,
    itemcount: i64,
    last: i64,
}

impl ScrambledZipfianGenerator {
    /// `ScrambledZipfianGenerator(items)`: 0..items−1.
    pub fn from_items(items: i64) -> Self {
        Self::new(0, items - 1)
    }

    /// `ScrambledZipfianGenerator(min, max)` (inclusive), θ = 0.99.
    pub fn new(min: i64, max: i64) -> Self {
        Self::with_constant(min, max, ZIPFIAN_CONSTANT)
    }

    /// With another θ. As in YCSB, only θ = 0.99 uses the precomputed ζ; any other θ computes
    /// ζ over 10¹⁰ + 1 items by the plain loop, which takes minutes (an extension of ours:
    /// YCSB itself never builds one with θ ≠ 0.99).
    pub fn with_constant(min: i64, max: i64, theta: f64) -> Self {
        let gen = if theta == ZIPFIAN_CONSTANT {
            ZipfianGenerator::with_zetan(0, SCRAMBLED_ITEM_COUNT, theta, SCRAMBLED_ZETAN)
        } else {
            ZipfianGenerator::with_constant(0, SCRAMBLED_ITEM_COUNT, theta)
        };
        ScrambledZipfianGenerator {
            gen,
            min,
            itemcount: max - min + 1,
            last: min,
        }
    }

    pub fn itemcount(&self) -> i64 {
        self.itemcount
    }

    /// The item that rank `r` of the inner zipfian maps to (rank 0 is the most popular).
    pub fn item_of_rank(&self, r: i64) -> i64 {
        self.min + fnvhash64(r) % self.itemcount
    }
}

impl NumberGenerator for ScrambledZipfianGenerator {
    fn next_value(&mut self, rng: &mut dyn RngCore) -> i64 {
        let z = self.gen.next_value(rng);
        self.last = self.item_of_rank(z);
        self.last
    }
    fn last_value(&self) -> i64 {
        self.last
    }
}

/// A zipfian whose skew does not change with the item count (not in YCSB; flashdoc's
/// `zipfian-classes`). YCSB's scrambled zipfian draws from a fixed 10¹⁰ + 1 ranks, so the share
/// of requests on the hottest items grows with the record count (docs/placement.md, "Why the
/// absolute figures do not converge"). This one draws one of `classes` classes from YCSB's own
/// scrambled zipfian over `classes` items, then one item of that class uniformly: class `c`
/// holds the items `min + c + classes·j` below `min + items`. With the class count held, every
/// item's share of the requests scales as 1/items, so the hottest tenth of the items (or of
/// the leaves that hold them) receives the same share of the requests at every record count.
/// At `items == classes` it is the scrambled zipfian over `items`.
#[derive(Clone, Debug)]
pub struct ClassZipfianGenerator {
    classes: ScrambledZipfianGenerator,
    class_count: i64,
    min: i64,
    items: i64,
    last: i64,
}

impl ClassZipfianGenerator {
    /// Items `min..min + items` in `class_count` classes; `items ≥ class_count ≥ 1`.
    pub fn new(min: i64, items: i64, class_count: i64) -> Self {
        assert!(class_count >= 1, "at least one class");
        assert!(items >= class_count, "every class needs an item");
        ClassZipfianGenerator {
            classes: ScrambledZipfianGenerator::from_items(class_count),
            class_count,
            min,
            items,
            last: min,
        }
    }

    /// How many items class `c` holds: those of `c, c + classes, …` below `items`.
    pub fn class_size(&self, c: i64) -> i64 {
        debug_assert!((0..self.class_count).contains(&c));
        (self.items - c + self.class_count - 1) / self.class_count
    }
}

impl NumberGenerator for ClassZipfianGenerator {
    fn next_value(&mut self, rng: &mut dyn RngCore) -> i64 {
        let c = self.classes.next_value(rng);
        self.last = self.min + crate::class_member(c, self.class_count, self.items, rng);
        self.last
    }
    fn last_value(&self) -> i64 {
        self.last
    }
}

/// YCSB's `UniformLongGenerator(lb, ub)`: `|nextLong()| % (ub − lb + 1) + lb` (with Java's
/// `Math.abs`, so the one-in-2⁶⁴ draw of `i64::MIN` gives a value below `lb`, as in YCSB).
#[derive(Clone, Debug)]
pub struct UniformLongGenerator {
    lb: i64,
    ub: i64,
    interval: i64,
    last: i64,
}

impl UniformLongGenerator {
    pub fn new(lb: i64, ub: i64) -> Self {
        UniformLongGenerator {
            lb,
            ub,
            interval: ub - lb + 1,
            last: lb,
        }
    }
    pub fn bounds(&self) -> (i64, i64) {
        (self.lb, self.ub)
    }
    /// The distribution's mean, `(lb + ub) / 2`.
    pub fn mean(&self) -> f64 {
        (self.lb + self.ub) as f64 / 2.0
    }
}

impl NumberGenerator for UniformLongGenerator {
    fn next_value(&mut self, rng: &mut dyn RngCore) -> i64 {
        self.last = (rng.next_u64() as i64).wrapping_abs() % self.interval + self.lb;
        self.last
    }
    fn last_value(&self) -> i64 {
        self.last
    }
}

/// YCSB's `HotspotIntegerGenerator(lb, ub, hotsetFraction, hotOpnFraction)`: with probability
/// `hot_opn_fraction` a uniform draw from the first `⌊n · hotset_fraction⌋` numbers (the hot
/// set), otherwise from the rest. YCSB's quirks are kept: a fraction outside [0, 1] becomes 0,
/// swapped bounds are swapped back, the hot-set size goes through a Java `(int)` cast, and an
/// empty hot (or cold) set panics when drawn from (Java throws `ArithmeticException`).
#[derive(Clone, Debug)]
pub struct HotspotIntegerGenerator {
    lower: i64,
    upper: i64,
    hot_interval: i64,
    cold_interval: i64,
    hotset_fraction: f64,
    hot_opn_fraction: f64,
    last: i64,
}

impl HotspotIntegerGenerator {
    pub fn new(lb: i64, ub: i64, hotset_fraction: f64, hot_opn_fraction: f64) -> Self {
        let in_range = |f: f64| (0.0..=1.0).contains(&f);
        let hotset_fraction = if in_range(hotset_fraction) {
            hotset_fraction
        } else {
            0.0
        };
        let hot_opn_fraction = if in_range(hot_opn_fraction) {
            hot_opn_fraction
        } else {
            0.0
        };
        let (lower, upper) = if lb > ub { (ub, lb) } else { (lb, ub) };
        let interval = upper - lower + 1;
        // Java: `(int) (interval * hotsetFraction)`, saturating at i32 bounds.
        let hot_interval = (interval as f64 * hotset_fraction) as i32 as i64;
        HotspotIntegerGenerator {
            lower,
            upper,
            hot_interval,
            cold_interval: interval - hot_interval,
            hotset_fraction,
            hot_opn_fraction,
            last: lower,
        }
    }
    pub fn bounds(&self) -> (i64, i64) {
        (self.lower, self.upper)
    }
    pub fn hotset_fraction(&self) -> f64 {
        self.hotset_fraction
    }
    pub fn hot_opn_fraction(&self) -> f64 {
        self.hot_opn_fraction
    }
    /// The first number of the cold set.
    pub fn cold_start(&self) -> i64 {
        self.lower + self.hot_interval
    }
}

impl NumberGenerator for HotspotIntegerGenerator {
    fn next_value(&mut self, rng: &mut dyn RngCore) -> i64 {
        let u: f64 = rng.gen();
        let r = (rng.next_u64() as i64).wrapping_abs();
        self.last = if u < self.hot_opn_fraction {
            self.lower + r % self.hot_interval
        } else {
            self.lower + self.hot_interval + r % self.cold_interval
        };
        self.last
    }
    fn last_value(&self) -> i64 {
        self.last
    }
}

/// A counter shared by all threads (YCSB's `CounterGenerator` and its subclass).
pub trait KeyCounter: Send + Sync {
    fn next_value(&self) -> i64;
    fn last_value(&self) -> i64;
}

/// YCSB's `CounterGenerator(start)`: hands out start, start+1, … to all threads;
/// `last_value()` is the last number handed out (start − 1 before the first).
#[derive(Debug)]
pub struct CounterGenerator {
    counter: AtomicI64,
}

impl CounterGenerator {
    pub fn new(start: i64) -> Self {
        CounterGenerator {
            counter: AtomicI64::new(start),
        }
    }
}

impl KeyCounter for CounterGenerator {
    fn next_value(&self) -> i64 {
        self.counter.fetch_add(1, Ordering::SeqCst)
    }
    fn last_value(&self) -> i64 {
        self.counter.load(Ordering::SeqCst) - 1
    }
}

/// YCSB's window of outstanding insert keys (2²⁰).
pub const ACK_WINDOW_SIZE: usize = 1 << 20;

/// `acknowledge` found the slot of `key` still taken: more than [`ACK_WINDOW_SIZE`] keys are
/// outstanding (YCSB throws "Too many unacknowledged insertion keys.").
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TooManyUnacknowledged(pub i64);

impl std::fmt::Display for TooManyUnacknowledged {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Too many unacknowledged insertion keys (key {}).",
            self.0
        )
    }
}

impl std::error::Error for TooManyUnacknowledged {}

/// YCSB's `AcknowledgedCounterGenerator(start)`: `next_value()` hands out insert keys as
/// [`CounterGenerator`] does; `last_value()` is the *limit*, the highest key below which every
/// key has been acknowledged. `acknowledge(k)` marks k's slot in a ring of 2²⁰ flags; whoever
/// gets the (try-)lock then moves the limit over the contiguous acknowledged run. As in YCSB, an
/// acknowledgement made while another thread holds the lock may wait for the next one to be
/// folded in.
pub struct AcknowledgedCounterGenerator {
    counter: CounterGenerator,
    window: Box<[AtomicBool]>,
    lock: Mutex<()>,
    limit: AtomicI64,
}

impl AcknowledgedCounterGenerator {
    pub fn new(start: i64) -> Self {
        AcknowledgedCounterGenerator {
            counter: CounterGenerator::new(start),
            window: (0..ACK_WINDOW_SIZE)
                .map(|_| AtomicBool::new(false))
                .collect(),
            lock: Mutex::new(()),
            limit: AtomicI64::new(start - 1),
        }
    }

    /// Marks `value` as inserted (successfully or not: YCSB acknowledges in a `finally`).
    pub fn acknowledge(&self, value: i64) -> Result<(), TooManyUnacknowledged> {
        let mask = ACK_WINDOW_SIZE as i64 - 1;
        let slot = (value & mask) as usize;
        if self.window[slot].swap(true, Ordering::SeqCst) {
            return Err(TooManyUnacknowledged(value));
        }
        if let Some(_g) = self.lock.try_lock() {
            let limit = self.limit.load(Ordering::SeqCst);
            // Walk the window at most once.
            let before_first_slot = limit & mask;
            let mut index = limit + 1;
            while index != before_first_slot {
                let s = (index & mask) as usize;
                if !self.window[s].load(Ordering::SeqCst) {
                    break;
                }
                self.window[s].store(false, Ordering::SeqCst);
                index += 1;
            }
            self.limit.store(index - 1, Ordering::SeqCst);
        }
        Ok(())
    }
}

impl KeyCounter for AcknowledgedCounterGenerator {
    fn next_value(&self) -> i64 {
        self.counter.next_value()
    }
    fn last_value(&self) -> i64 {
        self.limit.load(Ordering::SeqCst)
    }
}

/// YCSB's `SkewedLatestGenerator` (`requestdistribution=latest`): `max − zipf.next_long(max)`
/// with max = the basis counter's `last_value()`, so the newest key is the most popular.
/// The zipfian is built over the basis's `last_value()` items at construction and grows
/// incrementally (with YCSB's η quirk, see [`ZipfianGenerator::next_long`]).
#[derive(Clone)]
pub struct SkewedLatestGenerator {
    basis: Arc<dyn KeyCounter>,
    zipfian: ZipfianGenerator,
    last: i64,
}

impl SkewedLatestGenerator {
    pub fn new(basis: Arc<dyn KeyCounter>) -> Self {
        let items = basis.last_value();
        let last = items;
        SkewedLatestGenerator {
            basis,
            zipfian: ZipfianGenerator::from_items(items),
            last,
        }
    }
}

impl NumberGenerator for SkewedLatestGenerator {
    fn next_value(&mut self, rng: &mut dyn RngCore) -> i64 {
        let max = self.basis.last_value();
        self.last = max - self.zipfian.next_long(max, rng);
        self.last
    }
    fn last_value(&self) -> i64 {
        self.last
    }
}

/// YCSB's `DiscreteGenerator`: picks a value with probability weight / Σ weights, walking the
/// values in the order they were added (CoreWorkload adds READ, UPDATE, INSERT, SCAN,
/// READMODIFYWRITE, each only if its proportion is > 0). Where floating-point rounding lets
/// the walk run off the end (Java throws an AssertionError), the last value is returned.
#[derive(Clone, Debug, Default)]
pub struct DiscreteGenerator<T: Clone> {
    values: Vec<(f64, T)>,
    last: Option<T>,
}

impl<T: Clone> DiscreteGenerator<T> {
    pub fn new() -> Self {
        DiscreteGenerator {
            values: Vec::new(),
            last: None,
        }
    }
    pub fn add_value(&mut self, weight: f64, value: T) {
        self.values.push((weight, value));
    }
    pub fn is_empty(&self) -> bool {
        self.values.is_empty()
    }
    /// Panics if no value was added.
    pub fn next_value(&mut self, rng: &mut dyn RngCore) -> T {
        assert!(!self.values.is_empty(), "DiscreteGenerator without values");
        let sum: f64 = self.values.iter().map(|(w, _)| w).sum();
        let mut val: f64 = rng.gen();
        for (w, v) in &self.values {
            let pw = w / sum;
            if val < pw {
                self.last = Some(v.clone());
                return v.clone();
            }
            val -= pw;
        }
        let v = self.values.last().expect("non-empty").1.clone();
        self.last = Some(v.clone());
        v
    }
    pub fn last_value(&self) -> Option<&T> {
        self.last.as_ref()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rng;

    /// Shares of the requests on each class, hottest first, from `draws` draws.
    fn class_shares(g: &mut ClassZipfianGenerator, classes: i64, draws: usize) -> Vec<f64> {
        let mut r = rng(7);
        let mut n = vec![0u64; classes as usize];
        for _ in 0..draws {
            let k = g.next_value(&mut r);
            assert!((100..100 + g.items).contains(&k), "{k} outside the items");
            n[((k - 100) % classes) as usize] += 1;
        }
        let mut s: Vec<f64> = n.iter().map(|&c| c as f64 / draws as f64).collect();
        s.sort_by(|a, b| b.total_cmp(a));
        s
    }

    #[test]
    fn class_zipfian_keeps_its_skew_at_every_item_count() {
        let classes = 1_000;
        let draws = 400_000;
        let mut small = ClassZipfianGenerator::new(100, classes, classes);
        let mut big = ClassZipfianGenerator::new(100, 16 * classes + 7, classes);
        let (a, b) = (
            class_shares(&mut small, classes, draws),
            class_shares(&mut big, classes, draws),
        );
        // The hottest classes get the same shares whatever the item count (sampling spread of
        // a share p over 400 000 draws is about √(p/400 000) ≤ 0.1 points).
        let top = |s: &[f64], k: usize| s[..k].iter().sum::<f64>();
        for k in [1, 10, 100] {
            assert!(
                (top(&a, k) - top(&b, k)).abs() < 0.01,
                "top {k}: {} vs {}",
                top(&a, k),
                top(&b, k)
            );
        }
        // …while YCSB's scrambled zipfian piles more of them onto its hottest 1 % of items
        // as the item count grows (ζ(n)/ζ(10¹⁰) of the ranks land on distinct items).
        let hottest_percent = |items: i64| {
            let mut g = ScrambledZipfianGenerator::from_items(items);
            let mut r = rng(7);
            let mut n = vec![0u64; items as usize];
            for _ in 0..draws {
                n[g.next_value(&mut r) as usize] += 1;
            }
            n.sort_unstable_by(|a, b| b.cmp(a));
            n[..items as usize / 100].iter().sum::<u64>() as f64 / draws as f64
        };
        let (ycsb_small, ycsb_big) = (hottest_percent(classes), hottest_percent(16 * classes));
        assert!(ycsb_big > ycsb_small + 0.03, "{ycsb_small} → {ycsb_big}");
    }

    #[test]
    fn class_zipfian_spreads_a_class_evenly_over_its_items() {
        let classes = 10;
        let mut g = ClassZipfianGenerator::new(0, 10 * classes + 3, classes);
        assert_eq!(g.class_size(0), 11, "classes 0..3 hold one item more");
        assert_eq!(g.class_size(3), 10);
        let mut r = rng(3);
        let mut per_item = vec![0u64; 103];
        let mut per_class = vec![0u64; classes as usize];
        for _ in 0..200_000 {
            let k = g.next_value(&mut r);
            assert_eq!(g.last_value(), k);
            per_item[k as usize] += 1;
            per_class[(k % classes) as usize] += 1;
        }
        for (k, &n) in per_item.iter().enumerate() {
            let c = k % classes as usize;
            let want = per_class[c] as f64 / g.class_size(c as i64) as f64;
            let got = n as f64;
            assert!(
                (got - want).abs() < 0.1 * want + 30.0,
                "item {k}: {got} vs {want}"
            );
        }
    }

    #[test]
    fn fnvhash64_matches_ycsb() {
        // Raw FNV-1a of 0 is 0xA8C7F832281A39C5 (negative as a long): Math.abs applies.
        assert_eq!(fnvhash64(0), 6284781860667377211);
        assert_eq!(fnvhash64(1), 8517097267634966620);
        assert_eq!(fnvhash64(2), 1820151046732198393);
        assert_eq!(fnvhash64(3), 4052466453699787802);
        assert!(fnvhash64(-1) >= 0);
    }

    #[test]
    fn key_names_match_the_java_client() {
        let k = |n| build_key_name(n, KeyOrder::Hashed, 1);
        assert_eq!(k(0), "user6284781860667377211");
        assert_eq!(k(1), "user8517097267634966620");
        assert_eq!(k(2), "user1820151046732198393");
        assert_eq!(k(3), "user4052466453699787802");
    }

    #[test]
    fn key_names_ordered_and_padded() {
        assert_eq!(build_key_name(42, KeyOrder::Ordered, 1), "user42");
        assert_eq!(build_key_name(42, KeyOrder::Ordered, 5), "user00042");
        assert_eq!(build_key_name(12345, KeyOrder::Ordered, 3), "user12345");
        assert_eq!(build_key_name(0, KeyOrder::Ordered, 0), "user0");
        // The sign counts towards the width and the zeros go in front of it, as in YCSB.
        assert_eq!(build_key_name(-7, KeyOrder::Ordered, 4), "user00-7");
        assert_eq!(
            build_key_name(2, KeyOrder::Hashed, 21),
            "user001820151046732198393"
        );
        let mut buf = String::from("junk");
        write_key_name(&mut buf, 1, KeyOrder::Hashed, 1);
        assert_eq!(buf, "user8517097267634966620");
    }

    #[test]
    fn zeta_values() {
        assert_eq!(zeta(1, 0.99), 1.0);
        assert!((zeta(2, 0.99) - (1.0 + 0.5f64.powf(0.99))).abs() < 1e-15);
        // ζ(n, 0) = n; ζ(n, 1) is the harmonic number.
        assert_eq!(zeta(1000, 0.0), 1000.0);
        assert!((zeta(4, 1.0) - 25.0 / 12.0).abs() < 1e-15);
        // Incremental = from scratch (same summation order, so bit for bit).
        let z1000 = zeta(1000, 0.99);
        assert_eq!(zeta_incremental(1000, 5000, 0.99, z1000), zeta(5000, 0.99));
        // ζ(10⁶, 0.99), reference value from an independent summation.
        assert!((zeta(1_000_000, 0.99) - 15.391_849_746_037_371).abs() < 1e-9);
    }

    /// Euler–Maclaurin tail from m to n of Σ 1/i^θ.
    fn zeta_tail(m: f64, n: f64, t: f64) -> f64 {
        (n.powf(1.0 - t) - m.powf(1.0 - t)) / (1.0 - t) + (n.powf(-t) - m.powf(-t)) / 2.0
            - t / 12.0 * (n.powf(-t - 1.0) - m.powf(-t - 1.0))
    }

    #[test]
    fn scrambled_zetan_is_zeta_of_ten_billion() {
        let m = 100_000;
        let approx = zeta(m, 0.99) + zeta_tail(m as f64, 1e10, 0.99);
        assert!((approx - SCRAMBLED_ZETAN).abs() < 1e-8, "{approx}");
    }

    #[test]
    fn zipfian_constants() {
        let z = ZipfianGenerator::from_items(1000);
        assert_eq!(z.items(), 1000);
        assert_eq!(z.zetan(), zeta(1000, 0.99));
        let zeta2 = zeta(2, 0.99);
        let eta = (1.0 - (2.0f64 / 1000.0).powf(1.0 - 0.99)) / (1.0 - zeta2 / zeta(1000, 0.99));
        assert_eq!(z.eta(), eta);
    }

    #[test]
    fn zipfian_grows_incrementally_with_ycsb_eta_quirk() {
        let mut z = ZipfianGenerator::from_items(1000);
        let mut r = rng(1);
        let v = z.next_long(2000, &mut r);
        assert!((0..2000).contains(&v));
        assert_eq!(z.zetan(), zeta(2000, 0.99));
        // η uses the constructor's 1000 items, not 2000 (YCSB's quirk).
        let eta =
            (1.0 - (2.0f64 / 1000.0).powf(1.0 - 0.99)) / (1.0 - zeta(2, 0.99) / zeta(2000, 0.99));
        assert_eq!(z.eta(), eta);
        // A smaller count is ignored by default...
        z.next_long(1500, &mut r);
        assert_eq!(z.zetan(), zeta(2000, 0.99));
        // ...and recomputed from scratch when allowed.
        z.set_allow_itemcount_decrease(true);
        z.next_long(1500, &mut r);
        assert_eq!(z.zetan(), zeta(1500, 0.99));
    }

    fn within(count: u64, n: u64, p: f64, sigmas: f64) -> bool {
        let sd = (n as f64 * p * (1.0 - p)).sqrt();
        (count as f64 - n as f64 * p).abs() <= sigmas * sd
    }

    #[test]
    fn zipfian_head_frequencies_match_theory() {
        let items = 10_000;
        let mut z = ZipfianGenerator::from_items(items);
        let mut r = rng(42);
        let n = 400_000u64;
        let mut counts = vec![0u64; items as usize];
        for _ in 0..n {
            let v = z.next_value(&mut r);
            assert!((0..items).contains(&v));
            counts[v as usize] += 1;
        }
        let zn = zeta(items, 0.99);
        // Items 0 and 1 come from exact branches: P = 1/ζn and 0.5^θ/ζn.
        assert!(within(counts[0], n, 1.0 / zn, 4.0), "{}", counts[0]);
        assert!(
            within(counts[1], n, 0.5f64.powf(0.99) / zn, 4.0),
            "{}",
            counts[1]
        );
        // Popularity falls off: the first 10 items take more than the next 10.
        let head: u64 = counts[..10].iter().sum();
        let next: u64 = counts[10..20].iter().sum();
        assert!(head > next);
        // The top 1% of items get roughly ζ(100)/ζ(10000) of the draws (Gray's approximation).
        let top: u64 = counts[..100].iter().sum();
        let p_top = zeta(100, 0.99) / zn;
        assert!((top as f64 / n as f64 - p_top).abs() < 0.02, "{top}");
    }

    #[test]
    fn zipfian_base_offset() {
        let mut z = ZipfianGenerator::new(500, 599);
        let mut r = rng(3);
        for _ in 0..10_000 {
            let v = z.next_value(&mut r);
            assert!((500..600).contains(&v));
        }
    }

    #[test]
    fn scrambled_zipfian_hot_item_is_hash_of_rank_zero() {
        let items = 1_000_000;
        let mut g = ScrambledZipfianGenerator::from_items(items);
        assert_eq!(g.itemcount(), items);
        // The hottest record of a 1 M-record YCSB load is record 377211.
        assert_eq!(g.item_of_rank(0), 6284781860667377211 % items);
        assert_eq!(g.item_of_rank(0), 377_211);
        let mut r = rng(7);
        let n = 200_000u64;
        let mut hot = 0u64;
        for _ in 0..n {
            let v = g.next_value(&mut r);
            assert!((0..items).contains(&v));
            if v == 377_211 {
                hot += 1;
            }
        }
        // P(rank 0) = 1/ZETAN; other ranks landing on the same item add ~1e-6.
        assert!(within(hot, n, 1.0 / SCRAMBLED_ZETAN, 4.0), "{hot}");
    }

    #[test]
    fn scrambled_zipfian_with_min() {
        let mut g = ScrambledZipfianGenerator::new(100, 199);
        let mut r = rng(9);
        for _ in 0..10_000 {
            assert!((100..200).contains(&g.next_value(&mut r)));
        }
        assert_eq!(g.item_of_rank(0), 100 + 6284781860667377211 % 100);
    }

    #[test]
    fn generators_are_deterministic_for_a_seed() {
        let draw = |seed| {
            let mut g = ScrambledZipfianGenerator::from_items(1000);
            let mut r = rng(seed);
            (0..100).map(|_| g.next_value(&mut r)).collect::<Vec<_>>()
        };
        assert_eq!(draw(5), draw(5));
        assert_ne!(draw(5), draw(6));
    }

    #[test]
    fn uniform_range_and_mean() {
        let mut g = UniformLongGenerator::new(10, 19);
        let mut r = rng(11);
        let n = 100_000;
        let mut counts = [0u64; 10];
        for _ in 0..n {
            let v = g.next_value(&mut r);
            assert!((10..20).contains(&v));
            counts[(v - 10) as usize] += 1;
        }
        for c in counts {
            assert!(within(c, n, 0.1, 4.0), "{c}");
        }
        assert_eq!(g.mean(), 14.5);
    }

    #[test]
    fn hotspot_splits_ops_between_hot_and_cold_sets() {
        let mut g = HotspotIntegerGenerator::new(0, 999, 0.2, 0.8);
        assert_eq!(g.cold_start(), 200);
        let mut r = rng(13);
        let n = 100_000;
        let mut hot = 0;
        for _ in 0..n {
            let v = g.next_value(&mut r);
            assert!((0..1000).contains(&v));
            if v < 200 {
                hot += 1;
            }
        }
        assert!(within(hot, n, 0.8, 4.0), "{hot}");
        // YCSB's quirks: out-of-range fractions become 0, swapped bounds are swapped back.
        let q = HotspotIntegerGenerator::new(999, 0, 1.5, -0.1);
        assert_eq!(q.bounds(), (0, 999));
        assert_eq!((q.hotset_fraction(), q.hot_opn_fraction()), (0.0, 0.0));
    }

    #[test]
    fn counter_hands_out_consecutive_numbers() {
        let c = CounterGenerator::new(5);
        assert_eq!(c.last_value(), 4);
        assert_eq!(c.next_value(), 5);
        assert_eq!(c.next_value(), 6);
        assert_eq!(c.last_value(), 6);
    }

    #[test]
    fn acknowledged_counter_advances_over_contiguous_acks() {
        let c = AcknowledgedCounterGenerator::new(100);
        assert_eq!(c.last_value(), 99);
        let keys: Vec<i64> = (0..4).map(|_| c.next_value()).collect();
        assert_eq!(keys, vec![100, 101, 102, 103]);
        c.acknowledge(101).unwrap();
        assert_eq!(c.last_value(), 99, "100 is still outstanding");
        c.acknowledge(103).unwrap();
        assert_eq!(c.last_value(), 99);
        c.acknowledge(100).unwrap();
        assert_eq!(c.last_value(), 101);
        c.acknowledge(102).unwrap();
        assert_eq!(c.last_value(), 103);
        // A slot still taken one window later is an error.
        let far = 104 + ACK_WINDOW_SIZE as i64;
        c.acknowledge(104 + 1).unwrap();
        assert_eq!(c.acknowledge(far + 1), Err(TooManyUnacknowledged(far + 1)));
    }

    #[test]
    fn skewed_latest_favours_the_newest_key() {
        let basis = Arc::new(AcknowledgedCounterGenerator::new(1000));
        let mut g = SkewedLatestGenerator::new(basis.clone());
        let mut r = rng(17);
        let n = 100_000u64;
        let mut newest = 0;
        for _ in 0..n {
            let v = g.next_value(&mut r);
            assert!((1..=999).contains(&v), "{v}");
            if v == 999 {
                newest += 1;
            }
        }
        assert!(within(newest, n, 1.0 / zeta(999, 0.99), 4.0), "{newest}");
        // New acknowledged inserts move the head.
        for _ in 0..10 {
            let k = basis.next_value();
            basis.acknowledge(k).unwrap();
        }
        assert_eq!(basis.last_value(), 1009);
        let mut seen_new = false;
        for _ in 0..1000 {
            let v = g.next_value(&mut r);
            assert!((1..=1009).contains(&v));
            seen_new |= v > 999;
        }
        assert!(seen_new);
    }

    #[test]
    fn discrete_picks_by_weight_in_order() {
        let mut d = DiscreteGenerator::new();
        d.add_value(0.5, "READ");
        d.add_value(0.5, "UPDATE");
        let mut r = rng(19);
        let n = 100_000;
        let reads = (0..n).filter(|_| d.next_value(&mut r) == "READ").count() as u64;
        assert!(within(reads, n, 0.5, 4.0), "{reads}");
        // Weights need not sum to 1.
        let mut d = DiscreteGenerator::new();
        d.add_value(3.0, 'a');
        d.add_value(1.0, 'b');
        let a = (0..n).filter(|_| d.next_value(&mut r) == 'a').count() as u64;
        assert!(within(a, n, 0.75, 4.0), "{a}");
        assert!(d.last_value().is_some());
    }
}
