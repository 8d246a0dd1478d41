"""Build an exercise folder's C++/CUDA sources into a torch op library, cached by source hash.

Every exercise folder (in solutions/, exercises/ or a student's submission) builds into its own
directory under .build/<target>/<exercise>/, so two targets never share a build lock, and its ops
are registered under a namespace unique to that folder, so a student build and the reference can
be loaded into one process side by side.

Command line (used by the grader to build several folders in parallel, one process each):
    python -m grader.toolchain.build DIR [DIR ...] [--json OUT]
"""
from __future__ import annotations

import argparse
import fcntl
import hashlib
import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import threading
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Mapping

from grader import env

SOURCE_SUFFIXES = (".cu", ".cpp")
HEADER_SUFFIXES = (".h", ".cuh", ".hpp")
# -lineinfo lets compute-sanitizer and the profiler name source lines; it does not slow the code.
# --resource-usage makes ptxas print each kernel's registers, spills and shared memory, which the
# grader's resource report reads (grader.run.resources) from the build's per-object logs.
CUDA_FLAGS = ["-O3", "-lineinfo", "--resource-usage"]
CXX_FLAGS = ["-O2"]  # torch picks the C++ standard its headers need

# The torch headers every binding file includes (course/ops.h's and the four each .cpp includes),
# compiled once into a GCC precompiled header that every .cpp gets with `-include`: parsing them was
# most of a binding file's compile (on 2 cores, 15 of 16 CPU-seconds for 01's leaky_relu.cpp; 7 with
# the header precompiled, which takes 23 once). They come first in every .cpp, as they would from its
# own includes; without the .gch (not made yet, or GCC refuses it: another compiler, other flags)
# GCC reads the header as text, with the same result, only slower.
PCH_HEADERS = ["initializer_list", "optional", "string", "type_traits", "ATen/core/Tensor.h", "c10/util/Exception.h",
               "torch/library.h", "ATen/ops/empty.h", "c10/cuda/CUDAGuard.h", "c10/cuda/CUDAStream.h"]
PCH_NAME = "course_pch.h"


@dataclass
class BuildResult:
    exercise_dir: str
    namespace: str
    ok: bool
    library: str | None = None
    seconds: float = 0.0
    cached: bool = False
    error: str = ""  # the compiler's own error lines, file:line first
    log: str = ""  # the whole build output, for the detailed report
    extra: dict = field(default_factory=dict)


def _slug(text: str) -> str:
    return re.sub(r"[^A-Za-z0-9_]", "_", text)


def target_tag(exercise_dir: Path) -> str:
    """A short, stable name for the folder holding this exercise (solutions, exercises, a student)."""
    parent = exercise_dir.resolve().parent
    if parent in (env.REPO / "solutions", env.REPO / "exercises"):
        return parent.name
    digest = hashlib.sha1(str(parent).encode()).hexdigest()[:8]
    return f"{_slug(parent.name)[:24]}_{digest}"


def namespace_for(exercise_dir: Path) -> str:
    """The op namespace for this folder's build, e.g. `ex01_leaky_relu_solutions`."""
    return f"ex{_slug(exercise_dir.resolve().name)}_{target_tag(exercise_dir)}"


def build_dir_for(exercise_dir: Path) -> Path:
    return env.BUILD_ROOT / target_tag(exercise_dir) / exercise_dir.resolve().name


def sources_of(exercise_dir: Path) -> list[Path]:
    return sorted(p for p in exercise_dir.iterdir() if p.suffix in SOURCE_SUFFIXES)


def build_config(exercise_dir: Path) -> dict[str, list[str]]:
    """Extra flags from an optional `build.json` in the exercise folder (for an exercise that links
    a library, e.g. cuDNN): lists under extra_cflags, extra_cuda_cflags, extra_ldflags and
    extra_include_paths. `${pkg:NAME}` in a value is the folder of the installed Python package NAME
    (e.g. `${pkg:nvidia.cudnn}/include`), so no machine's paths are written into the file."""
    path = exercise_dir / "build.json"
    if not path.is_file():
        return {}
    import importlib.util

    def pkg_dir(m: re.Match) -> str:
        spec = importlib.util.find_spec(m.group(1))
        if spec is None or not spec.submodule_search_locations:
            raise RuntimeError(f"{path}: the Python package {m.group(1)} is not installed")
        return list(spec.submodule_search_locations)[0]

    raw = json.loads(path.read_text())
    keys = ("extra_cflags", "extra_cuda_cflags", "extra_ldflags", "extra_include_paths")
    unknown = set(raw) - set(keys)
    if unknown:
        raise RuntimeError(f"{path}: unknown keys {sorted(unknown)}; known: {', '.join(keys)}")
    return {k: [re.sub(r"\$\{pkg:([\w.]+)\}", pkg_dir, v) for v in raw.get(k, [])] for k in keys}


