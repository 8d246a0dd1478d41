"""The float64 work of a grade (counted by grader.verify.fp64), and what it would cost on a T4.

    COURSE_COUNT_FP64='/tmp/fp64/{exercise}.json' make grade TARGET=solutions
    python scripts/fp64_estimate.py /tmp/fp64

A T4 runs float64 at 1/32 of float32: about 0.25 TFLOP/s (8.1 TFLOP/s fp32), and moves about
300 GB/s. Products and convolutions are costed at that rate; every other float64 operator as one
read and one write of 8-byte elements at that bandwidth (a lower bound: exp and the like cost more).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

T4_FP64_FLOPS = 0.25e12
T4_BYTES_PER_S = 300e9


def main() -> int:
    folder = Path(sys.argv[1])
    counts = sorted(folder.glob("*.json"))
    if not counts:  # an estimate of nothing would read as "no float64 work"
        print(f"no counts in {folder}: was the grade run with COURSE_COUNT_FP64 set?", file=sys.stderr)
        return 1
    total = 0.0
    print(f"{'exercise':28s} {'fp64 GFLOP':>11s} {'fp64 G elements':>16s} {'T4 estimate':>12s}")
    for path in counts:
        data = json.loads(path.read_text())
        seconds = data["flops"] / T4_FP64_FLOPS + 16 * data["elements"] / T4_BYTES_PER_S
        total += seconds
        print(f"{path.stem:28s} {data['flops'] / 1e9:11.1f} {data['elements'] / 1e9:16.2f} {seconds:11.1f}s")
    print(f"{'all':28s} {'':11s} {'':16s} {total:11.1f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
