// Exercise 06: forward 2-D convolution (NCHW, with groups), from a direct kernel (version 1) to a
// tiled implicit GEMM (version 2), a depthwise kernel (version 2's path where groups == cin), the
// implicit GEMM on TF32 tensor cores (version 3, groups == 1), and their launchers.
//
// This file includes no PyTorch tensor headers, so editing it recompiles in about a second.
// Tensors, checks, output sizes and op registration live in conv2d.cpp.
#include <algorithm>
#include <cstdint>
#include <string>
#include <type_traits>

#include <course/cuda.cuh>

#include "conv2d.h"

namespace {

// The input at (ih, iw) of one channel plane of h x w, or 0 in the zero padding around it.
template <typename scalar_t>
__device__ __forceinline__ scalar_t load_padded(const scalar_t* __restrict__ plane, int ih, int iw, int h, int w) {
  return (ih >= 0 && ih < h && iw >= 0 && iw < w) ? plane[ih * w + iw] : scalar_t(0);
}

// Version 1, direct: 1D grid-stride loop, one thread per output element y[n][co][oh][ow] (ow fastest,
// so a warp reads neighbouring input pixels and all its threads read the same weight); the sum runs
// over the cin / groups input channels of co's group.
template <typename scalar_t>
__global__ void conv2d_kernel1(const scalar_t* __restrict__ x, const scalar_t* __restrict__ weight,
                               const scalar_t* __restrict__ bias, scalar_t* __restrict__ y, Conv2dShape s) {
  // BEGIN OPEN
  // GOAL: y = conv2d(x, weight) + bias for every output element (groups, stride, padding, dilation; int64 indices,
  // GOAL: any grid size), accumulating in the type's opmath; coalesced reads of x (Background: Direct (version 1)).
  const int64_t total = s.n * s.cout * s.ho * s.wo;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    // BEGIN SOLUTION
    // GOAL: y[i] for output element i: the convolution with stride, padding and dilation, plus bias.
    // TODO: split i into (n, co, oh, ow), ow fastest, and set y[i] = bias[co] (0 when bias is nullptr)
    // TODO: + the sum over c < cin_g = cin / groups, kh, kw of x[n][g * cin_g + c][ih][iw] *
    // TODO: weight[co][c][kh][kw], where g = co / (cout / groups) is co's group and
    // TODO: ih = oh * stride_h - pad_h + kh * dil_h (iw likewise); taps in the padding read 0 (load_padded).
    const int ow = static_cast<int>(i % s.wo);
    int64_t t = i / s.wo;
    const int oh = static_cast<int>(t % s.ho);
    t /= s.ho;
    const int co = static_cast<int>(t % s.cout);
    const int64_t n = t / s.cout;
    const int cin_g = s.cin / s.groups, cout_g = s.cout / s.groups;
    const int g = co / cout_g;                                             // co's group
    const scalar_t* xn = x + (n * s.cin + g * cin_g) * s.h * s.w;          // x[n][g * cin_g]
    const scalar_t* wc = weight + int64_t(co) * cin_g * s.kh * s.kw;       // weight[co]
    scalar_t acc = bias ? bias[co] : scalar_t(0);
    for (int ci = 0; ci < cin_g; ++ci) {
      const scalar_t* plane = xn + ci * s.h * s.w;
      for (int kh = 0; kh < s.kh; ++kh) {
        const int ih = oh * s.stride_h - s.pad_h + kh * s.dil_h;
        for (int kw = 0; kw < s.kw; ++kw) {
          const int iw = ow * s.stride_w - s.pad_w + kw * s.dil_w;
          acc += load_padded(plane, ih, iw, s.h, s.w) * wc[(ci * s.kh + kh) * s.kw + kw];
        }
      }
    }
    y[i] = acc;
    // END SOLUTION
  }
  // END OPEN
}

// The implicit GEMM's tiles. A block computes a BM x BN tile of the output matrix Y[m][co]
// (m = (n, oh, ow): BM output pixels; BN output channels) with BM threads, each an 8x8 register
// block; the K loop (k = (ci, kh, kw)) takes BK columns of the im2col'd input at a time.
constexpr int BN = 64;
[[maybe_unused]] constexpr int BK = 8;
[[maybe_unused]] constexpr int TM = 8;  // output pixels per thread: 4 in the tile's first half, 4 in its second
[[maybe_unused]] constexpr int TN = 8;  // output channels per thread, split the same way

