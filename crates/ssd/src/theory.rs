//! Analytical write-amplification models the simulator is validated against. Nothing here is
//! a table of expected numbers: every value is computed from the formula.
//!
//! Notation: T physical pages, U logical pages, α = T/U, ρ = α − 1, sf = 1 − 1/α.
//!
//! **Uniform random single-page overwrites, FIFO (= LRU) cleaning.** Between a page's write
//! and the cleaning of its unit the log wraps once, i.e. T·(1−u) host writes arrive, each
//! hitting the page's LBA with probability 1/U; so the victim's valid fraction u satisfies
//! u = exp(−α(1−u)), i.e. u = −W₀(−α e^(−α)) / α, and WA = 1/(1−u).
//! Sources: P. Desnoyers, "Analytic modeling of SSD write performance", SYSTOR'12 and ACM TOS
//! 10(2) 2014 (LRU/FIFO model); L. Xiang & B. Kurkoski, "An improved analytic expression for
//! write amplification in NAND flash", arXiv:1110.4245 (2011/2012), which reports 2.36 at
//! ρ = 0.3 against 2.35 simulated. Greedy cleaning does no worse than FIFO and approaches it as
//! the pages per unit grow (Desnoyers 2012; B. Van Houdt, "A mean field model for a class of
//! garbage collection algorithms in flash-based SSDs", SIGMETRICS'13, where d-choices with
//! d = 10 is already close to greedy).
//!
//! **Agarwal & Marrow** ("A closed-form expression for write amplification in NAND flash",
//! GLOBECOM Workshops 2010): WA = (1+ρ)/(2ρ) — shown for reference; Xiang & Kurkoski show it
//! underestimates.
//!
//! **Two or more classes (hot/cold) on one FIFO log**: class i holds a share sᵢ of the LBAs
//! and receives a share rᵢ of the writes. A class-i page survives one wrap with probability
//! pᵢ = exp(−rᵢ α (1−u) / sᵢ) and is copied a geometric number of times, so the log carries
//! Σ rᵢ/(1−pᵢ) pages per host write = WA = 1/(1−u), i.e. Σ rᵢ (1−u)/(1−pᵢ) = 1. (The
//! single-class case reduces to the equation above.) A class that is never written (rᵢ = 0)
//! contributes its limit sᵢ/α: it is copied once per wrap. This is the FIFO extension of the
//! model; Van Houdt, "On the necessity of hot and cold data identification to reduce the write
//! amplification in flash-based SSDs", Performance Evaluation 2014, treats these workloads.
//!
//! **Separate logs per class** (a stream and a pool of units each): WA = Σ rᵢ·WA_FIFO(αᵢ)
//! where the spare is split so that Σ sᵢ αᵢ = α. A proportional split (αᵢ = α) gives the
//! uniform value; the optimum is found numerically.
//!
//! **TRIM**: a share q of host operations are TRIMs of uniformly random LBAs. Both TRIMs and
//! overwrites end a page's life, and only (1−q) of the logical space stays valid, so the
//! uniform model holds with α_eff = α/(1−q) (WA per host write). Trimming a share t of the
//! LBAs once and never writing them again likewise gives α_eff = α/(1−t). (Frankie, Hughes &
//! Kreutz-Delgado model TRIM in detail, arXiv:1210.5975.)

/// Principal branch W₀ of the Lambert W function for x ∈ [−1/e, ∞), by Halley iteration.
pub fn lambert_w0(x: f64) -> f64 {
    let e_inv = (-1.0f64).exp();
    assert!(x >= -e_inv - 1e-15, "W0 is undefined below -1/e (got {x})");
    if x <= -e_inv {
        return -1.0;
    }
    // Start near the branch point with the series in sqrt(2(ex+1)); elsewhere with log1p.
    let mut w = if x < -0.3 {
        let p = (2.0 * (std::f64::consts::E * x + 1.0)).sqrt();
        -1.0 + p - p * p / 3.0
    } else {
        x.ln_1p()
    };
    for _ in 0..100 {
        let ew = w.exp();
        let f = w * ew - x;
        let wp1 = w + 1.0;
        if wp1.abs() < 1e-300 {
            break;
        }
        let step = f / (ew * wp1 - (w + 2.0) * f / (2.0 * wp1));
        w -= step;
        if step.abs() <= 1e-15 * (1.0 + w.abs()) {
            break;
        }
    }
    w
}

