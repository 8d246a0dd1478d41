// Exercise 05: C = A @ B in float32, in four numbered steps from naive to fast:
//   matmul_kernel1  one thread per output, operands read straight from global memory
//   matmul_kernel2  32 x 32 tiles of A and B staged in shared memory (each load reused 32 times)
//   matmul_kernel3  128 x 128 block tiles, 8 x 8 outputs per thread in registers, float4 loads,
//                   double-buffered shared memory
//   matmul_kernel4  kernel 3's tiling with 128 threads of 16 x 8 outputs, fed by cp.async copies
//                   into a 3-stage shared-memory ring (sm_80+; plain copies on older GPUs)
//
// This file includes no PyTorch tensor headers, so editing it recompiles in about a second.
// Tensors, the version switch and op registration live in matmul.cpp.
#include <string>

#include <course/cuda.cuh>

#include "matmul.h"

namespace {

constexpr int64_t kMaxGridY = 65535;  // CUDA's limit on gridDim.y (row tiles go there)

// ---------------------------------------------------------------------------------- kernel 1
constexpr int kBlock1X = 32, kBlock1Y = 8;

// Grid (ceil(N / 32), ceil(M / 8)), block (32, 8): thread (tx, ty) computes C[row][col] with
// row = 8 by + ty, col = 32 bx + tx. A warp reads one B row segment (coalesced) and one A element
// (a broadcast) per k.
__global__ void matmul_kernel1(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                               int64_t M, int64_t N, int64_t K) {
  // BEGIN SOLUTION
  // GOAL: this thread's element of C = A B (the geometry above the kernel), accumulated in float.
  // TODO: compute this thread's row and col; if both are inside C, sum A[row][k] * B[k][col] over
  // TODO: k < K in a float accumulator and store it in C[row][col] (row-major: C[row * N + col]).
  const int64_t row = int64_t(blockIdx.y) * kBlock1Y + threadIdx.y;
  const int64_t col = int64_t(blockIdx.x) * kBlock1X + threadIdx.x;
  if (row < M && col < N) {
    float acc = 0.0f;
    for (int64_t k = 0; k < K; ++k) acc = fmaf(A[row * K + k], B[k * N + col], acc);
    C[row * N + col] = acc;
  }
  // END SOLUTION
}

// ---------------------------------------------------------------------------------- kernel 2
constexpr int kTile2 = 32;

// Grid (ceil(N / 32), ceil(M / 32)), block (32, 32): thread (tx, ty) computes C[32 by + ty][32 bx + tx].
// For each 32-wide step of k, the block copies a 32 x 32 tile of A and of B into shared memory
// (thread (tx, ty) copies one element of each, zero outside the matrices), then every thread
// reads 32 values of each from shared memory.
__global__ void matmul_kernel2(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                               int64_t M, int64_t N, int64_t K) {
  __shared__ float As[kTile2][kTile2];
  __shared__ float Bs[kTile2][kTile2];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t row = int64_t(blockIdx.y) * kTile2 + ty;
  const int64_t col = int64_t(blockIdx.x) * kTile2 + tx;
  float acc = 0.0f;
  for (int64_t k0 = 0; k0 < K; k0 += kTile2) {
    // BEGIN SOLUTION
    // GOAL: add this k step's contribution to acc, reading A and B through shared-memory tiles.
    // TODO: copy A[row][k0 + tx] into As[ty][tx] and B[k0 + ty][col] into Bs[ty][tx] (0 where the
    // TODO: index is outside A or B), wait for the whole block, add As[ty][k] * Bs[k][tx] for
    // TODO: k < kTile2 to acc, and wait again before the next step overwrites the tiles.
    As[ty][tx] = (row < M && k0 + tx < K) ? A[row * K + k0 + tx] : 0.0f;
    Bs[ty][tx] = (k0 + ty < K && col < N) ? B[(k0 + ty) * N + col] : 0.0f;
    __syncthreads();
#pragma unroll
    for (int k = 0; k < kTile2; ++k) acc = fmaf(As[ty][k], Bs[k][tx], acc);
    __syncthreads();
    // END SOLUTION
  }
  if (row < M && col < N) C[row * N + col] = acc;
}

// ---------------------------------------------------------------------------------- kernel 3
constexpr int kBM = 128, kBN = 128, kBK = 8;  // block tile: 128 x 128 outputs, 8-deep k steps
constexpr int kTM = 8, kTN = 8;               // outputs per thread: 8 x 8, in registers
constexpr int kThreads3 = (kBM / kTM) * (kBN / kTN);  // 256

// One k step's slices of A and B, held in registers between the global load and the shared store.
struct Stage {
  float a[4];  // A[m0 + tid / 2][k0 + 4 (tid % 2) + 0..3]
  float b[4];  // B[k0 + tid / 32][n0 + 4 (tid % 32) + 0..3]
};

// Global -> registers, zeros outside the matrices. kVecA/kVecB: one float4 load when K (resp. N) is a
// multiple of 4 and the pointer is 16-byte aligned; then a 4-wide group is wholly inside or outside.
template <bool kVecA, bool kVecB>
__device__ __forceinline__ void load_stage(Stage& s, const float* __restrict__ A, const float* __restrict__ B,
                                           int64_t M, int64_t N, int64_t K, int64_t m0, int64_t n0, int64_t k0) {
  const int tid = threadIdx.x;
  const int64_t ar = m0 + tid / 2, ak = k0 + 4 * (tid % 2);
  if (kVecA) {
    const float4 v = (ar < M && ak < K) ? *reinterpret_cast<const float4*>(A + ar * K + ak) : make_float4(0, 0, 0, 0);
    s.a[0] = v.x, s.a[1] = v.y, s.a[2] = v.z, s.a[3] = v.w;
  } else {
#pragma unroll
    for (int i = 0; i < 4; ++i) s.a[i] = (ar < M && ak + i < K) ? A[ar * K + ak + i] : 0.0f;
  }
  const int64_t bk = k0 + tid / 32, bn = n0 + 4 * (tid % 32);
  if (kVecB) {
    const float4 v = (bk < K && bn < N) ? *reinterpret_cast<const float4*>(B + bk * N + bn) : make_float4(0, 0, 0, 0);
    s.b[0] = v.x, s.b[1] = v.y, s.b[2] = v.z, s.b[3] = v.w;
  } else {
#pragma unroll
    for (int i = 0; i < 4; ++i) s.b[i] = (bk < K && bn + i < N) ? B[bk * N + bn + i] : 0.0f;
  }
}

// Registers -> shared memory. A is stored transposed (As[k][m]) so that a thread's 8 rows of one k
// are two float4 reads, like B's 8 columns.
__device__ __forceinline__ void store_stage(const Stage& s, float (*As)[kBM], float (*Bs)[kBN]) {
  const int tid = threadIdx.x;
#pragma unroll
  for (int i = 0; i < 4; ++i) As[4 * (tid % 2) + i][tid / 2] = s.a[i];
  *reinterpret_cast<float4*>(&Bs[tid / 32][4 * (tid % 32)]) = make_float4(s.b[0], s.b[1], s.b[2], s.b[3]);
}

// Grid (ceil(N / 128), ceil(M / 128)), 256 threads. Block (bx, by) computes the 128 x 128 tile of C
// at rows 128 by, columns 128 bx. Thread (tx, ty) (see below) owns rows {4 ty + i, 64 + 4 ty + i} and
// columns {4 tx + j, 64 + 4 tx + j} (i, j < 4) of that tile: two 4-wide groups each way, so its
// shared-memory reads are float4s and a warp's reads hit few distinct addresses.
// Shared memory is double-buffered: while the block computes on one k step, the next one's global
// loads are in flight in registers, and one __syncthreads per step suffices.
template <bool kVecA, bool kVecB>
__global__ void __launch_bounds__(kThreads3, 2)
    matmul_kernel3(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C, int64_t M,
                   int64_t N, int64_t K) {
  __shared__ __align__(16) float As[2][kBK][kBM];
  __shared__ __align__(16) float Bs[2][kBK][kBN];
  // Thread (tx, ty) of a 16 x 16 layout; each warp is a 4 x 8 patch of it, so its float4 reads of As
  // hit 4 addresses and of Bs 8 (one shared-memory wavefront each, broadcast to the rest).
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int ty = (warp / 2) * 4 + lane / 8, tx = (warp % 2) * 8 + lane % 8;
  const int64_t m0 = int64_t(blockIdx.y) * kBM, n0 = int64_t(blockIdx.x) * kBN;
  float acc[kTM][kTN] = {};
  const int64_t steps = course::ceil_div<int64_t>(K, kBK);
  Stage s;
  // BEGIN SOLUTION
  // GOAL: this thread's 8 x 8 outputs of the block's tile in acc, over all k steps, the global loads
  // GOAL: of the next step in flight while this one computes (two shared-memory buffers).
  // TODO: stage k step 0 (load_stage, then store_stage into buffer 0) and __syncthreads(). Then for
  // TODO: each step: load the next step's stage into registers (if there is one); for each of the kBK
  // TODO: k's, read your 8 A values (As[cur][k][4 ty..], As[cur][k][64 + 4 ty..]) and 8 B values
  // TODO: (Bs[cur][k][4 tx..], [64 + 4 tx..]) as float4s and do the 64 FMAs into acc; store the next
  // TODO: stage into the other buffer; __syncthreads().
  if (steps > 0) {
    load_stage<kVecA, kVecB>(s, A, B, M, N, K, m0, n0, 0);
    store_stage(s, As[0], Bs[0]);
  }
  __syncthreads();
  for (int64_t step = 0; step < steps; ++step) {
    const int cur = step & 1;
    const bool has_next = step + 1 < steps;
    if (has_next) load_stage<kVecA, kVecB>(s, A, B, M, N, K, m0, n0, (step + 1) * kBK);
#pragma unroll
    for (int k = 0; k < kBK; ++k) {
      const float4 a0 = *reinterpret_cast<const float4*>(&As[cur][k][4 * ty]);
      const float4 a1 = *reinterpret_cast<const float4*>(&As[cur][k][64 + 4 * ty]);
      const float4 b0 = *reinterpret_cast<const float4*>(&Bs[cur][k][4 * tx]);
      const float4 b1 = *reinterpret_cast<const float4*>(&Bs[cur][k][64 + 4 * tx]);
      const float a[kTM] = {a0.x, a0.y, a0.z, a0.w, a1.x, a1.y, a1.z, a1.w};
      const float b[kTN] = {b0.x, b0.y, b0.z, b0.w, b1.x, b1.y, b1.z, b1.w};
#pragma unroll
      for (int i = 0; i < kTM; ++i) {
#pragma unroll
        for (int j = 0; j < kTN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
      }
    }
    // The other buffer was last read in the previous step, which ended with a barrier.
    if (has_next) store_stage(s, As[cur ^ 1], Bs[cur ^ 1]);
    __syncthreads();
  }
  // END SOLUTION

  // Write the 8 x 8 outputs: rows and columns in two groups of 4; a float4 store where N allows.
#pragma unroll
  for (int i = 0; i < kTM; ++i) {
    const int64_t row = m0 + (i < 4 ? 4 * ty + i : 64 + 4 * ty + i - 4);
    if (row >= M) continue;
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int64_t col = n0 + 64 * h + 4 * tx;
      const float* v = &acc[i][4 * h];
      if (kVecB) {  // N % 4 == 0 and C is 16-byte aligned (a fresh allocation): whole group in or out
        if (col < N) *reinterpret_cast<float4*>(C + row * N + col) = make_float4(v[0], v[1], v[2], v[3]);
      } else {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          if (col + j < N) C[row * N + col + j] = v[j];
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------------- kernel 4
// Kernel 3's loop issues the next step's global loads before the FMAs, but the compiler may (and
// does) schedule them after the FMAs, so each step still waits for global memory. Kernel 4 copies
// global -> shared with cp.async (sm_80+): the copies run in the background, straight into shared
// memory, and a ring of kStages4 shared buffers keeps the copies for steps k + 1 and k + 2 in flight
// while step k computes.
constexpr int kBM4 = 128, kBN4 = 128, kBK4 = 8;  // block tile: 128 x 128 outputs, 8-deep k steps
constexpr int kWarpsM4 = 2, kWarpsN4 = 2;        // 4 warps (128 threads), each a 64 x 64 tile of C
constexpr int kThreads4 = 32 * kWarpsM4 * kWarpsN4;
constexpr int kTM4 = 16, kTN4 = 8;  // outputs per thread: 16 x 8 (a warp's lanes are 4 x 8)
constexpr int kStages4 = 3;         // shared-memory ring: 3 k steps' tiles
constexpr int kAS4 = kBM4 + 4;      // As row length, padded by 4 floats: conflict-free transposing copies
constexpr int kARowStep4 = 16;      // rows between one thread's A copies (4 warps x 4 rows)
constexpr int kACopies4 = kBM4 / kARowStep4;  // 8 four-byte copies of A per thread per step

// One 4-byte (or 16-byte) copy global -> shared; `valid` false writes zeros and reads nothing.
// From sm_80 on it is a cp.async: issued now, completed in the background, waited for by
// cp_async_wait. Older GPUs (the T4 is sm_75) have no cp.async: the same functions then copy
// synchronously, the commit and wait do nothing, and the kernel stays correct (kernel 3's speed).
__device__ __forceinline__ void cp_async4(float* dst, const float* src, bool valid) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(static_cast<unsigned>(__cvta_generic_to_shared(dst))),
               "l"(src), "r"(valid ? 4 : 0)
               : "memory");
#else
  *dst = valid ? *src : 0.0f;
#endif
}

__device__ __forceinline__ void cp_async16(float* dst, const float* src, bool valid) {  // dst, src 16-byte aligned
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(static_cast<unsigned>(__cvta_generic_to_shared(dst))),
               "l"(src), "r"(valid ? 16 : 0)
               : "memory");
#else
  *reinterpret_cast<float4*>(dst) = valid ? *reinterpret_cast<const float4*>(src) : make_float4(0, 0, 0, 0);
#endif
}

// Close the group of copies issued since the last commit (one group per k step).
__device__ __forceinline__ void cp_async_commit() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.commit_group;\n" ::: "memory");
#endif
}

// Wait until at most kPending of this thread's committed groups are still in flight.
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
#endif
}

