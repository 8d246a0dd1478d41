// Candidates for a faster fp32 matrix product (exercise 05), timed by scripts/sweep_matmul.py.
//
// The baseline is the solution itself: solutions/05_matmul/matmul_basic.cu is included below, so
// "kernel3" here is always the current matmul_kernel3.
//
// The candidates share one template, matmul_async: C (M x N) = A (M x K) @ B (K x N), row-major,
// same launcher signature as matmul_cuda3. Differences from kernel3:
//   - global -> shared copies by cp.async (sm_80+), so no staging registers and no loads the
//     compiler can sink past the math (kernel3's SASS issues the next step's LDGs after the FFMAs);
//   - STAGES-deep ring of shared-memory tiles, one __syncthreads per k step;
//   - A is still stored transposed (As[k][m], rows padded by 4 floats) so that the inner loop reads
//     float4s of both operands; the transposition is done by 4-byte cp.asyncs, a warp copying 4 rows
//     x 8 k (4 full 32-byte sectors; the padding makes the shared-memory writes conflict-free);
//   - B by 16-byte cp.async when N % 4 == 0 and B, C are 16-byte aligned, else 4-byte ones;
//   - out-of-range elements are zero-filled by the copy itself (src-size 0), so any M, N, K works;
//   - warp tiling: warps in a WARPS_M x WARPS_N grid, each lane a 4 x 8 patch member owning
//     (TM/4) x (TN/4) groups of 4 x 4 outputs, groups 16 rows / 32 columns apart (kernel3's layout
//     is the 8 x 8 case of this).
#include <cstdint>

#include <cuda_runtime.h>

#include "matmul_basic.cu"  // the solution (kernels 1-3 and their launchers), found by the include path

namespace sweep {

__device__ __forceinline__ unsigned smem_addr(const void* p) {
  return static_cast<unsigned>(__cvta_generic_to_shared(p));
}

// 4 bytes global -> shared, asynchronously; `valid` false writes a zero and reads nothing.
__device__ __forceinline__ void cp_async4(float* dst, const float* src, bool valid) {
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" ::"r"(smem_addr(dst)), "l"(src),
               "r"(valid ? 4 : 0)
               : "memory");
}

// 16 bytes (L2 only: B's tiles are read once per block).
__device__ __forceinline__ void cp_async16(float* dst, const float* src, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_addr(dst)), "l"(src),
               "r"(valid ? 16 : 0)
               : "memory");
}

__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::: "memory"); }

template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending) : "memory");
}

template <int BM_, int BN_, int BK_, int WARPS_M_, int WARPS_N_, int STAGES_, int MIN_BLOCKS_>
struct Cfg {
  static constexpr int BM = BM_, BN = BN_, BK = BK_, WARPS_M = WARPS_M_, WARPS_N = WARPS_N_;
  static constexpr int STAGES = STAGES_, kMinBlocks = MIN_BLOCKS_;
  static constexpr int kWarps = WARPS_M * WARPS_N, kThreads = 32 * kWarps;
  static constexpr int WTM = BM / WARPS_M, WTN = BN / WARPS_N;  // warp tile
  static constexpr int TM = WTM / 4, TN = WTN / 8;              // thread tile (lanes: 4 x 8)
  static constexpr int AS = BM + 4;                             // As row length (padded)
  static constexpr int kAFloats = BK * AS, kBFloats = BK * BN, kStageFloats = kAFloats + kBFloats;
  static constexpr size_t kSmemBytes = size_t(STAGES) * kStageFloats * sizeof(float);
  // A copies: the tile is (BM / 4) x (BK / 8) blocks of 4 rows x 8 k, one per warp per copy.
  static constexpr int kABlocks = (BM / 4) * (BK / 8), kACopies = kABlocks / kWarps;
  static constexpr int kARowStep = 4 * kWarps / (BK / 8);  // rows between a thread's copies
  static constexpr int kBCopies16 = BK * BN / 4 / kThreads, kBCopies4 = BK * BN / kThreads;
  static_assert(TM % 4 == 0 && TN % 4 == 0 && WTM == 4 * TM && WTN == 8 * TN, "thread tile");
  static_assert(BK % 8 == 0 && kABlocks % kWarps == 0 && kWarps % (BK / 8) == 0, "A copy layout");
  static_assert((BK * BN / 4) % kThreads == 0 && kThreads % (BN / 4) == 0 && kThreads % BN == 0, "B copy layout");
  static_assert(STAGES >= 2, "stages");
};

