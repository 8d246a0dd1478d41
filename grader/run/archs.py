"""Compile every exercise's kernel sources for each GPU architecture the course supports, and say
per exercise and architecture: compiled, or the compiler's error (file:line).

A GPU runs only code compiled for its architecture (or PTX it can JIT-compile), and `#if
__CUDA_ARCH__` paths, inline PTX and intrinsics differ between architectures: code that builds for
the grading GPU may not build for a student's T4 (7.5) or Blackwell (10.0, 12.0). This builds each
`.cu` for each of ARCHS without a GPU, the way a real build would (grader.toolchain.build's flags and include
folders, an exercise's build.json, torch's nvcc flags), one nvcc per source and architecture, several
at once.

Only the device half is compiled here (`nvcc -cubin`: the front end, cicc and ptxas for that
architecture, so inline PTX an architecture lacks fails here). The rest of a build does not depend
on the architecture, so compiling it once per architecture would prove nothing more: the `.cpp` bindings are
host C++ that nvcc never sees, and the host half of a `.cu` sees no `__CUDA_ARCH__`; every regular
build (`make grade`, and `make test`'s tests/test_builds.py for every solution and stub) compiles
both.

    python -m grader.run.archs                          solutions/ and exercises/, every architecture
    python -m grader.run.archs --target solutions --ex 05 --arch 7.5 8.0
    python -m grader.run.archs DIR [DIR ...]            these exercise folders (a student's, a copy)
"""
from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from functools import lru_cache
from pathlib import Path

from grader import env
from grader.toolchain import build

# The compute capabilities the course claims (README, "Supported"): Turing (T4) 7.5, Ampere 8.0
# (A100) and 8.6 (RTX 30, A10), Ada 8.9 (RTX 40, L4), Hopper 9.0, Blackwell 10.0 (B200) and 12.0
# (RTX 50).
ARCHS = ("7.5", "8.0", "8.6", "8.9", "9.0", "9.0a", "10.0", "12.0")
TIMEOUT = 900  # seconds for one nvcc


@dataclass
class ArchResult:
    folder: str  # the exercise folder
    source: str  # the .cu file's name
    arch: str  # "7.5"
    ok: bool
    seconds: float = 0.0
    error: str = ""  # condensed: the compiler's error lines, file:line first
    warnings: list[str] = field(default_factory=list)  # the compiler's warning lines when it compiled


def sm(arch: str) -> str:
    """'8.6' -> '86', as in sm_86; '9.0a' -> '90a' (9.0's arch-specific instructions: wgmma, TMA)."""
    major, _, minor = arch.partition(".")
    if not (major.isdigit() and minor.rstrip("a").isdigit()):
        raise ValueError(f"not a compute capability: {arch!r} (e.g. 8.6, 9.0a)")
    return major + minor


def gencode(arch: str) -> str:
    """The flag torch's TORCH_CUDA_ARCH_LIST=`arch` gives nvcc: SASS for that architecture."""
    return f"-gencode=arch=compute_{sm(arch)},code=sm_{sm(arch)}"


def kernel_sources(folder: Path) -> list[Path]:
    return [p for p in build.sources_of(folder) if p.suffix == ".cu"]


@lru_cache(maxsize=1)
def torch_nvcc_flags() -> tuple[str, ...]:
    """What torch.utils.cpp_extension gives every .cu besides the architecture and our own flags:
    its nvcc flags (the half/bfloat16 operator macros, --expt-relaxed-constexpr), its include
    folders, and the C++ standard this torch builds extensions with (build.cpp_standard_flag)."""
    env.configure()  # before cpp_extension is imported: it reads CUDA_HOME once
    cpp_extension = build.cpp_extension_module()
    includes = [flag for path in cpp_extension.include_paths() for flag in ("-isystem", path)]
    return (*cpp_extension.COMMON_NVCC_FLAGS, *includes, build.cpp_standard_flag())


def nvcc() -> str:
    env.configure()
    home = env.find_cuda_home()
    if home is None:
        raise SystemExit("no CUDA toolkit found (set CUDA_HOME): the architecture check needs nvcc")
    return str(Path(home) / "bin" / "nvcc")


