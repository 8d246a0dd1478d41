"""Generate the student tree exercises/ from solutions/, the single source of truth.

In every source file, each region

    // BEGIN SOLUTION            (or `# BEGIN SOLUTION` in Python)
    // TODO: what to write ...   comment lines at the top: the task, kept in the stub
    // STUB: code                optional: code the stub gets instead (a host-side loud failure)
    ... reference code ...
    // END SOLUTION

keeps its markers and TODO lines, gains a line giving the reference's size, and loses its code.
A Python region with no STUB line gets `raise NotImplementedError(...)`. Nested, unterminated and
stray END markers are errors. Files without regions are copied unchanged.

    python -m grader.stubs                write exercises/
    python -m grader.stubs --ex 03 04     rewrite only those exercise folders
    python -m grader.stubs --check        exit 1 if exercises/ differs from what would be written
"""
from __future__ import annotations

import argparse
import filecmp
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from grader import regions
from grader.env import REPO
from grader.regions import COMMENT, RegionError

SOLUTIONS = REPO / "solutions"
EXERCISES = REPO / "exercises"

GENERATED_NOTE = "GENERATED from solutions/{rel} by `make exercises`: edit only inside the BEGIN/END SOLUTION regions."
SKIP = {"__pycache__", ".ipynb_checkpoints"}


def stub_text(text: str, suffix: str, where: str) -> str:
    """The student version of one source file's text."""
    prefix = COMMENT[suffix]
    lines = text.splitlines(keepends=True)
    out: list[str] = []
    last = 0
    for begin, end in regions.spans(lines, prefix, where):
        out += lines[last : begin + 1]
        out += _stub_region(lines[begin + 1 : end], prefix, regions.indent_of(lines[begin]), where, begin + 1)
        last = end
    out += lines[last:]
    return "".join(out)


def _is_code(line: str, prefix: str) -> bool:
    s = line.strip()
    return bool(s) and not s.startswith(prefix)


def _stub_region(lines: list[str], prefix: str, indent: str, where: str, begin_line: int) -> list[str]:
    todo, stub = [], []
    for line in lines:
        s = line.strip()
        if s.startswith(f"{prefix} TODO"):
            todo.append(line)
        elif s.startswith(f"{prefix} STUB:"):
            stub.append(indent + s[len(prefix) + len(" STUB:") :].strip() + "\n")
    if not todo:
        raise RegionError(f"{where}:{begin_line}: a solution region needs a `{prefix} TODO: ...` line saying what to write")
    size = sum(_is_code(l, prefix) for l in lines)
    todo.append(f"{indent}{prefix} TODO: (the reference solution takes about {size} line{'s' if size != 1 else ''})\n")
    if not stub and prefix == "#":
        stub = [f'{indent}raise NotImplementedError("{where}: line {begin_line} is not implemented yet")\n']
    return todo + stub


def _header(suffix: str, rel: str) -> str:
    note = GENERATED_NOTE.format(rel=rel)
    if suffix == ".md":
        return f"<!-- {note} -->\n"
    return f"{COMMENT[suffix]} {note}\n"


def generate(solutions: Path = SOLUTIONS, out: Path = EXERCISES) -> list[Path]:
    """Write the student tree for every solutions/NN_* folder into `out`; return the files written."""
    written = []
    for src in sorted(solutions.rglob("*")):
        rel = src.relative_to(solutions)
        if src.is_dir() or SKIP.intersection(rel.parts) or src.suffix == ".pyc":
            continue
        dst = out / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        if src.suffix in COMMENT or src.suffix == ".md":
            text = src.read_text()
            if src.suffix in COMMENT:
                text = stub_text(text, src.suffix, f"{out.name}/{rel}")
            header = _header(src.suffix, rel.as_posix())
            dst.write_text(header + text)
        else:
            shutil.copy2(src, dst)
        written.append(dst)
    return written


def differences(expected_root: Path, actual_root: Path) -> list[str]:
    """Files that are missing, extra or different between two trees."""
    problems = []
    expected = {p.relative_to(expected_root) for p in expected_root.rglob("*") if p.is_file()}
    actual = {
        p.relative_to(actual_root)
        for p in actual_root.rglob("*")
        if p.is_file() and not SKIP.intersection(p.relative_to(actual_root).parts) and p.suffix != ".pyc"
    }
    problems += [f"missing: exercises/{p}" for p in sorted(expected - actual)]
    problems += [f"not generated from solutions/: exercises/{p}" for p in sorted(actual - expected)]
    problems += [
        f"differs from its generated version: exercises/{p}"
        for p in sorted(expected & actual)
        if not filecmp.cmp(expected_root / p, actual_root / p, shallow=False)
    ]
    return problems


def check() -> list[str]:
    with tempfile.TemporaryDirectory() as tmp:
        generated = Path(tmp) / "exercises"
        generate(SOLUTIONS, generated)
        return differences(generated, EXERCISES)


def _student_edits() -> list[str]:
    """Uncommitted changes under exercises/ (a student's work), which regeneration would destroy."""
    try:
        out = subprocess.run(["git", "status", "--porcelain", "--", "exercises"], cwd=REPO, capture_output=True, text=True)
    except OSError:
        return []
    return [l for l in out.stdout.splitlines() if l.strip()] if out.returncode == 0 else []


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="only report differences")
    parser.add_argument("--force", action="store_true", help="overwrite uncommitted changes in exercises/")
    parser.add_argument("--ex", nargs="*", default=[], help="only these exercise folders (numbers or names)")
    args = parser.parse_args(argv)
    if args.check:
        problems = check()
        for p in problems:
            print(p)
        print("exercises/ is in sync with solutions/" if not problems else "run `make exercises` to regenerate")
        return 1 if problems else 0
    if args.ex:
        return _regenerate_some(args.ex)
    edits = _student_edits()
    if edits and not args.force:
        print("exercises/ has uncommitted changes; regenerating would overwrite them:", *edits, sep="\n  ")
        print("commit or stash them, or run `make exercises FORCE=1`")
        return 1
    with tempfile.TemporaryDirectory() as tmp:
        generated = Path(tmp) / "exercises"
        generate(SOLUTIONS, generated)  # fails on a bad region before anything is touched
        if EXERCISES.exists():
            shutil.rmtree(EXERCISES)
        shutil.copytree(generated, EXERCISES)
    print(f"wrote {sum(1 for p in EXERCISES.rglob('*') if p.is_file())} files under exercises/")
    return 0


def _regenerate_some(names: list[str]) -> int:
    folders = [d for d in sorted(SOLUTIONS.iterdir()) if d.is_dir()
               and any(d.name == n or d.name.split("_", 1)[0] == n.zfill(2) for n in names)]
    if not folders:
        print(f"no solutions/ folder matches {names}")
        return 1
    for folder in folders:
        with tempfile.TemporaryDirectory() as tmp:
            staging = Path(tmp) / "solutions" / folder.name
            shutil.copytree(folder, staging)
            generated = Path(tmp) / "exercises"
            generate(staging.parent, generated)
            target = EXERCISES / folder.name
            if target.exists():
                shutil.rmtree(target)
            shutil.copytree(generated / folder.name, target)
        print(f"wrote exercises/{folder.name}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
