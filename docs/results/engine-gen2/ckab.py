import json
import sys
txt=open(sys.argv[1] if len(sys.argv) > 1 else '/tmp/bench/ckab.jsonl').read(); dec=json.JSONDecoder(); i=0
while i<len(txt):
    while i<len(txt) and txt[i].isspace(): i+=1
    if i>=len(txt): break
    o,i=dec.raw_decode(txt,i)
    r=o['result']['results']; tw=r['throughput_windows']; w=tw['windows_ops_per_s']; med=tw['median_window_ops_per_s']
    ck=[round(min(w[int(c['start_s']):int(c['end_s'])+1])/med,2) for c in tw['checkpoints']]
    print(o['binary'],o['pair'],round(r['ops_per_s']),'p99',r['overall']['p99_us'],'p99.9',r['overall']['p99_9_us'],'worst/median',round(tw['worst_over_median'],2),'ckpt windows',ck,'ckpt s',[round(c['end_s']-c['start_s'],2) for c in tw['checkpoints']])