def command(folder: Path, source: Path, arch: str, out: Path) -> list[str]:
    """nvcc compiling `source`'s device code for `arch` into `out`, as grader.toolchain.build would compile it."""
    extra = build.build_config(folder)
    namespace = build.namespace_for(folder)
    cmd = [nvcc()]
    if os.environ.get("CC"):  # as torch does
        cmd += ["-ccbin", os.environ["CC"]]
    cmd += [f"-DTORCH_EXTENSION_NAME={namespace}", "-DTORCH_API_INCLUDE_EXTENSION_H"]
    for path in [env.INCLUDE_DIR, folder, *extra.get("extra_include_paths", [])]:
        cmd.append(f"-I{Path(path).resolve()}")
    flags = list(torch_nvcc_flags())
    if any(f.startswith("-std=") for f in extra.get("extra_cuda_cflags", [])):
        flags = [f for f in flags if not f.startswith("-std=")]
    cmd += [*flags, gencode(arch), "-Xcompiler", "-fPIC", *build.CUDA_FLAGS, *extra.get("extra_cuda_cflags", [])]
    # relative to the folder's parent, so messages read `05_matmul/matmul.cu(214): error: ...`
    return cmd + ["-cubin", f"{folder.name}/{source.name}", "-o", str(out)]


_WARNING = re.compile(r"\bwarning\b", re.IGNORECASE)
_TEMP_FILE = re.compile(r"\S*/tmpxft_[\w.-]+\.ptx")  # nvcc's temporary .ptx: its name differs every run


def compile_one(folder: Path, source: Path, arch: str, scratch: Path) -> ArchResult:
    out = scratch / f"{folder.parent.name}.{folder.name}.{source.stem}.sm_{sm(arch)}.cubin"
    start = time.perf_counter()
    try:
        proc = subprocess.run(command(folder, source, arch, out), cwd=folder.parent, stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, timeout=TIMEOUT)
        output, ok = proc.stdout.decode(errors="replace"), proc.returncode == 0 and out.is_file()
    except subprocess.TimeoutExpired:
        output, ok = f"nvcc did not finish within {TIMEOUT} s", False
    # ptxas names nvcc's temporary .ptx (a PTX line number is all it knows)
    output = _TEMP_FILE.sub(f"<the PTX of {source.name}>", output)
    result = ArchResult(str(folder), source.name, arch, ok, round(time.perf_counter() - start, 1))
    if ok:
        result.warnings = [line.strip() for line in output.splitlines() if _WARNING.search(line)]
    else:
        result.error = build.condense_compiler_output(output)
    out.unlink(missing_ok=True)
    return result


def default_jobs() -> int:
    """One nvcc per core this process may use (nvcc compiles one architecture on one core)."""
    return env.usable_cores()


def check(folders: list[Path], archs=ARCHS, jobs: int | None = None, log=None) -> list[ArchResult]:
    """Compile every .cu of `folders` for every architecture in `archs`, `jobs` at a time."""
    for arch in archs:
        sm(arch)  # a typo fails before anything compiles
    folders = [Path(f).resolve() for f in folders]
    work = list(enumerate((f, s, a) for f in folders for s in kernel_sources(f) for a in archs))
    torch_nvcc_flags()  # once, before the threads
    with tempfile.TemporaryDirectory(prefix="course-archs-") as tmp, ThreadPoolExecutor(jobs or default_jobs()) as pool:
        def one(item):
            r = compile_one(*item[1], Path(tmp))
            if log:
                status = "ok" if r.ok else "FAILED"
                log(f"{status:6s} {r.seconds:6.1f}s {_name(Path(r.folder))}/{r.source} sm_{sm(r.arch)}")
            return item[0], r

        # largest sources first, so the longest compiles start early and the tail is short
        started = sorted(work, key=lambda item: -item[1][1].stat().st_size)
        return [r for _, r in sorted(pool.map(one, started), key=lambda done: done[0])]


def _name(folder: Path) -> str:
    """`solutions/05_matmul`, or the folder's path when it is not in this repository."""
    try:
        return str(folder.relative_to(env.REPO))
    except ValueError:
        return str(folder)


