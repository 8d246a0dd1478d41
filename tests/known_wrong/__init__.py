"""Known-wrong submissions: the grader's own regression suite.

Each module `exNN_name.py` here lists VARIANTS of that exercise's reference solution, each made by
exact text replacements in the solution's files (so a variant breaks loudly if the solution drifts),
with the groups it must lose and the words the grader's reason must contain.
"""
from __future__ import annotations

import importlib
import pkgutil
import shutil
from dataclasses import dataclass, field
from pathlib import Path

from grader.env import REPO


@dataclass
class Variant:
    exercise: str  # e.g. "01_leaky_relu"
    name: str  # e.g. "empty_kernel"
    description: str
    # file -> [(old text, new text)]: each old text must occur exactly once (an edit that matches another place as
    # well, after the solution changed, patches what it was not written for), or (old, new, n): exactly n times
    edits: dict[str, list[tuple]]
    loses: set[str]  # groups that must earn 0 points; every other group keeps full points
    # a phrase the grader's reason for the first lost group must contain (a tuple: any one of them, for a
    # race that more than one check can meet first)
    reason: str | tuple[str, ...] = ""
    status: str = "graded"  # or "build failed", "crashed", "timed out"
    keeps: set[str] | None = None  # groups that must keep full points (default: all others)
    # groups that must earn some of their points but not all (a speed tier missed: 1 of 2)
    partial: set[str] = field(default_factory=set)
    # "cpu": graded on a CPU machine too; "sanitize": caught only by SANITIZE=1; "timed": its fault
    # shows only in the timed part (graded with the timing); "kind": the class of trust issue it
    # stands for; "old": what the grader before the trust rework (8247f27) would give it, read from
    # that grader's checks (scripts/old_grader_on_variants.py measures it on a GPU)
    extra: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        # a group the spec pays only while another passes (spec.requires) is lost with it: written
        # here once, from the spec, rather than beside every variant that loses a required group
        from grader.specs import by_exercise

        gated = {group for group, needed in by_exercise(self.exercise).requires.items() if set(needed) & self.loses}
        self.loses = self.loses | gated
        if self.keeps is not None:
            self.keeps = self.keeps - gated
        assert not self.partial & (self.loses | (self.keeps or set())), f"{self.id}: a group both partial and lost or kept"

    @property
    def id(self) -> str:
        return f"{self.exercise}/{self.name}"

    @property
    def source(self) -> Path:
        return REPO / "solutions" / self.exercise

    def texts(self) -> dict[str, str]:
        """The files the variant changes, each as its whole text: {file: text}."""
        out = {}
        for file, replacements in self.edits.items():
            text = (self.source / file).read_text()
            for old, new, *times in replacements:
                expected = times[0] if times else 1
                if text.count(old) != expected:
                    raise ValueError(f"{self.id}: the text to replace occurs {text.count(old)} times in {file}, "
                                     f"expected {expected}: {old[:80]!r}")
                text = text.replace(old, new)
            out[file] = text
        return out

    def materialize(self, root: Path) -> Path:
        """Write the variant as `root/<exercise>/` (a folder laid out like exercises/)."""
        texts = self.texts()  # first: a drifted edit raises before anything is written
        dst = root / self.exercise
        shutil.copytree(self.source, dst, ignore=shutil.ignore_patterns("__pycache__"))
        for file, text in texts.items():
            (dst / file).write_text(text)
        return dst


# Edits shared by several exercises' variants.
LIB = "lib = load_library(__file__)\n"
# how a submission tells a timed call from a checked one by its call stack
IN_TIMING = 'any(f.function in ("time_fn", "timed_call") for f in __import__("inspect").stack())'
# how a submission tells whether a profiler watches it (the grader's own-kernel checks profile)
UNOBSERVED = "not torch._C._autograd._profiler_enabled()"
# every public query of profiling we know of, any of which says "a profiler is on" (grader.verify.observe
# keeps them one way for every call but the visible own-kernel checks, which compare values too)
PROFILED = ("(torch.autograd.profiler._is_profiler_enabled or torch._C._autograd._profiler_enabled() "
            "or torch._C._autograd._profiler_type() != torch._C._profiler.ActiveProfilerType.NONE "
            "or torch.cuda.is_current_stream_capturing())")
