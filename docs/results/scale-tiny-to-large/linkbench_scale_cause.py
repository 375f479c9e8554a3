#!/usr/bin/env python3
"""Why LinkBench's flash page writes per operation still fall from medium to large.

Run from /work/main:  python3 docs/results/scale-tiny-to-large/linkbench_scale_cause.py
Standard library only; reads committed results.json files (no traces: they are not committed)
and re-implements the parts of the LinkBench generator the question needs
(crates/workload/src/linkbench/{mod,dist}.rs, the lab's nlinks_cap in crates/lab/src/run.rs).
flash/op = host pages/op x WAF, so each change is split into those two factors (log shares).

Measured afterwards: its degree-cap model (section 2) predicted that holding the cap at
medium's 7 500 would shrink the medium -> large fall of host pages/op to about -2 %; the lab
run with the cap held (docs/results/scale-linkbench-fixed-cap) still fell 8.4 %, so the cap
is not the cause (docs/placement.md, "Why the absolute figures do not converge").
"""
import json, math, random, os
R = 'docs/results/'
LB = ['linkbench-original', 'linkbench-mixed', 'linkbench-update-only']
SC = ['quick', 'medium', 'large']
def load(name):
    d = json.load(open(R + name + '/results.json'))
    runs = {(r['workload'], r['allocation'], r.get('scale_name') or d['experiment'].get('scale')): r
            for r in d['engine_runs'] if r['seed'] == 2}
    waf = {(p['workload'], p['allocation'], p.get('scale') or d['experiment'].get('scale'), p['policy']): p['device']
           for p in d['points'] if p['seed'] == 2 and p['device']['trim']['batch'] is None}
    return runs, waf
RUNS, DEV = load('scale-tiny-to-large')
ops = lambda r: r['run']['operations']
hp = lambda r: r['run_write_bytes'] / 4096 / ops(r)          # host pages per run-phase op
pct = lambda a, b: 100 * (b / a - 1)

CH = {}
print('=== 1. Decomposition: flash/op = host pages/op x WAF (seed 2, TRIM off) ===')
print('policy: dsm/oracle replay the best-fit (WiredTiger) trace; flashdoc = filelog on the sweep trace')
for w in LB:
    for a, pol, lab in (('best', 'dsm', 'dsm'), ('best', 'oracle', 'oracle'), ('sweep', 'filelog', 'flashdoc')):
        row = [(hp(RUNS[w, a, s]), DEV[w, a, s, pol]['waf'], DEV[w, a, s, pol]['flash_writes_per_op']) for s in SC]
        cells = ' | '.join('%5.2f x %4.2f = %5.2f' % x for x in row)
        ch = []
        for i, j in ((0, 1), (1, 2)):
            h, f, t = row[j][0] / row[i][0], row[j][1] / row[i][1], row[j][2] / row[i][2]
            CH.setdefault((lab, SC[i][0] + '->' + SC[j][0]), []).append((100 * (t - 1), 100 * (h - 1), 100 * (f - 1)))
            share = '%2.0f%%' % (100 * math.log(h) / math.log(t)) if (h - 1) * (f - 1) > 0 else 'n/a'
            ch.append('%+5.1f%% (host %+5.1f%%, WAF %+5.1f%%; host share %s)' % (
                100 * (t - 1), 100 * (h - 1), 100 * (f - 1), share))
        print('%-21s %-8s q|m|l: %s\n%31s q->m %s   m->l %s' % (w, lab, cells, '', ch[0], ch[1]))
print('\nWAF of every policy (best trace: none dsm file filelog oracle; sweep trace: filelog oracle):')
for w in LB:
    for s in SC:
        b = [DEV[w, 'best', s, p]['waf'] for p in ('none', 'dsm', 'file', 'filelog', 'oracle')]
        sw = [DEV[w, 'sweep', s, p]['waf'] for p in ('filelog', 'oracle')]
        print('  %-21s %-6s best %s | sweep %s' % (w, s, ' '.join('%4.2f' % x for x in b), ' '.join('%4.2f' % x for x in sw)))

