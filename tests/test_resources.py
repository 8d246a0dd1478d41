"""The resource report (grader.run.resources): ptxas's numbers as the build captured them, the
launchers' block sizes, and the occupancy formula; on CPU the build runs, on a GPU the formula is
compared with the driver's occupancy API."""
from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

import pytest

from grader import env
from grader.toolchain import build
from grader.run import resources
from grader.run.report import resources_text
from grader.specs import capability_gated_kernels
from tests.conftest import HAS_GPU
from tests.grading import SOLUTIONS

H100, T4, RTX3090 = resources.ARCHS[(9, 0)], resources.ARCHS[(7, 5)], resources.ARCHS[(8, 6)]


# ------------------------------------------------------------------------------ the formula


@pytest.mark.parametrize("arch, regs, smem, block, blocks, limited_by", [
    (H100, 32, 0, 256, 8, ["block size", "registers"]),  # 64 warps: full
    (H100, 128, 16384, 256, 2, ["registers"]),  # 128 x 256 = 32K registers a block
    (H100, 239, 24960, 128, 2, ["registers"]),  # 239 -> 7680 a warp, 2 warps a sub-partition
    (H100, 16, 48 * 1024, 128, 4, ["shared memory"]),  # 49 KiB with the reserve: 4 in 228 KiB
    (T4, 16, 0, 32, 16, ["block size"]),  # 16 blocks of one warp: half of 32 warps
    (T4, 186, 24960, 128, 2, ["registers", "shared memory"]),  # 25088 B: 2 in 64 KiB
    (RTX3090, 32, 0, 1024, 1, ["block size"]),  # 48 warps: one block of 32
    (H100, 16, 0, 2048, 0, ["block size"]),  # more threads than a block may have
])
def test_occupancy_follows_the_calculator(arch, regs, smem, block, blocks, limited_by):
    occ = resources.occupancy(arch, regs, smem, block)
    assert occ["blocks_per_sm"] == blocks, occ
    assert occ["limited_by"] == limited_by, occ
    assert occ["occupancy"] == blocks * -(-block // 32) / arch.max_warps_per_sm


def test_registers_for_the_next_block():
    assert resources.registers_for(H100, 3, 128) == 168  # 168 x 32 = 5376: 3 warps a sub-partition
    assert resources.occupancy(H100, 168, 0, 128)["blocks_per_sm"] >= 3
    assert resources.occupancy(H100, 169, 0, 128)["blocks_per_sm"] < 3


def test_every_claimed_architecture_has_limits():
    for cc in ("7.5", "8.0", "8.6", "8.9", "9.0", "10.0", "12.0"):
        assert resources.arch_of(cc) is not None, cc
    assert resources.arch_of("sm_90a") is H100 and resources.arch_of("sm_120").cc == (12, 0)


# ------------------------------------------------------------------------- ptxas and ninja

PTXAS = """\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function '_Z1kPf' for 'sm_90'
ptxas info    : Function properties for _Z1kPf
    8 bytes stack frame, 12 bytes spill stores, 16 bytes spill loads
ptxas info    : Used 255 registers, used 1 barriers, 4096 bytes smem, 360 bytes cmem[0]
ptxas info    : Compile time = 3.1 ms
ptxas info    : Function properties for _Z6helperv
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Compiling entry function '_Z1gPf' for 'sm_75'
ptxas info    : Function properties for _Z1gPf
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 8 registers, used 0 barriers, 360 bytes cmem[0]
"""


def test_ptxas_report_is_read_per_entry_and_architecture():
    k, g = resources.parse_ptxas(PTXAS)
    assert k == {"mangled": "_Z1kPf", "arch": "sm_90", "registers": 255, "barriers": 1, "static_smem": 4096,
                 "stack": 8, "spill_stores": 12, "spill_loads": 16}
    assert (g["arch"], g["registers"], g["static_smem"], g["spill_stores"]) == ("sm_75", 8, 0, 0)


def test_each_compile_step_keeps_its_own_output(tmp_path):
    ninja = "\n".join([
        "[1/3] /usr/local/cuda/bin/nvcc -c /x/a.cu -o a.cuda.o --resource-usage",
        "ptxas info    : Used 8 registers",
        "/x/a.cu(3): warning #177-D: variable \"u\" was declared but never referenced",
        "[2/3] c++ -c /x/a.cpp -o a.o",
        "[3/3] c++ a.o a.cuda.o -o ex.so",
        "ninja: no work to do.",
    ])
    written = build.save_step_logs(tmp_path, ninja)
    assert sorted(p.name for p in written) == ["a.cuda.o.log", "a.o.log"]
    log = (tmp_path / build.STEP_LOGS / "a.cuda.o.log").read_text()
    assert "Used 8 registers" in log and "warning #177-D" in log and "[2/3]" not in log
    assert (tmp_path / build.STEP_LOGS / "a.o.log").read_text() == ""


# -------------------------------------------------------------------------- the launchers


def test_a_launch_is_evaluated_from_the_constants_it_names(tmp_path):
    (tmp_path / "k.cu").write_text("""
constexpr int kTile = 32, kRows = 8;
constexpr int kThreads = kTile * kRows;  // 256
template <typename T, int BM> __global__ void __launch_bounds__(BM) tiled(T* p) {}
__global__ void plain(float* p) {}
template <typename T, int BM> void launch_tiled(T* p, cudaStream_t s) {
  const dim3 block(BM / 2, 2);
  tiled<T, BM><<<10, block, BM * sizeof(T), s>>>(p);
}
void launch_plain(float* p, cudaStream_t s) {
  // plain<<<1, 999>>>(p);  a comment is not a launch
  plain<<<dim3(4, 4), dim3(kTile, kRows), 0, s>>>(p);
}
""")
    kernels, launches, defs, _ = resources.scan_sources(tmp_path)
    by_name = {k.name: k for k in kernels}
    assert by_name["tiled"].template_params == ["T", "BM"] and len(launches) == 2
    tiled = resources.launch_configs(by_name["tiled"], ["double", "128"], [l for l in launches if l.kernel == "tiled"], defs)
    assert [(c["block"], c["dynamic_smem"]) for c in tiled] == [(128, 1024)]
    plain = resources.launch_configs(by_name["plain"], [], [l for l in launches if l.kernel == "plain"], defs)
    assert [(c["block"], c["dynamic_smem"], c["where"]) for c in plain] == [(256, 0, "k.cu:12")]


def test_a_launch_may_name_a_constant_of_an_included_course_header(tmp_path):
    """08's and 09's TF32 kernels launch with kTcThreads, which course/tf32_conv.cuh defines; a constant of
    the exercise's own comes first."""
    (tmp_path / "k.cu").write_text("""#include <course/tf32_conv.cuh>
__global__ void tc(float* p) {}
__global__ void own(float* p) {}
constexpr int kTcStages = 7;
void launch(float* p, cudaStream_t s) {
  tc<<<1, kTcThreads, 0, s>>>(p);
  own<<<1, kTcStages * 32, 0, s>>>(p);
}
""")
    kernels, launches, defs, _ = resources.scan_sources(tmp_path)
    blocks = {k.name: [c["block"] for c in resources.launch_configs(k, [], [l for l in launches if l.kernel == k.name],
                                                                    defs)] for k in kernels}
    assert blocks == {"tc": [128], "own": [224]}


def test_an_overlapped_launch_is_read_like_a_triple_chevron_one(tmp_path):
    (tmp_path / "k.cu").write_text("""
constexpr int kThreads = 256;
template <typename T, int kVec> __global__ void reduce(const float* ws, T* out, int n) {}
template <typename T> void go(const float* ws, T* out, int n, cudaStream_t s) {
  course::launch_after_previous(reduce<T, 4>, dim3(n / 4), kThreads, kThreads * sizeof(T),
                                s, ws, out, n);
}
""")
    kernels, launches, defs, _ = resources.scan_sources(tmp_path)
    assert [(l.kernel, l.template_args, l.block, l.smem) for l in launches] == [
        ("reduce", ["T", "4"], "kThreads", "kThreads * sizeof(T)")]
    configs = resources.launch_configs(kernels[0], ["float", "4"], launches, defs)
    assert [(c["block"], c["dynamic_smem"]) for c in configs] == [(256, 1024)]


def _kernel_bodies(text: str) -> dict[str, tuple[list[str], str]]:
    """name -> (its pointer parameters, its body), for every __global__ of a source without comments."""
    out = {}
    for m in resources._KERNEL_DEF.finditer(text):
        close = resources._match_forward(text, m.end() - 1, "(", ")")
        pointers = [re.findall(r"\w+", p)[-1] for p in resources._split_top(text[m.end():close]) if "*" in p]
        open_brace = text.index("{", close)
        out[m.group("name")] = (pointers, text[open_brace + 1:resources._match_forward(text, open_brace, "{", "}")])
    return out


def test_every_overlapped_launch_waits_for_the_kernel_before_it():
    """A kernel launched by course::launch_after_previous may start while the kernel before it still
    writes: it must call wait_for_previous() before it first touches any of its pointers (a property of
    every such kernel of every solution, not of one: a reduction that read its workspace first would
    be right on most runs and wrong on some)."""
    found = 0
    for folder in sorted(p for p in SOLUTIONS.iterdir() if p.is_dir()):
        for path in sorted(folder.glob("*.cu")):
            text = resources.strip_comments(path.read_text())
            bodies = _kernel_bodies(text)
            for name in {l.kernel for l in resources.scan_sources(folder)[1] if l.file == path.name
                         and re.search(rf"launch_after_previous\s*\(\s*{l.kernel}\b", text[l.offset:l.offset + 200])}:
                pointers, body = bodies[name]
                wait = body.find("wait_for_previous()")
                assert wait >= 0, f"{path}: {name} is launched overlapped but never calls wait_for_previous()"
                for ptr in pointers:
                    use = re.search(rf"\b{ptr}\b", body)
                    assert use is None or use.start() > wait, f"{path}: {name} uses {ptr} before wait_for_previous()"
                found += 1
    assert found >= 2  # 05's split-K reduction and stream-K's fixup


def test_a_launch_picks_its_instantiation_by_its_template_arguments(tmp_path):
    (tmp_path / "k.cu").write_text("""
template <bool kVec> __global__ void k(float* p) {}
void go(float* p, bool v) {
  if (v) k<true><<<1, 128>>>(p); else k<false><<<1, 64>>>(p);
}
""")
    kernels, launches, defs, _ = resources.scan_sources(tmp_path)
    blocks = {a: [c["block"] for c in resources.launch_configs(kernels[0], [a], launches, defs)] for a in ("true", "false")}
    assert blocks == {"true": [128], "false": [64]}


# ---------------------------------------------------------------- a real build's report


@pytest.fixture(scope="module")
def matmul():
    folder = SOLUTIONS / "05_matmul"
    result = build.build(folder, load=False)
    assert result.ok, result.error
    return folder


def _independent_ptxas(folder: Path, source: Path, tmp: Path) -> dict[tuple[str, str], tuple[int, int, int, int]]:
    """Compile `source` again with the build's own nvcc flags and -Xptxas -v, read with a regex of
    its own: (mangled, arch) -> (registers, static smem, spill stores, spill loads). Device code only
    (-cubin, one architecture at a time): ptxas says the same, without the host compile of torch's headers."""
    ninja = (build.build_dir_for(folder) / "build.ninja").read_text()
    nvcc = re.search(r"^nvcc = (.*)$", ninja, re.M).group(1)
    flags = [f for f in shlex.split(re.search(r"^cuda_cflags = (.*)$", ninja, re.M).group(1)) if f != "--resource-usage"]
    targets = [f for f in flags if f.startswith("-gencode") and "code=sm_" in f]  # not +PTX's (no ptxas)
    assert targets, flags
    printed = ""
    for target in targets:
        cmd = [nvcc, *(f for f in flags if not f.startswith("-gencode")), target, "-Xptxas", "-v", "-cubin",
               str(source), "-o", str(tmp / "again.cubin")]
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
        assert out.returncode == 0, out.stderr
        printed += out.stdout + out.stderr
    found, entry, spills = {}, None, (0, 0)
    for line in printed.splitlines():
        if m := re.search(r"Compiling entry function '(\w+)' for '(\w+)'", line):
            entry = (m.group(1), m.group(2))
        elif m := re.search(r"(\d+) bytes spill stores, (\d+) bytes spill loads", line):
            spills = (int(m.group(1)), int(m.group(2)))
        elif (m := re.search(r"Used (\d+) registers", line)) and entry:
            smem = re.search(r"(\d+) bytes smem", line)
            found[entry] = (int(m.group(1)), int(smem.group(1)) if smem else 0, *spills)
            entry, spills = None, (0, 0)
    return found


def test_the_report_matches_ptxas_verbose_for_a_built_exercise(matmul, tmp_path):
    report = resources.exercise_report(matmul)
    expected = {}
    for source in sorted(matmul.glob("*.cu")):  # one object a file: their kernels together are the report's
        expected |= _independent_ptxas(matmul, source, tmp_path)
    got = {(k["mangled"], k["arch"]): (k["registers"], k["static_smem"], k["spill_stores"], k["spill_loads"])
           for k in report["kernels"]}
    archs = {arch for _, arch in got}
    assert got == expected and archs and len(got) == 46 * len(archs)  # 46 kernels (with instantiations) per arch built
    names = {k["name"] for k in report["kernels"]}
    assert {"matmul_kernel1", "matmul_kernel2", "matmul_kernel3<true, false>", "matmul_kernel4<true, false, false>",
            "matmul_kernel4<false, true, true>"} <= names
    blocks = {k["kernel"]: {l["block"] for l in k["launches"]} for k in report["kernels"]}
    assert blocks == {"matmul_kernel1": {256}, "matmul_kernel2": {1024}, "matmul_kernel3": {256}, "matmul_kernel4": {128},
                      "matmul_gemv_rows": {256}, "matmul_gemv_cols": {256}, "matmul_splitk_reduce": {256},
                      "matmul_kernel5": {128}, "matmul_small_tiles": {256}, "matmul_kernel4_streamk": {128},
                      "matmul_streamk_fixup": {256}, "matmul_kernel6": {384}, "matmul_transpose_tf32": {256}}
    text = resources_text("05_matmul", report)
    assert "matmul_kernel4<true, false, false>" in text and "limited by registers" in text, text


def test_a_kernel_only_newer_gpus_launch_gets_a_note_instead_of_an_occupancy(matmul):
    """A kernel that only calls needing a compute capability run is reported, on an architecture
    below it, as never launched there: no occupancy (a T4 build of kernel 5's 96 KiB ring showed 0%,
    and `make test` failed there), a note saying why, the same words in the table. The gate is
    raised to 99.0 here so that this machine's build (sm_90 in CI) is below it."""
    # the transpose runs for kernel 5 (8.0) and kernel 6 (9.0): launched from 8.0 on
    assert capability_gated_kernels("05_matmul") == {"matmul_kernel5": (8, 0), "matmul_kernel6": (9, 0),
                                                     "matmul_transpose_tf32": (8, 0)}
    assert capability_gated_kernels("01_leaky_relu") == {} and capability_gated_kernels("not_an_exercise") == {}
    report = resources.exercise_report(matmul, gated={"matmul_kernel5": (99, 0)})
    fives = [k for k in report["kernels"] if k["kernel"] == "matmul_kernel5"]
    assert fives and all(k["needs_capability"] == (99, 0) and not k["occupancy"] for k in fives)
    assert all(k["occupancy"] and "needs_capability" not in k for k in report["kernels"] if k not in fives)
    text = resources_text("05_matmul", report)
    assert "not launched here (needs 99.0)" in text and "never launched there" in text, text
    # the spec's own gate leaves an sm_80-or-newer build alone
    assert all(k["occupancy"] for k in resources.exercise_report(matmul)["kernels"]
               if resources.arch_capability(k["arch"]) >= (8, 0))


def test_every_gated_kernel_is_a_kernel_of_its_solution():
    """capability_gated_kernels names only real kernels (the specs' kernel rules and the sources agree)."""
    for folder in sorted(p for p in SOLUTIONS.iterdir() if p.is_dir()):
        defined = {k.name for k in resources.scan_sources(folder)[0]}
        assert set(capability_gated_kernels(folder.name)) <= defined, folder.name


def test_the_report_covers_every_solution_kernel_and_launch():
    """Every __global__ of every solution is launched where the report can evaluate the block size
    and dynamic shared memory (with its template parameters bound to a typical instantiation):
    the launchers and the report cannot drift apart. The built report's coverage is checked in
    tests/test_builds.py, where every folder is built anyway."""
    samples = {"scalar_t": "float", "T": "float", "K": "3", "BM": "128", "kCols": "4", "kBlockCols": "128"}
    for folder in sorted(p for p in SOLUTIONS.iterdir() if p.is_dir()):
        kernels, launches, defs, _ = resources.scan_sources(folder)
        assert kernels, folder
        for k in kernels:
            args = [samples.get(p, "1") for p in k.template_params]
            configs = resources.launch_configs(k, args, [l for l in launches if l.kernel == k.name], defs)
            assert configs, f"{folder.name}: no launch of {k.name} found"
            for c in configs:
                assert c["block"] and c["dynamic_smem"] is not None, f"{folder.name}: {k.name} at {c['where']}: {c}"


@pytest.mark.skipif(HAS_GPU, reason="on a GPU the grade runs every check; tests/test_gpu_grading.py covers it")
def test_the_grade_shows_the_report_and_a_no_gpu_line(matmul, tmp_path):
    import sys

    out = subprocess.run([sys.executable, "-m", "grader", "--target", "solutions", "--ex", "05", "--out", str(tmp_path)],
                         capture_output=True, text=True, timeout=900, cwd=env.REPO)
    text = out.stdout
    assert re.search(r"^05_matmul: compiled; its CPU check input_checks\[cpu A\] passed; \d+ checks need a GPU$", text, re.M), text + out.stderr
    assert "Google Colab" in text and "Kaggle" in text and "total:" not in text
    assert "05_matmul: resources per kernel" in text and "matmul_kernel4<false, false, false>" in text, text
    md = (tmp_path / "report.md").read_text()
    assert "what the compiler knows" in md and "need a GPU" in md


# ------------------------------------------------------------- the formula against the driver

OCCUPANCY_CU = r"""
#include <cuda_runtime.h>

__global__ void light(float* p) { p[threadIdx.x] += 1.0f; }

__global__ void shared40k(float* p) {
  __shared__ float s[10000];
  for (int i = threadIdx.x; i < 10000; i += blockDim.x) s[i] = p[i];
  __syncthreads();
  p[threadIdx.x] = s[(threadIdx.x * 7) % 10000];
}

__global__ void heavy(const float* __restrict__ a, float* __restrict__ p, int n) {
  float acc[48];
#pragma unroll
  for (int j = 0; j < 48; ++j) acc[j] = a[j * 7 + threadIdx.x];
  for (int i = 0; i < n; ++i) {
#pragma unroll
    for (int j = 0; j < 48; ++j) acc[j] = fmaf(acc[j], acc[(j + 1) % 48], 1.0f);
  }
  float s = 0;
#pragma unroll
  for (int j = 0; j < 48; ++j) s += acc[j];
  p[threadIdx.x] = s;
}

int course_occupancy(int which, int block, int dynamic_smem) {
  int blocks = -1;
  const void* k = which == 0 ? (const void*)light : which == 1 ? (const void*)shared40k : (const void*)heavy;
  if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&blocks, k, block, dynamic_smem) != cudaSuccess) return -1;
  return blocks;
}
"""

OCCUPANCY_CPP = r"""
#include <cstdint>
#include <course/ops.h>
int course_occupancy(int which, int block, int dynamic_smem);
namespace {
int64_t occupancy(int64_t which, int64_t block, int64_t smem) { return course_occupancy(which, block, smem); }
}
COURSE_LIBRARY(m) { m.def("occupancy(int which, int block, int smem) -> int", &occupancy); }
"""


@pytest.mark.gpu
def test_the_formula_agrees_with_the_drivers_occupancy_api(tmp_path):
    """Three kernels (few registers, 40 KB of shared memory, many registers) at several block sizes:
    the formula, fed ptxas's numbers from the build, gives the blocks per SM that
    cudaOccupancyMaxActiveBlocksPerMultiprocessor gives on this GPU."""
    import torch

    folder = tmp_path / "00_occupancy"
    folder.mkdir()
    (folder / "occ.cu").write_text(OCCUPANCY_CU)
    (folder / "occ.cpp").write_text(OCCUPANCY_CPP)
    result = build.build(folder)
    assert result.ok, result.error
    major, minor = torch.cuda.get_device_capability()
    report = resources.exercise_report(folder, f"{major}.{minor}")
    arch = resources.arch_of(f"{major}.{minor}")
    assert arch is not None, f"no limits for compute capability {major}.{minor} in grader.run.resources.ARCHS"
    kernels = {k["kernel"]: k for k in report["kernels"] if k["arch"] == report["arch"]}
    op = getattr(torch.ops, result.namespace).occupancy
    for which, name in enumerate(("light", "shared40k", "heavy")):
        k = kernels[name]
        for block in (32, 64, 96, 128, 256, 384, 512, 768, 1024):
            for dynamic in (0, 8192):
                ours = resources.occupancy(arch, k["registers"], k["static_smem"], block, dynamic, k["barriers"])
                assert ours["blocks_per_sm"] == op(which, block, dynamic), (name, block, dynamic, k, ours)
