// Exercise 04: a K x K filter over an image ("same" size, zero padding), with the filter in
// __constant__ memory and a shared-memory tile with a halo.
//
// This file includes no PyTorch tensor headers, so editing it recompiles in about a second.
// Tensors and op registration live in stencil2d.cpp.
#include <algorithm>
#include <string>

#include <course/cuda.cuh>

#include "stencil2d.h"

namespace {

// The filter, row-major. Every thread of a warp reads the same tap at the same time, which is
// what the constant cache serves best (one broadcast per warp).
[[maybe_unused]] __constant__ float c_filter[kMaxFilter * kMaxFilter];

constexpr int kBlockX = 32;  // threads per block along x: one warp per row of outputs
constexpr int kBlockY = 8;   // threads per block along y
constexpr int kCols = 2;     // outputs per thread along x, kBlockX apart (each warp access stays coalesced)
constexpr int kRows = 8;     // outputs per thread along y, adjacent (the tile rows they share are read once)
[[maybe_unused]] constexpr int kTileW = kBlockX * kCols;  // a block's output tile: 64 columns ...
[[maybe_unused]] constexpr int kTileH = kBlockY * kRows;  // ... by 64 rows
[[maybe_unused]] constexpr int kMaxGridY = 65535;         // CUDA's limit on gridDim.y
constexpr int64_t kMaxSide = int64_t(1) << 30;  // the kernel's 32-bit rows and columns stay below 2^31

// Grid (ceil(W / 64), min(B * ceil(H / 64), 65535)), block (32, 8). Block (bx, t) computes the
// 64 x 64 output tile at columns [64 bx, 64 bx + 64) and rows [64 (t % tiles_y), ...) of image
// t / tiles_y (grid-stride over t). The block first copies the tile plus a halo of K / 2 pixels on
// each side into shared memory (zeros outside the image), thread (tx, ty) loading rows ty + 8 j and
// columns tx + 32 i of it, all of its loads into registers before its first shared-memory store;
// thread (tx, ty) then computes columns tx and tx + 32 of the output tile, rows 8 ty .. 8 ty + 7,
// from shared memory. Rows and columns are 32-bit (stencil2d_cuda checks H, W < 2^30), offsets
// into the batch 64-bit.
template <int K>
__global__ void __launch_bounds__(kBlockX * kBlockY)
    stencil2d_kernel(const float* __restrict__ in, float* __restrict__ out, int64_t batch, int64_t height64,
                     int64_t width64) {
  constexpr int R = K / 2;
  constexpr int kSmemW = kTileW + 2 * R, kSmemH = kTileH + 2 * R;
  constexpr int kLoadsY = course::ceil_div(kSmemH, kBlockY), kLoadsX = course::ceil_div(kSmemW, kBlockX);
  __shared__ float tile[kSmemH][kSmemW];
  const int height = static_cast<int>(height64), width = static_cast<int>(width64);  // both below 2^30
  const int64_t tiles_y = course::ceil_div<int64_t>(height64, kTileH);
  const int x0 = blockIdx.x * kTileW;  // first output column of this block
  const int tx = threadIdx.x, ty = threadIdx.y;
  for (int64_t t = blockIdx.y; t < batch * tiles_y; t += gridDim.y) {
    const int64_t b = t / tiles_y;
    const int y0 = static_cast<int>(t - b * tiles_y) * kTileH;  // first output row of this block
    const float* image = in + b * height64 * width64;  // 64-bit: a batch can exceed 2^31 pixels
    float* dst = out + b * height64 * width64;
    // BEGIN SOLUTION
    // GOAL: `tile` holds the input pixels this block's outputs read (zero outside the image), visible to
    // GOAL: the whole block, with this thread's global loads all in flight at once.
    // TODO: copy the kSmemH x kSmemW input region starting at row y0 - R, column x0 - R into `tile`:
    // TODO: thread (tx, ty) takes tile rows ty + kBlockY j and columns tx + kBlockX i (while inside the
    // TODO: tile), 0 for pixels outside the image (zero padding). Issue all of its kLoadsY x kLoadsX
    // TODO: global loads into a register array first, then store them to `tile`; then __syncthreads().
    // All loads first: the stores to `tile` wait for them, so loading and storing one value at a time
    // would leave one load in flight per thread, each waiting out the memory latency alone.
    float loaded[kLoadsY][kLoadsX];
#pragma unroll
    for (int j = 0; j < kLoadsY; ++j) {
      const int sy = ty + kBlockY * j, y = y0 - R + sy;
#pragma unroll
      for (int i = 0; i < kLoadsX; ++i) {
        const int sx = tx + kBlockX * i, x = x0 - R + sx;
        loaded[j][i] = (sy < kSmemH && sx < kSmemW && y >= 0 && y < height && x >= 0 && x < width)
                           ? image[int64_t(y) * width + x] : 0.0f;
      }
    }
#pragma unroll
    for (int j = 0; j < kLoadsY; ++j) {
#pragma unroll
      for (int i = 0; i < kLoadsX; ++i) {
        const int sy = ty + kBlockY * j, sx = tx + kBlockX * i;
        if (sy < kSmemH && sx < kSmemW) tile[sy][sx] = loaded[j][i];
      }
    }
    __syncthreads();
    // END SOLUTION

    // BEGIN SOLUTION
    // GOAL: this thread's outputs (the geometry above the kernel) computed from `tile` and c_filter and
    // GOAL: stored, and `tile` free for the next iteration.
    // TODO: compute this thread's kCols x kRows outputs (columns x0 + tx + kBlockX c, rows
    // TODO: y0 + kRows * ty + i): the sum over dy, dx < K of
    // TODO: c_filter[dy * K + dx] * tile[kRows * ty + i + dy][tx + kBlockX * c + dx]; store those inside
    // TODO: the image into `dst`, then __syncthreads() before the next tile overwrites `tile`.
    float acc[kCols][kRows] = {};
    // Walk the kRows + K - 1 tile rows this thread needs once; each value feeds up to K outputs.
#pragma unroll
    for (int r = 0; r < kRows + K - 1; ++r) {
#pragma unroll
      for (int dx = 0; dx < K; ++dx) {
#pragma unroll
        for (int c = 0; c < kCols; ++c) {
          const float v = tile[kRows * ty + r][tx + kBlockX * c + dx];
#pragma unroll
          for (int i = 0; i < kRows; ++i) {
            const int dy = r - i;
            if (dy >= 0 && dy < K) acc[c][i] = fmaf(c_filter[dy * K + dx], v, acc[c][i]);
          }
        }
      }
    }
#pragma unroll
    for (int c = 0; c < kCols; ++c) {
      const int x = x0 + tx + kBlockX * c;
#pragma unroll
      for (int i = 0; i < kRows; ++i) {
        const int y = y0 + kRows * ty + i;
        if (y < height && x < width) dst[int64_t(y) * width + x] = acc[c][i];
      }
    }
    __syncthreads();
    // END SOLUTION
  }
}

template <int K>
void launch(const float* in, float* out, int64_t batch, int64_t height, int64_t width, cudaStream_t stream) {
  // (planner paths: each filter size; more row tiles than gridDim.y holds; an image batch past 2^31 pixels)
  course::took(K == 1 ? "k1" : K == 3 ? "k3" : K == 5 ? "k5" : "k7");
  if (width > 0 && batch * course::ceil_div<int64_t>(height, kTileH) > kMaxGridY) course::took("grid_stride_tiles");
  if (batch * height * width >= (int64_t(1) << 31)) course::took("past_2^31");
  // BEGIN SOLUTION
  // GOAL: run stencil2d_kernel<K> over every image of the batch on `stream`; report a failed launch.
  // TODO: launch stencil2d_kernel<K> on `stream` with (kBlockX, kBlockY) blocks and a grid of
  // TODO: (ceil(width / kTileW), min(batch * ceil(height / kTileH), kMaxGridY)); check the launch.
  // STUB: TORCH_CHECK(false, "launch (stencil2d.cu) is not implemented yet");
  const dim3 block(kBlockX, kBlockY);
  const int64_t tiles = batch * course::ceil_div<int64_t>(height, kTileH);
  const dim3 grid(static_cast<unsigned>(course::ceil_div<int64_t>(width, kTileW)),
                  static_cast<unsigned>(std::min<int64_t>(tiles, kMaxGridY)));
  stencil2d_kernel<K><<<grid, block, 0, stream>>>(in, out, batch, height, width);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  // END SOLUTION
}

}  // namespace