// Per-thread copy state for the k steps, in order: pointers and bounds worked out once, so a step's
// copies cost a few integer instructions each (recomputing row * K in 64 bits every step doubled
// the loop's non-FFMA instructions).
template <class C, bool kVecB>
struct TileLoader {
  static constexpr int kBRowStep = kVecB ? C::kThreads / (C::BN / 4) : C::kThreads / C::BN;
  static constexpr int kBCopies = kVecB ? C::kBCopies16 : C::kBCopies4;
  const float* A;  // the matrices' starts: the (unread) source of a zero-filled copy
  const float* B;
  const float* a;  // this thread's first A copy of the next step: A[m0 + ra][k0 + ca]
  const float* b;  // its first B copy: B[k0 + rb][n0 + cb]
  int64_t a_stride, b_stride, b_step;  // between its A copies, its B copies, and B's k steps
  int64_t k_left;                      // K - k0
  int a_rows;                          // its A copies whose row is inside A
  bool b_col_ok;                       // its B column (group) is inside B
  int a_smem, b_smem;                  // their offsets in a stage's As and Bs
  int ca, rb;

  __device__ __forceinline__ TileLoader(const float* A_, const float* B_, int64_t M, int64_t N, int64_t K, int64_t m0,
                                        int64_t n0)
      : A(A_), B(B_), k_left(K) {
    const int tid = threadIdx.x, warp = tid / 32, lane = tid % 32;
    // A: each warp copies blocks of 4 rows x 8 k (lane: row lane / 8, k lane % 8), 4 bytes a lane
    const int ra = (warp / (C::BK / 8)) * 4 + lane / 8;
    ca = (warp % (C::BK / 8)) * 8 + lane % 8;
    a = A + (m0 + ra) * K + ca;
    a_stride = int64_t(C::kARowStep) * K;
    a_rows = 0;
#pragma unroll
    for (int i = 0; i < C::kACopies; ++i) a_rows += m0 + ra + i * C::kARowStep < M;
    a_smem = ca * C::AS + ra;
    // B: consecutive threads copy consecutive 16-byte groups (or floats) of a row
    const int cb = kVecB ? 4 * (tid % (C::BN / 4)) : tid % C::BN;
    rb = kVecB ? tid / (C::BN / 4) : tid / C::BN;
    b = B + rb * N + n0 + cb;
    b_stride = int64_t(kBRowStep) * N;
    b_step = int64_t(C::BK) * N;
    b_col_ok = n0 + cb < N;  // with kVecB, N % 4 == 0: a group of 4 is wholly inside or outside
    b_smem = rb * C::BN + cb;
  }

  // Issue the copies of the next k step into one stage, zero-filling what lies outside A or B.
  __device__ __forceinline__ void load(float* __restrict__ As, float* __restrict__ Bs) {
    const bool k_ok = ca < k_left;
#pragma unroll
    for (int i = 0; i < C::kACopies; ++i) {
      const bool ok = k_ok && i < a_rows;
      cp_async4(As + a_smem + i * C::kARowStep, ok ? a + i * a_stride : A, ok);
    }
#pragma unroll
    for (int i = 0; i < kBCopies; ++i) {
      const bool ok = b_col_ok && rb + i * kBRowStep < k_left;
      if (kVecB) {
        cp_async16(Bs + b_smem + i * kBRowStep * C::BN, ok ? b + i * b_stride : B, ok);
      } else {
        cp_async4(Bs + b_smem + i * kBRowStep * C::BN, ok ? b + i * b_stride : B, ok);
      }
    }
    a += C::BK;
    b += b_step;
    k_left -= C::BK;
  }
};

