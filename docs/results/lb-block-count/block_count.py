#!/usr/bin/env python3
"""How the figures depend on the erase block: one workload and seed at medium and large, every
policy replayed on blocks of 256 down to 16 pages. Reads the results.json of
`flashdoc lab run docs/results/lb-block-count/experiment.yaml` (linkbench-mixed, seed 2,
degree cap 7 500; the default) or of docs/results/ycsb-block-count (pass its path).

Prints, per engine and policy, the WAF at each block size and scale; then, per scale and
block size, dsm's and flashdoc's flash writes per operation and the co-design gap closed
((dsm - flashdoc) / (dsm - oracle), WiredTiger's engine for dsm and the oracle), and the same
trace's closure by filelog. Every figure is computed here from the results file.
"""
import json
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
BLOCKS = (256, 128, 64, 32, 16)


def load(path):
    rows = {}
    for p in json.load(open(path))["points"]:
        d = p["device"]
        ppb = d["ssd"].get("pages_per_block") or 256
        rows[(p["allocation"], p["policy"], p["scale"], ppb)] = d
    return rows


def main():
    rows = load(sys.argv[1] if len(sys.argv) > 1 else HERE / "results.json")
    scales = ("medium", "large")
    present = {k[1] for k in rows}
    policies = [p for p in ("none", "dsm", "dsm-skip-primary", "filelog", "oracle") if p in present]
    print("WAF by erase block (pages), medium | large")
    print(f"{'engine':7} {'policy':17}" + "".join(f" {b:>5}" for b in BLOCKS) * 2)
    for alloc in ("best", "sweep"):
        for pol in policies:
            cells = [rows.get((alloc, pol, s, b)) for s in scales for b in BLOCKS]
            print(f"{alloc:7} {pol:17}" + "".join(
                f" {d['waf']:5.2f}" if d else "     -" for d in cells))
    print()
    print("scale  block  dsm flash/op  flashdoc flash/op  oracle flash/op  flashdoc/dsm"
          "  co-design closed  same-trace filelog closed")
    for s in scales:
        for b in BLOCKS:
            f = lambda a, p: rows[(a, p, s, b)]["flash_writes_per_op"]
            dsm, fd, orc, fl = f("best", "dsm"), f("sweep", "filelog"), f("best", "oracle"), f("best", "filelog")
            print(f"{s:6} {b:5}  {dsm:12.2f}  {fd:17.2f}  {orc:15.2f}  {fd / dsm:12.3f}"
                  f"  {(dsm - fd) / (dsm - orc):16.0%}  {(dsm - fl) / (dsm - orc):25.0%}")
    if "dsm-skip-primary" in present:
        print()
        print("the filter's cost, dsm WAF / dsm-skip-primary WAF (WiredTiger's engine)")
    for s in scales if "dsm-skip-primary" in present else ():
        print(f"{s:6} " + "  ".join(
            f"{b}: {rows[('best', 'dsm', s, b)]['waf'] / rows[('best', 'dsm-skip-primary', s, b)]['waf']:.2f}"
            for b in BLOCKS))
    print()
    print("medium on blocks a quarter the size (as many blocks as large), medium / large WAF")
    for alloc in ("best", "sweep"):
        for pol in policies:
            print(f"{alloc:7} {pol:17} " + "  ".join(
                f"{b // 4}/{b}: {rows[(alloc, pol, 'medium', b // 4)]['waf'] / rows[(alloc, pol, 'large', b)]['waf'] - 1:+.1%}"
                for b in (256, 128, 64)))


if __name__ == "__main__":
    main()
