// GENERATED from solutions/05_matmul/matmul.cu by `make exercises`: edit only inside the BEGIN/END SOLUTION regions.
// Exercise 05: C = A @ B in float32, in four numbered steps from naive to fast:
//   matmul_kernel1  one thread per output, operands read straight from global memory
//   matmul_kernel2  32 x 32 tiles of A and B staged in shared memory (each load reused 32 times)
//   matmul_kernel3  128 x 128 block tiles, 8 x 8 outputs per thread in registers, float4 loads,
//                   double-buffered shared memory
//   matmul_kernel4  kernel 3's tiling with 128 threads of 16 x 8 outputs, fed by cp.async copies
//                   into a 3-stage shared-memory ring (sm_80+; plain copies on older GPUs)
//   (version 4 also has given paths for the shapes its tiles do not fit: matmul_gemv_rows (N == 1) and
//   matmul_gemv_cols (M == 1), matrix-vector products; split-K, kernel 4 over K ranges into a workspace
//   summed by matmul_splitk_reduce, when there are too few output tiles to fill the GPU and K is large;
//   stream-K, matmul_kernel4_streamk and matmul_streamk_fixup, when the tiles fill the SMs unevenly)
//   matmul_kernel5  tensor cores: warp-wide mma.sync products of 16 x 8 tiles (TF32 for float32
//                   inputs, BF16 for bfloat16 ones, float32 sums), fed by kernel 4's cp.async ring
//                   through XOR-swizzled shared tiles (sm_80+ only); tall float32 products read B^T,
//                   written rounded to TF32 by matmul_transpose_tf32 first
//   (version 5 plans as version 4: split K over kernel 5's tiles, summed by matmul_splitk_reduce, and
//   for float32 matrix-vector products version 4's kernels)
//
// This file includes no PyTorch tensor headers, so editing it recompiles in about a second.
// Tensors, the version switch and op registration live in matmul.cpp.
#include <algorithm>
#include <cstdint>
#include <string>

#include <cuda.h>  // CUtensorMap (TMA descriptors; kernel 6)
#include <cuda_bf16.h>

#include <course/cuda.cuh>

#include "matmul.h"

namespace {

constexpr int64_t kMaxGridY = 65535;  // CUDA's limit on gridDim.y (row tiles go there)
constexpr int64_t kMaxGridZ = 65535;  // and on gridDim.z (batch elements, and K splits, go there)

// ---------------------------------------------------------------------------------- kernel 1
[[maybe_unused]] constexpr int kBlock1X = 32, kBlock1Y = 8;

// Grid (ceil(N / 32), ceil(M / 8)), block (32, 8): thread (tx, ty) computes C[row][col] with
// row = 8 by + ty, col = 32 bx + tx. A warp reads one B row segment (coalesced) and one A element
// (a broadcast) per k.
[[maybe_unused]] __global__ void matmul_kernel1(const float* __restrict__ A, const float* __restrict__ B,
                                                float* __restrict__ C, int64_t M, int64_t N, int64_t K) {
  // BEGIN SOLUTION
  // TODO: compute this thread's row and col; if both are inside C, sum A[row][k] * B[k][col] over
  // TODO: k < K in a float accumulator and store it in C[row][col] (row-major: C[row * N + col]).
  // TODO: (the reference solution takes about 7 lines)
  // END SOLUTION
}

// ---------------------------------------------------------------------------------- kernel 2
constexpr int kTile2 = 32;

// Grid (ceil(N / 32), ceil(M / 32)), block (32, 32): thread (tx, ty) computes C[32 by + ty][32 bx + tx].
// For each 32-wide step of k, the block copies a 32 x 32 tile of A and of B into shared memory
// (thread (tx, ty) copies one element of each, zero outside the matrices), then every thread
// reads 32 values of each from shared memory.
[[maybe_unused]] __global__ void matmul_kernel2(const float* __restrict__ A, const float* __restrict__ B,
                                                float* __restrict__ C, int64_t M, int64_t N, int64_t K) {
  [[maybe_unused]] __shared__ float As[kTile2][kTile2];
  [[maybe_unused]] __shared__ float Bs[kTile2][kTile2];
  const int tx = threadIdx.x, ty = threadIdx.y;
  const int64_t row = int64_t(blockIdx.y) * kTile2 + ty;
  const int64_t col = int64_t(blockIdx.x) * kTile2 + tx;
  float acc = 0.0f;
  for (int64_t k0 = 0; k0 < K; k0 += kTile2) {
    // BEGIN SOLUTION
    // TODO: copy A[row][k0 + tx] into As[ty][tx] and B[k0 + ty][col] into Bs[ty][tx] (0 where the
    // TODO: index is outside A or B), wait for the whole block, add As[ty][k] * Bs[k][tx] for
    // TODO: k < kTile2 to acc, and wait again before the next step overwrites the tiles.
    // TODO: (the reference solution takes about 6 lines)
    // END SOLUTION
  }
  if (row < M && col < N) C[row * N + col] = acc;
}

// ---------------------------------------------------------------------------------- kernel 3
[[maybe_unused]] constexpr int kBM = 128, kBN = 128, kBK = 8;  // block tile: 128 x 128 outputs, 8-deep k steps
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
[[maybe_unused]] __device__ __forceinline__ void store_stage(const Stage& s, float (*As)[kBM], float (*Bs)[kBN]) {
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
  // TODO: stage k step 0 (load_stage, then store_stage into buffer 0) and __syncthreads(). Then for
  // TODO: each step: load the next step's stage into registers (if there is one); for each of the kBK
  // TODO: k's, read your 8 A values (As[cur][k][4 ty..], As[cur][k][64 + 4 ty..]) and 8 B values
  // TODO: (Bs[cur][k][4 tx..], [64 + 4 tx..]) as float4s and do the 64 FMAs into acc; store the next
  // TODO: stage into the other buffer; __syncthreads().
  // TODO: (the reference solution takes about 26 lines)
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
constexpr int kRow4 = kBM4 + 4;     // a stage row (As[k], Bs[k]): padded by 4 floats, conflict-free transposing copies
constexpr int kRowStep4 = 16;       // tile rows between one thread's transposing copies (4 warps x 4 rows)
constexpr int kCopies4 = kBM4 / kRowStep4;  // 8 four-byte copies per thread per step, either way
static_assert(kBM4 == kBN4 && kBK4 == 8, "one copy scheme serves A's and B's tiles: 128 rows of 8 k's");

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

// One shared-memory stage of the ring: A transposed (As[k][m]) and B (Bs[k][n]), rows padded.
struct Stage4 {
  float As[kBK4][kRow4];
  float Bs[kBK4][kRow4];
};

// The copies of one operand's tile, 128 rows (m of A, n of B) by kBK4 k's per step, into a stage
// array dst[k][row]. Pointers and bounds are worked out once, so a step's copies cost a few integer
// instructions each. Which way the stored rows run decides the copy (a warp's 32 lanes always read
// whole 32-byte sectors):
// - AlongK: rows of the matrix run along k (A row-major, A[m][k] at m ld + k; or B stored transposed,
//   B[k][n] at n ld + k). Each warp copies blocks of 4 rows x 8 k, 4 bytes a lane (its row lane / 8,
//   its k lane % 8), 8 such copies 16 rows apart, and writes them transposed into dst (the padding
//   puts a column's 8 k's in 8 different banks).
// - AcrossK: rows run across the tile (B row-major, B[k][n] at k ld + n; or A stored transposed, A[m][k]
//   at k ld + m): straight copies, consecutive threads consecutive floats of a row, 16 bytes each
//   (kVec: the row length and ld multiples of 4, the matrix 16-byte aligned) or 4.
// Both take (matrix, ld: its row stride, rows: its extent along the tile's 128, r0: the tile's first,
// k0 and k_len: the block's K range); what lies outside the matrix or the range is zero-filled.
struct AlongK {
  const float* base;  // the matrix: the (unread) source of a zero-filled copy
  const float* p;     // this thread's first copy of the next step: row r0 + r, k0 + c
  int64_t stride;     // between its copies: kRowStep4 rows
  int64_t k_left;     // k's of the range from the next step on
  int rows_in;        // how many of its copies have their row inside the matrix
  int r, c;

  __device__ __forceinline__ AlongK(const float* m, int64_t ld, int64_t rows, int64_t r0, int64_t k0, int64_t k_len)
      : base(m), stride(int64_t(kRowStep4) * ld), k_left(k_len) {
    const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
    r = warp * 4 + lane / 8;
    c = lane % 8;
    p = m + (r0 + r) * ld + k0 + c;
    rows_in = 0;
#pragma unroll
    for (int i = 0; i < kCopies4; ++i) rows_in += r0 + r + i * kRowStep4 < rows;
  }

  __device__ __forceinline__ void load(float (&dst)[kBK4][kRow4]) {
    const bool k_ok = c < k_left;
#pragma unroll
    for (int i = 0; i < kCopies4; ++i) {
      const bool ok = k_ok && i < rows_in;
      cp_async4(&dst[c][r + i * kRowStep4], ok ? p + i * stride : base, ok);
    }
    p += kBK4;
    k_left -= kBK4;
  }
};

template <bool kVec>
struct AcrossK {
  static constexpr int kKStep = kVec ? kThreads4 / (kBN4 / 4) : kThreads4 / kBN4;  // k rows per pass: 4 or 1
  static constexpr int kCopies = kBK4 / kKStep;                                     // 2 or 8
  const float* base;  // the matrix: the (unread) source of a zero-filled copy
  const float* p;     // this thread's first copy of the next step: stored row k0 + r, column r0 + c
  int64_t stride;     // between its copies: kKStep stored rows
  int64_t k_left;
  bool col_ok;        // its column (group of 4, with kVec) is inside the matrix
  int r, c;

  __device__ __forceinline__ AcrossK(const float* m, int64_t ld, int64_t rows, int64_t r0, int64_t k0, int64_t k_len)
      : base(m), stride(int64_t(kKStep) * ld), k_left(k_len) {
    const int tid = threadIdx.x;
    c = kVec ? 4 * (tid % (kBN4 / 4)) : tid % kBN4;
    r = kVec ? tid / (kBN4 / 4) : tid / kBN4;
    p = m + (k0 + r) * ld + r0 + c;
    col_ok = r0 + c < rows;  // with kVec the extent is a multiple of 4: a group is wholly in or out
  }

  __device__ __forceinline__ void load(float (&dst)[kBK4][kRow4]) {
#pragma unroll
    for (int i = 0; i < kCopies; ++i) {
      const bool ok = col_ok && r + i * kKStep < k_left;
      if (kVec) {
        cp_async16(&dst[r + i * kKStep][c], ok ? p + i * stride : base, ok);
      } else {
        cp_async4(&dst[r + i * kKStep][c], ok ? p + i * stride : base, ok);
      }
    }
    p += kCopies * stride;
    k_left -= kBK4;
  }
};

// This thread's copies of A's and B's tiles for the k steps, in order. A is row-major (M x K), or with
// kTransA stored transposed (its storage a contiguous K x M matrix: `x.mT` of one); B is row-major
// (K x N), or with kTransB stored transposed (N x K: nn.Linear's `W.t()`). kVecB: N % 4 == 0, and B
// (row-major) and C 16-byte aligned.
template <bool kVecB, bool kTransA, bool kTransB>
struct Loader4 {
  std::conditional_t<kTransA, AcrossK<false>, AlongK> a;
  std::conditional_t<kTransB, AlongK, AcrossK<kVecB>> b;

  __device__ __forceinline__ Loader4(const float* A, const float* B, int64_t M, int64_t N, int64_t K, int64_t k0,
                                     int64_t k_len, int64_t m0, int64_t n0)
      : a(A, kTransA ? M : K, M, m0, k0, k_len), b(B, kTransB ? K : N, N, n0, k0, k_len) {}

  // Issue the copies of the next k step into stage `s`, zero-filling what lies outside A or B.
  __device__ __forceinline__ void load(Stage4& s) {
    a.load(s.As);
    b.load(s.Bs);
  }
};

// One 128 x 128 tile of C over a K range (given frame; the loop is yours): this thread's 16 x 8 outputs
// in acc gain A[m0:m0 + 128, k0:k0 + k_len] times B[k0:k0 + k_len, n0:n0 + 128], through the 3-stage
// cp.async ring in shared memory. arow, bcol: the thread's first row and column in the tile (below).
template <bool kVecB, bool kTransA, bool kTransB>
__device__ __forceinline__ void tile_product4(Stage4 (&ring)[kStages4], const float* __restrict__ A,
                                              const float* __restrict__ B, int64_t M, int64_t N, int64_t K,
                                              int64_t k0, int64_t k_len, int64_t m0, int64_t n0, int arow, int bcol,
                                              float (&acc)[kTM4][kTN4]) {
  const int64_t steps = course::ceil_div<int64_t>(k_len, kBK4);
  Loader4<kVecB, kTransA, kTransB> loader(A, B, M, N, K, k0, k_len, m0, n0);

  // Prologue: the first kStages4 - 1 k steps in flight. A group is committed even when empty, so the
  // count of pending groups stays in step with the loop's wait.
#pragma unroll
  for (int s = 0; s < kStages4 - 1; ++s) {
    if (s < steps) loader.load(ring[s]);
    cp_async_commit();
  }
  [[maybe_unused]] int read = 0, write = kStages4 - 1;  // the stage computed on now, the stage being filled
  for (int64_t step = 0; step < steps; ++step) {
    // BEGIN SOLUTION
    // TODO: wait until this step's copies have landed (cp_async_wait<kStages4 - 2>: only the newer
    // TODO: step's group may still be pending) and __syncthreads() (everyone's copies landed, and
    // TODO: nobody still reads ring[write]). Issue step + kStages4 - 1's copies into ring[write] if
    // TODO: that step exists, and commit a group either way. Then for each of the kBK4 k's read your
    // TODO: 16 A values (ring[read].As[k][arow + 16 g ..], g < 4) and 8 B values (ring[read].Bs[k]
    // TODO: [bcol + 32 h ..], h < 2) as float4s and do the 128 FMAs into acc. Last, advance read and
    // TODO: write by one stage each, wrapping from kStages4 - 1 to 0.
    // TODO: (the reference solution takes about 26 lines)
    // END SOLUTION
  }
  cp_async_wait<0>();  // only empty groups can be pending here, but leave none behind
}

// Write a thread's 16 x 8 outputs into `out` (rows x cols, row-major) at rows m0 + arow + ..., columns
// n0 + bcol + ...: 4 groups of rows, 2 groups of 4 columns; a float4 store where kVec (cols % 4 == 0,
// out 16-byte aligned: a whole group is in or out).
template <bool kVec>
__device__ __forceinline__ void store_tile4(float* __restrict__ out, const float (&acc)[kTM4][kTN4], int64_t rows,
                                            int64_t cols, int64_t m0, int64_t n0, int arow, int bcol) {
#pragma unroll
  for (int i = 0; i < kTM4; ++i) {
    const int64_t row = m0 + arow + 16 * (i / 4) + i % 4;
    if (row >= rows) continue;
#pragma unroll
    for (int h = 0; h < kTN4 / 4; ++h) {
      const int64_t col = n0 + bcol + 32 * h;
      const float* v = &acc[i][4 * h];
      if (kVec) {
        if (col < cols) *reinterpret_cast<float4*>(out + row * cols + col) = make_float4(v[0], v[1], v[2], v[3]);
      } else {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          if (col + j < cols) out[row * cols + col + j] = v[j];
        }
      }
    }
  }
}

// Grid (ceil(N / 128), ceil(M / 128), batch x splits), 128 threads (2 x 2 warps, each 64 x 64 of C), 16 x 8
// outputs per thread, 3-stage cp.async ring. blockIdx.z = batch element * splits + split: the block
// multiplies that batch element's A[:, k0:k0 + k_split] by B[k0:k0 + k_split, :] (k0 = split * k_split)
// into the (M, N) matrix z of C: the output itself when splits == 1 (k_split = K), else the split-K
// workspace [batch, splits, M, N] that matmul_splitk_reduce sums. kTransA, kTransB: the loader's other
// layouts (A or B stored transposed); the loop is the same for all of them.
template <bool kVecB, bool kTransA = false, bool kTransB = false>
__global__ void __launch_bounds__(kThreads4, 2)
    matmul_kernel4(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C, int64_t M,
                   int64_t N, int64_t K, int64_t k_split, int64_t splits) {
  __shared__ __align__(16) Stage4 ring[kStages4];  // 3 x 8.25 KiB
  const int64_t z = blockIdx.z, batch = z / splits, k0 = (z - batch * splits) * k_split;
  const int64_t k_len = k_split < K - k0 ? k_split : K - k0;
  A += batch * M * K;  // this batch element's A and B (M K and K N floats in either layout); the loader
  B += batch * K * N;  // starts them at k0
  C += z * M * N;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int wm = warp / kWarpsN4, wn = warp % kWarpsN4;
  // A warp's lanes form a 4 x 8 patch: lane owns rows arow + 16 g + (0..3), g < 4, and columns
  // bcol + 32 h + (0..3), h < 2, of the block's tile (kernel 3's layout, twice as many rows).
  const int arow = wm * 64 + 4 * (lane / 8);
  const int bcol = wn * 64 + 4 * (lane % 8);
  const int64_t m0 = int64_t(blockIdx.y) * kBM4, n0 = int64_t(blockIdx.x) * kBN4;
  float acc[kTM4][kTN4] = {};
  tile_product4<kVecB, kTransA, kTransB>(ring, A, B, M, N, K, k0, k_len, m0, n0, arow, bcol, acc);
  store_tile4<kVecB>(C, acc, M, N, m0, n0, arow, bcol);
}

// Stream-K (given): kernel 4's tiles when they fill more than two thirds of the SMs but less than a
// wave of 2 blocks per SM (plan4). One block per tile would leave most SMs one block, whose 4 warps
// cannot hide the loads' latency, and some SMs none or two. Instead `workers` blocks (as many as the
// GPU holds at once) share the tiles x k steps equally: worker w takes iterations w T / W up to
// (w + 1) T / W of the T = tiles x steps, tile by tile, so at most the end of one tile and the start of
// the next (T / W <= steps). A tile a worker runs whole goes straight into C; a part of a tile goes
// into the worker's slot of the workspace [workers, 2, 128, 128] (its first part in slot 0, a second
// in slot 1), and matmul_streamk_fixup adds a tile's parts in worker order. Grid (workers), 128 threads.
__device__ __forceinline__ int64_t streamk_begin(int64_t worker, int64_t total, int64_t workers) {
  return worker * total / workers;
}

template <bool kVecB>
__global__ void __launch_bounds__(kThreads4, 2)
    matmul_kernel4_streamk(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C,
                           float* __restrict__ workspace, int64_t M, int64_t N, int64_t K, int64_t workers) {
  __shared__ __align__(16) Stage4 ring[kStages4];
  const int64_t tile_cols = course::ceil_div<int64_t>(N, kBN4);
  const int64_t steps = course::ceil_div<int64_t>(K, kBK4);
  const int64_t total = course::ceil_div<int64_t>(M, kBM4) * tile_cols * steps;
  const int64_t worker = blockIdx.x, end = streamk_begin(worker + 1, total, workers);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int arow = (warp / kWarpsN4) * 64 + 4 * (lane / 8), bcol = (warp % kWarpsN4) * 64 + 4 * (lane % 8);
  int part = 0;
  for (int64_t it = streamk_begin(worker, total, workers); it < end; ++part) {
    const int64_t tile = it / steps, first = it - tile * steps;  // k steps first .. last - 1 of this tile
    const int64_t last = end - it < steps - first ? first + (end - it) : steps;
    const int64_t m0 = tile / tile_cols * kBM4, n0 = tile % tile_cols * kBN4, k0 = first * kBK4;
    const int64_t k_len = (last * kBK4 < K ? last * kBK4 : K) - k0;
    float acc[kTM4][kTN4] = {};
    tile_product4<kVecB, false, false>(ring, A, B, M, N, K, k0, k_len, m0, n0, arow, bcol, acc);
    __syncthreads();  // every warp is done with the ring before the next part refills it
    if (first == 0 && last == steps) {
      store_tile4<kVecB>(C, acc, M, N, m0, n0, arow, bcol);
    } else {
      store_tile4<true>(workspace + (2 * worker + part) * kBM4 * kBN4, acc, kBM4, kBN4, 0, 0, arow, bcol);
    }
    it += last - first;
  }
}

// The worker whose iterations hold iteration `it` (streamk_begin(w) <= it < streamk_begin(w + 1)).
__device__ __forceinline__ int64_t streamk_worker(int64_t it, int64_t total, int64_t workers) {
  int64_t w = it * workers / total;
  while (w + 1 < workers && streamk_begin(w + 1, total, workers) <= it) ++w;
  while (w > 0 && streamk_begin(w, total, workers) > it) --w;
  return w;
}

// C's tiles that several workers shared: each output the sum of its tile's parts, in worker order (the
// same bits every run). Grid (tiles, 128 * 128 / (4 * 256)), 256 threads, 4 outputs a thread.
__global__ void __launch_bounds__(256)
    matmul_streamk_fixup(const float* __restrict__ workspace, float* __restrict__ C, int64_t M, int64_t N, int64_t K,
                         int64_t workers) {
  course::wait_for_previous();  // launched overlapping the workers (launch_streamk)
  const int64_t tile_cols = course::ceil_div<int64_t>(N, kBN4);
  const int64_t steps = course::ceil_div<int64_t>(K, kBK4);
  const int64_t total = course::ceil_div<int64_t>(M, kBM4) * tile_cols * steps;
  const int64_t tile = blockIdx.x, first = tile * steps;
  const int64_t w0 = streamk_worker(first, total, workers), w1 = streamk_worker(first + steps - 1, total, workers);
  if (w0 == w1 && streamk_begin(w0, total, workers) <= first) return;  // one worker ran it whole, into C
  const int e = 4 * (blockIdx.y * blockDim.x + threadIdx.x), r = e / kBN4, c = e % kBN4;
  const int64_t row = tile / tile_cols * kBM4 + r, col = tile % tile_cols * kBN4 + c;
  if (row >= M || col >= N) return;
  float4 sum = make_float4(0.f, 0.f, 0.f, 0.f);
  for (int64_t w = w0; w <= w1; ++w) {
    const int part = streamk_begin(w, total, workers) >= first ? 0 : 1;  // the tile is w's first or second
    const float4 v = *reinterpret_cast<const float4*>(workspace + (2 * w + part) * kBM4 * kBN4 + e);
    sum.x += v.x, sum.y += v.y, sum.z += v.z, sum.w += v.w;
  }
  const float out[4] = {sum.x, sum.y, sum.z, sum.w};
  for (int j = 0; j < 4 && col + j < N; ++j) C[row * N + col + j] = out[j];
}

// ---------------------------------------------------------------------------------- version 4's other shapes
// Given code. Kernel 4 launches one block per 128 x 128 tile of C, each running down all of K. That
// fits most shapes; these do not fill the GPU that way (the README's "Shape classes"; and tiles that
// leave most SMs one block: stream-K, above):
//   N == 1 or M == 1: a matrix-vector product. One tile row or column is 1/128 used, and each value of
//     the matrix is used once: the product is bound by reading the matrix, so read it once, coalesced.
//   few tiles and a long K: a 64 x 64 x 2^20 product is one block for one SM, and every output is one
//     2^20-long chain of float32 additions (an error near sqrt(K) u). Split K: each split multiplies a
//     K range into its own matrix of a float32 workspace, and matmul_splitk_reduce sums the splits.
// Both are deterministic: every sum is taken in a fixed order (no atomics), the same bits every run.
constexpr int kGemvThreads = 256;
constexpr int kGemvRowsPerBlock = kGemvThreads / 32;  // matmul_gemv_rows: a warp per row of A
constexpr int kGemvVec = 4 * 32;                      // floats a warp reads per float4 step of a row
constexpr int kGemvColsWarps = kGemvThreads / 32;     // matmul_gemv_cols: 8 warps split a block's k range
constexpr int kGemvColsPerBlock = 4 * 32;             // and each covers its 128 columns, 4 a lane
constexpr int kGemvColsNarrow = 16;                   // or 16 columns, 8 rows a warp (few columns)

// Grid (ceil(M / 8), splits, batch), 256 threads: warp w of block x computes row r = 8 x + w of
// C = A x (N == 1) over split y's k range [k0, k1) (k0 = y k_split) of batch element z, writing it to
// out[z][y][r] (out: C itself when splits == 1). Lane l sums A[r][k] x[k] for the float4 groups
// k0 + 4 l + 128 i (kVec: K % 4 == 0, k_split % 4 == 0, A and x 16-byte aligned) while whole 128-float
// steps fit, then the tail's floats k l + 32 i; a shuffle tree adds the 32 lanes' sums, in the same
// order every run.
template <bool kVec>
__global__ void __launch_bounds__(kGemvThreads)
    matmul_gemv_rows(const float* __restrict__ A, const float* __restrict__ x, float* __restrict__ out, int64_t M,
                     int64_t K, int64_t k_split) {
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int64_t row = int64_t(blockIdx.x) * kGemvRowsPerBlock + warp;
  if (row >= M) return;  // the whole warp
  const int64_t batch = blockIdx.z, split = blockIdx.y;
  const int64_t k0 = split * k_split, k1 = K - k0 < k_split ? K : k0 + k_split;
  const float* a = A + (batch * M + row) * K;
  const float* v = x + batch * K;
  float acc = 0.0f;
  int64_t k = k0;
  if (kVec) {
    const int64_t full = k0 + (k1 - k0) / kGemvVec * kGemvVec;  // end of the whole 128-float steps
#pragma unroll 4
    for (int64_t i = k0 + 4 * lane; i < full; i += kGemvVec) {
      const float4 p = *reinterpret_cast<const float4*>(a + i), q = *reinterpret_cast<const float4*>(v + i);
      acc = fmaf(p.x, q.x, acc);
      acc = fmaf(p.y, q.y, acc);
      acc = fmaf(p.z, q.z, acc);
      acc = fmaf(p.w, q.w, acc);
    }
    k = full;
  }
  for (int64_t i = k + lane; i < k1; i += 32) acc = fmaf(a[i], v[i], acc);  // the tail (all of it without kVec)
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) acc += __shfl_xor_sync(0xffffffffu, acc, offset);
  if (lane == 0) out[(batch * gridDim.y + split) * M + row] = acc;
}

