// What the kernel files of exercise 05 share, one version to a file:
//   matmul_basic.cu         versions 1-3: matmul_kernel1 (one thread per output), matmul_kernel2 (shared-
//                           memory tiles), matmul_kernel3 (register blocking, float4 loads, double buffering)
//   matmul_pipeline.cu      version 4: matmul_kernel4 (cp.async ring), stream-K, and plan4, the planner
//                           that picks a path per shape (the README's "Shape classes")
//   matmul_shapes.cu        version 4's other paths, version 5's too: the matrix-vector kernels, the small
//                           tiles and the split-K reduction, with their launchers
//   matmul_tensor_cores.cu  version 5: matmul_kernel5 (mma.sync, TF32 and BF16), B^T rounded to TF32
//   matmul_wgmma.cu         version 6: matmul_kernel6 (Hopper's wgmma over TMA copies, sm_90a)
// The launchers the binding (matmul.cpp) calls are in matmul.h. Here: the limits, device helpers and
// constants several files use, and the host functions one file calls in another (namespace
// matmul_internal; each file's kernels stay in its own anonymous namespace). Nothing here includes
// PyTorch's tensor headers, so editing a kernel file recompiles in about a second.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>

#include <cuda_bf16.h>

#include <course/cuda.cuh>

#include "matmul.h"

namespace matmul_internal {

constexpr int64_t kMaxGridY = 65535;  // CUDA's limit on gridDim.y (row tiles go there)
constexpr int64_t kMaxGridZ = 65535;  // and on gridDim.z (batch elements, and K splits, go there)

// An M whose row tiles (rows_per_block each) would not fit in gridDim.y: refused, naming the version.
inline void check_grid_rows(int64_t M, int64_t rows_per_block, const char* version) {
  // (numbers formatted by std::to_string: streaming integers into a message crashed on torch 2.11)
  TORCH_CHECK(course::ceil_div<int64_t>(M, rows_per_block) <= kMaxGridY,
              std::string("matmul ") + version + ": A has M = " + std::to_string(M) +
                  " rows, more than this kernel's grid can cover (" + std::to_string(kMaxGridY * rows_per_block) + ")");
}

// cp.async (kernels 4 and 5): the course's wrappers, which copy synchronously on GPUs without it
using course::cp_async16;
using course::cp_async4;
using course::cp_async_commit;
using course::cp_async_wait;

// Two neighbouring outputs (x at p[0], y at p[1]) in C's type: float, or bfloat16 rounded to nearest.
__device__ __forceinline__ void store2(float* p, float x, float y) { *reinterpret_cast<float2*>(p) = make_float2(x, y); }
__device__ __forceinline__ void store2(__nv_bfloat16* p, float x, float y) {
  *reinterpret_cast<__nv_bfloat162*>(p) = __floats2bfloat162_rn(x, y);
}
__device__ __forceinline__ void store1(float* p, float x) { *p = x; }
__device__ __forceinline__ void store1(__nv_bfloat16* p, float x) { *p = __float2bfloat16_rn(x); }

// ---------------------------------------------------------------------------------- ldmatrix, TF32 (kernels 5 and 6)
// ldmatrix.x4: four 8 x 8 matrices of 16-bit elements (an 8 x 4 matrix of 32-bit words: the same bytes),
// one 16-byte row each from an address given by a lane: lane l gives row l % 8 of matrix l / 8. Lane
// l receives, in r[i], word l % 4 of row l / 4 of matrix i. `.trans` transposes each matrix (16-bit
// elements): lane l receives elements (2 (l % 4), l / 4) and (2 (l % 4) + 1, l / 4) (row, column).
// The address as a 32-bit shared-memory one (kernel 6 addresses its ring so: TMA and wgmma take them):
[[maybe_unused]] __device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t shared_row) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_row));
#else
  r[0] = r[1] = r[2] = r[3] = 0;  // no tensor-core path before sm_80 (never launched there)
#endif
}

// the same from a generic pointer into shared memory
[[maybe_unused]] __device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* row) {
  ldmatrix_x4(r, static_cast<uint32_t>(__cvta_generic_to_shared(row)));
}

[[maybe_unused]] __device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* row) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(static_cast<unsigned>(__cvta_generic_to_shared(row))));
#else
  r[0] = r[1] = r[2] = r[3] = 0;  // no tensor-core path before sm_80 (never launched there)
