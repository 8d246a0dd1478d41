// Exercise 05, versions 1-3: C = A @ B in float32, from naive to register-blocked:
//   matmul_kernel1  one thread per output, operands read straight from global memory
//   matmul_kernel2  32 x 32 tiles of A and B staged in shared memory (each load reused 32 times)
//   matmul_kernel3  128 x 128 block tiles, 8 x 8 outputs per thread in registers, float4 loads,
//                   double-buffered shared memory
//
// This file includes no PyTorch tensor headers, so editing it recompiles in about a second.
// Tensors, the version switch and op registration live in matmul.cpp.
#include "matmul_internal.cuh"

using namespace matmul_internal;  // what the files share (matmul_internal.cuh)

namespace {

// ---------------------------------------------------------------------------------- kernel 1
[[maybe_unused]] constexpr int kBlock1X = 32, kBlock1Y = 8;

// Grid (ceil(N / 32), ceil(M / 8)), block (32, 8): thread (tx, ty) computes C[row][col] with
// row = 8 by + ty, col = 32 bx + tx. A warp reads one B row segment (coalesced) and one A element
// (a broadcast) per k.
[[maybe_unused]] __global__ void matmul_kernel1(const float* __restrict__ A, const float* __restrict__ B,
                                                float* __restrict__ C, int64_t M, int64_t N, int64_t K) {
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
  // BEGIN OPEN
  // GOAL: fill the stage's registers with this k step's A and B elements the comment above assigns to the thread,
  // GOAL: zeros outside M x K and K x N; one 16-byte load per 4-wide group when kVecA/kVecB (README Background: Kernel 3).
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
  // END OPEN
}

// Registers -> shared memory. A is stored transposed (As[k][m]) so that a thread's 8 rows of one k
// are two float4 reads, like B's 8 columns.
[[maybe_unused]] __device__ __forceinline__ void store_stage(const Stage& s, float (*As)[kBM], float (*Bs)[kBN]) {
  // BEGIN OPEN
  // GOAL: write the stage's registers into the shared tiles, A transposed (As[k][m]) so that the inner loop reads a
  // GOAL: thread's rows as float4s; no two lanes of a warp on different words of one bank (Background: Kernel 3).
  const int tid = threadIdx.x;
#pragma unroll
  for (int i = 0; i < 4; ++i) As[4 * (tid % 2) + i][tid / 2] = s.a[i];
  *reinterpret_cast<float4*>(&Bs[tid / 32][4 * (tid % 32)]) = make_float4(s.b[0], s.b[1], s.b[2], s.b[3]);
  // END OPEN
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
  // BEGIN OPEN
  // GOAL: C = A B for this block's 128 x 128 tile (fp32 FMAs, any M, N, K: edges off the tile's multiple, K = 0, int64 sizes),
  // GOAL: each element of A and B read from global memory once per tile and each shared value reused across a thread's
  // GOAL: 8 x 8 outputs; the next k step's loads in flight while this one computes (Background: Kernel 3: register blocking).
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
  // END OPEN
}

}  // namespace

void matmul_cuda1(const float* A, const float* B, float* C, int64_t M, int64_t N, int64_t K, cudaStream_t stream) {
  course::took("v1");  // (planner paths: course/paths.h)
  // BEGIN SOLUTION
  // GOAL: run matmul_kernel1 over all of C on `stream`, refusing an M its grid cannot cover, and
  // GOAL: report a failed launch.
  // TODO: first refuse an M whose row blocks would not fit in gridDim.y (at most 65535):
  // TODO: check_grid_rows(M, kBlock1Y, "version 1") (given above; graded as an input check). Then
  // TODO: launch matmul_kernel1 on `stream` with (kBlock1X, kBlock1Y) blocks and a grid of
  // TODO: (ceil(N / kBlock1X), ceil(M / kBlock1Y)) blocks; check the launch. (The binding returns
  // TODO: before this for M == 0 or N == 0; K == 0 must still write zeros.)
  // STUB: TORCH_CHECK(false, "matmul_cuda1 (matmul_basic.cu) is not implemented yet");
  check_grid_rows(M, kBlock1Y, "version 1");
  const dim3 grid(static_cast<unsigned>(course::ceil_div<int64_t>(N, kBlock1X)),
                  static_cast<unsigned>(course::ceil_div<int64_t>(M, kBlock1Y)));
  matmul_kernel1<<<grid, dim3(kBlock1X, kBlock1Y), 0, stream>>>(A, B, C, M, N, K);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  // END SOLUTION
}

void matmul_cuda2(const float* A, const float* B, float* C, int64_t M, int64_t N, int64_t K, cudaStream_t stream) {
  course::took("v2");
  // BEGIN SOLUTION
  // GOAL: run matmul_kernel2 over all of C on `stream`, refusing an M its grid cannot cover, and
  // GOAL: report a failed launch.
  // TODO: first check_grid_rows(M, kTile2, "version 2") (M too large for gridDim.y is an error, graded),
  // TODO: then launch matmul_kernel2 with (kTile2, kTile2) blocks covering C; check the launch.
  // STUB: TORCH_CHECK(false, "matmul_cuda2 (matmul_basic.cu) is not implemented yet");
  check_grid_rows(M, kTile2, "version 2");
  const dim3 grid(static_cast<unsigned>(course::ceil_div<int64_t>(N, kTile2)),
                  static_cast<unsigned>(course::ceil_div<int64_t>(M, kTile2)));
  matmul_kernel2<<<grid, dim3(kTile2, kTile2), 0, stream>>>(A, B, C, M, N, K);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  // END SOLUTION
}

void matmul_cuda3(const float* A, const float* B, float* C, int64_t M, int64_t N, int64_t K, cudaStream_t stream) {
  // BEGIN OPEN
  // GOAL: run matmul_kernel3 over the whole of C on `stream` (nothing when C is empty), picking the 16-byte loader
  // GOAL: variant where K or N and the pointers allow it; report a failed launch.
  check_grid_rows(M, kBM, "version 3");
  const dim3 grid(static_cast<unsigned>(course::ceil_div<int64_t>(N, kBN)),
                  static_cast<unsigned>(course::ceil_div<int64_t>(M, kBM)));
  // float4 paths need rows that start on 16-byte boundaries: K (or N) a multiple of 4, aligned bases.
  const bool vec_a = K % 4 == 0 && course::is_aligned16(A);
  const bool vec_b = N % 4 == 0 && course::is_aligned16(B, C);
  course::took(vec_a ? (vec_b ? "v3.vec_a_vec_b" : "v3.vec_a") : vec_b ? "v3.vec_b" : "v3.scalar");
  // BEGIN SOLUTION
  // GOAL: run the matmul_kernel3 that vec_a and vec_b allow on `stream`; report a failed launch.
  // TODO: launch matmul_kernel3<vec_a, vec_b> (four instantiations: pick with if/else) on `stream`
  // TODO: with kThreads3 threads per block and `grid`; check the launch.
  // STUB: TORCH_CHECK(false, "matmul_cuda3 (matmul_basic.cu) is not implemented yet");
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
  // END OPEN
}
