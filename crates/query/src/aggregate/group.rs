//! `$group` and its accumulators (also behind `$sortByCount`).

use std::collections::BTreeMap;
use std::ops::Range;

use bson::{Bson, Document};

use super::budget::value_bytes;
use super::common::stage_err;
use crate::compare::{bson_equal, compare_bson, shell_repr, type_name, Num, OrdBson};
use crate::error::{DocError, DocResult};
use crate::expr::{parse_expr, Ctx, Expr};
use crate::interrupt::Interrupt;

#[derive(Clone, Copy, Debug, PartialEq)]
pub(super) enum Acc {
    Sum,
    Avg,
    Min,
    Max,
    First,
    Last,
    Push,
    AddToSet,
    Count,
    MergeObjects,
    StdDevPop,
    StdDevSamp,
    /// `$firstN`, `$lastN`, `$maxN`, `$minN`: `{input, n}`.
    FirstN,
    LastN,
    MaxN,
    MinN,
    /// `$accumulator`: JavaScript functions (`script.rs`); its expression evaluates to the
    /// functions' sources and arguments per document.
    Js,
}

fn parse_acc(name: &str) -> Option<Acc> {
    Some(match name {
        "$sum" => Acc::Sum,
        "$avg" => Acc::Avg,
        "$min" => Acc::Min,
        "$max" => Acc::Max,
        "$first" => Acc::First,
        "$last" => Acc::Last,
        "$push" => Acc::Push,
        "$addToSet" => Acc::AddToSet,
        "$count" => Acc::Count,
        "$mergeObjects" => Acc::MergeObjects,
        "$stdDevPop" => Acc::StdDevPop,
        "$stdDevSamp" => Acc::StdDevSamp,
        "$firstN" => Acc::FirstN,
        "$lastN" => Acc::LastN,
        "$maxN" => Acc::MaxN,
        "$minN" => Acc::MinN,
        _ => return None,
    })
}

#[derive(Clone)]
enum AccState {
    Sum(Num),
    SumNonNumericOnly,
    Avg(f64, usize, bool),
    MinMax(Option<Bson>),
    FirstLast(Option<Bson>),
    List(Vec<Bson>),
    Merge(Document),
    Std(Vec<f64>),
    /// The kept values of `$firstN` … `$minN` and their `n` (from the group's first document).
    N(Vec<Bson>, usize),
    /// `$accumulator`'s state (None before the group's first document).
    Js(Option<super::script::JsAccumulator>),
}

impl AccState {
    fn new(a: Acc) -> AccState {
        match a {
            Acc::Sum | Acc::Count => AccState::SumNonNumericOnly,
            Acc::Avg => AccState::Avg(0.0, 0, false),
            Acc::Min | Acc::Max => AccState::MinMax(None),
            Acc::First | Acc::Last => AccState::FirstLast(None),
            Acc::Push | Acc::AddToSet => AccState::List(Vec::new()),
            Acc::MergeObjects => AccState::Merge(Document::new()),
            Acc::StdDevPop | Acc::StdDevSamp => AccState::Std(Vec::new()),
            Acc::FirstN | Acc::LastN | Acc::MaxN | Acc::MinN => AccState::N(Vec::new(), 0),
            Acc::Js => AccState::Js(None),
        }
    }

    /// Adds one value; returns roughly how many bytes the state grew by (for the group's
    /// memory budget: values kept in lists count, a sum does not grow).
    fn add(&mut self, a: Acc, v: Option<Bson>, first_seen: bool) -> DocResult<usize> {
        let grew = self.growth(&v);
        match self {
            AccState::SumNonNumericOnly | AccState::Sum(_) => {
                // $sum of an array value sums nothing in $group (arrays are not numbers).
                if let Some(n) = v.as_ref().and_then(Num::of) {
                    let cur = match self {
                        AccState::Sum(c) => *c,
                        _ => Num::I32(0),
                    };
                    *self = AccState::Sum(crate::expr::add_num(cur, n));
                }
            }
            AccState::Avg(sum, n, dec) => {
                if let Some(x) = v.as_ref().and_then(Num::of) {
                    *sum += x.as_f64();
                    *n += 1;
                    *dec |= matches!(x, Num::Dec(_));
                }
            }
            AccState::MinMax(cur) => add_min_max(a, cur, v),
            AccState::FirstLast(cur) => {
                if a == Acc::Last || first_seen {
                    *cur = Some(v.unwrap_or(Bson::Null));
                }
            }
            AccState::List(items) => {
                if let Some(x) = v {
                    if a == Acc::Push || !items.iter().any(|e| bson_equal(e, &x)) {
                        items.push(x);
                    }
                }
            }
            AccState::Merge(d) => match v {
                None | Some(Bson::Null) => {}
                Some(Bson::Document(o)) => {
                    for (k, x) in o {
                        d.insert(k, x);
                    }
                }
                Some(other) => {
                    return Err(DocError::with_code(
                        40400,
                        "Location40400",
                        format!(
                            "$mergeObjects requires object inputs, but input {} is of type {}",
                            shell_repr(&other),
                            type_name(&other)
                        ),
                    ))
                }
            },
            AccState::Std(xs) => {
                if let Some(x) = v.as_ref().and_then(Num::of) {
                    xs.push(x.as_f64());
                }
            }
            AccState::N(items, n) => add_n(a, items, n, v, first_seen)?,
            AccState::Js(state) => super::script::accumulate(state, v)?,
        }
        Ok(grew)
    }

