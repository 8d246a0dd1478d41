"""Which launch shape lets an elementwise kernel reach copy bandwidth? (needs a CUDA GPU)

    python3 scripts/sweep_elementwise.py

Times LeakyReLU on 2^28 fp32 elements in three access patterns (p1: grid-stride loop, each thread
unrolling over the grid stride, as solutions/01_leaky_relu does; p2: grid-stride loop over
block-sized tiles, each thread unrolling inside its block's tile, as PyTorch's vectorized kernels
do; p3: one 16-byte vector per step; p4: a scalar grid-stride loop over the elements, in the grid of
one thread per 16-byte vector that solutions/01_leaky_relu's launcher gives a student's kernel),
unroll depths 1-8, 128-512 threads, and grids of 1, 2 or 4
occupancy waves or one block per tile ("w0"), beside `copy_` and `F.leaky_relu`, L2 flushed before
every timed call, median of 40. Every variant's output is compared bit for bit with F.leaky_relu.
The winner informs solutions/01_leaky_relu and 02_elu: see docs/performance.md.
"""
import statistics

import torch
from torch.utils.cpp_extension import load_inline

src = r'''
#include <torch/extension.h>
#include <c10/cuda/CUDAStream.h>
struct __align__(16) V4 { float v[4]; };

// P1: grid-stride, thread-strided unroll (current solution)
template <int U>
__global__ void k_stride(const float* __restrict__ x, float* __restrict__ y, int64_t nv, float s) {
  const int64_t first = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t base = first; base < nv; base += stride * U) {
    V4 v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) if (base + u * stride < nv) v[u] = reinterpret_cast<const V4*>(x)[base + u * stride];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      if (base + u * stride >= nv) break;
#pragma unroll
      for (int k = 0; k < 4; ++k) v[u].v[k] = v[u].v[k] > 0.f ? v[u].v[k] : v[u].v[k] * s;
      reinterpret_cast<V4*>(y)[base + u * stride] = v[u];
    }
  }
}
// P2: grid-stride over block tiles of blockDim*U vectors (PyTorch-like block-local access)
template <int U>
__global__ void k_tile(const float* __restrict__ x, float* __restrict__ y, int64_t nv, float s) {
  const int64_t tile = int64_t(blockDim.x) * U;
  for (int64_t base = blockIdx.x * tile + threadIdx.x; base < nv; base += int64_t(gridDim.x) * tile) {
    V4 v[U];
#pragma unroll
    for (int u = 0; u < U; ++u) if (base + u * blockDim.x < nv) v[u] = reinterpret_cast<const V4*>(x)[base + u * blockDim.x];
#pragma unroll
    for (int u = 0; u < U; ++u) {
      if (base + u * blockDim.x >= nv) break;
#pragma unroll
      for (int k = 0; k < 4; ++k) v[u].v[k] = v[u].v[k] > 0.f ? v[u].v[k] : v[u].v[k] * s;
      reinterpret_cast<V4*>(y)[base + u * blockDim.x] = v[u];
    }
  }
}
// P3: simple grid-stride, one vector per step
__global__ void k_simple(const float* __restrict__ x, float* __restrict__ y, int64_t nv, float s) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < nv; i += int64_t(gridDim.x) * blockDim.x) {
    V4 v = reinterpret_cast<const V4*>(x)[i];
#pragma unroll
    for (int k = 0; k < 4; ++k) v.v[k] = v.v[k] > 0.f ? v.v[k] : v.v[k] * s;
    reinterpret_cast<V4*>(y)[i] = v;
  }
}
// P4: a scalar grid-stride loop over all n elements (what exercise 01's TODO allows), in any grid
__global__ void k_scalar(const float* __restrict__ x, float* __restrict__ y, int64_t n, float s) {
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += int64_t(gridDim.x) * blockDim.x)
    y[i] = x[i] > 0.f ? x[i] : x[i] * s;
}
template <typename K>
int wave(K k, int threads) {
  int dev, sms, per; cudaGetDevice(&dev); cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev);
  cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per, k, threads, 0); return sms * per;
}
void run(torch::Tensor x, torch::Tensor y, int64_t pattern, int64_t unroll, int64_t threads, int64_t waves) {
  int64_t nv = x.numel() / 4; float s = 0.01f;
  auto st = at::cuda::getCurrentCUDAStream();
  auto launch = [&](auto k, int64_t per_block) {
    int64_t need = (nv + per_block - 1) / per_block;
    int64_t g = waves > 0 ? std::min<int64_t>(need, wave(k, threads) * waves) : need;
    k<<<g, threads, 0, st>>>(x.data_ptr<float>(), y.data_ptr<float>(), nv, s);
  };
  if (pattern == 4) {  // the exercise's grid: one thread per 16-byte vector, so 4 elements per thread
    k_scalar<<<(nv + threads - 1) / threads, threads, 0, st>>>(x.data_ptr<float>(), y.data_ptr<float>(), x.numel(), s);
  } else if (pattern == 3) launch(k_simple, threads);
  else if (pattern == 1) { if (unroll == 1) launch(k_stride<1>, threads); else if (unroll == 2) launch(k_stride<2>, threads*2); else if (unroll==4) launch(k_stride<4>, threads*4); else launch(k_stride<8>, threads*8); }
  else { if (unroll == 1) launch(k_tile<1>, threads); else if (unroll == 2) launch(k_tile<2>, threads*2); else if (unroll==4) launch(k_tile<4>, threads*4); else launch(k_tile<8>, threads*8); }
  TORCH_CHECK(cudaGetLastError() == cudaSuccess);
}
'''
mod = load_inline("ew_variants", cpp_sources="void run(torch::Tensor x, torch::Tensor y, int64_t pattern, int64_t unroll, int64_t threads, int64_t waves);",
                  cuda_sources=src, functions=["run"], extra_cuda_cflags=["-O3", "-Xptxas=-v"], verbose=False)