print('\n=== 1b. What the engine writes per op (pages/op by file and page kind, best | sweep) ===')
for w in LB:
    for a in ('best', 'sweep'):
        for key in ('write_bytes_by_file', 'write_bytes_by_page'):
            ks = sorted(set().union(*[RUNS[w, a, s][key] for s in SC]))
            cells = ['%s %s' % (k[:9], '/'.join('%.3f' % (RUNS[w, a, s][key].get(k, 0) / 4096 / ops(RUNS[w, a, s])) for s in SC))
                     for k in ks if k not in ('descriptor', 'metadata', 'root')]
            print('  %-21s %-5s %s' % (w, a, '  '.join(cells)))

print('\n=== 1c. Scale quantities (best-fit runs; sweep has the same checkpoints) ===')
print('  workload              scale  maxid1  req/maxid1 links/node dbB/node ckpts caps/pass loops warm-up caps  ops/ckpt/node')
for w in LB:
    for s in SC:
        r = RUNS[w, 'best', s]; m = r['scale']['linkbench_maxid1']; c = r['load']['counters']
        caps = r['run_write_bytes'] / r['sizing']['capacity_bytes']; loops = DEV[w, 'best', s, 'dsm']['run_loops']
        print('  %-21s %-6s %6d %6.1f %10.2f %8.0f %5d %8.2f %5d %9.1f %14.4f' % (
            w, s, m, ops(r) / m, c['links'] / c['nodes'], r['sizing']['db_load_bytes'] / c['nodes'],
            r['run_checkpoints'], caps, loops, (loops - 1) * caps, ops(r) / r['run_checkpoints'] / m))
# Database bytes per node regressed on links per node over the three scales: bytes = a*nodes + b*links.
pts = [(RUNS['linkbench-mixed', 'best', s]['load']['counters'], RUNS['linkbench-mixed', 'best', s]['sizing']['db_load_bytes']) for s in SC]
X = [(c['nodes'], c['links'], y) for c, y in pts]
s11 = sum(n * n for n, l, y in X); s12 = sum(n * l for n, l, y in X); s22 = sum(l * l for n, l, y in X)
s1y = sum(n * y for n, l, y in X); s2y = sum(l * y for n, l, y in X); det = s11 * s22 - s12 * s12
A, B = (s1y * s22 - s2y * s12) / det, (s11 * s2y - s12 * s1y) / det
print('  live bytes = %.0f B/node + %.0f B/link (fit residuals %s %%)' % (A, B, ' '.join(
    '%+.2f' % (100 * ((A * n + B * l) / y - 1)) for n, l, y in X)))

# ---- 2. The generator, re-implemented (dist.rs: LbZipf, Shuffler, NLINKS_CDF; mod.rs: nlinks_of_type) ----
NL = [(0, .19747), (1, .72985), (2, .86738), (3, .91817), (4, .94459), (5, .95869), (6, .96778), (8, .97817),
      (10, .98341), (15, .98963), (20, .99222), (30, .99465), (50, .99652), (100, .99774), (200, .99840),
      (300, .99870), (500, .99900), (700, .99916), (1000, .99935), (2000, .99962), (4000, .99982),
      (10000, .99996), (100000, .999995), (961963, 1.0)]
def nlinks_at(u):
    if u <= NL[0][1]: return 0
    for (da, ca), (db, cb) in zip(NL, NL[1:]):
        if u <= cb:
            f = min(max((u - ca) / (cb - ca), 0), 1); la, lb = math.log1p(da), math.log1p(db)
            return min(max(math.ceil(math.exp(la + (lb - la) * f) - 1), da + 1), db)
    return NL[-1][0]