// One shared-memory stage of the ring: A transposed (As[k][m], rows padded) and B (Bs[k][n]).
struct Stage4 {
  float As[kBK4][kAS4];
  float Bs[kBK4][kBN4];
};

// This thread's copies for the k steps, in order. Pointers and bounds are worked out once, so a
// step's copies cost a few integer instructions each. A: each warp copies blocks of 4 rows x 8 k,
// 4 bytes a lane (its row lane / 8, its k lane % 8), 8 such copies 16 rows apart; a warp's reads are
// 4 full 32-byte sectors and it writes them transposed into As. B: consecutive threads copy
// consecutive 16-byte groups of a row (kVecB: N % 4 == 0 and B 16-byte aligned), else floats.
template <bool kVecB>
struct Loader4 {
  static constexpr int kBRowStep = kVecB ? kThreads4 / (kBN4 / 4) : kThreads4 / kBN4;  // 4 or 1
  static constexpr int kBCopies = kBK4 / kBRowStep;                                    // 2 or 8
  const float* A;  // the matrices' starts: the (unread) source of a zero-filled copy
  const float* B;
  const float* a;  // this thread's first A copy of the next step: A[m0 + ra][k0 + ca]
  const float* b;  // its first B copy: B[k0 + rb][n0 + cb]
  int64_t a_stride, b_stride, b_step;  // between its A copies, its B copies, and B's k steps
  int64_t k_left;                      // K - k0
  int a_rows;                          // how many of its A copies have their row inside A
  bool b_col_ok;                       // its B column (group) is inside B
  int ra, ca, rb, cb;

