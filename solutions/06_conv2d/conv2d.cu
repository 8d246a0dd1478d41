// Exercise 06: forward 2-D convolution (NCHW, groups = 1), from a direct kernel (version 1) to a
// tiled implicit GEMM (version 2), and their launchers.
//
// This file includes no PyTorch tensor headers, so editing it recompiles in about a second.
// Tensors, checks, output sizes and op registration live in conv2d.cpp.
#include <course/cuda.cuh>

#include "conv2d.h"

namespace {

// The input at (ih, iw) of one channel plane of h x w, or 0 in the zero padding around it.
template <typename scalar_t>
__device__ __forceinline__ scalar_t load_padded(const scalar_t* __restrict__ plane, int ih, int iw, int h, int w) {
  return (ih >= 0 && ih < h && iw >= 0 && iw < w) ? plane[ih * w + iw] : scalar_t(0);
}

// Version 1, direct: 1D grid-stride loop, one thread per output element y[n][co][oh][ow] (ow fastest,
// so a warp reads neighbouring input pixels and all its threads read the same weight).
template <typename scalar_t>
__global__ void conv2d_kernel1(const scalar_t* __restrict__ x, const scalar_t* __restrict__ weight,
                               const scalar_t* __restrict__ bias, scalar_t* __restrict__ y, Conv2dShape s) {
  const int64_t total = s.n * s.cout * s.ho * s.wo;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    // BEGIN SOLUTION
    // GOAL: y[i] for output element i: the convolution with stride, padding and dilation, plus bias.
    // TODO: split i into (n, co, oh, ow), ow fastest, and set y[i] = bias[co] (0 when bias is nullptr)
    // TODO: + the sum over ci, kh, kw of x[n][ci][ih][iw] * weight[co][ci][kh][kw], where
    // TODO: ih = oh * stride_h - pad_h + kh * dil_h (iw likewise); taps in the padding read 0 (load_padded).
    const int ow = static_cast<int>(i % s.wo);
    int64_t t = i / s.wo;
    const int oh = static_cast<int>(t % s.ho);
    t /= s.ho;
    const int co = static_cast<int>(t % s.cout);
    const int64_t n = t / s.cout;
    const scalar_t* xn = x + n * s.cin * s.h * s.w;
    const scalar_t* wc = weight + int64_t(co) * s.cin * s.kh * s.kw;
    scalar_t acc = bias ? bias[co] : scalar_t(0);
    for (int ci = 0; ci < s.cin; ++ci) {
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
}

// The implicit GEMM's tiles. A block computes a BM x BN tile of the output matrix Y[m][co]
// (m = (n, oh, ow): BM output pixels; BN output channels) with BM threads, each an 8x8 register
// block; the K loop (k = (ci, kh, kw)) takes BK columns of the im2col'd input at a time.
constexpr int BN = 64;
constexpr int BK = 8;
constexpr int TM = 8;  // output pixels per thread: 4 in the tile's first half, 4 in its second
constexpr int TN = 8;  // output channels per thread, split the same way

// Version 2, implicit GEMM: grid (ceil(M / BM), ceil(cout / BN)), BM threads. Thread t gathers
// im2col row m0 + t into shared memory (coalesced: neighbouring threads, neighbouring pixels) and
// computes rows {4 tm .. 4 tm + 3, BM/2 + 4 tm ..} x channels {4 tn .., BN/2 + 4 tn ..} of the tile.
// Two shared buffers: the next K step's global loads are in flight while this one's math runs.
template <typename scalar_t, int BM>
__global__ void __launch_bounds__(BM) conv2d_kernel2(const scalar_t* __restrict__ x, const scalar_t* __restrict__ weight,
                                                     const scalar_t* __restrict__ bias, scalar_t* __restrict__ y,
                                                     Conv2dShape s) {
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
  const int K = s.cin * s.kh * s.kw;
  const int64_t m0 = int64_t(blockIdx.x) * BM;
  const int co0 = blockIdx.y * BN;

  // This thread's im2col row: output pixel m_load = (n, oh, ow), decoded once.
  const int64_t m_load = m0 + tid;
  const bool m_ok = m_load < M;
  const scalar_t* xn = x;
  int ih0 = 0, iw0 = 0;
  if (m_ok) {
    const int64_t n = m_load / hw_out;
    const int p = static_cast<int>(m_load - n * hw_out);
    const int oh = p / s.wo, ow = p - oh * s.wo;
    xn = x + n * s.cin * hw_in;
    ih0 = oh * s.stride_h - s.pad_h;
    iw0 = ow * s.stride_w - s.pad_w;
  }
  // Every thread walks k = 0, 1, ..., K-1 in order, so (ci, kh, kw) advance by increments: no division.
  int c_off = 0, kh = 0, kw = 0;  // c_off = ci * h * w
  // This thread's weights: kBPerThread consecutive k of output channel co0 + b_co.
  const int b_co = tid / (BK / kBPerThread);
  const int b_k = (tid % (BK / kBPerThread)) * kBPerThread;
  const bool co_ok = co0 + b_co < s.cout;
  const scalar_t* w_row = weight + int64_t(co0 + b_co) * K;

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

  // Epilogue: Y[m][co] + bias[co] -> y[n][co][oh][ow]. When ho * wo % 4 == 0, each group of 4 rows
  // lies in one image and is 16-byte aligned, so it is stored as one vector.
  const bool vec_store = hw_out % 4 == 0;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int64_t m = m0 + half * (BM / 2) + tm * 4;
    if (m >= M) continue;
#pragma unroll
    for (int j = 0; j < TN; ++j) {
      const int co = co0 + (j < 4 ? tn * 4 + j : BN / 2 + tn * 4 + j - 4);
      if (co >= s.cout) continue;
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
}

constexpr int kDirectThreads = 256;

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
  // GOAL: run conv2d_kernel2<scalar_t, BM> over the whole output on `stream`; report a failed launch.
  // TODO: launch conv2d_kernel2<scalar_t, BM> on `stream`: a grid of ceil(M / BM) x ceil(cout / BN)
  // TODO: blocks (M = n * ho * wo) of BM threads; check the launch.
  // STUB: TORCH_CHECK(false, "launch_implicit_gemm_tiles (conv2d.cu) is not implemented yet");
  const int64_t M = s.n * s.ho * s.wo;
  const dim3 grid(static_cast<unsigned>(course::ceil_div<int64_t>(M, BM)),
                  static_cast<unsigned>(course::ceil_div(s.cout, BN)));
  conv2d_kernel2<scalar_t, BM><<<grid, BM, 0, stream>>>(x, weight, bias, y, s);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  // END SOLUTION
}

template <typename scalar_t>
void launch_implicit_gemm(const scalar_t* x, const scalar_t* weight, const scalar_t* bias, scalar_t* y,
                          const Conv2dShape& s, cudaStream_t stream) {
  const int64_t M = s.n * s.ho * s.wo;
  if (M == 0 || s.cout == 0) return;
  // 128-pixel tiles reuse each weight more; 64-pixel tiles make twice the blocks, for problems too
  // small to fill the GPU (e.g. 32 x 512 x 7 x 7) with the larger tile.
  int device = 0, sms = 0;
  C10_CUDA_CHECK(cudaGetDevice(&device));
  C10_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  const int64_t blocks128 = course::ceil_div<int64_t>(M, 128) * course::ceil_div(s.cout, BN);
  if (blocks128 >= 4 * int64_t(sms)) {
    launch_implicit_gemm_tiles<scalar_t, 128>(x, weight, bias, y, s, stream);
  } else {
    launch_implicit_gemm_tiles<scalar_t, 64>(x, weight, bias, y, s, stream);
  }
}

}  // namespace

template <typename scalar_t>
void conv2d_cuda(const scalar_t* x, const scalar_t* weight, const scalar_t* bias, scalar_t* y, const Conv2dShape& s,
                 int version, cudaStream_t stream) {
  TORCH_CHECK(version == 1 || version == 2, "version must be 1 (direct) or 2 (implicit GEMM)");
  if (version == 1) {
    launch_direct(x, weight, bias, y, s, stream);
  } else {
    launch_implicit_gemm(x, weight, bias, y, s, stream);
  }
}

// The binding file dispatches on dtype; these are the types it may ask for.
#define INSTANTIATE(T) \
  template void conv2d_cuda<T>(const T*, const T*, const T*, T*, const Conv2dShape&, int, cudaStream_t);
INSTANTIATE(float)
INSTANTIATE(double)
