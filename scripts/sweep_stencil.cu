// Candidate kernels for exercise 04 (K x K filter, "same" size, zero padding, fp32, batched), timed
// by scripts/sweep_stencil.py. Each candidate lives in its own namespace with its own c_filter and a
// kernel named stencil2d_kernel with the reference's signature (in, out, batch, height, width), a
// grid-stride loop over tiles along gridDim.y, and a launcher: any one of them can replace the
// kernel of solutions/04_stencil2d/stencil2d.cu.
//
//   0 solution  the current solutions/04_stencil2d/stencil2d.cu, included as it is
//   1 batched   the solution's 64 x 64 tile and compute, but every global load of the tile is issued
//               before the first store to shared memory (the solution's SASS waits for each load
//               before its STS and the next load: one load in flight per thread); 32-bit coordinates
//   2 flat64    as 1, the tile loaded by a flat loop over its elements (every lane busy, no partial
//               rows of threads), 64 x 64 tile, 2 x 8 outputs per thread
//   3 flat128   as 2 with a 128 x 32 tile, 4 x 4 outputs per thread (columns 32 apart)
//   4 vec32     128 x 32 tile, 16-byte loads of the tile (left halo padded to 4 columns so rows stay
//               aligned), each thread 4 adjacent columns x 4 rows: 3 LDS.128 per tile row and a
//               register window over rows, float4 stores; scalar loads/stores when a row is not
//               16-byte aligned (width % 4 != 0 or an offset pointer)
//   5 vec64     as 4 with a 128 x 64 tile, 4 adjacent columns x 8 rows per thread
//   6 direct    no shared memory (for comparison only): each thread reads its rows through L1
//               (16-byte loads when aligned), same outputs per thread as 4
#include <algorithm>
#include <cstdint>
#include <string>

// The solution itself (its kernel in an anonymous namespace; stencil2d_cuda, stencil2d_set_filter).
#include "stencil2d.cu"

