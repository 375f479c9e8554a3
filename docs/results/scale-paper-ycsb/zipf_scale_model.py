#!/usr/bin/env python3
"""Does YCSB's scrambled zipfian alone explain why host pages per operation keep falling
with scale on ycsb-update-only / update-heavy (docs/placement.md, scale study)?

A leaf-level cache model, fed by YCSB's key generator exactly as flashdoc implements it
(crates/workload/src/ycsb/generator.rs), run at each scale's record and operation counts,
against a control distribution whose skew is scale-invariant by construction. Standard
library only. Usage (from /work/main):
    python3 docs/results/scale-paper-ycsb/zipf_scale_model.py --out FILE.json
"""
import argparse, json, math, os, random, time
from collections import OrderedDict

HERE = os.path.dirname(os.path.abspath(__file__))
RESULTS = [os.path.join(HERE, "../scale-tiny-to-large/results.json"),
           os.path.join(HERE, "results.json")]
SCALES = {"quick": (40_000, 100_000), "medium": (200_000, 600_000),   # experiment.rs
          "large": (800_000, 2_400_000), "paper": (3_000_000, 9_000_000)}

# ScrambledZipfianGenerator: the inner zipfian is over 10^10 + 1 ranks with YCSB's fixed
# zeta, *whatever N is*; only the final `fnv(rank) % itemcount` sees N. So the ranks below N
# (which land on distinct-ish keys, the "head") carry zeta(N)/ZETAN of the requests, a share
# that grows like ln N; ranks above N fold onto keys uniformly (a flat background).
THETA = 0.99
ITEMS = 10_000_000_000 + 1
ZETAN = 26.46902820178302
ZETA2 = 1.0 + 0.5 ** THETA
ALPHA = 1.0 / (1.0 - THETA)
ETA = (1.0 - (2.0 / ITEMS) ** (1.0 - THETA)) / (1.0 - ZETA2 / ZETAN)
M64 = (1 << 64) - 1


def fnvhash64(v):
    """Utils.fnvhash64: FNV-1a over 8 bytes, then Java's Math.abs of the signed result."""
    h = 0xCBF29CE484222325
    for _ in range(8):
        h = ((h ^ (v & 0xFF)) * 1099511628211) & M64
        v >>= 8
    h = h - (1 << 64) if h >= 1 << 63 else h
    return h if h == -(1 << 63) else abs(h)


_memo = {}


def scrambled_item(u, itemcount):
    """One ScrambledZipfianGenerator draw for uniform u: zipfian rank -> fnv(rank) % count."""
    uz = u * ZETAN
    r = 0 if uz < 1.0 else 1 if uz < ZETA2 else int(ITEMS * (ETA * u - ETA + 1.0) ** ALPHA)
    h = _memo.get(r) if r < 1 << 20 else None       # hot ranks repeat: cache their hash
    if h is None:
        h = fnvhash64(r)
        if r < 1 << 20:
            _memo[r] = h
    return h % itemcount if h >= 0 else -((-h) % itemcount)   # Rust's % on i64


def ycsb_keyfn(n, rng):
    # ScrambledZipfianGenerator::new(0, count + 0) is inclusive: itemcount n + 1; next_keynum
    # redraws the one key above the last loaded one (workload.rs).
    def key():
        while True:
            k = scrambled_item(rng.random(), n + 1)
            if 0 <= k < n:
                return k
    return key


def control_keyfn(n, rng, classes):
    # Scale-invariant control: the same scrambled zipfian picks one of a FIXED number of
    # classes; the class is spread over n/classes keys strided by `classes`, so every leaf
    # holds R different classes and the leaf-popularity distribution (as shares of leaves)
    # is the same at every n. At n == classes it is YCSB's own (but for the redrawn key).
    per = n // classes
    def key():
        return scrambled_item(rng.random(), classes) + classes * rng.randrange(per)
    return key


