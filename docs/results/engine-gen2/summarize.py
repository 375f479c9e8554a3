import json,statistics as st,sys
txt=open(sys.argv[1] if len(sys.argv)>1 else '/tmp/bench-matrix.jsonl').read()
dec=json.JSONDecoder(); i=0; rows=[]
while i<len(txt):
    while i<len(txt) and txt[i].isspace(): i+=1
    if i>=len(txt) or txt.startswith('done',i): break
    o,j=dec.raw_decode(txt,i); rows.append(o); i=j
cells={}
for r in rows: cells.setdefault((r['cache_mb'],r['leaf_kb'],r['read_pct']),[]).append(r)
for k,rs in cells.items():
    wt=[r['result'] for r in rs if r['engine']=='wiredtiger']; fd=[r['result'] for r in rs if r['engine']=='flashdoc']
    if not wt or not fd: continue
    w=[x['run_ops_s'] for x in wt]; f=[x['results']['ops_per_s'] for x in fd]
    wp=[x['p99_us'] for x in wt]; fp=[x['results']['overall']['p99_us'] for x in fd]
    wl=[x['load_ops_s'] for x in wt]; fl=[x['results']['load_docs_per_s'] for x in fd]
    w9=[x.get('p99_9_us') for x in wt]; f9=[x['results']['overall'].get('p99_9_us') for x in fd]
    fw=[x['results'].get('throughput_windows',{}).get('worst_over_median') for x in fd]
    extra=''
    if all(v is not None for v in w9+f9): extra+=f" | p99.9 WT {[round(x) for x in w9]} FD {[round(x) for x in f9]}"
    if all(v is not None for v in fw): extra+=f" | FD worst/median 1 s window {[round(x,2) for x in fw]}"
    print(f"cache {k[0]} MB leaf {k[1]} KB read {k[2]}%: WT {[round(x) for x in w]} med {round(st.median(w))} p99 {[round(x) for x in wp]} | FD {[round(x) for x in f]} med {round(st.median(f))} p99 {[round(x) for x in fp]} | run ratio {st.median(f)/st.median(w):.2f} pairs {[round(a/b,2) for a,b in zip(f,w)]} | p99 med WT {st.median(wp):.0f} FD {st.median(fp):.0f} | load WT {round(st.median(wl))} FD {round(st.median(fl))} ratio {st.median(fl)/st.median(wl):.2f}{extra}")
