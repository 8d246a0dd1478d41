// Exercise 05, version 4: kernel 3's tiling fed by cp.async, and the planner of versions 4 and 5:
//   matmul_kernel4  kernel 3's tiling with 128 threads of 16 x 8 outputs, fed by cp.async copies
//                   into a 3-stage shared-memory ring (sm_80+; plain copies on older GPUs)
//   (version 4 also has given paths for the shapes its tiles do not fit: matmul_gemv_rows (N == 1) and
//   matmul_gemv_cols (M == 1), matrix-vector products; split-K, kernel 4 over K ranges into a workspace
//   summed by matmul_splitk_reduce, when there are too few output tiles to fill the GPU and K is large;
//   stream-K, matmul_kernel4_streamk and matmul_streamk_fixup, when the tiles fill the SMs unevenly)
//
// This file includes no PyTorch tensor headers, so editing it recompiles in about a second.
// Tensors, the version switch and op registration live in matmul.cpp.
#include "matmul_internal.cuh"

using namespace matmul_internal;  // what the files share (matmul_internal.cuh)

namespace {

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
  // BEGIN OPEN
  // GOAL: acc += this tile's A rows times B columns over [k0, k0 + k_len) through the 3-stage cp.async ring: the copies
  // GOAL: of later stages in flight while a stage is multiplied, one barrier per stage, zeros past M, N and the k range
  // GOAL: (Background: Kernel 4: cp.async and a multi-stage ring).
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
  // END OPEN
}

// Write a thread's 16 x 8 outputs into `out` (rows x cols, row-major) at rows m0 + arow + ..., columns
// n0 + bcol + ...: 4 groups of rows, 2 groups of 4 columns; a float4 store where kVec (cols % 4 == 0,
// out 16-byte aligned: a whole group is in or out).
template <bool kVec>
__device__ __forceinline__ void store_tile4(float* __restrict__ out, const float (&acc)[kTM4][kTN4], int64_t rows,
                                            int64_t cols, int64_t m0, int64_t n0, int arow, int bcol) {
  // BEGIN OPEN
  // GOAL: write the thread's 16 x 8 outputs into `out` where they lie inside rows x cols, 16-byte stores when kVec
  // GOAL: (Background: Kernel 4).
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
  // END OPEN
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
  // BEGIN OPEN
  // GOAL: the block's 128 x 128 tile of its batch element and split of K, into C (one split) or its own matrix of the
  // GOAL: split-K workspace (several), for every layout kTransA/kTransB names; exact at every edge, batch and split
  // GOAL: (Background: Kernel 4, Shape classes (version 4), Batches).
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
  // END OPEN
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
  // BEGIN OPEN
  // GOAL: stream-K: the GPU's `workers` blocks share the K steps of all tiles evenly; a worker that owns a whole tile
  // GOAL: writes C, one that shares it writes its part into the workspace for matmul_streamk_fixup; every output
  // GOAL: summed in a fixed order (the same bits every run) (Background: Shape classes (version 4)).
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
  // END OPEN
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
  // BEGIN OPEN
  // GOAL: C's outputs of the shared tiles = the sum of the workers' parts in worker order (deterministic), as the
  // GOAL: comment above lays out the grid; 16-byte accesses where aligned (Background: Shape classes (version 4)).
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
  // END OPEN
}

// Stream-K's workers: as many of its blocks as the GPU holds at once (the workspace is sized by it too).
int64_t streamk_workers() { return course::wave_blocks(matmul_kernel4_streamk<true>, kThreads4); }

}  // namespace