template <class C, bool kVecB>
__global__ void __launch_bounds__(C::kThreads, C::kMinBlocks)
    matmul_async(const float* __restrict__ A, const float* __restrict__ B, float* __restrict__ Cm, int64_t M,
                 int64_t N, int64_t K) {
  extern __shared__ float4 smem4[];
  float* smem = reinterpret_cast<float*>(smem4);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int wm = warp / C::WARPS_N, wn = warp % C::WARPS_N;
  const int arow = wm * C::WTM + 4 * (lane / 8);  // + 16 g: this thread's row groups
  const int bcol = wn * C::WTN + 4 * (lane % 8);  // + 32 g: its column groups
  const int64_t m0 = int64_t(blockIdx.y) * C::BM, n0 = int64_t(blockIdx.x) * C::BN;
  const int64_t steps = (K + C::BK - 1) / C::BK;

  float acc[C::TM][C::TN] = {};
  TileLoader<C, kVecB> loader(A, B, M, N, K, m0, n0);

  // Prologue: the first STAGES - 1 k steps in flight (a group is committed even when empty, so the
  // count of pending groups stays in step with the loop's wait).
#pragma unroll
  for (int s = 0; s < C::STAGES - 1; ++s) {
    if (s < steps) loader.load(smem + s * C::kStageFloats, smem + s * C::kStageFloats + C::kAFloats);
    cp_async_commit();
  }
  int read = 0, write = C::STAGES - 1;
  for (int64_t step = 0; step < steps; ++step) {
    cp_async_wait<C::STAGES - 2>();  // this step's tiles have landed (for this thread's copies)
    __syncthreads();                 // ... for every thread's; and all are done reading `write`
    const int64_t next = step + C::STAGES - 1;
    if (next < steps) loader.load(smem + write * C::kStageFloats, smem + write * C::kStageFloats + C::kAFloats);
    cp_async_commit();
    const float* As = smem + read * C::kStageFloats;
    const float* Bs = As + C::kAFloats;
#pragma unroll
    for (int k = 0; k < C::BK; ++k) {
      float a[C::TM], b[C::TN];
#pragma unroll
      for (int g = 0; g < C::TM / 4; ++g) {
        const float4 v = *reinterpret_cast<const float4*>(As + k * C::AS + arow + 16 * g);
        a[4 * g] = v.x, a[4 * g + 1] = v.y, a[4 * g + 2] = v.z, a[4 * g + 3] = v.w;
      }
#pragma unroll
      for (int g = 0; g < C::TN / 4; ++g) {
        const float4 v = *reinterpret_cast<const float4*>(Bs + k * C::BN + bcol + 32 * g);
        b[4 * g] = v.x, b[4 * g + 1] = v.y, b[4 * g + 2] = v.z, b[4 * g + 3] = v.w;
      }
#pragma unroll
      for (int i = 0; i < C::TM; ++i) {
#pragma unroll
        for (int j = 0; j < C::TN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);
      }
    }
    read = read + 1 == C::STAGES ? 0 : read + 1;
    write = write + 1 == C::STAGES ? 0 : write + 1;
  }
  cp_async_wait<0>();  // nothing real is pending (only empty groups), but leave none behind

#pragma unroll
  for (int i = 0; i < C::TM; ++i) {
    const int64_t row = m0 + arow + 16 * (i / 4) + i % 4;
    if (row >= M) continue;
#pragma unroll
    for (int g = 0; g < C::TN / 4; ++g) {
      const int64_t col = n0 + bcol + 32 * g;
      const float* v = &acc[i][4 * g];
      if (kVecB) {
        if (col < N) *reinterpret_cast<float4*>(Cm + row * N + col) = make_float4(v[0], v[1], v[2], v[3]);
      } else {
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          if (col + j < N) Cm[row * N + col + j] = v[j];
        }
      }
    }
  }
}

template <class C, bool kVecB>
cudaError_t launch_async(const float* A, const float* B, float* Cm, int64_t M, int64_t N, int64_t K,
                         cudaStream_t stream) {
  auto kernel = matmul_async<C, kVecB>;
  static const cudaError_t attr =
      cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(C::kSmemBytes));
  if (attr != cudaSuccess) return attr;
  const dim3 grid(unsigned((N + C::BN - 1) / C::BN), unsigned((M + C::BM - 1) / C::BM));
  if ((M + C::BM - 1) / C::BM > 65535) return cudaErrorInvalidConfiguration;
  kernel<<<grid, C::kThreads, C::kSmemBytes, stream>>>(A, B, Cm, M, N, K);
  return cudaGetLastError();
}

template <class C>
cudaError_t run_async(const float* A, const float* B, float* Cm, int64_t M, int64_t N, int64_t K,
                      cudaStream_t stream) {
  const bool vec_b = N % 4 == 0 && course::is_aligned16(B, Cm);
  return vec_b ? launch_async<C, true>(A, B, Cm, M, N, K, stream)
               : launch_async<C, false>(A, B, Cm, M, N, K, stream);
}