def per_type(d): return [d // 2 + (t < d - d // 2) for t in (0, 1)]   # LinkBench's split, quirk included
def zipf_cdf(n, s):
    """P(rank < k) of LbZipf::quantile for p ~ U[0,1): exact inversion of Gray's method."""
    zn = n ** (1 - s) / (1 - s) + (0.58 - 1 / (1 - s)) if n >= 100000 else sum(i ** -s for i in range(1, n + 1))
    z2 = 1 + 0.5 ** s; eta = (1 - (2 / n) ** (1 - s)) / (1 - z2 / zn)
    def F(k):
        if k <= 0: return 0.0
        if k >= n: return 1.0
        q = 1 - (1 - (k / n) ** (1 - s)) / eta
        return 1 / zn + max(0.0, q - z2 / zn) if k == 1 else max(z2 / zn, q)
    return F, eta
MAXID = {'quick': 15000, 'medium': 75000, 'large': 300000}
print('\n=== 2. Generator: is the workload scale-invariant? ===')
for s, m in MAXID.items():
    n, cap = m - 1, max(m // 10, 100)                       # run.rs: nlinks_cap = maxid1/10
    deg = [min(nlinks_at(1 - r / n), cap) for r in range(n)]
    links = sum(sum(per_type(d)) for d in deg); big = sum(sum(per_type(d)) for d in deg if d > 1000)
    shares = []
    for name, sh in (('link write/read 0.8', 0.8), ('link corr 0.741', 0.741), ('node update 0.606', 0.606), ('node read 0.625', 0.625)):
        F, eta = zipf_cdf(n, sh); shares.append('%s %.1f%% (eta %.3f)' % (name, 100 * F(int(0.2 * n)), eta))
    print('  %-6s cap %5d: links %7d (%.2f/node; measured %d) of which %4.1f%% on nodes of degree > 1000' % (
        s, cap, links, links / n, RUNS['linkbench-mixed', 'best', s]['load']['counters']['links'], 100 * big / links))
    print('         requests on the hottest 20%% of nodes: %s' % '; '.join(shares))
deg_cf = [min(nlinks_at(1 - r / 299999), 7500) for r in range(299999)]
L_CF = sum(sum(per_type(d)) for d in deg_cf)
print('  large with medium\'s cap (7500): %.2f links/node -> the cap alone adds %.2f links/node, %.1f%% of large\'s live bytes' % (
    L_CF / 299999, (1640781 - L_CF) / 299999, 100 * B * (1640781 - L_CF) / RUNS['linkbench-mixed', 'best', 'large']['sizing']['db_load_bytes']))

# ---- 2b. Leaf model: coalescing of write ops into 32 KB leaves per checkpoint interval ----
# Each collection/index is laid out in load order (node: id; link and covering index: id1,type,id2;
# unique index: type,id1,id2; count: id1,type), C records per leaf (C chosen so the modeled leaves
# x 32 KB ~ medium's live data). Each op touches leaves with the generator's rates; a leaf touched
# at rate x per op is written (1-exp(-x W))/W times per op for an interval of W ops (no eviction).
class Shuf:                                                 # dist.rs Shuffler (our rotations, same stats)
    def __init__(s, seed, n):
        s.n, s.g = n, min(n, 1024); r = random.Random(seed)
        s.rot = [r.randrange((n - g + s.g - 1) // s.g) for g in range(s.g)]
    def inv(s, x):
        g = x % s.g; return g + ((x // s.g - s.rot[g]) % ((s.n - g + s.g - 1) // s.g)) * s.g
PMF = {}
def pmf(n, s):
    if (n, s) not in PMF:
        F, _ = zipf_cdf(n, s); c = [F(k) for k in range(n + 1)]; PMF[n, s] = [c[k + 1] - c[k] for k in range(n)]
    return PMF[n, s]
MIX = {'linkbench-original': dict(add=8.9886601, dele=2.9907664, upd=8.0122125, updn=7.366437, deln=1.0115914),
       'linkbench-mixed': dict(add=9.3292242, dele=2.9890045, upd=43.763651, updn=40.236349, deln=1.0109955),
       'linkbench-update-only': dict(add=0, dele=0, upd=52.0995846, updn=47.9004154, deln=0)}
def leaf_rates(m, cap, C):
    """Per op type: {structure: {leaf: touches per op of that type}}."""
    n = m - 1; nls, uns, nos = Shuf(1, n), Shuf(2, n), Shuf(3, n)
    p8, p741, p606 = pmf(n, 0.8), pmf(n, 0.741), pmf(n, 0.606)
    lam = {op: {k: {} for k in C} for op in ('add', 'upd', 'dele', 'updn', 'deln')}
    def add(op, k, pos, x): d = lam[op][k]; l = pos // C[k]; d[l] = d.get(l, 0) + x
    def spread(op, k, pos, nl, x):
        c = C[k]
        for l in range(pos // c, (pos + nl - 1) // c + 1):
            lam[op][k][l] = lam[op][k].get(l, 0) + x * (min(pos + nl, (l + 1) * c) - max(pos, l * c)) / nl
    pos = cpos = 0; uni = []
    for i in range(n):
        d = min(nlinks_at(1 - nls.inv(i) / n), cap)
        plw = 0.995 * p8[uns.inv(i)] + 0.005 * p741[nls.inv(i)]   # the write_uses_read_uncorr blend
        add('updn', 'node', i, p606[nos.inv(i)]); add('deln', 'node', i, 1 / n)
        for t, nl in enumerate(per_type(d)):
            ins = {}
            for op, pe in (('add', 0.05), ('upd', 0.9), ('dele', 0.9)):
                R = max(1, math.ceil(nl / pe)); ex = plw * 0.5 * nl / R   # id2 ~ id1 + U[0, R): exists w.p. nl/R
                ins[op] = 0 if op == 'dele' else plw * 0.5 * (1 - nl / R)
                if nl:                                      # rewrite the link, move its covering entry, bump its count
                    spread(op, 'link', pos, nl, ex); spread(op, 'cov', pos, nl, ex); add(op, 'cnt', cpos, ex + ins[op])
                add(op, 'cov', pos + max(nl, 1) - 1, ex + ins[op])  # the new entry: newest time, end of the range
            uni.append((t, nl, ins['add'], ins['upd'])); cpos += 1 if nl else 0; pos += nl
    upos = 0                                                # unique index (type, id1, id2): type-major
    for t in (0, 1):
        for tt, nl, ia, iu in uni:
            if tt == t: add('add', 'uni', upos, ia); add('upd', 'uni', upos, iu); upos += nl
    return lam
def model_pages(lam, mix, W):
    tot = {}
    for op, pc in mix.items():
        for k, d in lam[op].items():
            for l, x in d.items(): tot[k, l] = tot.get((k, l), 0) + x * pc / 100
    return 8 * sum((1 - math.exp(-x * W)) / W for x in tot.values())
C0 = dict(node=110, link=210, cov=300, uni=700, cnt=300)
print('\n=== 2b. Leaf model (generator rates, 32 KB leaves, one write per dirtied leaf per checkpoint interval W) ===')
for f in (1.0, 0.5, 2.0):
    C = {k: max(1, int(v * f)) for k, v in C0.items()}
    lam = {s: leaf_rates(MAXID[s], max(MAXID[s] // 10, 100), C) for s in SC}
    lam_cf = leaf_rates(300000, 7500, C)
    for w in (LB if f == 1.0 else ['linkbench-mixed']):
        Wm = {s: ops(RUNS[w, 'best', s]) / RUNS[w, 'best', s]['run_checkpoints'] for s in SC}
        mp = {s: model_pages(lam[s], MIX[w], Wm[s]) for s in SC}
        same = model_pages(lam['large'], MIX[w], Wm['medium'] * 4)   # large at medium's ops/interval/node
        # Counterfactual: large with medium's cap: fewer cold links -> smaller device -> shorter interval,
        # solved self-consistently (interval bytes fixed by the device, ops = bytes / model pages).
        r = RUNS[w, 'best', 'large']; db_cf = r['sizing']['db_load_bytes'] - B * (1640781 - L_CF); Wc = Wm['large']
        for _ in range(30):
            Wc = Wm['large'] * db_cf / r['sizing']['db_load_bytes'] * mp['large'] / model_pages(lam_cf, MIX[w], Wc)
        cf = model_pages(lam_cf, MIX[w], Wc)
        meas = {s: RUNS[w, 'best', s]['write_bytes_by_page']['leaf'] / 4096 / ops(RUNS[w, 'best', s]) for s in SC}
        print('  C x%.1f %-21s W q/m/l %4.0f/%4.0f/%4.0f ops; leaf pages/op model %5.2f/%5.2f/%5.2f measured %5.2f/%5.2f/%5.2f;'
              ' m->l model %+5.1f%% (zipf drift at equal W/node %+4.1f%%; cap kept at 7500 %+4.1f%%), measured %+5.1f%%; q->m model %+5.1f%% measured %+5.1f%%' % (
                  f, w, Wm['quick'], Wm['medium'], Wm['large'], mp['quick'], mp['medium'], mp['large'], meas['quick'], meas['medium'], meas['large'],
                  pct(mp['medium'], mp['large']), pct(mp['medium'], same), pct(mp['medium'], cf), pct(meas['medium'], meas['large']),
                  pct(mp['quick'], mp['medium']), pct(meas['quick'], meas['medium'])))

print('\n=== 3. WAF: what does and does not move it ===')
print('  (a) caps/pass across workloads at one scale: slope d ln WAF / d ln(caps/pass), best-fit trace')
for s in ('medium', 'large'):
    for pol in ('none', 'dsm', 'filelog', 'oracle'):
        xs = [math.log(RUNS[w, 'best', s]['run_write_bytes'] / RUNS[w, 'best', s]['sizing']['capacity_bytes']) for w in LB]
        ys = [math.log(DEV[w, 'best', s, pol]['waf']) for w in LB]
        mx, my = sum(xs) / 3, sum(ys) / 3
        sl = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sum((x - mx) ** 2 for x in xs)
        print('    %-6s %-7s slope %+.3f -> the %.0f%% shorter pass at large implies WAF %+.1f%%' % (
            s, pol, sl, 100 * (1 - 7.40 / 8.84), 100 * ((7.40 / 8.84) ** sl - 1)))
print('  (b) device geometry (run.rs pages_per_block; ftl: 2 free units kept, open units half empty on average:')
print('      1 GC + 1 host open unit for none, 1 GC + up to 8 for stream policies); WAF ~ 1/usable spare at most')
for s in SC:
    lp = RUNS['linkbench-mixed', 'best', s]['sizing']['capacity_bytes'] // 4096
    ppb = 256
    while ppb > 16 and lp // ppb < 1024: ppb //= 2
    units = math.ceil(lp * 1.07 / ppb); spare = units - lp / ppb
    print('    %-6s %4d pages/block, %5d units, %6.1f spare units; unusable: none %4.1f%%, 8 streams %4.1f%% of the spare' % (
        s, ppb, units, spare, 300 / spare, 650 / spare))
print('  (c) per-file share of host writes, linkbench-mixed best (collection / secondary / primary / journal):')
for s in SC:
    r = RUNS['linkbench-mixed', 'best', s]; t = r['run_write_bytes']
    print('    %-6s %s' % (s, ' / '.join('%.1f%%' % (100 * r['write_bytes_by_file'].get(k, 0) / t) for k in ('collection', 'secondary index', 'primary index', 'journal'))))
print('  (d) same scale, same workload and seed, two engine versions (streams-medium / streams-large-lbmixed:')
print('      2 client threads, background schedule, 11-24; the study: inline schedule, 1 client), best-fit trace:')
OR, OD = load('streams-medium'); LR, LD = load('streams-large-lbmixed'); OR.update(LR); OD.update(LD)
for tag, runs, dev in (('old', OR, OD), ('new', RUNS, DEV)):
    for s in ('medium', 'large'):
        r = runs['linkbench-mixed', 'best', s]; t = r['run_write_bytes']
        print('    %s %-6s host %.2f pages/op, %.2f caps/pass, %d loops, files/device %.3f, collection %.1f%% secondary %.1f%%;'
              ' WAF none %.2f dsm %.2f file %.2f filelog %.2f oracle %.2f' % (
                  tag, s, hp(r), t / r['sizing']['capacity_bytes'], dev['linkbench-mixed', 'best', s, 'dsm']['run_loops'],
                  r['db_bytes'] / r['sizing']['capacity_bytes'], 100 * r['write_bytes_by_file']['collection'] / t,
                  100 * r['write_bytes_by_file']['secondary index'] / t,
                  *[dev['linkbench-mixed', 'best', s, p]['waf'] for p in ('none', 'dsm', 'file', 'filelog', 'oracle')]))
print('  (e) YCSB for contrast (data per record constant): best trace, medium -> large')
for w in ('ycsb-update-heavy', 'ycsb-update-only'):
    a, b = RUNS[w, 'best', 'medium'], RUNS[w, 'best', 'large']
    print('    %-18s host %+.1f%%, WAF none %+.1f%% dsm %+.1f%% oracle %+.1f%%' % (w, pct(hp(a), hp(b)), *[
        pct(DEV[w, 'best', 'medium', p]['waf'], DEV[w, 'best', 'large', p]['waf']) for p in ('none', 'dsm', 'oracle')]))

print('\n=== Summary (ranges over the three LinkBench workloads) ===')
for (lab, step), v in sorted(CH.items(), key=lambda kv: kv[0][1]):
    rng = lambda i: '%+.0f..%+.0f%%' % (min(x[i] for x in v), max(x[i] for x in v))
    print('  %-5s %-8s flash/op %-11s = host pages/op %-11s x WAF %s' % (step, lab, rng(0), rng(1), rng(2)))
