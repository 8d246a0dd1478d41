"""Shared by the tests that build and grade real extensions: one home for these helpers."""
from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from grader import env
from grader import specs as spec
from grader.run.grading import build_all, grade_target, rounds
from grader.run.options import GradeOptions
from grader.run.report import table
from tests.known_wrong import Variant

SOLUTIONS = env.REPO / "solutions"
EXERCISES = env.REPO / "exercises"
JOBS = max(1, (os.cpu_count() or 2) // 2)
# `make test EX="01 02"` narrows the tests that build and grade to those exercises
ONLY = os.environ.get("EX", "").replace(",", " ").split()


def grader_import_graph() -> dict[str, set[str]]:
    """grader's modules, named below grader (`run.cli`, `classroom.slurm`, `env`, `specs.ex01_leaky_relu`),
    and the grader modules each imports, anywhere in it (functions too)."""
    import ast

    root = env.REPO / "grader"
    modules = {}
    for path in root.rglob("*.py"):
        parts = path.relative_to(root).with_suffix("").parts
        parts = parts[:-1] if parts[-1] == "__init__" else parts
        if parts and parts != ("__main__",):
            modules[".".join(parts)] = path
    graph = {}
    for name, path in modules.items():
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.ImportFrom) and not node.level and (node.module or "").split(".")[0] == "grader":
                base = node.module.split(".")[1:]
                for a in node.names:
                    inner = ".".join([*base, a.name])
                    found.add(inner if inner in modules else ".".join(base))
            elif isinstance(node, ast.Import):
                found |= {".".join(a.name.split(".")[1:]) for a in node.names if a.name.startswith("grader.")}
        graph[name] = found & set(modules) - {name}
    return graph


def selected(names=None) -> list:
    return spec.select(names or ONLY)


def exercise_folders(root: Path) -> list[Path]:
    names = {s.exercise for s in selected()}
    return sorted(p for p in root.iterdir() if p.is_dir() and p.name in names)


def quiet(*_args, **_kwargs):
    pass


def pythonpath_outside_the_checkout() -> str:
    """PYTHONPATH without its entries in this checkout: for a process that must not import the
    grader from here, yet still reach packages installed elsewhere through PYTHONPATH (on the GPU
    machine, Jupyter's and submitit's)."""
    return os.pathsep.join(p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep)
                           if p and not Path(p).resolve().is_relative_to(env.REPO))


def grade(target: Path, exercises=None, *, timeout: float = 900, keyword: str | None = None, seed: int = 1234,
          sanitize: bool | str = False, parallel: int = 1):
    specs = selected(exercises)
    options = GradeOptions(seed=seed, timeout=timeout, jobs=JOBS, keyword=keyword, sanitize=sanitize, parallel=parallel)
    return {row.exercise: row for row in grade_target(target, specs, options, log=quiet)}


def explain(rows) -> str:
    return table(list(rows.values() if isinstance(rows, dict) else rows))


def grade_variants(variants: list[Variant], root: Path, keyword: str | None, timeout: float = 600) -> dict[str, dict]:
    """Materialize each variant as its own target folder, build them all in parallel, then grade
    them several at a time (each in its own process). Returns variant id -> its exercise's row."""
    targets = {v.id: v.materialize(root / v.name / "x").parent for v in variants}
    build_all([t / v.exercise for v, t in zip(variants, targets.values())], JOBS, log=quiet)

    def one(v: Variant):
        return v.id, grade(targets[v.id], [v.exercise], timeout=timeout, keyword=keyword)[v.exercise]

    # correctness checks only (no timing), so several processes may share the GPU
    with ThreadPoolExecutor(max_workers=JOBS) as pool:
        return dict(pool.map(one, variants))


def grade_variants_timed(variants: list[Variant], root: Path, timeout: float = 900) -> dict[str, dict]:
    """A full grade, timing included, of variants whose fault shows only in the timed part: in rounds,
    one folder per round, its exercises graded at once (each timing alone on the GPU)."""
    found = {}
    for i, batch in enumerate(rounds(variants, lambda v: v.exercise)):
        folder = root / f"round{i}"
        for v in batch:
            v.materialize(folder)
        rows = grade(folder, [v.exercise for v in batch], timeout=timeout, parallel=JOBS)
        found.update({v.id: rows[v.exercise] for v in batch})
    return found


def check_variant(v: Variant, row: dict, ignore: set[str] = frozenset()) -> None:
    """The variant lost exactly the groups it should, for the reason it should."""
    assert row.status == v.status or (v.status == "graded" and row.status == "graded"), explain([row])
    lost, kept = [], []
    for group, g in row.groups.items():
        if group in ignore:
            continue
        if group in v.loses:
            assert g.points == 0, f"{v.id}: {group} should lose its points\n{explain([row])}"
            lost.append(g.reason)
        elif v.keeps is None or group in v.keeps:
            assert g.points == g.max, f"{v.id}: {group} should keep its points\n{explain([row])}"
    if v.reason:
        text = " ".join(lost) + " " + (row.error or "")
        assert v.reason in text, f"{v.id}: expected {v.reason!r} among the reasons\n{explain([row])}"


def level_tree(level: str) -> Path:
    """The student copies of every exercise at hint level `level`, generated anew under .build/
    (`goal`: .build/hints-goal/exercises/, `open`: .build/level-open/exercises/): builds there are
    cached by source hash, so a second run compiles nothing."""
    import shutil

    from grader.authoring import stubs

    root = env.BUILD_ROOT / ("hints-goal" if level == "goal" else f"level-{level}") / "exercises"
    if root.exists():
        shutil.rmtree(root)
    stubs.generate(SOLUTIONS, root, level)
    return root


def kernel_source(folder: Path) -> str:
    """An exercise's kernel code as one text: its .cuh and .cu files in name order (05's are one file a
    version), for the tests that read a kernel's constants and lines wherever the folder keeps them."""
    return "\n".join(p.read_text() for p in sorted(folder.iterdir()) if p.suffix in (".cu", ".cuh"))
