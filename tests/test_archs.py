"""Every kernel compiles for every GPU architecture the course claims (grader.run.archs, `make archs`).

What runs where. The full set (every solution's and every stub's .cu for each architecture of
archs.ARCHS) costs about 10 CPU-minutes: on CI's 2 cores it would take most of the 20 minutes
`make test` has there. So with fewer than FULL_SET_CORES cores (CI) these tests compile one
solution per unit (CI_SUBSET) for two architectures (SUBSET_ARCHS): 7.5, the oldest, where every
`__CUDA_ARCH__ >= 800` guard takes its other side, and 9.0a, where the cp.async and tensor-core
paths and 05's wgmma compile; the others take 9.0's paths. An architecture the run's own builds
compile (TORCH_CUDA_ARCH_LIST; CI's is 9.0a) is not compiled twice: there the build stands for the check.
With more cores (a GPU host) they compile the full set for every architecture; `make archs` compiles the
full set anywhere.
"""
from __future__ import annotations

import json
import shlex
import shutil
import sysconfig
from pathlib import Path

import pytest

from grader import env
from grader.toolchain import build
from grader.run import archs
from grader.verify.checks import built_arch_specific
from tests.grading import EXERCISES, SOLUTIONS, exercise_folders

# One exercise per unit (1: 01-02, 2: 03-05, 3: 06-07, 4: 08-09, 5: 10): 05_matmul for its sm_80+
# cp.async path; in the other units the cheapest to compile.
CI_SUBSET = ("01_leaky_relu", "05_matmul", "07_conv_transpose2d", "08_conv_bn_relu_inference", "10_cudnn_conv")
FULL_SET_CORES = 8
FULL_SET = archs.default_jobs() >= FULL_SET_CORES
SUBSET_ARCHS = ("7.5", "9.0a")  # 9.0a: also 05's kernel 6 (wgmma, TMA), which a plain 9.0 build leaves out

SUBSET_FOLDERS = [f for f in exercise_folders(SOLUTIONS) if f.name in CI_SUBSET]
ALL_FOLDERS = exercise_folders(SOLUTIONS) + exercise_folders(EXERCISES)


# The subset leaves out what this run's builds compile every solution for (TORCH_CUDA_ARCH_LIST, CI's 9.0a),
# with the flags the check uses (test_the_check_compiles_with_the_flags_of_a_real_build): the build stands for it.
CHECKED_ARCHS = archs.ARCHS if FULL_SET else tuple(a for a in SUBSET_ARCHS if not built_arch_specific(a))


@pytest.fixture(scope="module")
def results() -> dict[Path, list[archs.ArchResult]]:
    """The check's results per folder: the full set on a machine with many cores, else the subset."""
    folders = ALL_FOLDERS if FULL_SET else SUBSET_FOLDERS
    by_folder: dict[Path, list[archs.ArchResult]] = {f: [] for f in folders}
    for r in archs.check(folders, archs=CHECKED_ARCHS) if CHECKED_ARCHS else []:
        by_folder[Path(r.folder)].append(r)
    return by_folder


def _assert_compiled(results, folder: Path):
    rs = results[folder]
    assert sorted(r.arch for r in rs) == sorted(CHECKED_ARCHS * len(archs.kernel_sources(folder))), rs
    assert all(r.ok for r in rs), archs.report(rs)


@pytest.mark.parametrize("folder", SUBSET_FOLDERS, ids=[f.name for f in SUBSET_FOLDERS])
def test_one_solution_per_unit_compiles_for_every_architecture(results, folder):
    _assert_compiled(results, folder)
    left_to_the_build = [a for a in SUBSET_ARCHS if a not in CHECKED_ARCHS] if not FULL_SET else []
    if left_to_the_build:  # the build compiled them (cached, or built once here): its own commands say so
        result = build.build(folder, load=False)
        assert result.ok, result.error
        ninja = (build.build_dir_for(folder) / "build.ninja").read_text()
        assert all(archs.gencode(a) in ninja for a in left_to_the_build), (left_to_the_build, folder)


@pytest.mark.skipif(not FULL_SET, reason=f"the full set takes ~5 min on fewer than {FULL_SET_CORES} cores: "
                                          "`make archs` compiles it")
@pytest.mark.parametrize("folder", ALL_FOLDERS, ids=[f"{f.parent.name}/{f.name}" for f in ALL_FOLDERS])
def test_every_solution_and_stub_compiles_for_every_architecture(results, folder):
    _assert_compiled(results, folder)