#endif
}

using course::to_tf32;  // rounded to TF32 (course/cuda.cuh)

// A row of n elements padded to whole 16-byte chunks: B^T's rows (kernel 5 copies them in chunks; TMA's
// row strides are multiples of 16 bytes).
template <typename T>
constexpr int64_t padded16(int64_t n) {
  constexpr int64_t kElems = 16 / sizeof(T);
  return (n + kElems - 1) / kElems * kElems;
}

// ---------------------------------------------------------------------------------- version 4's plans
// The geometry of the matrix-vector kernels and the small tiles (matmul_shapes.cu), which plan4 reads.
constexpr int kGemvThreads = 256;
constexpr int kGemvRowsPerBlock = kGemvThreads / 32;  // matmul_gemv_rows: a warp per row of A
constexpr int kGemvVec = 4 * 32;                      // floats a warp reads per float4 step of a row
constexpr int kGemvColsWarps = kGemvThreads / 32;     // matmul_gemv_cols: 8 warps split a block's k range
constexpr int kGemvColsPerBlock = 4 * 32;             // and each covers its 128 columns, 4 a lane
constexpr int kGemvColsNarrow = 16;                   // or 16 columns, 8 rows a warp (few columns)
constexpr int kSmallThreads = 256;
constexpr int kSmallArea = 16 * kSmallThreads;  // outputs per tile: 4 x 4 per thread
constexpr int kSmallBK = 32;                   // k per step: 8 to 16 KiB of loads in flight per block
constexpr int64_t kSmallSide = 64;             // the longest short side that takes these tiles

// Versions 4 and 5 plan a product (given): which kernel runs, and how K is split (the README's "Shape
// classes"). Tiles: the version's own kernel (4 or 5); GemvRows (N == 1) and GemvCols (M == 1): the
// matrix-vector kernels. Small32, Small64, Small128: matmul_small_tiles with tiles of 32 x 128, 64 x 64
// or 128 x 32 outputs (version 4). StreamK: matmul_kernel4_streamk's workers over kernel 4's tiles and
// matmul_streamk_fixup (version 4).
enum class Path { kTiles, kGemvRows, kGemvCols, kGemvColsNarrow, kSmall32, kSmall64, kSmall128, kStreamK };
struct Plan {
  Path path;
  int64_t splits;   // K ranges, summed by matmul_splitk_reduce when there are several
  int64_t k_split;  // k per range (K when splits == 1)
  // > 0: rows 0 .. head_rows - 1 of C (whole waves of tiles) are one launch of whole K straight into
  // C, and only the rows after them (the tail) are split as above (split_tail; batch 1)
  int64_t head_rows = 0;
};

// matmul_pipeline.cu: the GPU's SMs; the split of K for `tiles` tiles (plan4 states the rule); version
// 4's plan; the workspace a plan needs, in floats.
int64_t sm_count();
Plan split_tiles(Path path, int64_t M, int64_t N, int64_t K, int64_t tiles, int64_t sms, int64_t align, int64_t min_k);
Plan plan4(int64_t batch, int64_t M, int64_t N, int64_t K);
int64_t workspace_floats(const Plan& plan, int64_t batch, int64_t M, int64_t N);

// matmul_shapes.cu: the small tiles (BM = 32, 64 or 128), the matrix-vector kernels and the split-K
// reduction (T float or __nv_bfloat16), each launched and checked.
template <int BM>
void launch_small_tiles(bool vec, dim3 grid, const float* a, const float* b, float* out, int64_t M, int64_t N,
                        int64_t K, int64_t k_split, int64_t splits, cudaStream_t stream);
void launch_gemv(const Plan& plan, const float* a, const float* b, float* o, int64_t M, int64_t N, int64_t K,
                 unsigned z, cudaStream_t stream);
template <typename T>
void launch_splitk_reduce(const float* workspace, T* C, int64_t batch, int64_t MN, int64_t splits, cudaStream_t stream);

// matmul_tensor_cores.cu: B^T rounded to TF32 (versions 5 and 6).
void launch_transpose_tf32(const float* B, int64_t ldb, uint32_t* bt, int64_t batch, int64_t K, int64_t N, int64_t Kp,
                           cudaStream_t stream);

}  // namespace matmul_internal