namespace sweep {

constexpr int kMaxGridY = 65535;

inline void check_int(int64_t height, int64_t width) {
  TORCH_CHECK(height < (int64_t(1) << 31) && width < (int64_t(1) << 31), "height and width must be below 2^31");
}

inline unsigned grid_y(int64_t batch, int64_t height, int tile_h) {
  return static_cast<unsigned>(std::min<int64_t>(batch * course::ceil_div<int64_t>(height, tile_h), kMaxGridY));
}

// ---------------------------------------------------------------------------------------------
// 1 batched: the solution with its tile loads issued together.
namespace batched {
__constant__ float c_filter[kMaxFilter * kMaxFilter];
constexpr int kBlockX = 32, kBlockY = 8, kCols = 2, kRows = 8;
constexpr int kTileW = kBlockX * kCols, kTileH = kBlockY * kRows;

template <int K>
__global__ void __launch_bounds__(kBlockX * kBlockY)
    stencil2d_kernel(const float* __restrict__ in, float* __restrict__ out, int64_t batch, int64_t height64,
                     int64_t width64) {
  constexpr int R = K / 2;
  constexpr int kSmemW = kTileW + 2 * R, kSmemH = kTileH + 2 * R;
  constexpr int kLoadsY = (kSmemH + kBlockY - 1) / kBlockY, kLoadsX = (kSmemW + kBlockX - 1) / kBlockX;
  __shared__ float tile[kSmemH][kSmemW];
  const int height = static_cast<int>(height64), width = static_cast<int>(width64);  // checked < 2^31
  const int64_t tiles_y = course::ceil_div<int64_t>(height64, kTileH);
  const int x0 = blockIdx.x * kTileW;
  const int tx = threadIdx.x, ty = threadIdx.y;
  for (int64_t t = blockIdx.y; t < batch * tiles_y; t += gridDim.y) {
    const int64_t b = t / tiles_y;
    const int y0 = static_cast<int>(t - b * tiles_y) * kTileH;
    const float* image = in + b * height64 * width64;
    float v[kLoadsY][kLoadsX];
#pragma unroll
    for (int j = 0; j < kLoadsY; ++j) {
      const int sy = ty + kBlockY * j, y = y0 - R + sy;
#pragma unroll
      for (int i = 0; i < kLoadsX; ++i) {
        const int sx = tx + kBlockX * i, x = x0 - R + sx;
        v[j][i] = (sy < kSmemH && sx < kSmemW && y >= 0 && y < height && x >= 0 && x < width)
                      ? image[int64_t(y) * width + x] : 0.0f;
      }
    }
#pragma unroll
    for (int j = 0; j < kLoadsY; ++j) {
#pragma unroll
      for (int i = 0; i < kLoadsX; ++i) {
        const int sy = ty + kBlockY * j, sx = tx + kBlockX * i;
        if (sy < kSmemH && sx < kSmemW) tile[sy][sx] = v[j][i];
      }
    }
    __syncthreads();
    float acc[kCols][kRows] = {};
#pragma unroll
    for (int r = 0; r < kRows + K - 1; ++r) {
#pragma unroll
      for (int dx = 0; dx < K; ++dx) {
#pragma unroll
        for (int c = 0; c < kCols; ++c) {
          const float s = tile[kRows * ty + r][tx + kBlockX * c + dx];
#pragma unroll
          for (int i = 0; i < kRows; ++i) {
            const int dy = r - i;
            if (dy >= 0 && dy < K) acc[c][i] = fmaf(c_filter[dy * K + dx], s, acc[c][i]);
          }
        }
      }
    }
    float* dst = out + b * height64 * width64;
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
  }
}

template <int K>
void launch(const float* in, float* out, int64_t batch, int64_t height, int64_t width, cudaStream_t stream) {
  check_int(height, width);
  const dim3 grid(static_cast<unsigned>(course::ceil_div<int64_t>(width, kTileW)), grid_y(batch, height, kTileH));
  stencil2d_kernel<K><<<grid, dim3(kBlockX, kBlockY), 0, stream>>>(in, out, batch, height, width);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}
template <int K>
const void* kernel() { return reinterpret_cast<const void*>(stencil2d_kernel<K>); }
}  // namespace batched

// ---------------------------------------------------------------------------------------------
// 2, 3 flat: the tile loaded by a flat loop over its elements, all loads issued first; kCols
// columns 32 apart x kRows adjacent rows per thread.
namespace flat {
__constant__ float c_filter[kMaxFilter * kMaxFilter];
constexpr int kBlockX = 32, kBlockY = 8, kThreads = kBlockX * kBlockY;

template <int K, int kCols, int kRows>
__global__ void __launch_bounds__(kThreads)
    stencil2d_kernel(const float* __restrict__ in, float* __restrict__ out, int64_t batch, int64_t height64,
                     int64_t width64) {
  constexpr int R = K / 2;
  constexpr int kTileW = kBlockX * kCols, kTileH = kBlockY * kRows;
  constexpr int kSmemW = kTileW + 2 * R, kSmemH = kTileH + 2 * R, kSmem = kSmemW * kSmemH;
  constexpr int kLoads = (kSmem + kThreads - 1) / kThreads;
  __shared__ float tile[kSmemH][kSmemW];
  const int height = static_cast<int>(height64), width = static_cast<int>(width64);
  const int64_t tiles_y = course::ceil_div<int64_t>(height64, kTileH);
  const int x0 = blockIdx.x * kTileW;
  const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * kBlockX + tx;
  for (int64_t t = blockIdx.y; t < batch * tiles_y; t += gridDim.y) {
    const int64_t b = t / tiles_y;
    const int y0 = static_cast<int>(t - b * tiles_y) * kTileH;
    const float* image = in + b * height64 * width64;
    float v[kLoads];
#pragma unroll
    for (int n = 0; n < kLoads; ++n) {
      const int e = tid + kThreads * n, sy = e / kSmemW, sx = e % kSmemW;
      const int y = y0 - R + sy, x = x0 - R + sx;
      v[n] = (e < kSmem && y >= 0 && y < height && x >= 0 && x < width) ? image[int64_t(y) * width + x] : 0.0f;
    }
#pragma unroll
    for (int n = 0; n < kLoads; ++n) {
      const int e = tid + kThreads * n;
      if (e < kSmem) (&tile[0][0])[e] = v[n];
    }
    __syncthreads();
    float acc[kCols][kRows] = {};
#pragma unroll
    for (int r = 0; r < kRows + K - 1; ++r) {
#pragma unroll
      for (int dx = 0; dx < K; ++dx) {
#pragma unroll
        for (int c = 0; c < kCols; ++c) {
          const float s = tile[kRows * ty + r][tx + kBlockX * c + dx];
#pragma unroll
          for (int i = 0; i < kRows; ++i) {
            const int dy = r - i;
            if (dy >= 0 && dy < K) acc[c][i] = fmaf(c_filter[dy * K + dx], s, acc[c][i]);
          }
        }
      }
    }
    float* dst = out + b * height64 * width64;
#pragma unroll
    for (int i = 0; i < kRows; ++i) {
      const int y = y0 + kRows * ty + i;
#pragma unroll
      for (int c = 0; c < kCols; ++c) {
        const int x = x0 + tx + kBlockX * c;
        if (y < height && x < width) dst[int64_t(y) * width + x] = acc[c][i];
      }
    }
    __syncthreads();
  }
}

template <int K, int kCols, int kRows>
void launch(const float* in, float* out, int64_t batch, int64_t height, int64_t width, cudaStream_t stream) {
  check_int(height, width);
  const dim3 grid(static_cast<unsigned>(course::ceil_div<int64_t>(width, kBlockX * kCols)),
                  grid_y(batch, height, kBlockY * kRows));
  stencil2d_kernel<K, kCols, kRows><<<grid, dim3(kBlockX, kBlockY), 0, stream>>>(in, out, batch, height, width);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}
template <int K, int kCols, int kRows>
const void* kernel() { return reinterpret_cast<const void*>(stencil2d_kernel<K, kCols, kRows>); }
}  // namespace flat

// ---------------------------------------------------------------------------------------------
// 4, 5 vec: 16-byte loads into a tile whose left halo is padded to 4 columns (so every tile row
// starts 16-byte aligned in shared memory, and in global memory when width % 4 == 0); thread
// (tx, ty) computes the 4 adjacent columns x0 + 4 tx .. + 3 and the kRows adjacent rows
// y0 + kRows ty + i, reading each tile row it needs once as 3 float4 (12 values cover the 4 + 2R it
// uses) and adding it into the (up to K) outputs it feeds; an output row is stored (float4) as soon
// as its last input row is in.
namespace vec {
__constant__ float c_filter[kMaxFilter * kMaxFilter];
constexpr int kBlockX = 32, kBlockY = 8, kThreads = kBlockX * kBlockY;
constexpr int kTileW = 4 * kBlockX;  // 128 columns
constexpr int kPad = 4;              // halo columns kept left and right of the tile (>= R, a multiple of 4)
constexpr int kSmemW = kTileW + 2 * kPad;

template <int K, int kRows, bool kVec>
__global__ void __launch_bounds__(kThreads)
    stencil2d_kernel(const float* __restrict__ in, float* __restrict__ out, int64_t batch, int64_t height64,
                     int64_t width64) {
  constexpr int R = K / 2;
  static_assert(R <= kPad, "the halo is wider than the padding");
  constexpr int kTileH = kBlockY * kRows, kSmemH = kTileH + 2 * R;
  __shared__ __align__(16) float tile[kSmemH][kSmemW];
  const int height = static_cast<int>(height64), width = static_cast<int>(width64);
  const int64_t tiles_y = course::ceil_div<int64_t>(height64, kTileH);
  const int x0 = blockIdx.x * kTileW;
  const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * kBlockX + tx;
  for (int64_t t = blockIdx.y; t < batch * tiles_y; t += gridDim.y) {
    const int64_t b = t / tiles_y;
    const int y0 = static_cast<int>(t - b * tiles_y) * kTileH;
    const float* image = in + b * height64 * width64;
    // Tile row sy, column sx holds pixel (y0 - R + sy, x0 - kPad + sx).
    if constexpr (kVec) {
      constexpr int kQuads = kSmemW / 4, kItems = kSmemH * kQuads;
      constexpr int kLoads = (kItems + kThreads - 1) / kThreads;
      float4 v[kLoads];
#pragma unroll
      for (int n = 0; n < kLoads; ++n) {
        const int e = tid + kThreads * n, sy = e / kQuads, q = e % kQuads;
        const int y = y0 - R + sy, x = x0 - kPad + 4 * q;  // width % 4 == 0: a quad is all in or all out
        v[n] = (e < kItems && y >= 0 && y < height && x >= 0 && x < width)
                   ? *reinterpret_cast<const float4*>(image + int64_t(y) * width + x) : make_float4(0.f, 0.f, 0.f, 0.f);
      }
#pragma unroll
      for (int n = 0; n < kLoads; ++n) {
        const int e = tid + kThreads * n, sy = e / kQuads, q = e % kQuads;
        if (e < kItems) *reinterpret_cast<float4*>(&tile[sy][4 * q]) = v[n];
      }
    } else {
      constexpr int kItems = kSmemH * kSmemW, kLoads = (kItems + kThreads - 1) / kThreads;
      float v[kLoads];
#pragma unroll
      for (int n = 0; n < kLoads; ++n) {
        const int e = tid + kThreads * n, sy = e / kSmemW, sx = e % kSmemW;
        const int y = y0 - R + sy, x = x0 - kPad + sx;
        v[n] = (e < kItems && y >= 0 && y < height && x >= 0 && x < width) ? image[int64_t(y) * width + x] : 0.0f;
      }
#pragma unroll
      for (int n = 0; n < kLoads; ++n) {
        const int e = tid + kThreads * n;
        if (e < kItems) (&tile[0][0])[e] = v[n];
      }
    }
    __syncthreads();

    float* dst = out + b * height64 * width64;
    const int x = x0 + 4 * tx;
    float acc[kRows][4] = {};
#pragma unroll
    for (int r = 0; r < kRows + K - 1; ++r) {
      // tile columns 4 tx .. 4 tx + 11; output column x + j uses tile columns kPad + 4 tx + j - R + dx
      float s[12];
      const float4* row = reinterpret_cast<const float4*>(&tile[kRows * ty + r][4 * tx]);
#pragma unroll
      for (int q = 0; q < 3; ++q) {
        if (R > 0 || q == 1) {
          const float4 f = row[q];
          s[4 * q] = f.x, s[4 * q + 1] = f.y, s[4 * q + 2] = f.z, s[4 * q + 3] = f.w;
        }
      }
#pragma unroll
      for (int i = 0; i < kRows; ++i) {
        const int dy = r - i;
        if (dy >= 0 && dy < K) {
#pragma unroll
          for (int dx = 0; dx < K; ++dx) {
#pragma unroll
            for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(c_filter[dy * K + dx], s[kPad - R + j + dx], acc[i][j]);
          }
        }
      }
      const int i = r - (K - 1);  // the output row this tile row completes
      if (i >= 0) {
        const int y = y0 + kRows * ty + i;
        if (y < height && x < width) {
          float* p = dst + int64_t(y) * width + x;
          if constexpr (kVec) {
            *reinterpret_cast<float4*>(p) = make_float4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]);
          } else {
#pragma unroll
            for (int j = 0; j < 4; ++j)
              if (x + j < width) p[j] = acc[i][j];
          }
        }
      }
    }
    __syncthreads();
  }
}