namespace matmul_internal {

// ---------------------------------------------------------------------------------- the planner
// How versions 4 and 5 run a product (Path, Plan: matmul_internal.cuh): plan4 below is the rule.
constexpr int64_t kSplitMinK4 = 64;  // the least k a split of kernel 4 runs down (8 of its 8-deep steps)
constexpr int64_t kGemvRowsMinK = 1024;  // the least k per split of a row (8 float4 steps of a warp)
constexpr int64_t kGemvColsMinK = 32;    // the least k per split of a column (4 rows per warp)
// M == 1 in 16-column blocks where 128-column ones are fewer than the SMs (and would split K), the
// 16-column ones are not, and B is at most 2^22 floats: there the fixed costs (a second launch, to sum
// the splits) are much of the time (H100: 768 x 3072, 9.4 MB, 0.77x -> 1.00x of cuBLAS), and on large
// matrices rows read 64 bytes at a time are slower than 512 (16384 x 16384: 1.00x -> 0.85x)
constexpr int64_t kGemvColsNarrowMost = int64_t(1) << 22;
constexpr int64_t kMaxSplits = 4096;     // so that a launch still holds 15 batch elements in gridDim.z
constexpr int64_t kFillMinK = 256;  // the least k per split of splits made only to fill waves (split_tiles, split_tail)

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
  // BEGIN OPEN
  // GOAL: the plan for `tiles` tiles: how many splits of K (each a multiple of `align`, at least `min_k`) fill the GPU
  // GOAL: without a second, mostly idle wave or a workspace larger than the rule in plan4's comment (Background: Shape classes).
  // STUB: TORCH_CHECK(false, "split_tiles is not implemented yet");
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
  // END OPEN
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
  // BEGIN OPEN
  // GOAL: the plan that runs the whole waves of tiles as they are and splits K only for the tail rows, as the comment
  // GOAL: above explains; none when the tail would not gain (Background: Shape classes (version 4)).
  // STUB: TORCH_CHECK(false, "split_tail is not implemented yet");
  const int64_t cols = course::ceil_div<int64_t>(N, bn), rows = course::ceil_div<int64_t>(M, bm);
  const int64_t head = rows * cols / slots * slots / cols;  // whole rows of tiles within the whole waves
  const int64_t tail = (rows - head) * cols;
  const int64_t want = tail > 0 ? std::min(slots / tail, K / kFillMinK) : 1;
  if (head == 0 || want < 2) return {path, 1, K};
  Plan plan = split_k(path, K, want, want, align);
  if (plan.splits > 1) plan.head_rows = head * bm;
  return plan;
  // END OPEN
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
  // BEGIN OPEN
  // GOAL: version 4's plan for batch x M x N x K: the path (tiles, small tiles, stream-K, split-K, matrix-vector) and
  // GOAL: its splits, by the rules the comment above measures (Background: Shape classes (version 4)).
  // STUB: TORCH_CHECK(false, "plan4 is not implemented yet");
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
  // END OPEN
}

// The split-K workspace of a plan: [batch, splits, rows, N] floats for the rows that split (the tail's
// rows where the plan has a head, else all M).
int64_t workspace_floats(const Plan& plan, int64_t batch, int64_t M, int64_t N) {
  if (plan.path == Path::kStreamK) return 2 * streamk_workers() * kBM4 * kBN4;  // two tile parts a worker
  return plan.splits > 1 ? batch * plan.splits * (M - plan.head_rows) * N : 0;
}

}  // namespace matmul_internal

namespace {

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
    // GOAL: run the matmul_kernel4 that vec_b allows on `stream`; report a failed launch.
    // TODO: launch matmul_kernel4<vec_b> (two instantiations: pick with if/else) on `stream` with
    // TODO: kThreads4 threads per block and `grid`, on this launch's a, b and o, with M, N, K and the
    // TODO: plan's k_split and splits; check the launch.
    // STUB: TORCH_CHECK(false, "launch4 (matmul_pipeline.cu) is not implemented yet");
    if (vec_b) {
      matmul_kernel4<true><<<grid, kThreads4, 0, stream>>>(a, b, o, M, N, K, plan.k_split, plan.splits);
    } else {
      matmul_kernel4<false><<<grid, kThreads4, 0, stream>>>(a, b, o, M, N, K, plan.k_split, plan.splits);
    }
    C10_CUDA_KERNEL_LAUNCH_CHECK();
    // END SOLUTION
  }
}

}  // namespace

void matmul_cuda4(const float* A, const float* B, float* C, int64_t batch, int64_t M, int64_t N, int64_t K,
                  float* workspace, cudaStream_t stream, bool trans_a, bool trans_b) {
  // BEGIN OPEN
  // GOAL: version 4 on `stream`: plan4's path for this shape and layout (trans_a, trans_b) with its splits, the
  // GOAL: workspace's reduction or fix-up after, every batch size (gridDim.z's limit); report a failed launch (Interface).
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
  // END OPEN
}
