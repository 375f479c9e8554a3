"""ycsb-update-heavy, seed 2, TRIM off: every headline row at large (streams-reference-large)
beside paper (this run), with the move in percent, and the co-design's gap closure at both.

    python3 docs/results/ycsb-update-heavy-paper/large_to_paper.py
"""
import csv
import os

HERE = os.path.dirname(os.path.abspath(__file__))
LARGE = os.path.join(HERE, "..", "streams-reference-large", "results.csv")
PAPER = os.path.join(HERE, "results.csv")
ROWS = [  # (label, allocation, policy)
    ("none", "best", "none"), ("file", "best", "file"), ("boundary", "best", "boundary"),
    ("dsm", "best", "dsm"), ("dsm-skip-primary", "best", "dsm-skip-primary"),
    ("lifetime", "best", "lifetime"), ("filelog", "best", "filelog"),
    ("flashdoc", "sweep", "filelog"), ("oracle", "best", "oracle"),
    ("oracle-death", "best", "oracle-death"), ("oracle, sweep", "sweep", "oracle"),
    ("oracle-death, sweep", "sweep", "oracle-death"),
]
METRICS = [("flash_writes_per_op", "%.2f"), ("waf", "%.3f"), ("modeled_ops_s", "%.0f")]


def load(path):
    return {
        (r["allocation"], r["policy"]): r
        for r in csv.DictReader(open(path))
        if r["workload"] == "ycsb-update-heavy" and r["seed"] == "2" and r["trim"] == "off"
    }


def gap_closed(d):
    fw = lambda a, p: float(d[(a, p)]["flash_writes_per_op"])
    oracle = min(fw("best", "oracle"), fw("best", "oracle-death"))
    return (fw("best", "dsm") - fw("sweep", "filelog")) / (fw("best", "dsm") - oracle) * 100


def main():
    large, paper = load(LARGE), load(PAPER)
    print("| policy | flash writes/op, large → paper | WAF | modeled ops/s |")
    print("| --- | --- | --- | --- |")
    worst = {m: (0.0, "") for m, _ in METRICS}
    for label, alloc, policy in ROWS:
        cells = []
        for m, fmt in METRICS:
            x, y = float(large[(alloc, policy)][m]), float(paper[(alloc, policy)][m])
            move = (y / x - 1) * 100
            if abs(move) > worst[m][0]:
                worst[m] = (abs(move), label)
            cells.append(f"{fmt % x} → {fmt % y} ({move:+.1f} %)")
        print(f"| {label} | " + " | ".join(cells) + " |")
    for m, (w, label) in worst.items():
        verdict = "within 2 %" if w < 2 else "moves 2 % or more"
        print(f"{m}: largest move {w:.1f} % ({label}): {verdict}")
    print(f"co-design gap closed: large {gap_closed(large):.1f} %, paper {gap_closed(paper):.1f} %")


if __name__ == "__main__":
    main()
