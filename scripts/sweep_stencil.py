"""Which kernel shape brings exercise 04's stencil near copy bandwidth? (needs a CUDA GPU)

    python3 scripts/sweep_stencil.py            # about 1-2 minutes, most of it the build

Builds scripts/sweep_stencil.cu (the current solution and six candidates, each templated on K; the
file's header says what each one changes) into one extension, checks every candidate against a
float64 F.conv2d on odd shapes for K = 1, 3, 5, 7 (output poisoned with NaN first, so an unwritten
pixel fails), then times each on one 8192 x 8192 fp32 image with a 3 x 3 and a 7 x 7 filter, beside
`x.clone()` and F.conv2d (cuDNN autotuned, strict fp32), with grader/verify/timer.py's timer (L2 flushed
before every call, a GPU sleep hiding the host's dispatch, median of 60 after warm-up), in two
rounds. GB/s counts one read and one write of the image, as `make bench` does. Also prints each
kernel's registers, shared memory and resident blocks per SM.
"""
from __future__ import annotations

import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from torch.utils.cpp_extension import load  # noqa: E402

from grader.verify.timer import L2Flusher, time_fn, tuned_strict_fp32  # noqa: E402
from grader.verify.checks import CheckFailure, assert_close  # noqa: E402
from grader.specs.ex04_stencil2d import reference, tolerance  # noqa: E402

BINDING = r'''
#include <string>
#include <vector>
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>

int sweep_count();
std::string sweep_name(int which);
void sweep_run(int which, const float* in, float* out, const float* filter, int64_t batch, int64_t height,
               int64_t width, int k, cudaStream_t stream);
void sweep_info(int which, int k, int64_t* regs, int64_t* smem, int64_t* blocks_per_sm);

void run(int64_t which, torch::Tensor x, torch::Tensor w, torch::Tensor out) {
  TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat && x.is_contiguous() && (x.dim() == 2 || x.dim() == 3));
  TORCH_CHECK(out.sizes() == x.sizes() && out.is_contiguous() && out.scalar_type() == torch::kFloat);
  TORCH_CHECK(w.dim() == 2 && w.size(0) == w.size(1) && w.is_contiguous() && w.is_cuda());
  const int64_t batch = x.dim() == 3 ? x.size(0) : 1;
  sweep_run(static_cast<int>(which), x.data_ptr<float>(), out.data_ptr<float>(), w.data_ptr<float>(), batch,
            x.size(-2), x.size(-1), static_cast<int>(w.size(0)), c10::cuda::getCurrentCUDAStream());
}

std::vector<int64_t> info(int64_t which, int64_t k) {
  int64_t r = 0, s = 0, b = 0;
  sweep_info(static_cast<int>(which), static_cast<int>(k), &r, &s, &b);
  return {r, s, b};
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("run", &run);
  m.def("info", &info);
  m.def("count", &sweep_count);
  m.def("name", &sweep_name);
}
'''

# (shape, where): odd sizes, single rows/columns, images smaller than the filter, batches, more
# tiles than gridDim.y, widths that are and are not multiples of 4, and an image whose data starts
# 4 bytes past a 16-byte boundary (the vectorised candidates must take their scalar path)
SHAPES = [(1, 1), (2, 2), (1, 257), (257, 1), (17, 1), (131, 67), (3, 97, 45), (2, 1, 1), (5, 33, 31),
          (64, 200), (129, 256), (4, 515, 300), (2053, 1031), (70000, 3, 3)]
MISALIGNED = (33, 64)
KS = (1, 3, 5, 7)
BIG = 8192


def build():
    t0 = time.perf_counter()
    build_dir = Path(tempfile.gettempdir()) / "sweep_stencil_build"
    build_dir.mkdir(exist_ok=True)
    binding = build_dir / "binding.cpp"
    if not binding.exists() or binding.read_text() != BINDING:
        binding.write_text(BINDING)
    mod = load(
        name="sweep_stencil",
        sources=[str(binding), str(ROOT / "scripts" / "sweep_stencil.cu")],
        extra_include_paths=[str(ROOT / "grader" / "toolchain" / "include"), str(ROOT / "solutions" / "04_stencil2d")],
        extra_cflags=["-O2"],
        extra_cuda_cflags=["-O3", "-lineinfo"],  # the grader's flags (grader/toolchain/build.py)
        build_directory=str(build_dir),
        verbose=False,
    )
    print(f"built in {time.perf_counter() - t0:.1f} s", flush=True)
    return mod