template <int K, int kRows>
void launch(const float* in, float* out, int64_t batch, int64_t height, int64_t width, cudaStream_t stream) {
  check_int(height, width);
  const dim3 grid(static_cast<unsigned>(course::ceil_div<int64_t>(width, kTileW)), grid_y(batch, height, kBlockY * kRows));
  const dim3 block(kBlockX, kBlockY);
  if (width % 4 == 0 && course::is_aligned16(in, out))
    stencil2d_kernel<K, kRows, true><<<grid, block, 0, stream>>>(in, out, batch, height, width);
  else
    stencil2d_kernel<K, kRows, false><<<grid, block, 0, stream>>>(in, out, batch, height, width);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}
template <int K, int kRows>
const void* kernel() { return reinterpret_cast<const void*>(stencil2d_kernel<K, kRows, true>); }
}  // namespace vec

// ---------------------------------------------------------------------------------------------
// 6 direct: no shared memory; each thread reads the kRows + K - 1 input rows it needs (12 columns
// each, 3 float4 when aligned) through L1, same outputs per thread as vec32.
namespace direct {
__constant__ float c_filter[kMaxFilter * kMaxFilter];
constexpr int kBlockX = 32, kBlockY = 8, kRows = 4, kTileW = 4 * kBlockX, kTileH = kBlockY * kRows;

template <int K, bool kVec>
__global__ void __launch_bounds__(kBlockX * kBlockY)
    stencil2d_kernel(const float* __restrict__ in, float* __restrict__ out, int64_t batch, int64_t height64,
                     int64_t width64) {
  constexpr int R = K / 2;
  const int height = static_cast<int>(height64), width = static_cast<int>(width64);
  const int64_t tiles_y = course::ceil_div<int64_t>(height64, kTileH);
  const int x = blockIdx.x * kTileW + 4 * threadIdx.x;
  for (int64_t t = blockIdx.y; t < batch * tiles_y; t += gridDim.y) {
    const int64_t b = t / tiles_y;
    const int y0 = static_cast<int>(t - b * tiles_y) * kTileH + kRows * threadIdx.y;
    const float* image = in + b * height64 * width64;
    float* dst = out + b * height64 * width64;
    float acc[kRows][4] = {};
#pragma unroll
    for (int r = 0; r < kRows + K - 1; ++r) {
      const int y = y0 - R + r;
      const bool row_in = y >= 0 && y < height;
      float s[12];  // columns x - 4 .. x + 7
#pragma unroll
      for (int q = 0; q < 3; ++q) {
        if (R > 0 || q == 1) {
          if constexpr (kVec) {
            const int xq = x - 4 + 4 * q;
            const float4 f = (row_in && xq >= 0 && xq < width)
                                 ? __ldg(reinterpret_cast<const float4*>(image + int64_t(y) * width + xq))
                                 : make_float4(0.f, 0.f, 0.f, 0.f);
            s[4 * q] = f.x, s[4 * q + 1] = f.y, s[4 * q + 2] = f.z, s[4 * q + 3] = f.w;
          } else {
#pragma unroll
            for (int k = 0; k < 4; ++k) {
              const int xk = x - 4 + 4 * q + k;
              s[4 * q + k] = (row_in && xk >= 0 && xk < width) ? __ldg(image + int64_t(y) * width + xk) : 0.0f;
            }
          }
        }
      }
#pragma unroll
      for (int i = 0; i < kRows; ++i) {
        const int dy = r - i;
        if (dy >= 0 && dy < K) {
#pragma unroll
          for (int dx = 0; dx < K; ++dx) {
#pragma unroll
            for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(c_filter[dy * K + dx], s[4 - R + j + dx], acc[i][j]);
          }
        }
      }
      const int i = r - (K - 1);
      if (i >= 0 && y0 + i < height && x < width) {
        float* p = dst + int64_t(y0 + i) * width + x;
        if constexpr (kVec) {
          *reinterpret_cast<float4*>(p) = make_float4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]);
        } else {
#pragma unroll
          for (int j = 0; j < 4; ++j)
            if (x + j < width) p[j] = acc[i][j];
        }
      }
    }
  }
}