// Grid (ceil(N / W), splits, batch), 256 threads, W = kBlockCols: block x computes columns c0 = W x ..
// c0 + W - 1 of C = a B (M == 1) over split y's k range [k0, k1) of batch element z, into
// out[z][y][..]. A warp reads 32 / (W / 4) rows of B at once, W / 4 lanes a row, a float4 of 4 columns
// each (kVec: N % 4 == 0 and B 16-byte aligned, else four floats): lane l of warp w sums columns
// c0 + 4 (l % (W / 4)) .. + 3 over k = k0 + r, k0 + r + R, .. (r = w rows + l / (W / 4), R the rows
// the block reads at once). W = 128: a warp reads 512 consecutive bytes of one row; the block's 8
// warps 8 rows, each with several loads in flight (a thread per column and all of k in one thread
// left the memory system mostly idle: 9.5 us for GPT-2's 768 x 768, 2.4 MB). W = 16, where 128
// columns a block would leave SMs idle (GPT-2's 768 -> 3072 at one token: 24 blocks): 8 rows of 64
// bytes a warp, 8 times the blocks, and K split less or not at all (no reduction to launch). The
// lanes of one column group add their sums by a shuffle tree, the 8 warps' sums meet in shared memory
// and are added in warp order (the same bits every run).
template <bool kVec, int kBlockCols>
__global__ void __launch_bounds__(kGemvThreads)
    matmul_gemv_cols(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ out, int64_t N,
                     int64_t K, int64_t k_split) {
  constexpr int kRowLanes = kBlockCols / 4, kWarpRows = 32 / kRowLanes;  // lanes a row, rows a warp
  constexpr int kBlockRows = kGemvColsWarps * kWarpRows;            // rows the block reads at once
  __shared__ __align__(16) float sums[kGemvColsWarps][kBlockCols];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, quad = lane % kRowLanes;
  const int64_t batch = blockIdx.z, split = blockIdx.y;
  const int64_t k0 = split * k_split, k1 = K - k0 < k_split ? K : k0 + k_split;
  const int64_t c0 = int64_t(blockIdx.x) * kBlockCols, col = c0 + 4 * quad;
  const float* a = A + batch * K;
  const float* b = B + batch * K * N + col;
  float4 acc = make_float4(0.0f, 0.0f, 0.0f, 0.0f);
  if (col < N) {  // no return: the warp meets at the shuffles, the block at the barrier below
#pragma unroll 4
    for (int64_t k = k0 + warp * kWarpRows + lane / kRowLanes; k < k1; k += kBlockRows) {
      const float ak = a[k];
      float4 q;
      if (kVec) {
        q = *reinterpret_cast<const float4*>(b + k * N);
      } else {
        const float* row = b + k * N;
        q = make_float4(row[0], col + 1 < N ? row[1] : 0.0f, col + 2 < N ? row[2] : 0.0f, col + 3 < N ? row[3] : 0.0f);
      }
      acc.x = fmaf(ak, q.x, acc.x);
      acc.y = fmaf(ak, q.y, acc.y);
      acc.z = fmaf(ak, q.z, acc.z);
      acc.w = fmaf(ak, q.w, acc.w);
    }
  }
#pragma unroll
  for (int offset = kRowLanes; offset < 32; offset *= 2) {  // the warp's rows (W = 128: one, no shuffle)
    acc.x += __shfl_xor_sync(0xffffffffu, acc.x, offset);
    acc.y += __shfl_xor_sync(0xffffffffu, acc.y, offset);
    acc.z += __shfl_xor_sync(0xffffffffu, acc.z, offset);
    acc.w += __shfl_xor_sync(0xffffffffu, acc.w, offset);
  }
  if (lane < kRowLanes) *reinterpret_cast<float4*>(&sums[warp][4 * lane]) = acc;
  __syncthreads();
  const int64_t c = c0 + threadIdx.x;
  if (threadIdx.x < kBlockCols && c < N) {
    float total = sums[0][threadIdx.x];
#pragma unroll
    for (int w = 1; w < kGemvColsWarps; ++w) total += sums[w][threadIdx.x];
    out[(batch * gridDim.y + split) * N + c] = total;
  }
}

// Small tiles: a product with a side of 64 or less whose 128 x 128 tiles are fewer than the SMs (a
// layer's batch of 32 by its weights, 32 x 2048 by 2048 x 1000; GPT-2's MLP at 64 tokens; a 64 x 64
// output over a long K). Kernel 4's tile would be mostly outside C (3/4 of its rows for M = 32, every
// one still multiplied) and its 4-byte copies of A are slow where the product only streams its operands.
// Here a tile is kSmallArea outputs shaped to the product, BM x BN = 32 x 128, 64 x 64 or 128 x 32,
// 4 x 4 per thread, with float4 loads of both operands staged in registers (the next 32-k step's loads
// in flight while this step's FMAs run) and split K as kernel 4's.
constexpr int kSmallThreads = 256;
constexpr int kSmallArea = 16 * kSmallThreads;  // outputs per tile: 4 x 4 per thread
constexpr int kSmallBK = 32;                   // k per step: 8 to 16 KiB of loads in flight per block
constexpr int64_t kSmallSide = 64;             // the longest short side that takes these tiles

// Grid (ceil(N / BN), ceil(M / BM), batch x splits), 256 threads: thread (ty, tx) =
// (tid / (BN / 4), tid % (BN / 4)) owns rows 4 ty .. 4 ty + 3 and columns 4 tx .. 4 tx + 3 of the tile.
// blockIdx.z as kernel 4's: batch element * splits + split, into C or the split-K workspace. Per step,
// the block's A (BM x 32) and B (32 x BN) are kSmallArea / 8 float4s each: thread q's float4 of A is row
// q / 8, k 4 (q % 8) .. (8 threads read a row's 128 bytes), of B row q / (BN / 4), columns
// 4 (q % (BN / 4)) .. (a warp reads whole rows). kVec: K and N multiples of 4, A, B and C 16-byte
// aligned and k_split a multiple of 4, so a float4 is wholly inside or wholly outside; otherwise the
// same elements one by one. A is stored transposed (As[k][row], rows padded by 4 floats) so that a
// thread reads its 4 rows as one float4.
// 4 consecutive floats of a row, src[row * ld + col ..], into v: zeros for the whole quad unless
// `inside`, and past column `cols`. kVec: one float4 load (col a multiple of 4, ld and cols too, src
// 16-byte aligned: a quad lies wholly before cols or wholly past it); else element by element.
template <bool kVec>
__device__ __forceinline__ void load_quad(float (&v)[4], const float* __restrict__ src, int64_t row, int64_t col,
                                          int64_t ld, bool inside, int64_t cols) {
  if (kVec) {
    const float4 q = inside && col < cols ? *reinterpret_cast<const float4*>(src + row * ld + col)
                                          : make_float4(0.f, 0.f, 0.f, 0.f);
    v[0] = q.x, v[1] = q.y, v[2] = q.z, v[3] = q.w;
  } else {
#pragma unroll
    for (int e = 0; e < 4; ++e) v[e] = inside && col + e < cols ? src[row * ld + col + e] : 0.f;
  }
}

