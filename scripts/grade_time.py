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
    lock_timeline(report)


def lock_timeline(report: dict) -> None:
    """The checks past 2^31 bytes, which hold the run's one lock in turn (grader.run.gate.one_at_a_time): each
    one's wait and hold, in the order they got it, and how long the lock was held in all against its span."""
    held = []
    for x in report["exercises"]:
        for t in x.get("tests", []):
            p = t.get("properties") or {}
            if "lock_held_s" in p:
                got = p["lock_asked"] + p["lock_wait_s"]
                held.append((got, got + p["lock_held_s"], p["lock_wait_s"], x["exercise"], t["name"]))
    if not held:
        return
    held.sort()
    start = held[0][0]
    print("\nthe lock of the checks past 2^31 bytes (seconds from its first taker):")
    for got, gone, waited, exercise, name in held:
        print(f"  {got - start:6.1f} - {gone - start:6.1f}  held {gone - got:5.1f}, waited {waited:5.1f}  "
              f"{exercise[:2]} {name[:60]}")
    total = sum(gone - got for got, gone, *_ in held)
    print(f"  held {total:.1f} s in all over a span of {max(g for _, g, *_ in held) - start:.1f} s")


if __name__ == "__main__":
    main()