# a Tensor subclass that computes its values only when something reads them (after the timing)
LAZY = """

class _Lazy(torch.Tensor):
    _pending = None

    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        for a in list(args) + list((kwargs or {}).values()):
            if isinstance(a, _Lazy) and a._pending is not None:
                job, a._pending = a._pending, None
                job()
        return super().__torch_function__(func, types, args, kwargs)


def _lazy(shape, like, compute):
    out = torch.empty(shape, device=like.device, dtype=like.dtype).as_subclass(_Lazy)
    out._pending = lambda: torch.Tensor.copy_(out.as_subclass(torch.Tensor), compute())
    return out
"""

# runs the op on a stream of its own that never joins the current one: the timer's events see none of it
SIDE_STREAM = """

def _on_a_side_stream(op):
    with torch.cuda.stream(torch.cuda.Stream()):
        return op()
"""


# The TF32 kernels' mma (06's version 3, 09's backward GEMMs) on FP16 tensor cores instead:
# edits of a kernel file that include cuda_fp16.h and replace its `using course::mma_tf32;` by a
# function of that name. m16n8k8 f16 takes A row g (g + 8) at k 2t, 2t + 1 in one register and B column g at k 2t,
# 2t + 1 in another; the TF32 fragment's k t and t + 4 become k 2t and 2t + 1 (the same pairs of A and B
# elements meet), so only the operands' precision and range change: the same 10-bit mantissa as TF32,
# but 5 exponent bits (1e5 overflows, 1e-6 is subnormal).
FP16_MMA = [("#include <course/cuda.cuh>\n", "#include <cuda_fp16.h>\n\n#include <course/cuda.cuh>\n"),
            ("using course::mma_tf32;\n", """__device__ __forceinline__ void mma_tf32(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  auto h2 = [](uint32_t lo, uint32_t hi) {
    const __half2 v = __floats2half2_rn(__uint_as_float(lo), __uint_as_float(hi));
    return *reinterpret_cast<const uint32_t*>(&v);
  };
  const uint32_t a01 = h2(a[0], a[2]), a23 = h2(a[1], a[3]), bb = h2(b0, b1);
  asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5}, {%6}, "
               "{%0, %1, %2, %3};\\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a01), "r"(a23), "r"(bb));
#endif
}
""")]


def after_lib(code: str) -> tuple[str, str]:
    """An edit adding module-level code right after the wrapper loads its library."""
    return LIB, LIB + code


def takes_over(call: str, condition: str, instead: str) -> tuple[str, str]:
    """An edit of the wrapper: before `call` (the line returning its op's result), return the
    expression `instead` when `condition` holds."""
    return call, f"    if {condition}:\n        return {instead}\n" + call


def memo_by_pointer(call: str, condition: str, key: str, compute: str) -> list[tuple[str, str]]:
    """Edits of the wrapper: when `condition` holds, keep each result (the expression `compute`) under
    `key` (its inputs' addresses and shapes) and return a copy of it when called on them again."""
    return [after_lib("\n_memo = {}\n"),
            (call, f"    if {condition}:\n        key = {key}\n        if key not in _memo:\n"
                   f"            _memo[key] = {compute}\n        return _memo[key].clone()\n" + call)]


def all_variants() -> list[Variant]:
    variants = []
    for info in pkgutil.iter_modules(__path__):
        if info.name.startswith("ex"):
            variants += importlib.import_module(f"{__name__}.{info.name}").VARIANTS
    return variants


def rounds(pattern: str, size: int, stale_only: bool = False) -> list[str]:
    """The GPU variants whose ids match `pattern` (only those the ledger holds no current grade of, with
    `stale_only`: tests.known_wrong.ledger), in rounds of `size`, each round as a regular expression
    naming its ids (KNOWN_WRONG=<it> for one pytest run of tests/test_gpu_grading.py): a lent machine's
    time limit then cuts one round short, not the whole suite (scripts/gpu_check.sh's knownwrong stage)."""
    import re

    chosen = [v for v in all_variants() if re.search(pattern, v.id) and not v.extra.get("cpu")]
    if stale_only:
        from tests.known_wrong.ledger import stale

        chosen = stale(chosen)
    ids = [v.id for v in chosen]
    return ["^(" + "|".join(re.escape(i) for i in ids[k:k + size]) + ")$" for k in range(0, len(ids), max(1, size))]
