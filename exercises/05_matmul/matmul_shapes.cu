// GENERATED from solutions/05_matmul/matmul_shapes.cu by `make exercises`: edit only inside the BEGIN/END SOLUTION regions.
// Exercise 05, version 4's paths for the shapes kernel 4's tiles do not fit (version 5 takes some too):
//   (version 4 also has given paths for the shapes its tiles do not fit: matmul_gemv_rows (N == 1) and
//   matmul_gemv_cols (M == 1), matrix-vector products; split-K, kernel 4 over K ranges into a workspace
//   summed by matmul_splitk_reduce, when there are too few output tiles to fill the GPU and K is large;
//   stream-K, matmul_kernel4_streamk and matmul_streamk_fixup, when the tiles fill the SMs unevenly)
//
// This file includes no PyTorch tensor headers, so editing it recompiles in about a second.
#include "matmul_internal.cuh"

using namespace matmul_internal;  // what the files share (matmul_internal.cuh)

namespace {

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

}  // namespace

namespace matmul_internal {

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

template void launch_small_tiles<32>(bool, dim3, const float*, const float*, float*, int64_t, int64_t, int64_t,
                                    int64_t, int64_t, cudaStream_t);
template void launch_small_tiles<64>(bool, dim3, const float*, const float*, float*, int64_t, int64_t, int64_t,
                                    int64_t, int64_t, cudaStream_t);
template void launch_small_tiles<128>(bool, dim3, const float*, const float*, float*, int64_t, int64_t, int64_t,
                                     int64_t, int64_t, cudaStream_t);
template void launch_splitk_reduce<float>(const float*, float*, int64_t, int64_t, int64_t, cudaStream_t);
template void launch_splitk_reduce<__nv_bfloat16>(const float*, __nv_bfloat16*, int64_t, int64_t, int64_t, cudaStream_t);

}  // namespace matmul_internal