template <int K>
void launch(const float* in, float* out, int64_t batch, int64_t height, int64_t width, cudaStream_t stream) {
  check_int(height, width);
  const dim3 grid(static_cast<unsigned>(course::ceil_div<int64_t>(width, kTileW)), grid_y(batch, height, kTileH));
  const dim3 block(kBlockX, kBlockY);
  if (width % 4 == 0 && course::is_aligned16(in, out))
    stencil2d_kernel<K, true><<<grid, block, 0, stream>>>(in, out, batch, height, width);
  else
    stencil2d_kernel<K, false><<<grid, block, 0, stream>>>(in, out, batch, height, width);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}
template <int K>
const void* kernel() { return reinterpret_cast<const void*>(stencil2d_kernel<K, true>); }
}  // namespace direct

// ---------------------------------------------------------------------------------------------
constexpr const char* kNames[] = {"solution", "batched", "flat64", "flat128", "vec32", "vec64", "direct"};
constexpr int kCandidates = 7;

template <int K>
void launch_k(int which, const float* in, float* out, int64_t batch, int64_t height, int64_t width, cudaStream_t s) {
  switch (which) {
    case 1: return batched::launch<K>(in, out, batch, height, width, s);
    case 2: return flat::launch<K, 2, 8>(in, out, batch, height, width, s);
    case 3: return flat::launch<K, 4, 4>(in, out, batch, height, width, s);
    case 4: return vec::launch<K, 4>(in, out, batch, height, width, s);
    case 5: return vec::launch<K, 8>(in, out, batch, height, width, s);
    case 6: return direct::launch<K>(in, out, batch, height, width, s);
  }
}