// Version 2, implicit GEMM: grid (ceil(M / BM), ceil(cout_g / BN), groups), BM threads; block z is
// the GEMM of group z (its cin_g = cin / groups input channels, cout_g = cout / groups output
// channels, K = cin_g * kh * kw). Thread t gathers im2col row m0 + t into shared memory (coalesced:
// neighbouring threads, neighbouring pixels) and computes rows {4 tm .. 4 tm + 3, BM/2 + 4 tm ..} x
// channels {4 tn .., BN/2 + 4 tn ..} of the tile. Two shared buffers: the next K step's global loads
// are in flight while this one's math runs.
template <typename scalar_t, int BM>
__global__ void __launch_bounds__(BM) conv2d_kernel2(const scalar_t* __restrict__ x, const scalar_t* __restrict__ weight,
                                                     const scalar_t* __restrict__ bias, scalar_t* __restrict__ y,
                                                     Conv2dShape s) {
  // BEGIN OPEN
  // GOAL: the block's tile of its group's implicit GEMM (y = W * im2col(x)) + bias, exact at every edge of M,
  // GOAL: cout_g and K; each element gathered from global memory once per tile and reused from registers, the next
  // GOAL: K step's loads in flight (Background: Implicit GEMM (version 2), Groups).
  constexpr int kThreads = BM * BN / (TM * TN);
  static_assert(kThreads == BM, "one im2col row per thread");
  constexpr int kBPerThread = BK * BN / kThreads;  // weights each thread loads per K step
  static_assert(BK % kBPerThread == 0, "a thread's weights are consecutive k of one channel");
  using Vec4 = course::Vec<scalar_t, 4>;
  __shared__ __align__(32) scalar_t As[2][BK][BM];  // im2col tile, As[k][m]
  __shared__ __align__(32) scalar_t Bs[2][BK][BN];  // weight tile, Bs[k][co]

  const int tid = threadIdx.x;
  const int hw_out = s.ho * s.wo;
  const int hw_in = s.h * s.w;
  const int64_t M = s.n * hw_out;
  const int group = blockIdx.z;
  const int cin_g = s.cin / s.groups, cout_g = s.cout / s.groups;
  const int K = cin_g * s.kh * s.kw;
  const int64_t m0 = int64_t(blockIdx.x) * BM;
  const int co0 = blockIdx.y * BN;  // within the group

  // This thread's im2col row: output pixel m_load = (n, oh, ow), decoded once.
  const int64_t m_load = m0 + tid;
  const bool m_ok = m_load < M;
  const scalar_t* xn = x;
  int ih0 = 0, iw0 = 0;
  if (m_ok) {
    const int64_t n = m_load / hw_out;
    const int p = static_cast<int>(m_load - n * hw_out);
    const int oh = p / s.wo, ow = p - oh * s.wo;
    xn = x + (n * s.cin + group * cin_g) * hw_in;  // x[n][group * cin_g]
    ih0 = oh * s.stride_h - s.pad_h;
    iw0 = ow * s.stride_w - s.pad_w;
  }
  // Every thread walks k = 0, 1, ..., K-1 in order, so (ci, kh, kw) advance by increments: no division.
  int c_off = 0, kh = 0, kw = 0;  // c_off = ci * h * w
  // This thread's weights: kBPerThread consecutive k of the group's output channel co0 + b_co.
  const int b_co = tid / (BK / kBPerThread);
  const int b_k = (tid % (BK / kBPerThread)) * kBPerThread;
  const bool co_ok = co0 + b_co < cout_g;
  const scalar_t* w_row = weight + (int64_t(group) * cout_g + co0 + b_co) * K;

  scalar_t a_reg[BK];
  scalar_t b_reg[kBPerThread];
  // Global -> registers: columns k0 .. k0 + BK - 1 of this thread's im2col row, and its weights.
  auto load_tile = [&](int k0) {
    // BEGIN SOLUTION
    // GOAL: load_tile: a_reg and b_reg hold this thread's share of the k0 step's im2col and weight
    // GOAL: tiles, 0 outside them.
    // TODO: for j < BK: a_reg[j] = input pixel (ih0 + kh * dil_h, iw0 + kw * dil_w) of channel plane
    // TODO: xn + c_off (load_padded), or 0 when !m_ok or k0 + j >= K; then advance (kw, kh, c_off) to
    // TODO: the next k (kw fastest). For j < kBPerThread: b_reg[j] = w_row[k0 + b_k + j], or 0 when
    // TODO: !co_ok or that k >= K.
#pragma unroll
    for (int j = 0; j < BK; ++j) {
      a_reg[j] = (m_ok && k0 + j < K)
                     ? load_padded(xn + c_off, ih0 + kh * s.dil_h, iw0 + kw * s.dil_w, s.h, s.w)
                     : scalar_t(0);
      if (++kw == s.kw) {
        kw = 0;
        if (++kh == s.kh) {
          kh = 0;
          c_off += hw_in;
        }
      }
    }
#pragma unroll
    for (int j = 0; j < kBPerThread; ++j) {
      const int k = k0 + b_k + j;
      b_reg[j] = (co_ok && k < K) ? w_row[k] : scalar_t(0);
    }
    // END SOLUTION
  };
  // Registers -> shared buffer `buf` (conflict-free: neighbouring threads, neighbouring words).
  auto store_tile = [&](int buf) {
#pragma unroll
    for (int j = 0; j < BK; ++j) As[buf][j][tid] = a_reg[j];
#pragma unroll
    for (int j = 0; j < kBPerThread; ++j) Bs[buf][b_k + j][b_co] = b_reg[j];
  };

  const int tn = tid % (BN / TN), tm = tid / (BN / TN);
  scalar_t acc[TM][TN];
#pragma unroll
  for (int i = 0; i < TM; ++i)
#pragma unroll
    for (int j = 0; j < TN; ++j) acc[i][j] = scalar_t(0);

  const int k_tiles = (K + BK - 1) / BK;
  load_tile(0);
  store_tile(0);
  __syncthreads();
  for (int kt = 0; kt < k_tiles; ++kt) {
    const int cur = kt & 1;
    if (kt + 1 < k_tiles) load_tile((kt + 1) * BK);
    // BEGIN SOLUTION
    // GOAL: this thread's outputs in acc gain the product of the shared tiles As[cur] and Bs[cur].
    // TODO: for each kk < BK: read this thread's 8 values of As[cur][kk][...] (rows 4 tm .. 4 tm + 3 and
    // TODO: BM/2 + 4 tm ..) and 8 of Bs[cur][kk][...] (channels 4 tn .. and BN/2 + 4 tn ..), 16 bytes at a
    // TODO: time (Vec4), and accumulate their outer product: acc[i][j] += a[i] * b[j].
#pragma unroll
    for (int kk = 0; kk < BK; ++kk) {
      const Vec4 a_lo = *reinterpret_cast<const Vec4*>(&As[cur][kk][tm * 4]);
      const Vec4 a_hi = *reinterpret_cast<const Vec4*>(&As[cur][kk][BM / 2 + tm * 4]);
      const Vec4 b_lo = *reinterpret_cast<const Vec4*>(&Bs[cur][kk][tn * 4]);
      const Vec4 b_hi = *reinterpret_cast<const Vec4*>(&Bs[cur][kk][BN / 2 + tn * 4]);
#pragma unroll
      for (int i = 0; i < TM; ++i) {
        const scalar_t a = i < 4 ? a_lo.v[i] : a_hi.v[i - 4];
#pragma unroll
        for (int j = 0; j < TN; ++j) acc[i][j] += a * (j < 4 ? b_lo.v[j] : b_hi.v[j - 4]);
      }
    }
    // END SOLUTION
    if (kt + 1 < k_tiles) store_tile(cur ^ 1);
    __syncthreads();
  }

  // Epilogue: Y[m][co] + bias -> y[n][group * cout_g + co][oh][ow]. When ho * wo % 4 == 0, each
  // group of 4 rows lies in one image and is 16-byte aligned, so it is stored as one vector.
  const bool vec_store = hw_out % 4 == 0;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int64_t m = m0 + half * (BM / 2) + tm * 4;
    if (m >= M) continue;
#pragma unroll
    for (int j = 0; j < TN; ++j) {
      const int co_in_group = co0 + (j < 4 ? tn * 4 + j : BN / 2 + tn * 4 + j - 4);
      if (co_in_group >= cout_g) continue;
      const int co = group * cout_g + co_in_group;
      const scalar_t b = bias ? bias[co] : scalar_t(0);
      if (vec_store) {
        const int64_t n = m / hw_out;
        Vec4 v;
#pragma unroll
        for (int r = 0; r < 4; ++r) v.v[r] = acc[half * 4 + r][j] + b;
        *reinterpret_cast<Vec4*>(y + (n * s.cout + co) * hw_out + (m - n * hw_out)) = v;
      } else {
#pragma unroll
        for (int r = 0; r < 4; ++r) {
          const int64_t mr = m + r;
          if (mr >= M) break;
          const int64_t n = mr / hw_out;
          y[(n * s.cout + co) * hw_out + (mr - n * hw_out)] = acc[half * 4 + r][j] + b;
        }
      }
    }
  }
  // END OPEN
}

// ---------------------------------------------------------------- the depthwise path (version 2)
// groups == cin: output channel co reads input channel co / mult alone (mult = cout / cin output
// channels per input channel, 1 in MobileNet's layers) through its own kh x kw filter. Each output
// is kh * kw FMAs and each input pixel is read by about kh * kw / (stride_h * stride_w) outputs: a
// few FMAs per byte, so the kernel is bound by memory. As a GEMM it would be cin products of
// 1-channel matrices (K = kh * kw = 9): no reuse for the tiles to exploit. 3x3 filters (MobileNet's)
// take the direct kernel below: each thread reads its outputs' inputs straight from global memory, and
// the L1 cache serves the pixels that neighbouring threads share. Other filters (the weight gradient's
// whole image planes among them) take the tile kernel after it: a block copies its input tile, halo
// included, into shared memory once and computes every output from there.
constexpr int kDwThreads = 256;