    /// What adding `v` keeps: the value for a list (and for `$firstN` … while fewer than `n`
    /// are kept), the first value of `$min`/`$first`…, 8 bytes per `$stdDev` number, the new
    /// fields of `$mergeObjects`. A JavaScript accumulator's state lives in the script engine.
    fn growth(&self, v: &Option<Bson>) -> usize {
        let Some(x) = v else { return 0 };
        match self {
            AccState::List(_) => value_bytes(x),
            AccState::N(items, n) if items.len() < (*n).max(1) => value_bytes(x),
            AccState::MinMax(None) | AccState::FirstLast(None) => value_bytes(x),
            AccState::Std(_) => 8,
            AccState::Merge(d) => match x {
                Bson::Document(o) => o
                    .iter()
                    .filter(|(k, _)| !d.contains_key(k.as_str()))
                    .map(|(k, v)| 32 + k.len() + value_bytes(v))
                    .sum(),
                _ => 0,
            },
            _ => 0,
        }
    }

    fn finish(self, a: Acc) -> DocResult<Bson> {
        Ok(match self {
            AccState::Js(state) => super::script::finalize(state)?,
            AccState::SumNonNumericOnly => Bson::Int32(0),
            AccState::Sum(n) => n.to_bson(),
            AccState::Avg(sum, n, dec) => crate::expr::mean(sum, n, dec),
            AccState::MinMax(v) => v.unwrap_or(Bson::Null),
            AccState::FirstLast(v) => v.unwrap_or(Bson::Null),
            AccState::List(items) => Bson::Array(items),
            AccState::Merge(d) => Bson::Document(d),
            AccState::N(mut items, n) => {
                items.drain(..items.len().saturating_sub(n));
                Bson::Array(items)
            }
            AccState::Std(xs) => {
                let n = xs.len();
                let samp = a == Acc::StdDevSamp;
                if n == 0 || (samp && n < 2) {
                    return Ok(Bson::Null);
                }
                let mean = xs.iter().sum::<f64>() / n as f64;
                let ss: f64 = xs.iter().map(|x| (x - mean) * (x - mean)).sum();
                Bson::Double((ss / if samp { (n - 1) as f64 } else { n as f64 }).sqrt())
            }
        })
    }
}

/// `$firstN`, `$lastN`, `$maxN`, `$minN`: one `{input, n}` value into the kept `items` (`n` is
/// read from the group's first value).
fn add_n(
    a: Acc,
    items: &mut Vec<Bson>,
    n: &mut usize,
    v: Option<Bson>,
    first_seen: bool,
) -> DocResult<()> {
    let Some(Bson::Document(mut d)) = v else {
        unreachable!("the {{input, n}} object expression evaluates to a document")
    };
    if first_seen {
        *n = crate::expr::n_of(d.remove("n"))?;
    }
    let x = d.remove("input").unwrap_or(Bson::Null);
    match a {
        Acc::FirstN if items.len() < *n => items.push(x),
        Acc::FirstN => {}
        Acc::LastN => {
            // Drop the oldest in batches (amortised O(1) per value); `finish`
            // keeps the last n.
            items.push(x);
            if items.len() >= 2 * *n {
                items.drain(..items.len() - *n);
            }
        }
        _ if matches!(x, Bson::Null | Bson::Undefined) => {}
        _ => {
            // Keep the n best, best first: one binary search and one insert.
            let better = |p: &Bson, q: &Bson| match a {
                Acc::MaxN => compare_bson(p, q).is_gt(),
                _ => compare_bson(p, q).is_lt(),
            };
            let at = items.partition_point(|kept| !better(&x, kept));
            if at < *n {
                items.insert(at, x);
                items.truncate(*n);
            }
        }
    }

    Ok(())
}

