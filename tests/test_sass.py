"""grader.verify.sass without a GPU: the tensor-core groups' instruction, read from real builds.

Builds solution 05 for "9.0a" (as the grade does on an H100 or H200) and the known-wrong variant whose
kernel 5 multiplies by plain FMAs, and checks that the parser finds HMMA .TF32 / .BF16 and HGMMA in the
solution's kernels 5 and 6, none in kernels 1 to 4, and that the check fails the FMA variant's kernel 5
by name; and, on a PTX-only build, that the PTX is read when no SASS runs. About two minutes of
compiling on two cores.
"""
from __future__ import annotations

import os
import shutil
import subprocess

import pytest

from grader.toolchain import build
from grader.verify import sass
from grader.verify.checks import CheckFailure
from grader.env import REPO
from grader.specs import by_exercise
from grader.specs import ex05_matmul as spec05
from grader.specs import ex06_conv2d as spec06
from grader.specs import ex08_conv_bn_relu_inference as spec08
from grader.specs import ex09_conv_bn_relu_training as spec09

pytestmark = pytest.mark.skipif(shutil.which("nvcc") is None and not os.path.isfile("/usr/local/cuda/bin/nvcc"),
                                reason="no CUDA compiler here")


def _tool_or_skip():
    try:
        return sass.cuobjdump()
    except sass.SassError as e:
        pytest.skip(str(e))


# kernel 5 by plain FMAs (tests/known_wrong/ex05_matmul.py's kernel5_by_fmas, reduced to the names the
# instruction check reads): a float and a bfloat16 instantiation of `matmul_kernel5`, no tensor core.
# The variant's whole build (05's five kernel files) takes minutes on CI's two cores; this takes seconds.
FMAS = r"""
#include <cuda_bf16.h>
template <typename T>
__global__ void matmul_kernel5(float* d, const T* a, const T* b, int n) {
  float acc = 0.f;
  for (int k = 0; k < n; ++k) acc = fmaf(float(a[k]), float(b[k]), acc);
  d[threadIdx.x] = acc;
}
template __global__ void matmul_kernel5<float>(float*, const float*, const float*, int);
template __global__ void matmul_kernel5<__nv_bfloat16>(float*, const __nv_bfloat16*, const __nv_bfloat16*, int);
"""


@pytest.fixture(scope="module")
def hopper_builds(tmp_path_factory):
    """{"solution": library, "fmas": fatbin}: solution 05 built for 9.0a (the shared build of solutions/,
    which make test's builds for 9.0a already made) and FMAS compiled for sm_90a."""
    _tool_or_skip()
    root = tmp_path_factory.mktemp("sass")
    saved = os.environ.get("TORCH_CUDA_ARCH_LIST")
    os.environ["TORCH_CUDA_ARCH_LIST"] = "9.0a"
    try:
        folder = REPO / "solutions" / "05_matmul"
        result = build.build(folder, load=False)
        assert result.ok, result.error
        assert sass.library_of(folder) == build.build_dir_for(folder) / f"{build.namespace_for(folder)}.so"
    finally:
        if saved is None:
            os.environ.pop("TORCH_CUDA_ARCH_LIST", None)
        else:
            os.environ["TORCH_CUDA_ARCH_LIST"] = saved
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    (root / "fmas.cu").write_text(FMAS)
    subprocess.run([nvcc, "-fatbin", "-gencode", "arch=compute_90a,code=sm_90a", str(root / "fmas.cu"), "-o",
                    str(root / "fmas.fatbin")], check=True, capture_output=True, timeout=300)
    return {"solution": result.library, "fmas": root / "fmas.fatbin"}


def _mma(text: str) -> set[str]:
    import re

    return set(re.findall(r"\b(H?G?MMA\.[\w.]+)", text))


def test_the_solution_s_kernels_hold_their_instructions(hopper_builds):
    codes, _ = sass.read_library(hopper_builds["solution"])
    # one ELF per kernel file (05 has five): a kernel is in one of them, and the checks below read them all
    assert {c.arch for c in codes} == {"sm_90a"} and len(codes) > 1
    functions = [(name, text) for c in codes for name, text in c.functions.items()]
    by_base = {}
    for name, text in functions:
        by_base.setdefault(sass.split_name(name)[0], []).append((name, text))
    for base in ("matmul_kernel1", "matmul_kernel2", "matmul_kernel3", "matmul_kernel4", "matmul_small_tiles",
                 "matmul_gemv_rows", "matmul_gemv_cols", "matmul_splitk_reduce", "matmul_transpose_tf32"):
        assert by_base[base] and not any(_mma(text) for _, text in by_base[base]), base
    for name, text in by_base["matmul_kernel5"]:
        want = "HMMA.1688.F32.TF32" if "<float" in name else "HMMA.16816.F32.BF16"
        assert want in _mma(text), name
    for name, text in by_base["matmul_kernel6"]:
        assert any(op.startswith("HGMMA.") and op.endswith(".TF32" if "<float" in name else ".BF16")
                   for op in _mma(text)), name
    for group, need in spec05.INSTRUCTIONS.items():
        sass.check(hopper_builds["solution"], need, arch="sm_90a")
        sass.check(hopper_builds["solution"], need, capability=(9, 0))  # what an H100 or H200 runs


