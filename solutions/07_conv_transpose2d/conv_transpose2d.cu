// Exercise 07: transposed 2-D convolution (NCHW, with groups), two versions, and their launcher.
//   kernel 1: a gather, one thread per output element;
//   kernel 2: an implicit GEMM, the transposed convolution computed as the data gradient of the
//             convolution it transposes (unit 4's conv_dgrad_kernel, without BatchNorm's scale).
//
// This file includes no PyTorch tensor headers, so editing it recompiles in about a second.
// Tensors, checks, output sizes and op registration live in conv_transpose2d.cpp.
#include <cstdint>

#include <course/cuda.cuh>

#include "conv_transpose2d.h"

namespace {

// The input row (or column) whose scatter reaches output position o through the tap at offset
// k_off = k * dilation, or -1 when none does: o + pad - k_off must be a non-negative multiple of the
// stride, and the quotient a position inside the input (0 <= i < in_size).
__device__ __forceinline__ int source_index(int o, int k_off, int pad, int stride, int in_size) {
  const int t = o + pad - k_off;
  if (t < 0 || t % stride != 0) return -1;
  const int i = t / stride;
  return i < in_size ? i : -1;
}

// Gather: 1D grid-stride loop, one thread per output element y[n][co][oh][ow] (ow fastest, so a
// warp reads neighbouring input pixels and all its threads read the same weight); each thread
// loops over the kernel taps that reach it and, for each, over the input channels of co's group.
template <typename scalar_t>
__global__ void conv_transpose2d_kernel1(const scalar_t* __restrict__ x, const scalar_t* __restrict__ weight,
                                        const scalar_t* __restrict__ bias, scalar_t* __restrict__ y,
                                        ConvTranspose2dShape s) {
  const int64_t total = s.n * s.cout * s.ho * s.wo;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < total; i += int64_t(gridDim.x) * blockDim.x) {
    // BEGIN SOLUTION
    // GOAL: y[i] for output element i: the transposed convolution of x with weight, plus bias.
    // TODO: split i into (n, co, oh, ow), ow fastest, and set y[i] = bias[co] (0 when bias is nullptr)
    // TODO: + the sum over the taps (kh, kw) that reach (oh, ow) (source_index gives their input
    // TODO: pixel (ih, iw), or -1) and over the cin / groups input channels of co's group
    // TODO: g = co / (cout / groups): x[n][g * cin_g + c][ih][iw] * weight[g * cin_g + c][co - g * cout_g][kh][kw].
    const int ow = static_cast<int>(i % s.wo);
    int64_t t = i / s.wo;
    const int oh = static_cast<int>(t % s.ho);
    t /= s.ho;
    const int co = static_cast<int>(t % s.cout);
    const int64_t n = t / s.cout;
    const int hw = s.h * s.w;
    const int taps = s.kh * s.kw;
    const int cin_g = s.cin / s.groups, cout_g = s.cout / s.groups;
    const int g = co / cout_g, cg = co - g * cout_g;  // co's group, and co's place in it
    const scalar_t* xn = x + (n * s.cin + g * cin_g) * hw;                  // x[n][g * cin_g][0][0]
    const scalar_t* wg = weight + (int64_t(g) * cin_g * cout_g + cg) * taps;  // weight[g * cin_g][cg][0][0]
    scalar_t acc = bias ? bias[co] : scalar_t(0);
    for (int kh = 0; kh < s.kh; ++kh) {
      const int ih = source_index(oh, kh * s.dil_h, s.pad_h, s.stride_h, s.h);
      if (ih < 0) continue;
      for (int kw = 0; kw < s.kw; ++kw) {
        const int iw = source_index(ow, kw * s.dil_w, s.pad_w, s.stride_w, s.w);
        if (iw < 0) continue;
        const scalar_t* xp = xn + ih * s.w + iw;        // x[n][g * cin_g][ih][iw]
        const scalar_t* wp = wg + kh * s.kw + kw;       // weight[g * cin_g][cg][kh][kw]
        for (int c = 0; c < cin_g; ++c) acc += xp[c * hw] * wp[c * cout_g * taps];
      }
    }
    y[i] = acc;
    // END SOLUTION
  }
}

constexpr int kThreads = 256;  // kernel 1