template <int BM, bool kVec>
__global__ void __launch_bounds__(kSmallThreads, 2)  // up to 128 registers: capped at 64, one spilled
    matmul_small_tiles(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ C, int64_t M,
                       int64_t N, int64_t K, int64_t k_split, int64_t splits) {
  constexpr int BN = kSmallArea / BM, kBNQuads = BN / 4, kKQuads = kSmallBK / 4;  // float4s per row of B, of A
  constexpr int kAQuads = BM * kSmallBK / 4, kBQuads = kSmallBK * kBNQuads;  // float4s per step
  constexpr int kAPer = (kAQuads + kSmallThreads - 1) / kSmallThreads;  // float4s a thread loads per step
  constexpr int kBPer = (kBQuads + kSmallThreads - 1) / kSmallThreads;
  static_assert(kBNQuads * (BM / 4) == kSmallThreads, "a thread per 4 x 4 outputs");
  __shared__ __align__(16) float As[2][kSmallBK][BM + 4];
  __shared__ __align__(16) float Bs[2][kSmallBK][BN];
  const int64_t z = blockIdx.z, batch = z / splits, k0 = (z - batch * splits) * k_split;
  const int64_t k_len = k_split < K - k0 ? k_split : K - k0;
  A += batch * M * K + k0;
  B += (batch * K + k0) * N;
  C += z * M * N;
  const int64_t m0 = int64_t(blockIdx.y) * BM, n0 = int64_t(blockIdx.x) * BN;
  const int tid = threadIdx.x, tx = tid % kBNQuads, ty = tid / kBNQuads;
  float ra[kAPer][4], rb[kBPer][4];
  auto load = [&](int64_t k) {  // the step at k (within the split) into ra, rb; zeros outside
#pragma unroll
    for (int i = 0; i < kAPer; ++i) {
      const int q = tid + i * kSmallThreads;
      const int64_t row = m0 + q / kKQuads, col = k + 4 * (q % kKQuads);
      load_quad<kVec>(ra[i], A, row, col, K, q < kAQuads && row < M, k_len);
    }
#pragma unroll
    for (int i = 0; i < kBPer; ++i) {
      const int q = tid + i * kSmallThreads;
      const int64_t row = k + q / kBNQuads, col = n0 + 4 * (q % kBNQuads);
      load_quad<kVec>(rb[i], B, row, col, N, q < kBQuads && row < k_len, N);
    }
  };
  auto store = [&](int buf) {
#pragma unroll
    for (int i = 0; i < kAPer; ++i) {
      const int q = tid + i * kSmallThreads;
      if (q < kAQuads) {
#pragma unroll
        for (int e = 0; e < 4; ++e) As[buf][4 * (q % kKQuads) + e][q / kKQuads] = ra[i][e];
      }
    }
#pragma unroll
    for (int i = 0; i < kBPer; ++i) {
      const int q = tid + i * kSmallThreads;
      if (q < kBQuads) {
        *reinterpret_cast<float4*>(&Bs[buf][q / kBNQuads][4 * (q % kBNQuads)]) =
            make_float4(rb[i][0], rb[i][1], rb[i][2], rb[i][3]);
      }
    }
  };
  float acc[4][4] = {};
  const int64_t steps = course::ceil_div<int64_t>(k_len, kSmallBK);
  if (steps > 0) {
    load(0);
    store(0);
  }
  __syncthreads();
  for (int64_t step = 0; step < steps; ++step) {
    const int buf = step & 1;
    const bool more = step + 1 < steps;
    if (more) load((step + 1) * kSmallBK);
#pragma unroll
    for (int k = 0; k < kSmallBK; ++k) {
      const float4 a = *reinterpret_cast<const float4*>(&As[buf][k][4 * ty]);
      const float4 b = *reinterpret_cast<const float4*>(&Bs[buf][k][4 * tx]);
      const float av[4] = {a.x, a.y, a.z, a.w}, bv[4] = {b.x, b.y, b.z, b.w};
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) acc[i][j] = fmaf(av[i], bv[j], acc[i][j]);
    }
    if (more) {  // the other buffer was last read before the previous barrier: safe to overwrite
      store(buf ^ 1);
      __syncthreads();
    }
  }
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    const int64_t row = m0 + 4 * ty + i, col = n0 + 4 * tx;
    if (row >= M) continue;
    if (kVec) {
      if (col < N) *reinterpret_cast<float4*>(C + row * N + col) = make_float4(acc[i][0], acc[i][1], acc[i][2], acc[i][3]);
    } else {
#pragma unroll
      for (int j = 0; j < 4; ++j) {
        if (col + j < N) C[row * N + col + j] = acc[i][j];
      }
    }
  }
}

// Two neighbouring outputs (x at p[0], y at p[1]) in C's type: float, or bfloat16 rounded to nearest.
__device__ __forceinline__ void store2(float* p, float x, float y) { *reinterpret_cast<float2*>(p) = make_float2(x, y); }
__device__ __forceinline__ void store2(__nv_bfloat16* p, float x, float y) {
  *reinterpret_cast<__nv_bfloat162*>(p) = __floats2bfloat162_rn(x, y);
}
__device__ __forceinline__ void store1(float* p, float x) { *p = x; }
__device__ __forceinline__ void store1(__nv_bfloat16* p, float x) { *p = __float2bfloat16_rn(x); }

// Grid-stride loop over the batch x MN outputs, 256 threads: output e of batch element b is the sum of
// ws[b][s][e] over the splits s, in a fixed order (the same bits every run). A thread takes kVec
// consecutive outputs (4 where MN % 4 == 0 and the pointers allow 16-byte loads: one float4 a split,
// so that enough bytes are in flight; float by float the reduction of a 2-split tail read its 16 MB at
// 1.3 TB/s), each summed as one output alone would be. `slices` threads (1, 2, 4, .., 32) share their
// outputs where those are too few to keep the memory system busy (a matrix-vector product's 768
// outputs of 88 splits, one thread each: 88 reads one after the other, 8 us, longer than the product):
// a block is kGemvThreads / slices units of kVec outputs x `slices` slices, thread t = (slice
// t / units, unit t % units), and slice l sums splits [l per, (l + 1) per) (per = ceil(splits /
// slices)) in groups of `group` (about sqrt(per)), each group in order, then the groups' sums in
// order; slice 0's thread adds the slices' sums in order. No chain of additions is longer than about
// 2 sqrt(per) + slices. Consecutive threads read consecutive floats. C is float32 (versions 4 and 5)
// or bfloat16 (version 5), rounded once from the float32 sum.
constexpr int kReduceLoads = 8;  // splits a thread loads at once, before adding them (all in flight)

template <int kVec>
__device__ __forceinline__ void load_vec(float (&v)[kVec], const float* p) {
  if constexpr (kVec == 4) {
    const float4 q = *reinterpret_cast<const float4*>(p);
    v[0] = q.x, v[1] = q.y, v[2] = q.z, v[3] = q.w;
  } else {
    v[0] = *p;
  }
}

template <typename T, int kVec>
__device__ __forceinline__ void store_vec(T* p, const float (&v)[kVec]) {
  if constexpr (kVec == 1) {
    store1(p, v[0]);
  } else if constexpr (sizeof(T) == 4) {
    *reinterpret_cast<float4*>(p) = make_float4(v[0], v[1], v[2], v[3]);
  } else {
    store2(p, v[0], v[1]);
    store2(p + 2, v[2], v[3]);
  }
}

template <typename T, int kVec>
__global__ void __launch_bounds__(kGemvThreads)
    matmul_splitk_reduce(const float* __restrict__ ws, T* __restrict__ C, int64_t MN, int64_t total,
                         int64_t splits, int64_t group, int slices) {
  __shared__ float slice_sums[kVec][kGemvThreads];
  course::wait_for_previous();  // launched overlapping the product that wrote ws (launch_splitk_reduce)
  const int units = kGemvThreads / slices;  // per block and pass
  const int slice = threadIdx.x / units, o = threadIdx.x - slice * units;
  const int64_t per = (splits + slices - 1) / slices;
  const int64_t first = slice * per, last = first + per < splits ? first + per : splits;
  const int64_t all_units = total / kVec;  // MN % kVec == 0: a unit lies within one batch element
  for (int64_t base = int64_t(blockIdx.x) * units; base < all_units; base += int64_t(gridDim.x) * units) {
    const int64_t i = (base + o) * kVec;  // the unit's first output
    if (i < total) {
      const int64_t b = total == MN ? 0 : i / MN, e = i - b * MN;
      const float* p = ws + b * splits * MN + e;
      float sum[kVec] = {}, part[kVec] = {};
      int64_t in_group = 0;
      for (int64_t s0 = first; s0 < last; s0 += kReduceLoads) {
        float v[kReduceLoads][kVec];
#pragma unroll
        for (int j = 0; j < kReduceLoads; ++j) {
          if (s0 + j < last) load_vec<kVec>(v[j], p + (s0 + j) * MN);
        }
#pragma unroll
        for (int j = 0; j < kReduceLoads; ++j) {
          if (s0 + j >= last) break;
#pragma unroll
          for (int c = 0; c < kVec; ++c) part[c] += v[j][c];
          if (++in_group == group || s0 + j + 1 == last) {  // a group's end: its sum joins the slice's
#pragma unroll
            for (int c = 0; c < kVec; ++c) sum[c] += part[c], part[c] = 0.0f;
            in_group = 0;
          }
        }
      }
      if (slices == 1) {
        store_vec<T, kVec>(C + i, sum);
      } else {
#pragma unroll
        for (int c = 0; c < kVec; ++c) slice_sums[c][threadIdx.x] = sum[c];
      }
    }
    if (slices == 1) continue;  // the same for the whole block
    __syncthreads();
    if (slice == 0 && i < total) {
      float sum[kVec];
#pragma unroll
      for (int c = 0; c < kVec; ++c) {
        sum[c] = slice_sums[c][o];
        for (int l = 1; l < slices; ++l) sum[c] += slice_sums[c][l * units + o];
      }
      store_vec<T, kVec>(C + i, sum);
    }
    __syncthreads();  // slice_sums is rewritten by the next pass
  }
}

// ---------------------------------------------------------------------------------- kernel 5
// Tensor cores. One `mma.sync` instruction makes a whole warp multiply a 16 x 8 (m x k) tile of A by
// an 8 x 8 (TF32) or 16 x 8 (BF16) tile of B into a 16 x 8 tile of C; the operands and the sums live in
// the 32 lanes' registers ("fragments", laid out as the README's pictures show). Inputs are rounded to
// TF32 (10-bit mantissa) or come as bfloat16; the products are summed in float32.
constexpr int kBM5 = 128, kBN5 = 128;      // block tile of C
constexpr int kWarpsM5 = 2, kWarpsN5 = 2;  // 4 warps (128 threads), each a 64 x 64 tile of C
constexpr int kThreads5 = 32 * kWarpsM5 * kWarpsN5;
constexpr int kWM5 = kBM5 / kWarpsM5, kWN5 = kBN5 / kWarpsN5;  // 64 x 64
constexpr int kMTiles5 = kWM5 / 16, kNTiles5 = kWN5 / 8;       // a warp's 4 x 8 mma tiles of 16 x 8
constexpr int kStages5 = 3;                                   // shared-memory ring, as kernel 4's
constexpr int kMinBlocks5 = 2;  // blocks per SM the registers are budgeted for (__launch_bounds__)
constexpr int kAChunks5 = 8;  // 16-byte chunks of k per A row per stage (128 bytes): 32 floats or 64 bfloat16s
static_assert(kAChunks5 == 4 || kAChunks5 == 8, "swizzle_a spreads rows of 4 or 8 chunks");

// The sizes that depend on the input type T (float: TF32 products; __nv_bfloat16: BF16 products).
template <typename T>
struct Tile5 {
  static constexpr int kElems = 16 / sizeof(T);          // elements per 16-byte chunk: 4 or 8
  static constexpr int kBK = kAChunks5 * kElems;         // k per stage: 32 or 64
  static constexpr int kMmaK = sizeof(T) == 4 ? 8 : 16;  // k of one mma: m16n8k8 (TF32), m16n8k16 (BF16)
  static constexpr int kBChunks = kBN5 / kElems;         // chunks per B row: 32 or 16
};

// One stage of the ring, 32 KiB either way (3 stages: 96 KiB, dynamic shared memory), in
// 16-byte chunks: A[m][k] (a row of A holds the stage's k) and B[k][n], or, where kernel 5 reads B^T
// (float32, kBt), Bt[n][k] laid out as A is. Chunk c of a row is stored at the row's chunk
// swizzle(row, c): see swizzle_a and swizzle_b.
template <typename T>
struct Stage5 {
  uint4 A[kBM5][kAChunks5];
  union {
    uint4 B[Tile5<T>::kBK][Tile5<T>::kBChunks];
    uint4 Bt[kBN5][kAChunks5];
  };
};

// The ring is dynamic shared memory, sized at launch: a deeper ring or a larger tile than 48 KiB (the
// static limit) only needs the constants above changed (scripts/tune_matmul5.py tries several). A
// stage is 16 kAChunks5 (kBM5 + kBN5) bytes for either type: kAChunks5 chunks per A row, as many bytes of
// B per column.
constexpr int kSmem5 = kStages5 * 16 * kAChunks5 * (kBM5 + kBN5);
static_assert(size_t(kSmem5) == kStages5 * sizeof(Stage5<float>) &&
                  size_t(kSmem5) == kStages5 * sizeof(Stage5<__nv_bfloat16>),
              "kSmem5 is the ring's size");

// What the copy and fragment code below assume of the tile constants.
static_assert(kWM5 % 16 == 0 && kWN5 % 16 == 0, "a warp's tile: whole 16 x 16 pairs of mma tiles");
static_assert(kBM5 % (kThreads5 / kAChunks5) == 0 && kBN5 % (kThreads5 / kAChunks5) == 0,
              "A and B^T: every thread copies the same number of chunks");
static_assert(sizeof(Stage5<float>::B) == sizeof(Stage5<float>::Bt), "B and B^T fill the same bytes");
static_assert(kThreads5 % Tile5<float>::kBChunks == 0 && kThreads5 % Tile5<__nv_bfloat16>::kBChunks == 0 &&
                  Tile5<float>::kBK % (kThreads5 / Tile5<float>::kBChunks) == 0 &&
                  Tile5<__nv_bfloat16>::kBK % (kThreads5 / Tile5<__nv_bfloat16>::kBChunks) == 0,
              "B: whole rows per pass, whole passes per stage");
static_assert(Tile5<__nv_bfloat16>::kBChunks >= 8, "B's swizzle spreads 8 rows over 8 of a row's chunks");

// XOR swizzles: which 16-byte slot of its row chunk c of row r lives in. Shared memory serves 128 bytes
// (8 chunks, 32 banks) per cycle; a read of 8 chunks that fall in the same slot of 128 bytes takes 8.
// A rows of 4 chunks are 64 bytes: rows r and r + 2 share their slots, so ldmatrix's 8 rows of one chunk
// column would hit 2 slots (4-way conflicts); XOR-ing the chunk with (r / 2) % 4 spreads them over all 8.
// Rows of 8 chunks (128 bytes) all start at slot 0: XOR-ing with r % 8 does the same.
__device__ __forceinline__ int swizzle_a(int r, int c) {
  if constexpr (kAChunks5 == 8) {
    return c ^ (r & 7);
  } else {
    return c ^ ((r >> 1) & 3);
  }
}

// B rows are 4 kBN5 (float) or 2 kBN5 bytes (bfloat16), whole multiples of 128: every row starts at slot 0, so reads down a column
// of B all hit one bank (float) or one slot (bfloat16). float: lanes read B[k0 + t][n0 + g], 4 rows x
// 8 columns; XOR-ing chunk bits 1-2 with k % 4 moves row t by 8 t words: 32 distinct banks. bfloat16:
// ldmatrix reads 8 consecutive rows of one chunk column; XOR-ing with k % 8 puts them in 8 slots.
template <typename T>
__device__ __forceinline__ int swizzle_b(int k, int c) {
  if constexpr (sizeof(T) == 4) {
    return c ^ ((k & 3) << 1);
  } else {
    return c ^ (k & 7);
  }
}

// ldmatrix.x4: four 8 x 8 matrices of 16-bit elements (an 8 x 4 matrix of 32-bit words: the same bytes),
// one 16-byte row each from an address given by a lane: lane l gives row l % 8 of matrix l / 8. Lane
// l receives, in r[i], word l % 4 of row l / 4 of matrix i. `.trans` transposes each matrix (16-bit
// elements): lane l receives elements (2 (l % 4), l / 4) and (2 (l % 4) + 1, l / 4) (row, column).
[[maybe_unused]] __device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* row) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(static_cast<unsigned>(__cvta_generic_to_shared(row))));
#else
  r[0] = r[1] = r[2] = r[3] = 0;  // no tensor-core path before sm_80 (never launched there)
#endif
}

// the same from a shared-memory address (kernel 6 addresses its ring so: TMA and wgmma take them)
[[maybe_unused]] __device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], uint32_t shared_row) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_row));
#else
  r[0] = r[1] = r[2] = r[3] = 0;  // no tensor-core path before sm_80 (never launched there)
#endif
}

[[maybe_unused]] __device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* row) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(static_cast<unsigned>(__cvta_generic_to_shared(row))));
#else
  r[0] = r[1] = r[2] = r[3] = 0;  // no tensor-core path before sm_80 (never launched there)
#endif
}

using course::to_tf32;  // rounded to TF32 (course/cuda.cuh)

// A row of n elements padded to whole 16-byte chunks: B^T's rows (kernel 5 copies them in chunks; TMA's
// row strides are multiples of 16 bytes).
template <typename T>
constexpr int64_t padded16(int64_t n) {
  constexpr int64_t kElems = 16 / sizeof(T);
  return (n + kElems - 1) / kElems * kElems;
}

