// Shared helpers for the course's kernel files (*.cu).
//
// Kept free of ATen/torch headers on purpose: a .cu that includes only this compiles in about
// a second, so a student's edit-build-grade loop stays short. Tensor-level helpers (input checks)
// live in course/ops.h, which only the binding .cpp files include.
#pragma once

#include <cstdint>
#include <type_traits>

#include <cuda_runtime.h>
#include <c10/cuda/CUDAException.h>  // C10_CUDA_KERNEL_LAUNCH_CHECK, C10_CUDA_CHECK
#include <c10/util/BFloat16.h>
#include <c10/util/Exception.h>      // TORCH_CHECK
#include <c10/util/Half.h>

namespace course {

// Number of blocks of `block` threads needed to cover `n` items.
template <typename T>
__host__ __device__ constexpr T ceil_div(T n, T block) {
  return (n + block - 1) / block;
}

// The type to do arithmetic in: float for float/half/bfloat16, double for double.
// Half-precision arithmetic would lose accuracy for no speed gain in memory-bound kernels.
template <typename scalar_t>
using opmath_t = std::conditional_t<std::is_same_v<scalar_t, double>, double, float>;

// A group of N elements loaded or stored with one instruction (16 bytes: LDG.128/STG.128).
template <typename scalar_t, int N>
struct alignas(sizeof(scalar_t) * N) Vec {
  scalar_t v[N];
};

// Elements of scalar_t in one 16-byte vector.
template <typename scalar_t>
constexpr int kVec16 = 16 / sizeof(scalar_t);

// True when every pointer may be read or written 16 bytes at a time. A view such as x[1:] is
// contiguous but not aligned, and must take a scalar path.
template <typename... Ptrs>
__host__ __device__ inline bool is_aligned16(const Ptrs*... ptrs) {
  return ((reinterpret_cast<std::uintptr_t>(ptrs) % 16 == 0) && ...);
}

// Blocks for a streaming (memory-bound) kernel whose threads each handle one item per step of a
// grid-stride loop: enough to cover every item, capped at gridDim.x's limit (the loop handles the
// rest). Measured on the H100 (2026-11-23, LeakyReLU on 2^28 fp32, scripts/sweep_elementwise.py):
// covering the tensor ran at 3013 GB/s, equal to copy_; one occupancy wave of blocks stepping
// through it ran at 2815 GB/s, four waves at 2849. The many short blocks cost nothing measurable.
inline unsigned cover_grid(int64_t items, int threads) {
  constexpr int64_t kMaxGridX = 2147483647;  // 2^31 - 1
  const int64_t needed = ceil_div<int64_t>(items, threads);
  return static_cast<unsigned>(needed < kMaxGridX ? needed : kMaxGridX);
}

// A grid of at most one full wave, i.e. as many blocks as can be resident on all SMs at once (the
// occupancy API knows the kernel's register and shared-memory use), never more than `items` need.
// For kernels whose items are expensive (a whole output pixel's reduction, say), where each
// block's share of the work is large; streaming kernels want cover_grid.
template <typename Kernel>
inline unsigned grid_for(Kernel kernel, int64_t items, int threads, size_t dynamic_smem = 0) {
  int device = 0, sms = 0, per_sm = 0;
  C10_CUDA_CHECK(cudaGetDevice(&device));
  C10_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  C10_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, dynamic_smem));
  const int64_t needed = ceil_div<int64_t>(items, threads);
  const int64_t wave = static_cast<int64_t>(sms) * (per_sm > 0 ? per_sm : 1);
  return static_cast<unsigned>(needed < wave ? needed : wave);
}

// The same without the kernel: assumes `blocks_per_sm` resident blocks per SM. Prefer the overload
// above, which asks the occupancy API instead of assuming.
inline unsigned grid_for(int64_t items, int threads, int blocks_per_sm = 8) {
  int device = 0, sms = 0;
  C10_CUDA_CHECK(cudaGetDevice(&device));
  C10_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const int64_t needed = ceil_div<int64_t>(items, threads);
  const int64_t cap = static_cast<int64_t>(sms) * blocks_per_sm;
  return static_cast<unsigned>(needed < cap ? needed : cap);
}

}  // namespace course