// Direct 3x3 depthwise: grid-stride loop over the n * cout * ho * ceil(wo / kCols) items, 256 threads;
// item = (plane (n, co), output row oh, strip), strip fastest, and the thread computes the strip's kCols
// neighbouring outputs ow0 .. ow0 + kCols - 1 (ow0 = kCols * strip) of that row: a warp covers
// neighbouring strips of a row, or of a plane's consecutive rows, so its loads fall in few cache lines
// and the L1 cache serves the overlap between neighbours (each input pixel is read by up to 9 outputs,
// from memory about once). Its strip's inputs overlap too (kCols = 4 at stride 1: 3 rows of 6 pixels
// for 4 x 9 taps). Against the tile kernel below on MobileNetV2's depthwise layers (H100): 1.3-1.7x
// faster at stride 2 and on planes of 14 x 14 and smaller, whose few large blocks spent most of their
// time copying their tile, with a barrier before any output; 0.8-1.3x of it elsewhere.
template <typename scalar_t, int kCols>
__global__ void __launch_bounds__(kDwThreads)
    conv2d_depthwise_kernel(const scalar_t* __restrict__ x, const scalar_t* __restrict__ weight,
                            const scalar_t* __restrict__ bias, scalar_t* __restrict__ y, Conv2dShape s) {
  // BEGIN OPEN
  // GOAL: depthwise y for this thread's strip of outputs (+ bias), zeros outside x; neighbouring threads on
  // GOAL: neighbouring outputs so that L1 serves the overlap (Background: Depthwise convolutions are bound by memory).
  [[maybe_unused]] constexpr int K = 3;
  const int strips = (s.wo + kCols - 1) / kCols;
  const int64_t items = s.n * s.cout * s.ho * strips;
  const int mult = s.cout / s.groups;
  const int64_t hw = int64_t(s.h) * s.w;
  for (int64_t item = int64_t(blockIdx.x) * kDwThreads + threadIdx.x; item < items;
       item += int64_t(gridDim.x) * kDwThreads) {
    int64_t plane;
    int oh, strip;
    if (items <= INT32_MAX) {  // 32-bit divisions: about half the instructions of 64-bit ones
      const unsigned i = static_cast<unsigned>(item), row = i / strips, pl = row / s.ho;
      strip = static_cast<int>(i - row * strips);
      oh = static_cast<int>(row - pl * s.ho);
      plane = pl;
    } else {
      const int64_t row = item / strips;
      strip = static_cast<int>(item - row * strips);
      plane = row / s.ho;
      oh = static_cast<int>(row - plane * s.ho);
    }
    const int co = static_cast<int>(plane % s.cout);
    const int64_t in_plane = mult == 1 ? plane : (plane / s.cout) * s.cin + co / mult;
    const scalar_t* xp = x + in_plane * hw;  // the input channel's plane
    const int ow0 = strip * kCols;
    // tap (0, 0) of output ow0
    [[maybe_unused]] const int ih0 = oh * s.stride_h - s.pad_h, iw0 = ow0 * s.stride_w - s.pad_w;
    scalar_t* yp = y + (plane * s.ho + oh) * s.wo + ow0;
    // BEGIN SOLUTION
    // GOAL: yp[j] for each j < kCols with ow0 + j < wo: bias[co] (0 when bias is nullptr) + the sum over
    // GOAL: the 3 x 3 taps (kh, kw) of weight[co][0][kh][kw] times the input pixel
    // GOAL: (ih0 + kh dil_h, iw0 + j stride_w + kw dil_w) of xp, 0 where it lies outside the input.
    // TODO: acc[j] = bias for j < kCols. For each tap row kh whose input row ih is inside (0 <= ih < h),
    // TODO: each tap column kw: w = weight[co * 9 + kh * 3 + kw], and for each j, acc[j] += xp[ih * w + iw] * w
    // TODO: where 0 <= iw < w (read through __ldg: the read-only cache path). #pragma unroll the three
    // TODO: loops (K and kCols are constants: acc stays in registers). Store acc[j] where ow0 + j < wo.
    const scalar_t b = bias ? bias[co] : scalar_t(0);
    scalar_t acc[kCols];
#pragma unroll
    for (int j = 0; j < kCols; ++j) acc[j] = b;
    const scalar_t* wp = weight + int64_t(co) * K * K;
#pragma unroll
    for (int kh = 0; kh < K; ++kh) {
      const int ih = ih0 + kh * s.dil_h;
      if (ih < 0 || ih >= s.h) continue;
      const scalar_t* row = xp + int64_t(ih) * s.w;
#pragma unroll
      for (int kw = 0; kw < K; ++kw) {
        const scalar_t wv = wp[kh * K + kw];
#pragma unroll
        for (int j = 0; j < kCols; ++j) {
          const int iw = iw0 + j * s.stride_w + kw * s.dil_w;
          if (iw >= 0 && iw < s.w) acc[j] += __ldg(row + iw) * wv;
        }
      }
    }
#pragma unroll
    for (int j = 0; j < kCols; ++j)
      if (ow0 + j < s.wo) yp[j] = acc[j];
    // END SOLUTION
  }
  // END OPEN
}

// The tile kernel (given code): filters other than 3x3.
constexpr int kDwRows = 4;                    // outputs per thread: kDwRows rows of one column
constexpr int kDwSmemBytes = 24576;           // the input tile, halo included (8 blocks of 256 per SM fit)
constexpr int64_t kDwOutputsPerBlock = 2048;  // 2 passes of kDwThreads * kDwRows

// A depthwise block's tile: `planes` consecutive output planes (n, co) (several only when each is a
// whole tile), of each `rows` output rows and `cols` columns; in_rows x in_cols: the input pixels
// those outputs read, the halo included. row_tiles = ceil(ho / rows).
struct DepthwiseTile {
  int planes, rows, cols, in_rows, in_cols, row_tiles;
};

// The tile kernel: grid (ceil(n * cout / planes) * row_tiles, ceil(wo / cols)), 256 threads; block (x, y)
// has planes (x / row_tiles) * planes .., rows (x % row_tiles) * rows .. and columns y * cols .. (a
// plane's row tiles are neighbours in the launch order, so the halo rows they share meet in L2). The
// block copies its tile's input into shared memory, row-major (thread t: elements t, t + 256, ..:
// coalesced), then thread t computes the columns of kDwRows outputs of units t, t + 256, .. (unit =
// (plane, group of kDwRows rows, column), column fastest: a warp reads neighbouring shared words and
// stores neighbouring outputs).
template <typename scalar_t>
__global__ void __launch_bounds__(kDwThreads)
    conv2d_depthwise_tile_kernel(const scalar_t* __restrict__ x, const scalar_t* __restrict__ weight,
                                 const scalar_t* __restrict__ bias, scalar_t* __restrict__ y, Conv2dShape s,
                                 DepthwiseTile t) {
  // BEGIN OPEN
  // GOAL: depthwise y for the block's tile (+ bias): its input (with halo) copied once into shared memory, coalesced,
  // GOAL: then every output computed from it; exact at every edge (Background: Depthwise convolutions).
  __shared__ __align__(16) scalar_t tile[kDwSmemBytes / sizeof(scalar_t)];  // [planes][in_rows][in_cols]
  const int kh_n = s.kh, kw_n = s.kw;
  const int64_t planes = s.n * s.cout;
  const int64_t plane_tile = blockIdx.x / t.row_tiles;
  const int64_t plane0 = plane_tile * t.planes;  // this block's first output plane (n0, co0)
  const int64_t n0 = plane0 / s.cout;
  const int co0 = static_cast<int>(plane0 - n0 * s.cout);
  const int oh0 = static_cast<int>(blockIdx.x - plane_tile * t.row_tiles) * t.rows, ow0 = blockIdx.y * t.cols;
  const int ih0 = oh0 * s.stride_h - s.pad_h, iw0 = ow0 * s.stride_w - s.pad_w;  // the tile's input origin
  const int mult = s.cout / s.groups;
  const int hw = s.h * s.w;
  const int tile_hw = t.in_rows * t.in_cols;

  {  // (p, r, c): this thread's element of the tile
    int p = threadIdx.x / tile_hw, rem = threadIdx.x - p * tile_hw;
    int r = rem / t.in_cols, c = rem - r * t.in_cols;
    const int step_p = kDwThreads / tile_hw, step_rem = kDwThreads - step_p * tile_hw;
    const int step_r = step_rem / t.in_cols, step_c = step_rem - step_r * t.in_cols;
    for (int e = threadIdx.x; e < t.planes * tile_hw; e += kDwThreads) {
      const int ih = ih0 + r, iw = iw0 + c;
      scalar_t v = scalar_t(0);
      if (plane0 + p < planes && ih >= 0 && ih < s.h && iw >= 0 && iw < s.w) {
        int64_t in_plane = plane0 + p;
        if (mult != 1) {
          const int q = co0 + p;
          in_plane = (n0 + q / s.cout) * s.cin + (q % s.cout) / mult;
        }
        v = x[in_plane * hw + ih * s.w + iw];
      }
      tile[e] = v;
      c += step_c;
      r += step_r;
      p += step_p;
      if (c >= t.in_cols) {
        c -= t.in_cols;
        ++r;
      }
      if (r >= t.in_rows) {
        r -= t.in_rows;
        ++p;
      }
    }
  }
  __syncthreads();

  const int row_groups = (t.rows + kDwRows - 1) / kDwRows;
  const int units = t.planes * row_groups * t.cols;
  for (int u = threadIdx.x; u < units; u += kDwThreads) {
    const int col = u % t.cols, pg = u / t.cols;
    const int p = pg / row_groups, r0 = (pg - p * row_groups) * kDwRows;
    const int ow = ow0 + col;
    if (plane0 + p >= planes || ow >= s.wo) continue;
    const int co = (co0 + p) % s.cout;
    const int nrows = min(kDwRows, t.rows - r0);  // rows past t.rows are outside the tile
    const scalar_t b = bias ? bias[co] : scalar_t(0);
    scalar_t acc[kDwRows];
#pragma unroll
    for (int j = 0; j < kDwRows; ++j) acc[j] = b;
    const scalar_t* wp = weight + int64_t(co) * kh_n * kw_n;
    const scalar_t* tp = tile + p * tile_hw + r0 * s.stride_h * t.in_cols + col * s.stride_w;
    const int row_step = s.stride_h * t.in_cols;
#pragma unroll
    for (int kh = 0; kh < kh_n; ++kh) {
#pragma unroll
      for (int kw = 0; kw < kw_n; ++kw) {
        const scalar_t wv = wp[kh * kw_n + kw];
        const scalar_t* tk = tp + kh * s.dil_h * t.in_cols + kw * s.dil_w;
#pragma unroll
        for (int j = 0; j < kDwRows; ++j)
          if (j < nrows) acc[j] += tk[j * row_step] * wv;
      }
    }
    scalar_t* yp = y + (plane0 + p) * s.ho * s.wo + ow;
#pragma unroll
    for (int j = 0; j < kDwRows; ++j) {
      const int oh = oh0 + r0 + j;
      if (j < nrows && oh < s.ho) yp[int64_t(oh) * s.wo] = acc[j];
    }
  }
  // END OPEN
}

