use super::*;
use crate::experiment::{find, Kind, TrimSpec, SCORING_SEEDS, SHIPPED_POLICY, WORKLOADS};
use crate::summary::Spread;

/// The committed comparison: a test fails if a design, a fill, a policy or a workload drops out,
/// or if the copy-on-write engine leaves flash mode's settings.
#[test]
fn the_spec_runs_both_designs_every_fill_and_every_policy() {
    let e = find("inplace-vs-cow").expect("built in");
    e.validate().unwrap();
    assert_eq!(e.kind, Kind::InPlaceVsCow);
    assert_eq!(e.designs, [COPY_ON_WRITE, IN_PLACE]);
    assert_eq!(e.device_fills, [0.2, 0.4, 0.6, 0.8, 0.9]);
    assert_eq!(e.workloads, WORKLOADS);
    assert_eq!(
        e.policies,
        ["none", "file", "dsm", "boundary", "filelog", "oracle"]
    );
    assert!(e.policies.iter().any(|p| p == SHIPPED_POLICY));
    // Flash mode's engine settings on the copy-on-write side.
    let flash = engine::flash_mode_defaults(engine::FlashMode::Flash);
    assert_eq!(e.allocations, [flash.allocation.name()]);
    assert_eq!(
        e.budgets_of(COW_ALLOCATION),
        [[flash.eviction_dirty_target, flash.eviction_dirty_trigger]]
    );
    // At least two scoring seeds; the file system made on the device and discarding what
    // removed files free (no TRIM of freed extents), so the device holds valid what the files
    // hold and a fill is what garbage collection finds.
    assert!(e.seeds.len() >= 2 && e.seeds.iter().all(|s| SCORING_SEEDS.contains(s)));
    assert_eq!(
        e.trims,
        [TrimSpec {
            discard: true,
            ..TrimSpec::off()
        }]
    );
    assert_eq!(e.precondition, "mkfs");
    // The block is the replays' to hold across the fills (`held_block`).
    assert!(e.ssds[0].pages_per_block.is_none() && e.ssds[0].erase_units.is_none());
    assert!(e.reads);
}

#[test]
fn a_bad_design_or_fill_is_refused_and_no_other_experiment_takes_them() {
    let e = find("inplace-vs-cow").unwrap();
    let with = |f: &dyn Fn(&mut Experiment)| {
        let mut x = e.clone();
        f(&mut x);
        x.validate().unwrap_err().to_string()
    };
    assert!(with(&|x| x.designs.push("log-structured".into())).contains("unknown design"));
    assert!(with(&|x| x.device_fills.push(1.0)).contains("device fill"));
    assert!(with(&|x| x.device_fills.clear()).contains("device_fills"));
    assert!(with(&|x| x.allocations = vec!["best".into()]).contains("sweep"));
    assert!(with(&|x| x.trims = vec![TrimSpec::safe(20_000)]).contains("TRIM"));
    assert!(with(&|x| x.trims.push(TrimSpec::off())).contains("one condition"));
    let mut streams = find("streams-quick").unwrap();
    streams.device_fills = vec![0.5];
    assert!(streams
        .validate()
        .unwrap_err()
        .to_string()
        .contains("inplace-vs-cow"));
}

#[test]
fn the_device_is_sized_so_the_files_peak_fills_it() {
    let page = ssd::PAGE_BYTES;
    assert_eq!(device_bytes(90_000, 0.9), 100_000 * page);
    assert_eq!(device_bytes(20_000, 0.2), 100_000 * page);
    // Rounded up: the files never outgrow the device.
    assert_eq!(device_bytes(100_001, 0.5), 200_002 * page);
    // The simulator's smallest device.
    assert_eq!(device_bytes(100, 0.5), MIN_DEVICE_PAGES * page);
}

#[test]
#[should_panic(expected = "a fill in (0, 1)")]
fn a_full_device_is_not_a_fill() {
    device_bytes(1000, 1.0);
}

#[test]
fn a_difference_needs_the_seed_ranges_apart() {
    let s = |v: Vec<f64>| Spread::of(v).unwrap();
    assert!(report::apart(&s(vec![1.0, 1.2]), &s(vec![1.3, 1.5])));
    assert!(!report::apart(&s(vec![1.0, 1.4]), &s(vec![1.3, 1.5])));
}

#[test]
fn the_block_is_held_at_the_fullest_fills_across_a_runs_fills() {
    let e = find("inplace-vs-cow").unwrap();
    let ssd = &e.ssds[0];
    // 30 000 pages of files: 150 000 pages at 20 % (128-page blocks left to the lab), 33 334
    // at 90 % (32-page blocks): every fill gets the fullest fill's.
    assert_eq!(
        run::pages_per_block(device_bytes(30_000, 0.2) / ssd::PAGE_BYTES),
        128
    );
    let held = held_block(ssd, 30_000, &e.device_fills);
    assert_eq!(held.pages_per_block, Some(32));
    assert_eq!(held.label(), format!("{}-ppb32", ssd.label()));
    // The order of the fills does not matter; a block the entry sets is kept.
    assert_eq!(
        held_block(ssd, 30_000, &[0.9, 0.2]).pages_per_block,
        Some(32)
    );
    let set = SsdSpec {
        pages_per_block: Some(256),
        ..ssd.clone()
    };
    assert_eq!(held_block(&set, 30_000, &e.device_fills), set);
    let units = SsdSpec {
        erase_units: Some(2048),
        ..ssd.clone()
    };
    assert_eq!(held_block(&units, 30_000, &e.device_fills), units);
}
