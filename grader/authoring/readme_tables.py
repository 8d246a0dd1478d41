"""Each exercise README's points table ("How it is graded"), made from its spec: the groups, in the
spec's order, and their points are grader/specs/exNN_*.py's (`Spec.points`), never a hand copy. The
"what" cell of each group, one phrase of what its checks cover, is kept from the README's own table,
its one home (a group the spec adds gets a placeholder the test refuses; a group it drops goes).

`make exercises` rewrites the table between the markers in solutions/NN/README.md (grader.authoring.stubs calls
`write`) before exercises/ is generated from it; tests/test_readme_tables.py fails when a committed
README's table is not the one its spec makes, or when its performance row's thresholds are not the
spec's `perf_tiers`.

    python -m grader.authoring.readme_tables           rewrite every solutions/ README's table
    python -m grader.authoring.readme_tables --check   list the READMEs whose table differs (exit 1)
"""
from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

from typing import TYPE_CHECKING

from grader import env

if TYPE_CHECKING:  # grader.verify.spec imports torch: only when a table is made (grader.authoring.stubs imports this module)
    from grader.verify.spec import Spec

BEGIN = "<!-- the points table: its groups and points are grader/specs' (make exercises writes them) -->"
END = "<!-- end of the points table -->"
HEADER = ["| group | points | what |", "|---|---:|---|"]
UNDESCRIBED = "(not described yet: say what this group checks)"
ROW = re.compile(r"^\|\s*([A-Za-z0-9_]+)\s*\|\s*([0-9]+)\s*\|\s*(.*?)\s*\|\s*$")


class TableError(ValueError):
    pass


def _section(text: str, readme: Path) -> tuple[int, int]:
    """The start and end offsets of the table's lines: between the markers, or (a README without
    them yet) the first table under "## How it is graded", which the markers will then enclose."""
    if BEGIN in text:
        start = text.index(BEGIN) + len(BEGIN) + 1
        if END not in text[start:]:
            raise TableError(f"{readme}: {BEGIN!r} without {END!r} after it")
        return start, text.index(END, start)
    m = re.search(r"^## How it is graded\n((?:\|.*\n)+)", text, re.M)
    if not m:
        raise TableError(f"{readme}: no points table under '## How it is graded' (and no {BEGIN!r})")
    return m.start(1), m.end(1)


def descriptions(table: str) -> dict[str, str]:
    """group -> its "what" cell, from a points table's lines."""
    return {m.group(1): m.group(3) for line in table.splitlines() if (m := ROW.match(line))}


def table(spec: Spec, described: dict[str, str]) -> str:
    rows = [f"| {group} | {points} | {described.get(group) or UNDESCRIBED} |" for group, points in spec.points.items()]
    return "\n".join([*HEADER, *rows]) + "\n"


def render(text: str, spec: Spec, readme: Path) -> str:
    """The README `text` with its points table made from `spec` (between the markers)."""
    start, end = _section(text, readme)
    made = table(spec, descriptions(text[start:end]))
    if BEGIN in text:
        return text[:start] + made + "\n" + text[end:]
    # a blank line before the end marker: nothing a renderer could read as the table's last row
    return text[:start] + BEGIN + "\n" + made + "\n" + END + "\n" + text[end:]


def readmes(solutions: Path | None = None) -> dict[Path, Spec]:
    """Each solutions/NN_*/README.md and the spec of its exercise."""
    from grader.specs import select

    solutions = solutions or env.REPO / "solutions"
    return {solutions / s.exercise / "README.md": s for s in select([]) if (solutions / s.exercise / "README.md").exists()}


def write(solutions: Path | None = None) -> list[Path]:
    """Rewrite each README's points table from its spec; the READMEs changed."""
    changed = []
    for readme, spec in readmes(solutions).items():
        text = readme.read_text()
        made = render(text, spec, readme)
        if made != text:
            readme.write_text(made)
            changed.append(readme)
    return changed


def check(solutions: Path | None = None) -> list[str]:
    """What is wrong with the committed tables: a README whose table is not its spec's, a group not
    described, a performance row whose thresholds are not the spec's."""
    problems = []
    for readme, spec in readmes(solutions).items():
        text = readme.read_text()
        rel = readme.relative_to(readme.parent.parent.parent)
        try:
            made = render(text, spec, readme)
        except TableError as e:
            problems.append(str(e))
            continue
        if made != text:
            problems.append(f"{rel}: its points table is not {spec.exercise}'s spec's (run `make exercises`)")
        start, end = _section(made, readme)
        described = descriptions(made[start:end])
        problems += [f"{rel}: the group {g!r} is not described" for g, what in described.items() if what == UNDESCRIBED]
        perf = described.get("performance", "")
        if "performance" in spec.points:
            missing = [f"{ratio:g}x" for ratio, _ in spec.perf_tiers if f"{ratio:g}x" not in perf]
            if missing:
                problems.append(f"{rel}: its performance row does not name the spec's thresholds {', '.join(missing)}")
    return problems


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m grader.authoring.readme_tables", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="only list the READMEs whose table differs")
    args = parser.parse_args(argv)
    if args.check:
        problems = check()
        print("\n".join(problems) or "every README's points table is its spec's")
        return 1 if problems else 0
    for readme in write():
        print(f"wrote the points table of {readme.relative_to(env.REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
