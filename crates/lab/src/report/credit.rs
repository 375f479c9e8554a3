//! The headline of a stream report, credited fairly: first every policy at equal engine
//! settings (flash mode's, then WiredTiger's, then any other engine the experiment ran), and
//! flash mode's policy against every seed policy and the oracle at those settings; then, labelled,
//! the rows that change more than one setting, with the Shapley decomposition of flash mode's
//! gain over dsm into dirty budget, allocator and policy. Every comparison goes through
//! [`comparable_cells`], so one across unequal engine settings is an error, not a sentence.

use super::condition::{base_cell, Condition};
use super::settings::{comparable_cells, Compared, SettingChange};
use super::Report;
use crate::experiment::{
    all_policies, Experiment, FRESH_SEEDS, SCORING_SEEDS, SEED_POLICIES, SHIPPED_POLICY,
};
use crate::summary::{
    decompose, flash_per_op, gap_closure, modeled, Cell, Engine, Spread, Table, FACTORS,
    FLASH_MODE, WIREDTIGER,
};
use anyhow::Result;

/// The engines a condition's cells ran, flash mode's first, then WiredTiger's, then the others
/// (the factorial's mixed cells) in the table's order.
pub(super) fn engines(t: &Table, base: &Cell) -> Vec<Cell> {
    let mut v: Vec<Cell> = Vec::new();
    for c in t.cells.keys() {
        let same_condition = (c.cache_permille, c.leaf_kb, &c.compressor, &c.trim, &c.ssd)
            == (
                base.cache_permille,
                base.leaf_kb,
                &base.compressor,
                &base.trim,
                &base.ssd,
            );
        let e = Cell {
            workload: base.workload.clone(),
            policy: String::new(),
            ..c.clone()
        };
        if same_condition && !v.contains(&e) {
            v.push(e);
        }
    }
    v.sort_by_key(|c| (!c.on(FLASH_MODE), !c.on(WIREDTIGER), c.clone()));
    v
}

/// An engine in words.
pub fn engine_words(c: &Cell) -> String {
    let alloc = match c.allocation.as_str() {
        "best" => "best fit",
        a => a,
    };
    let [target, trigger] = c.dirty_pct;
    let name = if c.on(FLASH_MODE) {
        "flash mode's engine settings: "
    } else if c.on(WIREDTIGER) {
        "WiredTiger's engine settings: "
    } else {
        ""
    };
    format!("{name}{alloc}, {target}/{trigger} % dirty, 80/95 % eviction")
}

/// A policy's label in an engine's table: flash mode and WiredTiger's defaults are named rows.
fn policy_label(c: &Cell) -> String {
    if c.on(FLASH_MODE) && c.policy == SHIPPED_POLICY {
        format!("**{} (flash mode)**", c.policy)
    } else if c.on(WIREDTIGER) && c.policy == "none" && c.trim == "off" {
        "none (WiredTiger's defaults)".into()
    } else {
        c.policy.clone()
    }
}

/// The headline figures. Reads are not modeled yet: read p99 joins these tables, after
/// modeled throughput, when the throughput model serves reads.
const HEADLINE_FIGURES: &[(&str, Figure)] = &[
    (
        "Flash page writes per operation (lower is better)",
        Figure::FlashPerOp,
    ),
    (
        "Modeled throughput, operations per second of device time (× none at the same settings)",
        Figure::Modeled,
    ),
];

#[derive(Clone, Copy)]
enum Figure {
    FlashPerOp,
    Modeled,
}

impl Figure {
    fn cell(self, t: &Table, c: &Cell) -> Option<String> {
        match self {
            Figure::FlashPerOp => t.spread(c, flash_per_op).map(|s| s.fmt(2)),
            Figure::Modeled => {
                let ops = t.spread(c, modeled)?;
                let vs_none = t.paired_ratio(c, &c.with_policy("none"), modeled)?;
                Some(format!("{} ({:.2}×)", ops.fmt(0), vs_none.median))
            }
        }
    }
}

/// The headline of condition `k`: every policy per engine at equal settings, flash mode's policy
/// against every seed policy at equal settings, then the multi-setting rows and the
/// decomposition.
pub fn headline(
    r: &mut Report,
    exp: &Experiment,
    t: &Table,
    k: &Condition,
    workloads: &[String],
) -> Result<()> {
    let Some(first) = workloads.first() else {
        return Ok(());
    };
    for engine in engines(t, &base_cell(k, first)) {
        r.h3(format!(
            "At equal engine settings — {}",
            engine_words(&engine)
        ));
        let policies: Vec<String> = all_policies()
            .into_iter()
            .filter(|p| {
                workloads
                    .iter()
                    .any(|w| t.cells.contains_key(&on(&engine, w, p)))
            })
            .collect();
        let head: Vec<&str> = std::iter::once("policy")
            .chain(workloads.iter().map(String::as_str))
            .collect();
        for (title, figure) in HEADLINE_FIGURES {
            let rows = policies
                .iter()
                .map(|p| {
                    std::iter::once(policy_label(&on(&engine, first, p)))
                        .chain(workloads.iter().map(|w| {
                            figure
                                .cell(t, &on(&engine, w, p))
                                .unwrap_or_else(|| "–".into())
                        }))
                        .collect()
                })
                .collect();
            r.p(format!("**{title}**"));
            r.table(&head, rows);
        }
    }
    against_seed_policies(r, exp, t, k, workloads)?;
    fresh_seeds(r, exp, t, k, workloads)?;
    multi_setting(r, exp, t, k, workloads)
}