// The depthwise tile for s (elements of elem_bytes) and its grid: whole planes, several a block, when
// a plane has few outputs; else a tile of rows (and of 64 columns past 128). False when even one
// output's input does not fit in shared memory, or the grid would be too large: the GEMM runs then.
bool depthwise_tile(const Conv2dShape& s, int64_t elem_bytes, DepthwiseTile& t, dim3& grid) {
  // BEGIN OPEN
  // GOAL: the tile (planes, rows, columns) and grid for s whose shared-memory input fits; false when none fits or the
  // GOAL: grid would be too large (Background: Depthwise convolutions).
  // STUB: TORCH_CHECK(false, "depthwise_tile is not implemented yet");
  const int64_t cap = kDwSmemBytes / elem_bytes;
  const int64_t planes = s.n * s.cout;
  auto in_rows = [&](int64_t rows) { return (rows - 1) * s.stride_h + int64_t(s.dil_h) * (s.kh - 1) + 1; };
  auto in_cols = [&](int64_t cols) { return (cols - 1) * s.stride_w + int64_t(s.dil_w) * (s.kw - 1) + 1; };
  int64_t cols = s.wo <= 128 ? s.wo : 64;
  int64_t rows = std::min<int64_t>(s.ho, std::max<int64_t>(1, kDwOutputsPerBlock / cols));
  for (;;) {  // as many rows as fit (at least one), else half the columns
    const int64_t fit = cap / in_cols(cols), one = in_rows(1);  // input rows that fit; one output row's
    if (fit >= one) {
      rows = std::min(rows, (fit - one) / s.stride_h + 1);
      break;
    }
    if (cols == 1) return false;
    cols = (cols + 1) / 2;
  }
  // equal row tiles, each a whole number of kDwRows-row groups where that adds no tile: a last tile of
  // a few rows would load (and zero-fill) a whole tile's input rows for them
  const int64_t tiles_down = course::ceil_div<int64_t>(s.ho, rows);
  rows = course::ceil_div<int64_t>(s.ho, tiles_down);
  const int64_t whole_groups = course::ceil_div<int64_t>(rows, kDwRows) * kDwRows;
  if (course::ceil_div<int64_t>(s.ho, whole_groups) == tiles_down && in_rows(whole_groups) * in_cols(cols) <= cap) {
    rows = std::min<int64_t>(whole_groups, s.ho);
  }
  int64_t per_block = 1;
  if (rows == s.ho && cols == s.wo) {  // whole planes: as many as make kDwOutputsPerBlock and fit
    per_block = std::max<int64_t>(1, kDwOutputsPerBlock / (rows * cols));
    per_block = std::min({per_block, cap / (in_rows(rows) * in_cols(cols)), planes});
  }
  const int64_t row_tiles = course::ceil_div<int64_t>(s.ho, rows);
  const int64_t gx = course::ceil_div<int64_t>(planes, per_block) * row_tiles, gy = course::ceil_div<int64_t>(s.wo, cols);
  if (gx >= INT32_MAX || gy > 65535) return false;
  t = {static_cast<int>(per_block), static_cast<int>(rows), static_cast<int>(cols), static_cast<int>(in_rows(rows)),
       static_cast<int>(in_cols(cols)), static_cast<int>(row_tiles)};
  grid = dim3(static_cast<unsigned>(gx), static_cast<unsigned>(gy));
  return true;
  // END OPEN
}

// ---------------------------------------------------------------------------------- version 3
// Tensor cores (compute capability 8.0 and newer). The implicit GEMM of version 2, with each warp's
// products done by `mma.sync.aligned.m16n8k8` in TF32: the warp multiplies a 16 x 8 (m x k) tile of
// the im2col matrix A by an 8 x 8 (k x n) tile of the weights B into a 16 x 8 tile of Y; operands and
// sums live in the 32 lanes' registers ("fragments", the README draws them). Operands are rounded to
// TF32 (10-bit mantissa, `cvt.rna.tf32.f32`), the products summed in float32. The PTX wrappers (the
// cp.async copies, the TF32 rounding and the mma) are course/cuda.cuh's, shared with exercises 08 and
// 09; compiled for an older GPU they do nothing (`#if __CUDA_ARCH__ >= 800`) and the launcher refuses
// to run version 3 there.
using course::cp_async16;
using course::cp_async4;
using course::cp_async_commit;
using course::cp_async_wait;
using course::mma_tf32;
using course::to_tf32;

// The tiles. A block computes a 128 x BN3 tile of Y (128 output pixels x BN3 = 64 or 128 channels) with
// 2 x (BN3 / 32) warps, each a 64 x 32 tile as 4 x 4 mma tiles of 16 x 8; K goes 16 at a time (two
// m16n8k8 steps) through a 3-stage cp.async ring, as 05's kernels 4 and 5.
constexpr int kBM3 = 128;
constexpr int kBK3 = 16;
constexpr int kWM3 = 64, kWN3 = 32;  // a warp's tile
constexpr int kMTiles3 = kWM3 / 16, kNTiles3 = kWN3 / 8;  // 4 x 4 mma tiles
constexpr int kStages3 = 3;
static_assert(kBK3 == 16, "conv2d_weight_scratch (conv2d.h) counts whole steps of 16 channels");
// Blocks per SM the register budget must allow (64K registers / (2 BN3 threads x blocks)): 3 of 128
// threads (BN3 = 64: 168 registers a thread) or 2 of 256 (BN3 = 128: 128). scripts/tune_conv3.py on
// the H100 (2026-11-26): 4 blocks of 128 threads (128 registers, spilling) were as fast on the
// benchmark's shape and 5% slower on 7 x 7 planes; 1 block of 256 threads, 25% slower at 28 x 28.
template <int BN3>
constexpr int kMinBlocks3 = BN3 == 64 ? 3 : 2;