// Grid (ceil(N / 32), ceil(Kp / 32), batch), block (32, 8): Bt[e][n][k] = B[e][k][n] (rows ldb apart)
// rounded to TF32 (the tensor cores would otherwise truncate it) for k < K, 0 for K <= k < Kp; kept as
// bits, rounded once here for every row tile of C that reads it. Kernel 5 (tall products) and kernel 6
// read float32 B so: K-major, like A, and already rounded.
__global__ void __launch_bounds__(256) matmul_transpose_tf32(const float* __restrict__ B, uint32_t* __restrict__ Bt,
                                                        int64_t K, int64_t N, int64_t ldb, int64_t Kp) {
  __shared__ uint32_t tile[32][33];  // 33: a column of the tile spans all 32 banks
  const int64_t k0 = int64_t(blockIdx.y) * 32, n0 = int64_t(blockIdx.x) * 32;
  B += int64_t(blockIdx.z) * K * ldb;
  Bt += int64_t(blockIdx.z) * N * Kp;
  for (int i = threadIdx.y; i < 32; i += 8) {
    const int64_t k = k0 + i, n = n0 + threadIdx.x;
    tile[i][threadIdx.x] = k < K && n < N ? to_tf32(B[k * ldb + n]) : 0u;
  }
  __syncthreads();
  for (int i = threadIdx.y; i < 32; i += 8) {
    const int64_t n = n0 + i, k = k0 + threadIdx.x;
    if (n < N && k < Kp) Bt[n * Kp + k] = tile[threadIdx.x][i];
  }
}

// B^T of `batch` matrices B (K x N, rows ldb apart) into bt ([batch][N][Kp] words), rounded to TF32:
// kernels 5 and 6 read float32 B so. Batches of more than gridDim.z's limit take several launches.
void launch_transpose_tf32(const float* B, int64_t ldb, uint32_t* bt, int64_t batch, int64_t K, int64_t N, int64_t Kp,
                           cudaStream_t stream) {
  for (int64_t b0 = 0; b0 < batch; b0 += kMaxGridZ) {
    const int64_t nb = std::min(kMaxGridZ, batch - b0);
    const dim3 grid(static_cast<unsigned>(course::ceil_div<int64_t>(N, 32)),
                    static_cast<unsigned>(course::ceil_div<int64_t>(Kp, 32)), static_cast<unsigned>(nb));
    matmul_transpose_tf32<<<grid, dim3(32, 8), 0, stream>>>(B + b0 * K * ldb, bt + b0 * N * Kp, K, N, ldb, Kp);
    C10_CUDA_KERNEL_LAUNCH_CHECK();
  }
}

