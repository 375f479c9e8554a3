#!/usr/bin/env python3
"""The dirty-budget tuning's tables, computed from the results-*.json that run.sh writes.

Flash page writes per operation on workload seed 1 (quick): flashdoc (the sweep engine with
`filelog`) under each dirty budget, and the share of the dsm -> oracle gap it closes, both
measured on WiredTiger's engine (best fit, 5/20). Then the decomposition: dsm and the oracle
on best fit with the co-design's 50/80 budget too.
"""
import json
import sys
from pathlib import Path

here = Path(sys.argv[1] if len(sys.argv) > 1 else Path(__file__).parent)


def load(name):
    data = json.loads((here / f"results-{name}.json").read_text())
    return data["experiment"]["workloads"], {
        (p["workload"], p["allocation"], p["policy"]): p["device"] for p in data["points"]
    }


def fwpo(points, w, alloc, policy):
    return points[(w, alloc, policy)]["flash_writes_per_op"]


def host(points, w, alloc, policy):
    return points[(w, alloc, policy)]["host_write_pages"]


budgets = [b for b in ["5.20", "20.40", "50.80", "70.90", "90.95"] if (here / f"results-{b}.json").exists()]
workloads, ref = load(budgets[0])
print("| sweep engine's budget | " + " | ".join(workloads) + " |")
print("| --- |" + " --- |" * len(workloads))
dsm = {w: fwpo(ref, w, "best", "dsm") for w in workloads}
oracle = {w: fwpo(ref, w, "best", "oracle") for w in workloads}
print("| dsm, WiredTiger engine | " + " | ".join(f"{dsm[w]:.2f}" for w in workloads) + " |")
print("| oracle, WiredTiger engine | " + " | ".join(f"{oracle[w]:.2f}" for w in workloads) + " |")
for b in budgets:
    _, pts = load(b)
    cells = []
    for w in workloads:
        ours = fwpo(pts, w, "sweep", "filelog")
        closed = (dsm[w] - ours) / (dsm[w] - oracle[w])
        hosts = host(pts, w, "sweep", "filelog") / host(pts, w, "best", "dsm")
        cells.append(f"{ours:.2f} ({closed:.0%}; host ×{hosts:.2f})")
    print(f"| flashdoc, {b.replace('.', '/')} | " + " | ".join(cells) + " |")

if (here / "results-both.json").exists():
    _, both = load("both")
    print()
    print("| best fit at 50/80 too | " + " | ".join(workloads) + " |")
    print("| --- |" + " --- |" * len(workloads))
    for label, alloc, policy in [
        ("dsm, best fit 50/80", "best", "dsm"),
        ("oracle, best fit 50/80", "best", "oracle"),
        ("flashdoc, sweep 50/80", "sweep", "filelog"),
    ]:
        print(f"| {label} | " + " | ".join(f"{fwpo(both, w, alloc, policy):.2f}" for w in workloads) + " |")
    cells = []
    for w in workloads:
        d, o, f = (fwpo(both, w, a, p) for a, p in [("best", "dsm"), ("best", "oracle"), ("sweep", "filelog")])
        cells.append(f"{(d - f) / (d - o):.0%}")
    print("| gap closed, budget held equal | " + " | ".join(cells) + " |")