void stencil2d_set_filter(const float* filter, int k, cudaStream_t stream) {
  // BEGIN SOLUTION
  // GOAL: c_filter holds the k x k filter at `filter` (device memory), in order on `stream`, errors reported.
  // TODO: copy the k * k floats at `filter` (device memory) into c_filter with
  // TODO: cudaMemcpyToSymbolAsync(..., cudaMemcpyDeviceToDevice, stream), checked with C10_CUDA_CHECK.
  // STUB: TORCH_CHECK(false, "stencil2d_set_filter (stencil2d.cu) is not implemented yet");
  C10_CUDA_CHECK(cudaMemcpyToSymbolAsync(c_filter, filter, sizeof(float) * k * k, 0, cudaMemcpyDeviceToDevice,
                                         stream));
  // END SOLUTION
}

void stencil2d_cuda(const float* in, float* out, int64_t batch, int64_t height, int64_t width, int k,
                    cudaStream_t stream) {
  if (batch == 0 || height == 0 || width == 0) return;
  // The kernel keeps rows and columns in 32-bit integers (fewer registers and instructions per
  // load); a side of 2^30 pixels leaves room for the tile and its halo past the edge.
  TORCH_CHECK(height < kMaxSide && width < kMaxSide, "x: each side must be below 2^30 pixels, but x is " +
              std::to_string(height) + " x " + std::to_string(width));
  // K is a template parameter so the tap loops unroll and the tile's size is known at compile time.
  switch (k) {
    case 1: return launch<1>(in, out, batch, height, width, stream);
    case 3: return launch<3>(in, out, batch, height, width, stream);
    case 5: return launch<5>(in, out, batch, height, width, stream);
    case 7: return launch<7>(in, out, batch, height, width, stream);
    // (the number formatted by std::to_string: streaming integers into a message crashed on torch 2.11)
    default: TORCH_CHECK(false, "stencil2d_cuda: filter size " + std::to_string(k) + " is not 1, 3, 5 or 7");
  }
}