// One stage: the im2col tile A[k][m] (16 k x 128 pixels, as version 2's As) and the weight tile B[co][k]
// (BN3 channels x 16 k). 16 KiB (BN3 = 128) or 12 KiB: 3 stages fit the 48 KiB
// of static shared memory.
template <int BN3>
struct Stage3 {
  float A[kBK3][kBM3];
  float B[BN3][kBK3];
};

// Where pixel m of row k of A lives: its 16-byte chunk (m / 4) XOR-ed with (k / 4) % 4 in bits 1-2.
// A row is 512 bytes, so every row starts in bank 0: the fragment reads (below: lane (g, t) reads 4
// pixels at 4 g of row 4 t + e) would put the 4 t's of a quarter-warp on the same banks (4-way
// conflicts); the XOR gives its 8 lanes 8 different chunks of 128 bytes. The gather's writes (32
// neighbouring pixels of one row) stay in one 128-byte line: conflict-free too.
__device__ __forceinline__ int swizzle3(int k, int m) { return m ^ (((k >> 2) & 3) << 3); }

// The warp's 4 x 4 tiles of 16 x 8 in acc gain one stage (16 k: two m16n8k8 steps). The m16n8k8
// fragments, with g = lane / 4, t = lane % 4 (row, column of the tile; the README draws them):
//   A, 16 x 8 (pixels x k):    a0 (g, t), a1 (g + 8, t), a2 (g, t + 4), a3 (g + 8, t + 4)
//   B, 8 x 8 (k x channels):   b0 (t, g), b1 (t + 4, g)
//   Y, 16 x 8 (pixels x ch.):  c0 (g, 2t), c1 (g, 2t + 1), c2 (g + 8, 2t), c3 (g + 8, 2t + 1)
// Two renumberings make every shared-memory read 16 bytes (the mma cannot tell: a sum over k is the
// same in any order, and Y's rows are ours to place):
// - k: in step `step` (0, 1) of a stage, the mma's k t is the stage's k 4 t + 2 step and its k t + 4 is
//   4 t + 2 step + 1. So a lane's k over both steps are 4 t .. 4 t + 3: one float4 of a channel's B row.
// - pixels: row g (g + 8) of mma tile i is pixel 32 (i / 2) + 4 g + 2 (i % 2) (+ 1) of the warp's 64.
//   So a lane's 8 pixels are 4 g .. 4 g + 3 and 32 + 4 g .. 32 + 4 g + 3: two float4 of an A row.
template <int BN3>
__device__ __forceinline__ void mma_stage3(const Stage3<BN3>& st, float (&acc)[kMTiles3][kNTiles3][4], int wm0, int wn0,
                                           int lane) {
  // BEGIN OPEN
  // GOAL: acc += one stage's products on TF32 tensor cores (m16n8k8, inputs rounded to nearest), every shared-memory
  // GOAL: read 16 bytes and free of bank conflicts (Background: The m16n8k8 fragments, How the gather feeds it).
  [[maybe_unused]] const int g = lane / 4, t = lane % 4;
  [[maybe_unused]] uint32_t b[kNTiles3][4];  // b[j][e]: channel wn0 + 8 j + g at the stage's k = 4 t + e, as TF32
  // BEGIN SOLUTION
  // GOAL: b[j][e] = the weight of channel wn0 + 8 j + g at the stage's k = 4 t + e, rounded to TF32.
  // TODO: for each j < kNTiles3: one float4 from &st.B[wn0 + 8 j + g][4 t]; b[j][e] = to_tf32 of its e-th float.
#pragma unroll
  for (int j = 0; j < kNTiles3; ++j) {
    const float4 v = *reinterpret_cast<const float4*>(&st.B[wn0 + 8 * j + g][4 * t]);
    b[j][0] = to_tf32(v.x), b[j][1] = to_tf32(v.y), b[j][2] = to_tf32(v.z), b[j][3] = to_tf32(v.w);
  }
  // END SOLUTION
#pragma unroll
  for (int step = 0; step < 2; ++step) {
    [[maybe_unused]] uint32_t a[kMTiles3][4];  // a[i]: tile i's A fragment (a0 .. a3) for this step, as TF32
    // BEGIN SOLUTION
    // GOAL: a[i] = mma tile i's A fragment for this step (a0 .. a3 as drawn above, with the renumbered
    // GOAL: k and pixels), rounded to TF32.
    // TODO: for h < 2 (a0, a1 at k = 4 t + 2 step; a2, a3 at k + 1) and q < 2 (tiles 2 q and 2 q + 1):
    // TODO: one float4 from &st.A[k][swizzle3(k, wm0 + 32 q + 4 g)], pixels 4 g .. 4 g + 3 of the q-th 32:
    // TODO: a[2q][2h] = to_tf32(.x), a[2q][2h + 1] = .y, a[2q + 1][2h] = .z, a[2q + 1][2h + 1] = .w.
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int k = 4 * t + 2 * step + h;
#pragma unroll
      for (int q = 0; q < 2; ++q) {
        const float4 v = *reinterpret_cast<const float4*>(&st.A[k][swizzle3(k, wm0 + 32 * q + 4 * g)]);
        a[2 * q][2 * h] = to_tf32(v.x), a[2 * q][2 * h + 1] = to_tf32(v.y);
        a[2 * q + 1][2 * h] = to_tf32(v.z), a[2 * q + 1][2 * h + 1] = to_tf32(v.w);
      }
    }
    // END SOLUTION
    // BEGIN SOLUTION
    // GOAL: every tile acc[i][j] gains a[i] times this step's B fragment of channel tile j.
    // TODO: for every i, j: mma_tf32(acc[i][j], a[i], b0, b1) with b0 = b[j][2 step], b1 = b[j][2 step + 1].
#pragma unroll
    for (int i = 0; i < kMTiles3; ++i) {
#pragma unroll
      for (int j = 0; j < kNTiles3; ++j) mma_tf32(acc[i][j], a[i], b[j][2 * step], b[j][2 * step + 1]);
    }
    // END SOLUTION
  }
  // END OPEN
}

