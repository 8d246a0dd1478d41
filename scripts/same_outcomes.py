"""Whether two gradebooks agree on the students they share: every exercise's status and every group's
state but speed (grader.classroom.gradebook.outcomes). For a class graded concurrently against the same
students graded one at a time: `python scripts/same_outcomes.py A/gradebook.json B/gradebook.json`."""
from __future__ import annotations

import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from grader.classroom.gradebook import outcomes  # noqa: E402
from grader.verify.outcomes import rows_from_json  # noqa: E402


def main(first: str, second: str) -> int:
    a, b = (outcomes({s: rows_from_json(rows) for s, rows in json.loads(Path(p).read_text())["students"].items()})
            for p in (first, second))
    shared = sorted(a.keys() & b.keys())
    differ = [key for key in shared if a[key] != b[key]]
    for key in differ:
        print(f"  {key[0]} {key[1]}: {a[key]} vs {b[key]}")
    print(f"same outcomes: {len(shared) - len(differ)} of {len(shared)} student-exercises"
          + ("" if differ else " (all)"))
    return 1 if differ or not shared else 0


if __name__ == "__main__":
    sys.exit(main(*sys.argv[1:3]))
