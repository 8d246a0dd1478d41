// Exercise 08: Conv2d + BatchNorm2d (eval) + ReLU in one kernel: a tiled implicit-GEMM convolution
// whose epilogue applies BatchNorm, folded into a per-channel scale and shift, and the ReLU. Version 1
// (conv_bn_relu_kernel) in strict fp32 (and float64); version 2 (conv_bn_relu_tf32_kernel) the same
// layer on TF32 tensor cores, the BatchNorm and ReLU applied to the accumulator fragments.
//
// This file includes no PyTorch tensor headers, so editing it recompiles quickly.
// Tensors, checks and op registration live in conv_bn_relu_inference.cpp.
#include <cstdint>
#include <type_traits>

#include <course/cuda.cuh>
#include <course/tf32_conv.cuh>

#include "conv_bn_relu_inference.h"

namespace {

// ------------------------------------------------------------------ the implicit-GEMM engine
// The convolution is a GEMM, C[M x Ncol] = A[M x Kred] * B[Kred x Ncol], whose operands
// are gathered from tensors by "loaders" and never materialised (no im2col buffer):
//   M = out channels, Ncol = N*P*Q output pixels, Kred = C*R*S
// A block of 128 threads computes a 64 x 128 tile of C; thread (ty, tx) = (tid / 16, tid % 16)
// owns 8 x 8 outputs: rows ty*4 + {0..3} and 32 + ty*4 + {0..3}, columns tx*4 + {0..3} and
// 64 + tx*4 + {0..3} (two groups of 4, so the float4 shared-memory reads are conflict-free).
constexpr int BM = 64, BN = 128, BK = 8, kThreads = 128;
constexpr int kAStride = BM + 4, kBStride = BN + 4;  // padded rows: transposed stores hit 32 banks
[[maybe_unused]] constexpr int kRowsPerPass = kThreads / BK;           // A loaders: 16 rows per pass, 4 passes

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

// NaN stays NaN, as in torch.relu (a comparison with NaN is false, so v passes through).
template <typename T>
__device__ __forceinline__ T relu(T v) {
  // BEGIN OPEN
  // GOAL: ReLU that keeps NaN as torch.relu does.
  // STUB: return {};
  return v < T(0) ? T(0) : v;
  // END OPEN
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

// Loaders come in two thread mappings. "By k" (the weights): thread t loads rows t/8 + 16i (i < 4)
// at reduction index t%8. "By column" (B operands): thread t loads column t at all 8 reduction
// indices, so its column's decoding (image, pixel) is done once per block, not per slice.
template <typename T>
struct ByK {
  static constexpr int kRegs = BM * BK / kThreads;
  __device__ static void store(T (&s)[BK][kAStride], const T (&r)[kRegs]) {
#pragma unroll
    for (int i = 0; i < kRegs; ++i) s[threadIdx.x % BK][threadIdx.x / BK + i * kRowsPerPass] = r[i];
  }
};
template <typename T>
struct ByColumn {
  static constexpr int kRegs = BK;
  static_assert(BN == kThreads, "one column per thread");
  __device__ static void store(T (&s)[BK][kBStride], const T (&r)[kRegs]) {
#pragma unroll
    for (int i = 0; i < kRegs; ++i) s[i][threadIdx.x] = r[i];
  }
};

// forward A[k_out][(c, r, s)] = w[k_out][c][r][s]: the filters as a row-major [K x C*R*S] matrix.
template <typename T>
struct FwdWeightA : ByK<T> {
  const T* w;
  int rows, ld, m0;
  __device__ void load(int k0, int k_end, T (&r)[ByK<T>::kRegs]) const {
    // BEGIN OPEN
    // GOAL: r = the weight matrix's A[rows of this thread][k], 0 past `rows` and k_end (Background: Implicit GEMM).
    const int k = k0 + threadIdx.x % BK;
#pragma unroll
    for (int i = 0; i < ByK<T>::kRegs; ++i) {
      const int m = m0 + threadIdx.x / BK + i * kRowsPerPass;
      r[i] = (k < k_end && m < rows) ? w[m * ld + k] : T(0);
    }
    // END OPEN
  }
};

// forward B[(c, r, s)][(n, p, q)] = x[n][c][p*sh - ph + r*dh][q*sw - pw + s*dw] (0 in the padding).
template <typename T>
struct Im2colB : ByColumn<T> {
  const T* base;  // x + n*C*H*W for this thread's column; nullptr past the last column
  int h0, w0;     // p*sh - ph, q*sw - pw
  int H, W, R, S, RS, dh, dw;
  __device__ Im2colB(const T* x, const ConvShape& s, int col, int ncols) {
    // BEGIN OPEN
    // GOAL: the loader's state for column `col`: its image's base in x and the top-left input pixel of its output pixel
    // GOAL: (nullptr past ncols), decoded once so that load() does no divisions (Background: Index decoding is the hidden cost).
    H = s.H; W = s.W; R = s.R; S = s.S; RS = s.R * s.S; dh = s.dil_h; dw = s.dil_w;
    base = nullptr;
    h0 = w0 = 0;
    if (col < ncols) {
      const int PQ = s.P * s.Q, n = col / PQ, pq = col - n * PQ, p = pq / s.Q, q = pq - p * s.Q;
      base = x + n * (s.C * H * W);
      h0 = p * s.stride_h - s.pad_h;
      w0 = q * s.stride_w - s.pad_w;
    }
    // END OPEN
  }
  __device__ void load(int k0, int k_end, T (&r)[BK]) const {
    // BEGIN SOLUTION
    // GOAL: r[i] = the im2col matrix's B[k0 + i][this thread's column] for i < BK, 0 outside it and in
    // GOAL: the padding.
    // TODO: r[i] = B[k0 + i][this thread's column] for i < BK: decode k = k0 + i into (c, r, s)
    // TODO: (k = (c * R + r) * S + s), read x at (c, h0 + r*dh, w0 + s*dw) from `base`, and use 0
    // TODO: when base is nullptr, k >= k_end, or the pixel falls in the padding (outside H x W).
    // TODO: Decode k0 once with divisions, then step (s, r, c) with carries: divisions are slow.
    int c = k0 / RS, rs = k0 - c * RS, rr = rs / S, ss = rs - rr * S;
#pragma unroll
    for (int i = 0; i < BK; ++i) {
      const int h = h0 + rr * dh, w = w0 + ss * dw;
      const bool ok = base != nullptr && k0 + i < k_end && unsigned(h) < unsigned(H) && unsigned(w) < unsigned(W);
      r[i] = ok ? base[(c * H + h) * W + w] : T(0);
      if (++ss == S) {
        ss = 0;
        if (++rr == R) {
          rr = 0;
          ++c;
        }
      }
    }
    // END SOLUTION
  }
};

// Stores 4 consecutive columns of one row: one 16-byte store when they are one aligned run.
template <typename T>
__device__ __forceinline__ void store4(T* out, const int (&colbase)[8], const bool (&valid)[8], int g, int row_offset,
                                       const T (&v)[4], bool vec_ok) {
  // BEGIN OPEN
  // GOAL: 4 consecutive columns of one row into `out` where valid: one 16-byte store when they are one aligned run.
  if (vec_ok && valid[4 * g + 3]) {
    course::Vec<T, 4> pack;
#pragma unroll
    for (int j = 0; j < 4; ++j) pack.v[j] = v[j];
    *reinterpret_cast<course::Vec<T, 4>*>(out + colbase[4 * g] + row_offset) = pack;
  } else {
#pragma unroll
    for (int j = 0; j < 4; ++j)
      if (valid[4 * g + j]) out[colbase[4 * g + j] + row_offset] = v[j];
  }
  // END OPEN
}

// BatchNorm in eval mode (and the conv's bias) as an affine map of channel m's convolution: both
// versions' kernels call this once per channel of their tile.
template <typename T>
__device__ __forceinline__ void fold_bn(int m, const T* __restrict__ bias, const T* __restrict__ gamma,
                                        const T* __restrict__ beta, const T* __restrict__ running_mean,
                                        const T* __restrict__ running_var, T eps, T& scale, T& shift) {
  // BEGIN OPEN
  // GOAL: scale and shift of channel m: BatchNorm (eval) and the bias folded into one affine map (Background).
  // BEGIN SOLUTION
  // GOAL: scale and shift of channel m such that scale * conv + shift = BatchNorm(conv + bias).
  // TODO: fold BatchNorm (and the conv's bias, which may be nullptr) into scale and shift so that
  // TODO: scale * conv + shift == gamma * (conv + bias - running_mean) / sqrt(running_var + eps) + beta.
  const T b = bias != nullptr ? bias[m] : T(0);
  scale = gamma[m] / sqrt(running_var[m] + eps);
  shift = beta[m] + (b - running_mean[m]) * scale;
  // END SOLUTION
  // END OPEN
}

// ------------------------------------------------------------------------ version 1: the kernel
// Grid (ceil(N*P*Q / 128), ceil(K / 64)), 128 threads: one 64-channel x 128-pixel tile of y.
// BatchNorm in eval mode is an affine map per channel, so it folds into a scale and a shift applied
// to the accumulators in registers: y goes to memory once, and no intermediate tensor exists.
template <typename T>
__global__ void __launch_bounds__(kThreads, 4)  // 4 blocks per SM: <= 128 registers
    conv_bn_relu_kernel(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ bias, ConvShape s,
                        const T* __restrict__ gamma, const T* __restrict__ beta, const T* __restrict__ running_mean,
                        const T* __restrict__ running_var, T eps, T* __restrict__ y) {
  // BEGIN OPEN
  // GOAL: y = relu(BatchNorm(conv(x, w) + bias)) for the block's 64 x 128 tile (fp32 or float64, exact at every edge,
  // GOAL: C*R*S = 0 included), BatchNorm folded per channel and applied to the accumulators in registers, y written once,
  // GOAL: 16-byte stores where aligned (Background: Implicit GEMM, Tiling and register blocking, The epilogue).
  __shared__ Smem<T> sm;
  __shared__ T tile_scale[BM], tile_shift[BM];
  const int m0 = blockIdx.y * BM, n0 = blockIdx.x * BN;
  const int K = s.K, PQ = s.P * s.Q, ncols = s.N * PQ, CRS = s.C * s.R * s.S;
  if (threadIdx.x < BM) {
    const int m = m0 + threadIdx.x;
    T scale = T(0), shift = T(0);
    if (m < K) fold_bn(m, bias, gamma, beta, running_mean, running_var, eps, scale, shift);
    tile_scale[threadIdx.x] = scale;
    tile_shift[threadIdx.x] = shift;
  }
  __syncthreads();  // publishes the tile_* arrays: gemm_tile has no barrier when C * R * S == 0
  T acc[8][8];
  const FwdWeightA<T> la{{}, w, K, CRS, m0};
  const Im2colB<T> lb(x, s, n0 + threadIdx.x, ncols);
  gemm_tile(la, lb, 0, CRS, sm, acc);

  // epilogue: output offsets of this thread's 8 columns
  int colbase[8];
  bool valid[8];
#pragma unroll
  for (int j = 0; j < 8; ++j) {
    const int col = n0 + col_of(j);
    valid[j] = col < ncols;
    const int n = valid[j] ? col / PQ : 0;
    colbase[j] = n * K * PQ + (col - n * PQ);
  }
  const bool vec_ok = PQ % 4 == 0 && course::is_aligned_for<course::Vec<T, 4>>(y);
#pragma unroll
  for (int i = 0; i < 8; ++i) {
    const int mi = row_of(i), m = m0 + mi;
    if (m >= K) continue;
    T v[8];
    // BEGIN SOLUTION
    // GOAL: v[j] = ReLU(BatchNorm(acc[i][j])) for this row.
    // TODO: v[j] = relu(BatchNorm of accumulator acc[i][j]), with this row's tile_scale and tile_shift.
    const T scale = tile_scale[mi], shift = tile_shift[mi];
#pragma unroll
    for (int j = 0; j < 8; ++j) v[j] = relu(acc[i][j] * scale + shift);
    // END SOLUTION
    store4(y, colbase, valid, 0, m * PQ, {v[0], v[1], v[2], v[3]}, vec_ok);
    store4(y, colbase, valid, 1, m * PQ, {v[4], v[5], v[6], v[7]}, vec_ok);
  }
  // END OPEN
}

// --------------------------------------------------------------- version 2: TF32 tensor cores
// The same layer with the convolution's products on tensor cores (compute capability 8.0 and newer).
// The GEMM engine is given: course/tf32_conv.cuh, exercise 06's version 3 (which explains the
// instruction, its fragments, the cp.async ring and the swizzle) with a 64-channel tile and K in the
// weight's own order, shared with 09. It computes the GEMM transposed against version 1's: rows are output
// pixels, columns output channels (Y[m][co]), so that a lane's accumulators hold 4 neighbouring pixels
// of a channel (one 16-byte store). The epilogue is this exercise's: BatchNorm and the ReLU on the
// accumulator fragments, in registers, then y's one write.
using namespace course::tf32_conv;  // kTc*, kWarp*, kMTiles, kNTiles, TcStage, tc_conv_gemm

// y[n][co][pixel m + r] = v[r] for r < 4 and m + r < M: one 16-byte store when vec_ok (P*Q % 4 == 0, so
// the 4 pixels from m, a multiple of 4, lie in one image, 16-byte aligned), else one by one.
__device__ __forceinline__ void store_pixels4(float* __restrict__ out, const ConvShape& s, int m, int co, int M,
                                              const float (&v)[4], bool vec_ok) {
  // BEGIN OPEN
  // GOAL: the 4 pixels from m of channel co into y, inside M only: one 16-byte store when vec_ok.
  const int PQ = s.P * s.Q;
  if (vec_ok) {
    const int n = m / PQ;
    *reinterpret_cast<course::Vec<float, 4>*>(out + (int64_t(n) * s.K + co) * PQ + (m - n * PQ)) = {{v[0], v[1], v[2], v[3]}};
  } else {
#pragma unroll
    for (int r = 0; r < 4; ++r) {
      const int mr = m + r;
      if (mr >= M) break;
      const int n = mr / PQ;
      out[(int64_t(n) * s.K + co) * PQ + (mr - n * PQ)] = v[r];
    }
  }
  // END OPEN
}

// Version 2: grid (ceil(N*P*Q / 128), ceil(K / 64)), 128 threads (4 warps): a 128-pixel x 64-channel
// tile of y; warp w computes pixels 64 (w / 2) .. + 63 x channels 32 (w % 2) .. + 31 of it.
// 3 blocks per SM (<= 168 registers): it needs about 136, and capped at 128 (4 blocks) it spills.
template <bool kVecB>
__global__ void __launch_bounds__(kTcThreads, 3)
    conv_bn_relu_tf32_kernel(const float* __restrict__ x, const float* __restrict__ w, const float* __restrict__ bias,
                             ConvShape s, const float* __restrict__ gamma, const float* __restrict__ beta,
                             const float* __restrict__ running_mean, const float* __restrict__ running_var, float eps,
                             float* __restrict__ y) {
  // BEGIN OPEN
  // GOAL: version 2's tile: the given TF32 engine's accumulators, then BatchNorm and ReLU on the fragments in registers
  // GOAL: and y written once, 16-byte stores where aligned (Background: Version 2: TF32 tensor cores).
  __shared__ __align__(128) TcStage ring[kTcStages];
  __shared__ float tile_scale[kTcChannels], tile_shift[kTcChannels];
  const int m0 = blockIdx.x * kTcPixels, co0 = blockIdx.y * kTcChannels;
  const int M = s.N * s.P * s.Q;
  if (threadIdx.x < kTcChannels) {
    float scale = 0.0f, shift = 0.0f;
    if (co0 + threadIdx.x < s.K)
      fold_bn(co0 + int(threadIdx.x), bias, gamma, beta, running_mean, running_var, eps, scale, shift);
    tile_scale[threadIdx.x] = scale;
    tile_shift[threadIdx.x] = shift;
  }
  // (tc_conv_gemm passes a barrier, whatever C*R*S: it publishes tile_scale and tile_shift)
  float acc[kMTiles][kNTiles][4];
  tc_conv_gemm<kVecB>(x, w, s, m0, co0, ring, acc);

  // Epilogue. With 06's renumbered pixels, lane (g, t) = (lane / 4, lane % 4) holds, for channel
  // co0 + wn0 + 8 j + 2 t + c (j < 4, c < 2), the 4 neighbouring pixels m0 + wm0 + 32 q + 4 g + {0, 1, 2, 3}
  // (q < 2) in acc[2 q][j][c], acc[2 q][j][2 + c], acc[2 q + 1][j][c], acc[2 q + 1][j][2 + c].
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  const int wm0 = (warp / 2) * kWarpPixels, wn0 = (warp % 2) * kWarpChannels;
  const bool vec_ok = (s.P * s.Q) % 4 == 0 && course::is_aligned16(y);
#pragma unroll
  for (int j = 0; j < kNTiles; ++j) {
#pragma unroll
    for (int c = 0; c < 2; ++c) {
      const int ch = wn0 + 8 * j + 2 * t + c, co = co0 + ch;  // ch: the channel within the block's tile
      if (co >= s.K) continue;
#pragma unroll
      for (int q = 0; q < 2; ++q) {
        const int m = m0 + wm0 + 32 * q + 4 * g;
        if (m >= M) continue;
        float v[4];
        // BEGIN SOLUTION
        // GOAL: v[r] = ReLU(BatchNorm(conv + bias)) of pixel m + r, channel co, from the accumulators.
        // TODO: v[r] = relu(acc * tile_scale[ch] + tile_shift[ch]) for the 4 accumulators of pixels
        // TODO: m .. m + 3, in the order the comment above gives them.
        const float scale = tile_scale[ch], shift = tile_shift[ch];
        v[0] = relu(acc[2 * q][j][c] * scale + shift);
        v[1] = relu(acc[2 * q][j][2 + c] * scale + shift);
        v[2] = relu(acc[2 * q + 1][j][c] * scale + shift);
        v[3] = relu(acc[2 * q + 1][j][2 + c] * scale + shift);
        // END SOLUTION
        store_pixels4(y, s, m, co, M, v, vec_ok);
      }
    }
  }
  // END OPEN
}

template <bool kVecB>
void launch_tf32_tiles(const float* x, const float* w, const float* bias, const float* gamma, const float* beta,
                       const float* running_mean, const float* running_var, float eps, const ConvShape& s, float* y,
                       cudaStream_t stream) {
  // BEGIN SOLUTION
  // GOAL: run conv_bn_relu_tf32_kernel<kVecB> over the whole output on `stream`; report a failed launch.
  // TODO: launch conv_bn_relu_tf32_kernel<kVecB> on `stream`: kTcThreads threads, a grid of
  // TODO: ceil(N*P*Q / kTcPixels) x ceil(K / kTcChannels) blocks; check the launch.
  // STUB: TORCH_CHECK(false, "launch_tf32_tiles (conv_bn_relu_inference.cu) is not implemented yet");
  const dim3 grid(course::ceil_div(s.N * s.P * s.Q, kTcPixels), course::ceil_div(s.K, kTcChannels));
  conv_bn_relu_tf32_kernel<kVecB><<<grid, kTcThreads, 0, stream>>>(x, w, bias, s, gamma, beta, running_mean,
                                                                   running_var, eps, y);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  // END SOLUTION
}

// Version 2 over the whole output: refused where there are no TF32 tensor cores (course/cuda.cuh).
void launch_tf32(const float* x, const float* w, const float* bias, const float* gamma, const float* beta,
                 const float* running_mean, const float* running_var, double eps, const ConvShape& s, float* y,
                 cudaStream_t stream) {
  // BEGIN OPEN
  // GOAL: version 2 over the whole output on `stream` (nothing when it is empty), the 16-byte weight copies where
  // GOAL: every weight row is aligned; refused where there are no TF32 tensor cores.
  course::check_tensor_cores(conv_bn_relu_tf32_kernel<false>, "version 2 (TF32 tensor cores)");
  if (s.N * s.P * s.Q == 0) return;
  // 16-byte weight copies: every row of C*R*S floats starts on 16 bytes
  // (planner paths: course/paths.h) the kernel's 16-byte stores of 4 pixels, or one by one
  course::took((s.P * s.Q) % 4 == 0 && course::is_aligned16(y) ? "v2.store_vec4" : "v2.store_scalar");
  if ((s.C * s.R * s.S) % 4 == 0 && course::is_aligned16(w)) {
    course::took("v2.vec_w");
    launch_tf32_tiles<true>(x, w, bias, gamma, beta, running_mean, running_var, float(eps), s, y, stream);
  } else {
    course::took("v2.scalar_w");
    launch_tf32_tiles<false>(x, w, bias, gamma, beta, running_mean, running_var, float(eps), s, y, stream);
  }
  // END OPEN
}

}  // namespace

template <typename scalar_t>
void conv_bn_relu_inference_cuda(const scalar_t* x, const scalar_t* w, const scalar_t* bias, const scalar_t* gamma,
                                 const scalar_t* beta, const scalar_t* running_mean, const scalar_t* running_var,
                                 double eps, const ConvShape& s, int version, scalar_t* y, cudaStream_t stream) {
  // BEGIN OPEN
  // GOAL: the op on `stream`: version 1 (fp32 or float64) or version 2 (float32 only), over the whole output (possibly
  // GOAL: empty); a clear error for a bad version or dtype; report a failed launch (Interface).
  TORCH_CHECK(version == 1 || version == 2, "version must be 1 (strict fp32) or 2 (TF32 tensor cores)");
  course::took<scalar_t>(bias != nullptr ? "bias" : "no_bias");  // (planner paths: course/paths.h)
  if (version == 2) {
    if constexpr (std::is_same_v<scalar_t, float>) {
      launch_tf32(x, w, bias, gamma, beta, running_mean, running_var, eps, s, y, stream);
    } else {
      TORCH_CHECK(false, "x must be float32 for version 2 (TF32 tensor cores), but is float64");
    }
    return;
  }
  // (planner paths: course/paths.h) the kernel's 16-byte stores of 4 pixels, or one by one
  course::took<scalar_t>((s.P * s.Q) % 4 == 0 && course::is_aligned16(y) ? "v1.store_vec4" : "v1.store_scalar");
  // BEGIN SOLUTION
  // GOAL: version 1: run conv_bn_relu_kernel over the whole output (possibly empty) on `stream`; report a
  // GOAL: failed launch.
  // TODO: launch conv_bn_relu_kernel on `stream`: kThreads threads, a grid of ceil(N*P*Q / BN) x
  // TODO: ceil(K / BM) blocks (nothing to launch when the output is empty); check the launch.
  // STUB: TORCH_CHECK(false, "conv_bn_relu_inference_cuda (conv_bn_relu_inference.cu) is not implemented yet");
  const int ncols = s.N * s.P * s.Q;
  if (ncols == 0) return;
  const dim3 grid(course::ceil_div(ncols, BN), course::ceil_div(s.K, BM));
  conv_bn_relu_kernel<scalar_t><<<grid, kThreads, 0, stream>>>(x, w, bias, s, gamma, beta, running_mean, running_var,
                                                               scalar_t(eps), y);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  // END SOLUTION
  // END OPEN
}

// The binding file dispatches on dtype: float32 and float64.
#define INSTANTIATE(T)                                                                                       \
  template void conv_bn_relu_inference_cuda<T>(const T*, const T*, const T*, const T*, const T*, const T*,  \
                                               const T*, double, const ConvShape&, int, T*, cudaStream_t);
INSTANTIATE(float)
INSTANTIATE(double)
