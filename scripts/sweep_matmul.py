"""Which fp32 SGEMM design beats the solution's kernel3? (needs a CUDA GPU, sm_80 or later)

    python3 scripts/sweep_matmul.py            # 4096^3 and 8192^3
    python3 scripts/sweep_matmul.py --quick    # 4096^3 only

About 2 minutes on an H100 (build about 40 s, timing about a minute).

One build (torch.utils.cpp_extension.load_inline) of scripts/sweep_matmul.cu, which includes the
solution's solutions/05_matmul/matmul_basic.cu, so candidate 0 is always the current kernel3, beside the
cp.async candidates C1..C6 described in that file. Prints each kernel's registers, spills and
occupancy; checks every candidate against a float64 product on odd shapes (output memory filled
with NaN first, so an unwritten element fails); then times each at 4096^3 (and 8192^3) with
grader.verify.timer.time_fn (L2 flushed, warm-up, median of at least 20 samples) beside torch.matmul in
strict fp32 (TF32 off), in two interleaved rounds, and prints TFLOP/s and the ratio to cuBLAS.
"""
from __future__ import annotations

import argparse
import math
import os
import sys
import time
from pathlib import Path

import torch
from torch.utils.cpp_extension import load_inline

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
from grader.verify.timer import L2Flusher, math_mode, time_fn  # noqa: E402

BIND = r"""
#include <string>
#include <vector>
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>

int run_candidate(int c, const float* A, const float* B, float* C, int64_t M, int64_t N, int64_t K,
                  cudaStream_t stream);
const char* candidate_name(int c);
void candidate_attributes(int c, int64_t* out);

void run(int64_t c, const torch::Tensor& A, const torch::Tensor& B, torch::Tensor C) {
  TORCH_CHECK(A.is_cuda() && A.is_contiguous() && A.scalar_type() == at::kFloat && A.dim() == 2, "A");
  TORCH_CHECK(B.is_cuda() && B.is_contiguous() && B.scalar_type() == at::kFloat && B.dim() == 2, "B");
  TORCH_CHECK(C.is_contiguous() && C.size(0) == A.size(0) && C.size(1) == B.size(1) && A.size(1) == B.size(0), "C");
  const int err = run_candidate(int(c), A.const_data_ptr<float>(), B.const_data_ptr<float>(),
                                C.mutable_data_ptr<float>(), A.size(0), B.size(1), A.size(1),
                                c10::cuda::getCurrentCUDAStream());
  TORCH_CHECK(err == 0, "candidate ", c, ": ", err > 0 ? cudaGetErrorString(cudaError_t(err)) : "unknown");
}
std::string name(int64_t c) { return candidate_name(int(c)); }
std::vector<int64_t> attributes(int64_t c) {
  std::vector<int64_t> v(6);
  candidate_attributes(int(c), v.data());
  return v;
}
"""

CANDIDATES = 7  # kCandidates in sweep_matmul.cu

# (M, N, K): the brief's odd shapes, the spec's float4-path shapes, K = 0 and tile edges
SHAPES = [(1, 1, 1), (1, 300, 7), (257, 129, 63), (1000, 1001, 999), (37, 45, 0), (1, 1000, 1), (2000, 3, 2000),
          (129, 257, 1000), (200, 1032, 257), (256, 384, 64), (260, 132, 36), (513, 1031, 257), (1031, 1000, 4099),
          (127, 260, 17), (384, 520, 24)]
TOL = 1e-5  # the spec's normwise relative error bound


def rel_error(c: torch.Tensor, ref: torch.Tensor) -> float:
    c = c.double()
    if not torch.isfinite(c).all():
        return math.inf
    d = torch.linalg.vector_norm(ref).item()
    n = torch.linalg.vector_norm(c - ref).item()
    return n / d if d > 0 else n


