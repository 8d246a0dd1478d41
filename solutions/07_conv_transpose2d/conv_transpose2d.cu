// Exercise 07: transposed 2-D convolution (NCHW, with groups), two versions, and their launcher.
//   kernel 1: a gather, one thread per output element;
//   kernel 2: an implicit GEMM, the transposed convolution computed as the data gradient of the
//             convolution it transposes (unit 4's conv_dgrad_kernel, without BatchNorm's scale), one
//             GEMM per group and per stride phase (only the taps that reach a phase's outputs).
//
// This file includes no PyTorch tensor headers, so editing it recompiles in about a second.
// Tensors, checks, output sizes and op registration live in conv_transpose2d.cpp.
#include <algorithm>
#include <cstdint>

#include <course/cuda.cuh>

#include "conv_transpose2d.h"

namespace {

// The input row (or column) whose scatter reaches output position o through the tap at offset
// k_off = k * dilation, or -1 when none does: o + pad - k_off must be a non-negative multiple of the
// stride, and the quotient a position inside the input (0 <= i < in_size).
[[maybe_unused]] __device__ __forceinline__ int source_index(int o, int k_off, int pad, int stride, int in_size) {
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
  // BEGIN OPEN
  // GOAL: y = conv_transpose2d(x, weight) + bias for every output element, by gather: only the taps that reach it
  // GOAL: (groups, stride, padding, dilation, output_padding; int64 indices) (Background: Scatter or gather).
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
  // END OPEN
}

[[maybe_unused]] constexpr int kThreads = 256;  // kernel 1

// ---------------------------------------------------------------- kernel 2: implicit GEMM
// Stride phases. Output row oh receives tap r from input row ih = (oh + pad - r dil) / stride, where
// that is whole: with a stride, each tap reaches only every stride-th row. The rows oh = a, a +
// stride, .. (phase a) are all reached by the same taps: r0, r0 + step, r0 + 2 step, .. < kh, with r0
// the first r whose r dil = a + pad (mod stride) and step = stride / gcd(stride, dil); tap r0 + i step
// reads input row (a + pad - r0 dil) / stride + q - i dil / gcd(stride, dil) for output row a + q stride.
// So each phase (a, b) of rows and columns is a dense convolution over its own taps, and the phases
// together cover every output once: no tap is tested and dropped (stride 2, 3x3: a quarter of the
// taps of the kernel reach a phase on average). Stride 1 is one phase with every tap.
struct Phase1D {
  int first, count;  // output rows first, first + stride, .. (count of them)
  int tap0, taps;    // the taps reaching them: tap0, tap0 + step, .. (taps of them; none: tap0 = -1)
  int step, d_in;    // taps between reaching ones; input rows between neighbouring reaching taps
  int in0;           // the input row tap tap0 reads for output row `first`: (first + pad - tap0 dil) / stride
};

__device__ __forceinline__ int gcd_int(int x, int y) {
  while (y != 0) {
    const int t = x % y;
    x = y;
    y = t;
  }
  return x;
}

// Stride 1: the one phase, every tap (what phase_1d gives, as constants the compiler can fold).
[[maybe_unused]] __device__ __forceinline__ Phase1D unit_phase(int out, int k, int pad, int dil) {
  return {0, out, 0, k, 1, dil, pad};
}

// Phase `first` (0 <= first < stride) of an axis of `out` outputs, a kernel of k taps.
[[maybe_unused]] __device__ __forceinline__ Phase1D phase_1d(int first, int out, int k, int stride, int pad, int dil) {
  // BEGIN OPEN
  // GOAL: the taps and first output of stride phase `first` along one axis (Background: Stride phases).
  // STUB: return {};
  Phase1D p;
  p.first = first;
  p.count = first < out ? (out - first + stride - 1) / stride : 0;
  const int g = gcd_int(stride, dil);
  p.step = stride / g;  // (step dil) % stride == 0: taps step apart reach the same outputs
  p.d_in = dil / g;     // step dil / stride input rows apart
  const int want = (first + pad) % stride;
  p.tap0 = -1;
  for (int r = 0; r < p.step && r < k; ++r) {
    if ((r * dil) % stride == want) {
      p.tap0 = r;
      break;
    }
  }
  p.taps = p.tap0 < 0 ? 0 : (k - p.tap0 + p.step - 1) / p.step;
  p.in0 = p.tap0 < 0 ? 0 : (first + pad - p.tap0 * dil) / stride;  // a whole number: exact
  return p;
  // END OPEN
}

// y as one GEMM per group g and phase (a, b), C[M x Ncol] = A[M x Kred] * B[Kred x Ncol], its operands
// gathered by "loaders" and never materialised: M = cout / groups, Ncol = N*Hq*Wq output pixels of the
// phase, Kred = (cin / groups)*R*S taps of the phase (R of its tap rows, S of its tap columns: all
// kh*kw at stride 1); with cin_g = cin / groups, cout_g = cout / groups, tap rows r_i = tap0 + i step:
//   A[co][(ci, i, j)]        = weight[g*cin_g + ci][co][r_i][s_j]
//   B[(ci, i, j)][(n, q, p)] = x[n][g*cin_g + ci][in0_h + q - i d_in_h][in0_w + p - j d_in_w], 0 outside x
//   C[co][(n, q, p)]         -> y[n][g*cout_g + co][a + q*stride_h][b + p*stride_w]
// A block of 128 threads computes a 64 x 128 tile of C; thread (ty, tx) = (tid / 16, tid % 16)
// owns 8 x 8 outputs: rows ty*4 + {0..3} and 32 + ty*4 + {0..3}, columns tx*4 + {0..3} and
// 64 + tx*4 + {0..3} (two groups of 4, so the float4 shared-memory reads are conflict-free).
constexpr int BM = 64, BN = 128, BK = 8, kGemmThreads = 128;
constexpr int kAStride = BM + 4, kBStride = BN + 4;  // padded rows: transposed stores hit 32 banks
[[maybe_unused]] constexpr int kRowsPerPass = kGemmThreads / BK;      // A loaders: 16 rows per pass, 4 passes

template <typename T>
struct Smem {  // double-buffered k-slices of A (as [k][m]) and B (as [k][n])
  alignas(32) T a[2][BK][kAStride];
  alignas(32) T b[2][BK][kBStride];
};

[[maybe_unused]] __device__ __forceinline__ int row_of(int i) {
  const int ty = threadIdx.x / 16;
  return i < 4 ? ty * 4 + i : BM / 2 + ty * 4 + (i - 4);
}
[[maybe_unused]] __device__ __forceinline__ int col_of(int j) {
  const int tx = threadIdx.x % 16;
  return j < 4 ? tx * 4 + j : BN / 2 + tx * 4 + (j - 4);
}

// acc = A[tile rows, k_begin:k_end] * B[k_begin:k_end, tile cols]. Loads of slice k+1 from global
// memory are issued before the FMAs of slice k, so their latency hides behind arithmetic.
template <typename T, class LoadA, class LoadB>
__device__ __forceinline__ void gemm_tile(const LoadA& la, const LoadB& lb, int k_begin, int k_end, Smem<T>& sm,
                                          T (&acc)[8][8]) {
  // BEGIN OPEN
  // GOAL: acc = A * B for the tile over [k_begin, k_end): each element loaded from global memory once per tile, the next
  // GOAL: slice's loads in flight while this one is multiplied (Background: Version 2: an implicit GEMM).
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
  // END OPEN
}

// A: thread t loads rows t/8 + 16i (i < 4) at reduction index t%8 (ci, i, j): the phase's tap (r_i, s_j).
// kUnitStride: one phase of every tap, (i, j) the weight's own tap (fewer registers: none spill).
template <typename T, bool kUnitStride>
struct WeightA {
  static constexpr int kRegs = BM * BK / kGemmThreads;
  const T* w;         // the group's weights, offset to the phase's first tap (tap0 of rows, of columns)
  int cout, RS, m0;   // RS: kh * kw, a weight's taps
  int taps, S;        // the phase's taps, and its tap columns
  int di, dj;         // tap (i, j) of the phase is i di + j dj taps past its first
  __device__ void load(int k0, int k_end, T (&r)[kRegs]) const {
    const int kidx = k0 + threadIdx.x % BK;
    const int ci = kidx / taps, ij = kidx - ci * taps;
    int rs = ij;
    if (!kUnitStride) {
      const int i = ij / S, j = ij - i * S;
      rs = i * di + j * dj;
    }
#pragma unroll
    for (int e = 0; e < kRegs; ++e) {
      const int co = m0 + threadIdx.x / BK + e * kRowsPerPass;
      r[e] = (kidx < k_end && co < cout) ? w[(ci * cout + co) * RS + rs] : T(0);
    }
  }
  __device__ static void store(T (&s)[BK][kAStride], const T (&r)[kRegs]) {
#pragma unroll
    for (int i = 0; i < kRegs; ++i) s[threadIdx.x % BK][threadIdx.x / BK + i * kRowsPerPass] = r[i];
  }
};

// B: thread t loads column t (one output pixel of the phase) at all 8 reduction indices of a slice,
// so its pixel's decoding (image, row, column) is done once per block, not per slice. K3 = 3: a 3 x 3
// kernel at stride 1, R = S = 3 known to the compiler (see conv_transpose2d_kernel2); K3 = 1 likewise.
template <typename T, int K3 = 0>
struct GatherB {
  static constexpr int kRegs = BK;
  static_assert(BN == kGemmThreads, "one column per thread");
  const T* base;  // x + (n*cin + g*cin_g)*h*w for this thread's output pixel; nullptr past the last pixel
  int ih0, iw0;   // the input pixel the phase's first tap (tap0 of rows and of columns) reads for it
  int H, W, R, S, dh, dw;  // R x S: the phase's taps; dh, dw: input rows, columns between its taps
  __device__ GatherB(const T* x, const ConvTranspose2dShape& s, int group, int col, const Phase1D& ph,
                     const Phase1D& pw) {
    H = s.h; W = s.w; R = K3 ? K3 : ph.taps; S = K3 ? K3 : pw.taps; dh = ph.d_in; dw = pw.d_in;
    base = nullptr;
    ih0 = iw0 = 0;
    const int pixels = ph.count * pw.count;
    if (col < static_cast<int>(s.n) * pixels) {
      const int n = col / pixels, pix = col - n * pixels, q = pix / pw.count, p = pix - q * pw.count;
      base = x + (int64_t(n) * s.cin + int64_t(group) * (s.cin / s.groups)) * H * W;
      ih0 = ph.in0 + q;
      iw0 = pw.in0 + p;
    }
  }
  __device__ void load(int k0, int k_end, T (&r)[BK]) const {
    // BEGIN SOLUTION
    // GOAL: r[i] = B[k0 + i][this thread's column] for i < BK: the input pixel that the phase's tap
    // GOAL: k0 + i reads for this output pixel, 0 when it lies outside x.
    // TODO: decode k = k0 + i into (ci, rr, ss) (k = (ci * R + rr) * S + ss: the phase's taps). Tap
    // TODO: (rr, ss) reads input (ih, iw) = (ih0 - rr * dh, iw0 - ss * dw) (whole by construction:
    // TODO: no division, no stride test): r[i] = x[n][ci][ih][iw] from `base` when in range
    // TODO: (0 <= ih < H, 0 <= iw < W), base is set and k < k_end; else 0.
    // TODO: Decode k0 once with divisions, then step (ss, rr, ci) with carries: divisions are slow.
    const int RS = R * S;
    int ci = k0 / RS, rs = k0 - ci * RS, rr = rs / S, ss = rs - rr * S;
#pragma unroll
    for (int i = 0; i < BK; ++i) {
      const int ih = ih0 - rr * dh, iw = iw0 - ss * dw;
      const bool ok = base != nullptr && k0 + i < k_end && ih >= 0 && iw >= 0 && ih < H && iw < W;
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

// Grid (ceil(N*ceil(Ho/sh)*ceil(Wo/sw) / 128), ceil(cout_g / 64), groups * phases), 128 threads:
// blockIdx.z = phase_local * groups + group, phase = phase0 + phase_local = a * stride_w + b. A
// 64-channel x 128-pixel tile of group `group`'s outputs (channels group * cout_g ..) in phase (a, b)
// (a block past the phase's pixels returns at once: phases other than (0, 0) may have fewer), bias
// added in the epilogue; at stride 1, 4 consecutive pixels of one row in one 16-byte store where aligned.
// K3 = 3 (stride 1, a 3 x 3 kernel: the benchmark's, ResNet's and UNet's) or 1 (a 1 x 1 kernel: version 3's
// products): the tap counts are constants, so the gather's carries and WeightA's division by the taps
// compile to constants and a multiply; read from the parameters, the counts were reloaded at each carry
// (H100: 0.53x -> 0.61x of cuDNN on the benchmark's shape, 0.44x -> 0.55x on 32x512x7x7).
template <typename T, bool kUnitStride, int K3 = 0>
// 4 blocks per SM (<= 128 registers; 3 blocks, <= 168 and no spills, ran the 2x2 stride-2 layers 10-20% slower)
__global__ void __launch_bounds__(kGemmThreads, 4)
    conv_transpose2d_kernel2(const T* __restrict__ x, const T* __restrict__ weight, const T* __restrict__ bias,
                             T* __restrict__ y, ConvTranspose2dShape s, int phase0) {
  // BEGIN OPEN
  // GOAL: the block's tile of one stride phase of one group of y (+ bias): an implicit GEMM over only that phase's taps,
  // GOAL: exact at every edge (Background: Version 2: an implicit GEMM, Stride phases).
  __shared__ Smem<T> sm;
  // (stride 1: one phase, blockIdx.z the group itself: a division less, and one register less across the
  // loop, where a group kept in a register pushed the tap counters out to reloads and cost 5-13%)
  const int phase = kUnitStride ? 0 : phase0 + static_cast<int>(blockIdx.z) / s.groups;
  const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
  const int group = kUnitStride ? static_cast<int>(blockIdx.z) : static_cast<int>(blockIdx.z) % s.groups;
  const Phase1D ph = kUnitStride ? unit_phase(s.ho, s.kh, s.pad_h, s.dil_h)
                                 : phase_1d(phase / s.stride_w, s.ho, s.kh, s.stride_h, s.pad_h, s.dil_h);
  const Phase1D pw = kUnitStride ? unit_phase(s.wo, s.kw, s.pad_w, s.dil_w)
                                 : phase_1d(phase % s.stride_w, s.wo, s.kw, s.stride_w, s.pad_w, s.dil_w);
  const int pixels = ph.count * pw.count, ncols = static_cast<int>(s.n) * pixels;
  if (n0 >= ncols) return;  // the whole block: before any barrier
  const int HWo = s.ho * s.wo, RS = s.kh * s.kw;
  const int cin_g = s.cin / s.groups, cout_g = s.cout / s.groups;
  T acc[8][8];
  // this group's weights: weight[group * cin_g .. (group + 1) * cin_g - 1], each (cout_g, kh, kw)
  const int first_tap = ph.taps * pw.taps > 0 ? ph.tap0 * s.kw + pw.tap0 : 0;  // (tap0 is -1 where no tap reaches)
  const int taps = K3 ? K3 * K3 : ph.taps * pw.taps;  // the phase's taps (a constant for K3)
  const WeightA<T, kUnitStride> la{weight + int64_t(group) * cin_g * cout_g * RS + first_tap, cout_g, RS, m0,
                                    taps, K3 ? K3 : pw.taps, ph.step * s.kw, pw.step};
  const GatherB<T, K3> lb(x, s, group, n0 + threadIdx.x, ph, pw);
  gemm_tile(la, lb, 0, cin_g * taps, sm, acc);  // no taps (a phase no tap reaches): the bias alone
  int64_t colbase[8];  // y's offset of column j's pixel in channel 0
  bool valid[8];
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const int col = n0 + col_of(j);
    valid[j] = col < ncols;
    const int n = valid[j] ? col / pixels : 0, pix = col - n * pixels, q = pix / pw.count, p = pix - q * pw.count;
    colbase[j] = int64_t(n) * s.cout * HWo + (ph.first + q * s.stride_h) * s.wo + pw.first + p * s.stride_w;
  }
  // 4 neighbouring columns are 4 neighbouring pixels of a row only at stride 1 (and HWo % 4 == 0)
  const bool vec_ok = s.stride_h == 1 && s.stride_w == 1 && HWo % 4 == 0 && course::is_aligned_for<course::Vec<T, 4>>(y);
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
  // END OPEN
}

// ---------------------------------------------------------------- version 3: Winograd F(4x4, 3x3)
// At stride 1 a 3 x 3 transposed convolution is a correlation of x with the flipped filters (channel
// axes swapped), padded by pc = 2 - padding (a negative pc crops). Winograd's minimal filtering
// computes a 4 x 4 tile of that output from the 6 x 6 tile d of input under it with 36 multiplications
// per (ci, co) instead of 144:
//     y_tile = A^T [ (G g G^T) o (B^T d B) ] A        (o: element by element)
// with these constant matrices (Lavin and Gray, 2016; interpolation points 0, +-1, +-2 and infinity):
//
//           [ 4  0 -5  0  1  0 ]          [  1/4    0     0   ]
//           [ 0 -4 -4  1  1  0 ]          [ -1/6  -1/6  -1/6  ]          [ 1  1  1  1  1  0 ]
//     B^T = [ 0  4 -4 -1  1  0 ]     G =  [ -1/6   1/6  -1/6  ]   A^T =  [ 0  1 -1  2 -2  0 ]
//           [ 0 -2 -1  2  1  0 ]          [ 1/24  1/12  1/6   ]          [ 0  1  1  4  4  0 ]
//           [ 0  2 -1 -2  1  0 ]          [ 1/24 -1/12  1/6   ]          [ 0  1 -1  8 -8  1 ]
//           [ 0  4  0 -5  0  1 ]          [   0     0     1   ]
//
// Summed over ci, the element-by-element products are 36 matrix products, one per position xi of the 6 x 6:
//     M[xi] (cout_g x tiles) = U[xi]^T (cout_g x cin_g) V[xi] (cin_g x tiles), per group,
// which kernel 2 runs as one grouped 1 x 1 transposed convolution (36 groups per group of the layer).
// Three transforms around it, each a thread per (channel, tile), tiles fastest (coalesced):
// U = G g G^T (the filters, once per call), V = B^T d B (every input tile), y = A^T M A (+ bias). Each
// is one small matrix applied to the columns of a tile, then to its rows: the helpers below.
// In float32 the 1/6, 1/12, 1/24 of G and the 4s and 8s of A^T cost accuracy: about 2e-6 normwise
// relative error on 07's layers, against 2e-7 for the direct sum (the tolerance is 1e-5).
constexpr int kWinoThreads = 128;

// G v for a column of 3 filter taps: 6 values (the weight transform's columns, then its rows).
template <typename T>
__device__ __forceinline__ void winograd_g(const T (&g)[3], T (&o)[6]) {
  // BEGIN OPEN
  // GOAL: o = G g for a column of 3 taps (README: Version 3: Winograd).
  // BEGIN SOLUTION
  // GOAL: o = G g, G the 6 x 3 matrix above.
  // TODO: one line per row of G: o[0] = g[0] / 4, o[1] = -(g[0] + g[1] + g[2]) / 6, and so on (divide, as
  // TODO: written: multiplying by a rounded 1/6 costs accuracy in float32).
  o[0] = g[0] / 4;
  o[1] = -(g[0] + g[1] + g[2]) / 6;
  o[2] = -(g[0] - g[1] + g[2]) / 6;
  o[3] = g[0] / 24 + g[1] / 12 + g[2] / 6;
  o[4] = g[0] / 24 - g[1] / 12 + g[2] / 6;
  o[5] = g[2];
  // END SOLUTION
  // END OPEN
}

// U[xi][ci][co] = (G g G^T)[xi] for g = w[ci][co] flipped: the grouped 1 x 1 weight (36 cin, cout_g).
// It runs first, so it also clears the tiles' non-finite flags (the input transform sets them).
template <typename T>
__global__ void winograd_weight_kernel(const T* __restrict__ w, T* __restrict__ U, int cin, int cout_g,
                                       T* __restrict__ flags, int64_t tiles) {
  // BEGIN OPEN
  // GOAL: U = G g G^T for every (ci, co) of the flipped weight, and the tiles' flags cleared (Version 3: Winograd).
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < tiles) flags[i] = T(0);
  if (i >= int64_t(cin) * cout_g) return;
  const T* f = w + i * 9;  // w[ci][co], 3 x 3; i = ci cout_g + co
  T t[3][6];  // G g, column by column: t[c] = G (column c of the flipped g)
#pragma unroll
  for (int c = 0; c < 3; ++c) {
    const T col[3] = {f[2 * 3 + 2 - c], f[1 * 3 + 2 - c], f[0 * 3 + 2 - c]};  // g[r][c] = f[2 - r][2 - c]
    winograd_g(col, t[c]);
  }
  const int64_t plane = int64_t(cin) * cout_g;
#pragma unroll
  for (int a = 0; a < 6; ++a) {  // row a of G g, times G^T
    const T row[3] = {t[0][a], t[1][a], t[2][a]};
    T u[6];
    winograd_g(row, u);
#pragma unroll
    for (int b = 0; b < 6; ++b) U[(a * 6 + b) * plane + i] = u[b];
  }
  // END OPEN
}

// B^T v for a column of 6 (the same code transforms the columns, then the rows).
template <typename T>
__device__ __forceinline__ void winograd_bt(const T (&d)[6], T (&o)[6]) {
  // BEGIN OPEN
  // GOAL: o = B^T d for a column of 6 (Version 3: Winograd).
  // BEGIN SOLUTION
  // GOAL: o = B^T d, B^T the 6 x 6 matrix above.
  // TODO: one line per row of B^T, its zeros left out: o[0] = 4 d[0] - 5 d[2] + d[4], and so on.
  o[0] = 4 * d[0] - 5 * d[2] + d[4];
  o[1] = -4 * d[1] - 4 * d[2] + d[3] + d[4];
  o[2] = 4 * d[1] - 4 * d[2] - d[3] + d[4];
  o[3] = -2 * d[1] - d[2] + 2 * d[3] + d[4];
  o[4] = 2 * d[1] - d[2] - 2 * d[3] + d[4];
  o[5] = 4 * d[1] - 5 * d[3] + d[5];
  // END SOLUTION
  // END OPEN
}

// V[xi][ci][t] = (B^T d B)[xi], d the 6 x 6 input tile of tile t (image n, tile row ty, column tx) in
// channel ci, zeros outside x. Tile t = (n th + ty) tw + tx covers outputs 4 ty .. 4 ty + 3 (rows).
template <typename T>
__global__ void winograd_input_kernel(const T* __restrict__ x, T* __restrict__ V, T* __restrict__ flags,
                                      ConvTranspose2dShape s, int pc_h, int pc_w, int th, int tw) {
  // BEGIN OPEN
  // GOAL: V = B^T d B for every input tile and channel, zeros outside x; a tile's flag set when its input is not finite
  // GOAL: (Version 3: Winograd).
  const int64_t tiles = s.n * th * tw;
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= tiles * s.cin) return;
  const int ci = int(i / tiles);
  const int64_t t = i - ci * tiles;
  const int64_t n = t / (th * tw);
  const int tt = int(t - n * th * tw);
  const int y0 = (tt / tw) * 4 - pc_h, x0 = (tt % tw) * 4 - pc_w;
  const T* src = x + (n * s.cin + ci) * s.h * s.w;
  T cols[6][6];  // B^T d, column by column
  bool finite = true;
#pragma unroll
  for (int c = 0; c < 6; ++c) {
    T col[6];
    const int xx = x0 + c;
#pragma unroll
    for (int r = 0; r < 6; ++r) {
      const int yy = y0 + r;
      col[r] = yy >= 0 && yy < s.h && xx >= 0 && xx < s.w ? src[yy * s.w + xx] : T(0);
      finite = finite && isfinite(col[r]);
    }
    winograd_bt(col, cols[c]);
  }
  if (!finite) flags[t] = T(1);  // any channel's thread may set it: all write the same
  const int64_t plane = int64_t(s.cin) * tiles;
  T* out = V + i;  // V[0][ci][t]: i = ci tiles + t
#pragma unroll
  for (int r = 0; r < 6; ++r) {  // row r of B^T d, times B
    T row[6], o[6];
#pragma unroll
    for (int c = 0; c < 6; ++c) row[c] = cols[c][r];
    winograd_bt(row, o);
#pragma unroll
    for (int c = 0; c < 6; ++c) out[(r * 6 + c) * plane] = o[c];
  }
  // END OPEN
}

// A^T v for a column of 6: 4 values.
template <typename T>
__device__ __forceinline__ void winograd_at(const T (&m)[6], T (&o)[4]) {
  // BEGIN OPEN
  // GOAL: o = A^T m for a column of 6 (Version 3: Winograd).
  // BEGIN SOLUTION
  // GOAL: o = A^T m, A^T the 4 x 6 matrix above.
  // TODO: the rows of A^T share sums and differences: with s1 = m[1] + m[2], d1 = m[1] - m[2],
  // TODO: s2 = m[3] + m[4], d2 = m[3] - m[4]: o[0] = m[0] + s1 + s2, o[1] = d1 + 2 d2, and so on.
  const T s1 = m[1] + m[2], d1 = m[1] - m[2], s2 = m[3] + m[4], d2 = m[3] - m[4];
  o[0] = m[0] + s1 + s2;
  o[1] = d1 + 2 * d2;
  o[2] = s1 + 4 * s2;
  o[3] = d1 + 8 * d2 + m[5];
  // END SOLUTION
  // END OPEN
}

// A tile whose input holds a NaN or an infinity: the transforms would spread it to outputs that never
// read it (and turn an inf into NaN), so its outputs are the direct sum instead, as the definition
// gives them: y[oy][ox] = bias + sum over ci of its group and taps (a, b) of x[oy + p - a][ox + p - b] w[a][b].
template <typename T>
__device__ void winograd_direct_tile(const T* __restrict__ x, const T* __restrict__ w, T b, T* __restrict__ dst,
                                     const ConvTranspose2dShape& s, int64_t n, int co, int y0, int x0) {
  // BEGIN OPEN
  // GOAL: the direct sum for one 4 x 4 output tile (+ bias), inside y only (Version 3: Winograd, non-finite inputs).
  const int cin_g = s.cin / s.groups, cout_g = s.cout / s.groups, g = co / cout_g;
  for (int r = 0; r < 4 && y0 + r < s.ho; ++r)
    for (int c = 0; c < 4 && x0 + c < s.wo; ++c) {
      T acc = b;
      for (int ci = g * cin_g; ci < (g + 1) * cin_g; ++ci) {
        const T* xc = x + (n * s.cin + ci) * s.h * s.w;
        const T* wc = w + (int64_t(ci) * cout_g + (co - g * cout_g)) * 9;
        for (int a = 0; a < 3; ++a) {
          const int iy = y0 + r + s.pad_h - a;
          if (iy < 0 || iy >= s.h) continue;
          for (int bb = 0; bb < 3; ++bb) {
            const int ix = x0 + c + s.pad_w - bb;
            if (ix >= 0 && ix < s.w) acc += xc[iy * s.w + ix] * wc[a * 3 + bb];
          }
        }
      }
      dst[(y0 + r) * s.wo + x0 + c] = acc;
    }
  // END OPEN
}

// y's 4 x 4 tile t of channel co = A^T M A + bias[co], M[xi][co][t]; only what lies inside y is written.
template <typename T>
__global__ void winograd_output_kernel(const T* __restrict__ M, const T* __restrict__ flags, const T* __restrict__ x,
                                       const T* __restrict__ w, const T* __restrict__ bias, T* __restrict__ y,
                                       ConvTranspose2dShape s, int th, int tw) {
  // BEGIN OPEN
  // GOAL: y's tile = A^T M A + bias where its input was finite, the direct sum otherwise; only inside y.
  const int64_t tiles = s.n * th * tw;
  const int64_t i = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= tiles * s.cout) return;
  const int co = int(i / tiles);
  const int64_t t = i - co * tiles;
  const int64_t n = t / (th * tw);
  const int tt = int(t - n * th * tw);
  const int y0 = (tt / tw) * 4, x0 = (tt % tw) * 4;
  const T b = bias ? bias[co] : T(0);
  T* dst = y + (n * s.cout + co) * s.ho * s.wo;
  if (flags[t] != T(0)) {
    winograd_direct_tile(x, w, b, dst, s, n, co, y0, x0);
    return;
  }
  const int64_t plane = int64_t(s.cout) * tiles;
  const T* in = M + i;  // M[0][co][t]
  T cols[6][4];  // A^T M, column by column
#pragma unroll
  for (int c = 0; c < 6; ++c) {
    T col[6];
#pragma unroll
    for (int r = 0; r < 6; ++r) col[r] = in[(r * 6 + c) * plane];
    winograd_at(col, cols[c]);
  }
#pragma unroll
  for (int r = 0; r < 4; ++r) {  // row r of A^T M, times A
    if (y0 + r >= s.ho) break;
    T row[6], o[4];
#pragma unroll
    for (int c = 0; c < 6; ++c) row[c] = cols[c][r];
    winograd_at(row, o);
#pragma unroll
    for (int c = 0; c < 4; ++c)
      if (x0 + c < s.wo) dst[(y0 + r) * s.wo + x0 + c] = o[c] + b;
  }
  // END OPEN
}

}  // namespace

