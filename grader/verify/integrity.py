"""Noticing a submission that changes the grader, PyTorch, or the process's state under the checks.

A submission's Python module and C++ library run in the grading process, so they could replace, say,
`grader.verify.checks.assert_close` with a function that accepts anything, edit the grader's tolerance
tables, swap a function's code object, re-point the C function behind `torch.cuda.Event.elapsed_time`,
register their own kernel for `aten::sub` (which every comparison calls), push a mode that intercepts
every torch function, or turn TF32 on. Before any submitted code is imported, `Snapshot.take()` records:

- every grader module: each function's identity, code object, defaults and closure, and a digest of
  every data value (tolerance tables, the spec objects, constants), classes' members likewise;
- the PyTorch, standard-library and pytest namespaces the checks, the timer and the recorder use,
  whole (not a hand-picked list): each callable's identity, and a Python function's code and defaults;
- the state the checks run in: PyTorch's math flags (grader.verify.spec.Spec.math), the torch-function and
  dispatch mode stacks, sys's trace and profile hooks and import hooks, pytest's plugins;
- and, checked less often as it costs tenths of a second (`changed(deep=True)`): the C entry points
  behind the watched builtin functions and methods (their function pointers and first machine-code
  bytes) and PyTorch's dispatcher table for every aten operator on its CPU, CUDA, autograd and
  composite keys.

`Snapshot.changed()` lists what differs; the results recorder asks after every test (deeply after
the first, around the timing and at the end), and the parent scores a run with any
change as tampered: zero points, naming what changed.

What stays in reach, and why that is safe: native code can still forge anything in its own process
(rewrite memory the snapshot does not cover, or the results file as the process ends). That is why
the verdict does not rest on this process alone: the parent re-checks every op's outputs on fresh
calls, the timed outputs and the gradients itself (grader.verify.judge), times the reference, PyTorch and
the device's limit in a process that never runs submitted code (grader.run.yardstick), and recomputes
the speed's points from raw numbers (grader.verify.scoring). A submission can make its own timing look
better only by forging its own process's clocks and profiler consistently, which this detects at the
common points and the parent cross-checks (the profiler's kernel time against the event time).
"""
from __future__ import annotations

import ctypes
import dataclasses
import hashlib
import sys
import types

# Namespaces whose every callable the checks, the timer, the judge's recording or the recorder may
# use: watched whole, so that a function "not on the list" cannot be replaced.
WATCHED_MODULES = (
    "torch", "torch.nn.functional", "torch.cuda", "torch.linalg", "torch.autograd", "torch.autograd.grad_mode",
    "torch.library", "torch.profiler", "torch.autograd.profiler", "torch.autograd.profiler_util", "torch.testing",
    "torch.random", "torch.utils._python_dispatch", "torch.nn.grad", "torch.serialization",
    "builtins", "time", "os", "os.path", "json", "random", "secrets", "math", "statistics", "threading", "tempfile",
    "pickle", "copy", "hashlib", "re", "contextlib", "fcntl", "pathlib",
    "pytest", "_pytest.outcomes", "_pytest.runner", "_pytest.reports", "_pytest.python", "_pytest.main",
    "_pytest.fixtures", "_pytest.terminal", "pluggy",
)
# Classes whose members (methods, properties) are watched likewise.
WATCHED_CLASSES = (
    "torch.Tensor", "torch._C.TensorBase", "torch.cuda.Event", "torch.cuda.Stream", "torch.Generator",
    "torch.profiler.profile", "torch.autograd.profiler.profile", "torch.autograd.profiler_util.FunctionEvent",
    "torch.autograd.profiler_util.EventList", "torch.autograd.Function", "torch.nn.Module", "pathlib.Path",
    "_pytest.reports.TestReport", "_pytest.runner.CallInfo", "pluggy.PluginManager", "pluggy.HookCaller",
    "threading.Thread",
)
# attributes that legitimately change while the checks run (lazily created caches, counters)
IGNORED = {"torch.manual_seed",  # torch._dynamo rebinds this alias when first imported; torch.random's is watched
           "torch.Tensor.__dict__", "torch.Tensor.__weakref__", "torch.Tensor.grad", "builtins._",
           "torch.cuda._initialized", "torch.cuda._queued_calls", "torch.cuda._tls", "torch.cuda._lazy_seed_tracker",
           "threading._active", "threading._limbo", "threading._counter", "random._inst", "os.environ",
           # the grader's own records of the run, which change as it goes
           "grader.toolchain.build._loaded", "grader.specs.SPEC_ERRORS", "grader.verify.sass._cache"}


def _lookup(key: str):
    """`torch.cuda` / `grader.verify.checks.assert_close` / `torch.Tensor.__eq__`: the longest prefix that is
    a loaded module, then attributes as stored (a class's own dict entry, not a bound method)."""
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