// ---------------------------------------------------------------- kernel 2: implicit GEMM
// y as one GEMM per group g, C[M x Ncol] = A[M x Kred] * B[Kred x Ncol], its operands gathered by
// "loaders" and never materialised: M = cout / groups, Ncol = N*Ho*Wo output pixels, Kred =
// (cin / groups)*kh*kw taps; with cin_g = cin / groups, cout_g = cout / groups:
//   A[co][(ci, r, s)]         = weight[g*cin_g + ci][co][r][s]
//   B[(ci, r, s)][(n, oh, ow)] = x[n][g*cin_g + ci][ih][iw] where oh = ih*stride_h - pad_h + r*dil_h
//                                (and likewise ow, iw), 0 where no whole ih, iw in range exists
//   C[co][(n, oh, ow)]        -> y[n][g*cout_g + co][oh][ow]
// A block of 128 threads computes a 64 x 128 tile of C; thread (ty, tx) = (tid / 16, tid % 16)
// owns 8 x 8 outputs: rows ty*4 + {0..3} and 32 + ty*4 + {0..3}, columns tx*4 + {0..3} and
// 64 + tx*4 + {0..3} (two groups of 4, so the float4 shared-memory reads are conflict-free).
constexpr int BM = 64, BN = 128, BK = 8, kGemmThreads = 128;
constexpr int kAStride = BM + 4, kBStride = BN + 4;  // padded rows: transposed stores hit 32 banks
constexpr int kRowsPerPass = kGemmThreads / BK;      // A loaders: 16 rows per pass, 4 passes

template <typename T>
struct Smem {  // double-buffered k-slices of A (as [k][m]) and B (as [k][n])
  alignas(32) T a[2][BK][kAStride];
  alignas(32) T b[2][BK][kBStride];
};

__device__ __forceinline__ int row_of(int i) {
  const int ty = threadIdx.x / 16;
  return i < 4 ? ty * 4 + i : BM / 2 + ty * 4 + (i - 4);
}
__device__ __forceinline__ int col_of(int j) {
  const int tx = threadIdx.x % 16;
  return j < 4 ? tx * 4 + j : BN / 2 + tx * 4 + (j - 4);
}

// acc = A[tile rows, k_begin:k_end] * B[k_begin:k_end, tile cols]. Loads of slice k+1 from global
// memory are issued before the FMAs of slice k, so their latency hides behind arithmetic.
template <typename T, class LoadA, class LoadB>
__device__ __forceinline__ void gemm_tile(const LoadA& la, const LoadB& lb, int k_begin, int k_end, Smem<T>& sm,
                                          T (&acc)[8][8]) {
#pragma unroll
  for (int i = 0; i < 8; ++i)
#pragma unroll
    for (int j = 0; j < 8; ++j) acc[i][j] = T(0);
  if (k_begin >= k_end) return;
  T ra[LoadA::kRegs], rb[LoadB::kRegs];
  la.load(k_begin, k_end, ra);
  lb.load(k_begin, k_end, rb);
  la.store(sm.a[0], ra);
  lb.store(sm.b[0], rb);
  __syncthreads();
  const int ty = threadIdx.x / 16, tx = threadIdx.x % 16;
  using V4 = course::Vec<T, 4>;
  int buf = 0;
  for (int k0 = k_begin; k0 < k_end; k0 += BK) {
    const bool more = k0 + BK < k_end;
    if (more) {
      la.load(k0 + BK, k_end, ra);
      lb.load(k0 + BK, k_end, rb);
    }
#pragma unroll
    for (int kk = 0; kk < BK; ++kk) {
      const V4 a0 = *reinterpret_cast<const V4*>(&sm.a[buf][kk][ty * 4]);
      const V4 a1 = *reinterpret_cast<const V4*>(&sm.a[buf][kk][BM / 2 + ty * 4]);
      const V4 b0 = *reinterpret_cast<const V4*>(&sm.b[buf][kk][tx * 4]);
      const V4 b1 = *reinterpret_cast<const V4*>(&sm.b[buf][kk][BN / 2 + tx * 4]);
      const T av[8] = {a0.v[0], a0.v[1], a0.v[2], a0.v[3], a1.v[0], a1.v[1], a1.v[2], a1.v[3]};
      const T bv[8] = {b0.v[0], b0.v[1], b0.v[2], b0.v[3], b1.v[0], b1.v[1], b1.v[2], b1.v[3]};
#pragma unroll
      for (int i = 0; i < 8; ++i)
#pragma unroll
        for (int j = 0; j < 8; ++j) acc[i][j] += av[i] * bv[j];
    }
    if (more) {  // the other buffer was last read before the previous barrier: safe to overwrite
      la.store(sm.a[buf ^ 1], ra);
      lb.store(sm.b[buf ^ 1], rb);
      __syncthreads();
      buf ^= 1;
    }
  }
}