template <int K>
const void* kernel_k(int which) {
  switch (which) {
    case 0: return reinterpret_cast<const void*>(stencil2d_kernel<K>);  // the solution's (anonymous namespace)
    case 1: return batched::kernel<K>();
    case 2: return flat::kernel<K, 2, 8>();
    case 3: return flat::kernel<K, 4, 4>();
    case 4: return vec::kernel<K, 4>();
    case 5: return vec::kernel<K, 8>();
    case 6: return direct::kernel<K>();
  }
  return nullptr;
}

}  // namespace sweep

int sweep_count() { return sweep::kCandidates; }
std::string sweep_name(int which) { return sweep::kNames[which]; }

void sweep_run(int which, const float* in, float* out, const float* filter, int64_t batch, int64_t height,
               int64_t width, int k, cudaStream_t stream) {
  TORCH_CHECK(which >= 0 && which < sweep::kCandidates, "no candidate ", which);
  if (which == 0) {  // the solution, exactly as the op calls it
    stencil2d_set_filter(filter, k, stream);
    return stencil2d_cuda(in, out, batch, height, width, k, stream);
  }
  // the same DtoD copy into __constant__ memory that stencil2d_set_filter does
  const size_t bytes = sizeof(float) * k * k;
  const auto kind = cudaMemcpyDeviceToDevice;
  switch (which) {
    case 1: C10_CUDA_CHECK(cudaMemcpyToSymbolAsync(sweep::batched::c_filter, filter, bytes, 0, kind, stream)); break;
    case 2: case 3: C10_CUDA_CHECK(cudaMemcpyToSymbolAsync(sweep::flat::c_filter, filter, bytes, 0, kind, stream)); break;
    case 4: case 5: C10_CUDA_CHECK(cudaMemcpyToSymbolAsync(sweep::vec::c_filter, filter, bytes, 0, kind, stream)); break;
    case 6: C10_CUDA_CHECK(cudaMemcpyToSymbolAsync(sweep::direct::c_filter, filter, bytes, 0, kind, stream)); break;
  }
  if (batch == 0 || height == 0 || width == 0) return;
  switch (k) {
    case 1: return sweep::launch_k<1>(which, in, out, batch, height, width, stream);
    case 3: return sweep::launch_k<3>(which, in, out, batch, height, width, stream);
    case 5: return sweep::launch_k<5>(which, in, out, batch, height, width, stream);
    case 7: return sweep::launch_k<7>(which, in, out, batch, height, width, stream);
    default: TORCH_CHECK(false, "filter size " + std::to_string(k) + " is not 1, 3, 5 or 7");
  }
}

// registers per thread, static shared memory per block, resident blocks per SM (occupancy API)
void sweep_info(int which, int k, int64_t* regs, int64_t* smem, int64_t* blocks_per_sm) {
  const void* f = nullptr;
  switch (k) {
    case 1: f = sweep::kernel_k<1>(which); break;
    case 3: f = sweep::kernel_k<3>(which); break;
    case 5: f = sweep::kernel_k<5>(which); break;
    case 7: f = sweep::kernel_k<7>(which); break;
  }
  TORCH_CHECK(f != nullptr, "no kernel");
  cudaFuncAttributes a{};
  C10_CUDA_CHECK(cudaFuncGetAttributes(&a, f));
  int per_sm = 0;
  C10_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, f, 256, 0));
  *regs = a.numRegs;
  *smem = static_cast<int64_t>(a.sharedSizeBytes);
  *blocks_per_sm = per_sm;
}
