#!/usr/bin/env python3
"""What the dirty budget absorbs, medium against large: for every engine run of
docs/results/dirty-absorption, dirty-absorption-classes and dirty-absorption-lb-classes
(WiredTiger's engine, seed 2), the run phase's key changes that landed on a clean leaf (and dirtied it) and on a leaf
already dirty (absorbed), per operation, beside the host pages written per operation. Every
figure is computed here from the two results files."""
import json
from pathlib import Path

HERE = Path(__file__).resolve().parent


def runs(path, label):
    r = json.load(open(path))
    host = {(p["workload"], p["scale"]): p["device"]["flash_writes_per_op"] / p["device"]["waf"]
            for p in r["points"]}
    for e in r["engine_runs"]:
        lc = e["leaf_changes"]
        ops = sum(m["operations"] for m in e["run"]["metrics"].values())
        yield (label + e["workload"], e["scale_name"], lc["to_dirty"] / (lc["to_clean"] + lc["to_dirty"]),
               lc["to_clean"] / ops, host[(e["workload"], e["scale_name"])])


def main():
    rows = list(runs(HERE / "results.json", ""))
    rows += runs(HERE.parent / "dirty-absorption-classes" / "results.json", "skew held: ")
    rows += runs(HERE.parent / "dirty-absorption-lb-classes" / "results.json", "skew held: ")
    by = {(w, s): (a, d, h) for w, s, a, d, h in rows}
    print("workload | absorbed share, medium → large | dirtying changes/op, medium → large | "
          "host pages/op, medium → large")
    for w in dict.fromkeys(w for w, _, _, _, _ in rows):
        (a0, d0, h0), (a1, d1, h1) = by[(w, "medium")], by[(w, "large")]
        print(f"{w} | {a0:.1%} → {a1:.1%} | {d0:.3f} → {d1:.3f} ({d1 / d0 - 1:+.1%}) | "
              f"{h0:.3f} → {h1:.3f} ({h1 / h0 - 1:+.1%})")


if __name__ == "__main__":
    main()
