"""A tensor-core group's instruction, read from the built library's machine code.

A group graded as TF32 or BF16 tensor cores could be computed without them (plain FMAs that round like
TF32 pass every value check): each such group declares the instruction its kernels must hold (an
`MmaInstruction`: mma.sync or wgmma, TF32 or BF16, and which kernels), and `check` disassembles the
exercise's library (`cuobjdump -sass`; where it holds only PTX for this GPU, `cuobjdump -ptx`), splits
it by kernel function and wants the instruction in every instantiation of those kernels, in the code
the GPU runs. Without a GPU (`arch=` given) the same reading runs on any build, as the tests do.

In a grade the grader reads each library itself once its build is done, before any grading process loads
it (grader.run.grading.read_library_when_built), and judges each InstructionCheck from that reading
(`instruction_verdicts`): the grading process, whose submitted code could replace the file on disk before
its check ran, passes the check at once (`read_by_grader`), and no grading process waits on cuobjdump.

    SASS: mma.sync TF32 -> HMMA.1688.F32.TF32, BF16 -> HMMA.16816.F32.BF16;
          wgmma TF32 -> HGMMA.64xNx8.F32.TF32, BF16 -> HGMMA.64xNx16.F32.BF16
    PTX:  mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32, wgmma.mma_async.sync.aligned.m64nNk8.f32.tf32.tf32

An FP16 mma (HMMA.1688.F32 / HMMA.16816.F32, no .TF32 or .BF16) is not the group's instruction.
"""
from __future__ import annotations

import os
import re
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path


# ------------------------------------------------ the compiler's names (the resource report reads them too)


def demangle(names: list[str]) -> dict[str, str]:
    """Mangled -> readable names without parameters (c++filt -p), e.g.
    `(anonymous namespace)::matmul_kernel4<false>`; names c++filt cannot read stay as they are."""
    tool = shutil.which("c++filt")
    if not tool or not names:
        return {n: n for n in names}
    try:
        out = subprocess.run([tool, "-p"], input="\n".join(names), capture_output=True, text=True, timeout=30)
        readable = out.stdout.splitlines()
    except (OSError, subprocess.TimeoutExpired):
        return {n: n for n in names}
    return {n: (r or n) for n, r in zip(names, readable + names[len(readable):])}


def _split_top(text: str, sep: str = ",") -> list[str]:
    """Split at `sep` outside (), [], {} and <>."""
    parts, depth, cur = [], 0, []
    for ch in text:
        if ch in "([{<":
            depth += 1
        elif ch in ")]}>":
            depth -= 1
        if ch == sep and depth == 0:
            parts.append("".join(cur).strip())
            cur = []
        else:
            cur.append(ch)
    if "".join(cur).strip():
        parts.append("".join(cur).strip())
    return parts


def split_name(readable: str) -> tuple[str, list[str]]:
    """`void (anonymous namespace)::k<float, 128>` -> ("k", ["float", "128"])."""
    s = readable.replace("(anonymous namespace)::", "").strip()
    if s.startswith("void "):
        s = s[5:]
    lt = s.find("<")
    base = (s[:lt] if lt >= 0 else s).split("::")[-1].strip()
    args = _split_top(s[lt + 1:s.rfind(">")]) if lt >= 0 else []
    return base, args


def arch_capability(arch: str) -> tuple[int, int]:
    """"sm_75" -> (7, 5), "sm_90a" -> (9, 0), "sm_120" -> (12, 0)."""
    digits = re.fullmatch(r"sm_(\d+)(\d)[a-z]?", arch)
    return (int(digits.group(1)), int(digits.group(2))) if digits else (0, 0)


class SassError(Exception):
    """The library's code could not be read (no tool, a tool that failed): the check fails with this."""


