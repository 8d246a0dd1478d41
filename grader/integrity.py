"""Noticing a submission that patches the grader or the PyTorch functions its checks rely on.

A submission's Python module runs in the grading process, so it could replace, say,
`grader.checks.assert_close` with a function that accepts anything, or `torch.cuda.Event` with a
timer that reports less. Before any submitted code is imported, `Snapshot.take()` records the
identity of every function and class in the grader's modules and of the PyTorch and standard
library functions the checks and the timer call; `Snapshot.changed()` lists what differs since.
The results recorder asks after every test and the parent process scores a run with any change as
tampered: zero points, naming what was replaced.

The recorder binds the detector when it is imported, so patching it afterwards is reported too.
This catches patching, the common cheat. Code determined to forge results from inside the process
(rewriting the results file at exit, say) is not stopped here but by the judge (grader.judge): the
parent re-checks every op's outputs itself and recomputes the speed's verdict from the raw numbers,
so a forged "passed" earns nothing for a wrong op. Grading logs keep the evidence for an instructor.
"""
from __future__ import annotations

import sys

# Functions outside the grader whose replacement would change a verdict or a timing.
WATCHED = {
    "torch": ["allclose", "isclose", "equal", "isnan", "isfinite", "abs", "max", "where", "empty", "empty_like",
              "zeros", "randn", "rand", "Generator"],
    # torch.random's, not the torch.manual_seed alias: torch._dynamo rebinds the alias to a wrapper
    # when it is first imported (torch.library.opcheck imports it mid-run)
    "torch.random": ["manual_seed"],
    "torch.Tensor": ["__eq__", "__ne__", "__sub__", "abs", "max", "sub", "to", "double", "float", "cpu", "item",
                     "tolist", "equal", "allclose", "isnan", "all", "any", "clone", "copy_", "fill_", "data_ptr",
                     "numel", "sum", "norm", "__getitem__"],
    "torch.cuda": ["Event", "synchronize", "is_available", "current_stream"],
    "torch.cuda.Event": ["record", "elapsed_time", "synchronize"],
    "torch.testing": ["assert_close"],
    "torch.profiler": ["profile"],
    "time": ["perf_counter", "perf_counter_ns", "time", "monotonic"],
    "json": ["dump", "dumps"],
    "os": ["replace", "fdopen"],
    "_pytest.outcomes": ["fail", "skip"],
    "pytest": ["fail", "skip"],
}

def _member(obj, name: str):
    """An attribute as stored: a class's own dict entry (the function, not a new bound method)."""
    if isinstance(obj, type) and name in vars(obj):
        return vars(obj)[name]
    return getattr(obj, name, None)


def _grader_entries() -> dict[str, object]:
    out = {}
    for name, module in list(sys.modules.items()):
        if module is None or not (name == "grader" or name.startswith("grader.")):
            continue
        for attr, value in list(vars(module).items()):
            if callable(value) and not attr.startswith("__"):
                out[f"{name}.{attr}"] = value
                if isinstance(value, type) and getattr(value, "__module__", "").startswith("grader"):
                    for member, fn in list(vars(value).items()):
                        if callable(fn) and not member.startswith("__"):
                            out[f"{name}.{attr}.{member}"] = fn
    return out


def _watched_entries() -> dict[str, object]:
    out = {}
    for owner, names in WATCHED.items():
        obj = _lookup(owner)
        if obj is None:
            continue
        for n in names:
            value = _member(obj, n)
            if value is not None:
                out[f"{owner}.{n}"] = value
    return out


class Snapshot:
    def __init__(self):
        self.entries: dict[str, object] = {}  # name -> the object it named when taken

    def take(self) -> "Snapshot":
        self.entries = {**_grader_entries(), **_watched_entries()}
        return self

    def changed(self) -> list[str]:
        """Names whose object was replaced or deleted since take() (modules imported later are not
        in the snapshot: they cannot have been patched before it)."""
        return sorted(k for k, original in self.entries.items() if _lookup(k) is not original)


def _lookup(key: str):
    # "torch.cuda" / "grader.checks.assert_close" / "torch.Tensor.__eq__": the longest prefix that is
    # a loaded module, then attributes as stored (see _member)
    parts = key.split(".")
    for i in range(len(parts), 0, -1):
        module = sys.modules.get(".".join(parts[:i]))
        if module is None:
            continue
        obj = module
        for p in parts[i:]:
            obj = _member(obj, p)
            if obj is None:
                return None
        return obj
    return None