def _member(obj, name: str):
    if isinstance(obj, type) and name in vars(obj):
        return vars(obj)[name]
    return getattr(obj, name, None)


def _fingerprint(value, depth: int = 0, seen: set | None = None) -> str:
    """A digest-able description of a value: what it holds for data, its code and defaults for a
    function, its identity for anything opaque."""
    seen = set() if seen is None else seen
    if depth > 8:
        return f"<{type(value).__name__}>"
    if value is None or isinstance(value, (bool, int, float, complex, str, bytes)):
        return repr(value)
    kind = type(value).__module__
    if kind == "torch" and type(value).__name__ in ("dtype", "device", "layout", "memory_format"):
        return repr(value)
    if id(value) in seen:
        return "<cycle>"
    seen = seen | {id(value)}
    if isinstance(value, (tuple, list)):
        return "[" + ",".join(_fingerprint(v, depth + 1, seen) for v in value) + "]"
    if isinstance(value, (set, frozenset)):
        return "{" + ",".join(sorted(_fingerprint(v, depth + 1, seen) for v in value)) + "}"
    if isinstance(value, dict):
        return "{" + ",".join(f"{_fingerprint(k, depth + 1, seen)}:{_fingerprint(v, depth + 1, seen)}"
                              for k, v in value.items()) + "}"
    if isinstance(value, (types.FunctionType, types.MethodType)):
        fn = value.__func__ if isinstance(value, types.MethodType) else value
        cells = [c.cell_contents if _cell_set(c) else None for c in (fn.__closure__ or ())]
        return (f"fn:{id(fn)}:{id(fn.__code__)}:{_fingerprint(fn.__defaults__, depth + 1, seen)}:"
                f"{_fingerprint(fn.__kwdefaults__, depth + 1, seen)}:{_fingerprint(cells, depth + 1, seen)}")
    if isinstance(value, (types.ModuleType, type)) or callable(value):
        return f"{type(value).__name__}:{id(value)}"
    if dataclasses.is_dataclass(value):
        return (type(value).__qualname__ + "(" + ",".join(
            f"{f.name}={_fingerprint(getattr(value, f.name, None), depth + 1, seen)}" for f in dataclasses.fields(value))
            + ")")
    if hasattr(type(value), "integrity_state") and type(value).__module__.startswith("grader"):
        # a grader object whose counters change as the checks run (grader.verify.observe.Watch): its identity
        # and the state that must hold (replacing it, or stopping it, is tampering)
        return f"{type(value).__qualname__}:{id(value)}:{value.integrity_state()}"
    if hasattr(value, "__dict__") and type(value).__module__.startswith("grader"):
        return type(value).__qualname__ + _fingerprint(dict(vars(value)), depth + 1, seen)
    return f"{type(value).__name__}:{id(value)}"


def _cell_set(cell) -> bool:
    try:
        cell.cell_contents  # noqa: B018
        return True
    except ValueError:
        return False


def _callable_entry(value):
    """What identifies a callable: the object, and for a Python function its code, defaults and
    keyword defaults (swapped in place, they change what it does under the same identity)."""
    fn = getattr(value, "__func__", value)
    if isinstance(fn, types.FunctionType):
        return (id(value), id(fn.__code__), _fingerprint(fn.__defaults__), _fingerprint(fn.__kwdefaults__))
    if isinstance(value, property):
        return (id(value), id(value.fget), id(value.fset))
    return (id(value),)


def _namespace_entries(prefix: str, obj) -> dict[str, object]:
    out = {}
    for name, value in list(vars(obj).items()):
        key = f"{prefix}.{name}"
        if key in IGNORED or (name.startswith("__") and name.endswith("__") and not isinstance(obj, type)):
            continue
        if callable(value) or isinstance(value, (property, staticmethod, classmethod)):
            out[key] = _callable_entry(value)
    return out


def _grader_entries() -> dict[str, object]:
    """Every grader module's functions, classes' members and data (its spec objects too)."""
    out = {}
    for name, module in list(sys.modules.items()):
        if module is None or not (name == "grader" or name.startswith("grader.")):
            continue
        out[name] = ("module", id(module))
        for attr, value in list(vars(module).items()):
            key = f"{name}.{attr}"
            if attr.startswith("__") or key in IGNORED:
                continue
            if isinstance(value, types.ModuleType):  # an alias (`F`, `torch`) swapped for a look-alike
                out[key] = ("module", id(value))
                continue
            # the grading suite's own modules keep the run's state (faults seen, the exit status)
            if name.startswith("grader.run.suite") and not callable(value):
                continue
            if isinstance(value, type):
                out[key] = ("class", id(value))
                if getattr(value, "__module__", "").startswith("grader"):
                    for member, fn in list(vars(value).items()):
                        if not (member.startswith("__") and member.endswith("__")) or member in ("__init__", "__call__"):
                            out[f"{key}.{member}"] = _fingerprint(fn)
            else:
                out[key] = _fingerprint(value)
    return out


