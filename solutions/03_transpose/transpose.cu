// Exercise 03: out-of-place matrix transpose through a shared-memory tile.
//
// This file includes no PyTorch tensor headers, so editing it recompiles in about a second.
// Tensors, dtype dispatch and op registration live in transpose.cpp.
#include <algorithm>

#include <course/cuda.cuh>

#include "transpose.h"

namespace {

// a 64 x 64 tile; a warp reads or writes 32 consecutive elements at a time
[[maybe_unused]] constexpr int kTile = 64;
constexpr int kBlockX = 32;   // 32 x 8 threads per block: each thread moves 2 columns x 8 rows = 16
constexpr int kBlockY = 8;    // elements, so many loads are in flight before the block waits at a barrier
[[maybe_unused]] constexpr int kMaxGridY = 65535;  // CUDA's limit on gridDim.y

// Grid (ceil(cols / 64), min(ceil(rows / 64), 65535)), block (32, 8). Block (bx, by) moves the tile
// of input rows [64 by, 64 by + 64) x input columns [64 bx, 64 bx + 64) (and, grid-stride, the tiles
// gridDim.y further down). Thread (tx, ty) reads input rows ty + 8 j (j < 8) of the tile at input
// columns tx and tx + 32, then writes output rows ty + 8 j of the transposed tile at output columns
// tx and tx + 32: consecutive threads touch consecutive addresses in both the read and the write.
template <typename scalar_t>
__global__ void __launch_bounds__(kBlockX * kBlockY)
    transpose_kernel(const scalar_t* __restrict__ in, scalar_t* __restrict__ out, int64_t rows, int64_t cols) {
  // BEGIN SOLUTION
  // GOAL: out = the transpose of the rows x cols matrix `in`, every read and every write coalesced
  // GOAL: (through a shared-memory tile; the geometry is in the comment above the kernel).
  // TODO: declare a kTile x (kTile + 1) __shared__ tile (the + 1 keeps a tile column in distinct banks).
  // TODO: for each tile row of blocks (blockIdx.y, then + gridDim.y while < ceil(rows / kTile)):
  // TODO:   1. read the input tile (thread (x, y) -> tile rows y + 8 j, columns x + 32 i) into
  // TODO:      tile[row][col], skipping elements outside rows x cols; 2. __syncthreads();
  // TODO:   3. write tile[col][row] to out[(tile column start + row) * rows + tile row start + col],
  // TODO:      guarded the same way; 4. __syncthreads() before the next iteration overwrites the tile.
  __shared__ scalar_t tile[kTile][kTile + 1];
  const int64_t tiles_r = course::ceil_div<int64_t>(rows, kTile);
  const int64_t c0 = int64_t(blockIdx.x) * kTile;  // first input column (= output row) of this block
  for (int64_t tr = blockIdx.y; tr < tiles_r; tr += gridDim.y) {
    const int64_t r0 = tr * kTile;  // first input row (= output column) of this tile
#pragma unroll
    for (int j = 0; j < kTile; j += kBlockY) {
#pragma unroll
      for (int i = 0; i < kTile; i += kBlockX) {
        const int64_t r = r0 + threadIdx.y + j, c = c0 + threadIdx.x + i;
        if (r < rows && c < cols) tile[threadIdx.y + j][threadIdx.x + i] = in[r * cols + c];
      }
    }
    __syncthreads();
#pragma unroll
    for (int j = 0; j < kTile; j += kBlockY) {
#pragma unroll
      for (int i = 0; i < kTile; i += kBlockX) {
        const int64_t c = c0 + threadIdx.y + j, r = r0 + threadIdx.x + i;  // output row c, output column r
        if (c < cols && r < rows) out[c * rows + r] = tile[threadIdx.x + i][threadIdx.y + j];
      }
    }
    __syncthreads();
  }
  // END SOLUTION
}

}  // namespace

template <typename scalar_t>
void transpose_cuda(const scalar_t* in, scalar_t* out, int64_t rows, int64_t cols, cudaStream_t stream) {
  // (planner paths: more row tiles than gridDim.y holds, which the kernel strides over; past 2^31 elements)
  if (cols > 0 && course::ceil_div<int64_t>(rows, kTile) > kMaxGridY) course::took<scalar_t>("grid_stride_rows");
  if (rows * cols >= (int64_t(1) << 31)) course::took<scalar_t>("past_2^31");
  // BEGIN SOLUTION
  // GOAL: run transpose_kernel over the whole matrix (possibly empty) on `stream`; report a failed launch.
  // TODO: return early for an empty matrix; launch transpose_kernel on `stream` with blocks of
  // TODO: (kBlockX, kBlockY) threads and a grid of (ceil(cols / kTile), min(ceil(rows / kTile), kMaxGridY))
  // TODO: blocks; check the launch with C10_CUDA_KERNEL_LAUNCH_CHECK().
  // STUB: TORCH_CHECK(false, "transpose_cuda (transpose.cu) is not implemented yet");
  if (rows == 0 || cols == 0) return;
  const dim3 block(kBlockX, kBlockY);
  const int64_t tiles_r = course::ceil_div<int64_t>(rows, kTile);
  const dim3 grid(static_cast<unsigned>(course::ceil_div<int64_t>(cols, kTile)),
                  static_cast<unsigned>(std::min<int64_t>(tiles_r, kMaxGridY)));
  transpose_kernel<scalar_t><<<grid, block, 0, stream>>>(in, out, rows, cols);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  // END SOLUTION
}

// The binding file dispatches on dtype; these are the types it may ask for.
#define INSTANTIATE(T) template void transpose_cuda<T>(const T*, T*, int64_t, int64_t, cudaStream_t);
INSTANTIATE(float)
INSTANTIATE(double)
INSTANTIATE(c10::Half)
INSTANTIATE(c10::BFloat16)
