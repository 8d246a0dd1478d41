"""Where the repository lives, and the CUDA toolchain environment for builds.

`configure()` must run before `torch.utils.cpp_extension` is imported: that module reads
CUDA_HOME once, at import time.
"""
from __future__ import annotations

import os
import re
import shutil
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
INCLUDE_DIR = REPO / "grader" / "toolchain" / "include"
BUILD_ROOT = Path(os.environ.get("COURSE_BUILD_DIR", REPO / ".build"))

# Covers Colab's T4 (7.5) and Hopper (9.0a: 9.0 with its own wgmma and TMA, 05's kernel 6) when no GPU
# is present to ask.
DEFAULT_ARCH_LIST = "7.5;9.0a"
HOPPER_ARCH_LIST = "9.0a"  # a 9.0 GPU's own build (torch's default, "9.0+PTX", has no wgmma or TMA)


def find_cuda_home() -> str | None:
    """The CUDA toolkit root: $CUDA_HOME, /usr/local/cuda, or derived from nvcc on PATH.

    torch's own guess takes the parent of the `nvcc` on PATH, which is wrong when that nvcc
    is a wrapper script in /usr/local/bin; we require the toolkit's headers to be there.
    """
    candidates = [os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"]
    nvcc = shutil.which("nvcc")
    if nvcc:
        candidates.append(str(Path(nvcc).resolve().parent.parent))
    for root in candidates:
        if root and (Path(root) / "include" / "cuda_runtime.h").exists() and (Path(root) / "bin" / "nvcc").exists():
            return root
    return None


def gpu_present() -> bool:
    """True when a CUDA device is usable. Cheap, and without importing torch."""
    if os.environ.get("CUDA_VISIBLE_DEVICES", None) in ("", "-1"):
        return False
    return any(Path("/dev").glob("nvidia[0-9]*"))


def visible_gpus(dev: Path = Path("/dev")) -> list[str]:
    """The CUDA devices this process may use, as CUDA_VISIBLE_DEVICES entries; [] without a GPU.

    Without CUDA_VISIBLE_DEVICES, CUDA numbers the GPUs it can open 0, 1, ...: a container given
    only the host's fourth GPU has /dev/nvidia3, which CUDA calls device 0."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return [d.strip() for d in visible.split(",") if d.strip() and d.strip() != "-1"]
    return [str(i) for i in range(len(list(dev.glob("nvidia[0-9]*"))))]


def configure() -> dict[str, str]:
    """Set CUDA_HOME and TORCH_CUDA_ARCH_LIST for extension builds, and where child processes keep
    compiled Python (`keep_bytecode`); return what was set."""
    changed = keep_bytecode()
    cuda_home = find_cuda_home()
    if cuda_home and os.environ.get("CUDA_HOME") != cuda_home:
        os.environ["CUDA_HOME"] = changed["CUDA_HOME"] = cuda_home
    if not os.environ.get("TORCH_CUDA_ARCH_LIST"):
        if not gpu_present():
            os.environ["TORCH_CUDA_ARCH_LIST"] = changed["TORCH_CUDA_ARCH_LIST"] = DEFAULT_ARCH_LIST
        elif gpu_capabilities() == {"9.0"}:
            os.environ["TORCH_CUDA_ARCH_LIST"] = changed["TORCH_CUDA_ARCH_LIST"] = HOPPER_ARCH_LIST
        # other GPUs: torch's own choice, each visible GPU's compute capability
    return changed


BYTECODE_DIR = BUILD_ROOT / "pycache"


def keep_bytecode() -> dict[str, str]:
    """Where the interpreter's packages carry no compiled Python (torch's .pyc beside its sources) and
    PYTHONDONTWRITEBYTECODE is set, as in many containers, every grading process compiled torch's modules
    from source: 6 s of CPU each on an H200 host (cProfile of a grading process), on the critical path of
    a warm grade. There, child processes (builds, grading processes, the yardstick) keep it under
    .build/pycache, written (PYTHONDONTWRITEBYTECODE dropped for them) unless the grader itself asks for
    none (grader.run.mutants sets it after this: a mutant slot's .py changes within a second, so its
    processes only read the cache). Nothing changes where the packages have their .pyc (a prefix would
    hide them: each child would compile torch once more) or the user chose a place (PYTHONPYCACHEPREFIX)."""
    if os.environ.get("PYTHONPYCACHEPREFIX") or _bytecode_beside("torch"):
        return {}
    os.environ["PYTHONPYCACHEPREFIX"] = str(BYTECODE_DIR)
    os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
    return {"PYTHONPYCACHEPREFIX": str(BYTECODE_DIR)}


def _bytecode_beside(package: str) -> bool:
    """Whether `package` (found, not imported) has compiled Python beside its sources that this interpreter
    can use: its __init__'s and its largest subpackage's (torch._dynamo, which the grading processes import
    too) .pyc present and valid for the source (the interpreter's magic, and the source's mtime and size,
    or a hash); True where that cannot be told (no such package, no source)."""
    import importlib.util

    try:
        spec = importlib.util.find_spec(package)
    except (ImportError, ValueError):
        return True
    if spec is None or not spec.origin or not spec.origin.endswith(".py"):
        return True
    sources = [Path(spec.origin), Path(spec.origin).parent / "_dynamo" / "__init__.py"]
    return all(_valid_bytecode(src) for src in sources if src.is_file())


def _valid_bytecode(source: Path) -> bool:
    import importlib.util

    try:
        with open(importlib.util.cache_from_source(str(source)), "rb") as f:
            header = f.read(16)
        stat = source.stat()
    except (OSError, ValueError, NotImplementedError):
        return False
    if len(header) < 16 or header[:4] != importlib.util.MAGIC_NUMBER:
        return False
    if int.from_bytes(header[4:8], "little") & 1:  # hash-based: valid as its flags say
        return True
    return (int.from_bytes(header[8:12], "little") == int(stat.st_mtime) & 0xFFFFFFFF
            and int.from_bytes(header[12:16], "little") == stat.st_size & 0xFFFFFFFF)


def usable_cores() -> int:
    """The cores this process may run on: its affinity (a Slurm allocation, `taskset`, a container's
    cpuset), not the machine's count, which os.cpu_count() gives."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # no affinity on this platform
        return max(1, os.cpu_count() or 1)


