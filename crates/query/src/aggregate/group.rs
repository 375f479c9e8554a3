//! `$group` and its accumulators (also behind `$sortByCount`).

use std::collections::BTreeMap;

use bson::{Bson, Document};

use super::DocIter;
use crate::compare::{bson_equal, compare_bson, shell_repr, type_name, Num, OrdBson};
use crate::error::{DocError, DocResult};
use crate::expr::{Ctx, Expr};

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
}

pub(super) fn parse_acc(name: &str) -> Option<Acc> {
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
        _ => return None,
    })
}

struct GroupState {
    id: Bson,
    accs: Vec<AccState>,
}

enum AccState {
    Sum(Num),
    SumNonNumericOnly,
    Avg(f64, usize, bool),
    MinMax(Option<Bson>),
    FirstLast(Option<Bson>),
    List(Vec<Bson>),
    Merge(Document),
    Std(Vec<f64>),
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
        }
    }

    fn add(&mut self, a: Acc, v: Option<Bson>, first_seen: bool) -> DocResult<()> {
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
            AccState::MinMax(cur) => {
                if let Some(x) = v {
                    if matches!(x, Bson::Null | Bson::Undefined) {
                        return Ok(());
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
        }
        Ok(())
    }

    fn finish(self, a: Acc) -> Bson {
        match self {
            AccState::SumNonNumericOnly => Bson::Int32(0),
            AccState::Sum(n) => n.to_bson(),
            AccState::Avg(sum, n, dec) => {
                if n == 0 {
                    Bson::Null
                } else if dec {
                    Num::Dec(sum / n as f64).to_bson()
                } else {
                    Bson::Double(sum / n as f64)
                }
            }
            AccState::MinMax(v) => v.unwrap_or(Bson::Null),
            AccState::FirstLast(v) => v.unwrap_or(Bson::Null),
            AccState::List(items) => Bson::Array(items),
            AccState::Merge(d) => Bson::Document(d),
            AccState::Std(xs) => {
                let n = xs.len();
                let samp = a == Acc::StdDevSamp;
                if n == 0 || (samp && n < 2) {
                    return Bson::Null;
                }
                let mean = xs.iter().sum::<f64>() / n as f64;
                let ss: f64 = xs.iter().map(|x| (x - mean) * (x - mean)).sum();
                Bson::Double((ss / if samp { (n - 1) as f64 } else { n as f64 }).sqrt())
            }
        }
    }
}

pub(super) fn run_group(
    input: DocIter,
    id: &Expr,
    accs: &[(String, Acc, Expr)],
) -> DocResult<Vec<Document>> {
    let mut index: BTreeMap<OrdBson, usize> = BTreeMap::new();
    let mut groups: Vec<GroupState> = Vec::new();
    for d in input {
        let d = d?;
        let ctx = Ctx::new(&d);
        let key = id.eval(&ctx)?.unwrap_or(Bson::Null);
        let (gi, fresh) = match index.get(&OrdBson(key.clone())) {
            Some(i) => (*i, false),
            None => {
                groups.push(GroupState {
                    id: key.clone(),
                    accs: accs.iter().map(|(_, a, _)| AccState::new(*a)).collect(),
                });
                index.insert(OrdBson(key), groups.len() - 1);
                (groups.len() - 1, true)
            }
        };
        for (i, (_, a, e)) in accs.iter().enumerate() {
            let v = e.eval(&ctx)?;
            groups[gi].accs[i].add(*a, v, fresh)?;
        }
    }
    Ok(groups
        .into_iter()
        .map(|g| {
            let mut out = Document::new();
            out.insert("_id", g.id);
            for ((name, a, _), st) in accs.iter().zip(g.accs) {
                out.insert(name.clone(), st.finish(*a));
            }
            out
        })
        .collect())
}