@dataclass(frozen=True)
class MmaInstruction:
    """What a tensor-core group's kernels must execute.

    `instruction`: "mma" (mma.sync, SASS HMMA) or "wgmma" (SASS HGMMA); `precision`: "tf32" or "bf16"
    (the operands' type in the instruction); `kernels`: the kernel functions (names as in the source,
    a subset of the group's KernelRule) every instantiation of which must hold it; `operand`: where
    those kernels are templates over the element type, the template argument of this group's
    instantiations ("float", "__nv_bfloat16"): the others are another group's."""

    instruction: str
    precision: str
    kernels: tuple[str, ...]
    operand: str | None = None

    def __post_init__(self) -> None:
        if self.instruction not in ("mma", "wgmma") or self.precision not in ("tf32", "bf16"):
            raise ValueError(f"MmaInstruction: {self.instruction!r} {self.precision!r}")

    @property
    def sass(self) -> re.Pattern:
        op = "HMMA" if self.instruction == "mma" else "HGMMA"
        return re.compile(rf"\b{op}\.\w+\.F32\.{self.precision.upper()}\b")

    @property
    def ptx(self) -> re.Pattern:
        p = self.precision
        if self.instruction == "mma":
            return re.compile(rf"\bmma\.sync\.aligned\.m\d+n\d+k\d+\.row\.col\.f32\.{p}\.{p}\.f32\b")
        return re.compile(rf"\bwgmma\.mma_async\.sync\.aligned\.m64n\d+k\d+\.f32\.{p}\.{p}\b")

    def describe(self) -> str:
        what = {"mma": "mma.sync", "wgmma": "wgmma"}[self.instruction]
        sass = {"mma": "HMMA", "wgmma": "HGMMA"}[self.instruction]
        return f"{sass} ({what}) .{self.precision.upper()}"


@dataclass
class Code:
    """One architecture's code in a library: function name (readable, parameters dropped) -> its text."""

    arch: str  # "sm_90a", or "compute_90" for PTX
    functions: dict[str, str] = field(default_factory=dict)

    @property
    def is_ptx(self) -> bool:
        return self.arch.startswith("compute_")


def cuobjdump() -> str:
    """The CUDA toolkit's cuobjdump: beside nvcc (CUDA_HOME/bin), on PATH, or the copy Triton ships
    with PyTorch (a machine with the compiler but not the binary utilities)."""
    for home in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if home and (Path(home) / "bin" / "cuobjdump").is_file():
            return str(Path(home) / "bin" / "cuobjdump")
    found = shutil.which("cuobjdump")
    if found:
        return found
    try:
        import importlib.util

        spec = importlib.util.find_spec("triton")
        if spec and spec.submodule_search_locations:
            tool = Path(list(spec.submodule_search_locations)[0]) / "backends" / "nvidia" / "bin" / "cuobjdump"
            if tool.is_file():
                return str(tool)
    except (ImportError, ValueError):
        pass
    raise SassError("cuobjdump not found (CUDA_HOME/bin, PATH, triton's bin): the tensor-core instruction "
                    "check cannot read the kernels' machine code")