// Y's tile in acc -> y: the warp's 64 x 32 outputs (pixels m0 + [0, 64), channels co0 + [0, 32)) + bias,
// where they lie inside y. With the renumbered pixels, lane (g, t) holds for channel co0 + 8 j + 2 t + c
// the 4 neighbouring pixels m0 + 32 q + 4 g + {0, 1, 2, 3} = acc[2 q][j][c], acc[2 q][j][2 + c],
// acc[2 q + 1][j][c], acc[2 q + 1][j][2 + c]: one 16-byte store where they lie in one image (Ho Wo % 4
// == 0), else one by one.
__device__ __forceinline__ void store_y3(float* __restrict__ y, const float* __restrict__ bias,
                                         const float (&acc)[kMTiles3][kNTiles3][4], const Conv2dShape& s, int64_t m0,
                                         int co0, int lane) {
  // BEGIN OPEN
  // GOAL: the warp's outputs + bias into y where they lie inside it, 16-byte stores where 4 pixels share an image and
  // GOAL: are aligned (Background: The m16n8k8 fragments).
  // BEGIN SOLUTION
  // GOAL: y[n][co][oh][ow] = Y[m][co] + bias[co] (0 without bias) for each of the warp's pixels m < M and
  // GOAL: channels co < cout, from acc as the comment above lays it out; nothing outside y is written.
  // TODO: g = lane / 4, t = lane % 4. For j < kNTiles3, c < 2: co = co0 + 8 j + 2 t + c (skip co >= cout);
  // TODO: for q < 2: the 4 values above at pixels m = m0 + 32 q + 4 g + r (r < 4), each at
  // TODO: y[(n * cout + co) * Ho Wo + m - n Ho Wo] with n = m / (Ho Wo): a Vec<float, 4> store when
  // TODO: Ho Wo % 4 == 0 and m < M, else each r with m + r < M.
  const int g = lane / 4, t = lane % 4;
  const int hw_out = s.ho * s.wo;
  const int64_t M = s.n * hw_out;
  const bool vec_store = hw_out % 4 == 0;
#pragma unroll
  for (int j = 0; j < kNTiles3; ++j) {
#pragma unroll
    for (int c = 0; c < 2; ++c) {
      const int co = co0 + 8 * j + 2 * t + c;
      if (co >= s.cout) continue;
      const float b = bias ? bias[co] : 0.0f;
#pragma unroll
      for (int q = 0; q < 2; ++q) {
        const int64_t m = m0 + 32 * q + 4 * g;
        if (m >= M) continue;
        const float v[4] = {acc[2 * q][j][c] + b, acc[2 * q][j][2 + c] + b, acc[2 * q + 1][j][c] + b,
                            acc[2 * q + 1][j][2 + c] + b};
        if (vec_store) {
          const int64_t n = m / hw_out;
          course::Vec<float, 4> out;
#pragma unroll
          for (int r = 0; r < 4; ++r) out.v[r] = v[r];
          *reinterpret_cast<course::Vec<float, 4>*>(y + (n * s.cout + co) * hw_out + (m - n * hw_out)) = out;
        } else {
#pragma unroll
          for (int r = 0; r < 4; ++r) {
            const int64_t mr = m + r;
            if (mr >= M) break;
            const int64_t n = mr / hw_out;
            y[(n * s.cout + co) * hw_out + (mr - n * hw_out)] = v[r];
          }
        }
      }
    }
  }
  // END SOLUTION
  // END OPEN
}

// Version 3, implicit GEMM on tensor cores: grid (ceil(M / 128), ceil(cout / BN3)), 2 BN3 threads = 2 x (BN3 / 32)
// warps, warp w computing pixels 64 (w / (BN3 / 32)) .. + 63 x channels 32 (w % (BN3 / 32)) .. + 31 of the
// block's tile. Each K step, thread `tid` gathers kAPer consecutive k of im2col row tid % 128 (pixel
// m0 + tid % 128: neighbouring threads, neighbouring pixels) and copies 2 chunks of 4 k of the weights
// (4 threads per channel row), all with cp.async into the ring's next stage.
//
// The order of K is ours to choose (a sum is the same in any order, if A and B agree). kTapMajor
// (cin % 16 == 0, every layer of ResNet-50 but the stem): K goes through the channels 16 at a time,
// and for each 16 through the kernel's taps, so a step is 16 channels under one tap (kh, kw): one
// bounds check and one address per step, then addresses hw_in apart. (The taps of 16 channels come
// one after the other so that the rows they read are still in L1: taps outermost, all channels per
// tap, read every input 9 times from L2 and ran at two thirds of the speed.) The weight is then read
// from its copy in that order, `weight_t` (cout, kh, kw, cin), written by conv2d_weight_kernel3, 16
// bytes at a time (read in place, 4 channels of one tap are kh kw floats apart: 4-byte copies that cost
// more than the gather saved). The generic order (k = ci kh kw + (kh, kw), as `weight` is laid out)
// decodes and bounds-checks a tap per element; its weights are copied 16 bytes at a time where K % 4 ==
// 0 and the weight is 16-byte aligned (kVecB).
// (kTapMajor: `weight` is weight_t.)
template <int BN3, bool kTapMajor, bool kVecB>
__global__ void __launch_bounds__(2 * BN3, kMinBlocks3<BN3>)
    conv2d_kernel3(const float* __restrict__ x, const float* __restrict__ weight, const float* __restrict__ bias,
                   float* __restrict__ y, Conv2dShape s) {
  // BEGIN OPEN
  // GOAL: version 3: the block's tile of y = conv(x, w) + bias on TF32 tensor cores through a cp.async ring, the
  // GOAL: gather in the K order the template picks, zeros outside x and the sizes (Background: Why TF32, How the gather
  // GOAL: feeds it, The order of K is yours).
  constexpr int kThreads = 2 * BN3;
  constexpr int kAPer = kBM3 * kBK3 / kThreads;  // k of one im2col row a thread gathers per step: 8 or 16
  constexpr int kBRows = kThreads / 4;           // channel rows of B copied per pass (2 passes)
  __shared__ __align__(128) Stage3<BN3> ring[kStages3];

  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int hw_out = s.ho * s.wo;
  const int hw_in = s.h * s.w;
  const int khw = s.kh * s.kw;
  const int64_t M = s.n * hw_out;
  const int K = s.cin * khw;
  const int64_t m0 = int64_t(blockIdx.x) * kBM3;
  const int co0 = blockIdx.y * BN3;
  const int wm0 = (warp / (BN3 / kWN3)) * kWM3, wn0 = (warp % (BN3 / kWN3)) * kWN3;

  // This thread's im2col row (pixel m0 + a_row = (n, oh, ow), decoded once) and its k within a step.
  const int a_row = tid % kBM3, a_k = (tid / kBM3) * kAPer;
  const int64_t m_load = m0 + a_row;
  const float* xn = x;
  int ih0 = -(1 << 30), iw0 = 0;  // a row past M reads only "padding": zeros (and saves a register)
  if (m_load < M) {
    const int64_t n = m_load / hw_out;
    const int p = static_cast<int>(m_load - n * hw_out);
    const int oh = p / s.wo, ow = p - oh * s.wo;
    xn = x + n * s.cin * hw_in;
    ih0 = oh * s.stride_h - s.pad_h;
    iw0 = ow * s.stride_w - s.pad_w;
  }
  // This thread's weights: chunk b_c (k 4 b_c .. 4 b_c + 3 of the step) of channel rows b_row, b_row + kBRows.
  const int b_row = tid / 4, b_c = tid % 4;

  // Issue the copies of the step at k0 into stage st (zeros outside x, the padding, M, K and cout).
  auto load_stage = [&](Stage3<BN3>& st, int k0) {
    if constexpr (kTapMajor) {
      // one tap (kh, kw) for the whole step, channels ci0 .. ci0 + 15 (K is whole steps: no k >= K)
      const int step = k0 / kBK3, chunk = step / khw, tap = step - chunk * khw, ci0 = chunk * kBK3;
      const int kh = tap / s.kw, kw = tap - kh * s.kw;
      const int ih = ih0 + kh * s.dil_h, iw = iw0 + kw * s.dil_w;
      const bool ok = ih >= 0 && ih < s.h && iw >= 0 && iw < s.w;
      const float* src = xn + (ci0 + a_k) * hw_in + ih * s.w + iw;
#pragma unroll
      for (int e = 0; e < kAPer; ++e) {
        cp_async4(&st.A[a_k + e][swizzle3(a_k + e, a_row)], ok ? src + e * hw_in : x, ok);
      }
#pragma unroll
      for (int pass = 0; pass < 2; ++pass) {
        const int r = b_row + pass * kBRows;
        const int co = co0 + r;
        const float* w = weight + (int64_t(co) * khw + tap) * s.cin + ci0 + 4 * b_c;  // weight_t[co][tap][ci]
        cp_async16(&st.B[r][4 * b_c], co < s.cout ? w : weight, co < s.cout);
      }
      return;
    }
    // im2col: k = k0 + a_k + e -> (ci, kh, kw), decoded once per step, then walked (kw fastest)
    int k = k0 + a_k;
    const int ci = k / khw;
    int kh = (k - ci * khw) / s.kw;
    int kw = k - ci * khw - kh * s.kw;
    int c_off = ci * hw_in;
#pragma unroll
    for (int e = 0; e < kAPer; ++e, ++k) {
      const int ih = ih0 + kh * s.dil_h, iw = iw0 + kw * s.dil_w;
      const bool ok = k < K && ih >= 0 && ih < s.h && iw >= 0 && iw < s.w;
      cp_async4(&st.A[a_k + e][swizzle3(a_k + e, a_row)], ok ? xn + c_off + ih * s.w + iw : x, ok);
      if (++kw == s.kw) {
        kw = 0;
        if (++kh == s.kh) {
          kh = 0;
          c_off += hw_in;
        }
      }
    }
#pragma unroll
    for (int pass = 0; pass < 2; ++pass) {
      const int r = b_row + pass * kBRows;
      const int co = co0 + r, kb = k0 + 4 * b_c;
      const float* src = weight + int64_t(co) * K + kb;
      if (kVecB) {
        const bool ok = co < s.cout && kb < K;
        cp_async16(&st.B[r][4 * b_c], ok ? src : weight, ok);
      } else {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const bool ok = co < s.cout && kb + e < K;
          cp_async4(&st.B[r][4 * b_c + e], ok ? src + e : weight, ok);
        }
      }
    }
  };

  float acc[kMTiles3][kNTiles3][4] = {};
  const int steps = (K + kBK3 - 1) / kBK3;
  // 05's pipeline: kStages3 - 1 steps in flight, one (possibly empty) group committed per step
