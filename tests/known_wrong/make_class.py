"""Generate a class of submissions for trying class grading at scale.

    python -m tests.known_wrong.make_class DIR --students 24 [--ex 01 02]

Student i submits, for each selected exercise, one of: the reference solution, the untouched stub,
or one of that exercise's known-wrong variants (a compile error, a crash, a typical bug, ...),
cycling through them so that every kind appears; the mix is the same every time.
"""
from __future__ import annotations

import argparse
import shutil
from pathlib import Path

from grader.env import REPO
from grader.specs import select
from tests.known_wrong import all_variants

# Variants that hang or sleep make a demo class slow without showing anything new.
SLOW = {"hang_in_checks", "hang", "infinite_loop", "slow_kernel"}


def make_class(root: Path, students: int, exercises: list[str]) -> list[Path]:
    names = [s.exercise for s in select(exercises)]
    variants = {ex: [v for v in all_variants() if v.exercise == ex and v.name not in SLOW] for ex in names}
    made = []
    for i in range(students):
        folder = root / f"student{i + 1:03d}" / "exercises"
        folder.mkdir(parents=True, exist_ok=True)
        for j, ex in enumerate(names):
            choices = ["solution", "stub", *variants[ex]]
            pick = choices[(i + j) % len(choices)]
            if pick == "solution":
                shutil.copytree(REPO / "solutions" / ex, folder / ex, ignore=shutil.ignore_patterns("__pycache__"))
            elif pick == "stub":
                shutil.copytree(REPO / "exercises" / ex, folder / ex, ignore=shutil.ignore_patterns("__pycache__"))
            else:
                pick.materialize(folder)
        made.append(folder.parent)
    return made


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("root", type=Path)
    parser.add_argument("--students", type=int, default=20)
    parser.add_argument("--ex", nargs="*", default=["01", "02"])
    args = parser.parse_args(argv)
    if args.root.exists() and any(args.root.iterdir()):
        raise SystemExit(f"{args.root} is not empty")
    made = make_class(args.root, args.students, args.ex)
    print(f"wrote {len(made)} submissions under {args.root}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