/// `engine`'s cell of workload `w` with policy `p`.
fn on(engine: &Cell, w: &str, p: &str) -> Cell {
    Cell {
        workload: w.into(),
        policy: p.into(),
        ..engine.clone()
    }
}

/// "N% fewer (±s): beats" — `ours` against `theirs` in flash writes per operation over `seeds`,
/// after the guard.
fn margin(
    exp: &Experiment,
    t: &Table,
    ours: &Cell,
    theirs: &Cell,
    seeds: &[u64],
    compared: Compared,
) -> Result<Option<String>> {
    comparable_cells(exp, ours, theirs, compared)?;
    let (Some(o), Some(v)) = (
        t.spread_over(ours, seeds, flash_per_op),
        t.spread_over(theirs, seeds, flash_per_op),
    ) else {
        return Ok(None);
    };
    Ok(Some(margin_text(o, v)))
}

fn margin_text(o: Spread, v: Spread) -> String {
    let m = 1.0 - o.median / v.median;
    let spread = o.rel_half_range().max(v.rel_half_range());
    format!(
        "{:.1}% {} (±{:.1}%): {}",
        m.abs() * 100.0,
        if m >= 0.0 { "fewer" } else { "more" },
        spread * 100.0,
        if m > spread { "beats" } else { "does not beat" }
    )
}

/// Flash mode's policy against every seed policy and the oracle, on each of the two named
/// engines' settings.
fn against_seed_policies(
    r: &mut Report,
    exp: &Experiment,
    t: &Table,
    k: &Condition,
    workloads: &[String],
) -> Result<()> {
    let mut rows = Vec::new();
    for engine in [FLASH_MODE, WIREDTIGER] {
        for w in workloads {
            let base = base_cell(k, w);
            let ours = base.with(engine, SHIPPED_POLICY);
            if !t.cells.contains_key(&ours) {
                continue;
            }
            let mut row = vec![
                w.clone(),
                engine_words(&ours).split(':').next().unwrap_or("").into(),
            ];
            for rival in SEED_POLICIES {
                let cell = margin(
                    exp,
                    t,
                    &ours,
                    &base.with(engine, rival),
                    &exp.seeds,
                    Compared::One("placement"),
                )?;
                row.push(cell.unwrap_or_else(|| "–".into()));
            }
            row.push(oracle_gap(exp, t, &base, engine)?);
            rows.push(row);
        }
    }
    if rows.is_empty() {
        return Ok(());
    }
    r.h3(format!("`{SHIPPED_POLICY}`, flash mode's policy, against every seed policy at equal engine settings"));
    let mut head = vec!["workload".to_string(), "engine settings".to_string()];
    head.extend(SEED_POLICIES.iter().map(|p| format!("vs {p}")));
    head.push("dsm → oracle gap closed".into());
    let head: Vec<&str> = head.iter().map(String::as_str).collect();
    r.table(&head, rows);
    r.p(format!("Each comparison holds every engine setting equal — cache, dirty budget, eviction, allocation, the sweep's reserve, checkpoint interval, durability, page sizes, compression, TRIM — and changes only the placement. The margin is `{SHIPPED_POLICY}`'s saving in flash page writes per operation (medians over the seeds); ± is the larger half-range between seeds of the two; *beats* when the margin is larger. Gap closed = (dsm − ours) / (dsm − oracle) seed by seed, against the stronger oracle, median [min–max]."));
    Ok(())
}