def run_into(mod, cand: int, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    c = torch.full((a.shape[0], b.shape[1]), float("nan"), device="cuda")
    mod.run(cand, a, b, c)
    return c


def check(mod) -> dict[int, list[str]]:
    failures: dict[int, list[str]] = {c: [] for c in range(CANDIDATES)}
    g = torch.Generator(device="cuda").manual_seed(0)
    cases = []
    for m, n, k in SHAPES:
        cases.append((f"{m}x{n}x{k}", torch.randn(m, k, device="cuda", generator=g),
                      torch.randn(k, n, device="cuda", generator=g)))
    # views 4 bytes into their storage: no 16-byte paths
    fa = torch.randn(1 + 131 * 128, device="cuda", generator=g)
    fb = torch.randn(1 + 128 * 260, device="cuda", generator=g)
    cases.append(("unaligned A", fa[1:].view(131, 128), fb[:-1].view(128, 260)))
    cases.append(("unaligned B", fa[:-1].view(131, 128), fb[1:].view(128, 260)))
    for label, a, b in cases:
        ref = a.double() @ b.double()
        for cand in range(CANDIDATES):
            try:
                c = run_into(mod, cand, a, b)
                torch.cuda.synchronize()
            except RuntimeError as e:
                failures[cand].append(f"{label}: {str(e).splitlines()[0]}")
                continue
            err = rel_error(c, ref)
            if not err <= TOL:
                failures[cand].append(f"{label}: rel err {err:.3g}")
    return failures


def bench(mod, n: int, ok: list[int], rounds: int, flush: L2Flusher) -> dict[str, list[float]]:
    g = torch.Generator(device="cuda").manual_seed(n)
    a = torch.randn(n, n, device="cuda", generator=g)
    b = torch.randn(n, n, device="cuda", generator=g)
    c = torch.empty(n, n, device="cuda")
    flops = 2 * n**3
    # verify the timed outputs like the spec does (first and last 256 rows)
    rows = [slice(0, 256), slice(n - 256, n)]
    refs = [a[r].double() @ b.double() for r in rows]
    bad = []
    for cand in ok:
        c.fill_(float("nan"))
        mod.run(cand, a, b, c)
        torch.cuda.synchronize()
        errs = [rel_error(c[r], ref) for r, ref in zip(rows, refs)]
        if not max(errs) <= TOL:
            bad.append(cand)
            print(f"  {mod.name(cand)}: WRONG at {n}^3 (rel err {max(errs):.3g})")
    del refs
    results: dict[str, list[float]] = {}
    fns = [("torch.matmul (cuBLAS, TF32 off)", lambda _: torch.matmul(a, b, out=c))]
    fns += [(mod.name(cand), (lambda _, cand=cand: mod.run(cand, a, b, c))) for cand in ok if cand not in bad]
    with math_mode():  # strict fp32 for cuBLAS
        for r in range(rounds):
            for label, fn in fns:
                t = time_fn(fn, [None], warmup=3, min_samples=20, max_samples=200, max_seconds=2.0,
                            target_sem=0.005, flush=flush)
                results.setdefault(label, []).append(t.rate(flops) / 1e12)
    return results


def build(verbose: bool = False):
    src = (ROOT / "scripts" / "sweep_matmul.cu").read_text()
    return load_inline("sweep_matmul", cpp_sources=BIND, cuda_sources=src, functions=["run", "name", "attributes"],
                       extra_cuda_cflags=["-O3", "-lineinfo"] + (["-Xptxas=-v"] if verbose else []), verbose=verbose,
                       extra_include_paths=[str(ROOT / "solutions" / "05_matmul"), str(ROOT / "grader" / "toolchain" / "include")])


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true", help="4096^3 only")
    ap.add_argument("--rounds", type=int, default=2)
    args = ap.parse_args()
    if not torch.cuda.is_available():
        sys.exit("needs a CUDA GPU")
    os.environ.setdefault("TORCH_CUDA_ARCH_LIST", "{}.{}".format(*torch.cuda.get_device_capability()))
    t0 = time.perf_counter()
    mod = build()
    print(f"built in {time.perf_counter() - t0:.0f} s on {torch.cuda.get_device_name()}, torch {torch.__version__}")

    print(f"\n{'candidate':32s} {'regs':>5s} {'spill B':>7s} {'smem KB':>8s} {'threads':>7s} {'blocks/SM':>9s}")
    for cand in range(CANDIDATES):
        regs, local, ssmem, dsmem, threads, per_sm = mod.attributes(cand)
        print(f"{mod.name(cand):32s} {regs:5d} {local:7d} {(ssmem + dsmem) / 1024:8.1f} {threads:7d} {per_sm:9d}")

    t1 = time.perf_counter()
    failures = check(mod)
    ok = [c for c in range(CANDIDATES) if not failures[c]]
    print(f"\ncorrectness ({len(SHAPES) + 2} cases, NaN-poisoned outputs, rel err <= {TOL:g}), "
          f"{time.perf_counter() - t1:.1f} s:")
    for cand in range(CANDIDATES):
        print(f"  {mod.name(cand):32s} {'ok' if not failures[cand] else 'FAIL: ' + '; '.join(failures[cand][:4])}")

    flush = L2Flusher()
    for n in ([4096] if args.quick else [4096, 8192]):
        t1 = time.perf_counter()
        res = bench(mod, n, ok, args.rounds, flush)
        base = res["torch.matmul (cuBLAS, TF32 off)"]
        print(f"\n{n}^3 fp32 ({time.perf_counter() - t1:.0f} s), TFLOP/s per round, ratio = best round / cuBLAS best:")
        for label, rates in res.items():
            print(f"  {label:32s} " + " ".join(f"{x:6.1f}" for x in rates) + f"   x{max(rates) / max(base):.3f}")
    print(f"\ntotal {time.perf_counter() - t0:.0f} s")


if __name__ == "__main__":
    main()