def check(mod, names):
    """Every candidate on every shape and K against a float64 reference; returns the failures."""
    g = torch.Generator(device="cuda")
    g.manual_seed(0)
    failures = {n: [] for n in names}
    cases = []
    for shape in SHAPES + [MISALIGNED]:
        for k in KS:
            if shape == MISALIGNED:
                n = shape[0] * shape[1]
                x = torch.randn(n + 1, generator=g, device="cuda")[1:].view(shape)
                assert x.data_ptr() % 16 == 4
            else:
                x = torch.randn(shape, generator=g, device="cuda")
            w = torch.randn(k, k, generator=g, device="cuda") * 0.5
            cases.append((shape, k, x, w, reference(x, w), tolerance(x, w)))
    for which, name in enumerate(names):
        for shape, k, x, w, ref, tol in cases:
            out = torch.full_like(x, float("nan"))
            mod.run(which, x, w, out)
            torch.cuda.synchronize()
            try:
                assert_close(out, ref, tol, f"{shape} K={k}" + (" (misaligned)" if shape == MISALIGNED else ""))
            except CheckFailure as e:
                failures[name].append(str(e)[:200])
    return failures


def main():
    assert torch.cuda.is_available(), "needs a CUDA GPU"
    mod = build()
    names = [mod.name(i) for i in range(mod.count())]
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}")

    t0 = time.perf_counter()
    failures = check(mod, names)
    print(f"correctness ({len(SHAPES) + 1} shapes x K in {KS}, float64 reference, NaN-poisoned output), "
          f"{time.perf_counter() - t0:.1f} s:")
    for name in names:
        f = failures[name]
        print(f"  {name:10s} {'ok' if not f else f'{len(f)} FAILED: ' + '; '.join(f[:3])}")

    flush = L2Flusher()
    g = torch.Generator(device="cuda")
    g.manual_seed(1)
    x = torch.randn(BIG, BIG, generator=g, device="cuda")
    out = torch.empty_like(x)
    nbytes = 2 * 4 * BIG * BIG
    timing = dict(warmup=5, min_samples=60, max_samples=60, max_seconds=30.0, flush=flush)
    results = {}  # (label, K) -> [GB/s per round]
    filters = {k: torch.randn(k, k, generator=g, device="cuda") for k in (3, 7)}
    # a full-size check of every candidate's timed output (the big image takes the vector paths)
    big_bad = {}
    for k, w in filters.items():
        ref = reference(x, w)
        tol = tolerance(x, w)
        for which, name in enumerate(names):
            out.fill_(float("nan"))
            mod.run(which, x, w, out)
            try:
                assert_close(out, ref, tol, f"{BIG}x{BIG} K={k}")
            except CheckFailure as e:
                big_bad[(name, k)] = str(e)[:200]
        del ref
    torch.cuda.empty_cache()

    def rec(label, k, fn):
        t = time_fn(lambda _: fn(), [None], **timing)
        results.setdefault((label, k), []).append(nbytes / t.median_s / 1e9)

    for rnd in range(2):
        for k, w in filters.items():
            rec("x.clone() (copy)", k, lambda: x.clone())
            with tuned_strict_fp32():
                w4 = w[None, None]
                rec("F.conv2d (cuDNN)", k, lambda: F.conv2d(x[None, None], w4, padding=k // 2))
            for which, name in enumerate(names):
                rec(name, k, lambda which=which, w=w: mod.run(which, x, w, out))

    labels = ["x.clone() (copy)", "F.conv2d (cuDNN)"] + names
    copy = {k: max(results[("x.clone() (copy)", k)]) for k in filters}
    print(f"\n{BIG} x {BIG} fp32, GB/s = 2 * 4 * {BIG}^2 bytes / median time (2 rounds of 60); "
          "regs / smem / blocks per SM of the K=3 kernel (aligned path)")
    print(f"{'kernel':18s} {'3x3 GB/s':>17s} {'% copy':>7s} {'7x7 GB/s':>17s} {'% copy':>7s}   regs  smem B  blk/SM")
    for label in labels:
        cols = []
        for k in filters:
            r = results[(label, k)]
            cols.append(f"{r[0]:8.0f} {r[1]:8.0f} {100 * max(r) / copy[k]:6.1f}%")
        extra = ""
        if label in names:
            regs, smem, per_sm = mod.info(names.index(label), 3)
            regs7, _, per_sm7 = mod.info(names.index(label), 7)
            extra = f"  {regs:4d} {smem:7d}  {per_sm:4d}   (K=7: {regs7} regs, {per_sm7} blk/SM)"
            bad = [f"K={k}" for k in filters if (label, k) in big_bad]
            if failures[label] or bad:
                extra += "  WRONG " + " ".join(bad)
        print(f"{label:18s} {cols[0]} {cols[1]}{extra}")
    for (name, k), msg in big_bad.items():
        print(f"  {name} K={k} on {BIG}x{BIG}: {msg}")


if __name__ == "__main__":
    main()
