#!/usr/bin/env python3
"""Aggregate grouped perf shares over repeated profiles.
usage: agg.py CASE=rep1.report.txt:rate,rep2.report.txt:rate ... 
Per group and case: share % (min–max) and ns/op (min–max)."""
import sys, importlib.util
spec = importlib.util.spec_from_file_location("g", __import__("os").path.join(__import__("os").path.dirname(__file__), "group.py")); g = importlib.util.module_from_spec(spec); spec.loader.exec_module(g)
cases = []
for a in sys.argv[1:]:
    name, rest = a.split("=", 1)
    reps = []
    for r in rest.split(","):
        path, rate = r.rsplit(":", 1)
        reps.append((g.grouped(g.load(path)), float(rate)))
    cases.append((name, reps))
names = [n for n, _ in g.GROUPS] + ["other"]
def fmt(vals, f):
    lo, hi, mean = min(vals), max(vals), sum(vals) / len(vals)
    return f"{f(mean)} [{f(lo)}–{f(hi)}]" if len(vals) > 1 else f(mean)
print("| group | " + " | ".join(f"{c} share" for c, _ in cases) + " | " + " | ".join(f"{c} ns/op" for c, _ in cases) + " |")
print("|---|" + "---:|" * (2 * len(cases)))
for n in names + ["total"]:
    row = []
    for c, reps in cases:
        row.append(fmt([(sum(gr.values()) if n == "total" else gr[n]) for gr, _ in reps], lambda v: f"{v:.1f}%"))
    for c, reps in cases:
        row.append(fmt([(sum(gr.values()) if n == "total" else gr[n]) / 100 * 1e9 / rate for gr, rate in reps], lambda v: f"{v:.0f}"))
    print(f"| {n} | " + " | ".join(row) + " |")
print("| rate under perf (/s) | " + " | ".join(fmt([r for _, r in reps], lambda v: f"{v:.0f}") for c, reps in cases) + " |" + " |" * len(cases))