  __device__ __forceinline__ Loader4(const float* A_, const float* B_, int64_t M, int64_t N, int64_t K, int64_t m0,
                                     int64_t n0)
      : A(A_), B(B_), k_left(K) {
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    ra = warp * 4 + lane / 8;
    ca = lane % 8;
    a = A + (m0 + ra) * K + ca;
    a_stride = int64_t(kARowStep4) * K;
    a_rows = 0;
#pragma unroll
    for (int i = 0; i < kACopies4; ++i) a_rows += m0 + ra + i * kARowStep4 < M;
    cb = kVecB ? 4 * (tid % (kBN4 / 4)) : tid % kBN4;
    rb = kVecB ? tid / (kBN4 / 4) : tid / kBN4;
    b = B + rb * N + n0 + cb;
    b_stride = int64_t(kBRowStep) * N;
    b_step = int64_t(kBK4) * N;
    b_col_ok = n0 + cb < N;  // with kVecB, N % 4 == 0: a group of 4 is wholly inside or outside
  }

  // Issue the copies of the next k step into stage `s`, zero-filling what lies outside A or B.
  __device__ __forceinline__ void load(Stage4& s) {
    const bool k_ok = ca < k_left;
#pragma unroll
    for (int i = 0; i < kACopies4; ++i) {
      const bool ok = k_ok && i < a_rows;
      cp_async4(&s.As[ca][ra + i * kARowStep4], ok ? a + i * a_stride : A, ok);
    }
#pragma unroll
    for (int i = 0; i < kBCopies; ++i) {
      const bool ok = b_col_ok && rb + i * kBRowStep < k_left;
      if (kVecB) {
        cp_async16(&s.Bs[rb + i * kBRowStep][cb], ok ? b + i * b_stride : B, ok);
      } else {
        cp_async4(&s.Bs[rb + i * kBRowStep][cb], ok ? b + i * b_stride : B, ok);
      }
    }
    a += kBK4;
    b += b_step;
    k_left -= kBK4;
  }
};

