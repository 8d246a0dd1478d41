// The TF32 implicit-GEMM convolution engine of exercises 08 and 09 (given code: no student region).
//
// Exercise 06's version 3 is where this engine is built and explained: the instruction
// (`mma.sync.aligned.m16n8k8` in TF32, operands rounded by `cvt.rna.tf32.f32`, sums in float32), its
// fragments, the cp.async ring and the swizzle (06's README draws them). Here it is with 06's tiles for
// a 64-channel block and K in the weight's own order (06's generic order: its channels-innermost order
// reads a reordered copy of the weight, a second kernel, which a one-kernel fused layer does without).
// The GEMM is Y[m][co] = sum over k of im2col(x)[m][k] * w[co][k]: rows are output pixels, columns
// output channels, so that a lane's accumulators hold 4 neighbouring pixels of a channel.
//
// It provides, in namespace course::tf32_conv:
//   - the tiles: kTcPixels x kTcChannels per block of kTcThreads (4 warps of kWarpPixels x
//     kWarpChannels, each kMTiles x kNTiles mma tiles of 16 x 8), kTcK per stage, kTcStages stages;
//   - TcStage (one stage of the ring in shared memory) and swizzle (where pixel m of row k lives);
//   - mma_stage: a warp's tiles gain one stage's products;
//   - tc_conv_gemm<kVecB>: the whole reduction, acc = the warp's tile of conv(x, w) (no bias).
// The including exercise supplies the kernel around it: its name and launch (grid (ceil(N*P*Q /
// kTcPixels), ceil(K / kTcChannels)), kTcThreads threads, the ring as a __shared__ array of kTcStages
// TcStage), and the epilogue, which reads the accumulators as the comment above tc_conv_gemm lays them
// out (tc_conv_gemm passes a barrier, so the epilogue's parameters written before it are published).
// 06 does not include this header: there the student writes the engine (conv2d_kernel3, mma_stage3).
// `Shape` is the exercise's ConvShape (N, C, H, W, K, R, S, P, Q, strides, paddings, dilations).
// The PTX wrappers are course/cuda.cuh's; compiled for a GPU below 8.0 they do nothing, and the
// exercises' launchers refuse version 2 there (course::check_tensor_cores).
#pragma once

#include <cstdint>

#include <course/cuda.cuh>

