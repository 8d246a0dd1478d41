"""`python -m grader`: build every exercise of a target in parallel, grade each in its own
time-limited process (several at once, each timing alone on the GPU), and print the score table.

    python -m grader                          grade exercises/
    python -m grader --target solutions       grade the reference
    python -m grader --target DIR --ex 01     one exercise of any folder laid out like exercises/
"""
from __future__ import annotations

import argparse
import os
import secrets
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from grader import env
from grader.run.grading import PARALLEL_DEFAULT, find_sanitizer, grade_target, resolve_target, resource_reports
from grader.run.options import DEFAULT_STALL, DEFAULT_TIMEOUT, GradeOptions
from grader.run.report import markdown, no_gpu_summary, resources_text, table
from grader.verify.outcomes import rows_to_json
from grader.verify.results import write_json_atomic
from grader.specs import SPEC_ERRORS, Selection


class UsageParser(argparse.ArgumentParser):
    """argparse, with a wrong usage said in one line on stderr (exit status 2), not the whole usage
    block: `python -m grader: unrecognized arguments: --frob (python -m grader --help lists the options)`."""

    def error(self, message: str):
        self.exit(2, f"{self.prog}: {message} ({self.prog} --help lists the options)\n")


# Builds at once in a grade of one target: half the cores, at most 8 (a class's grade builds half the cores'
# count). A stub or a small exercise compiles two units, so four builds at a time on 16 cores left most of
# them idle: the ten stubs' builds ended 40 s after the grade began (H200, 2026-12-02), the last two waiting
# for a slot. Eight at a time, the whole stub grade took 31 s, builds included (the same H200 and day).
MAX_BUILD_JOBS = 8


def exercise_names(values: list[str]) -> list[str]:
    """EX="04 09 10" (several arguments) or EX=04,09,10 (one, commas): the names, in order."""
    return [name for value in values for name in value.replace(",", " ").split()]


def main(argv: list[str] | None = None) -> int:
    parser = UsageParser(prog="python -m grader", description=__doc__,
                         formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--target", default="exercises", help="exercises (default), solutions, or a folder")
    parser.add_argument("--ex", nargs="*", default=[],
                        help="exercise numbers or names, separated by spaces or commas (default: all)")
    parser.add_argument("--seed", type=int, default=None, help="replay a run's random inputs")
    parser.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, help="seconds per exercise")
    parser.add_argument("--stall", type=float, default=DEFAULT_STALL,
                        help="seconds of an exercise's grading with no check starting or ending: stopped as hanging")
    parser.add_argument("--jobs", type=int, default=env.default_build_jobs(MAX_BUILD_JOBS),
                        help="builds at once (default: half the cores, at most 8)")
    parser.add_argument("--parallel", type=int, default=None,
                        help="exercises whose checks run at once (each timing still runs alone on the GPU); "
                             f"1 grades one after another. Default: {PARALLEL_DEFAULT}")
    parser.add_argument("-k", dest="keyword", help="only the checks matching this pytest -k expression")
    parser.add_argument("--quick", action="store_true",
                        help="the fast edit-grade loop: skip the slow checks and the timing (not a full grade)")
    parser.add_argument("--sanitize", action="store_true",
                        help="run the correctness checks under compute-sanitizer memcheck (no timing; slow)")
    parser.add_argument("--racecheck", action="store_true",
                        help="run every op's small calls (and the checks named racecheck) under compute-sanitizer "
                             "racecheck: shared-memory races between threads (no timing; minutes)")
    parser.add_argument("--strict", action="store_true",
                        help="a check this GPU cannot run (too little memory) costs its group, instead of nothing")
    parser.add_argument("--verbose", action="store_true",
                        help="every exercise's full resource report and the compiler's warnings about its files")
    parser.add_argument("--json", type=Path, help="write the full report as JSON here")
    parser.add_argument("--out", type=Path, default=env.REPO / "grade-report", help="folder for report.json and report.md")
    args = parser.parse_args(argv)

    env.configure()
    # by name now; the specs (each imports torch: seconds) import in the background, beside the builds
    chosen = Selection.start(exercise_names(args.ex))
    target = resolve_target(args.target)
    seed = args.seed if args.seed is not None else secrets.randbelow(2**31)
    gpu = env.gpu_present()
    device = ThreadPoolExecutor(max_workers=1).submit(env.device_name)  # nvidia-smi, beside the grading
    print(f"grading {target} (seed {seed}; replay with SEED={seed})")
    if not gpu:
        print("no CUDA GPU here: everything is compiled and the checks that run on the CPU run; the GPU checks are not run")
    # what a run leaves out on purpose: said once here, and as "not graded here (why)" per exercise
    left_out = []
    if args.quick:
        left_out.append("QUICK=1 skips the timing and the slow checks")
        print("quick mode: the timing and the slow checks (which kernels ran, gradcheck, opcheck, the largest "
              "inputs) are not run, so this is not a full grade")
    if args.sanitize and args.racecheck:
        parser.error("--sanitize and --racecheck each run the grade under compute-sanitizer: give one")
    if args.sanitize:
        left_out.append("SANITIZE=1 runs no timing and no slow checks")
        print(f"sanitize mode: the correctness checks run under {find_sanitizer()} memcheck; no timing")
    if args.racecheck:
        left_out.append("RACECHECK=1 runs only each op's small calls and the racecheck cases, no timing")
        print(f"racecheck mode: each op's small calls and the racecheck cases run under {find_sanitizer()} racecheck; "
              "no timing, and the groups' other checks are not run")
    if args.keyword:
        left_out.append(f"K={args.keyword!r} selected none of its checks")
    not_run_why = "; ".join(left_out) or None
    parallel = None if args.parallel is None else max(1, args.parallel)  # 0 or less: one after another, as 1
    options = GradeOptions.from_args(args, seed=seed, parallel=parallel)  # the one value every step below is given
    rows = grade_target(target, chosen, options)
    for name, error in SPEC_ERRORS.items():
        print(f"warning: the grading spec grader/specs/{name}.py failed to load ({error}); that exercise is not graded")
    resource_reports(target, rows, env.device_cc())
    header = {"target": str(target), "seed": seed, "device": device.result(), "gpu": gpu,
              "date": time.strftime("%Y-%m-%d %H:%M:%S"), "mode": "; ".join(left_out), "not_run_why": not_run_why}
    print()
    print(table(rows, not_run_why=not_run_why) if gpu else no_gpu_summary(rows))
    full = args.verbose or len(rows) == 1
    texts = [resources_text(r.exercise, r.resources, verbose=args.verbose, full=full, build=r.build)
             for r in rows]
    if any(texts):
        print()
        print("\n\n".join(t for t in texts if t) if full else "\n".join(t for t in texts if t))
        if not full:
            print("(each kernel's registers, spills, shared memory and occupancy: EX=NN or VERBOSE=1, "
                  f"and {args.out / 'report.md'})")
    report = {**header, "exercises": rows_to_json(rows)}
    write_json_atomic(args.out / "report.json", report)
    (args.out / "report.md").write_text(markdown(rows, header))
    if args.json:
        write_json_atomic(args.json, report)
    print(f"report: {args.out / 'report.md'}")
    failed = any(
        not r.graded or any(g.state == "failed" for g in r.groups.values()) for r in rows
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