// Grid (ceil(N / 128), ceil(M / 128)), 128 threads (2 x 2 warps, each 64 x 64 of C), 16 x 8 outputs per thread, 3-stage cp.async ring.
template <bool kVecB>
__global__ void __launch_bounds__(kThreads4, 2)
    matmul_kernel4(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C, int64_t M,
                   int64_t N, int64_t K) {
  __shared__ __align__(16) Stage4 ring[kStages4];  // 3 x 8.1 KiB
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int wm = warp / kWarpsN4, wn = warp % kWarpsN4;
  // A warp's lanes form a 4 x 8 patch: lane owns rows arow + 16 g + (0..3), g < 4, and columns
  // bcol + 32 h + (0..3), h < 2, of the block's tile (kernel 3's layout, twice as many rows).
  const int arow = wm * 64 + 4 * (lane / 8);
  const int bcol = wn * 64 + 4 * (lane % 8);
  const int64_t m0 = int64_t(blockIdx.y) * kBM4, n0 = int64_t(blockIdx.x) * kBN4;
  const int64_t steps = course::ceil_div<int64_t>(K, kBK4);
  float acc[kTM4][kTN4] = {};
  Loader4<kVecB> loader(A, B, M, N, K, m0, n0);

  // Prologue: the first kStages4 - 1 k steps in flight. A group is committed even when empty, so the
  // count of pending groups stays in step with the loop's wait.
#pragma unroll
  for (int s = 0; s < kStages4 - 1; ++s) {
    if (s < steps) loader.load(ring[s]);
    cp_async_commit();
  }
  int read = 0, write = kStages4 - 1;  // the stage computed on now, the stage being filled
  for (int64_t step = 0; step < steps; ++step) {
    // BEGIN SOLUTION
    // GOAL: one step of the cp.async pipeline: this thread's 16 x 8 outputs in acc gain the stage
    // GOAL: `read`, while the copies of the steps ahead stay in flight.
    // TODO: wait until this step's copies have landed (cp_async_wait<kStages4 - 2>: only the newer
    // TODO: step's group may still be pending) and __syncthreads() (everyone's copies landed, and
    // TODO: nobody still reads ring[write]). Issue step + kStages4 - 1's copies into ring[write] if
    // TODO: that step exists, and commit a group either way. Then for each of the kBK4 k's read your
    // TODO: 16 A values (ring[read].As[k][arow + 16 g ..], g < 4) and 8 B values (ring[read].Bs[k]
    // TODO: [bcol + 32 h ..], h < 2) as float4s and do the 128 FMAs into acc. Last, advance read and
    // TODO: write by one stage each, wrapping from kStages4 - 1 to 0.
    cp_async_wait<kStages4 - 2>();
    __syncthreads();
    if (step + kStages4 - 1 < steps) loader.load(ring[write]);
    cp_async_commit();
    const Stage4& s = ring[read];
#pragma unroll
    for (int k = 0; k < kBK4; ++k) {
      float a[kTM4], b[kTN4];
#pragma unroll
      for (int g = 0; g < kTM4 / 4; ++g) {
        const float4 v = *reinterpret_cast<const float4*>(&s.As[k][arow + 16 * g]);
        a[4 * g] = v.x, a[4 * g + 1] = v.y, a[4 * g + 2] = v.z, a[4 * g + 3] = v.w;
      }
#pragma unroll
      for (int h = 0; h < kTN4 / 4; ++h) {
        const float4 v = *reinterpret_cast<const float4*>(&s.Bs[k][bcol + 32 * h]);
        b[4 * h] = v.x, b[4 * h + 1] = v.y, b[4 * h + 2] = v.z, b[4 * h + 3] = v.w;
      }
#pragma unroll
      for (int i = 0; i < kTM4; ++i) {
#pragma unroll
        for (int j = 0; j < kTN4; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
      }
    }
    read = read + 1 == kStages4 ? 0 : read + 1;
    write = write + 1 == kStages4 ? 0 : write + 1;
    // END SOLUTION
  }
  cp_async_wait<0>();  // only empty groups can be pending here, but leave none behind

  // Write the 16 x 8 outputs: 4 groups of rows, 2 groups of 4 columns; a float4 store where N allows.
#pragma unroll
  for (int i = 0; i < kTM4; ++i) {
    const int64_t row = m0 + arow + 16 * (i / 4) + i % 4;
    if (row >= M) continue;
#pragma unroll
    for (int h = 0; h < kTN4 / 4; ++h) {
      const int64_t col = n0 + bcol + 32 * h;
      const float* v = &acc[i][4 * h];
      if (kVecB) {  // N % 4 == 0 and C is 16-byte aligned (a fresh allocation): whole group in or out
        if (col < N) *reinterpret_cast<float4*>(C + row * N + col) = make_float4(v[0], v[1], v[2], v[3]);
      } else {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          if (col + j < N) C[row * N + col + j] = v[j];
        }
      }
    }
  }
}

