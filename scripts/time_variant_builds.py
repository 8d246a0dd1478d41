"""Time the build phase of the known-wrong suite: each variant in a folder of its own, built from
scratch (the suite's way before the slots), against the reusable slots of tests/grading.py.

    python scripts/time_variant_builds.py [--ex 01 03] [--ways copies,slots,slots]

`copies`: every variant copied whole into a temporary folder, all built by build_all (JOBS at a time);
their build folders are removed afterwards. `slots`: grade_in_slots with a grading that does nothing,
so only its writes and builds are timed; run twice, the second run starts from the slots the first
left (as a second run of the suite in one machine's lease does). The GPU variants of the exercises
chosen (those test_gpu_grading.py grades without timing), as the suite picks them.
"""
from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from grader.run.grading import build_all  # noqa: E402
from grader.toolchain import build  # noqa: E402
from tests import grading  # noqa: E402
from tests.known_wrong import all_variants  # noqa: E402


def gpu_variants(exercises: list[str]) -> list:
    return [v for v in all_variants() if v.exercise[:2] in exercises and not v.extra.get("cpu")
            and not v.extra.get("timed") and not v.extra.get("huge")]


def copies(variants) -> tuple[float, int]:
    with tempfile.TemporaryDirectory(prefix="variant-copies-") as tmp:
        dirs = [v.materialize(Path(tmp) / v.name / "x") for v in variants]
        start = time.perf_counter()
        results = build_all(dirs, grading.JOBS, log=grading.quiet)
        took = time.perf_counter() - start
        for d in dirs:
            shutil.rmtree(build.build_dir_for(d).parent, ignore_errors=True)
    return took, sum(1 for r in results.values() if not r["ok"])


def slots(variants) -> tuple[float, int]:
    failed = []

    def one(v, target):
        hit = build.cached(target / v.exercise)
        failed.extend([v.id] if hit is None else [])
        return {}

    start = time.perf_counter()
    grading.grade_in_slots(variants, one)
    return time.perf_counter() - start, len(failed)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ex", nargs="*", default=["01", "03"])
    parser.add_argument("--ways", default="copies,slots,slots")
    args = parser.parse_args()
    for x in args.ex:
        variants = gpu_variants([x])
        for way in args.ways.split(","):
            took, failed = {"copies": copies, "slots": slots}[way](variants)
            print(f"{x}: {len(variants)} variants, {way:6s} {took:7.1f} s ({failed} not built); "
                  f"JOBS {grading.JOBS}, slots {sum(len(fs) for fs, _ in grading.slot_plan(variants))}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