// d += a b for one 16 x 8 tile: m16n8k8 TF32 (a: 4 registers of one TF32 each, b: 2) or m16n8k16 BF16
// (a: 4 registers of two bfloat16s each, b: 2), float32 sums in d (4 floats).
template <typename T>
__device__ __forceinline__ void mma16x8(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2]) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if constexpr (sizeof(T) == 4) {
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                 "{%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  } else {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                 "{%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
#endif
}

// This thread's copies of the k steps, 16 bytes each, into a stage (swizzled). A: 4 consecutive threads
// copy one row's 16 kAChunks5 bytes (8: 128 bytes, 16 rows per pass, 8 passes). B: a warp copies one
// row (float) or two (bfloat16), 4 or 8 rows per pass, 8 passes. B^T (kBt): as A, rows n of ldbt
// elements (K padded to 16 bytes: its chunks are whole, and zero past K). kVecA (kVecB): K (N) a multiple of a chunk's elements
// and A (B) 16-byte aligned, so a chunk is wholly inside the matrix or wholly outside: one cp.async
// of 16 bytes (zero-filled outside). Otherwise element by element: 4-byte cp.async for float, plain
// loads and stores for bfloat16 (cp.async copies 4 bytes at least), zeros outside.
// The copies walk pointers: a thread's next copy is a pointer add away and its bounds are one
// comparison each, so the 16 copies of a stage cost a few instructions each (64-bit row * K products
// per copy were a third of the TF32 loop's instructions). A copy outside the matrix gets its address
// all the same: cp.async reads nothing when it copies 0 bytes.
template <typename T, bool kVecA, bool kVecB, bool kBt>
struct Loader5 {
  using Bits = std::conditional_t<sizeof(T) == 4, uint32_t, uint16_t>;  // the elements, copied as bits
  static constexpr int kElems = Tile5<T>::kElems;
  static constexpr int kARowStep = kThreads5 / kAChunks5;               // 16
  static constexpr int kACopies = kBM5 / kARowStep;                     // 8
  static constexpr int kBRowStep = kBt ? kARowStep : kThreads5 / Tile5<T>::kBChunks;  // 16 (B^T), 4 or 8
  static constexpr int kBCopies = kBt ? kACopies : Tile5<T>::kBK / kBRowStep;          // 8
  const Bits* a;     // this thread's first A chunk of the next k step: row m0 + ra, column k + kElems ca
  const Bits* b;     // its first B chunk: row k + rb, column n0 + kElems cb (B^T: row n0 + ra, column k + kElems ca)
  int64_t a_pass;    // elements from one of its copies to the next: kARowStep rows of A
  int64_t b_pass;    // kBRowStep rows of B
  int64_t a_left;    // elements of the block's K range in an A row from a's column on (none when <= 0)
  int64_t b_rows;    // rows of the K range from b's row on
  int a_rows;        // how many of its kACopies A rows lie inside A
  int b_left;        // elements of a B row from b's column on, at most kElems (none when <= 0)
  int bt_rows;       // B^T: how many of its kACopies rows lie inside B^T

  // The block's K range: k0 .. k0 + k_len (all of K, or a split's range); K is A's row length, ldbt
  // B^T's (kBt).
  __device__ __forceinline__ Loader5(const T* A, const T* B, int64_t M, int64_t N, int64_t K, int64_t ldbt,
                                     int64_t k0, int64_t k_len, int64_t m0, int64_t n0) {
    const int tid = threadIdx.x;
    const int ra = tid / kAChunks5, ca = tid % kAChunks5;
    const int rb = tid / Tile5<T>::kBChunks, cb = tid % Tile5<T>::kBChunks;
    a = reinterpret_cast<const Bits*>(A) + (m0 + ra) * K + k0 + kElems * ca;
    a_pass = kARowStep * K;
    a_left = k_len - kElems * ca;
    const int64_t rows = course::ceil_div<int64_t>(M - m0 - ra, kARowStep);
    a_rows = rows <= 0 ? 0 : rows < kACopies ? int(rows) : kACopies;
    if constexpr (kBt) {  // B^T's rows n0 + ra + 16 i, copied as A's
      b = reinterpret_cast<const Bits*>(B) + (n0 + ra) * ldbt + k0 + kElems * ca;
      b_pass = kBRowStep * ldbt;
      const int64_t bt = course::ceil_div<int64_t>(N - n0 - ra, kBRowStep);
      bt_rows = bt <= 0 ? 0 : bt < kBCopies ? int(bt) : kBCopies;
    } else {
      b = reinterpret_cast<const Bits*>(B) + (k0 + rb) * N + n0 + kElems * cb;
      b_pass = kBRowStep * N;
      b_rows = k_len - rb;
      const int64_t cols = N - n0 - kElems * cb;
      b_left = cols <= 0 ? 0 : cols < kElems ? int(cols) : kElems;
    }
  }

  // One chunk from src: `left` elements of its row remain (none when <= 0; the row is inside the
  // matrix when row_ok).
  template <bool kVec>
  __device__ __forceinline__ void chunk(uint4* dst, const Bits* src, bool row_ok, int64_t left) {
    if (kVec) {
      cp_async16(reinterpret_cast<float*>(dst), reinterpret_cast<const float*>(src), row_ok && left > 0);
    } else if constexpr (sizeof(T) == 4) {
#pragma unroll
      for (int e = 0; e < kElems; ++e) {
        cp_async4(reinterpret_cast<float*>(dst) + e, reinterpret_cast<const float*>(src) + e, row_ok && e < left);
      }
    } else {
      Bits* out = reinterpret_cast<Bits*>(dst);
#pragma unroll
      for (int e = 0; e < kElems; ++e) out[e] = row_ok && e < left ? src[e] : Bits(0);
    }
  }

  // Issue the next k step's copies into stage `s`.
  __device__ __forceinline__ void load(Stage5<T>& s) {
    const int ra = threadIdx.x / kAChunks5, ca = threadIdx.x % kAChunks5;
    const int rb = threadIdx.x / Tile5<T>::kBChunks, cb = threadIdx.x % Tile5<T>::kBChunks;
    const Bits* src = a;
#pragma unroll
    for (int i = 0; i < kACopies; ++i, src += a_pass) {
      const int r = ra + i * kARowStep;
      chunk<kVecA>(&s.A[r][swizzle_a(r, ca)], src, i < a_rows, a_left);
    }
    src = b;
    if constexpr (kBt) {  // whole 16-byte chunks (B^T's padded rows): the same k range as A's
#pragma unroll
      for (int i = 0; i < kBCopies; ++i, src += b_pass) {
        const int r = ra + i * kBRowStep;
        chunk<true>(&s.Bt[r][swizzle_a(r, ca)], src, i < bt_rows, a_left);
      }
      b += Tile5<T>::kBK;
    } else {
#pragma unroll
      for (int i = 0; i < kBCopies; ++i, src += b_pass) {
        const int r = rb + i * kBRowStep;
        chunk<kVecB>(&s.B[r][swizzle_b<T>(r, cb)], src, i * kBRowStep < b_rows, b_left);
      }
      b += kBCopies * b_pass;
      b_rows -= Tile5<T>::kBK;
    }
    a += Tile5<T>::kBK;
    a_left -= Tile5<T>::kBK;
  }
};

// The warp's fragments of one mma k step, ks, of a stage (kBK / kMmaK = 4 of them), with g = lane / 4
// and t = lane % 4 (the README draws them):
//   A, m16 x k8 TF32:   a0 (g, t), a1 (g + 8, t), a2 (g, t + 4), a3 (g + 8, t + 4)
//   A, m16 x k16 BF16:  a0 (g, 2t..2t+1), a1 (g + 8, 2t..), a2 (g, 2t + 8..), a3 (g + 8, 2t + 8..)
//   B, k8 x n8 TF32:    b0 (t, g), b1 (t + 4, g)
//   B, k16 x n8 BF16:   b0 (2t..2t+1, g), b1 (2t + 8..2t + 9, g)
//   C, m16 x n8 float:  c0 (g, 2t), c1 (g, 2t + 1), c2 (g + 8, 2t), c3 (g + 8, 2t + 1)
// Both A fragments are one ldmatrix.x4 over the same bytes (32 bytes of k per row: a TF32 k8 step or
// a BF16 k16 step): matrices (rows 0-7, chunk 0), (rows 8-15, chunk 0), (rows 0-7, chunk 1),
// (rows 8-15, chunk 1) give a0..a3. BF16 B: ldmatrix.x4.trans of 8 k rows x 8 n columns per matrix.
// TF32 B: ldmatrix cannot transpose 32-bit elements, so each lane reads its two words (plain 32-bit
// loads; the swizzle makes the warp's 32 reads hit 32 banks). TF32 B^T (kBt): rows n hold k as A's rows
// do, so one ldmatrix.x4 gives two tiles' b0 b1: matrices (rows n.. n + 7, chunk 2 ks), (the same rows,
// chunk 2 ks + 1), then the next 8 rows: lane l receives word t of row g, B(k = t (+ 4), n = g).
// The words as stored: float's are rounded to TF32 by mma_fragments5 (B^T's were rounded when written).
template <typename T, bool kBt>
__device__ __forceinline__ void load_fragments5(const Stage5<T>& s, int ks, uint32_t (&a)[kMTiles5][4],
                                                uint32_t (&b)[kNTiles5][2], int wrow, int wcol, int lane) {
  // BEGIN SOLUTION
  // TODO: A: for each i, ldmatrix_x4 from the row lane l gives: r = wrow + 16 i + 8 ((l / 8) % 2) + l % 8,
  // TODO: chunk c = 2 ks + (l / 8) / 2, at &s.A[r][swizzle_a(r, c)]. B, float: b[j][h] is the word at
  // TODO: k = 8 ks + t + 4 h, n = wcol + 8 j + g: word n % 4 of chunk swizzle_b<T>(k, n / 4) of row k.
  // TODO: B, bfloat16: for each pair j, j + 1, ldmatrix_x4_trans from row k = 16 ks + 8 ((l / 8) % 2) + l % 8,
  // TODO: chunk c = (wcol + 8 j) / 8 + (l / 8) / 2, giving b[j][0], b[j][1], b[j + 1][0], b[j + 1][1].
  // TODO: B^T (kBt): for each pair j, j + 1, ldmatrix_x4 from &s.Bt[r][swizzle_a(r, c)] with row
  // TODO: r = wcol + 8 j + 8 ((l / 8) / 2) + l % 8, chunk c = 2 ks + (l / 8) % 2, giving the same four words.
  // TODO: (the reference solution takes about 33 lines)
  // END SOLUTION
}

// acc[i][j] (the warp's 16 x 8 tile i, j) += a[i] b[j] for all 4 x 8 tiles: one mma k step.
template <typename T, bool kBt>
__device__ __forceinline__ void mma_fragments5(float (&acc)[kMTiles5][kNTiles5][4], uint32_t (&a)[kMTiles5][4],
                                               uint32_t (&b)[kNTiles5][2]) {
  // BEGIN SOLUTION
  // TODO: for float, first round each word of a, and of b unless it came from B^T (kBt: rounded when
  // TODO: written), to TF32 (w = to_tf32(__uint_as_float(w))); then mma16x8<T>(acc[i][j], a[i], b[j]) for every i, j.
  // TODO: (the reference solution takes about 19 lines)
  // END SOLUTION
}

// Write the warp's 4 x 8 tiles of 16 x 8 (acc) to C at rows row0 + 16 i, columns col0 + 8 j, with the
// C fragment's layout (c0 c1 at row g, columns 2t and 2t + 1; c2 c3 at row g + 8), inside C only.
template <typename T>
__device__ __forceinline__ void store_c5(T* __restrict__ C, const float (&acc)[kMTiles5][kNTiles5][4], int64_t M,
                                         int64_t N, int64_t row0, int64_t col0, int lane) {
  // BEGIN SOLUTION
  // TODO: with g = lane / 4, t = lane % 4: for each tile i, j and half h < 2, acc[i][j][2 h] and
  // TODO: acc[i][j][2 h + 1] belong at row row0 + 16 i + 8 h + g, columns col0 + 8 j + 2 t and the next.
  // TODO: Skip a row >= M or a column >= N. Where N is even both columns are inside or both outside and
  // TODO: the pair is aligned: store2(C + row * N + col, x, y); else store1 each (the second if col + 1 < N).
  // TODO: (the reference solution takes about 21 lines)
  // END SOLUTION
}

// Grid (ceil(N / 128), ceil(M / 128), batch x splits), 128 threads (2 x 2 warps, each a 64 x 64 tile of C
// as 4 x 8 mma tiles of 16 x 8), kernel 4's 3-stage cp.async ring of A (128 x kBK) and B (kBK x 128)
// tiles, or with kBt (float32) B^T tiles (128 x kBK) from B^T's rows of ldbt elements. blockIdx.z =
// batch element * splits + split, as kernel 4's: with one split the block writes C (C's type); with
// several, split s sums k in s k_split .. (s + 1) k_split into its own float32 matrix
// `partial + blockIdx.z M N` of the workspace, which matmul_splitk_reduce sums into C.
// Its tensor-core instructions exist from sm_80 on: compiled for an older GPU, the helpers above leave
// zeros (`#if __CUDA_ARCH__ >= 800`) and the launcher refuses to run it there.
template <typename T, bool kVecA, bool kVecB, bool kBt>
__global__ void __launch_bounds__(kThreads5, kMinBlocks5)
    matmul_kernel5(const T* __restrict__ A, const T* __restrict__ B, T* __restrict__ C, float* __restrict__ partial,
                   int64_t M, int64_t N, int64_t K, int64_t ldbt, int64_t k_split, int64_t splits) {
  extern __shared__ __align__(128) unsigned char smem5[];  // kSmem5 bytes: 3 x 32 KiB
  Stage5<T>* ring = reinterpret_cast<Stage5<T>*>(smem5);
  const int64_t z = blockIdx.z, batch = z / splits, k0 = (z - batch * splits) * k_split;
  const int64_t k_len = K - k0 < k_split ? K - k0 : k_split;  // the last split's range may be shorter
  A += batch * M * K;
  B += kBt ? batch * N * ldbt : batch * K * N;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int wrow = (warp / kWarpsN5) * kWM5, wcol = (warp % kWarpsN5) * kWN5;
  const int64_t m0 = int64_t(blockIdx.y) * kBM5, n0 = int64_t(blockIdx.x) * kBN5;
  const int64_t steps = course::ceil_div<int64_t>(k_len, Tile5<T>::kBK);
  float acc[kMTiles5][kNTiles5][4] = {};
  Loader5<T, kVecA, kVecB, kBt> loader(A, B, M, N, K, ldbt, k0, k_len, m0, n0);
  // kernel 4's pipeline: kStages5 - 1 steps in flight, one (possibly empty) group committed per step
#pragma unroll
  for (int s = 0; s < kStages5 - 1; ++s) {
    if (s < steps) loader.load(ring[s]);
    cp_async_commit();
  }
  constexpr int kMmaSteps = Tile5<T>::kBK / Tile5<T>::kMmaK;  // mma k steps per stage
  int read = 0, write = kStages5 - 1;
  if constexpr (sizeof(T) == 4 && !kBt) {
    // TF32 from B: a stage's barrier, its copies issued, then its mma k steps, each loading its fragments
    for (int64_t step = 0; step < steps; ++step) {
      cp_async_wait<kStages5 - 2>();
      __syncthreads();
      if (step + kStages5 - 1 < steps) loader.load(ring[write]);
      cp_async_commit();
#pragma unroll
      for (int ks = 0; ks < kMmaSteps; ++ks) {
        uint32_t a[kMTiles5][4], b[kNTiles5][2];
        load_fragments5<T, kBt>(ring[read], ks, a, b, wrow, wcol, lane);
        mma_fragments5<T, kBt>(acc, a, b);
      }
      read = read + 1 == kStages5 ? 0 : read + 1;
      write = write + 1 == kStages5 ? 0 : write + 1;
    }
  } else {
    // BF16 and TF32 from B^T: each k step's mmas issue while the next step's fragments load, the
    // stage's last step's while the next stage's first fragments load: the barrier comes once this
    // stage's fragments are all read (so the stage it frees can be refilled) and before the next
    // stage's are (H100, 4096^3: BF16 0.54x -> 0.56x of cuBLAS BF16). TF32 from B lost with it (0.49x
    // -> 0.48x, GPT-2's 8192 x 768 by 768 x 3072 0.63x -> 0.49x): its 16 scalar B loads and 32
    // roundings a step leave no registers for a second set of fragments (255 a thread); from B^T (4
    // ldmatrix and 16 roundings a step) it fits, and 4096^3 went 0.48x -> 0.52x.
    uint32_t a[2][kMTiles5][4], b[2][kNTiles5][2];
    cp_async_wait<kStages5 - 2>();
    __syncthreads();
    if (steps > 0) load_fragments5<T, kBt>(ring[0], 0, a[0], b[0], wrow, wcol, lane);
    for (int64_t step = 0; step < steps; ++step) {
      if (step + kStages5 - 1 < steps) loader.load(ring[write]);
      cp_async_commit();
#pragma unroll
      for (int ks = 0; ks < kMmaSteps; ++ks) {
        const int next = (ks + 1) % 2;
        if (ks + 1 < kMmaSteps) {
          load_fragments5<T, kBt>(ring[read], ks + 1, a[next], b[next], wrow, wcol, lane);
        } else {
          cp_async_wait<kStages5 - 2>();
          __syncthreads();
          read = read + 1 == kStages5 ? 0 : read + 1;
          if (step + 1 < steps) load_fragments5<T, kBt>(ring[read], 0, a[next], b[next], wrow, wcol, lane);
        }
        mma_fragments5<T, kBt>(acc, a[ks % 2], b[ks % 2]);
      }
      write = write + 1 == kStages5 ? 0 : write + 1;
    }
  }
  cp_async_wait<0>();
  if (splits > 1) {
    store_c5<float>(partial + z * M * N, acc, M, N, m0 + wrow, n0 + wcol, lane);
  } else {
    store_c5<T>(C + batch * M * N, acc, M, N, m0 + wrow, n0 + wcol, lane);
  }
}

void check_grid_rows(int64_t M, int64_t rows_per_block, const char* version) {
  // (numbers formatted by std::to_string: streaming integers into a message crashed on torch 2.11)
  TORCH_CHECK(course::ceil_div<int64_t>(M, rows_per_block) <= kMaxGridY,
              std::string("matmul ") + version + ": A has M = " + std::to_string(M) +
                  " rows, more than this kernel's grid can cover (" + std::to_string(kMaxGridY * rows_per_block) + ")");
}


// Versions 4 and 5 plan a product (given): which kernel runs, and how K is split (the README's "Shape
// classes"). Tiles: the version's own kernel (4 or 5); GemvRows (N == 1) and GemvCols (M == 1): the
// matrix-vector kernels. Small32, Small64, Small128: matmul_small_tiles with tiles of 32 x 128, 64 x 64
// or 128 x 32 outputs (version 4). StreamK: matmul_kernel4_streamk's workers over kernel 4's tiles and
// matmul_streamk_fixup (version 4).
enum class Path { kTiles, kGemvRows, kGemvCols, kGemvColsNarrow, kSmall32, kSmall64, kSmall128, kStreamK };
struct Plan {
  Path path;
  int64_t splits;   // K ranges, summed by matmul_splitk_reduce when there are several
  int64_t k_split;  // k per range (K when splits == 1)
  // > 0: rows 0 .. head_rows - 1 of C (whole waves of tiles) are one launch of whole K straight into
  // C, and only the rows after them (the tail) are split as above (split_tail; batch 1)
  int64_t head_rows = 0;
};

constexpr int64_t kSplitMinK4 = 64;  // the least k a split of kernel 4 runs down (8 of its 8-deep steps)
constexpr int64_t kSplitSteps5 = 2;  // the least k steps a split of kernel 5 runs (64 k in TF32, 128 in BF16)
constexpr int64_t kGemvRowsMinK = 1024;  // the least k per split of a row (8 float4 steps of a warp)
constexpr int64_t kGemvColsMinK = 32;    // the least k per split of a column (4 rows per warp)
// M == 1 in 16-column blocks where 128-column ones are fewer than the SMs (and would split K), the
// 16-column ones are not, and B is at most 2^22 floats: there the fixed costs (a second launch, to sum
// the splits) are much of the time (H100: 768 x 3072, 9.4 MB, 0.77x -> 1.00x of cuBLAS), and on large
// matrices rows read 64 bytes at a time are slower than 512 (16384 x 16384: 1.00x -> 0.85x)
constexpr int64_t kGemvColsNarrowMost = int64_t(1) << 22;
constexpr int64_t kMaxSplits = 4096;     // so that a launch still holds 15 batch elements in gridDim.z
constexpr int64_t kFillMinK = 256;  // the least k per split of splits made only to fill waves (split_tiles, split_tail)

// Stream-K's workers: as many of its blocks as the GPU holds at once (the workspace is sized by it too).
int64_t streamk_workers() { return course::wave_blocks(matmul_kernel4_streamk<true>, kThreads4); }

int64_t sm_count() {
  int device = 0, sms = 0;
  C10_CUDA_CHECK(cudaGetDevice(&device));
  C10_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  return sms;
}

// `want` splits of K, but at most `most` and at least 1, with k per split a multiple of `align`.
Plan split_k(Path path, int64_t K, int64_t want, int64_t most, int64_t align) {
  const int64_t s = std::max<int64_t>(1, std::min(want, most));
  if (s == 1) return {path, 1, K};
  const int64_t k_split = course::ceil_div<int64_t>(course::ceil_div<int64_t>(K, s), align) * align;
  return {path, course::ceil_div<int64_t>(K, k_split), k_split};
}

// The split of K for `tiles` output tiles of kernel 4, the small tiles or kernel 5 (k per split a
// multiple of `align`, the kernel's k step, and at least `min_k`); plan4 below states the rule.
Plan split_tiles(Path path, int64_t M, int64_t N, int64_t K, int64_t tiles, int64_t sms, int64_t align,
                 int64_t min_k) {
  if (tiles < sms && K >= 2 * min_k && (K >= 4 * std::max(M, N) || 3 * tiles <= 2 * sms)) {
    const int64_t most = std::min(K / min_k, kMaxSplits);
    const int64_t slots = 2 * sms;
    int64_t want = slots / tiles;  // one wave of 2 blocks per SM
    // where that wave leaves more than a tenth of the slots idle, the fewest splits (of at least
    // kFillMinK each) that fill their waves to 90% (1031 x 1000 x 4099, 72 tiles: 3 splits fill
    // 216 of 264 slots, 7 fill 504 of 528)
    if (10 * tiles * want < 9 * slots) {
      for (int64_t s = want + 1; s <= std::min(most, K / kFillMinK); ++s) {
        if (10 * tiles * s >= 9 * slots * course::ceil_div<int64_t>(tiles * s, slots)) {
          want = s;
          break;
        }
      }
    }
    return split_k(path, K, want, most, align);
  }
  return {path, 1, K};
}

// Kernel 4's tiles that fill one or two waves of `slots` blocks (as many as the GPU runs at once) and
// then a last wave at most half full: that last wave takes about as long as a full one. So the rows of
// tiles in the whole waves (the head) run as they are, and the rows after them (the tail) split K into
// as many ranges as keep the tail within one wave, each at least kFillMinK long (GPT-2's 8192 x 768 x
// 768: 384 tiles, 264 slots on an H100, a tail of 120 tiles in 2 splits: 0.73x -> 0.89x of cuBLAS).
// After more whole waves the tail is a smaller part of the time, and its reduction and launches cost
// what it saved (8192 x 2304 x 768, 4 waves: 0.94x -> 0.92x); kernel 5's waves are 4-5 times shorter,
// so it never paid there (8192 x 768 x 768: 0.72x -> 0.50x of cuBLAS TF32).
Plan split_tail(Path path, int64_t M, int64_t N, int64_t K, int64_t bm, int64_t bn, int64_t slots, int64_t align) {
  const int64_t cols = course::ceil_div<int64_t>(N, bn), rows = course::ceil_div<int64_t>(M, bm);
  const int64_t head = rows * cols / slots * slots / cols;  // whole rows of tiles within the whole waves
  const int64_t tail = (rows - head) * cols;
  const int64_t want = tail > 0 ? std::min(slots / tail, K / kFillMinK) : 1;
  if (head == 0 || want < 2) return {path, 1, K};
  Plan plan = split_k(path, K, want, want, align);
  if (plan.splits > 1) plan.head_rows = head * bm;
  return plan;
}

// The rule. N == 1 (also M == N == 1): a warp per row of A; M == 1: a block per 128 columns of B.
// Both split K when their blocks would not fill the GPU 4 times over (N == 1; a memory-bound kernel
// needs many loads in flight) or twice over (M == 1, whose blocks of 8 warps each take a k range of
// their own: 4 times over made more partial sums to add and was 5-10% slower on GPT-2's one-token
// products, H100). M, N > 1: kernel 4's tiles, or where those are fewer than the SMs and M or N is 64
// or less, the small tiles (32 x 128 for M <= 32, 128 x 32 for N <= 32, else 64 x 64). Either way K is
// split (split_tiles) when the tiles are fewer than the SMs, K >= 128 (two splits of kSplitMinK4), and
// K dominates (K >= 4 max(M, N)) or the tiles fill at most two thirds of the SMs (a layer's small batch
// times its weights: 32 x 2048 by 2048 x 1000). Into as many splits as one wave of 2 blocks per SM
// holds: more would make a second, mostly idle wave and more workspace to sum (1024^3: 4 splits of its
// 64 tiles ran at 0.86x of cuBLAS, 5 at 0.62x), and where K dominates, more and shorter splits only
// write and read more partial sums (splits up to a workspace of a quarter of A and B, against one
// wave: 64 x 64 x 2^20 0.80x -> 0.92x, 256 x 256 x 2^18 0.79x -> 0.87x, 1024 x 1024 x 2^16 0.83x ->
// 0.85x, H100). 3 splits bring the idle third of the SMs in (1031 x 1000 x 4099, 72 tiles: 0.49x ->
// 0.78x; 1100^3, 81 tiles: 0.67x -> 0.85x); 2 splits of tiles that nearly fill the SMs only add the
// sum where K does not dominate (1400 x 1400 x 700, 121 tiles: 0.76x whole, 0.75x in 2): those tiles,
// up to 90% of the blocks the GPU holds, take stream-K instead (below, and matmul_kernel4_streamk).
Plan plan4(int64_t batch, int64_t M, int64_t N, int64_t K) {
  const int64_t sms = sm_count();
  if (N == 1) {
    const int64_t blocks = course::ceil_div<int64_t>(M, kGemvRowsPerBlock) * batch;
    return split_k(Path::kGemvRows, K, course::ceil_div<int64_t>(4 * sms, blocks),
                   std::min(K / kGemvRowsMinK, kMaxSplits), 4);
  }
  if (M == 1) {
    const int64_t blocks = course::ceil_div<int64_t>(N, kGemvColsPerBlock) * batch;
    const int64_t narrow = course::ceil_div<int64_t>(N, kGemvColsNarrow) * batch;
    if (blocks < sms && narrow >= sms && K * N <= kGemvColsNarrowMost) return {Path::kGemvColsNarrow, 1, K};
    return split_k(Path::kGemvCols, K, course::ceil_div<int64_t>(2 * sms, blocks),
                   std::min(K / kGemvColsMinK, kMaxSplits), 1);
  }
  const int64_t tiles4 = course::ceil_div<int64_t>(M, kBM4) * course::ceil_div<int64_t>(N, kBN4) * batch;
  if (tiles4 < sms && std::min(M, N) <= kSmallSide) {  // few of kernel 4's tiles, mostly outside C
    const int64_t rows = M <= 32 ? 32 : N <= 32 ? 128 : 64;
    const Path path = rows == 32 ? Path::kSmall32 : rows == 64 ? Path::kSmall64 : Path::kSmall128;
    const int64_t tiles = course::ceil_div<int64_t>(M, rows) * course::ceil_div<int64_t>(N, kSmallArea / rows) * batch;
    // Where K does not dominate, ranges of 128 k or more (4 steps), if they still give half the SMs a
    // block: a block of 2 steps spent much of its time starting and storing its partial sums (32 x 2048
    // by 2048 x 1000: 32 splits of 64 -> 16 of 128, 0.81x -> 0.85x of cuBLAS; 32 x 1280 by 1280 x 1000
    // 0.79x -> 0.81x); with fewer blocks than that, the shorter ranges still win (24 x 1024 by 1024 x
    // 512, 4 tiles: 16 splits of 64 0.82x, 8 of 128 0.76x)
    if (K < 4 * std::max(M, N)) {
      const Plan longer = split_tiles(path, M, N, K, tiles, sms, kSmallBK, 2 * kSplitMinK4);
      if (longer.splits > 1 && 2 * tiles * longer.splits >= sms) return longer;
    }
    return split_tiles(path, M, N, K, tiles, sms, kSmallBK, kSplitMinK4);
  }
  if (batch == 1 && tiles4 > sms) {  // (asked only then: the occupancy query costs host time)
    const int64_t slots = course::wave_blocks(matmul_kernel4<true>, kThreads4);
    if (tiles4 > slots && tiles4 < 3 * slots) return split_tail(Path::kTiles, M, N, K, kBM4, kBN4, slots, kBK4);
  }
  const Plan plan = split_tiles(Path::kTiles, M, N, K, tiles4, sms, kBK4, kSplitMinK4);
  // Unsplit tiles filling more than two thirds of the SMs and under 90% of the blocks the GPU holds:
  // stream-K (matmul_kernel4_streamk says why; H100 against one block a tile: 1200^3 0.67x -> 0.89x of
  // cuBLAS, 1500 x 1500 x 500 0.67x -> 0.90x, 1400 x 1400 x 700 0.76x -> 0.80x), where each worker
  // still runs 16 k steps or more. (tiles < 0.9 workers also keeps every worker within two tiles.)
  if (plan.splits == 1 && batch == 1 && 3 * tiles4 > 2 * sms) {  // (the occupancy query only here)
    const int64_t workers = streamk_workers();
    if (10 * tiles4 < 9 * workers && tiles4 * course::ceil_div<int64_t>(K, kBK4) >= 16 * workers) {
      return {Path::kStreamK, 1, K};
    }
  }
  return plan;
}

// Above 48 KiB of dynamic shared memory a kernel must be allowed it (cudaFuncSetAttribute, per
// instantiation; repeating it costs a microsecond).
template <typename T, bool kBt>
void allow_smem5() {
  using Kernel = void (*)(const T*, const T*, T*, float*, int64_t, int64_t, int64_t, int64_t, int64_t, int64_t);
  auto allow = [](Kernel kernel) {
    C10_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem5));
  };
  if constexpr (kBt) {
    for (Kernel kernel : {matmul_kernel5<T, true, true, true>, matmul_kernel5<T, false, true, true>}) allow(kernel);
  } else {
    for (Kernel kernel : {matmul_kernel5<T, true, true, false>, matmul_kernel5<T, true, false, false>,
                          matmul_kernel5<T, false, true, false>, matmul_kernel5<T, false, false, false>}) {
      allow(kernel);
    }
  }
}