// A: thread t loads rows t/8 + 16i (i < 4) at reduction index t%8.
template <typename T>
struct WeightA {
  static constexpr int kRegs = BM * BK / kGemmThreads;
  const T* w;
  int cout, RS, m0;
  __device__ void load(int k0, int k_end, T (&r)[kRegs]) const {
    const int kidx = k0 + threadIdx.x % BK;
    const int ci = kidx / RS, rs = kidx - ci * RS;
#pragma unroll
    for (int i = 0; i < kRegs; ++i) {
      const int co = m0 + threadIdx.x / BK + i * kRowsPerPass;
      r[i] = (kidx < k_end && co < cout) ? w[(ci * cout + co) * RS + rs] : T(0);
    }
  }
  __device__ static void store(T (&s)[BK][kAStride], const T (&r)[kRegs]) {
#pragma unroll
    for (int i = 0; i < kRegs; ++i) s[threadIdx.x % BK][threadIdx.x / BK + i * kRowsPerPass] = r[i];
  }
};

// B: thread t loads column t (one output pixel) at all 8 reduction indices of a slice, so its
// pixel's decoding (image, row, column) is done once per block, not per slice.
template <typename T, bool kUnitStride>
struct GatherB {
  static constexpr int kRegs = BK;
  static_assert(BN == kGemmThreads, "one column per thread");
  const T* base;  // x + (n*cin + g*cin_g)*h*w for this thread's output pixel; nullptr past the last pixel
  int hh, ww;     // oh + pad_h, ow + pad_w
  int H, W, R, S, RS, dh, dw, sh, sw;
  __device__ GatherB(const T* x, const ConvTranspose2dShape& s, int group, int col, int ncols) {
    H = s.h; W = s.w; R = s.kh; S = s.kw; RS = R * S; dh = s.dil_h; dw = s.dil_w; sh = s.stride_h; sw = s.stride_w;
    base = nullptr;
    hh = ww = 0;
    if (col < ncols) {
      const int HWo = s.ho * s.wo, n = col / HWo, pix = col - n * HWo, oh = pix / s.wo, ow = pix - oh * s.wo;
      base = x + (int64_t(n) * s.cin + int64_t(group) * (s.cin / s.groups)) * H * W;
      hh = oh + s.pad_h;
      ww = ow + s.pad_w;
    }
  }
  __device__ void load(int k0, int k_end, T (&r)[BK]) const {
    // BEGIN SOLUTION
    // GOAL: r[i] = B[k0 + i][this thread's column] for i < BK: the input pixel that tap k0 + i of
    // GOAL: this output pixel reads, 0 when no input pixel is there.
    // TODO: decode k = k0 + i into (ci, r, s) (k = (ci * kh + r) * kw + s). The tap (r, s) reaches
    // TODO: this output pixel from input (ih, iw) with ih * sh = hh - r*dh and iw * sw = ww - s*dw:
    // TODO: r[i] = x[n][ci][ih][iw] from `base` when both are whole (kUnitStride: no division), in
    // TODO: range (0 <= ih < H, 0 <= iw < W), base is set and k < k_end; else 0.
    // TODO: Decode k0 once with divisions, then step (s, r, ci) with carries: divisions are slow.
    int ci = k0 / RS, rs = k0 - ci * RS, rr = rs / S, ss = rs - rr * S;
#pragma unroll
    for (int i = 0; i < BK; ++i) {
      int ih = hh - rr * dh, iw = ww - ss * dw;
      bool ok = base != nullptr && k0 + i < k_end && ih >= 0 && iw >= 0;
      if (!kUnitStride) {
        ok = ok && ih % sh == 0 && iw % sw == 0;
        ih /= sh;
        iw /= sw;
      }
      ok = ok && ih < H && iw < W;
      r[i] = ok ? base[(ci * H + ih) * W + iw] : T(0);
      if (++ss == S) {
        ss = 0;
        if (++rr == R) {
          rr = 0;
          ++ci;
        }
      }
    }
    // END SOLUTION
  }
  __device__ static void store(T (&s)[BK][kBStride], const T (&r)[kRegs]) {
#pragma unroll
    for (int i = 0; i < kRegs; ++i) s[i][threadIdx.x] = r[i];
  }
};