void check_grid_rows(int64_t M, int64_t rows_per_block, const char* version) {
  // (numbers formatted by std::to_string: streaming integers into a message crashed on torch 2.11)
  TORCH_CHECK(course::ceil_div<int64_t>(M, rows_per_block) <= kMaxGridY,
              std::string("matmul ") + version + ": A has M = " + std::to_string(M) +
                  " rows, more than this kernel's grid can cover (" + std::to_string(kMaxGridY * rows_per_block) + ")");
}

}  // namespace

void matmul_cuda1(const float* A, const float* B, float* C, int64_t M, int64_t N, int64_t K, cudaStream_t stream) {
  // BEGIN SOLUTION
  // GOAL: run matmul_kernel1 over all of C on `stream`, refusing an M its grid cannot cover, and
  // GOAL: report a failed launch.
  // TODO: first refuse an M whose row blocks would not fit in gridDim.y (at most 65535):
  // TODO: check_grid_rows(M, kBlock1Y, "version 1") (given above; graded as an input check). Then
  // TODO: launch matmul_kernel1 on `stream` with (kBlock1X, kBlock1Y) blocks and a grid of
  // TODO: (ceil(N / kBlock1X), ceil(M / kBlock1Y)) blocks; check the launch. (The binding returns
  // TODO: before this for M == 0 or N == 0; K == 0 must still write zeros.)
  // STUB: TORCH_CHECK(false, "matmul_cuda1 (matmul.cu) is not implemented yet");
  check_grid_rows(M, kBlock1Y, "version 1");
  const dim3 grid(static_cast<unsigned>(course::ceil_div<int64_t>(N, kBlock1X)),
                  static_cast<unsigned>(course::ceil_div<int64_t>(M, kBlock1Y)));
  matmul_kernel1<<<grid, dim3(kBlock1X, kBlock1Y), 0, stream>>>(A, B, C, M, N, K);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  // END SOLUTION
}

