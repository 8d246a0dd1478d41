// Shared helpers for the course's kernel files (*.cu).
//
// Kept free of ATen/torch headers on purpose: a .cu that includes only this compiles in about
// a second, so a student's edit-build-grade loop stays short. Tensor-level helpers (input checks)
// live in course/ops.h, which only the binding .cpp files include.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>

#include <cuda_runtime.h>
#include <c10/cuda/CUDAException.h>  // C10_CUDA_KERNEL_LAUNCH_CHECK, C10_CUDA_CHECK
#include <c10/util/BFloat16.h>
#include <c10/util/Exception.h>      // TORCH_CHECK
#include <c10/util/Half.h>

#include <course/paths.h>  // course::took: a launcher's branches, observed by the grader

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

// True when every pointer may be read or written as one V (e.g. a Vec<T, 4>) at a time: a
// Vec<double, 4> is 32 bytes, and a 16-byte aligned address is not enough for it (a GPU with
// 32-byte loads faults on it).
template <typename V, typename... Ptrs>
__host__ __device__ inline bool is_aligned_for(const Ptrs*... ptrs) {
  return ((reinterpret_cast<std::uintptr_t>(ptrs) % alignof(V) == 0) && ...);
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

// One full wave: as many blocks of `kernel` (`threads` each, `dynamic_smem` bytes) as can be
// resident on all SMs at once (the occupancy API knows the kernel's register and shared-memory use).
template <typename Kernel>
inline int64_t wave_blocks(Kernel kernel, int threads, size_t dynamic_smem = 0) {
  int device = 0, sms = 0, per_sm = 0;
  C10_CUDA_CHECK(cudaGetDevice(&device));
  C10_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  C10_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, threads, dynamic_smem));
  return static_cast<int64_t>(sms) * (per_sm > 0 ? per_sm : 1);
}

// A grid of at most one full wave (wave_blocks), never more than `items` need. For kernels whose
// items are expensive (a whole output pixel's reduction, say), where each block's share of the work
// is large; streaming kernels want cover_grid.
template <typename Kernel>
inline unsigned grid_for(Kernel kernel, int64_t items, int threads, size_t dynamic_smem = 0) {
  const int64_t needed = ceil_div<int64_t>(items, threads);
  const int64_t wave = wave_blocks(kernel, threads, dynamic_smem);
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

// ------------------------------------------------------- a launch that overlaps the one before it (9.0+)
// An ordinary launch starts once the kernel before it in the stream has ended, and the GPU then takes
// about a microsecond to start it (H100): after a short kernel (a split-K product of 15 us, say) a tenth
// of the time. launch_after_previous launches with programmatic dependent launch instead: the kernel may
// be scheduled while the one before it runs its last blocks, and each of its threads calls
// wait_for_previous() before it touches memory the kernel before it writes or reads; that returns once
// that kernel has ended and its writes are visible. Where the code that runs here was compiled for a
// GPU older than 9.0 (no wait in it), or its architecture is not reported, the launch is an ordinary one.
__device__ __forceinline__ void wait_for_previous() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

template <typename... Params, typename... Args>
inline void launch_after_previous(void (*kernel)(Params...), dim3 grid, dim3 block, size_t dynamic_smem,
                                  cudaStream_t stream, Args&&... args) {
  cudaFuncAttributes attr;
  C10_CUDA_CHECK(cudaFuncGetAttributes(&attr, kernel));
  cudaLaunchAttribute overlap[1];
  overlap[0].id = cudaLaunchAttributeProgrammaticStreamSerialization;
  overlap[0].val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config = {};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = dynamic_smem;
  config.stream = stream;
  config.attrs = overlap;
  config.numAttrs = attr.ptxVersion >= 90 ? 1 : 0;  // the virtual architecture the running code came from
  C10_CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, std::forward<Args>(args)...));
}

// ------------------------------------------------------- TF32 tensor cores (compute capability 8.0+)
// The PTX wrappers of the kernels that multiply on TF32 tensor cores (06's version 3, 08's and 09's
// TF32 kernels; 05's kernel 5 rounds with to_tf32). Compiled for a GPU older than 8.0 they do nothing
// (`#if __CUDA_ARCH__ >= 800`), so a build for a T4 still compiles; a launcher must then refuse to run
// such a kernel (check_tensor_cores below).

