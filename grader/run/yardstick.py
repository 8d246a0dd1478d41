"""The yardstick: the reference solution's speed, PyTorch's and the device's limit, timed in a
process that never imports submitted code.

A submission's Python and C++ run in its own grading process and could slow anything else timed
there (re-register the reference's op, patch PyTorch's baseline, occupy the copy that measures the
limit), which would flatter its ratio. So those are measured here, by the grader's own code and the
reference solution only, in the same run and on the same GPU, with the same harness and the same
freshly refilled inputs (grader.verify.speed.measure_yardstick); the parent scores the submission's
raw timing against these numbers (grader.verify.scoring). Class grading measures them once per worker and
reuses them for every student.

    python -m grader.run.yardstick --out FILE EXERCISE[=REFERENCE_DIR] ...

Run by the grader as one of its gated jobs (grader.run.gate), one process for all exercises of a run (one
CUDA context): it waits for the references' builds, loads them, and waits for its turn alone on the GPU,
whose go may name the exercises to time (a JSON list: those whose own timing ran). An exercise
without a reference (a student release) is measured against PyTorch's rate times the solution's
recorded ratio.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from grader import env

env.configure()


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m grader.run.yardstick", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("exercises", nargs="+", help="EXERCISE or EXERCISE=REFERENCE_DIR")
    parser.add_argument("--out", type=Path, required=True)
    args = parser.parse_args(argv)

    import torch

    from grader.run import gate
    from grader.verify.speed import measure_yardstick
    from grader.verify.results import write_json_atomic
    from grader.specs import by_exercise, import_exercise_module

    wanted = dict((item.split("=", 1) + [""])[:2] for item in args.exercises)
    built = gate.wait_for_build()
    found: dict[str, dict] = {}
    if not torch.cuda.is_available():
        write_json_atomic(args.out, {e: {"error": "no CUDA GPU"} for e in wanted})
        return 0
    torch.empty(1, device="cuda")
    # before the go (the yardstick of a grade starts beside the grading processes' checks): the profiler's
    # first use, each spec and each reference's library, so that the turn holds the timings alone
    from grader.verify.observe import WATCH

    WATCH.start()
    loaded: dict[str, tuple] = {}
    for exercise, reference_dir in wanted.items():
        try:
            spec = by_exercise(exercise)
            reference = None
            if reference_dir and built.get(exercise, {}).get("ok", True):
                reference = import_exercise_module(Path(reference_dir), spec)
            loaded[exercise] = (spec, reference)
        except Exception as e:  # noqa: BLE001: one exercise's failure must not cost the others' numbers
            found[exercise] = {"error": f"{type(e).__name__}: {str(e)[:300]}"}
    told = gate.wait_for_gpu()
    if told:  # the parent's list: the exercises whose timing ran (a stub's never does)
        wanted = {e: r for e, r in wanted.items() if e in json.loads(told)}
        found = {e: v for e, v in found.items() if e in wanted}
    for exercise in wanted:
        if exercise not in loaded:
            continue
        start = time.perf_counter()
        try:
            spec, reference = loaded[exercise]
            with spec.math():
                found[exercise] = {**measure_yardstick(spec, reference), "device": torch.cuda.get_device_name(),
                                   "seconds": round(time.perf_counter() - start, 2)}
        except Exception as e:  # noqa: BLE001: one exercise's failure must not cost the others' numbers
            found[exercise] = {"error": f"{type(e).__name__}: {str(e)[:300]}"}
        write_json_atomic(args.out, found)
    write_json_atomic(args.out, found)  # an exercise that failed to load, or none to time
    return 0


if __name__ == "__main__":
    sys.exit(main())