def test_kernels_without_the_instruction_are_named(hopper_builds):
    """Kernels 1 to 4 (no tensor cores), asked for each instruction, fail by name; a kernel 5 of FMAs
    fails both mma.sync groups."""
    plain = sass.MmaInstruction("mma", "tf32", ("matmul_kernel1", "matmul_kernel3", "matmul_kernel4"))
    with pytest.raises(CheckFailure, match=r"no HMMA \(mma.sync\) .TF32 instruction in kernel matmul_kernel1"):
        sass.check(hopper_builds["solution"], plain, arch="sm_90a")
    for group in ("tensor_cores_tf32", "tensor_cores_bf16"):
        with pytest.raises(CheckFailure, match=r"no HMMA \(mma.sync\) .* in kernel matmul_kernel5<"):
            sass.check(hopper_builds["fmas"], spec05.INSTRUCTIONS[group], capability=(9, 0))
    # a GPU the library has no code for
    with pytest.raises(CheckFailure, match="no code for compute capability 8.0"):
        sass.check(hopper_builds["solution"], spec05.INSTRUCTIONS["tensor_cores_tf32"], capability=(8, 0))
    # a missing kernel is named as missing
    with pytest.raises(CheckFailure, match="kernel matmul_kernel7 is not in"):
        sass.check(hopper_builds["solution"], sass.MmaInstruction("mma", "tf32", ("matmul_kernel7",)), arch="sm_90a")


def test_an_fp16_mma_is_not_tf32_or_bf16():
    """The patterns: HMMA's FP16 form (no .TF32 / .BF16 suffix) matches neither precision."""
    tf32, bf16 = (sass.MmaInstruction("mma", p, ("k",)) for p in ("tf32", "bf16"))
    fp16 = "HMMA.16816.F32 R4, R132.reuse, R136, R4 ;"
    assert not tf32.sass.search(fp16) and not bf16.sass.search(fp16)
    assert tf32.sass.search("HMMA.1688.F32.TF32 R4, R8, R12, R4 ;") and bf16.sass.search("HMMA.16816.F32.BF16 R4")
    wg = sass.MmaInstruction("wgmma", "tf32", ("k",))
    assert wg.sass.search("HGMMA.64x256x8.F32.TF32 R24, gdesc[UR4], R24 ;") and not wg.sass.search("HMMA.1688.F32.TF32")
    assert tf32.ptx.search("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%f1}")
    assert not tf32.ptx.search("mma.sync.aligned.m16n8k8.row.col.f32.f16.f16.f32 {%f1}")
    assert wg.ptx.search("wgmma.mma_async.sync.aligned.m64n256k8.f32.tf32.tf32 {")


PTX_ONLY = r"""
#include <cstdint>
__global__ void tc_kernel(float* d, const uint32_t* a) {
  float x[4] = {0, 0, 0, 0};
  asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
               "{%0, %1, %2, %3};\n" : "+f"(x[0]), "+f"(x[1]), "+f"(x[2]), "+f"(x[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(a[4]), "r"(a[5]));
  d[threadIdx.x] = x[0] + x[1] + x[2] + x[3];
}
__global__ void fma_kernel(float* d, const float* a) { d[threadIdx.x] = fmaf(a[0], a[1], d[threadIdx.x]); }
"""


def test_ptx_is_read_where_no_sass_runs(tmp_path):
    """A build with only compute_80 PTX (JIT-compiled on the GPU): its PTX is what the check reads."""
    _tool_or_skip()
    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    (tmp_path / "k.cu").write_text(PTX_ONLY)
    subprocess.run([nvcc, "-fatbin", "-gencode", "arch=compute_80,code=compute_80", str(tmp_path / "k.cu"), "-o",
                    str(tmp_path / "k.fatbin")], check=True, capture_output=True, timeout=300)
    sass_codes, ptx = sass.read_library(tmp_path / "k.fatbin")
    assert sass_codes == [] and [c.arch for c in ptx] == ["compute_80"]
    sass.check(tmp_path / "k.fatbin", sass.MmaInstruction("mma", "tf32", ("tc_kernel",)), capability=(9, 0))
    with pytest.raises(CheckFailure, match="no HMMA .* in kernel fma_kernel \\(compute_80\\)"):
        sass.check(tmp_path / "k.fatbin", sass.MmaInstruction("mma", "tf32", ("fma_kernel",)), capability=(9, 0))


def _declared():
    """(spec, group, instruction) for every tensor-core group's declaration."""
    out = [(spec05.SPEC, g, need) for g, need in spec05.INSTRUCTIONS.items()]
    out += [(spec06.SPEC, g, need) for g, need in spec06.SPEC.instructions]
    out += [(spec08.SPEC, spec08.TF32_GROUP, spec08.TF32_INSTRUCTION), (spec09.SPEC, spec09.TF32_GROUP,
                                                                          spec09.TF32_INSTRUCTION)]
    return out