template <typename scalar_t>
void conv_transpose2d_cuda(const scalar_t* x, const scalar_t* weight, const scalar_t* bias, scalar_t* y,
                           const ConvTranspose2dShape& s, int version, cudaStream_t stream) {
  // BEGIN OPEN
  // GOAL: run the version the caller asks for on `stream` over every output: version 1 over every element; version 2
  // GOAL: over every tile of every group and stride phase (several launches past gridDim.z's limit); report a failed launch.
  const int64_t total = s.n * s.cout * s.ho * s.wo;
  if (total == 0) return;  // a grid of 0 blocks is an error
  if (version == 1) {
    course::took<scalar_t>("v1");  // (planner paths: course/paths.h)
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
  // (planner paths: course/paths.h) version 2's kernel for the stride phases and the filter; launches of phases
  course::took<scalar_t>(s.stride_h * s.stride_w > 1 ? "v2.phases" : s.kh == 3 && s.kw == 3 ? "v2.3x3"
                         : s.kh == 1 && s.kw == 1 ? "v2.1x1" : "v2.one_phase");
  if (s.groups > 1) course::took<scalar_t>("v2.grouped");
  if (s.stride_h * s.stride_w > std::max(1, 65535 / s.groups)) course::took<scalar_t>("v2.phase_launches");
  // BEGIN SOLUTION
  // GOAL: run conv_transpose2d_kernel2 over every 64 x 128 tile of every group's part of every stride
  // GOAL: phase of y on `stream`, in several launches where groups x phases pass gridDim.z's limit
  // GOAL: (65535); report a failed launch.
  // TODO: phases = stride_h * stride_w; phase (0, 0) has the most pixels: N * ceil(Ho / stride_h) *
  // TODO: ceil(Wo / stride_w). Launch conv_transpose2d_kernel2<scalar_t> on `stream` with kGemmThreads
  // TODO: threads and a grid of (ceil(those pixels / BN), ceil(cout / groups / BM), groups * np) blocks
  // TODO: for phases phase0 .. phase0 + np - 1, np as large as gridDim.z (65535) allows, until every
  // TODO: phase is launched (<scalar_t, true> where both strides are 1: one phase, no tap arithmetic;
  // TODO: <scalar_t, true, 3> where the kernel is also 3 x 3, <scalar_t, true, 1> where it is 1 x 1: its
  // TODO: tap counts as constants);
  // TODO: check each launch with C10_CUDA_KERNEL_LAUNCH_CHECK().
  // STUB: TORCH_CHECK(false, "conv_transpose2d_cuda, version 2 (conv_transpose2d.cu) is not implemented yet");
  const int phases = s.stride_h * s.stride_w;
  const int pixels = static_cast<int>(s.n) * course::ceil_div(s.ho, s.stride_h) * course::ceil_div(s.wo, s.stride_w);
  const int per_launch = std::max(1, 65535 / s.groups);  // phases a launch's gridDim.z holds
  for (int phase0 = 0; phase0 < phases; phase0 += per_launch) {
    const int np = std::min(per_launch, phases - phase0);
    const dim3 grid(course::ceil_div(pixels, BN), course::ceil_div(s.cout / s.groups, BM), s.groups * np);
    if (phases == 1 && s.kh == 3 && s.kw == 3) {
      conv_transpose2d_kernel2<scalar_t, true, 3><<<grid, kGemmThreads, 0, stream>>>(x, weight, bias, y, s, phase0);
    } else if (phases == 1 && s.kh == 1 && s.kw == 1) {  // 1 x 1: version 3's products among them
      conv_transpose2d_kernel2<scalar_t, true, 1><<<grid, kGemmThreads, 0, stream>>>(x, weight, bias, y, s, phase0);
    } else if (phases == 1) {
      conv_transpose2d_kernel2<scalar_t, true><<<grid, kGemmThreads, 0, stream>>>(x, weight, bias, y, s, phase0);
    } else {
      conv_transpose2d_kernel2<scalar_t, false><<<grid, kGemmThreads, 0, stream>>>(x, weight, bias, y, s, phase0);
    }
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }
  // END SOLUTION
  // END OPEN
}

// Version 3's tiles: ceil(ho / 4) x ceil(wo / 4) per image.
int64_t winograd_tiles(const ConvTranspose2dShape& s) {
  return s.n * course::ceil_div(s.ho, 4) * course::ceil_div(s.wo, 4);
}

// A thread per item (the transforms do not loop): enough blocks for all of them.
unsigned wino_blocks(int64_t items) {
  return static_cast<unsigned>(course::ceil_div<int64_t>(items, kWinoThreads));
}

int64_t conv_transpose2d_workspace3(const ConvTranspose2dShape& s) {
  return 36 * (int64_t(s.cin) * (s.cout / s.groups) + (int64_t(s.cin) + s.cout) * winograd_tiles(s)) + winograd_tiles(s);
}

template <typename scalar_t>
void conv_transpose2d_winograd_cuda(const scalar_t* x, const scalar_t* weight, const scalar_t* bias, scalar_t* y,
                                    const ConvTranspose2dShape& s, scalar_t* workspace, cudaStream_t stream) {
  // BEGIN OPEN
  // GOAL: version 3 on `stream`: the weight and input transforms, the 36 grouped products by version 2's launcher, the
  // GOAL: output transform; report a failed launch (Version 3: Winograd).
  const int64_t tiles = winograd_tiles(s);
  if (tiles == 0 || s.cout == 0) return;
  course::took<scalar_t>("v3.winograd");  // (planner paths: course/paths.h)
  if (s.groups > 1) course::took<scalar_t>("v3.grouped");
  const int th = course::ceil_div(s.ho, 4), tw = course::ceil_div(s.wo, 4), cout_g = s.cout / s.groups;
  scalar_t* U = workspace;                      // (36, cin, cout_g)
  scalar_t* V = U + 36 * int64_t(s.cin) * cout_g;  // (36, cin, tiles)
  scalar_t* M = V + 36 * int64_t(s.cin) * tiles;   // (36, cout, tiles)
  scalar_t* flags = M + 36 * int64_t(s.cout) * tiles;  // (tiles): 1 where the input tile is not all finite
  winograd_weight_kernel<scalar_t><<<wino_blocks(std::max(int64_t(s.cin) * cout_g, tiles)), kWinoThreads, 0,
                                     stream>>>(weight, U, s.cin, cout_g, flags, tiles);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  if (s.cin > 0) {  // no input channels: no tiles to transform (a grid of 0 blocks is an error); y = bias
    winograd_input_kernel<scalar_t><<<wino_blocks(tiles * s.cin), kWinoThreads, 0, stream>>>(
        x, V, flags, s, 2 - s.pad_h, 2 - s.pad_w, th, tw);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }
  // BEGIN SOLUTION
  // GOAL: M = the 36 products per group, by version 2's launcher: a grouped 1 x 1 transposed
  // GOAL: convolution of V (one image of 36 cin channels, 1 x tiles pixels) by U, into M.
  // TODO: a ConvTranspose2dShape p{} of one image: cin 36 s.cin, h 1, w tiles, cout 36 s.cout, 1 x 1
  // TODO: kernel, output 1 x tiles, stride and dilation 1, no padding, groups 36 s.groups (U, V and M
  // TODO: are (36, channels, ...): the product's group xi groups + g is position xi of the layer's group g).
  // TODO: Then conv_transpose2d_cuda<scalar_t>(V, U, nullptr, M, p, 2, stream) (the bias comes last).
  // STUB: TORCH_CHECK(false, "conv_transpose2d_winograd_cuda, the products (conv_transpose2d.cu) are not implemented yet");
  ConvTranspose2dShape p{};
  p.n = 1;
  p.cin = 36 * s.cin;
  p.h = 1;
  p.w = static_cast<int>(tiles);
  p.cout = 36 * s.cout;
  p.kh = p.kw = 1;
  p.ho = 1;
  p.wo = static_cast<int>(tiles);
  p.stride_h = p.stride_w = p.dil_h = p.dil_w = 1;
  p.pad_h = p.pad_w = 0;
  p.groups = 36 * s.groups;
  conv_transpose2d_cuda<scalar_t>(V, U, nullptr, M, p, 2, stream);
  // END SOLUTION
  winograd_output_kernel<scalar_t><<<wino_blocks(tiles * s.cout), kWinoThreads, 0, stream>>>(
      M, flags, x, weight, bias, y, s, th, tw);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  // END OPEN
}

// The binding file dispatches on dtype; these are the types it may ask for.
#define INSTANTIATE(T)                                                                                \
  template void conv_transpose2d_cuda<T>(const T*, const T*, const T*, T*, const ConvTranspose2dShape&, int, \
                                         cudaStream_t);                                                 \
  template void conv_transpose2d_winograd_cuda<T>(const T*, const T*, const T*, T*, const ConvTranspose2dShape&, \
                                                  T*, cudaStream_t);
INSTANTIATE(float)
INSTANTIATE(double)
