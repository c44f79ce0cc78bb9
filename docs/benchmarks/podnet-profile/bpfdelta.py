import json,sys
# usage: bpfdelta.py before.json after.json ops
b={p['id']:p for p in json.load(open(sys.argv[1]))}
a={p['id']:p for p in json.load(open(sys.argv[2]))}
ops=float(sys.argv[3])
rows=[]
for i,p in a.items():
    q=b.get(i,{})
    dc=p.get('run_cnt',0)-q.get('run_cnt',0)
    dt=p.get('run_time_ns',0)-q.get('run_time_ns',0)
    if dc>0:
        rows.append((p.get('name'),i,p.get('tag'),dc,dt))
print(f"{'prog':<20}{'id':>7} {'tag':<17}{'run_cnt':>10}{'run_time_ns':>14}{'ns/run':>12}{'runs/op':>9}{'ns/op':>8}")
for n,i,t,dc,dt in sorted(rows,key=lambda r:-r[3]):
    print(f"{n:<20}{i:>7} {t:<17}{dc:>10}{dt:>14}{dt/dc:>12.1f}{dc/ops:>9.2f}{dt/ops:>8.1f}")