/// `$min`, `$max`: one value against the best so far (null and undefined are skipped).
fn add_min_max(a: Acc, cur: &mut Option<Bson>, v: Option<Bson>) {
    if let Some(x) = v {
        if matches!(x, Bson::Null | Bson::Undefined) {
            return;
        }
        let better = match cur {
            None => true,
            Some(c) => {
                let o = compare_bson(&x, c);
                if a == Acc::Min {
                    o == std::cmp::Ordering::Less
                } else {
                    o == std::cmp::Ordering::Greater
                }
            }
        };
        if better {
            *cur = Some(x);
        }
    }
}

/// Output fields computed per group: name, accumulator, and the expression it accumulates.
pub(super) type Accumulators = Vec<(String, Acc, Expr)>;

/// Parses `{name: {$acc: expression}, …}` as `$group`, `$bucket` and `$bucketAuto` take them.
pub(super) fn parse_accumulators<'a>(
    fields: impl Iterator<Item = (&'a String, &'a Bson)>,
) -> DocResult<Accumulators> {
    let mut accs = Vec::new();
    for (k, v) in fields {
        if k.contains('.') {
            return Err(stage_err(
                40235,
                format!("The field name '{k}' cannot contain '.'"),
            ));
        }
        if k.starts_with('$') {
            return Err(stage_err(
                40236,
                format!("The field name '{k}' cannot be an operator name"),
            ));
        }
        let Bson::Document(ad) = v else {
            return Err(stage_err(
                40234,
                format!("The field '{k}' must be an accumulator object"),
            ));
        };
        if ad.len() != 1 {
            return Err(stage_err(
                40238,
                format!("The field '{k}' must specify one accumulator"),
            ));
        }
        let (an, aa) = ad.iter().next().expect("one");
        let Some((acc, e)) = parse_one(an, aa)? else {
            return Err(stage_err(15952, format!("unknown group operator '{an}'")));
        };
        accs.push((k.clone(), acc, e));
    }
    Ok(accs)
}

/// The argument of `$firstN` … `$minN` in `$group`, `{input, n}`, as one expression that
/// evaluates to `{input, n}` per document (5787900, 5787901, 5787906, 5787907).
fn n_accumulator_arg(name: &str, arg: &Bson) -> DocResult<Expr> {
    let Bson::Document(d) = arg else {
        return Err(stage_err(
            5787900,
            format!("specification must be an object; found {}", shell_repr(arg)),
        ));
    };
    if let Some(k) = d.keys().find(|k| *k != "input" && *k != "n") {
        return Err(stage_err(
            5787901,
            format!("Unknown argument for 'n' operator: {k}"),
        ));
    }
    for (k, code) in [("n", 5787906), ("input", 5787907)] {
        if !d.contains_key(k) {
            return Err(stage_err(
                code,
                format!("Missing value for '{k}' in {name}"),
            ));
        }
    }
    parse_expr(arg)
}

/// One accumulator `{an: aa}`; `None` when `an` names none.
fn parse_one(an: &str, aa: &Bson) -> DocResult<Option<(Acc, Expr)>> {
    if an == "$accumulator" {
        return Ok(Some((Acc::Js, super::script::parse_accumulator(aa)?)));
    }
    let Some(acc) = parse_acc(an) else {
        return Ok(None);
    };
    let e = if acc == Acc::Count {
        if !matches!(aa, Bson::Document(x) if x.is_empty()) {
            return Err(DocError::type_mismatch(
                "$count takes no arguments, i.e. $count:{}",
            ));
        }
        Expr::Lit(Bson::Int32(1))
    } else if matches!(acc, Acc::FirstN | Acc::LastN | Acc::MaxN | Acc::MinN) {
        n_accumulator_arg(an, aa)?
    } else {
        if let Bson::Array(_) = aa {
            return Err(stage_err(
                40237,
                format!("The {an} accumulator is a unary operator"),
            ));
        }
        parse_expr(aa)?
    };
    Ok(Some((acc, e)))
}

/// An accumulator as a window function of `$setWindowFields` (`$mergeObjects` is not one).
pub(super) fn parse_window_acc(an: &str, aa: &Bson) -> DocResult<Option<(Acc, Expr)>> {
    if an == "$mergeObjects" || an == "$accumulator" {
        return Ok(None);
    }
    parse_one(an, aa)
}