// Grid (ceil(N*Ho*Wo / 128), ceil(cout_g / 64), groups), 128 threads: a 64-channel x 128-pixel tile
// of group blockIdx.z's outputs (channels blockIdx.z * cout_g ..), bias added in the epilogue; 4
// consecutive pixels of one row in one 16-byte store where aligned.
template <typename T, bool kUnitStride>
__global__ void __launch_bounds__(kGemmThreads, 4)  // 4 blocks per SM: <= 128 registers
    conv_transpose2d_kernel2(const T* __restrict__ x, const T* __restrict__ weight, const T* __restrict__ bias,
                             T* __restrict__ y, ConvTranspose2dShape s) {
  __shared__ Smem<T> sm;
  const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN, group = blockIdx.z;
  const int HWo = s.ho * s.wo, ncols = static_cast<int>(s.n) * HWo, RS = s.kh * s.kw;
  const int cin_g = s.cin / s.groups, cout_g = s.cout / s.groups;
  T acc[8][8];
  // this group's weights: weight[group * cin_g .. (group + 1) * cin_g - 1], each (cout_g, kh, kw)
  const WeightA<T> la{weight + int64_t(group) * cin_g * cout_g * RS, cout_g, RS, m0};
  const GatherB<T, kUnitStride> lb(x, s, group, n0 + threadIdx.x, ncols);
  gemm_tile(la, lb, 0, cin_g * RS, sm, acc);
  int64_t colbase[8];  // y's offset of column j's pixel in channel 0
  bool valid[8];
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const int col = n0 + col_of(j);
    valid[j] = col < ncols;
    const int n = valid[j] ? col / HWo : 0;
    colbase[j] = int64_t(n) * s.cout * HWo + (col - n * HWo);
  }
  const bool vec_ok = HWo % 4 == 0 && course::is_aligned16(y);
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    if (m0 + row_of(i) >= cout_g) continue;
    const int co = group * cout_g + m0 + row_of(i);
    const T b = bias ? bias[co] : T(0);
#pragma unroll
    for (int g = 0; g < 2; ++g) {
      T* out = y + int64_t(co) * HWo;
      if (vec_ok && valid[4 * g + 3]) {
        course::Vec<T, 4> pack;
#pragma unroll
        for (int j = 0; j < 4; ++j) pack.v[j] = acc[i][4 * g + j] + b;
        *reinterpret_cast<course::Vec<T, 4>*>(out + colbase[4 * g]) = pack;
      } else {
#pragma unroll
        for (int j = 0; j < 4; ++j)
          if (valid[4 * g + j]) out[colbase[4 * g + j]] = acc[i][4 * g + j] + b;
      }
    }
  }
}

}  // namespace

template <typename scalar_t>
void conv_transpose2d_cuda(const scalar_t* x, const scalar_t* weight, const scalar_t* bias, scalar_t* y,
                           const ConvTranspose2dShape& s, int version, cudaStream_t stream) {
  const int64_t total = s.n * s.cout * s.ho * s.wo;
  if (total == 0) return;  // a grid of 0 blocks is an error
  if (version == 1) {
    // BEGIN SOLUTION
    // GOAL: run conv_transpose2d_kernel1 over every output element on `stream`; report a failed launch.
    // TODO: launch conv_transpose2d_kernel1<scalar_t> on `stream` with kThreads threads per block and
    // TODO: course::grid_for(total, kThreads) blocks; check the launch with C10_CUDA_KERNEL_LAUNCH_CHECK().
    // STUB: TORCH_CHECK(false, "conv_transpose2d_cuda, version 1 (conv_transpose2d.cu) is not implemented yet");
    conv_transpose2d_kernel1<scalar_t><<<course::grid_for(total, kThreads), kThreads, 0, stream>>>(x, weight, bias, y,
                                                                                                  s);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    // END SOLUTION
    return;
  }
  // BEGIN SOLUTION
  // GOAL: run conv_transpose2d_kernel2 over every 64 x 128 tile of every group's part of y on `stream`;
  // GOAL: report a failed launch.
  // TODO: launch conv_transpose2d_kernel2<scalar_t, unit> on `stream` with kGemmThreads threads and a
  // TODO: grid of (ceil(N*Ho*Wo / BN), ceil(cout / groups / BM), groups) blocks, unit = both strides
  // TODO: are 1 (no division in the gather); check the launch with C10_CUDA_KERNEL_LAUNCH_CHECK().
  // STUB: TORCH_CHECK(false, "conv_transpose2d_cuda, version 2 (conv_transpose2d.cu) is not implemented yet");
  const dim3 grid(course::ceil_div(static_cast<int>(s.n) * s.ho * s.wo, BN), course::ceil_div(s.cout / s.groups, BM),
                  s.groups);
  if (s.stride_h == 1 && s.stride_w == 1) {
    conv_transpose2d_kernel2<scalar_t, true><<<grid, kGemmThreads, 0, stream>>>(x, weight, bias, y, s);
  } else {
    conv_transpose2d_kernel2<scalar_t, false><<<grid, kGemmThreads, 0, stream>>>(x, weight, bias, y, s);
  }
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  // END SOLUTION
}

// The binding file dispatches on dtype; these are the types it may ask for.
#define INSTANTIATE(T)                                                                                \
  template void conv_transpose2d_cuda<T>(const T*, const T*, const T*, T*, const ConvTranspose2dShape&, int, \
                                         cudaStream_t);
INSTANTIATE(float)
INSTANTIATE(double)