void matmul_cuda2(const float* A, const float* B, float* C, int64_t M, int64_t N, int64_t K, cudaStream_t stream) {
  // BEGIN SOLUTION
  // GOAL: run matmul_kernel2 over all of C on `stream`, refusing an M its grid cannot cover, and
  // GOAL: report a failed launch.
  // TODO: first check_grid_rows(M, kTile2, "version 2") (M too large for gridDim.y is an error, graded),
  // TODO: then launch matmul_kernel2 with (kTile2, kTile2) blocks covering C; check the launch.
  // STUB: TORCH_CHECK(false, "matmul_cuda2 (matmul.cu) is not implemented yet");
  check_grid_rows(M, kTile2, "version 2");
  const dim3 grid(static_cast<unsigned>(course::ceil_div<int64_t>(N, kTile2)),
                  static_cast<unsigned>(course::ceil_div<int64_t>(M, kTile2)));
  matmul_kernel2<<<grid, dim3(kTile2, kTile2), 0, stream>>>(A, B, C, M, N, K);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  // END SOLUTION
}

void matmul_cuda3(const float* A, const float* B, float* C, int64_t M, int64_t N, int64_t K, cudaStream_t stream) {
  check_grid_rows(M, kBM, "version 3");
  const dim3 grid(static_cast<unsigned>(course::ceil_div<int64_t>(N, kBN)),
                  static_cast<unsigned>(course::ceil_div<int64_t>(M, kBM)));
  // float4 paths need rows that start on 16-byte boundaries: K (or N) a multiple of 4, aligned bases.
  const bool vec_a = K % 4 == 0 && course::is_aligned16(A);
  const bool vec_b = N % 4 == 0 && course::is_aligned16(B, C);
  // BEGIN SOLUTION
  // GOAL: run the matmul_kernel3 that vec_a and vec_b allow on `stream`; report a failed launch.
  // TODO: launch matmul_kernel3<vec_a, vec_b> (four instantiations: pick with if/else) on `stream`
  // TODO: with kThreads3 threads per block and `grid`; check the launch.
  // STUB: TORCH_CHECK(false, "matmul_cuda3 (matmul.cu) is not implemented yet");
  if (vec_a && vec_b) {
    matmul_kernel3<true, true><<<grid, kThreads3, 0, stream>>>(A, B, C, M, N, K);
  } else if (vec_a) {
    matmul_kernel3<true, false><<<grid, kThreads3, 0, stream>>>(A, B, C, M, N, K);
  } else if (vec_b) {
    matmul_kernel3<false, true><<<grid, kThreads3, 0, stream>>>(A, B, C, M, N, K);
  } else {
    matmul_kernel3<false, false><<<grid, kThreads3, 0, stream>>>(A, B, C, M, N, K);
  }
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  // END SOLUTION
}