def _run(args: list[str]) -> str:
    try:
        out = subprocess.run([cuobjdump(), *args], capture_output=True, text=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as e:
        raise SassError(f"cuobjdump {' '.join(args[:-1])}: {e}") from None
    if out.returncode != 0 and "No PTX" not in out.stderr and "no SASS" not in out.stderr.lower():
        raise SassError(f"cuobjdump {' '.join(args[:-1])} failed: {out.stderr.strip()[:300]}")
    return out.stdout


_SASS_ARCH = re.compile(r"^arch = (sm_\w+)", re.M)
_SASS_FUNCTION = re.compile(r"^\s*Function : (\S+)", re.M)
_PTX_ARCH = re.compile(r"^\.target\s+(sm_\w+)", re.M)
_PTX_ENTRY = re.compile(r"^\s*(?:\.(?:visible|weak|extern)\s+)*\.(?:entry|func)\s+(?:\([^)]*\)\s*)?(\w+)", re.M)


def parse_sass(text: str) -> list[Code]:
    """`cuobjdump -sass` output -> one Code per ELF (one per source file and architecture), functions by
    readable name."""
    codes: list[Code] = []
    # each embedded file opens with "Fatbin elf code:" (SASS) or "Fatbin ptx code:" (listed, not shown)
    pieces = re.split(r"^Fatbin (?=\w+ code:)", text, flags=re.M)
    for piece in pieces:
        arch = _SASS_ARCH.search(piece)
        if not piece.startswith("elf code:") or not arch:
            continue
        codes.append(_split(Code(arch.group(1)), piece, _SASS_FUNCTION))
    return codes


def _split(code: Code, piece: str, function: re.Pattern) -> Code:
    """`code` with the functions of one embedded file, each the text from its mark to the next."""
    marks = list(function.finditer(piece))
    names = demangle([m.group(1) for m in marks])
    for i, m in enumerate(marks):
        end = marks[i + 1].start() if i + 1 < len(marks) else len(piece)
        code.functions[names[m.group(1)]] = piece[m.end():end]
    return code


def parse_ptx(text: str) -> list[Code]:
    """`cuobjdump -ptx` output -> one Code per PTX module ("compute_90" for `.target sm_90`)."""
    codes: list[Code] = []
    for piece in re.split(r"^(?=\.version )", text, flags=re.M):
        target = _PTX_ARCH.search(piece)
        if not target:
            continue
        codes.append(_split(Code("compute_" + target.group(1).removeprefix("sm_")), piece, _PTX_ENTRY))
    return codes


_cache: dict[tuple[str, float, int], tuple[list[Code], list[Code]]] = {}


def read_library(library: str | Path) -> tuple[list[Code], list[Code]]:
    """(SASS codes, PTX codes) of a built library, cached per file version in this process."""
    path = Path(library)
    if not path.is_file():
        raise SassError(f"no built library at {path}")
    stat = path.stat()
    key = (str(path.resolve()), stat.st_mtime, stat.st_size)
    if key not in _cache:
        sass = parse_sass(_run(["-sass", str(path)]))
        ptx = parse_ptx(_run(["-ptx", str(path)])) if not sass else []
        _cache[key] = (sass, ptx)
    return _cache[key]


def code_that_runs(sass: list[Code], ptx: list[Code], capability: tuple[int, int]) -> tuple[list[Code], str]:
    """The code a GPU of `capability` runs: the SASS of its major version with the highest minor at or
    below its own (every ELF of that architecture, "9.0" and "9.0a" alike), else the newest PTX at or
    below it (JIT-compiled). Returns ([], why) when none can run there."""
    runs = [c for c in sass if arch_capability(c.arch)[0] == capability[0] and arch_capability(c.arch) <= capability]
    if runs:
        best = max(arch_capability(c.arch) for c in runs)
        return [c for c in runs if arch_capability(c.arch) == best], ""
    jit = [c for c in ptx if _ptx_capability(c.arch) <= capability]
    if jit:
        best = max(_ptx_capability(c.arch) for c in jit)
        return [c for c in jit if _ptx_capability(c.arch) == best], ""
    have = ", ".join(sorted({c.arch for c in sass + ptx})) or "none"
    return [], f"the library has no code for compute capability {capability[0]}.{capability[1]} (it has: {have})"


def _ptx_capability(arch: str) -> tuple[int, int]:
    return arch_capability("sm_" + arch.removeprefix("compute_"))


def instantiations(code: Code, need: MmaInstruction) -> dict[str, str]:
    """The functions of `code` that are instantiations of `need`'s kernels for its operand type."""
    out = {}
    for name, text in code.functions.items():
        base, args = split_name(name)
        if base not in need.kernels:
            continue
        if need.operand is not None and (not args or args[0].split("::")[-1] != need.operand):
            continue
        out[name] = text
    return out


def missing(codes: list[Code], need: MmaInstruction) -> list[str]:
    """Reasons, one per kernel found without the instruction or kernel not found at all ([]: all hold it)."""
    problems = []
    by_arch: dict[str, list[Code]] = {}
    for code in codes:  # a library of several .cu files holds one ELF (or PTX module) per file and architecture
        by_arch.setdefault(code.arch, []).append(code)
    for arch, same in by_arch.items():
        found = [(n, t) for code in same for n, t in instantiations(code, need).items()]
        pattern = need.ptx if same[0].is_ptx else need.sass
        for kernel in need.kernels:
            of_kernel = [(n, t) for n, t in found if split_name(n)[0] == kernel]
            if not of_kernel:
                typed = f" for {need.operand}" if need.operand else ""
                problems.append(f"kernel {kernel}{typed} is not in the library's {arch} code")
            for name, text in of_kernel:
                if not pattern.search(text):
                    short = name.replace("(anonymous namespace)::", "")
                    problems.append(f"no {need.describe()} instruction in kernel {short} ({arch})")
    return problems


def problem(sass: list[Code], ptx: list[Code], need: MmaInstruction, capability: tuple[int, int] | None = None,
            arch: str | None = None) -> str | None:
    """Why the library read as (sass, ptx) fails `need` on a GPU of `capability` (or in `arch`'s SASS), or None."""
    if arch is not None:
        codes, why = [c for c in sass if c.arch == arch], f"the library has no {arch} SASS"
    else:
        codes, why = code_that_runs(sass, ptx, capability)
    if not codes:
        return why
    problems = missing(codes, need)
    if not problems:
        return None
    shown = "; ".join(problems[:3]) + (f" (and {len(problems) - 3} more)" if len(problems) > 3 else "")
    return (f"{shown}: this group's kernels must compute on the tensor cores' {need.describe()} "
            "instruction (the README's How it is graded)")


def check(library: str | Path, need: MmaInstruction, capability: tuple[int, int] | None = None,
          arch: str | None = None) -> None:
    """Raise grader.verify.checks.CheckFailure naming each kernel of `need` whose code lacks its instruction, in
    the code a GPU of `capability` runs (default: this process's GPU), or in `arch`'s SASS ("sm_90a"). On a
    machine without cuobjdump the calling check is skipped as not run here (it costs its group nothing)."""
    from grader.verify.checks import CheckFailure

    try:
        cuobjdump()
    except SassError as e:  # the grading machine's toolkit, not the submission: reported as not run, at no cost
        import pytest

        from grader.verify.scoring import NOT_RUN_HERE

        pytest.skip(f"{NOT_RUN_HERE}{e}")
    try:
        sass, ptx = read_library(library)
    except SassError as e:
        raise CheckFailure(str(e)) from None
    if arch is None and capability is None:
        import torch

        capability = torch.cuda.get_device_capability()
    found = problem(sass, ptx, need, capability, arch)
    if found:
        raise CheckFailure(found)


# Whether the grader read this exercise's library itself, as built, before any submitted code ran (the
# grading suite sets it from the parent's build result, before the integrity snapshot): then the parent
# judges each InstructionCheck (grader.run.grading.instruction_verdicts), and the grading process, whose
# submitted code could have replaced the file on disk by the time its check ran, does not read it again.
read_by_grader = False


def instruction_of(run) -> MmaInstruction | None:
    """The instruction a check's `run` looks for, where it is an InstructionCheck (or wraps one, `__wrapped__`)."""
    import inspect

    found = inspect.unwrap(run)
    return found.need if isinstance(found, InstructionCheck) else None


class InstructionCheck:
    """A spec's check that `need` is in its kernels' machine code (`check`), found by the grader: judged
    from the library as built, outside the grading process, where the grader read it (read_by_grader);
    in the grading process otherwise."""

    def __init__(self, need: MmaInstruction):
        self.need = need

    def __call__(self, ctx) -> None:
        if not read_by_grader:
            check(library_of(ctx.exercise_dir), self.need)


def library_of(exercise_dir: str | Path) -> Path:
    """The library the grader built for this exercise folder (grader.toolchain.build's path, not the module's
    own word for it)."""
    from grader.toolchain.build import build_dir_for, namespace_for

    exercise_dir = Path(exercise_dir).resolve()
    return build_dir_for(exercise_dir) / f"{namespace_for(exercise_dir)}.so"