/// Valid fraction of a FIFO victim under uniform overwrites at α = T/U (> 1).
pub fn victim_valid_fifo(alpha: f64) -> f64 {
    assert!(alpha > 1.0, "α = T/U must exceed 1 (got {alpha})");
    -lambert_w0(-alpha * (-alpha).exp()) / alpha
}

/// WA of uniform random overwrites under FIFO/LRU cleaning (Lambert-W closed form).
pub fn wa_fifo(alpha: f64) -> f64 {
    1.0 / (1.0 - victim_valid_fifo(alpha))
}

/// Agarwal & Marrow's closed form (1+ρ)/(2ρ).
pub fn wa_agarwal(rho: f64) -> f64 {
    (1.0 + rho) / (2.0 * rho)
}

/// A class of LBAs: `share` of the logical space receiving `writes` share of host writes.
#[derive(Clone, Copy, Debug)]
pub struct Class {
    pub share: f64,
    pub writes: f64,
}

/// WA of several classes mixed on one FIFO log at α.
pub fn wa_fifo_mixed(alpha: f64, classes: &[Class]) -> f64 {
    // g(u) = Σ rᵢ(1−u)/(1−pᵢ) − 1 falls from ≥ 0 near u = 0 to 1/α − 1 < 0 at u → 1; bisect.
    let g = |u: f64| -> f64 {
        let x = alpha * (1.0 - u);
        let mut sum = 0.0;
        for c in classes {
            if c.writes == 0.0 {
                sum += c.share / alpha;
            } else {
                // 1 − pᵢ via expm1: pᵢ is within rounding of 1 for rarely written classes.
                let one_minus_p = -(-c.writes * x / c.share).exp_m1();
                sum += c.writes * (1.0 - u) / one_minus_p;
            }
        }
        sum - 1.0
    };
    let (mut lo, mut hi) = (0.0f64, 1.0 - 1e-12);
    assert!(g(hi) < 0.0, "mixed model: no root (α = {alpha})");
    if g(lo) <= 0.0 {
        return 1.0;
    }
    for _ in 0..200 {
        let mid = 0.5 * (lo + hi);
        if g(mid) > 0.0 {
            lo = mid;
        } else {
            hi = mid;
        }
    }
    1.0 / (1.0 - 0.5 * (lo + hi))
}

/// WA with each class in its own FIFO pool at αᵢ: Σ rᵢ·WA_FIFO(αᵢ).
pub fn wa_separated(classes: &[Class], alphas: &[f64]) -> f64 {
    classes
        .iter()
        .zip(alphas)
        .map(|(c, &a)| c.writes * wa_fifo(a))
        .sum()
}

/// The best split of the spare between two separated classes: returns (WA, α_hot, α_cold,
/// share of the spare pages given to the hot class). Golden-section search on α_hot.
pub fn wa_separated_optimal(alpha: f64, hot: Class, cold: Class) -> (f64, f64, f64, f64) {
    let cold_alpha = |ah: f64| (alpha - hot.share * ah) / cold.share;
    let f = |ah: f64| wa_separated(&[hot, cold], &[ah, cold_alpha(ah)]);
    // Both pools need α > 1.
    let (mut a, mut b) = (1.0 + 1e-9, (alpha - cold.share * (1.0 + 1e-9)) / hot.share);
    let phi = (5f64.sqrt() - 1.0) / 2.0;
    for _ in 0..200 {
        let c = b - phi * (b - a);
        let d = a + phi * (b - a);
        if f(c) < f(d) {
            b = d;
        } else {
            a = c;
        }
    }
    let ah = 0.5 * (a + b);
    let spare_hot = hot.share * (ah - 1.0) / (alpha - 1.0);
    (f(ah), ah, cold_alpha(ah), spare_hot)
}