// 4 (or 16) bytes global -> shared without a register, in flight until cp_async_wait; `valid` false
// copies nothing and fills the destination with zeros (the zero padding, the tiles' edges). Older GPUs
// (the T4 is sm_75) have no cp.async: there the same functions copy synchronously and the commit and
// wait do nothing, so a kernel built on them (05's kernel 4) stays correct everywhere.
__device__ __forceinline__ void cp_async4(float* dst, const float* src, bool valid) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(static_cast<unsigned>(__cvta_generic_to_shared(dst))),
               "l"(src), "r"(valid ? 4 : 0)
               : "memory");
#else
  *dst = valid ? *src : 0.0f;
#endif
}

__device__ __forceinline__ void cp_async16(float* dst, const float* src, bool valid) {  // both 16-byte aligned
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(static_cast<unsigned>(__cvta_generic_to_shared(dst))),
               "l"(src), "r"(valid ? 16 : 0)
               : "memory");
#else
  *reinterpret_cast<float4*>(dst) = valid ? *reinterpret_cast<const float4*>(src) : make_float4(0, 0, 0, 0);
#endif
}

// Close the group of copies issued since the last commit (one group per K step).
__device__ __forceinline__ void cp_async_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}

// Wait until at most kPending of this thread's committed groups are still in flight.
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
#endif
}

// float -> TF32 (rounded to nearest: 10 bits of mantissa), in a 32-bit register. From sm_90 on one
// instruction (`cvt.rn`, ties to even, as cuBLAS's TF32 rounds); sm_80 has only `cvt.rna` (ties away
// from zero), which sm_90 runs as an Inf/NaN test and an add. A kernel rounds every operand it loads
// into a fragment (05's kernel 5: one rounding per mma), and with the single instruction 05's TF32
// kernel 5 went from 0.41x to 0.44x of cuBLAS on the H100.
__device__ __forceinline__ uint32_t to_tf32(float v) {
  uint32_t r = __float_as_uint(v);
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm("cvt.rn.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(v));
#elif defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(r) : "f"(v));
#endif
  return r;
}

// d += a b for one 16 x 8 tile: m16n8k8, TF32 a (4 registers) and b (2), float32 sums in d (4 floats).
// With g = lane / 4, t = lane % 4 (row, column of the tile), the PTX ISA's fragments are
//   A, 16 x 8 (m x k):  a0 (g, t), a1 (g + 8, t), a2 (g, t + 4), a3 (g + 8, t + 4)
//   B, 8 x 8 (k x n):   b0 (t, g), b1 (t + 4, g)
//   D, 16 x 8 (m x n):  d0 (g, 2t), d1 (g, 2t + 1), d2 (g + 8, 2t), d3 (g + 8, 2t + 1)
__device__ __forceinline__ void mma_tf32(float (&d)[4], const uint32_t (&a)[4], uint32_t b0, uint32_t b1) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
               "{%8, %9}, {%0, %1, %2, %3};\n"
               : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
               : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
#endif
}

// The compute capability (major, minor) of the current device.
inline std::pair<int, int> device_capability() {
  int device = 0, major = 0, minor = 0;
  C10_CUDA_CHECK(cudaGetDevice(&device));
  C10_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  C10_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  return {major, minor};
}

// Host side: refuse, with a message naming `what`, to run `kernel` (a kernel on mma.sync tensor cores,
// `kind` its precision: TF32 or BF16) where it cannot work: a GPU below compute capability 8.0, or code
// for this GPU that was compiled for an older one (a 7.5 build JIT-compiled on an H100: the wrappers
// above are empty there).
template <typename Kernel>
inline void check_tensor_cores(Kernel kernel, const char* what, const char* kind = "TF32") {
  const auto [major, minor] = device_capability();
  // (strings only in TORCH_CHECK: see course/ops.h on integers streamed from nvcc-compiled files)
  TORCH_CHECK(major >= 8, std::string(what) + " needs compute capability 8.0 (tensor cores with " + kind +
                              "); this GPU is " + std::to_string(major) + "." + std::to_string(minor));
  cudaFuncAttributes attr;
  C10_CUDA_CHECK(cudaFuncGetAttributes(&attr, kernel));
  // ptxVersion: the virtual architecture the code that runs here was compiled from (0: not reported)
  TORCH_CHECK(attr.ptxVersion == 0 || attr.ptxVersion >= 80,
              std::string(what) + ": this build's code for this GPU was compiled for compute capability " +
                  std::to_string(attr.ptxVersion / 10) + "." + std::to_string(attr.ptxVersion % 10) +
                  ", which has no tensor-core path; build for 8.0 or newer (TORCH_CUDA_ARCH_LIST)");
}

}  // namespace course
