"""Mutants of the solutions' registered fakes, each held to PyTorch on the CPU (no GPU): every mutant
(grader.run.mutants) on a line of a `register_fake` function or of a helper only fakes call, a seeded
sample per exercise, each written to a slot and checked by tests/test_fakes.py's check (valid calls
accepted with PyTorch's shapes, every refusal probe PyTorch refuses refused). Prints each mutant killed
or survived. A survivor is a fake the CPU cannot tell apart: an exercise's own limit, a fake refusing
what its op computes (only the GPU grade, which runs the op, sees that), or a hole.

    python scripts/fake_mutants.py                 12 per exercise (seed 7)
    python scripts/fake_mutants.py --per 4 --ex 09
    python scripts/fake_mutants.py ID [ID ...]     these mutants
"""
from __future__ import annotations

import argparse
import ast
import random
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from anywhere

from grader import env  # noqa: E402

env.configure()

from grader import specs  # noqa: E402
from grader.run import mutants as M  # noqa: E402
from grader.toolchain.build import write_slot  # noqa: E402


def fake_lines(path: Path) -> list[tuple[int, int]]:
    """The line ranges of a module's register_fake functions and of the helpers only they call."""
    tree = ast.parse(path.read_text())
    funcs = {n.name: n for n in ast.walk(tree) if isinstance(n, ast.FunctionDef)}
    only = {n for n, f in funcs.items() if any("register_fake" in ast.unparse(d) for d in f.decorator_list)}
    callers: dict[str, set[str]] = {}
    for name, f in funcs.items():
        for n in ast.walk(f):
            if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in funcs:
                callers.setdefault(n.func.id, set()).add(name)
    grew = True
    while grew:
        grew = False
        for helper, by in callers.items():
            if helper not in only and by <= only:
                only.add(helper)
                grew = True
    return [(funcs[n].lineno, funcs[n].end_lineno) for n in only]


def fake_mutants(folder: Path) -> list:
    ranges = {p.name: fake_lines(p) for p in folder.glob("*.py")}
    return [m for m in M.exercise_mutants(folder)
            if any(a <= m.line <= b for a, b in ranges.get(m.file, ()))]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("ids", nargs="*")
    parser.add_argument("--per", type=int, default=12, help="mutants sampled per exercise")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--ex", action="append", default=[])
    args = parser.parse_args(argv)
    import tests.test_fakes as check

    folders = [f for f in sorted(M.SOLUTIONS.iterdir()) if f.is_dir() and f.name[:2].isdigit()
               and (not args.ex or f.name[:2] in args.ex)]
    chosen = []
    rng = random.Random(args.seed)
    for folder in folders:
        ms = fake_mutants(folder)
        chosen += [(folder, m) for m in (ms if args.ids else rng.sample(ms, min(args.per, len(ms))))
                   if not args.ids or m.id in args.ids]
    killed = 0
    for folder, m in chosen:
        spec = specs.by_exercise(folder.name)
        slot = Path(tempfile.mkdtemp(prefix="fake-mutant-")) / folder.name
        write_slot(slot, folder, m.texts())
        check.SOLUTIONS = slot.parent
        try:
            check.test_the_registered_fakes_accept_valid_calls_and_refuse_what_pytorch_refuses(spec)
            print(f"survived {m.id}\n    {m.diff.replace(chr(10), chr(10) + '    ')}", flush=True)
        except AssertionError as e:
            killed += 1
            lines = str(e).splitlines()
            print(f"killed   {m.id}: {(lines[1] if len(lines) > 1 else lines[0])[:200]}", flush=True)
    print(f"{killed} of {len(chosen)} killed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