/// The share of dsm's gap to the stronger oracle that the shipped policy closes on `engine`.
fn oracle_gap(exp: &Experiment, t: &Table, base: &Cell, engine: Engine) -> Result<String> {
    let ours = base.with(engine, SHIPPED_POLICY);
    for oracle in ["oracle", "oracle-death"] {
        comparable_cells(
            exp,
            &ours,
            &base.with(engine, oracle),
            Compared::One("placement"),
        )?;
    }
    comparable_cells(
        exp,
        &ours,
        &base.with(engine, "dsm"),
        Compared::One("placement"),
    )?;
    Ok(
        match gap_closure(
            t,
            base,
            (engine, SHIPPED_POLICY),
            (engine, "dsm"),
            engine,
            flash_per_op,
        ) {
            Some(g) => format!(
                "dsm {:.2} → {} {:.2}; ours {:.2}: {:.0}% [{:.0}–{:.0}]",
                g.dsm,
                g.oracle_name,
                g.oracle,
                g.ours,
                g.closed.median * 100.0,
                g.closed.min * 100.0,
                g.closed.max * 100.0
            ),
            None => "–".into(),
        },
    )
}

/// The scoring seeds beside the fresh ones, when the run has both: flash mode's policy
/// against dsm and file at flash mode's settings, per group of seeds.
fn fresh_seeds(
    r: &mut Report,
    exp: &Experiment,
    t: &Table,
    k: &Condition,
    workloads: &[String],
) -> Result<()> {
    let has = |group: &[u64]| group.iter().any(|s| exp.seeds.contains(s));
    if !(has(&SCORING_SEEDS) && has(&FRESH_SEEDS)) {
        return Ok(());
    }
    let mut rows = Vec::new();
    for w in workloads {
        let base = base_cell(k, w);
        let ours = base.with(FLASH_MODE, SHIPPED_POLICY);
        let mut row = vec![w.clone()];
        for rival in ["dsm", "file"] {
            for seeds in [&SCORING_SEEDS[..], &FRESH_SEEDS[..]] {
                let cell = margin(
                    exp,
                    t,
                    &ours,
                    &base.with(FLASH_MODE, rival),
                    seeds,
                    Compared::One("placement"),
                )?;
                row.push(cell.unwrap_or_else(|| "–".into()));
            }
        }
        for seeds in [&SCORING_SEEDS[..], &FRESH_SEEDS[..]] {
            let f = t.spread_over(&ours, seeds, flash_per_op);
            row.push(f.map_or("–".into(), |s| s.fmt(2)));
        }
        rows.push(row);
    }
    r.h3("Scoring seeds 2–4 beside fresh seeds 5–7 (flash mode's engine settings)");
    r.table(
        &[
            "workload",
            "vs dsm, seeds 2–4",
            "vs dsm, seeds 5–7",
            "vs file, seeds 2–4",
            "vs file, seeds 5–7",
            "flash writes/op, seeds 2–4",
            "flash writes/op, seeds 5–7",
        ],
        rows,
    );
    r.p("The policies' parameters are frozen on seed 1: seeds 2–4 score them, and seeds 5–7 are scored beside them to show the scoring seeds were not chosen in the policies' favour.");
    Ok(())
}

/// The rows that change more than one setting, labelled, with the decomposition beside them.
fn multi_setting(
    r: &mut Report,
    exp: &Experiment,
    t: &Table,
    k: &Condition,
    workloads: &[String],
) -> Result<()> {
    let mut rows = Vec::new();
    let mut changed: Vec<SettingChange> = Vec::new();
    for w in workloads {
        let base = base_cell(k, w);
        let ours = base.with(FLASH_MODE, SHIPPED_POLICY);
        let defaults = base.with(WIREDTIGER, "none");
        let dsm = base.with(WIREDTIGER, "dsm");
        changed = comparable_cells(exp, &ours, &dsm, Compared::MultiSetting)?;
        let vs_defaults = margin(exp, t, &ours, &defaults, &exp.seeds, Compared::MultiSetting)?;
        let vs_dsm = margin(exp, t, &ours, &dsm, &exp.seeds, Compared::MultiSetting)?;
        if vs_defaults.is_none() && vs_dsm.is_none() {
            continue;
        }
        let mut row = vec![
            w.clone(),
            vs_defaults.unwrap_or_else(|| "–".into()),
            vs_dsm.unwrap_or_else(|| "–".into()),
        ];
        row.extend(decomposition_cells(t, &base));
        rows.push(row);
    }
    if rows.is_empty() {
        return Ok(());
    }
    let label = if k.3 == "off" {
        "flash mode against WiredTiger's defaults"
    } else {
        "flash mode's settings against WiredTiger's engine settings"
    };
    r.h3(format!("Rows that change more than one setting: {label}"));
    r.table(
        &[
            "workload",
            "flash mode vs `none` on WiredTiger's engine settings (multi-setting)",
            "flash mode vs `dsm` on WiredTiger's engine settings (multi-setting)",
            "dsm on WiredTiger's → flash mode",
            "budget",
            "allocator",
            "policy",
        ],
        rows,
    );
    let changes: Vec<String> = changed.iter().map(ToString::to_string).collect();
    r.p(format!(
        "These rows change several engine settings at once ({}), so no one of them can be credited with the difference; the decomposition beside them splits it. Decomposition: the change in log flash page writes per operation from `dsm` on WiredTiger's engine settings (best fit, 5/20 % dirty) to `{SHIPPED_POLICY}` on flash mode's (sweep, 50/80 % dirty), split into three factors — the dirty budget (5/20 → 50/80), the allocator (best fit → sweep) and the policy (dsm → `{SHIPPED_POLICY}`) — by their exact Shapley values: each factor's marginal change in log flash writes per operation, averaged over the 6 orders in which the three can be switched on, from the 2×2×2 cells of this run (each cell the mean over the seeds of the log). An interaction between factors is shared between them, and the three shares sum to the total. Each share is given as its percent of the total change and as the factor it multiplies flash writes per operation by.",
        changes.join("; ")
    ));
    Ok(())
}