def _watched_entries() -> dict[str, object]:
    out = {}
    for name in WATCHED_MODULES:
        module = sys.modules.get(name)
        if module is not None:
            out[name] = ("module", id(module))
            out.update(_namespace_entries(name, module))
    for name in WATCHED_CLASSES:
        cls = _lookup(name)
        if isinstance(cls, type):
            out.update(_namespace_entries(name, cls))
    return out


def _state_entries(plugins=None) -> dict[str, object]:
    """The process's state the checks run in."""
    out = {"sys.gettrace": id(sys.gettrace()), "sys.getprofile": id(sys.getprofile()),
           "sys.meta_path": tuple(id(f) for f in sys.meta_path), "sys.path_hooks": tuple(id(h) for h in sys.path_hooks)}
    torch = sys.modules.get("torch")
    if torch is not None:
        b = torch.backends
        out["torch math flags"] = (b.cudnn.allow_tf32, b.cudnn.benchmark, b.cudnn.deterministic, b.cudnn.enabled,
                                   b.cuda.matmul.allow_tf32, b.cuda.matmul.allow_fp16_reduced_precision_reduction,
                                   b.cuda.matmul.allow_bf16_reduced_precision_reduction,
                                   torch.get_float32_matmul_precision(), torch.are_deterministic_algorithms_enabled(),
                                   str(torch.get_default_dtype()))
        out["torch mode stacks"] = (torch._C._len_torch_function_stack(), torch._C._len_torch_dispatch_stack())
    if plugins is not None:
        out["pytest plugins"] = tuple(sorted(id(p) for p in plugins()))
    for name in WATCHED_CLASSES:  # a member added to a subclass shadows the one it inherits
        cls = _lookup(name)
        if isinstance(cls, type):
            # (pickle caches __slotnames__ on a class the first time it pickles one of its objects)
            out[f"{name} (its members)"] = frozenset(k for k in vars(cls) if f"{name}.{k}" not in IGNORED
                                                     and k != "__slotnames__")
    return out


# --- the deep part: C entry points and the dispatcher --------------------------------------------

_PTR = ctypes.sizeof(ctypes.c_void_p)
_HEAD = 2 * _PTR  # PyObject_HEAD: the reference count and the type
_BUILTIN = type(len)  # builtin_function_or_method: PyCFunctionObject {HEAD; PyMethodDef *m_ml; ...; vectorcall}
_METHOD_DESCRIPTOR = type(str.join)  # PyMethodDescrObject {HEAD; d_type; d_name; d_qualname; PyMethodDef *d_method; vectorcall}
_WRAPPER_DESCRIPTOR = type(object.__init__)  # PyWrapperDescrObject {HEAD; d_type; d_name; d_qualname; d_base; void *d_wrapped}


def _read_ptr(address: int) -> int:
    return ctypes.c_void_p.from_address(address).value or 0


def _c_entry(obj) -> tuple | None:
    """The C function pointers behind a builtin function or method descriptor, and the first bytes of
    the machine code they point to (an in-place hook rewrites those); None for anything else."""
    t, base = type(obj), id(obj)
    if t is _BUILTIN:
        method_def = _read_ptr(base + _HEAD)
        pointers = (method_def, _read_ptr(method_def + _PTR) if method_def else 0, _read_ptr(base + _HEAD + 4 * _PTR))
    elif t is _METHOD_DESCRIPTOR:
        method_def = _read_ptr(base + _HEAD + 3 * _PTR)
        pointers = (method_def, _read_ptr(method_def + _PTR) if method_def else 0, _read_ptr(base + _HEAD + 4 * _PTR))
    elif t is _WRAPPER_DESCRIPTOR:
        pointers = (_read_ptr(base + _HEAD + 3 * _PTR), _read_ptr(base + _HEAD + 4 * _PTR))
    else:
        return None
    code = tuple(ctypes.string_at(p, 16) for p in pointers[1:] if p)
    return pointers + code


def _c_entries() -> dict[str, object]:
    out = {}
    for name in WATCHED_MODULES + WATCHED_CLASSES:
        obj = sys.modules.get(name) if name in WATCHED_MODULES else _lookup(name)
        if obj is None:
            continue
        for attr, value in list(vars(obj).items()):
            entry = _c_entry(value)
            if entry is not None:
                out[f"C {name}.{attr}"] = entry
    return out