// Version 5's rule, version 4's with kernel 5's tiles: float32 products with N == 1 or M == 1 take
// version 4's matrix-vector kernels (memory-bound: tensor cores would not make them faster, and their
// float32 sums are within TF32's bound); every other product kernel 5's 128 x 128 tiles, K split as
// split_tiles says (k per split a whole number of k steps, at least kSplitSteps5 of them). bfloat16
// matrix-vector products take the tiles too (the matrix-vector kernels read float32).
template <typename T>
Plan plan5(int64_t batch, int64_t M, int64_t N, int64_t K) {
  if (sizeof(T) == 4 && (N == 1 || M == 1)) return plan4(batch, M, N, K);
  const int64_t tiles = course::ceil_div<int64_t>(M, kBM5) * course::ceil_div<int64_t>(N, kBN5) * batch;
  return split_tiles(Path::kTiles, M, N, K, tiles, sm_count(), Tile5<T>::kBK, kSplitSteps5 * Tile5<T>::kBK);
}

// Tall float32 products read B^T, written rounded to TF32 by matmul_transpose_tf32 first: a pass that
// reads and writes B once, for each of C's M / 128 row tiles that read it saving B's roundings and its
// scalar fragment loads (ldmatrix instead), which frees the registers for the fragments of the next k
// step (H100, beside cuBLAS TF32: 4096^3 0.49x -> 0.52x, GPT-2's 8192 x 768 x 3072 0.62x -> 0.71x; 2048
// rows about even: 2048 x 4096 x 4096 0.49x -> 0.48x, 2048 x 768 x 3072 0.49x -> 0.53x). On shorter
// products the pass costs more than it saves (1024^3 0.57x -> 0.48x, 32 x 1000 x 2048 0.77x -> 0.46x):
// those read B as it is stored.
constexpr int64_t kBtMinRows5 = 2048;
template <typename T>
bool reads_bt5(const Plan& plan, int64_t M, int64_t K) {
  return sizeof(T) == 4 && plan.path == Path::kTiles && M >= kBtMinRows5 && K > 0;  // (K == 0: zeros, no B)
}

// Kernel 5 over `batch` elements and the plan's splits of K: into C, or with several splits into the
// workspace `partial` ([batch, splits, M, N] floats; nullptr when there is one split).
// B is B^T (N x ldbt, rounded to TF32) where kBt.
template <typename T, bool kBt>
void launch5(const T* A, const T* B, T* C, float* partial, int64_t M, int64_t N, int64_t K, int64_t ldbt,
             int64_t batch, const Plan& plan, cudaStream_t stream) {
  // grid z: the batch elements x the splits (blockIdx.z = element * splits + split)
  const dim3 grid(static_cast<unsigned>(course::ceil_div<int64_t>(N, kBN5)),
                  static_cast<unsigned>(course::ceil_div<int64_t>(M, kBM5)), static_cast<unsigned>(batch * plan.splits));
  // 16-byte copies need rows that start on 16-byte boundaries: K (for A), N (for B) a multiple of a
  // chunk's 4 floats or 8 bfloat16s, and aligned bases (a split's k0 is a whole number of k steps).
  const bool vec_a = K % Tile5<T>::kElems == 0 && course::is_aligned16(A);
  const bool vec_b = N % Tile5<T>::kElems == 0 && course::is_aligned16(B);
  allow_smem5<T, kBt>();
  course::took<T>(kBt ? (vec_a ? "v5.bt.vec_a" : "v5.bt.scalar_a")
                  : vec_a ? (vec_b ? "v5.vec_a_vec_b" : "v5.vec_a") : vec_b ? "v5.vec_b" : "v5.scalar");
  // BEGIN SOLUTION
  // TODO: launch matmul_kernel5<T, vec_a, vec_b, kBt> on `stream` with kThreads5 threads per block,
  // TODO: `grid`, and kSmem5 bytes of dynamic shared memory (the ring), on A, B, C and partial with M, N,
  // TODO: K, ldbt and the plan's k_split and splits; check the launch. Six instantiations, picked with
  // TODO: if/else: with kBt (`if constexpr`) B^T's chunks are whole, so its kVecB is true; without it, four.
  // TODO: (the reference solution takes about 23 lines)
  TORCH_CHECK(false, "launch5 (matmul.cu) is not implemented yet");
  // END SOLUTION
}

// ---------------------------------------------------------------------------------- kernel 6
// Hopper's own tensor-core path (compute capability 9.0, code built for "9.0a"): `wgmma`, one
// instruction for a whole warpgroup (4 warps, 128 threads) multiplying a 64 x 8 (TF32) or 64 x 16
// (BF16) slice of A by a k slice of 256 columns of B, which the tensor cores read straight from shared
// memory; TMA, one instruction copying a whole 2-D box of a matrix into shared memory (swizzled) and
// counting its bytes on an mbarrier; and warp specialization: one warpgroup only copies, two only
// multiply. Kernel 5's limit was shared memory: its copies and every warp's fragment reads, 96 KiB per
// 2^20 FLOPs; here the tensor cores read B once per warpgroup, 64 KiB in all per 2^20 FLOPs.
// TF32 wgmma reads both operands K-major (k contiguous), and B is K x N row-major: for float32,
// matmul_transpose_tf32 first writes B^T (N x K, rounded to TF32) into a workspace. BF16 wgmma transposes
// 16-bit operands itself, so bfloat16 B is copied as it is stored (N-major). A's fragments come from
// registers: each consumer reads its 64 rows (ldmatrix) and rounds them there, once per element.
constexpr int kBM6 = 128, kBN6 = 256;  // block tile of C: two consumer warpgroups of 64 x 256
constexpr int kStages6 = 4;            // the ring: 4 x 48 KiB
constexpr int kThreads6 = 384;         // warpgroup 0 the producer, 1 and 2 the consumers
constexpr int kRowBytes6 = 128;        // a stage's k of one row: 128 bytes, the span of TMA's 128-byte swizzle
constexpr int kABytes6 = kBM6 * kRowBytes6, kBBytes6 = kBN6 * kRowBytes6;  // 16 KiB, 32 KiB
constexpr int kStageBytes6 = kABytes6 + kBBytes6;
constexpr int kSmem6 = kStages6 * kStageBytes6 + 1024 + 2 * kStages6 * 8;  // ring (1024-aligned), mbarriers
constexpr int kConsumerWarps6 = 8;

template <typename T>
struct Tile6 {
  static constexpr int kBK = kRowBytes6 / sizeof(T);   // k per stage: 32 floats or 64 bfloat16s
  static constexpr int kMmaK = 32 / sizeof(T);         // k of one wgmma (32 bytes of a row): 8 or 16
  static constexpr int kMmaSteps = kBK / kMmaK;        // 4 wgmma k steps per stage
  static constexpr int kElems = 16 / sizeof(T);        // elements per 16 bytes (TMA's stride unit)
  // B's stage: float32, B^T's 256 rows of 128 bytes of k (K-major); bfloat16, B itself, 4 boxes of 64
  // rows of k by 64 columns (128 bytes), 8 KiB apart (N-major)
  static constexpr bool kBTransposed = sizeof(T) == 4;
};

// Set where the code running on this GPU has kernel 6's instructions (a "9.0a" build on a 9.0 GPU):
// the launcher reads it, since a build without them compiles kernel 6 to an empty kernel.
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
__device__ int kernel6_built = 1;
#else
__device__ int kernel6_built = 0;
#endif

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define COURSE_SM90A(...) __VA_ARGS__
#else
#define COURSE_SM90A(...)
#endif

// --- mbarriers: a 64-bit word in shared memory counting arrivals (and, for TMA, bytes) of a phase;
// a waiter polls for the phase with the parity it expects to complete.
__device__ __forceinline__ void mbar_init(uint32_t bar, int arrivals) {
  COURSE_SM90A(asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(bar), "r"(arrivals) : "memory");)
}
__device__ __forceinline__ void mbar_arrive_expect_bytes(uint32_t bar, uint32_t bytes) {
  COURSE_SM90A(asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(bar), "r"(bytes) : "memory");)
}
__device__ __forceinline__ void mbar_arrive(uint32_t bar) {
  COURSE_SM90A(asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(bar) : "memory");)
}
__device__ __forceinline__ void mbar_wait(uint32_t bar, uint32_t parity) {
  COURSE_SM90A(asm volatile("{\n.reg .pred done;\nwait_%=:\n"
                            "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
                            "@!done bra wait_%=;\n}\n" ::"r"(bar), "r"(parity) : "memory");)
}

// --- TMA: the box of `map` at coordinates (c0 innermost, c1, c2) into shared memory at `dst`, its
// bytes counted on `bar`. Outside the matrix the box is filled with zeros: the tiles' edges for free.
__device__ __forceinline__ void tma_load_3d(uint32_t dst, const CUtensorMap* map, int c0, int c1, int c2,
                                            uint32_t bar) {
  COURSE_SM90A(asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], [%5];\n"
      ::"r"(dst), "l"(reinterpret_cast<uint64_t>(map)), "r"(c0), "r"(c1), "r"(c2), "r"(bar) : "memory");)
}

// --- wgmma
// A shared-memory matrix descriptor: an operand in rows of 128 bytes as TMA's 128-byte swizzle writes
// them (16-byte chunk c of row r at c ^ (r % 8)), groups of 8 rows 1024 bytes apart (stride byte
// offset). K-major (B^T: a row is 128 bytes of k), the leading byte offset is unused; N-major
// (bfloat16 B: a row is 64 columns of one k), it is the distance to the next 64 columns' box.
[[maybe_unused]] __device__ __forceinline__ uint64_t smem_descriptor(uint32_t addr, uint32_t leading = 16) {
  return uint64_t((addr & 0x3FFFF) >> 4)      // start address / 16
         | uint64_t(leading >> 4) << 16       // leading byte offset
         | uint64_t(1024 >> 4) << 32          // stride byte offset: from one 8-row group to the next
         | uint64_t(1) << 62;                 // the 128-byte swizzle
}
// B's descriptor for wgmma k step ks of a stage: B^T's 256 rows from 32 bytes further along k; or
// bfloat16 B's 16 rows of k from 16 rows (2048 bytes) further down, its 4 boxes 8 KiB apart
template <typename T>
__device__ __forceinline__ uint64_t b_descriptor(uint32_t stage_b, int ks) {
  return Tile6<T>::kBTransposed ? smem_descriptor(stage_b + 32 * ks) : smem_descriptor(stage_b + 2048 * ks, 8192);
}
[[maybe_unused]] __device__ __forceinline__ void wgmma_fence() {
  COURSE_SM90A(asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");)
}
__device__ __forceinline__ void wgmma_commit() {
  COURSE_SM90A(asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");)
}
template <int kPending>
__device__ __forceinline__ void wgmma_wait() {
  COURSE_SM90A(asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(kPending) : "memory");)
}
// Keeps a register's value where it is, alive up to here: a wgmma in flight may still read it.
__device__ __forceinline__ void keep(uint32_t& r) { asm volatile("" : "+r"(r)::"memory"); }
__device__ __forceinline__ void keep(float& r) { asm volatile("" : "+f"(r)::"memory"); }

#define COURSE_D128                                                                                                   \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, "  \
  "%24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, "    \
  "%46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, "    \
  "%68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, "    \
  "%90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, "    \
  "%110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}"
#define COURSE_D128_OPERANDS(d)                                                                                        \
  "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),         \
      "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]),          \
      "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]),         \
      "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]),         \
      "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]),         \
      "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]),         \
      "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]),         \
      "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]),         \
      "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]),         \
      "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]),         \
      "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]),         \
      "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]),         \
      "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]),    \
      "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]),              \
      "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]),              \
      "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]),              \
      "+f"(d[126]), "+f"(d[127])

// d (this thread's 128 floats of the warpgroup's 64 x 256 tile of C) += A (64 x kMmaK, from the
// threads' registers a, as mma.sync's A fragment: warp w holds rows 16 w .. 16 w + 15) times B (kMmaK x
// 256, from shared memory as descriptor b says: K-major for TF32, N-major, "transposed", for BF16);
// with accumulate 0, d = A B.
template <typename T>
__device__ __forceinline__ void wgmma256(float (&d)[128], const uint32_t (&a)[4], uint64_t b, int accumulate) {
  if constexpr (sizeof(T) == 4) {
    COURSE_SM90A(asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %133, 0;\n"
                              "wgmma.mma_async.sync.aligned.m64n256k8.f32.tf32.tf32 " COURSE_D128
                              ", {%128, %129, %130, %131}, %132, p, 1, 1;\n}\n"
                              : COURSE_D128_OPERANDS(d)
                              : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(accumulate));)
  } else {
    COURSE_SM90A(asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %133, 0;\n"
                              "wgmma.mma_async.sync.aligned.m64n256k16.f32.bf16.bf16 " COURSE_D128
                              ", {%128, %129, %130, %131}, %132, p, 1, 1, 1;\n}\n"
                              : COURSE_D128_OPERANDS(d)
                              : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(accumulate));)
  }
}

// This warp's A fragments of one stage, rounded (TF32) or as they are (BF16): rows wrow .. wrow + 15 of
// the stage's A tile (128 rows of 128 bytes, chunk c of row r at c ^ (r % 8)), one ldmatrix.x4 per
// wgmma k step ks (32 bytes of each row: chunks 2 ks and 2 ks + 1).
template <typename T>
__device__ __forceinline__ void load_a6(uint32_t (&a)[Tile6<T>::kMmaSteps][4], uint32_t stage_a, int wrow, int lane) {
  // BEGIN SOLUTION
  // TODO: lane l gives ldmatrix_x4 the address of row r = wrow + l % 8 + 8 ((l / 8) % 2), chunk
  // TODO: c = 2 ks + l / 16, which lies at stage_a + 128 r + 16 (c ^ (r % 8)) (a shared-memory address).
  // TODO: For float, then round each word: w = to_tf32(__uint_as_float(w)).
  // TODO: (the reference solution takes about 10 lines)
  // END SOLUTION
}

// The ring's stage `step % kStages6` and its two mbarriers: full (the producer's TMA copies landed:
// its bytes counted) and empty (all 8 consumer warps are done with it).
struct Ring6 {
  uint32_t base, full, empty;
  __device__ __forceinline__ uint32_t stage(int64_t step) const { return base + (step % kStages6) * kStageBytes6; }
  __device__ __forceinline__ uint32_t full_bar(int64_t step) const { return full + 8 * (step % kStages6); }
  __device__ __forceinline__ uint32_t empty_bar(int64_t step) const { return empty + 8 * (step % kStages6); }
  // the parity of the phase of a stage's barrier that `step`'s use completes (each use is one phase)
  __device__ __forceinline__ static uint32_t parity(int64_t step) { return (step / kStages6) & 1; }
};

// The producer (one thread): for each k step, wait until its stage is free (the consumers released it
// kStages6 steps ago), announce the stage's bytes on its full barrier, and copy A's box (k, rows m0..)
// and B's into it: B^T's box (k, rows n0..), or bfloat16 B's four (columns n0 + 64 q.., rows k..).
template <typename T>
__device__ __forceinline__ void produce6(const CUtensorMap* map_a, const CUtensorMap* map_b, const Ring6& ring,
                                         int64_t steps, int m0, int n0, int element) {
  constexpr int kBK = Tile6<T>::kBK;
  for (int64_t step = 0; step < steps; ++step) {
    if (step >= kStages6) mbar_wait(ring.empty_bar(step), Ring6::parity(step - kStages6));
    const uint32_t stage = ring.stage(step), full = ring.full_bar(step);
    const int k = int(step * kBK);
    mbar_arrive_expect_bytes(full, kStageBytes6);
    tma_load_3d(stage, map_a, k, m0, element, full);
    if constexpr (Tile6<T>::kBTransposed) {
      tma_load_3d(stage + kABytes6, map_b, k, n0, element, full);
    } else {
#pragma unroll
      for (int q = 0; q < kBN6 / 64; ++q) tma_load_3d(stage + kABytes6 + 8192 * q, map_b, n0 + 64 * q, k, element, full);
    }
  }
}

// One k step of a consumer warpgroup: wait for the stage's copies, read and round this warp's A
// fragments, issue the stage's kMmaSteps wgmmas (B from the stage) as one group, then wait until at
// most this group is in flight: the previous step's group is done with its stage (released to the
// producer) and with its A registers (a_prev, kept alive up to here). The waits and releases are given:
// a pipeline whose barriers never complete hangs instead of failing.
template <typename T>
__device__ __forceinline__ void consume6(float (&d)[128], uint32_t (&a)[Tile6<T>::kMmaSteps][4],
                                         uint32_t (&a_prev)[Tile6<T>::kMmaSteps][4], const Ring6& ring, int64_t step,
                                         int arow, int lane) {
  mbar_wait(ring.full_bar(step), Ring6::parity(step));
  const uint32_t stage = ring.stage(step);
  // BEGIN SOLUTION
  // TODO: load_a6<T>(a, stage, arow, lane); wgmma_fence() (d and a were written by other instructions);
  // TODO: for each ks < kMmaSteps: wgmma256<T>(d, a[ks], b_descriptor<T>(B's stage, ks), accumulate
  // TODO: unless step == 0 and ks == 0). B's stage is kABytes6 past A's.
  // TODO: (the reference solution takes about 6 lines)
  // END SOLUTION
  wgmma_commit();
  wgmma_wait<1>();
#pragma unroll
  for (int ks = 0; ks < Tile6<T>::kMmaSteps; ++ks) {
#pragma unroll
    for (int w = 0; w < 4; ++w) keep(a_prev[ks][w]);
  }
  if (step > 0 && lane == 0) mbar_arrive(ring.empty_bar(step - 1));
}