/// One accumulator over each of a partition's windows (index ranges into `vals`), as `$group`
/// would give it over the window's values. A window that only grows at its end extends the
/// running state, so a cumulative window (`[unbounded, current]`) or the whole partition costs
/// one pass, not one per document; any other move starts again from the window's values.
pub(super) fn accumulate_windows(
    a: Acc,
    vals: &[Option<Bson>],
    windows: Vec<Range<usize>>,
    interrupt: &Interrupt,
) -> DocResult<Vec<Bson>> {
    struct Run {
        at: Range<usize>,
        state: AccState,
        value: Option<Bson>,
    }
    let mut out = Vec::with_capacity(windows.len());
    let mut run: Option<Run> = None;
    for w in windows {
        interrupt.check()?;
        let extends = matches!(&run, Some(r) if r.at.start == w.start && r.at.end <= w.end);
        if !extends {
            run = Some(Run {
                at: w.start..w.start,
                state: AccState::new(a),
                value: None,
            });
        }
        let r = run.as_mut().expect("set just above");
        if r.value.is_none() || r.at.end < w.end {
            for v in &vals[r.at.end..w.end] {
                let first = r.at.is_empty();
                r.state.add(a, v.clone(), first)?;
                r.at.end += 1;
            }
            r.value = Some(r.state.clone().finish(a)?);
        }
        out.push(r.value.clone().expect("computed just above"));
    }
    Ok(out)
}

/// `{count: {$sum: 1}}`, the output of `$bucket`, `$bucketAuto` and `$sortByCount` when none
/// is given.
pub(super) fn count_output() -> Accumulators {
    vec![("count".into(), Acc::Sum, Expr::Lit(Bson::Int32(1)))]
}

/// One group's accumulators while documents are added to it.
pub(super) struct Accumulating {
    states: Vec<AccState>,
    empty: bool,
}

impl Accumulating {
    pub(super) fn new(accs: &Accumulators) -> Accumulating {
        Accumulating {
            states: accs.iter().map(|(_, a, _)| AccState::new(*a)).collect(),
            empty: true,
        }
    }

    /// Adds one document; returns roughly how many bytes the group grew by.
    pub(super) fn add(&mut self, accs: &Accumulators, ctx: &Ctx) -> DocResult<usize> {
        debug_assert_eq!(accs.len(), self.states.len());
        let mut grew = 0;
        for ((_, a, e), st) in accs.iter().zip(self.states.iter_mut()) {
            grew += st.add(*a, e.eval(ctx)?, self.empty)?;
        }
        self.empty = false;
        Ok(grew)
    }

    /// `{_id: id, field: value, …}`.
    pub(super) fn finish(self, id: Bson, accs: &Accumulators) -> DocResult<Document> {
        let mut out = Document::new();
        out.insert("_id", id);
        for ((name, a, _), st) in accs.iter().zip(self.states) {
            out.insert(name.clone(), st.finish(*a)?);
        }
        Ok(out)
    }
}

/// The groups of a `$group` in memory, and roughly what they hold.
pub(super) struct GroupTable {
    index: BTreeMap<OrdBson, usize>,
    groups: Vec<(Bson, Accumulating)>,
    pub(super) bytes: usize,
}

/// What a new group costs besides its key: its entry in the index and its accumulators.
const GROUP_BYTES: usize = 96;
const ACCUMULATOR_BYTES: usize = 48;

impl GroupTable {
    pub(super) fn new() -> GroupTable {
        GroupTable {
            index: BTreeMap::new(),
            groups: Vec::new(),
            bytes: 0,
        }
    }

    /// Adds the document `ctx` reads to the group of key `k`.
    pub(super) fn add(&mut self, k: Bson, accs: &Accumulators, ctx: &Ctx) -> DocResult<()> {
        let gi = match self.index.get(&OrdBson(k.clone())) {
            Some(i) => *i,
            None => {
                // The key is held twice: the index's copy and the group's.
                self.bytes += GROUP_BYTES + 2 * value_bytes(&k) + ACCUMULATOR_BYTES * accs.len();
                self.groups.push((k.clone(), Accumulating::new(accs)));
                self.index.insert(OrdBson(k), self.groups.len() - 1);
                self.groups.len() - 1
            }
        };
        self.bytes += self.groups[gi].1.add(accs, ctx)?;
        Ok(())
    }

    /// The groups, in first-seen order.
    pub(super) fn finish(self, accs: &Accumulators) -> DocResult<Vec<Document>> {
        self.groups
            .into_iter()
            .map(|(id, g)| g.finish(id, accs))
            .collect()
    }

    /// The groups in key order (for merging with spilled runs, which are in key order).
    pub(super) fn into_sorted(self) -> Vec<(Bson, Accumulating)> {
        let mut slots: Vec<Option<(Bson, Accumulating)>> =
            self.groups.into_iter().map(Some).collect();
        self.index
            .into_values()
            .map(|i| slots[i].take().expect("each group is indexed once"))
            .collect()
    }
}
