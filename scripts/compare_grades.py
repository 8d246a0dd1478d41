"""Two grading reports side by side: points and measured speed per exercise, e.g. a run graded
several exercises at once against one graded one after another (`make grade PARALLEL=1`).

    python3 scripts/compare_grades.py grade-report/parallel.json grade-report/serial.json
"""
from __future__ import annotations

import json
import sys


def main(a_path: str, b_path: str) -> int:
    a, b = (json.load(open(p)) for p in (a_path, b_path))
    rows_b = {r["exercise"]: r for r in b["exercises"]}
    print(f"A: {a_path} (seed {a['seed']})\nB: {b_path} (seed {b['seed']})")
    print(f"{'exercise':34s} {'points A':>9s} {'points B':>9s} {'rate A/B':>9s} {'PyTorch A/B':>12s} "
          f"{'ratio A':>8s} {'ratio B':>8s}")
    for ra in a["exercises"]:
        rb = rows_b.get(ra["exercise"])
        if rb is None:
            continue
        pa, pb = ra.get("performance") or {}, rb.get("performance") or {}
        speed, base = (f"{pa[k] / pb[k]:.3f}" if pa.get(k) and pb.get(k) else "-" for k in ("rate", "baseline_rate"))
        ratio = [f"{p['ratio']:.2f}x" if "ratio" in p else "-" for p in (pa, pb)]
        print(f"{ra['exercise']:34s} {ra['points']:9g} {rb['points']:9g} {speed:>9s} {base:>12s} "
              f"{ratio[0]:>8s} {ratio[1]:>8s}")
    return 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
