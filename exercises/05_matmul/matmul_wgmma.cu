// GENERATED from solutions/05_matmul/matmul_wgmma.cu by `make exercises`: edit only inside the BEGIN/END SOLUTION regions.
// Exercise 05, version 6: Hopper's wgmma over TMA copies (compute capability 9.0, a "9.0a" build).
//
// This file includes no PyTorch tensor headers, so editing it recompiles in about a second.
// Tensors, the version switch and op registration live in matmul.cpp.
#include <cuda.h>  // CUtensorMap (TMA descriptors)

#include "matmul_internal.cuh"

using namespace matmul_internal;  // what the files share (matmul_internal.cuh)

namespace {

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
}  // namespace

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
  TORCH_CHECK(false, "matmul6 (matmul_wgmma.cu) is not implemented yet");
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