template <class C, bool kVecB>
void attributes_of(int64_t* out) {  // registers, local (spill) bytes, static smem, dynamic smem, threads, blocks/SM
  cudaFuncAttributes fa{};
  auto kernel = matmul_async<C, kVecB>;
  cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, int(C::kSmemBytes));
  cudaFuncGetAttributes(&fa, kernel);
  int per_sm = 0;
  cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, C::kThreads, C::kSmemBytes);
  out[0] = fa.numRegs, out[1] = fa.localSizeBytes, out[2] = fa.sharedSizeBytes, out[3] = C::kSmemBytes;
  out[4] = C::kThreads, out[5] = per_sm;
}

// ------------------------------------------------------------------------------ the candidates
//                BM   BN  BK  warps  stages minBlocks
using C1 = Cfg<128, 128, 8, 4, 2, 3, 2>;   // 256 threads, 8 x 8 per thread: kernel3's shape, cp.async
using C2 = Cfg<128, 128, 16, 4, 2, 3, 2>;  // same, 16-deep k steps (half the barriers)
using C3 = Cfg<128, 128, 8, 2, 2, 3, 2>;   // 128 threads, 16 x 8 per thread (cuBLAS-like 2 x 2 warps)
using C4 = Cfg<128, 128, 16, 2, 2, 3, 2>;  // same, 16-deep
using C5 = Cfg<128, 128, 8, 2, 2, 4, 2>;   // C3 with 4 stages
using C6 = Cfg<128, 256, 8, 2, 4, 3, 1>;   // 256 threads, 16 x 8 per thread, 128 x 256 block

}  // namespace sweep

constexpr int kCandidates = 7;  // 0: the solution's kernel3, 1..6: sweep::C1..C6

const char* candidate_name(int c) {
  static const char* names[kCandidates] = {
      "kernel3 (solution)",
      "C1 128x128x8  256t 8x8  3st",
      "C2 128x128x16 256t 8x8  3st",
      "C3 128x128x8  128t 16x8 3st",
      "C4 128x128x16 128t 16x8 3st",
      "C5 128x128x8  128t 16x8 4st",
      "C6 128x256x8  256t 16x8 3st",
  };
  return c >= 0 && c < kCandidates ? names[c] : "?";
}

// 0 on success, else a CUDA error code (or -1 for an unknown candidate).
int run_candidate(int c, const float* A, const float* B, float* Cm, int64_t M, int64_t N, int64_t K,
                  cudaStream_t stream) {
  using namespace sweep;
  switch (c) {
    case 0: matmul_cuda3(A, B, Cm, M, N, K, stream); return int(cudaGetLastError());
    case 1: return int(run_async<C1>(A, B, Cm, M, N, K, stream));
    case 2: return int(run_async<C2>(A, B, Cm, M, N, K, stream));
    case 3: return int(run_async<C3>(A, B, Cm, M, N, K, stream));
    case 4: return int(run_async<C4>(A, B, Cm, M, N, K, stream));
    case 5: return int(run_async<C5>(A, B, Cm, M, N, K, stream));
    case 6: return int(run_async<C6>(A, B, Cm, M, N, K, stream));
    default: return -1;
  }
}

// Attributes of the vector-path kernel of candidate c (c >= 1) into out[6].
void candidate_attributes(int c, int64_t* out) {
  using namespace sweep;
  switch (c) {
    case 1: attributes_of<C1, true>(out); break;
    case 2: attributes_of<C2, true>(out); break;
    case 3: attributes_of<C3, true>(out); break;
    case 4: attributes_of<C4, true>(out); break;
    case 5: attributes_of<C5, true>(out); break;
    case 6: attributes_of<C6, true>(out); break;
    default: {
      cudaFuncAttributes fa{};
      cudaFuncGetAttributes(&fa, matmul_kernel3<true, true>);
      int per_sm = 0;
      cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, matmul_kernel3<true, true>, kThreads3, 0);
      out[0] = fa.numRegs, out[1] = fa.localSizeBytes, out[2] = fa.sharedSizeBytes, out[3] = 0;
      out[4] = kThreads3, out[5] = per_sm;
    }
  }
}