// Grid (ceil(N / 256), ceil(M / 128), batch elements), 384 threads, kSmem6 bytes of dynamic shared
// memory. map_a: A as [batch][M][K] (row stride lda), boxes of 128 bytes of k by 128 rows; map_b:
// float32, B^T as [batch][N][Kp], boxes of 128 bytes of k by 256 rows; bfloat16, B as [batch][K][N]
// (row stride ldb), boxes of 64 columns by 64 rows of k. Element `element0 + blockIdx.z` of C
// ([.][M][N], C's type).
// Compiled without sm_90a's instructions (any build but "9.0a") the helpers above are empty and the
// launcher refuses to run it (check_kernel6).
template <typename T>
__global__ void __launch_bounds__(kThreads6, 1)
    matmul_kernel6(const __grid_constant__ CUtensorMap map_a, const __grid_constant__ CUtensorMap map_b,
                   T* __restrict__ C, int64_t M, int64_t N, int64_t K, int element0) {
  extern __shared__ __align__(1024) unsigned char smem6[];
  // TMA's 128-byte swizzle repeats every 1024 bytes: the ring starts on such a boundary
  const uint32_t base = (static_cast<uint32_t>(__cvta_generic_to_shared(smem6)) + 1023) & ~1023u;
  const Ring6 ring{base, base + kStages6 * kStageBytes6, base + kStages6 * kStageBytes6 + 8 * kStages6};
  const int m0 = blockIdx.y * kBM6, n0 = blockIdx.x * kBN6, element = element0 + blockIdx.z;
  const int64_t steps = course::ceil_div<int64_t>(K, Tile6<T>::kBK);
  const int warpgroup = threadIdx.x / 128;
  if (threadIdx.x == 0) {
    for (int s = 0; s < kStages6; ++s) {
      mbar_init(ring.full + 8 * s, 1);                 // the producer's arrival (and the copies' bytes)
      mbar_init(ring.empty + 8 * s, kConsumerWarps6);  // one arrival per consumer warp
    }
    COURSE_SM90A(asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");)  // seen by TMA too
  }
  __syncthreads();
  if (warpgroup == 0) {
    // the producer's registers go to the consumers (setmaxnreg: per warpgroup, from its own pool)
    COURSE_SM90A(asm volatile("setmaxnreg.dec.sync.aligned.u32 40;\n");)
    if (threadIdx.x == 0) produce6<T>(&map_a, &map_b, ring, steps, m0, n0, element);
    return;
  }
  COURSE_SM90A(asm volatile("setmaxnreg.inc.sync.aligned.u32 232;\n");)
  const int warp = (threadIdx.x % 128) / 32, lane = threadIdx.x % 32;
  const int arow = (warpgroup - 1) * 64 + warp * 16;  // this warp's 16 rows of the block's A tile
  float d[128];
  // A's registers twice over: a step's wgmmas read them after the step's code has moved on
  uint32_t a0[Tile6<T>::kMmaSteps][4], a1[Tile6<T>::kMmaSteps][4] = {};
  int64_t step = 0;
  for (; step + 1 < steps; step += 2) {
    consume6<T>(d, a0, a1, ring, step, arow, lane);
    consume6<T>(d, a1, a0, ring, step + 1, arow, lane);
  }
  if (step < steps) consume6<T>(d, a0, a1, ring, step, arow, lane);
  wgmma_wait<0>();  // (K >= 1: the launcher writes K == 0's zeros itself, with no tensor map to make)
#pragma unroll
  for (int i = 0; i < 128; ++i) keep(d[i]);
  // d[4 j + 2 h + e]: row g + 8 h of the warp's 16, column 8 j + 2 t + e (mma.sync's C layout, 32 times)
  const int g = lane / 4, t = lane % 4;
  C += int64_t(element) * M * N;
  const bool pairs = N % 2 == 0;
#pragma unroll
  for (int j = 0; j < 32; ++j) {
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int64_t row = m0 + arow + 8 * h + g, col = n0 + 8 * j + 2 * t;
      if (row >= M || col >= N) continue;
      T* p = C + row * N + col;
      if (pairs) {
        store2(p, d[4 * j + 2 * h], d[4 * j + 2 * h + 1]);
      } else {
        store1(p, d[4 * j + 2 * h]);
        if (col + 1 < N) store1(p + 1, d[4 * j + 2 * h + 1]);
      }
    }
  }
}

// Version 6 runs only on a compute capability 9.0 GPU (wgmma and TMA are sm_90a's own: not on 10.0 or
// 12.0) and only from code built for it ("9.0a" in TORCH_CUDA_ARCH_LIST, which grader/env.py sets on
// such a GPU): read from the code itself (kernel6_built), once per device.
void check_kernel6() {
  const auto [major, minor] = course::device_capability();
  int device = 0;
  C10_CUDA_CHECK(cudaGetDevice(&device));
  TORCH_CHECK(major == 9 && minor == 0, "version 6 needs compute capability 9.0 (Hopper's wgmma and TMA); this GPU is " +
                                            std::to_string(major) + "." + std::to_string(minor));
  static int built[64] = {};  // per device: 0 not asked yet, 1 yes, 2 no
  if (device < 64 && built[device] == 0) {
    int flag = 0;
    C10_CUDA_CHECK(cudaMemcpyFromSymbol(&flag, kernel6_built, sizeof(flag)));
    built[device] = flag ? 1 : 2;
  }
  TORCH_CHECK(device >= 64 || built[device] == 1, "version 6: this build has no sm_90a code (wgmma, TMA); build with "
              "TORCH_CUDA_ARCH_LIST=\"9.0a\" (make grade sets it on a 9.0 GPU)");
}

// cuTensorMapEncodeTiled is a driver function: found through the runtime, so nothing links the driver.
using EncodeTiled6 = CUresult (*)(CUtensorMap*, CUtensorMapDataType, cuuint32_t, void*, const cuuint64_t*,
                                  const cuuint64_t*, const cuuint32_t*, const cuuint32_t*, CUtensorMapInterleave,
                                  CUtensorMapSwizzle, CUtensorMapL2promotion, CUtensorMapFloatOOBfill);

EncodeTiled6 encode_tiled6() {
  static EncodeTiled6 fn = nullptr;
  if (fn == nullptr) {
    void* p = nullptr;
    cudaDriverEntryPointQueryResult found;
#if CUDART_VERSION >= 12050
    C10_CUDA_CHECK(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &found));
#else
    C10_CUDA_CHECK(cudaGetDriverEntryPoint("cuTensorMapEncodeTiled", &p, cudaEnableDefault, &found));
#endif
    TORCH_CHECK(found == cudaDriverEntryPointSuccess && p != nullptr,
                "version 6: the CUDA driver has no cuTensorMapEncodeTiled (TMA needs CUDA 12)");
    fn = reinterpret_cast<EncodeTiled6>(p);
  }
  return fn;
}