def default_build_jobs(most: int | None = None) -> int:
    """How many exercise folders to build at once: half the cores (each build's ninja gets the cores left,
    MAX_JOBS), at most `most` (a grade of one target, whose ten folders want their ninjas wider)."""
    half = max(1, usable_cores() // 2)
    return half if most is None else max(1, min(most, half))


def nvidia_smi(query: str) -> list[str]:
    """One line per GPU of `nvidia-smi --query-gpu=<query>` (csv, no header, no units), without
    importing torch; [] without a GPU or nvidia-smi. The one place the course asks nvidia-smi."""
    import subprocess

    if not gpu_present():
        return []
    try:
        out = subprocess.run(["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader,nounits"],
                             capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return []
    return [line.strip() for line in out.stdout.splitlines() if line.strip()] if out.returncode == 0 else []


_fixed: dict[str, list[str]] = {}


def _fixed_smi(query: str) -> list[str]:
    """nvidia_smi(query) for what does not change while a process lives (names, drivers, capabilities):
    asked once a process (each call costs the edit loop a tenth of a second or more)."""
    if query not in _fixed:
        found = nvidia_smi(query)
        if not found:
            return found  # no answer (no GPU, or nvidia-smi failed): asked again next time
        _fixed[query] = found
    return _fixed[query]


def device_name() -> str:
    """The first GPU's name and driver version ("NVIDIA H200, 580.65"); "" without a GPU."""
    return (_fixed_smi("name,driver_version") or [""])[0]


def device_cc() -> str | None:
    """The first GPU's compute capability, e.g. "9.0"; None without a GPU."""
    cc = (_fixed_smi("compute_cap") or [""])[0].strip()
    return cc if re.fullmatch(r"\d+\.\d+", cc) else None


def device_capability(device: str | None = None) -> tuple[int, int] | None:
    """The compute capability of one GPU (`device`: its index, else the first that CUDA_VISIBLE_DEVICES
    leaves visible), from nvidia-smi, e.g. (9, 0); None where it cannot say."""
    index = device if device is not None else (os.environ.get("CUDA_VISIBLE_DEVICES") or "0").split(",")[0]
    found = _fixed_smi("compute_cap")
    try:
        major, minor = found[int(index)].split(".")
        return int(major), int(minor)
    except (IndexError, ValueError):
        return None


def gpu_free_gib() -> float | None:
    """The least free memory of the visible GPUs, in GiB; None where nvidia-smi cannot say."""
    free_mib = [float(m) for m in nvidia_smi("memory.free") if m.strip().replace(".", "").isdigit()]
    return min(free_mib) / 1024 if free_mib else None


def gpu_capabilities() -> set[str]:
    """The visible GPUs' compute capabilities ("9.0"), from nvidia-smi, without importing torch (this
    runs before torch.utils.cpp_extension is imported); empty when nvidia-smi cannot say."""
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    caps = _fixed_smi("compute_cap")
    if visible is not None:  # (indices only; a UUID list keeps them all)
        picked = [int(v) for v in visible.split(",") if v.strip().isdigit()]
        if picked and all(i < len(caps) for i in picked):
            caps = [caps[i] for i in picked]
    return set(caps)


# How a grading process's thread waits for the GPU (COURSE_CUDA_SYNC): CUDA's default ("auto") spins
# while a process has fewer contexts than the machine has cores, so a dozen grading processes that
# share one GPU by time slices each keep a core spinning through the others' slices.
CUDA_SYNC_ENV = "COURSE_CUDA_SYNC"
CUDA_SYNC_FLAGS = {"auto": 0, "spin": 1, "yield": 2, "blocking": 4}  # CU_CTX_SCHED_*


def set_cuda_sync(mode: str | None = None) -> str | None:
    """Set how this process's threads wait for every visible GPU (`mode`, else $COURSE_CUDA_SYNC; one of
    CUDA_SYNC_FLAGS), before the first CUDA call creates the primary contexts (the driver API's
    cuDevicePrimaryCtxSetFlags: the runtime, torch's, then uses those flags). The mode set, or None where
    none was asked or the driver is missing (no GPU: nothing waits)."""
    import ctypes

    mode = mode or os.environ.get(CUDA_SYNC_ENV) or None
    if mode is None:
        return None
    if mode not in CUDA_SYNC_FLAGS:
        raise ValueError(f"{CUDA_SYNC_ENV}={mode!r}: one of {', '.join(CUDA_SYNC_FLAGS)}")
    try:
        cuda = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None
    count = ctypes.c_int(0)
    if cuda.cuInit(0) != 0 or cuda.cuDeviceGetCount(ctypes.byref(count)) != 0:
        return None
    set_flags = getattr(cuda, "cuDevicePrimaryCtxSetFlags_v2", None) or cuda.cuDevicePrimaryCtxSetFlags
    for ordinal in range(count.value):
        device = ctypes.c_int(0)
        if cuda.cuDeviceGet(ctypes.byref(device), ordinal) == 0:
            set_flags(device, ctypes.c_uint(CUDA_SYNC_FLAGS[mode]))
    return mode
