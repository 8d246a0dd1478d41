"""Which known-wrong variants were graded as expected, and against what: the suite's ledger.

The whole suite takes longer on a GPU than one lease of the device allows, so it is graded in rounds
over several sittings. A round's result holds for as long as everything that decided it is unchanged,
and the ledger says exactly that: for each variant graded as expected it keeps a digest of what the
grade depended on (`digest`) with the device and date. A variant whose digest today differs from its
recorded one (or that has none) is stale and must be graded again; `python -m tests.known_wrong stale`
prints the stale ones in rounds, and `KNOWN_WRONG=stale` grades only them.

What a grade depends on: the grader (every module but the authoring, class-grading and benchmark
wings, with only the specs the exercise's own spec imports), the course headers the build includes, the
variant's source tree as graded (the solution folder with its edits), what it is declared to lose and
keep, and the two test modules that grade it; of the Python among these, its code (the syntax tree
without docstrings: a comment or a docstring changes no grade). A change anywhere else (docs, other
exercises, the notebooks) leaves the ledger valid; a change to any of these makes the variants it
reaches stale.
"""
from __future__ import annotations

import ast
import hashlib
import json
import os
import re
import time
from functools import lru_cache
from pathlib import Path

from grader.env import REPO

LEDGER = Path(__file__).with_name("graded.json")
LEDGER_ENV = "KNOWN_WRONG_LEDGER"  # another ledger file (a GPU machine's copy, merged back by hand)
GRADER = REPO / "grader"
# wings a grade of one exercise never imports (the import rule: tests/test_coverage.py's house test)
NOT_GRADING = ("authoring", "bench", "classroom", "notebooks.py")
GRADING_TESTS = (REPO / "tests" / "grading.py", REPO / "tests" / "test_gpu_grading.py")
_SPEC_IMPORT = re.compile(r"^from grader\.specs\.(ex\d\d\w*) import", re.M)


def ledger_path() -> Path:
    return Path(os.environ.get(LEDGER_ENV) or LEDGER)


def _files(root: Path) -> list[Path]:
    return sorted(p for p in root.rglob("*") if p.is_file() and "__pycache__" not in p.parts and p.suffix != ".pyc")


def _feed(h, name: str, data: bytes) -> None:
    h.update(f"{name}\0{len(data)}\0".encode())
    h.update(data)


def _code(path: Path) -> bytes:
    """What of a grader file a grade can depend on: a Python module's syntax tree without its docstrings
    (its comments, layout and prose change no grade), any other file (a header, a table) as it is."""
    data = path.read_bytes()
    if path.suffix != ".py":
        return data
    try:
        tree = ast.parse(data)
    except SyntaxError:
        return data  # a grade would fail on it: its every byte counts
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if (isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and body
                and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)
                and isinstance(body[0].value.value, str)):
            node.body = body[1:] or [ast.Pass()]
    return _dump(tree).encode()


def _dump(node) -> str:
    """`ast.dump` without the fields that are empty or None: what each Python version adds as such
    (3.12's `type_params=[]`) would otherwise make a GPU machine's digest differ from this one's."""
    if isinstance(node, ast.AST):
        fields = ", ".join(f"{k}={_dump(v)}" for k, v in ast.iter_fields(node) if v is not None and v != [])
        return f"{type(node).__name__}({fields})"
    if isinstance(node, list):
        return "[" + ", ".join(_dump(v) for v in node) + "]"
    return repr(node)


def _specs_of(exercise: str) -> list[Path]:
    """The exercise's spec module and the exercise specs it imports, transitively."""
    specs = GRADER / "specs"
    todo, seen = [next(specs.glob(f"ex{exercise[:2]}_*.py")).stem], set()
    while todo:
        stem = todo.pop()
        if stem not in seen:
            seen.add(stem)
            todo += _SPEC_IMPORT.findall((specs / f"{stem}.py").read_text())
    return [specs / f"{stem}.py" for stem in sorted(seen)]


@lru_cache(maxsize=None)
def _grader_digest(exercise: str) -> str:
    h = hashlib.sha256()
    for p in _files(GRADER):
        rel = p.relative_to(GRADER)
        if rel.parts[0] in NOT_GRADING or (rel.parts[0] == "specs" and rel.name.startswith("ex")):
            continue
        _feed(h, str(rel), _code(p))
    for p in _specs_of(exercise):
        _feed(h, str(p.relative_to(GRADER)), _code(p))
    for p in GRADING_TESTS:
        _feed(h, str(p.relative_to(REPO)), _code(p))
    return h.hexdigest()


def digest(variant) -> str:
    """What the variant's grade depended on, as one hash (see the module's docstring)."""
    h = hashlib.sha256(_grader_digest(variant.exercise).encode())
    texts = variant.texts()
    for p in _files(variant.source):
        rel = str(p.relative_to(variant.source))
        _feed(h, rel, texts[rel].encode() if rel in texts else p.read_bytes())
    declared = {"loses": sorted(variant.loses), "keeps": None if variant.keeps is None else sorted(variant.keeps),
                "partial": sorted(variant.partial), "reason": variant.reason, "status": variant.status,
                "extra": {k: variant.extra[k] for k in sorted(variant.extra) if k in ("timed", "huge", "cpu")}}
    _feed(h, "declared", json.dumps(declared, sort_keys=True).encode())
    return h.hexdigest()[:20]


def read() -> dict[str, dict]:
    try:
        data = json.loads(ledger_path().read_text())
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def record(variant, device: str | None = None) -> None:
    """Enter `variant` as graded as expected, now, on `device` (default this process's GPU): the GPU tests
    call it once a variant has lost exactly its points."""
    from grader.verify.results import write_json_atomic
    from grader.toolchain.build import FolderLock

    import torch

    path = ledger_path()
    with FolderLock(path.parent, ".graded.lock"):
        data = read()
        data[variant.id] = {"digest": digest(variant), "device": device or torch.cuda.get_device_name(), "torch": torch.__version__,
                            "date": time.strftime("%Y-%m-%d", time.gmtime())}
        write_json_atomic(path, dict(sorted(data.items())))


def stale(variants) -> list:
    """The variants whose recorded digest is not today's (or that have none)."""
    known = read()
    return [v for v in variants if (known.get(v.id) or {}).get("digest") != digest(v)]