def report(results: list[ArchResult]) -> str:
    """A table (one row per exercise folder, one column per architecture), then each failure's
    compiler error."""
    archs = list(dict.fromkeys(r.arch for r in results))
    folders = list(dict.fromkeys(r.folder for r in results))
    cell = {}
    for r in results:  # a folder compiles for an architecture when all its .cu files do
        key = (r.folder, r.arch)
        cell[key] = cell.get(key, True) and r.ok
    width = max([len("compute capability")] + [len(_name(Path(f))) for f in folders])
    lines = ["  ".join([f"{'compute capability':{width}s}", *(f"{a:>6s}" for a in archs)])]
    for f in folders:
        cells = [f"{'ok' if cell[(f, a)] else 'FAILED':>6s}" for a in archs]
        lines.append("  ".join([f"{_name(Path(f)):{width}s}", *cells]))
    for r in results:
        if not r.ok:
            lines += ["", f"{_name(Path(r.folder))}/{r.source} does not compile for {r.arch} (sm_{sm(r.arch)}):",
                      *("  " + line for line in r.error.splitlines())]
    lines += _arch_warnings(results)
    failed = sum(1 for ok in cell.values() if not ok)
    lines += ["", f"{len(cell) - failed} of {len(cell)} exercise x architecture builds compiled"
              + (f", {failed} FAILED" if failed else "")]
    return "\n".join(lines)


def _arch_warnings(results: list[ArchResult]) -> list[str]:
    """Warnings that some architectures give and others not (a warning every architecture gives, such
    as a stub's unused constant, is the regular build's business, not this check's)."""
    by_source: dict[tuple[str, str], list[ArchResult]] = {}
    for r in results:
        by_source.setdefault((r.folder, r.source), []).append(r)
    lines = []
    for (folder, source), rs in by_source.items():
        compiled = [r for r in rs if r.ok]
        everywhere = set.intersection(*(set(r.warnings) for r in compiled)) if compiled else set()
        for r in compiled:
            only_here = [w for w in r.warnings if w not in everywhere]
            if only_here:
                lines += ["", f"{_name(Path(folder))}/{source} warns for {r.arch} (sm_{sm(r.arch)}) only:",
                          *("  " + w for w in only_here[:10])]
    return lines


def folders_of(targets: list[str], exercises: list[str]) -> list[Path]:
    """The exercise folders of each target (solutions, exercises or a folder laid out like them)
    that has them, narrowed to `exercises` (numbers or names, as `make grade EX=`)."""
    from grader.specs import select_modules

    names = {m[2:] for m in select_modules(exercises or None)}
    found = []
    for target in targets:
        root = env.REPO / target if target in ("solutions", "exercises") else Path(target).resolve()
        if root.is_dir():
            found += sorted(p for p in root.iterdir() if p.is_dir() and p.name in names)
    return found


def main(argv: list[str] | None = None) -> int:
    from grader.run.cli import UsageParser, exercise_names  # as `python -m grader`: one-line usage errors, EX lists

    parser = UsageParser(prog="python -m grader.run.archs", description=__doc__,
                         formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dirs", nargs="*", type=Path, help="exercise folders (default: those of --target)")
    parser.add_argument("--target", nargs="+", default=["solutions", "exercises"],
                        help="solutions, exercises or a folder laid out like them (default: solutions exercises)")
    parser.add_argument("--ex", nargs="+", default=[], help="only these exercises (numbers or names)")
    parser.add_argument("--arch", nargs="+", default=list(ARCHS),
                        help=f"compute capabilities (default: {' '.join(ARCHS)})")
    parser.add_argument("--jobs", type=int, default=None, help="nvcc processes at once (default: the cores)")
    parser.add_argument("--json", type=Path, help="write the results here")
    parser.add_argument("--verbose", action="store_true", help="a line per compile as it finishes")
    args = parser.parse_args(argv)
    archs = [a for value in args.arch for a in value.replace(",", " ").split()]
    folders = [d.resolve() for d in args.dirs] if args.dirs else folders_of(args.target, exercise_names(args.ex))
    missing = [d for d in folders if not d.is_dir() or not kernel_sources(d)]
    if missing or not folders:
        raise SystemExit(f"no .cu sources in {', '.join(map(str, missing)) or 'the chosen folders'}")
    jobs = args.jobs or default_jobs()
    start = time.perf_counter()
    log = (lambda m: print(m, file=sys.stderr, flush=True)) if args.verbose else None
    results = check(folders, archs, jobs, log=log)
    print(report(results))
    print(f"({len(results)} nvcc runs, {time.perf_counter() - start:.0f} s on {jobs} cores)")
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in results], indent=1))
    return 0 if all(r.ok for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
