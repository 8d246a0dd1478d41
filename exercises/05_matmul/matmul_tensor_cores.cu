// GENERATED from solutions/05_matmul/matmul_tensor_cores.cu by `make exercises`: edit only inside the BEGIN/END SOLUTION regions.
// Exercise 05, version 5:
//   matmul_kernel5  tensor cores: warp-wide mma.sync products of 16 x 8 tiles (TF32 for float32
//                   inputs, BF16 for bfloat16 ones, float32 sums), fed by kernel 4's cp.async ring
//                   through XOR-swizzled shared tiles (sm_80+ only); tall float32 products read B^T,
//                   written rounded to TF32 by matmul_transpose_tf32 first
//   (version 5 plans as version 4: split K over kernel 5's tiles, summed by matmul_splitk_reduce, and
//   for float32 matrix-vector products version 4's kernels)
//
// This file includes no PyTorch tensor headers, so editing it recompiles in about a second.
// Tensors, the version switch and op registration live in matmul.cpp.
#include "matmul_internal.cuh"

using namespace matmul_internal;  // what the files share (matmul_internal.cuh)

namespace {

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

}  // namespace

namespace matmul_internal {

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

}  // namespace matmul_internal

namespace {

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

constexpr int64_t kSplitSteps5 = 2;  // the least k steps a split of kernel 5 runs (64 k in TF32, 128 in BF16)

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
  TORCH_CHECK(false, "launch5 (matmul_tensor_cores.cu) is not implemented yet");
  // END SOLUTION
}

}  // namespace

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