/// Uniform overwrites where a share q of operations are TRIMs of random LBAs (or a share q of
/// the space was trimmed and is never rewritten): WA_FIFO(α/(1−q)).
pub fn wa_fifo_trim(alpha: f64, q: f64) -> f64 {
    assert!((0.0..1.0).contains(&q));
    wa_fifo(alpha / (1.0 - q))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn lambert_w_satisfies_its_definition() {
        for &x in &[-0.3678, -0.3, -0.1, -1e-6, 0.0, 0.5, 1.0, 10.0] {
            let w = lambert_w0(x);
            assert!((w * w.exp() - x).abs() < 1e-12, "x {x}: w {w}");
            assert!(w >= -1.0);
        }
        assert!((lambert_w0(-(-1.0f64).exp()) + 1.0).abs() < 1e-6);
        assert!((lambert_w0(1.0) - 0.567_143_290_409_783_8).abs() < 1e-12);
    }

    #[test]
    fn published_anchor_at_rho_0_3() {
        // Xiang & Kurkoski: 2.36 from the Lambert-W expression at ρ = 0.3.
        assert!((wa_fifo(1.3) - 2.36).abs() < 0.005, "{}", wa_fifo(1.3));
        assert!((wa_agarwal(0.3) - 2.1667).abs() < 1e-3);
        // The fixed point holds.
        let u = victim_valid_fifo(1.3);
        assert!((u - (-1.3 * (1.0 - u)).exp()).abs() < 1e-12);
    }

    #[test]
    fn one_class_mixed_equals_uniform_and_skew_hurts_fifo() {
        for a in [1.05, 1.1, 1.25, 1.5, 2.0] {
            let one = wa_fifo_mixed(
                a,
                &[Class {
                    share: 1.0,
                    writes: 1.0,
                }],
            );
            assert!((one / wa_fifo(a) - 1.0).abs() < 1e-9, "α {a}");
            // Two identical halves are the uniform workload too.
            let halves = [Class {
                share: 0.5,
                writes: 0.5,
            }; 2];
            assert!((wa_fifo_mixed(a, &halves) / wa_fifo(a) - 1.0).abs() < 1e-9);
        }
        let a = 1.0 / 0.9;
        let hot = Class {
            share: 0.1,
            writes: 0.9,
        };
        let cold = Class {
            share: 0.9,
            writes: 0.1,
        };
        let mixed = wa_fifo_mixed(a, &[hot, cold]);
        assert!(mixed > wa_fifo(a));
        let prop = wa_separated(&[hot, cold], &[a, a]);
        assert!((prop / wa_fifo(a) - 1.0).abs() < 1e-12);
        let (opt, ah, ac, spare) = wa_separated_optimal(a, hot, cold);
        assert!(opt < prop && ah > 1.0 && ac > 1.0 && spare > 0.0 && spare < 1.0);
        assert!((hot.share * ah + cold.share * ac - a).abs() < 1e-9);
    }

    #[test]
    fn static_class_limit_is_continuous() {
        let a = 1.2;
        let z = wa_fifo_mixed(
            a,
            &[
                Class {
                    share: 0.2,
                    writes: 0.0,
                },
                Class {
                    share: 0.8,
                    writes: 1.0,
                },
            ],
        );
        let e = wa_fifo_mixed(
            a,
            &[
                Class {
                    share: 0.2,
                    writes: 1e-9,
                },
                Class {
                    share: 0.8,
                    writes: 1.0 - 1e-9,
                },
            ],
        );
        assert!((z / e - 1.0).abs() < 1e-5, "{z} {e}");
    }

    #[test]
    fn trim_lowers_wa() {
        assert!(wa_fifo_trim(1.1, 0.1) < wa_fifo(1.1));
        assert_eq!(wa_fifo_trim(1.1, 0.0), wa_fifo(1.1));
    }
}