def _dispatch_entries() -> dict[str, object]:
    """PyTorch's dispatcher table of every aten operator, every dispatch key's kernel: a kernel
    registered over one of PyTorch's, from C++ or torch.library and on any key (CUDA, BackendSelect,
    ADInplaceOrView, Autocast...), changes it. The checks' own machinery (opcheck, the profiler,
    gradcheck, fake tensors) registers no aten kernel after import (measured)."""
    torch = sys.modules.get("torch")
    if torch is None:
        return {}
    out = {}
    for op in torch._C._dispatch_get_all_op_names():
        if op.startswith("aten::"):
            out[f"dispatcher {op}"] = hashlib.sha1(torch._C._dispatch_dump(op).encode()).hexdigest()
    return out


def _fast_entries(grader_entries: dict) -> list[tuple]:
    """(name, namespace dict, key, object, code, defaults) for every watched callable and grader
    function: checked after every test by identity alone (a few milliseconds)."""
    out = []
    spaces = [(name, sys.modules.get(name)) for name in WATCHED_MODULES]
    spaces += [(name, _lookup(name)) for name in WATCHED_CLASSES]
    graders = [(name, m) for name, m in list(sys.modules.items()) if m is not None and (name == "grader" or name.startswith("grader."))]
    spaces += graders
    spaces += [(f"{name}.{attr}", cls) for name, m in graders for attr, cls in list(vars(m).items())
               if isinstance(cls, type) and getattr(cls, "__module__", "").startswith("grader")]
    for prefix, obj in spaces:
        if obj is None:
            continue
        members = vars(obj)
        for key, value in list(members.items()):
            if f"{prefix}.{key}" in IGNORED:
                continue
            if isinstance(value, types.ModuleType) and obj is sys.modules.get(prefix) and prefix.startswith("grader"):
                out.append((f"{prefix}.{key}", members, key, value, None, None))  # a grader module's alias
                continue
            if not callable(value):
                continue
            fn = getattr(value, "__func__", value)
            if isinstance(fn, types.FunctionType):
                out.append((f"{prefix}.{key}", members, key, value, fn.__code__, fn.__defaults__))
            else:
                out.append((f"{prefix}.{key}", members, key, value, None, None))
    return out


class Snapshot:
    def __init__(self, plugins=None):
        self.entries: dict[str, object] = {}  # name -> what it was when taken
        self.fast: list[tuple] = []
        self.small: dict[str, tuple] = {}  # grader data small enough to digest after every test
        self.deep: dict[str, object] = {}
        self.plugins = plugins  # () -> the pytest plugins registered, when known

    def take(self) -> "Snapshot":
        grader = _grader_entries()
        self.entries = {**grader, **_watched_entries(), **_state_entries(self.plugins)}
        self.fast = _fast_entries(grader)
        self.small = {}
        for key, before in grader.items():
            module, _, attr = key.rpartition(".")
            holder = sys.modules.get(module)
            value = getattr(holder, attr, None) if holder is not None else None
            if isinstance(before, str) and len(before) < 4000 and not callable(value) and holder is not None:
                self.small[key] = (vars(holder), attr, before)
        self.deep = {**_c_entries(), **_dispatch_entries()}
        return self

    def changed(self, deep: bool = False) -> list[str]:
        """Names whose object, code, data or state differs from take()'s (modules and operators that
        appeared later are not in the snapshot: they cannot have been changed before it). Without
        `deep`: identities, code objects, defaults, small data and the state (milliseconds); with it,
        every data value, the C entry points and the dispatcher too (tenths of a second)."""
        found = set()
        for name, members, key, value, code, defaults in self.fast:
            now = members.get(key, _GONE)
            if now is not value:
                found.add(name)
            elif code is not None:
                fn = getattr(value, "__func__", value)
                if fn.__code__ is not code or fn.__defaults__ is not defaults:
                    found.add(name)
        state = _state_entries(self.plugins)
        for key, now in state.items():
            before = self.entries.get(key, _GONE)
            if before != now:
                if isinstance(before, frozenset) and isinstance(now, frozenset):  # a class's members: which
                    key += ": " + ", ".join([f"+{m}" for m in sorted(now - before)] + [f"-{m}" for m in sorted(before - now)])
                found.add(key)
        for key, (members, attr, before) in self.small.items():
            if _fingerprint(members.get(attr, _GONE)) != before:
                found.add(key)
        if deep:
            now = {**_grader_entries(), **_watched_entries(), **state}
            found.update(k for k, before in self.entries.items() if now.get(k, _GONE) != before)
            now_deep = {**_c_entries(), **_dispatch_entries()}
            found.update(k for k, before in self.deep.items() if now_deep.get(k, _GONE) != before)
        return sorted(found)


_GONE = object()
