"""Where a grade's check time goes, from its report (grade-report/report.json, per-test wall and CPU seconds).

    python scripts/grade_time.py [grade-report/report.json] [--top 25]

Per exercise: its checks' wall seconds, the CPU seconds its grading processes spent over them (all threads),
and their ratio; then the same by kind of check over all exercises (a generated property's bracketed kind,
else the check's name up to its first bracket). CPU near wall: the checks compute on the host (Python, float64
references on the CPU); CPU far below wall: they wait, on the GPU's other processes or on their own kernels."""
from __future__ import annotations

import argparse
import json
import re
from collections import defaultdict


def kind(name: str) -> str:
    m = re.search(r"\[([^\]]*)\]$", name)
    if m and not re.match(r"^[\w.=-]+$", m.group(1)):  # a property's kind, not a dtype or a size
        return m.group(1)
    return name.split("[")[0]


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("report", nargs="?", default="grade-report/report.json")
    ap.add_argument("--top", type=int, default=25)
    args = ap.parse_args(argv)
    report = json.load(open(args.report))
    wall, cpu, count = defaultdict(float), defaultdict(float), defaultdict(int)
    print(f"{'exercise':27s} {'checks':>6s} {'wall s':>8s} {'CPU s':>8s} {'CPU/wall':>8s}")
    for x in report["exercises"]:
        tests = [t for t in x.get("tests", []) if t["name"] != "performance" and t.get("seconds") is not None]
        w = sum(t["seconds"] for t in tests)
        c = sum(t.get("cpu_seconds") or 0.0 for t in tests)
        print(f"{x['exercise']:27s} {len(tests):6d} {w:8.1f} {c:8.1f} {c / w if w else 0:8.2f}")
        for t in tests:
            k = kind(t["name"])
            wall[k] += t["seconds"]
            cpu[k] += t.get("cpu_seconds") or 0.0
            count[k] += 1
    print(f"\nby kind of check, the {args.top} longest (all exercises):")
    for k in sorted(wall, key=lambda k: -wall[k])[:args.top]:
        print(f"  {wall[k]:7.1f} s wall {cpu[k]:7.1f} s CPU {count[k]:5d} checks  {k[:80]}")


if __name__ == "__main__":
    main()