def test_the_subset_covers_every_unit_and_both_sides_of_the_tensor_core_guards():
    units = [("01", "02"), ("03", "04", "05"), ("06", "07"), ("08", "09"), ("10",)]
    assert all(any(name[:2] in unit for name in CI_SUBSET) for unit in units)
    assert all((SOLUTIONS / name).is_dir() for name in CI_SUBSET)
    # the oldest architecture claimed (no sm_80 paths) and one with them, and with sm_90a's own (wgmma)
    def cc(arch):
        return float(arch.rstrip("a"))

    assert set(SUBSET_ARCHS) <= set(archs.ARCHS) and min(SUBSET_ARCHS, key=cc) == min(archs.ARCHS, key=cc)
    assert any(cc(a) >= 8.0 for a in SUBSET_ARCHS) and "9.0a" in SUBSET_ARCHS


# Planted in a copy of solution 01: code that compiles for 8.0 but not for 7.5, caught by the
# preprocessor (file:line) or, as inline PTX an architecture lacks, by ptxas (which knows the PTX line).
PLANTS = {
    "preprocessor": ("#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ == 750\n#error planted: no sm_75 build\n#endif\n",
                     "01_leaky_relu/leaky_relu.cu:{line}:2: error: #error planted: no sm_75 build"),
    "ptxas": ('__global__ void planted_kernel() { asm volatile("cp.async.commit_group;" ::: "memory"); }\n',
              "ptxas <the PTX of leaky_relu.cu>, line"),
}


@pytest.mark.parametrize("plant", PLANTS)
def test_a_kernel_that_does_not_compile_for_one_architecture_is_reported_with_the_error(tmp_path, capsys, plant):
    code, expected = PLANTS[plant]
    folder = tmp_path / "01_leaky_relu"
    shutil.copytree(SOLUTIONS / "01_leaky_relu", folder)
    cu = folder / "leaky_relu.cu"
    good = cu.read_text()
    cu.write_text(good + code)
    out = tmp_path / "archs.json"
    rc = archs.main([str(folder), "--arch", "7.5", "8.0", "--json", str(out)])
    printed = capsys.readouterr().out
    assert rc == 1, printed
    by_arch = {r["arch"]: r for r in json.loads(out.read_text())}
    assert by_arch["8.0"]["ok"] and not by_arch["7.5"]["ok"], printed
    first = by_arch["7.5"]["error"].splitlines()[0]
    assert first.startswith(expected.format(line=len(good.splitlines()) + 2)), first
    if plant == "ptxas":
        assert "Feature 'cp.async.commit_group' requires .target sm_80 or higher" in first, first
    row = next(l for l in printed.splitlines() if l.startswith(str(folder.resolve())))
    assert row.split()[1:] == ["FAILED", "ok"], printed
    assert f"{folder.resolve()}/leaky_relu.cu does not compile for 7.5 (sm_75):\n  {first}" in printed, printed
    assert "1 of 2 exercise x architecture builds compiled, 1 FAILED" in printed, printed


def _flag_set(words: list[str]) -> set[str]:
    """Flags as a set, a flag that takes a value joined with it (`-isystem DIR`)."""
    flags, i = set(), 0
    while i < len(words):
        if words[i] in ("-isystem", "--compiler-options", "-Xcompiler", "-ccbin"):
            flags.add(("-Xcompiler" if words[i] == "--compiler-options" else words[i]) + " " + words[i + 1])
            i += 2
        else:
            flags.add(words[i])
            i += 1
    return flags


def test_the_check_compiles_with_the_flags_of_a_real_build():
    """The nvcc command matches the one torch.utils.cpp_extension writes into the build's
    build.ninja, but for the architecture and for include folders nvcc adds by itself (the CUDA
    toolkit's) or that kernel sources never use (Python's)."""
    folder = SOLUTIONS / "01_leaky_relu"
    result = build.build(folder, load=False)  # cached, or built once for test_builds too
    assert result.ok, result.error
    ninja = (build.build_dir_for(folder) / "build.ninja").read_text()
    cuda_cflags = next(l for l in ninja.splitlines() if l.startswith("cuda_cflags = ")).removeprefix("cuda_cflags = ")
    real = {f for f in _flag_set(shlex.split(cuda_cflags)) if not f.startswith("-gencode=")}
    cmd = archs.command(folder.resolve(), folder.resolve() / "leaky_relu.cu", "8.6", Path("/tmp/x.cubin"))
    assert cmd[-4:] == ["-cubin", "01_leaky_relu/leaky_relu.cu", "-o", "/tmp/x.cubin"]
    ours = _flag_set(cmd[1:-4])
    assert "-gencode=arch=compute_86,code=sm_86" in ours
    ours.discard("-gencode=arch=compute_86,code=sm_86")
    implicit = {f"-isystem {Path(env.find_cuda_home()) / 'include'}", f"-isystem {sysconfig.get_path('include')}"}
    assert ours == real - implicit, f"only the check's: {sorted(ours - real)}; only the build's: {sorted(real - ours)}"