def _fingerprint(exercise_dir: Path, namespace: str, config: str | None = None) -> str:
    """Hash of everything that changes the built library: the configuration stamp (flags, toolchain,
    shared headers; `config` when the caller has it) and the exercise's own sources and headers.
    Cheap (no torch import), so checking hundreds of folders' caches takes no time."""
    h = hashlib.sha256((config or _config_stamp(exercise_dir, namespace)).encode())
    for p in sorted(exercise_dir.iterdir()):
        if p.suffix in SOURCE_SUFFIXES + HEADER_SUFFIXES and p.is_file():
            h.update(p.name.encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()


def _config_stamp(exercise_dir: Path, namespace: str) -> str:
    """What the build depends on besides the contents of the exercise's own sources and headers: when
    it matches the last build's, torch's build.ninja is still right and ninja alone can rebuild (its
    depfiles track which headers each source includes). Anything in doubt is in here, so that a
    change of it goes the full way through torch.utils.cpp_extension."""
    from importlib.metadata import version

    h = hashlib.sha256()
    names = [p.name for p in sorted(exercise_dir.iterdir()) if p.suffix in SOURCE_SUFFIXES + HEADER_SUFFIXES]
    h.update("\0".join(["sources", *names]).encode() + b"\0")
    for p in sorted(env.INCLUDE_DIR.rglob("*")):
        if p.is_file():
            h.update(str(p.relative_to(env.INCLUDE_DIR)).encode() + b"\0" + p.read_bytes() + b"\0")
    config = [str(exercise_dir), namespace, str(env.INCLUDE_DIR), version("torch"), sys.prefix, sys.version,
              os.environ.get("TORCH_CUDA_ARCH_LIST", ""), os.environ.get("CUDA_HOME", ""), os.environ.get("CXX", ""),
              *CUDA_FLAGS, *CXX_FLAGS, json.dumps(build_config(exercise_dir), sort_keys=True), str(_ninja()),
              str(pch_header())]
    h.update("\0".join(config).encode())
    return h.hexdigest()


def _cxx() -> str:
    """The C++ compiler torch.utils.cpp_extension runs for .cpp files."""
    return os.environ.get("CXX", "c++")


def _pch_text() -> str:
    return "// Generated by grader/toolchain/build.py: the torch headers every binding file includes.\n#pragma once\n" + "".join(
        f"#include <{h}>\n" for h in PCH_HEADERS)


def pch_header() -> Path:
    """The precompiled header's text header, BUILD_ROOT/pch/<key>/course_pch.h (its .gch beside it).
    The key is what the .gch depends on, found without importing torch: the headers, torch's
    version and install, Python, the compiler (its binary's path and date) and our C++ flags."""
    from importlib.metadata import version

    compiler = shutil.which(_cxx()) or _cxx()
    try:
        stamp = os.stat(os.path.realpath(compiler)).st_mtime_ns
    except OSError:
        stamp = 0
    key = hashlib.sha256("\0".join([_pch_text(), version("torch"), sys.prefix, sys.version, compiler, str(stamp),
                                    os.environ.get("CUDA_HOME", ""), *CXX_FLAGS]).encode()).hexdigest()[:16]
    return env.BUILD_ROOT / "pch" / key / PCH_NAME


def cpp_extension_module():
    """torch.utils.cpp_extension, once torch itself is imported: `import torch` waits for another thread's
    import of torch to end (grader.specs.Selection imports the specs, and torch, in a thread), where importing
    the submodule first can run it against a half-initialized torch.utils ("cannot import name 'set_module'
    from partially initialized module 'torch.utils'", seen in `make mutants SAME_CODE=1`)."""
    import torch  # noqa: F401

    from torch.utils import cpp_extension
    return cpp_extension


def cpp_standard_flag() -> str:
    """The C++ standard this torch builds extensions with (c++17 up to some 2.x, c++20 since), as a flag: the
    newest its cpp_extension module names in a flag (it names no other standard in one)."""
    import inspect

    standards = re.findall(r"-std=c\+\+(\d+)", inspect.getsource(cpp_extension_module()))
    return f"-std=c++{max(map(int, standards))}" if standards else "-std=c++17"


def torch_cxx_flags() -> list[str]:
    """What torch.utils.cpp_extension gives every .cpp but its per-build macro and include folders:
    the macro every extension gets, its include folders (torch's, CUDA's, Python's) and the C++
    standard (cpp_standard_flag). A precompiled header is used only with the flags it was made with
    (tests/test_builds.py checks them against a real build.ninja)."""
    import sysconfig

    cpp_extension = cpp_extension_module()
    includes = [*cpp_extension.include_paths("cuda"), sysconfig.get_path("include", scheme="posix_prefix")]
    return ["-DTORCH_API_INCLUDE_EXTENSION_H", *(w for p in includes for w in ("-isystem", p)), "-fPIC",
            cpp_standard_flag()]


def _writer() -> str:
    """This process and thread, for a temporary file's name: builds run in processes and in threads."""
    return f"{os.getpid()}.{threading.get_ident()}"


def ensure_pch() -> tuple[Path, str]:
    """The precompiled header for this build's `-include`, made first if no other build is making it
    (one that is would make this one wait: it reads the header as text instead). Returns the header
    and a line for the build's log when this call made it."""
    header = pch_header()
    gch = header.with_name(header.name + ".gch")
    failed = header.with_name("failed")
    header.parent.mkdir(parents=True, exist_ok=True)
    if not header.is_file() or header.read_text() != _pch_text():
        tmp = header.with_name(f".{header.name}.{_writer()}")
        tmp.write_text(_pch_text())
        os.replace(tmp, header)
    if gch.is_file() or failed.is_file():
        return header, ""
    fd = os.open(header.with_name(".lock"), os.O_CREAT | os.O_RDWR)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return header, ""
        if gch.is_file():
            return header, ""
        tmp = gch.with_name(f".{gch.name}.{_writer()}")
        flags = [*torch_cxx_flags(), *CXX_FLAGS]
        start = time.perf_counter()
        proc = subprocess.run([_cxx(), *flags, "-x", "c++-header", str(header), "-o", str(tmp)],
                              stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
        if proc.returncode == 0 and tmp.is_file():
            os.replace(tmp, gch)
            return header, f"precompiled header {gch} made in {time.perf_counter() - start:.1f} s\n"
        tmp.unlink(missing_ok=True)  # not again for this key: each build reads the header as text
        failed.write_text(proc.stdout.decode(errors="replace"))
        return header, f"precompiled header not made (the builds read it as text): see {failed}\n"
    finally:
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)


def _ninja() -> str | None:
    """The ninja that torch.utils.cpp_extension runs (the first on PATH), else the one installed
    beside this Python (the `ninja` package of a virtual environment that is not activated)."""
    found = shutil.which("ninja")
    if found:
        return found
    beside = Path(sys.executable).parent / "ninja"
    return str(beside) if beside.is_file() and os.access(beside, os.X_OK) else None


class _InDoubt(Exception):
    """The ninja-only rebuild could not tell a compiler error from a broken build folder."""


def _run_ninja(out_dir: Path, namespace: str, ninja: str) -> str:
    """Rebuild in `out_dir` with torch's own build.ninja, the way cpp_extension.load runs it (with
    MAX_JOBS), without importing torch. Raises RuntimeError with torch's message on a compiler
    error, _InDoubt when the failure is not a compiler's."""
    command = [ninja, "-v"]
    max_jobs = os.environ.get("MAX_JOBS")
    if max_jobs is not None and max_jobs.isdigit():
        command += ["-j", max_jobs]
    proc = subprocess.run(command, cwd=out_dir, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    output = proc.stdout.decode(errors="replace")
    if proc.returncode != 0:
        if "FAILED: " not in output:  # ninja itself failed (a missing file, a broken log): not a compile error
            raise _InDoubt(output)
        raise RuntimeError(f"Error building extension '{namespace}': {output}")
    if not (out_dir / f"{namespace}.so").is_file():
        raise _InDoubt(output)
    return output


STEP_LOGS = "logs"  # in the build folder: <object>.log, each compiler step's own output


def step_log_path(out_dir: Path, obj: str) -> Path:
    return out_dir / STEP_LOGS / f"{Path(obj).name}.log"


def save_step_logs(out_dir: Path, output: str) -> list[Path]:
    """Keep each compile step's own output (the compiler's warnings, ptxas's resource usage) as
    `logs/<object>.log`, from ninja's verbose output (`[i/n] command` then what the command printed).
    Ninja recompiles only what changed, so an unchanged object's report comes from its last compile:
    a log is believed only while it is newer than its object (grader.run.resources)."""
    written, current, lines = [], None, []

    def flush() -> None:
        if current is not None:
            path = step_log_path(out_dir, current)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text("\n".join(lines) + ("\n" if lines else ""))
            written.append(path)

    for line in output.splitlines():
        if _BUILD_STEP.match(line):
            flush()
            obj = re.search(r"\s-o\s+(\S+)", line)
            current = obj.group(1) if obj and obj.group(1).endswith(".o") else None
            lines = []
        elif line.startswith("ninja: "):
            flush()
            current, lines = None, []
        elif current is not None:
            lines.append(line)
    flush()
    return written


_ERROR_LINE = re.compile(r"(error|Error|undefined reference|fatal)")
_NOT_ERRORS = ("FAILED:", "ninja: build stopped", "subprocess.", "Error building extension")
_BUILD_STEP = re.compile(r"^\[\d+/\d+\] ")  # ninja's command lines (their flags may say -Werror)


def condense_compiler_output(text: str, limit: int = 25) -> str:
    """The lines a student needs: each `file:line: error` with a line of context, no ninja noise."""
    lines = text.splitlines()
    keep: list[str] = []
    for i, line in enumerate(lines):
        # torch's "Error building extension 'x': [1/2] nvcc ..." is the command line, not the error
        if _ERROR_LINE.search(line) and not line.startswith(_NOT_ERRORS) and not _BUILD_STEP.match(line):
            keep.append(line.strip())
            # nvcc and gcc print the offending source line (and a caret) right after the message
            for extra in lines[i + 1 : i + 3]:
                if extra.startswith(" ") and not _ERROR_LINE.search(extra):
                    keep.append(extra.rstrip())
    if not keep:
        keep = [l for l in lines if l.strip()][-limit:]
    return "\n".join(keep[:limit])


class FolderLock:
    """An OS-level lock on a folder (the file `name` in it): released by the kernel when its holder
    dies, so a build killed mid-way never blocks the next one (torch's own lock file would)."""

    def __init__(self, directory: Path, name: str = ".course-build.lock"):
        directory.mkdir(parents=True, exist_ok=True)
        self.path = directory / name

    def __enter__(self):
        self.fd = os.open(self.path, os.O_CREAT | os.O_RDWR)
        fcntl.flock(self.fd, fcntl.LOCK_EX)
        return self

    def __exit__(self, *exc):
        fcntl.flock(self.fd, fcntl.LOCK_UN)
        os.close(self.fd)


def cached(exercise_dir: str | Path) -> BuildResult | None:
    """The result of an up-to-date earlier build of this folder, or None if it must be (re)built."""
    env.configure()
    exercise_dir = Path(exercise_dir).resolve()
    namespace = namespace_for(exercise_dir)
    out_dir = build_dir_for(exercise_dir)
    library, stamp = out_dir / f"{namespace}.so", out_dir / "fingerprint"
    if library.exists() and stamp.exists() and stamp.read_text() == _fingerprint(exercise_dir, namespace):
        return BuildResult(str(exercise_dir), namespace, ok=True, library=str(library), cached=True)
    return None


def build(exercise_dir: str | Path, verbose: bool = False, load: bool = True) -> BuildResult:
    """Compile (if the sources changed) and optionally load the exercise's op library."""
    env.configure()
    exercise_dir = Path(exercise_dir).resolve()
    namespace = namespace_for(exercise_dir)
    out_dir = build_dir_for(exercise_dir)
    result = BuildResult(str(exercise_dir), namespace, ok=False)
    start = time.perf_counter()
    with FolderLock(out_dir):
        stamp = out_dir / "fingerprint"
        library = out_dir / f"{namespace}.so"
        config = _config_stamp(exercise_dir, namespace)
        fingerprint = _fingerprint(exercise_dir, namespace, config)
        if library.exists() and stamp.exists() and stamp.read_text() == fingerprint:
            result.cached = True
        else:
            stamp.unlink(missing_ok=True)
            # torch's FileBaton lock left behind by a killed build would make load() wait forever;
            # we hold the directory's flock, so nobody else is using it.
            (out_dir / "lock").unlink(missing_ok=True)
            try:
                result.log, result.extra["ninja_only"] = _rebuild(exercise_dir, namespace, out_dir, config, verbose)
            except Exception as e:  # the compiler's message is in the exception text
                result.log = str(e)
                result.error = condense_compiler_output(str(e))
                result.seconds = time.perf_counter() - start
                return result
            stamp.write_text(fingerprint)
        result.library = str(library)
        if load:
            import torch

            torch.ops.load_library(str(library))
    result.ok = True
    result.seconds = time.perf_counter() - start
    return result


CONFIG_STAMP = "config"  # in the build folder: _config_stamp() of the build that wrote build.ninja


def _rebuild(exercise_dir: Path, namespace: str, out_dir: Path, config: str, verbose: bool) -> tuple[str, bool]:
    """Compile what changed: with ninja alone when the build folder holds torch's build.ninja for
    the same configuration (no torch import, no loader: seconds less per edit), else through
    torch.utils.cpp_extension (`config`: this build's _config_stamp()). Returns the build's output and
    whether ninja alone built it. The caller holds the folder's lock."""
    stamp = out_dir / CONFIG_STAMP
    ninja, build_file = _ninja(), out_dir / "build.ninja"
    if (ninja and build_file.is_file() and stamp.is_file() and stamp.read_text() == config
            # torch renames a library it rebuilds in one process with other sources (name_v1)
            and f"default {namespace}.so" in build_file.read_text().splitlines()
            # build.ninja's `-include` names it: the full way writes it again
            and pch_header().is_file()):
        try:
            output = _run_ninja(out_dir, namespace, ninja)
            save_step_logs(out_dir, output)
            if verbose:
                print(output, end="")
            return output, True
        except RuntimeError as e:
            save_step_logs(out_dir, str(e))
            raise
        except _InDoubt:
            pass  # the full way below rewrites build.ninja
    stamp.unlink(missing_ok=True)
    try:
        log = _compile(exercise_dir, namespace, out_dir, verbose)
    except RuntimeError as e:
        save_step_logs(out_dir, str(e))
        # torch wrote build.ninja and ninja ran: the sources are at fault, and the next build,
        # once they are fixed, can be ninja's alone
        if str(e).startswith(f"Error building extension '{namespace}'"):
            stamp.write_text(config)
        raise
    save_step_logs(out_dir, log)
    stamp.write_text(config)
    return log, False


def _compile(exercise_dir: Path, namespace: str, out_dir: Path, verbose: bool) -> str:
    """Build through torch.utils.cpp_extension; returns its output, ninja's included. Torch shows
    ninja's output only in verbose mode, and then on file descriptor 1: it is caught there, so the
    compiler's warnings and resource usage are kept (save_step_logs) and a compiler error reads as
    in quiet mode ("Error building extension '<name>': <output>")."""
    import io
    import tempfile
    from contextlib import redirect_stdout

    cpp_extension = cpp_extension_module()

    ninja = _ninja()
    if ninja and not shutil.which("ninja"):  # torch runs the ninja on PATH: the one the fast path uses
        os.environ["PATH"] = os.pathsep.join([str(Path(ninja).parent), os.environ.get("PATH", "")])
    sources = [str(p) for p in sources_of(exercise_dir)]
    if not sources:
        raise RuntimeError(f"no .cu or .cpp sources in {exercise_dir}")
    extra = build_config(exercise_dir)
    pch, made = ensure_pch()
    captured = io.StringIO()
    failure: RuntimeError | None = None
    with tempfile.TemporaryFile() as ninja_out, redirect_stdout(captured):
        if sys.__stdout__ is not None:
            sys.__stdout__.flush()  # what this process printed before goes to its own place
        saved = os.dup(1)
        os.dup2(ninja_out.fileno(), 1)
        try:
            cpp_extension.load(
                name=namespace,
                sources=sources,
                extra_include_paths=[str(env.INCLUDE_DIR), str(exercise_dir), *extra.get("extra_include_paths", [])],
                extra_cflags=CXX_FLAGS + [f"-DCOURSE_NS={namespace}", *extra.get("extra_cflags", []),
                                          f"-include {shlex.quote(str(pch))}"],
                extra_cuda_cflags=CUDA_FLAGS + extra.get("extra_cuda_cflags", []),
                extra_ldflags=extra.get("extra_ldflags", []),
                build_directory=str(out_dir),
                is_python_module=False,
                verbose=True,
            )
        except RuntimeError as e:
            failure = e
        finally:
            os.dup2(saved, 1)
            os.close(saved)
        ninja_out.seek(0)
        output = ninja_out.read().decode(errors="replace")
    if failure is not None:
        if str(failure).strip() == f"Error building extension '{namespace}'":  # verbose: no output in it
            raise RuntimeError(f"{failure}: {output}") from failure
        raise failure
    if verbose:
        print(made + captured.getvalue() + output, end="")
    return made + captured.getvalue() + output


class Library:
    """A loaded exercise library: its namespace and its ops (`lib.ops.leaky_relu(...)`)."""

    def __init__(self, result: BuildResult):
        import torch

        self.namespace = result.namespace
        self.path = result.library
        self.ops = getattr(torch.ops, result.namespace)
        self._took = None  # the library's course_took, once asked for

    def qualname(self, op: str) -> str:
        return f"{self.namespace}::{op}"

    def took(self, name: str, dtype=None) -> None:
        """Mark a branch of the exercise's Python code as taken, as `course::took` marks one of its C++
        code, in the library's own set (grader/verify/paths.py): "name", or "name/float32" for a torch dtype."""
        if self._took is None:
            import ctypes

            # a library whose binding file does not include course/ops.h has no set: nothing is marked
            found = getattr(ctypes.CDLL(self.path), "course_took", None)
            if found is not None:
                found.argtypes = [ctypes.c_char_p]
            self._took = found or (lambda _name: None)
        self._took(f"{name}/{str(dtype).removeprefix('torch.')}".encode() if dtype is not None else name.encode())


_loaded: dict[str, Library] = {}


def load_library(path: str | Path) -> Library:
    """Build (if needed) and load the library of the exercise folder holding `path`.

    Called by each exercise's Python wrapper: `lib = load_library(__file__)`.
    """
    exercise_dir = Path(path).resolve()
    if exercise_dir.is_file():
        exercise_dir = exercise_dir.parent
    key = str(exercise_dir)
    if key not in _loaded:
        result = build(exercise_dir)
        if not result.ok:
            raise BuildError(exercise_dir, result.error)
        _loaded[key] = Library(result)
    return _loaded[key]


class BuildError(RuntimeError):
    def __init__(self, exercise_dir: Path, message: str):
        super().__init__(f"build of {exercise_dir} failed:\n{message}")
        self.message = message


def write_slot(folder: Path, source: Path, texts: Mapping[str, str] | None = None) -> None:
    """Make `folder` a copy of the folder `source` with `texts` (file name -> its whole text) in place
    of those files, writing only the files whose bytes differ from what `folder` holds: ninja, in the
    slot's own build folder (keyed by the slot's path), then recompiles only what changed since the
    slot's last program. Every slot writer uses this: grader.run.mutants, the known-wrong variants in
    tests/grading.py."""
    texts = dict(texts or {})
    folder.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(folder / "__pycache__", ignore_errors=True)  # a .py rewritten within a second: no stale .pyc
    wanted = {p.name for p in source.iterdir() if p.is_file()}
    unknown = set(texts) - wanted
    if unknown:
        raise ValueError(f"{source} has no file {', '.join(sorted(unknown))}")
    for p in folder.iterdir():
        if p.is_file() and p.name not in wanted:
            p.unlink()
    for name in sorted(wanted):
        data = texts[name].encode() if name in texts else (source / name).read_bytes()
        dst = folder / name
        if not dst.is_file() or dst.read_bytes() != data:
            dst.write_bytes(data)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("dirs", nargs="+", type=Path)
    parser.add_argument("--json", type=Path, help="write the build results here")
    parser.add_argument("--verbose", action="store_true")
    args = parser.parse_args(argv)
    results = []
    for d in args.dirs:
        r = build(d, verbose=args.verbose, load=False)
        results.append(r)
        status = "cached" if r.cached else ("ok" if r.ok else "FAILED")
        print(f"{status:7s} {r.seconds:6.1f}s {d}", file=sys.stderr)
        if not r.ok:
            print(r.error, file=sys.stderr)
    if args.json:
        args.json.write_text(json.dumps([asdict(r) for r in results], indent=1))
    return 0 if all(r.ok for r in results) else 1


if __name__ == "__main__":
    sys.exit(main())
