"""Grade known-wrong variants with an earlier grader, to show what that grader let through.

    python scripts/old_grader_on_variants.py OLD_TREE [--out DIR] [--rounds 0-3]

OLD_TREE holds an earlier commit's grader/, solutions/ and tests/ (e.g. `git archive 8247f27 grader
solutions tests | tar -x -C OLD_TREE`). The variants are today's (tests/known_wrong, those with a
"kind": the trust rework's), materialized from today's solutions, graded in full (timing included)
by the earlier grader, a round of at most one variant per exercise at a time. Prints each variant's
points under that grader and the groups it lost, beside the groups today's grader must take.
"""
from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from grader.run.grading import rounds  # noqa: E402
from tests.known_wrong import all_variants  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("old_tree", type=Path)
    parser.add_argument("--out", type=Path, default=Path(tempfile.gettempdir()) / "old-grader-variants")
    parser.add_argument("--seed", type=int, default=5)
    parser.add_argument("--rounds", default="", help="only these rounds, e.g. 0-3 (each is a cold build and a full grade)")
    args = parser.parse_args()
    variants = [v for v in all_variants() if v.extra.get("kind")]
    env = dict(os.environ, PYTHONPATH=str(args.old_tree.resolve()), COURSE_BUILD_DIR=str(args.out / "build"))
    lines = []
    first, _, last = args.rounds.partition("-")
    wanted = range(int(first), int(last or first) + 1) if args.rounds else None
    for i, batch in enumerate(rounds(variants, lambda v: v.exercise)):
        if wanted is not None and i not in wanted:
            continue
        folder = args.out / f"round{i}"
        for v in batch:
            if not (folder / v.exercise).exists():
                v.materialize(folder)
        report = args.out / f"round{i}.json"
        cmd = [sys.executable, "-m", "grader", "--target", str(folder), "--seed", str(args.seed), "--json", str(report),
               "--out", str(args.out / f"report{i}"), "--ex", *[v.exercise for v in batch]]
        subprocess.run(cmd, cwd=args.old_tree, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.STDOUT)
        rows = {r["exercise"]: r for r in json.loads(report.read_text())["exercises"]} if report.exists() else {}
        for v in batch:
            row = rows.get(v.exercise)
            if row is None:
                lines.append(f"{v.id:55s} no result")
                continue
            lost = sorted(g for g, info in row["groups"].items() if info["points"] < info["max"])
            lines.append(f"{v.id:55s} {row['points']:5g}/{row['max_points']:<3d} {row['status']:10s} "
                         f"lost {', '.join(lost) or '-'}   (today: {', '.join(sorted(v.loses))})")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