/// The decomposition's cells: the total change, then each factor's share.
fn decomposition_cells(t: &Table, base: &Cell) -> Vec<String> {
    let Some(d) = decompose(t, base, SHIPPED_POLICY) else {
        return vec![
            "– (the 2×2×2 cells were not run)".into(),
            "–".into(),
            "–".into(),
            "–".into(),
        ];
    };
    let mut v = vec![format!(
        "{:.2} → {:.2} ({:+.1}%)",
        d.from,
        d.to,
        (d.total.exp() - 1.0) * 100.0
    )];
    for (i, _) in FACTORS.iter().enumerate() {
        let share = d.shares[i];
        let of_total = if d.total.abs() > 1e-3 {
            format!("{:.0}% of it, ", share / d.total * 100.0)
        } else {
            String::new()
        };
        v.push(format!("{of_total}×{:.3}", share.exp()));
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::run::Point;
    use crate::summary::test_points::point;

    fn factorial_points() -> Vec<Point> {
        let mut points = Vec::new();
        for (alloc, dirty) in [
            ("best", [5, 20]),
            ("best", [50, 80]),
            ("sweep", [5, 20]),
            ("sweep", [50, 80]),
        ] {
            for (i, policy) in ["none", "file", "boundary", "dsm", "filelog", "oracle"]
                .iter()
                .enumerate()
            {
                for seed in [2, 3, 4] {
                    let engine_factor = if alloc == "sweep" { 0.8 } else { 1.0 }
                        * if dirty[0] == 50 { 0.7 } else { 1.0 };
                    let flash =
                        10.0 * engine_factor * (1.0 - 0.1 * i as f64) * (1.0 + 0.01 * seed as f64);
                    points.push(point(alloc, dirty, policy, seed, flash));
                }
            }
        }
        points
    }

    fn condition() -> Condition {
        (200, 32, "none".into(), "off".into(), "d".into())
    }

    /// The headline of a factorial: equal-settings tables first, the multi-setting rows after,
    /// labelled, with the decomposition.
    #[test]
    fn the_headline_compares_at_equal_settings_first_and_decomposes_the_rest() {
        let exp = crate::experiment::find("streams-quick").expect("built-in");
        let points = factorial_points();
        let t = Table::new(&points);
        let mut r = Report::new("t");
        headline(&mut r, &exp, &t, &condition(), &["w".to_string()])
            .expect("every comparison is fair");
        let md = r.markdown();
        let first_equal = md
            .find("At equal engine settings — flash mode's")
            .expect("flash mode's table");
        let wt = md
            .find("At equal engine settings — WiredTiger's")
            .expect("WiredTiger's table");
        let multi = md
            .find("Rows that change more than one setting")
            .expect("multi-setting rows");
        assert!(first_equal < wt && wt < multi, "{md}");
        assert!(md.contains("none (WiredTiger's defaults)") && md.contains("filelog (flash mode)"));
        // Budget ×0.7 and allocator ×0.8 exactly, the policy 0.6/0.7 (up to the seeds' offset).
        assert!(md.contains("×0.700") && md.contains("×0.800"), "{md}");
    }

    /// The report's comparisons go through the guard: the same margin across engines without
    /// the multi-setting label is an error.
    #[test]
    fn a_margin_across_engines_is_refused_unless_labelled() {
        let exp = crate::experiment::find("streams-quick").expect("built-in");
        let points = factorial_points();
        let t = Table::new(&points);
        let base = base_cell(&condition(), "w");
        let ours = base.with(FLASH_MODE, SHIPPED_POLICY);
        let dsm = base.with(WIREDTIGER, "dsm");
        assert!(margin(
            &exp,
            &t,
            &ours,
            &dsm,
            &exp.seeds,
            Compared::One("placement")
        )
        .is_err());
        let labelled = margin(&exp, &t, &ours, &dsm, &exp.seeds, Compared::MultiSetting);
        assert!(labelled
            .expect("labelled")
            .expect("both cells")
            .contains("fewer"));
    }
}