#pragma unroll
  for (int p = 0; p < kStages3 - 1; ++p) {
    if (p < steps) load_stage(ring[p], p * kBK3);
    cp_async_commit();
  }
  int read = 0, write = kStages3 - 1;
  for (int step = 0; step < steps; ++step) {
    cp_async_wait<kStages3 - 2>();  // this thread's copies of `step` have landed
    __syncthreads();                // everyone's have, and everyone is done reading stage `write`
    if (step + kStages3 - 1 < steps) load_stage(ring[write], (step + kStages3 - 1) * kBK3);
    cp_async_commit();
    mma_stage3<BN3>(ring[read], acc, wm0, wn0, lane);
    read = read + 1 == kStages3 ? 0 : read + 1;
    write = write + 1 == kStages3 ? 0 : write + 1;
  }
  cp_async_wait<0>();
  store_y3(y, bias, acc, s, m0 + wm0, co0 + wn0, lane);
  // END OPEN
}

// weight (cout, cin, kh, kw) -> weight_t (cout, kh, kw, cin), the tap-major order of version 3's K:
// a grid-stride loop over weight_t's elements (neighbouring threads write neighbouring channels).
__global__ void conv2d_weight_kernel3(const float* __restrict__ weight, float* __restrict__ weight_t, int64_t total,
                                      int cin, int khw) {
  // BEGIN OPEN
  // GOAL: weight_t = weight in tap-major order (cout, kh, kw, cin), every element, coalesced writes.
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    const int ci = static_cast<int>(i % cin);
    const int64_t row = i / cin;  // co khw + tap
    const int tap = static_cast<int>(row % khw);
    weight_t[i] = weight[(row - tap) * cin + int64_t(ci) * khw + tap];
  }
  // END OPEN
}

[[maybe_unused]] constexpr int kDirectThreads = 256;

template <typename scalar_t>
void launch_direct(const scalar_t* x, const scalar_t* weight, const scalar_t* bias, scalar_t* y, const Conv2dShape& s,
                   cudaStream_t stream) {
  // BEGIN SOLUTION
  // GOAL: run conv2d_kernel1 over every output element (maybe none) on `stream`; report a failed launch.
  // TODO: launch conv2d_kernel1<scalar_t> on `stream` with kDirectThreads threads per block and
  // TODO: course::grid_for(outputs, kDirectThreads) blocks; return first when there is no output
  // TODO: (a grid of 0 blocks is an error); check the launch with C10_CUDA_KERNEL_LAUNCH_CHECK().
  // STUB: TORCH_CHECK(false, "launch_direct (conv2d.cu) is not implemented yet");
  const int64_t total = s.n * s.cout * s.ho * s.wo;
  if (total == 0) return;
  conv2d_kernel1<scalar_t><<<course::grid_for(total, kDirectThreads), kDirectThreads, 0, stream>>>(x, weight, bias, y, s);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  // END SOLUTION
}

template <typename scalar_t, int BM>
void launch_implicit_gemm_tiles(const scalar_t* x, const scalar_t* weight, const scalar_t* bias, scalar_t* y,
                                const Conv2dShape& s, cudaStream_t stream) {
  // BEGIN SOLUTION
  // GOAL: run conv2d_kernel2<scalar_t, BM> over the whole output, every group, on `stream`; report a
  // GOAL: failed launch.
  // TODO: launch conv2d_kernel2<scalar_t, BM> on `stream`: a grid of ceil(M / BM) x ceil(cout_g / BN)
  // TODO: x groups blocks (M = n * ho * wo, cout_g = cout / groups) of BM threads; check the launch.
  // STUB: TORCH_CHECK(false, "launch_implicit_gemm_tiles (conv2d.cu) is not implemented yet");
  const int64_t M = s.n * s.ho * s.wo;
  const dim3 grid(static_cast<unsigned>(course::ceil_div<int64_t>(M, BM)),
                  static_cast<unsigned>(course::ceil_div(s.cout / s.groups, BN)), static_cast<unsigned>(s.groups));
  conv2d_kernel2<scalar_t, BM><<<grid, BM, 0, stream>>>(x, weight, bias, y, s);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  // END SOLUTION
}

template <typename scalar_t>
void launch_implicit_gemm(const scalar_t* x, const scalar_t* weight, const scalar_t* bias, scalar_t* y,
                          const Conv2dShape& s, cudaStream_t stream) {
  // BEGIN OPEN
  // GOAL: run conv2d_kernel2 over every tile of every group on `stream` (nothing when y is empty); report a failed launch.
  const int64_t M = s.n * s.ho * s.wo;
  if (M == 0 || s.cout == 0) return;
  TORCH_CHECK(s.groups <= 65535, "groups: version 2's implicit GEMM takes at most 65535 groups (one grid layer "
              "each), but groups is ", std::to_string(s.groups), "; version 1 takes more");
  // 128-pixel tiles reuse each weight more; 64-pixel tiles make twice the blocks, for problems too
  // small to fill the GPU (e.g. 32 x 512 x 7 x 7) with the larger tile.
  int device = 0, sms = 0;
  C10_CUDA_CHECK(cudaGetDevice(&device));
  C10_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const int64_t blocks128 = course::ceil_div<int64_t>(M, 128) * course::ceil_div(s.cout / s.groups, BN) * s.groups;
  if (s.groups > 1) course::took<scalar_t>("v2.grouped");  // (planner paths: course/paths.h)
  if (blocks128 >= 4 * int64_t(sms)) {
    course::took<scalar_t>("v2.gemm128");
    launch_implicit_gemm_tiles<scalar_t, 128>(x, weight, bias, y, s, stream);
  } else {
    course::took<scalar_t>("v2.gemm64");
    launch_implicit_gemm_tiles<scalar_t, 64>(x, weight, bias, y, s, stream);
  }
  // END OPEN
}