n = 2**28
x = torch.randn(n, device="cuda")
y = torch.empty_like(x)
flush = torch.empty(2 * 50 * 2**20 // 4 * 4, dtype=torch.int8, device="cuda")
ref = torch.nn.functional.leaky_relu(x, 0.01)

def t(fn, reps=40):
    for _ in range(5): fn()
    ts = []
    for _ in range(reps):
        flush.zero_()
        a = torch.cuda.Event(enable_timing=True); b = torch.cuda.Event(enable_timing=True)
        a.record(); fn(); b.record(); b.synchronize(); ts.append(a.elapsed_time(b))
    return statistics.median(ts)

rows = []
def add(name, fn, check=True):
    if check:
        y.fill_(float("nan")); fn(); torch.cuda.synchronize()
        ok = torch.equal(y, ref)
    else: ok = True
    ms = t(fn); gbs = 2 * 4 * n / ms / 1e6
    rows.append((name, ms, gbs, ok)); print(f"{name:40s} {ms*1e3:8.1f} us {gbs:7.0f} GB/s {'ok' if ok else 'WRONG'}", flush=True)

add("torch copy_", lambda: y.copy_(x), check=False)
add("F.leaky_relu", lambda: torch.nn.functional.leaky_relu(x, 0.01, ), check=False)
for rep in range(2):
    for pattern in (1, 2, 3):
        for unroll in ((1, 2, 4, 8) if pattern != 3 else (1,)):
            for threads in (128, 256, 512):
                for waves in (1, 2, 4, 0):
                    if pattern == 1 and waves == 0 and unroll > 1: continue
                    add(f"p{pattern} u{unroll} t{threads} w{waves} r{rep}", lambda: mod.run(x, y, pattern, unroll, threads, waves))
    for threads in (128, 256, 512):
        add(f"p4 scalar t{threads} w0 r{rep}", lambda: mod.run(x, y, 4, 1, threads, 0))
    add(f"torch copy_ r{rep}", lambda: y.copy_(x), check=False)
    add(f"F.leaky_relu r{rep}", lambda: torch.nn.functional.leaky_relu(x, 0.01), check=False)
rows.sort(key=lambda r: -r[2])
print("TOP 15")
for r in rows[:15]: print(r)