namespace course {
namespace tf32_conv {

constexpr int kTcPixels = 128;   // a block's output pixels (rows m of Y)
constexpr int kTcChannels = 64;  // a block's output channels (columns co of Y)
constexpr int kTcK = 16;         // k per stage: two m16n8k8 steps
constexpr int kTcStages = 3;     // the cp.async ring: two stages in flight while one is multiplied
constexpr int kTcThreads = 128;  // 4 warps: warp w has pixels 64 (w / 2) .. + 63 and channels 32 (w % 2) .. + 31
constexpr int kWarpPixels = 64, kWarpChannels = 32;
constexpr int kMTiles = kWarpPixels / 16, kNTiles = kWarpChannels / 8;  // a warp's 4 x 4 mma tiles of 16 x 8

// One stage of the ring: the im2col tile A[k][m] (16 k x 128 pixels, swizzled) and the weight tile
// B[co][k] (64 channels x 16 k, as `w` holds them): 12 KiB, 3 stages in 36 KiB of static shared memory.
struct TcStage {
  float A[kTcK][kTcPixels];
  float B[kTcChannels][kTcK];
};

// Where pixel m of row k of A lives (06's swizzle3): its 16-byte chunk XOR-ed with (k / 4) % 4 in bits
// 1-2, so that each quarter-warp's fragment reads (below) hit 8 different 16-byte slots of the banks.
__device__ __forceinline__ int swizzle(int k, int m) { return m ^ (((k >> 2) & 3) << 3); }

// The warp's 4 x 4 tiles of 16 x 8 in acc gain one stage (16 k: two m16n8k8 steps), as 06's mma_stage3
// (with its renumbered k and pixels): lane (g, t) = (lane / 4, lane % 4) reads the weights of channel
// wn0 + 8 j + g at the stage's k 4 t .. 4 t + 3 (one float4), and pixels 32 q + 4 g .. 32 q + 4 g + 3 of
// rows 4 t + 2 step + h of A (one float4 each: a0, a1 of tiles 2 q and 2 q + 1 for h = 0, a2, a3 for h = 1).
__device__ __forceinline__ void mma_stage(const TcStage& st, float (&acc)[kMTiles][kNTiles][4], int wm0, int wn0,
                                          int lane) {
  const int g = lane / 4, t = lane % 4;
  uint32_t b[kNTiles][4];  // b[j][e]: channel wn0 + 8 j + g at the stage's k = 4 t + e, as TF32
#pragma unroll
  for (int j = 0; j < kNTiles; ++j) {
    const float4 v = *reinterpret_cast<const float4*>(&st.B[wn0 + 8 * j + g][4 * t]);
    b[j][0] = to_tf32(v.x), b[j][1] = to_tf32(v.y), b[j][2] = to_tf32(v.z), b[j][3] = to_tf32(v.w);
  }
#pragma unroll
  for (int step = 0; step < 2; ++step) {
#pragma unroll
    for (int q = 0; q < 2; ++q) {  // mma tiles 2 q and 2 q + 1: half the A fragments live at a time
      uint32_t a[2][4];  // a[i]: tile 2 q + i's A fragment (a0 .. a3) for this step, as TF32
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        const int k = 4 * t + 2 * step + h;
        const float4 v = *reinterpret_cast<const float4*>(&st.A[k][swizzle(k, wm0 + 32 * q + 4 * g)]);
        a[0][2 * h] = to_tf32(v.x), a[0][2 * h + 1] = to_tf32(v.y);
        a[1][2 * h] = to_tf32(v.z), a[1][2 * h + 1] = to_tf32(v.w);
      }
#pragma unroll
      for (int i = 0; i < 2; ++i) {
#pragma unroll
        for (int j = 0; j < kNTiles; ++j) mma_tf32(acc[2 * q + i][j], a[i], b[j][2 * step], b[j][2 * step + 1]);
      }
    }
  }
}

// acc = the warp's 64 x 32 tile of Y = conv(x, w) (no bias) for the block's pixels m0 .. m0 + 127 and
// channels co0 .. co0 + 63: the implicit GEMM through the ring. Each stage, thread tid gathers the 16
// k of im2col row tid (pixel m0 + tid: neighbouring threads, neighbouring pixels) and copies
// 2 chunks of 4 k of the weights (channel rows tid / 4 and tid / 4 + 32, chunk tid % 4), all with
// cp.async, zeros outside x, the padding, the pixels, C*R*S and the channels. kVecB: C*R*S % 4 == 0 and w
// 16-byte aligned, so every chunk of 4 k starts on 16 bytes and is one 16-byte copy.
// On return (acc is all zeros when C*R*S = 0), warp w = tid / 32 has the tile's pixels wm0 = 64 (w / 2)
// .. + 63 and channels wn0 = 32 (w % 2) .. + 31; with 06's renumbered pixels, lane (g, t) = (lane / 4,
// lane % 4) holds, for channel co0 + wn0 + 8 j + 2 t + c (j < kNTiles, c < 2), the 4 neighbouring pixels
// m0 + wm0 + 32 q + 4 g + {0, 1, 2, 3} (q < 2) in acc[2 q][j][c], acc[2 q][j][2 + c], acc[2 q + 1][j][c],
// acc[2 q + 1][j][2 + c]: the epilogue's input.
template <bool kVecB, class Shape>
__device__ __forceinline__ void tc_conv_gemm(const float* __restrict__ x, const float* __restrict__ w,
                                             const Shape& s, int m0, int co0, TcStage (&ring)[kTcStages],
                                             float (&acc)[kMTiles][kNTiles][4]) {
  static_assert(kTcThreads == kTcPixels, "one im2col row per thread");
  constexpr int kBRows = kTcThreads / 4;  // channel rows of B copied per pass (2 passes)
  const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
  const int PQ = s.P * s.Q, HW = s.H * s.W, RS = s.R * s.S, M = s.N * PQ, CRS = s.C * RS;
  const int wm0 = (warp / 2) * kWarpPixels, wn0 = (warp % 2) * kWarpChannels;

  // This thread's im2col row: pixel m0 + tid = (n, p, q), decoded once.
  const float* xn = x;
  int h0 = -(1 << 30), w0 = 0;  // a row past M reads only "padding": zeros
  if (m0 + tid < M) {
    const int n = (m0 + tid) / PQ, pq = m0 + tid - n * PQ, p = pq / s.Q, q = pq - p * s.Q;
    xn = x + int64_t(n) * s.C * HW;
    h0 = p * s.stride_h - s.pad_h;
    w0 = q * s.stride_w - s.pad_w;
  }
  const int b_row = tid / 4, b_c = tid % 4;

  // Issue the copies of the stage at k0 into st.
  auto load_stage = [&](TcStage& st, int k0) {
    int k = k0;  // decoded into (c, r, ss) once per stage, then walked (ss fastest)
    const int c = k / RS;
    int r = (k - c * RS) / s.S;
    int ss = k - c * RS - r * s.S;
    int c_off = c * HW;
#pragma unroll
    for (int e = 0; e < kTcK; ++e, ++k) {
      const int h = h0 + r * s.dil_h, ww = w0 + ss * s.dil_w;
      const bool ok = k < CRS && unsigned(h) < unsigned(s.H) && unsigned(ww) < unsigned(s.W);
      cp_async4(&st.A[e][swizzle(e, tid)], ok ? xn + c_off + h * s.W + ww : xn, ok);
      if (++ss == s.S) {
        ss = 0;
        if (++r == s.R) {
          r = 0;
          c_off += HW;
        }
      }
    }
#pragma unroll
    for (int pass = 0; pass < 2; ++pass) {
      const int row = b_row + pass * kBRows;
      const int co = co0 + row, kb = k0 + 4 * b_c;
      const float* src = w + int64_t(co) * CRS + kb;
      if (kVecB) {
        const bool ok = co < s.K && kb < CRS;
        cp_async16(&st.B[row][4 * b_c], ok ? src : w, ok);
      } else {
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const bool ok = co < s.K && kb + e < CRS;
          cp_async4(&st.B[row][4 * b_c + e], ok ? src + e : w, ok);
        }
      }
    }
  };

#pragma unroll
  for (int i = 0; i < kMTiles; ++i)
#pragma unroll
    for (int j = 0; j < kNTiles; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) acc[i][j][e] = 0.0f;
  const int steps = (CRS + kTcK - 1) / kTcK;
  // kTcStages - 1 stages in flight, one (possibly empty) group committed per step
#pragma unroll
  for (int st = 0; st < kTcStages - 1; ++st) {
    if (st < steps) load_stage(ring[st], st * kTcK);
    cp_async_commit();
  }
  int read = 0, write = kTcStages - 1;
  for (int step = 0; step < steps; ++step) {
    cp_async_wait<kTcStages - 2>();  // this thread's copies of `step` have landed
    __syncthreads();                 // everyone's have, and everyone is done reading stage `write`
    if (step + kTcStages - 1 < steps) load_stage(ring[write], (step + kTcStages - 1) * kTcK);
    cp_async_commit();
    mma_stage(ring[read], acc, wm0, wn0, lane);
    read = read + 1 == kTcStages ? 0 : read + 1;
    write = write + 1 == kTcStages ? 0 : write + 1;
  }
  cp_async_wait<0>();
  // Every thread passes at least one barrier between entry and return, so that what the kernel wrote to
  // shared memory before the call (e.g. its epilogue's per-channel parameters) is published: the ring
  // has one per step, and C*R*S = 0 has no step.
  if (steps == 0) __syncthreads();
}

}  // namespace tf32_conv
}  // namespace course