// A TMA descriptor of `batch` row-major matrices of `rows` x `cols` elements (row stride ld, matrix
// stride rows ld), read in boxes of kRowBytes6 of a row by box_rows rows, 128-byte swizzle.
template <typename T>
CUtensorMap tensor_map6(const T* p, int64_t batch, int64_t rows, int64_t cols, int64_t ld, int box_rows) {
  CUtensorMap map;
  const cuuint64_t dims[3] = {cuuint64_t(cols), cuuint64_t(rows), cuuint64_t(batch)};
  const cuuint64_t strides[2] = {cuuint64_t(ld * sizeof(T)), cuuint64_t(rows * ld * sizeof(T))};  // bytes
  const cuuint32_t box[3] = {cuuint32_t(Tile6<T>::kBK), cuuint32_t(box_rows), 1};
  const cuuint32_t unit[3] = {1, 1, 1};
  const CUresult r = encode_tiled6()(&map, sizeof(T) == 4 ? CU_TENSOR_MAP_DATA_TYPE_FLOAT32 : CU_TENSOR_MAP_DATA_TYPE_BFLOAT16,
                                     3, const_cast<T*>(p), dims, strides, box, unit, CU_TENSOR_MAP_INTERLEAVE_NONE,
                                     CU_TENSOR_MAP_SWIZZLE_128B, CU_TENSOR_MAP_L2_PROMOTION_L2_256B,
                                     CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  TORCH_CHECK(r == CUDA_SUCCESS, "version 6: cuTensorMapEncodeTiled failed (" + std::to_string(int(r)) + ")");
  return map;
}

// matmul_small_tiles<BM, vec> on `grid` (the instantiation the operands allow), checked.
template <int BM>
void launch_small_tiles(bool vec, dim3 grid, const float* a, const float* b, float* out, int64_t M, int64_t N,
                        int64_t K, int64_t k_split, int64_t splits, cudaStream_t stream) {
  if (vec) {
    course::took("small.vec4");
    matmul_small_tiles<BM, true><<<grid, kSmallThreads, 0, stream>>>(a, b, out, M, N, K, k_split, splits);
  } else {
    course::took("small.scalar");
    matmul_small_tiles<BM, false><<<grid, kSmallThreads, 0, stream>>>(a, b, out, M, N, K, k_split, splits);
  }
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// The matrix-vector kernels (plan.path GemvRows or GemvCols) over `z` batch elements, into C or the
// split workspace `o`.
void launch_gemv(const Plan& plan, const float* a, const float* b, float* o, int64_t M, int64_t N, int64_t K,
                 unsigned z, cudaStream_t stream) {
  const unsigned splits = static_cast<unsigned>(plan.splits);
  if (splits > 1) course::took(plan.path == Path::kGemvRows ? "gemv_rows.splitk" : "gemv_cols.splitk");
  if (plan.path == Path::kGemvRows) {
    const dim3 grid(static_cast<unsigned>(course::ceil_div<int64_t>(M, kGemvRowsPerBlock)), splits, z);
    if (K % 4 == 0 && plan.k_split % 4 == 0 && course::is_aligned16(a, b)) {
      course::took("gemv_rows.vec16");
      matmul_gemv_rows<true><<<grid, kGemvThreads, 0, stream>>>(a, b, o, M, K, plan.k_split);
    } else {
      course::took("gemv_rows.scalar");
      matmul_gemv_rows<false><<<grid, kGemvThreads, 0, stream>>>(a, b, o, M, K, plan.k_split);
    }
  } else {
    // (each launch written out: grader/run/resources.py reads a kernel's block size from its launches)
    const bool vec = N % 4 == 0 && course::is_aligned16(b);
    if (plan.path == Path::kGemvCols) {
      const dim3 grid(static_cast<unsigned>(course::ceil_div<int64_t>(N, kGemvColsPerBlock)), splits, z);
      if (vec) {
        course::took("gemv_cols.vec16");
        matmul_gemv_cols<true, kGemvColsPerBlock><<<grid, kGemvThreads, 0, stream>>>(a, b, o, N, K, plan.k_split);
      } else {
        course::took("gemv_cols.scalar");
        matmul_gemv_cols<false, kGemvColsPerBlock><<<grid, kGemvThreads, 0, stream>>>(a, b, o, N, K, plan.k_split);
      }
    } else {
      const dim3 grid(static_cast<unsigned>(course::ceil_div<int64_t>(N, kGemvColsNarrow)), splits, z);
      if (vec) {
        course::took("gemv_cols_narrow.vec16");
        matmul_gemv_cols<true, kGemvColsNarrow><<<grid, kGemvThreads, 0, stream>>>(a, b, o, N, K, plan.k_split);
      } else {
        course::took("gemv_cols_narrow.scalar");
        matmul_gemv_cols<false, kGemvColsNarrow><<<grid, kGemvThreads, 0, stream>>>(a, b, o, N, K, plan.k_split);
      }
    }
  }
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// C (batch x MN outputs, float32 or bfloat16) = the sum of the workspace's splits, in a fixed order.
template <typename T>
void launch_splitk_reduce(const float* workspace, T* C, int64_t batch, int64_t MN, int64_t splits, cudaStream_t stream) {
  const int64_t total = batch * MN, sms = sm_count(), busy = 4 * sms * kGemvThreads;  // threads: 4 times the GPU's
  // 4 outputs a thread where the outputs fill the GPU that way too (a float4, or 4 bfloat16s, aligned);
  // where they are fewer, one, and the splits shared by more threads (slices) do better (32 x 1000 x
  // 2048's 32 splits: 5.4 us float by float, 10.6 us by float4s)
  const bool vec = total >= 4 * busy && MN % 4 == 0 && course::is_aligned16(workspace) &&
                   reinterpret_cast<uintptr_t>(C) % (4 * sizeof(T)) == 0;
  const int64_t units = vec ? total / 4 : total;
  int slices = 1;  // threads a unit: more while the units alone would not fill the GPU 4 times over
  while (slices < 32 && 2 * slices <= splits && units * slices < busy) slices *= 2;
  const int64_t per = course::ceil_div<int64_t>(splits, slices);
  int64_t group = 1;  // about sqrt(per): the chains of additions
  while (group * group < per) ++group;
  const unsigned blocks =
      static_cast<unsigned>(std::min(course::ceil_div<int64_t>(units, kGemvThreads / slices), 8 * sms));
  // overlapping the product's last blocks: the second launch's start had been a tenth of a small
  // product's time (H100: 32 x 1280 by 1280 x 1000 15.6 -> 14.4 us, 0.80x -> 0.87x of cuBLAS; 24 x 512 by
  // 512 x 1024 0.82x -> 0.91x; 1 x 768 by 768 x 3072 1.06x -> 1.26x)
  if (vec) {
    course::took<T>("splitk_reduce.vec4");
    course::launch_after_previous(matmul_splitk_reduce<T, 4>, blocks, kGemvThreads, 0, stream, workspace, C, MN, total,
                                  splits, group, slices);
  } else {
    course::took<T>("splitk_reduce.scalar");
    course::launch_after_previous(matmul_splitk_reduce<T, 1>, blocks, kGemvThreads, 0, stream, workspace, C, MN, total,
                                  splits, group, slices);
  }
}

// The split-K workspace of a plan: [batch, splits, rows, N] floats for the rows that split (the tail's
// rows where the plan has a head, else all M).
int64_t workspace_floats(const Plan& plan, int64_t batch, int64_t M, int64_t N) {
  if (plan.path == Path::kStreamK) return 2 * streamk_workers() * kBM4 * kBN4;  // two tile parts a worker
  return plan.splits > 1 ? batch * plan.splits * (M - plan.head_rows) * N : 0;
}

// Stream-K (given): the workers, then the fix-up of the tiles they shared.
void launch_streamk(const float* A, const float* B, float* C, int64_t M, int64_t N, int64_t K, float* workspace,
                    cudaStream_t stream) {
  const int64_t workers = streamk_workers();
  const int64_t tiles = course::ceil_div<int64_t>(M, kBM4) * course::ceil_div<int64_t>(N, kBN4);
  // as kernel 4's launch: 16-byte copies of B and float4 stores of C need N % 4 == 0 and both aligned
  if (N % 4 == 0 && course::is_aligned16(B) && course::is_aligned16(C)) {
    course::took("v4.streamk.vec16");
    matmul_kernel4_streamk<true><<<static_cast<unsigned>(workers), kThreads4, 0, stream>>>(A, B, C, workspace, M, N,
                                                                                         K, workers);
  } else {
    course::took("v4.streamk.scalar");
    matmul_kernel4_streamk<false><<<static_cast<unsigned>(workers), kThreads4, 0, stream>>>(A, B, C, workspace, M, N,
                                                                                          K, workers);
  }
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  const dim3 grid(static_cast<unsigned>(tiles), kBM4 * kBN4 / (4 * 256));
  course::launch_after_previous(matmul_streamk_fixup, grid, 256, 0, stream, workspace, C, M, N, K, workers);
}

}  // namespace

void matmul_cuda1(const float* A, const float* B, float* C, int64_t M, int64_t N, int64_t K, cudaStream_t stream) {
  course::took("v1");  // (planner paths: course/paths.h)
  // BEGIN SOLUTION
  // TODO: first refuse an M whose row blocks would not fit in gridDim.y (at most 65535):
  // TODO: check_grid_rows(M, kBlock1Y, "version 1") (given above; graded as an input check). Then
  // TODO: launch matmul_kernel1 on `stream` with (kBlock1X, kBlock1Y) blocks and a grid of
  // TODO: (ceil(N / kBlock1X), ceil(M / kBlock1Y)) blocks; check the launch. (The binding returns
  // TODO: before this for M == 0 or N == 0; K == 0 must still write zeros.)
  // TODO: (the reference solution takes about 5 lines)
  TORCH_CHECK(false, "matmul_cuda1 (matmul.cu) is not implemented yet");
  // END SOLUTION
}

void matmul_cuda2(const float* A, const float* B, float* C, int64_t M, int64_t N, int64_t K, cudaStream_t stream) {
  course::took("v2");
  // BEGIN SOLUTION
  // TODO: first check_grid_rows(M, kTile2, "version 2") (M too large for gridDim.y is an error, graded),
  // TODO: then launch matmul_kernel2 with (kTile2, kTile2) blocks covering C; check the launch.
  // TODO: (the reference solution takes about 5 lines)
  TORCH_CHECK(false, "matmul_cuda2 (matmul.cu) is not implemented yet");
  // END SOLUTION
}

void matmul_cuda3(const float* A, const float* B, float* C, int64_t M, int64_t N, int64_t K, cudaStream_t stream) {
  check_grid_rows(M, kBM, "version 3");
  const dim3 grid(static_cast<unsigned>(course::ceil_div<int64_t>(N, kBN)),
                  static_cast<unsigned>(course::ceil_div<int64_t>(M, kBM)));
  // float4 paths need rows that start on 16-byte boundaries: K (or N) a multiple of 4, aligned bases.
  const bool vec_a = K % 4 == 0 && course::is_aligned16(A);
  const bool vec_b = N % 4 == 0 && course::is_aligned16(B, C);
  course::took(vec_a ? (vec_b ? "v3.vec_a_vec_b" : "v3.vec_a") : vec_b ? "v3.vec_b" : "v3.scalar");
  // BEGIN SOLUTION
  // TODO: launch matmul_kernel3<vec_a, vec_b> (four instantiations: pick with if/else) on `stream`
  // TODO: with kThreads3 threads per block and `grid`; check the launch.
  // TODO: (the reference solution takes about 10 lines)
  TORCH_CHECK(false, "matmul_cuda3 (matmul.cu) is not implemented yet");
  // END SOLUTION
}

int64_t matmul_workspace4(int64_t batch, int64_t M, int64_t N, int64_t K) {
  return workspace_floats(plan4(batch, M, N, K), batch, M, N);
}

bool matmul_tiles4(int64_t batch, int64_t M, int64_t N, int64_t K) {
  return plan4(batch, M, N, K).path == Path::kTiles;
}

// Kernel 4 on a transposed A or B (given): the instantiation of the layouts, as the row-major launch below.
void launch_kernel4_transposed(bool trans_a, bool trans_b, bool vec_b, dim3 grid, const float* A, const float* B,
                               float* out, int64_t M, int64_t N, int64_t K, const Plan& plan, cudaStream_t stream) {
  const auto launch = [&](auto kernel) {
    kernel<<<grid, kThreads4, 0, stream>>>(A, B, out, M, N, K, plan.k_split, plan.splits);
  };
  if (trans_a && trans_b) {
    course::took("v4.tiles.a_mT_b_mT");  // (planner paths: course/paths.h)
    vec_b ? launch(matmul_kernel4<true, true, true>) : launch(matmul_kernel4<false, true, true>);
  } else if (trans_a) {
    course::took("v4.tiles.a_mT");
    vec_b ? launch(matmul_kernel4<true, true, false>) : launch(matmul_kernel4<false, true, false>);
  } else {
    course::took("v4.tiles.b_mT");
    vec_b ? launch(matmul_kernel4<true, false, true>) : launch(matmul_kernel4<false, false, true>);
  }
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

namespace {

// Version 4's kernels as `plan` says, over `batch` elements, into `out`: C itself when the plan has one
// split, else the workspace [batch, splits, M, N] that matmul_splitk_reduce sums.
void launch4(const Plan& plan, const float* A, const float* B, float* out, int64_t batch, int64_t M, int64_t N,
             int64_t K, cudaStream_t stream, bool trans_a, bool trans_b) {
  // gridDim.z holds batch elements x splits, at most 65535: a larger batch takes several launches
  const int64_t per_launch = kMaxGridZ / plan.splits;
  for (int64_t b0 = 0; b0 < batch; b0 += per_launch) {
    if (b0 > 0) course::took("v4.batch_over_grid_z");
    const int64_t nb = std::min(per_launch, batch - b0);
    const float* a = A + b0 * M * K;
    const float* b = B + b0 * K * N;
    float* o = out + b0 * plan.splits * M * N;
    const unsigned splits = static_cast<unsigned>(plan.splits), z = static_cast<unsigned>(nb);
    if (plan.path == Path::kGemvRows || plan.path == Path::kGemvCols || plan.path == Path::kGemvColsNarrow) {
      launch_gemv(plan, a, b, o, M, N, K, z, stream);
      continue;
    }
    if (plan.path != Path::kTiles) {  // the small tiles
      const int rows = plan.path == Path::kSmall32 ? 32 : plan.path == Path::kSmall64 ? 64 : 128;
      const dim3 grid(static_cast<unsigned>(course::ceil_div<int64_t>(N, kSmallArea / rows)),
                      static_cast<unsigned>(course::ceil_div<int64_t>(M, rows)), z * splits);
      const bool vec = K % 4 == 0 && N % 4 == 0 && plan.k_split % 4 == 0 && course::is_aligned16(A, B, out);
      if (rows == 32) {
        course::took("v4.small32");
        launch_small_tiles<32>(vec, grid, a, b, o, M, N, K, plan.k_split, plan.splits, stream);
      } else if (rows == 64) {
        course::took("v4.small64");
        launch_small_tiles<64>(vec, grid, a, b, o, M, N, K, plan.k_split, plan.splits, stream);
      } else {
        course::took("v4.small128");
        launch_small_tiles<128>(vec, grid, a, b, o, M, N, K, plan.k_split, plan.splits, stream);
      }
      continue;
    }
    // grid z: this launch's batch elements x the splits (blockIdx.z = element * splits + split)
    const dim3 grid(static_cast<unsigned>(course::ceil_div<int64_t>(N, kBN4)),
                    static_cast<unsigned>(course::ceil_div<int64_t>(M, kBM4)), z * splits);
    // 16-byte copies of B need N % 4 == 0 and 16-byte aligned B and C (A is copied 4 bytes at a time);
    // a transposed B is copied 4 bytes at a time too, and then only C's float4 stores need them.
    const bool vec_b = N % 4 == 0 && course::is_aligned16(out) && (trans_b || course::is_aligned16(B));
    if (trans_a || trans_b) {
      launch_kernel4_transposed(trans_a, trans_b, vec_b, grid, a, b, o, M, N, K, plan, stream);
      continue;
    }
    course::took(vec_b ? "v4.tiles.vec_b" : "v4.tiles.scalar_b");
    // BEGIN SOLUTION
    // TODO: launch matmul_kernel4<vec_b> (two instantiations: pick with if/else) on `stream` with
    // TODO: kThreads4 threads per block and `grid`, on this launch's a, b and o, with M, N, K and the
    // TODO: plan's k_split and splits; check the launch.
    // TODO: (the reference solution takes about 6 lines)
    TORCH_CHECK(false, "launch4 (matmul.cu) is not implemented yet");
    // END SOLUTION
  }
}

}  // namespace

void matmul_cuda4(const float* A, const float* B, float* C, int64_t batch, int64_t M, int64_t N, int64_t K,
                  float* workspace, cudaStream_t stream, bool trans_a, bool trans_b) {
  check_grid_rows(M, kBM4, "version 4");
  Plan plan = plan4(batch, M, N, K);
  TORCH_CHECK((plan.splits == 1 && plan.path != Path::kStreamK) || workspace != nullptr, "matmul_cuda4: this product "
              "splits K and needs a workspace of matmul_workspace4(...) floats");
  TORCH_CHECK(!(trans_a || trans_b) || plan.path == Path::kTiles, "matmul_cuda4: a transposed A or B is read in "
              "place only by kernel 4's tiles (matmul_tiles4); this product takes another path");
  // A transposed A's rows are its storage's columns, so a tail of rows is not a matrix kernel 4 reads:
  // its tail runs whole (the workspace goes unused)
  if (plan.head_rows > 0 && trans_a) plan = {plan.path, 1, K};
  if (batch > 1) course::took("v4.batched");  // (planner paths: course/paths.h)
  if (plan.path == Path::kStreamK) {
    course::took("v4.streamk");
    launch_streamk(A, B, C, M, N, K, workspace, stream);
    return;
  }
  if (plan.head_rows > 0) {  // the head straight into C, then the tail's splits, summed into C's rows
    course::took("v4.split_tail");
    const int64_t head = plan.head_rows, tail = M - head;
    launch4({plan.path, 1, K}, A, B, C, 1, head, N, K, stream, false, trans_b);
    launch4(plan, A + head * K, B, workspace, 1, tail, N, K, stream, false, trans_b);
    launch_splitk_reduce(workspace, C + head * N, 1, tail * N, plan.splits, stream);
    return;
  }
  launch4(plan, A, B, plan.splits > 1 ? workspace : C, batch, M, N, K, stream, trans_a, trans_b);
  if (plan.splits > 1) course::took("v4.splitk");
  if (plan.splits > 1) launch_splitk_reduce(workspace, C, batch, M * N, plan.splits, stream);
}

namespace {

// Version 5 as plan5 says: kernel 5's tiles (K split into the workspace, then summed into C, where they
// are few), or for float32 matrix-vector products version 4's kernels. gridDim.z holds batch elements x
// splits, at most 65535: a larger batch takes several launches.
template <typename T>
void matmul5(const T* A, const T* B, T* C, int64_t batch, int64_t M, int64_t N, int64_t K, float* workspace,
             cudaStream_t stream) {
  check_grid_rows(M, kBM5, "version 5");
  // tensor cores take TF32 and BF16 from compute capability 8.0 on, and only from code compiled for such
  // a GPU (a 7.5 build JIT-compiled on an H100 has no tensor-core path)
  course::check_tensor_cores(matmul_kernel5<T, false, false, false>, "version 5", sizeof(T) == 4 ? "TF32" : "BF16");
  const Plan plan = plan5<T>(batch, M, N, K);
  const bool bt = reads_bt5<T>(plan, M, K);
  TORCH_CHECK((plan.splits == 1 && !bt) || workspace != nullptr, "matmul_cuda5: this product splits K or reads "
              "B^T and needs a workspace of matmul_workspace5(...) floats");
  // the workspace: B^T ([batch, N, ldbt] TF32 words) where read, then the split-K partial sums
  const int64_t ldbt = padded16<float>(K), bt_floats = bt ? batch * N * ldbt : 0;
  float* partials = plan.splits > 1 ? workspace + bt_floats : nullptr;
  const int64_t per_launch = kMaxGridZ / plan.splits;
  if (batch > 1) course::took<T>("v5.batched");  // (planner paths: course/paths.h)
  for (int64_t b0 = 0; b0 < batch; b0 += per_launch) {
    if (b0 > 0) course::took<T>("v5.batch_over_grid_z");
    const int64_t nb = std::min(per_launch, batch - b0);
    const T* a = A + b0 * M * K;
    const T* b = B + b0 * K * N;
    T* c = C + b0 * M * N;
    float* partial = partials ? partials + b0 * plan.splits * M * N : nullptr;  // [nb, splits, M, N]
    if constexpr (sizeof(T) == 4) {  // float32: the matrix-vector kernels, or B^T (plan5, reads_bt5)
      if (plan.path != Path::kTiles) {
        course::took<T>("v5.matvec");
        launch_gemv(plan, a, b, partial ? partial : c, M, N, K, static_cast<unsigned>(nb), stream);
        continue;
      }
      if (bt) {
        course::took<T>("v5.bt");
        uint32_t* b_t = reinterpret_cast<uint32_t*>(workspace) + b0 * N * ldbt;
        launch_transpose_tf32(b, N, b_t, nb, K, N, ldbt, stream);
        launch5<T, true>(a, reinterpret_cast<const T*>(b_t), c, partial, M, N, K, ldbt, nb, plan, stream);
        continue;
      }
    }
    course::took<T>("v5.tiles");
    launch5<T, false>(a, b, c, partial, M, N, K, 0, nb, plan, stream);
  }
  if (plan.splits > 1) course::took<T>("v5.splitk");
  if (plan.splits > 1) launch_splitk_reduce(partials, C, batch, M * N, plan.splits, stream);
}

}  // namespace

int64_t matmul_workspace5(int64_t batch, int64_t M, int64_t N, int64_t K, bool bfloat16) {
  if (bfloat16) return workspace_floats(plan5<__nv_bfloat16>(batch, M, N, K), batch, M, N);
  const Plan plan = plan5<float>(batch, M, N, K);
  return (reads_bt5<float>(plan, M, K) ? batch * N * padded16<float>(K) : 0) + workspace_floats(plan, batch, M, N);
}

void matmul_cuda5(const float* A, const float* B, float* C, int64_t batch, int64_t M, int64_t N, int64_t K,
                  float* workspace, cudaStream_t stream) {
  matmul5(A, B, C, batch, M, N, K, workspace, stream);
}

void matmul_cuda5(const __nv_bfloat16* A, const __nv_bfloat16* B, __nv_bfloat16* C, int64_t batch, int64_t M,
                  int64_t N, int64_t K, float* workspace, cudaStream_t stream) {
  matmul5(A, B, C, batch, M, N, K, workspace, stream);
}

namespace {

// Version 6: for float32, B^T rounded to TF32 into the workspace; then kernel 6's tiles. A's rows are
// lda elements apart, B's ldb (K and N, or padded to 16 bytes by the caller: TMA reads rows on 16-byte
// boundaries). gridDim.z holds batch elements, at most 65535: a larger batch takes several launches.
template <typename T>
void matmul6(const T* A, int64_t lda, const T* B, int64_t ldb, T* C, int64_t batch, int64_t M, int64_t N,
             int64_t K, float* workspace, cudaStream_t stream) {
  check_grid_rows(M, kBM6, "version 6");
  check_kernel6();
  if (K == 0) {  // no k steps: C is zeros (0.0 is all-zero bits in float32 and bfloat16)
    course::took<T>("v6.k0");
    C10_CUDA_CHECK(cudaMemsetAsync(C, 0, size_t(batch * M * N) * sizeof(T), stream));
    return;
  }
  const int64_t Kp = padded16<T>(K);
  TORCH_CHECK(lda >= K && lda % Tile6<T>::kElems == 0 && course::is_aligned16(A), "matmul_cuda6: A's rows must "
              "start on 16-byte boundaries (A aligned, lda a multiple of 16 bytes), as TMA reads them");
  CUtensorMap map_b;
  if constexpr (Tile6<T>::kBTransposed) {
    TORCH_CHECK(workspace != nullptr && course::is_aligned16(workspace), "matmul_cuda6: float32 needs an aligned "
                "workspace of matmul_workspace6(...) floats (B^T)");
    uint32_t* bt = reinterpret_cast<uint32_t*>(workspace);
    launch_transpose_tf32(B, ldb, bt, batch, K, N, Kp, stream);
    map_b = tensor_map6(reinterpret_cast<const T*>(bt), batch, N, Kp, Kp, kBN6);
  } else {
    TORCH_CHECK(ldb >= N && ldb % Tile6<T>::kElems == 0 && course::is_aligned16(B), "matmul_cuda6: B's rows must "
                "start on 16-byte boundaries (B aligned, ldb a multiple of 16 bytes), as TMA reads them");
    map_b = tensor_map6(B, batch, K, N, ldb, 64);
  }
  const CUtensorMap map_a = tensor_map6(A, batch, M, K, lda, kBM6);
  C10_CUDA_CHECK(cudaFuncSetAttribute(matmul_kernel6<T>, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmem6));
  course::took<T>("v6.tiles");  // (planner paths: course/paths.h)
  if (batch > 1) course::took<T>("v6.batched");
  // BEGIN SOLUTION
  // TODO: for each range of at most kMaxGridZ batch elements from element0: a grid of (ceil(N / kBN6),
  // TODO: ceil(M / kBM6), elements in the range), kThreads6 threads, kSmem6 bytes of dynamic shared
  // TODO: memory, on map_a, map_b, C, M, N, K, element0; check each launch.
  // TODO: (the reference solution takes about 7 lines)
  TORCH_CHECK(false, "matmul6 (matmul.cu) is not implemented yet");
  // END SOLUTION
}

}  // namespace

int64_t matmul_workspace6(int64_t batch, int64_t N, int64_t K, bool bfloat16) {
  if (bfloat16) return 0;  // B read as it is stored
  return batch * N * padded16<float>(K);  // B^T, its rows padded
}

void matmul_cuda6(const float* A, int64_t lda, const float* B, int64_t ldb, float* C, int64_t batch, int64_t M,
                  int64_t N, int64_t K, float* workspace, cudaStream_t stream) {
  matmul6(A, lda, B, ldb, C, batch, M, N, K, workspace, stream);
}

void matmul_cuda6(const __nv_bfloat16* A, int64_t lda, const __nv_bfloat16* B, int64_t ldb, __nv_bfloat16* C,
                  int64_t batch, int64_t M, int64_t N, int64_t K, float* workspace, cudaStream_t stream) {
  matmul6(A, lda, B, ldb, C, batch, M, N, K, workspace, stream);
}