def simulate(key, n, ops, rpl, ckpt_ops, cache_frac, dirty_frac, read_frac, rng):
    """Leaf cache: LRU over cache_frac of the leaves; an update dirties its leaf; over the
    dirty budget (dirty_frac of the cache) the least recently used dirty leaf is written and
    stays resident clean (the engine's "scrub"); an evicted dirty leaf is written; every
    ckpt_ops operations a checkpoint writes every dirty leaf."""
    leaves = -(-n // rpl)
    cap = max(1, int(cache_frac * leaves))
    dmax = max(1, int(dirty_frac * cap))
    cache, dirty = OrderedDict(), OrderedDict()
    counts = [0] * leaves
    w_scrub = w_evict = w_ckpt = absorbed = updates = misses = 0
    rand = rng.random
    for i in range(1, ops + 1):
        update = not (read_frac and rand() < read_frac)   # YCSB picks the op, then the key
        leaf = key() // rpl                               # RecordIds follow the load order
        counts[leaf] += 1
        if leaf in cache:
            cache.move_to_end(leaf)
        else:
            misses += 1
            cache[leaf] = None
            if len(cache) > cap:
                old, _ = cache.popitem(last=False)
                if old in dirty:
                    del dirty[old]
                    w_evict += 1
        if leaf in dirty:
            dirty.move_to_end(leaf)
            if update:
                absorbed += 1
        elif update:
            dirty[leaf] = None
            if len(dirty) > dmax:
                dirty.popitem(last=False)
                w_scrub += 1
        updates += update
        if i % ckpt_ops == 0:
            w_ckpt += len(dirty)
            dirty.clear()
    counts.sort(reverse=True)
    top = lambda f: sum(counts[:max(1, int(f * leaves))]) / ops
    return {"leaves": leaves, "cache_leaves": cap, "dirty_budget_leaves": dmax,
            "ckpt_every_ops": ckpt_ops,
            "leaf_writes_per_op": (w_scrub + w_evict + w_ckpt) / ops,
            "writes_per_op_by_cause": {"dirty_budget": w_scrub / ops, "eviction": w_evict / ops,
                                       "checkpoint": w_ckpt / ops},
            "update_on_dirty_leaf_share": absorbed / max(1, updates),
            "miss_ratio": misses / ops,
            "hottest_20pct_leaves_share": top(0.20), "hottest_1pct_leaves_share": top(0.01)}


def zeta(n):
    """zeta(n, 0.99): exact to 10^5, then Euler-Maclaurin (as the Rust tests check ZETAN)."""
    m = min(n, 100_000)
    s = math.fsum(1.0 / i ** THETA for i in range(1, m + 1))
    if n > m:
        t, a, b = THETA, float(m), float(n)
        s += ((b ** (1 - t) - a ** (1 - t)) / (1 - t) + (b ** -t - a ** -t) / 2
              - t / 12 * (b ** (-t - 1) - a ** (-t - 1)))
    return s


def measured():
    """Host pages/op (run_write_bytes / 4 KB / run operations) and leaf pages/op per run, and
    the checkpoint interval in operations (run operations / run_checkpoints)."""
    out = {}
    for path in RESULTS:
        for r in json.load(open(path))["engine_runs"]:
            if not r["workload"].startswith("ycsb"):
                continue
            ops = r["run"]["operations"]
            k = (r["workload"], r["allocation"], r["scale_name"])
            out[k] = {"dirty_pct": r["dirty_pct"], "records": r["scale"]["ycsb_records"],
                      "ops": ops, "ckpt_every_ops": round(ops / r["run_checkpoints"]),
                      "host_pages_per_op": r["run_write_bytes"] / 4096 / ops,
                      "leaf_pages_per_op": r["write_bytes_by_page"]["leaf"] / 4096 / ops}
    return out


def pct(a, b):
    return 100.0 * (b / a - 1.0)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    ap.add_argument("--seed", type=int, default=2)
    # 28 KB leaves (split_pct 90 of 32 KB) / ~1185 B per record (1168 B of BSON + RecordId
    # and cell headers); fits the quick run's 27.6 KB per leaf write (docs/placement.md).
    ap.add_argument("--records-per-leaf", type=int, default=24)
    ap.add_argument("--cache-frac", type=float, default=0.20)
    ap.add_argument("--classes", type=int, default=40_000)
    ap.add_argument("--scales", default="quick,medium,large,paper")
    ap.add_argument("--workloads", default="ycsb-update-only,ycsb-update-heavy")
    a = ap.parse_args()
    meas = measured()
    engines = {"best": 0.05, "sweep": 0.50}     # dirty targets: WiredTiger 5/20, co-design 50/80
    rows, t0 = [], time.time()
    for wl in a.workloads.split(","):
        read_frac = 0.5 if wl == "ycsb-update-heavy" else 0.0
        for alloc, dfrac in engines.items():
            for scale in a.scales.split(","):
                m = meas.get((wl, alloc, scale))
                if m is None:                    # not run at this scale: nothing to compare
                    continue
                n, ops = SCALES[scale]
                assert (n, ops) == (m["records"], m["ops"]), (scale, m)
                row = {"workload": wl, "allocation": alloc, "dirty_pct": m["dirty_pct"],
                       "scale": scale, "records": n, "ops": ops, "measured": m,
                       "head_share_ranks_below_N": zeta(n) / ZETAN}
                for dist in ("ycsb", "control"):
                    rng = random.Random(f"{a.seed}-{wl}-{alloc}-{scale}-{dist}")
                    kf = ycsb_keyfn(n, rng) if dist == "ycsb" else control_keyfn(n, rng, a.classes)
                    t = time.time()
                    row[dist] = simulate(kf, n, ops, a.records_per_leaf, m["ckpt_every_ops"],
                                         a.cache_frac, dfrac, read_frac, rng)
                    row[dist]["sim_s"] = round(time.time() - t, 1)
                rows.append(row)
                print(f"{wl} {alloc} {scale}: ycsb {row['ycsb']['leaf_writes_per_op']:.4f} "
                      f"control {row['control']['leaf_writes_per_op']:.4f} measured host "
                      f"{m['host_pages_per_op']:.3f} ({time.time() - t0:.0f} s)", flush=True)
    steps = []
    for r0, r1 in zip(rows, rows[1:]):
        if (r0["workload"], r0["allocation"]) != (r1["workload"], r1["allocation"]):
            continue
        steps.append({"workload": r0["workload"], "allocation": r0["allocation"],
                      "step": f"{r0['scale']}->{r1['scale']}",
                      "records_x": r1["records"] / r0["records"],
                      "measured_host_pages_pct": pct(r0["measured"]["host_pages_per_op"],
                                                     r1["measured"]["host_pages_per_op"]),
                      "measured_leaf_pages_pct": pct(r0["measured"]["leaf_pages_per_op"],
                                                     r1["measured"]["leaf_pages_per_op"]),
                      "model_ycsb_pct": pct(r0["ycsb"]["leaf_writes_per_op"],
                                            r1["ycsb"]["leaf_writes_per_op"]),
                      "model_control_pct": pct(r0["control"]["leaf_writes_per_op"],
                                               r1["control"]["leaf_writes_per_op"])})
    json.dump({"args": vars(a), "engines_dirty_target_of_cache": engines, "rows": rows,
               "steps": steps, "wall_s": round(time.time() - t0, 1)},
              open(a.out, "w"), indent=1)
    for s in steps:
        print(f"{s['workload']:18} {s['allocation']:5} {s['step']:14} x{s['records_x']:.2f} "
              f"measured host {s['measured_host_pages_pct']:+.1f}% leaf "
              f"{s['measured_leaf_pages_pct']:+.1f}% | model ycsb {s['model_ycsb_pct']:+.1f}% "
              f"control {s['model_control_pct']:+.1f}%")


if __name__ == "__main__":
    main()