def test_every_tensor_core_group_declares_its_instruction_and_checks_it():
    """Each tensor-core group (05's four, 06's, 08's and 09's TF32) declares an instruction whose kernels
    the group allows, and has the check of it, last among its checks (a wrong precision is reported by
    the value checks first), beside every precision probe (grader.verify.precision) on each of its paths."""
    from grader.verify import precision as probes

    groups = {(spec.exercise, group) for spec, group, _ in _declared()}
    assert groups == {("05_matmul", g) for g in ("tensor_cores_tf32", "tensor_cores_bf16", "wgmma_tf32", "wgmma_bf16")} \
        | {("06_conv2d", "tensor_cores_tf32"), ("08_conv_bn_relu_inference", "tensor_cores_tf32"),
           ("09_conv_bn_relu_training", "tensor_cores_tf32")}
    for spec, group, need in _declared():
        allowed = set(spec.kernel_rule().names)
        assert set(need.kernels) <= allowed, (spec.exercise, group, need.kernels)
        names = [c.name for c in by_exercise(spec.exercise).checks() if c.group == group]
        assert names[-1] == f"{group}[{need.describe()} in its kernels' machine code]", (spec.exercise, names[-1])
        for probe in probes.PROBES:
            assert probes.check_name(group, probe) in names, (spec.exercise, group, probe.label)


def test_the_grader_judges_the_instruction_from_the_library_it_read_before_the_process_loaded_it(
        hopper_builds, tmp_path, monkeypatch):
    """The parent reads each library once its build is done and before releasing the grading processes
    (read_library_when_built); told so, a process passes its instruction checks at once (its submitted code
    could have replaced the file since), and the parent judges each one that ran from what it read: the
    solution's kernels pass, a kernel 5 of FMAs fails both mma.sync groups by name."""
    from concurrent.futures import Future, ThreadPoolExecutor
    from types import SimpleNamespace

    from grader.run import grading
    from grader.verify.outcomes import TestOutcome

    spec = by_exercise("05_matmul")
    checks = [c for c in spec.checks() if sass.instruction_of(c.run)]
    assert {c.group for c in checks} == set(spec05.INSTRUCTIONS)
    # in the grading process, told that the grader read the library, each check passes at once even where the
    # file on disk now lacks the instruction (the grader judges it); else it reads the file (sass.check)
    import inspect

    monkeypatch.setattr(sass, "library_of", lambda folder: hopper_builds["fmas"])
    monkeypatch.setattr(sass, "read_by_grader", True)
    for c in checks:
        inspect.unwrap(c.run)(SimpleNamespace(exercise_dir=tmp_path))
    # in the parent: read once the build is done, judged from what was read
    monkeypatch.setattr(grading.env, "device_capability", lambda device: (9, 0))
    built, code = Future(), {}
    with ThreadPoolExecutor(1) as pool:
        read = grading.read_library_when_built("05_matmul", tmp_path, built, SimpleNamespace(specs=lambda: {"05_matmul": spec}),
                                               pool, None, code)
        assert not read.done()  # not before the build
        built.set_result({"ok": True})
        assert read.result(timeout=120) == {"ok": True, "read": True}
    ran = [TestOutcome(c.name, c.group, "passed") for c in checks]
    verdicts = {v.name: v for v in grading.instruction_verdicts(spec, ran, *code["05_matmul"])}
    assert set(verdicts) == {"judge: " + c.name for c in checks}
    failed = {v.group for v in verdicts.values() if v.outcome == "failed"}
    assert failed >= {"tensor_cores_tf32", "tensor_cores_bf16"}, verdicts
    assert all("matmul_kernel5" in verdicts["judge: " + c.name].reason for c in checks if c.group in failed
               and c.group.startswith("tensor_cores"))
    solution = (*sass.read_library(hopper_builds["solution"]), (9, 0))
    assert all(v.outcome == "passed" for v in grading.instruction_verdicts(spec, ran, *solution))
    # a check the process did not run (another part's, deselected) is not judged; one it skipped neither
    skipped = [TestOutcome(c.name, c.group, "skipped") for c in checks]
    assert grading.instruction_verdicts(spec, skipped, *solution) == []
    # a failed build, or no instruction check in the spec: nothing read, the process checks for itself
    with ThreadPoolExecutor(1) as pool:
        failed_build, none = Future(), {}
        failed_build.set_result({"ok": False})
        assert grading.read_library_when_built("05_matmul", tmp_path, failed_build, SimpleNamespace(
            specs=lambda: {"05_matmul": spec}), pool, None, none).result(timeout=60) == {"ok": True, "read": False}
        assert grading.read_library_when_built("01_leaky_relu", tmp_path, Future(), SimpleNamespace(
            specs=lambda: {"01_leaky_relu": by_exercise("01_leaky_relu")}), pool, None, none).done() is False
        built01 = Future()
        built01.set_result({"ok": True})
        assert grading.read_library_when_built("01_leaky_relu", tmp_path, built01, SimpleNamespace(
            specs=lambda: {"01_leaky_relu": by_exercise("01_leaky_relu")}), pool, None, none).result(timeout=60) \
            == {"ok": True, "read": False}
        assert none == {}