// The depthwise kernels over the whole output: the direct one for 3x3 filters, else the tile kernel when
// its tile fits in shared memory (else false: the GEMM takes the call).
template <typename scalar_t>
bool launch_depthwise(const scalar_t* x, const scalar_t* weight, const scalar_t* bias, scalar_t* y,
                      const Conv2dShape& s, cudaStream_t stream) {
  if (s.n * s.cout * s.ho * s.wo == 0) return true;
  if (s.kh == 3 && s.kw == 3) {  // the direct kernel
    // 4 outputs a thread; 2 at a stride on rows wider than 8 outputs: a warp's loads of one tap then
    // span 32 x 2 x stride floats, not 4 x that (H100, MobileNetV2's stride-2 layers: 1.13-1.16x of
    // cuDNN with 2, 0.91-0.95x with 4; on its 14 x 14 -> 7 x 7 one 4 did better, 1.08x against 1.00x)
    const bool four = s.stride_w == 1 || s.wo <= 8;
    const int64_t items = s.n * s.cout * s.ho * course::ceil_div<int64_t>(s.wo, four ? 4 : 2);
    const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(course::ceil_div<int64_t>(items, kDwThreads), INT32_MAX));
    if (four) {
      course::took<scalar_t>("v2.depthwise3x3.four");  // (planner paths: course/paths.h)
      conv2d_depthwise_kernel<scalar_t, 4><<<blocks, kDwThreads, 0, stream>>>(x, weight, bias, y, s);
    } else {
      course::took<scalar_t>("v2.depthwise3x3.two");
      conv2d_depthwise_kernel<scalar_t, 2><<<blocks, kDwThreads, 0, stream>>>(x, weight, bias, y, s);
    }
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    return true;
  }
  DepthwiseTile t;
  dim3 grid;
  if (!depthwise_tile(s, sizeof(scalar_t), t, grid)) return false;
  course::took<scalar_t>("v2.depthwise_tile");
  conv2d_depthwise_tile_kernel<scalar_t><<<grid, kDwThreads, 0, stream>>>(x, weight, bias, y, s, t);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return true;
}

template <int BN3, bool kTapMajor, bool kVecB>
void launch_tensor_core_tiles(const float* x, const float* weight, const float* bias, float* y, const Conv2dShape& s,
                              cudaStream_t stream) {
  [[maybe_unused]] constexpr int threads = 2 * BN3;
  // BEGIN SOLUTION
  // GOAL: run conv2d_kernel3<BN3, kTapMajor, kVecB> over the whole output on `stream`; report a failed launch.
  // TODO: launch conv2d_kernel3<BN3, kTapMajor, kVecB> on `stream`: a grid of ceil(M / kBM3) x ceil(cout / BN3)
  // TODO: blocks (M = n * ho * wo) of `threads` threads; check the launch.
  // STUB: TORCH_CHECK(false, "launch_tensor_core_tiles (conv2d.cu) is not implemented yet");
  const int64_t M = s.n * s.ho * s.wo;
  const dim3 grid(static_cast<unsigned>(course::ceil_div<int64_t>(M, kBM3)),
                  static_cast<unsigned>(course::ceil_div(s.cout, BN3)));
  conv2d_kernel3<BN3, kTapMajor, kVecB><<<grid, threads, 0, stream>>>(x, weight, bias, y, s);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  // END SOLUTION
}

void launch_tensor_cores(const float* x, const float* weight, const float* bias, float* y, const Conv2dShape& s,
                         float* weight_t, cudaStream_t stream) {
  // BEGIN OPEN
  // GOAL: version 3 on `stream`: the tap-major weight copy where the kernel wants it, then conv2d_kernel3 over y with
  // GOAL: the template that fits (16-byte weight copies where aligned); refused without TF32 tensor cores.
  // version 3 runs only where tensor cores take TF32 (compute capability 8.0 and newer) and only from
  // code compiled for such a GPU (a 7.5 build JIT-compiled on an H100 has no tensor-core path)
  course::check_tensor_cores(conv2d_kernel3<64, false, false>, "version 3");
  const int64_t M = s.n * s.ho * s.wo;
  if (M == 0 || s.cout == 0) return;
  // 128-channel tiles where there are more than 64 channels and enough tiles to fill the GPU; else 64
  // (the benchmark's 64 channels, and problems too small for the larger tile)
  int device = 0, sms = 0;
  C10_CUDA_CHECK(cudaGetDevice(&device));
  C10_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const bool wide = s.cout > 64 && course::ceil_div<int64_t>(M, kBM3) * course::ceil_div(s.cout, 128) >= sms;
  // channels innermost in K where a step of 16 k is one tap's channels; else the weight's order, with
  // 16-byte weight copies where every row of K = cin kh kw floats starts on 16 bytes
  const bool vec_b = (s.cin * s.kh * s.kw) % 4 == 0 && course::is_aligned16(weight);
  if (conv2d_weight_scratch(s, 3)) {  // cin % 16 == 0 (kBK3)
    course::took(wide ? "v3.tap_major.wide" : "v3.tap_major.narrow");  // (planner paths: course/paths.h)
    TORCH_CHECK(weight_t != nullptr && course::is_aligned16(weight_t), "version 3: no 16-byte aligned weight scratch");
    const int64_t total = int64_t(s.cout) * s.cin * s.kh * s.kw;
    conv2d_weight_kernel3<<<course::grid_for(total, 256), 256, 0, stream>>>(weight, weight_t, total, s.cin, s.kh * s.kw);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    wide ? launch_tensor_core_tiles<128, true, true>(x, weight_t, bias, y, s, stream)
         : launch_tensor_core_tiles<64, true, true>(x, weight_t, bias, y, s, stream);
  } else if (wide) {
    course::took(vec_b ? "v3.wide.vec_b" : "v3.wide.scalar_b");
    vec_b ? launch_tensor_core_tiles<128, false, true>(x, weight, bias, y, s, stream)
          : launch_tensor_core_tiles<128, false, false>(x, weight, bias, y, s, stream);
  } else {
    course::took(vec_b ? "v3.narrow.vec_b" : "v3.narrow.scalar_b");
    vec_b ? launch_tensor_core_tiles<64, false, true>(x, weight, bias, y, s, stream)
          : launch_tensor_core_tiles<64, false, false>(x, weight, bias, y, s, stream);
  }
  // END OPEN
}

}  // namespace

template <typename scalar_t>
void conv2d_cuda(const scalar_t* x, const scalar_t* weight, const scalar_t* bias, scalar_t* y, const Conv2dShape& s,
                 int version, scalar_t* weight_scratch, cudaStream_t stream) {
  TORCH_CHECK(version >= 1 && version <= 3,
              "version must be 1 (direct), 2 (implicit GEMM) or 3 (implicit GEMM on TF32 tensor cores)");
  TORCH_CHECK(version != 3 || s.groups == 1, "groups must be 1 for version 3 (TF32 tensor cores)");
  if (version == 1) {
    course::took<scalar_t>("v1");  // (planner paths: course/paths.h)
    launch_direct(x, weight, bias, y, s, stream);
  } else if (version == 2 && s.groups == s.cin && launch_depthwise(x, weight, bias, y, s, stream)) {
    // depthwise (one input channel per group): done, unless its tile did not fit (then the GEMM)
  } else if (version == 2) {
    if (s.groups == s.cin) course::took<scalar_t>("v2.depthwise_to_gemm");  // its tile did not fit
    launch_implicit_gemm(x, weight, bias, y, s, stream);
  } else if constexpr (std::is_same_v<scalar_t, float>) {
    course::took("v3");
    launch_tensor_cores(x, weight, bias, y, s, weight_scratch, stream);
  } else {
    TORCH_CHECK(false, "x must be float32 for version 3 (TF32 tensor cores), but is float64");
  }
}

// The binding file dispatches on dtype; these are the types it may ask for.
#define INSTANTIATE(T) \
  template void conv2d_cuda<T>(const T*, const T*, const T*, T*, const Conv2dShape&, int, T*, cudaStream_t);
INSTANTIATE(float)
INSTANTIATE(double)