void matmul_cuda4(const float* A, const float* B, float* C, int64_t M, int64_t N, int64_t K, cudaStream_t stream) {
  check_grid_rows(M, kBM4, "version 4");
  const dim3 grid(static_cast<unsigned>(course::ceil_div<int64_t>(N, kBN4)),
                  static_cast<unsigned>(course::ceil_div<int64_t>(M, kBM4)));
  // 16-byte copies of B need N % 4 == 0 and 16-byte aligned B and C (A is copied 4 bytes at a time).
  const bool vec_b = N % 4 == 0 && course::is_aligned16(B, C);
  // BEGIN SOLUTION
  // GOAL: run the matmul_kernel4 that vec_b allows on `stream`; report a failed launch.
  // TODO: launch matmul_kernel4<vec_b> (two instantiations: pick with if/else) on `stream` with
  // TODO: kThreads4 threads per block and `grid`; check the launch.
  // STUB: TORCH_CHECK(false, "matmul_cuda4 (matmul.cu) is not implemented yet");
  if (vec_b) {
    matmul_kernel4<true><<<grid, kThreads4, 0, stream>>>(A, B, C, M, N, K);
  } else {
    matmul_kernel4<false><<<grid, kThreads4, 0, stream>>>(A, B, C, M, N, K);
  }
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  // END SOLUTION
}
