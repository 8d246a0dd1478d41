from tests.known_wrong import LAZY, PROFILED, Variant, after_lib, memo_by_pointer, takes_over

EX = "05_matmul"
K2_LOAD_A = "As[ty][tx] = (row < M && k0 + tx < K) ? A[row * K + k0 + tx] : 0.0f;"
K2_LOAD_B = "Bs[ty][tx] = (k0 + ty < K && col < N) ? B[(k0 + ty) * N + col] : 0.0f;"
K2_BARRIER = "    __syncthreads();\n#pragma unroll\n    for (int k = 0; k < kTile2; ++k)"
K1_DOT = "acc = fmaf(A[row * K + k], B[k * N + col], acc);"
K3_FMA = "for (int j = 0; j < kTN; ++j) acc[i][j] = fmaf(a[i], b[j], acc[i][j]);"
K4_READ_WRAP = "read = read + 1 == kStages4 ? 0 : read + 1;"
# kernel 5's groups (not run below compute capability 8.0, where a variant keeps or loses nothing there)
TC_GROUPS = {"tensor_cores_tf32", "tensor_cores_bf16"}
# kernel 6's (run only on a compute capability 9.0 GPU from a "9.0a" build)
WGMMA_GROUPS = {"wgmma_tf32", "wgmma_bf16"}

VARIANTS = [
    Variant(EX, "empty_kernel3", "the fast kernel never accumulates",
            {"matmul_basic.cu": [(K3_FMA, "for (int j = 0; j < kTN; ++j) {}")]},
            loses={"register_blocked"}, reason="relative error"),
    Variant(EX, "ring_index_unwrapped", "kernel 4 wraps its read stage one early (0, 1, 0, 1, ...), so from the "
            "third k step on it computes on tiles that are not this step's",
            {"matmul_pipeline.cu": [(K4_READ_WRAP, "read = read + 1 == kStages4 - 1 ? 0 : read + 1;")]},
            loses={"async_pipeline", "performance"}, reason="relative error"),
    Variant(EX, "tile_edges_unguarded", "kernel 2 loads its tiles without the k bounds: past K it multiplies "
            "the next row of A by rows beyond the end of B",
            {"matmul_basic.cu": [(K2_LOAD_A, "As[ty][tx] = row < M ? A[row * K + k0 + tx] : 0.0f;"),
                           (K2_LOAD_B, "Bs[ty][tx] = col < N ? B[(k0 + ty) * N + col] : 0.0f;")]},
            loses={"shared_tiles"}, reason="relative error"),
    Variant(EX, "missing_syncthreads", "kernel 2 reads the tiles without waiting for the whole block to write them",
            {"matmul_basic.cu": [(K2_BARRIER, K2_BARRIER.replace("    __syncthreads();\n", "", 1))]},
            loses={"shared_tiles"}, reason="relative error"),
    Variant(EX, "row_col_swapped", "kernel 1 reads B as if it were column-major (B[col][k])",
            {"matmul_basic.cu": [(K1_DOT, "acc = fmaf(A[row * K + k], B[col * K + k], acc);")]},
            loses={"naive"}, reason="relative error"),
    Variant(EX, "pytorch_fallback", "the Python wrapper calls torch.matmul",
            {"matmul.py": [("return lib.ops.matmul(A, B, int(version))", "return torch.matmul(A, B)")]},
            # torch.matmul also accepts CPU tensors and ignores `version`, which the exercise must refuse
            loses={"naive", "shared_tiles", "register_blocked", "async_pipeline", "performance", "input_checks"} | TC_GROUPS
            | WGMMA_GROUPS,
            reason="other than this exercise's own"),
    Variant(EX, "inner_sizes_unchecked", "A's columns are not compared with B's rows",
            {"matmul.cpp": [("TORCH_CHECK(A.size(-1) == B.size(-2), ", "TORCH_CHECK(true || A.size(-1) == B.size(-2), ")]},
            loses={"input_checks"}, reason="inner sizes differ"),
    Variant(EX, "grid_rows_unchecked", "version 1 launches without check_grid_rows: an M of 524281 rows needs "
            "65536 row blocks, one more than gridDim.y holds, and the launch fails without naming A",
            {"matmul_basic.cu": [('  check_grid_rows(M, kBlock1Y, "version 1");\n', "")]},
            loses={"input_checks"}, reason="M = 524281"),
]

CALL = "    return lib.ops.matmul(A, B, int(version))\n"
# the benchmark's size, larger than any checked one (the grid check's 524281 rows have one column)
LARGE = "A.shape[0] >= 4096 and A.shape[1] >= 4096"
K4_TILE = "  const int64_t m0 = int64_t(blockIdx.y) * kBM4, n0 = int64_t(blockIdx.x) * kBN4;\n"
K4_BATCH = ("  A += batch * M * K;  // this batch element's A and B (M K and K N floats in either layout); the loader\n"
            "  B += batch * K * N;  // starts them at k0\n")
K4_LOADER = "      : a(A, kTransA ? M : K, M, m0, k0, k_len), b(B, kTransB ? K : N, N, n0, k0, k_len) {}"

# The trust rework's classes (issue: grader trust), each written against the grader before it.
VARIANTS += [
    Variant(EX, "cublas_when_large", "calls torch.mm (cuBLAS) when A is 4096 x 4096 or larger: the benchmark's size, "
            "larger than any checked one",
            {"matmul.py": [takes_over(CALL, LARGE, "torch.mm(A, B)")]},
            loses={"async_pipeline", "performance"}, reason="other than this exercise's own",
            extra={"timed": True, "kind": "tells timed from checked", "old": "full marks"}),
    Variant(EX, "memo_by_pointer", "for A of 4096 x 4096 or more, keeps each result by its inputs' addresses and returns "
            "a copy of it when called on the same tensors again",
            {"matmul.py": memo_by_pointer(CALL, LARGE, "(A.data_ptr(), B.data_ptr(), tuple(A.shape), tuple(B.shape))",
                                          "lib.ops.matmul(A, B, int(version))")},
            loses={"async_pipeline", "performance"}, reason="timed",
            extra={"timed": True, "kind": "tells timed from checked", "old": "full marks"}),
    Variant(EX, "skips_a_middle_block_row", "kernel 4 leaves one row of output tiles in the middle unwritten when "
            "M and N are 4096 or more, as in the timed product (the timed output was checked in its first and last "
            "256 rows)",
            {"matmul_pipeline.cu": [(K4_TILE, K4_TILE +
                            "  if (M >= 4096 && N >= 4096 && blockIdx.y == gridDim.y / 2) return;\n")]},
            loses={"async_pipeline", "performance"}, reason="timed",
            extra={"timed": True, "kind": "timed work unverified", "old": "full marks"}),
    Variant(EX, "computes_when_read", "for A of 4096 x 4096 or more, returns a Tensor subclass that runs the product only "
            "when something reads it (after the timing)",
            {"matmul.py": [after_lib(LAZY), takes_over(CALL, LARGE, "_lazy((A.shape[0], B.shape[1]), A, "
                                                                "lambda: lib.ops.matmul(A, B, int(version)))")]},
            # its subclass keeps each call's output alive (the memory-per-call check, before the timing,
            # meets it first: H200, 2026-12-02), else the timed outputs' type check
            loses={"async_pipeline", "performance"}, reason=("keeps memory with every call", "plain torch.Tensor"),
            extra={"timed": True, "kind": "timed work unverified", "old": "full marks"}),
]

VERSIONS = {"naive", "shared_tiles", "register_blocked", "async_pipeline"} | TC_GROUPS | WGMMA_GROUPS
ALL = VERSIONS | {"input_checks", "registration", "performance"}
# the launcher's copies (not a matrix-vector view; a transposed view on version 4's tiles is read in place)
COPIES = ("    a = trans_a ? A : A.contiguous();  // a transposed view's data pointer is its storage's start\n"
          "    b = trans_b ? B : B.contiguous();\n")
INCLUDE = "#include <ATen/ops/empty.h>\n"
TF32 = "__uint_as_float(__float_as_uint({}) & 0xffffe000u)"  # rounded toward zero to TF32's 10-bit mantissa

# The trust rework's classes, continued (unit 2: coverage, integrity, own kernel).
VARIANTS += [
    Variant(EX, "copies_by_a_s_layout_alone", "decides whether to copy both matrices from A's layout alone: a "
            "strided B beside a contiguous A reaches the kernels as if it were row-major",
            {"matmul.cpp": [(COPIES, "    const bool row_major = A.is_contiguous();\n"
                                     "    a = trans_a || row_major ? A : A.contiguous();\n"
                                     "    b = trans_b || row_major ? B : B.contiguous();\n")]},
            # the spec's own views make A non-contiguous (A.t(), or both strided): only the generated
            # property strides one argument at a time
            loses=VERSIONS | {"performance"}, keeps={"input_checks"}, reason="relative error",
            extra={"kind": "coverage", "old": "full marks"}),
    # A hole in the grader at 0e7850d, closed since: the B views the checks pass all have a column stride
    # other than 1 (b[:100, 1::2], the properties' every-other-element views); none is some columns of a
    # wider matrix (unit column stride, longer rows). A has one (a[::2, :100]), B does not
    Variant(EX, "trusts_b_s_unit_column_stride", "copies B only when its columns are not adjacent (B.stride(1) != 1): "
            "some columns of a wider matrix (W[:, :n]) are read as if B's rows were packed",
            {"matmul.cpp": [(COPIES, "    a = trans_a ? A : A.contiguous();\n"
                                     "    b = trans_b || B.stride(1) == 1 ? B : B.contiguous();\n")]},
            loses=VERSIONS | {"performance"}, keeps={"input_checks"},
            extra={"kind": "coverage", "old": "full marks"}),
    Variant(EX, "cublas_for_small_products_in_version_3", "version 3 calls at::mm (cuBLAS) for products of fewer than "
            "2^16 multiply-adds (where launching the fast kernel \"is not worth it\")",
            {"matmul.cpp": [(INCLUDE, INCLUDE + "#include <ATen/ops/mm.h>\n"),
                            ("    case 3: matmul_cuda3(pa, pb, pc, M, N, K, stream); break;",
                             "    case 3:\n      if (M * N * K < (int64_t(1) << 16)) return at::mm(a, b);\n"
                             "      matmul_cuda3(pa, pb, pc, M, N, K, stream);\n      break;")]},
            # forward's own-kernel check profiles 300 x 200 x 260; the generated property the audit call's 5 x 8 x 12
            loses={"register_blocked"}, reason="other than this exercise's own",
            extra={"kind": "own kernel", "old": "full marks"}),
    Variant(EX, "loosens_the_spec_tolerance", "rebinds the spec module's REL_TOL to 1e-2 (a float, no function "
            "replaced) and rounds kernel 3's operands to TF32 (about 5e-4 relative error)",
            {"matmul.py": [after_lib("\nimport sys as _sys\n\n_sys.modules['grader.specs.ex05_matmul'].REL_TOL = 1e-2\n")],
             "matmul_basic.cu": [(K3_FMA, "for (int j = 0; j < kTN; ++j) acc[i][j] = fmaf(" + TF32.format("a[i]") + ", "
                                    + TF32.format("b[j]") + ", acc[i][j]);")]},
            # before the rework the judge's float32 audit call of version 3 saw the rounding
            loses=ALL, status="tampered", reason="REL_TOL", extra={"kind": "integrity", "old": "loses register_blocked"}),
    # A hole in the grader at 0e7850d, closed since: the checks are Check objects held by pytest's items, not by a grader module, so
    # no snapshot covers them: a new `run` on an instance is not seen. The judge re-checks contiguous
    # audit calls and timed outputs only, so the fault below keeps every point. On a CPU machine the
    # module finds all eight such checks (four spec checks, four properties) and `python -m grader`
    # reports nothing.
    Variant(EX, "disables_the_noncontiguous_checks", "finds the checks through the garbage collector and gives "
            "every one named non-contiguous a `run` that does nothing; the C++ never copies B (a strided B is read "
            "as if it were row-major)",
            {"matmul.py": [after_lib("\nimport gc as _gc\n\n"
                                     "for _o in _gc.get_objects():\n"
                                     "    if type(_o).__name__ == 'Check' and 'non-contiguous' in str(getattr(_o, 'name', '')):\n"
                                     "        _o.run = lambda ctx: None\n")],
             "matmul.cpp": [(COPIES, "    a = trans_a ? A : A.contiguous();\n    b = B;\n")]},
            # now the judge repeats its calls with every argument non-contiguous, outside the process
            loses=VERSIONS | {"performance"}, keeps={"input_checks"},
            extra={"kind": "integrity", "old": "full marks"}),
]

# Kernel 5, tensor cores (issue 21). On a GPU below compute capability 8.0 the tensor-core groups are
# not run (no points either way), so these variants are meant for an sm_80+ GPU.
K5_C_ROW = "        const int64_t row = row0 + 16 * i + 8 * h + g;\n"
K5_TF32 = "using course::to_tf32;  // rounded to TF32 (course/cuda.cuh)\n"
K5_STEPS = "  const int64_t steps = course::ceil_div<int64_t>(k_len, Tile5<T>::kBK);\n"
VARIANTS += [
    Variant(EX, "c_fragment_rows_swapped", "kernel 5 stores the C fragment's c0, c1 at row g + 8 and c2, c3 at row g "
            "(the PTX ISA has them the other way round)",
            {"matmul_tensor_cores.cu": [(K5_C_ROW, K5_C_ROW.replace("8 * h + g", "8 * (1 - h) + g"))]},
            loses=TC_GROUPS, reason="outside"),
    Variant(EX, "fp16_instead_of_tf32", "kernels 5 and 6 round their float32 operands to float16 instead of TF32 (the "
            "same 10-bit mantissa, but 5 exponent bits: 1e5 overflows, 1e-6 is subnormal)",
            {"matmul_internal.cuh": [("#include <cuda_bf16.h>\n", "#include <cuda_bf16.h>\n#include <cuda_fp16.h>\n"),
                           (K5_TF32, "__device__ __forceinline__ uint32_t to_tf32(float x) {\n"
                                     "  return __float_as_uint(__half2float(__float2half_rn(x)));\n}\n")]},
            # the ordinary-range checks pass (fp16 and TF32 round alike there): only the range checks catch it
            # (to_tf32 is the one rounding helper: kernel 6's A fragments and B^T take it too)
            loses={"tensor_cores_tf32", "wgmma_tf32"}, reason="values near"),
    Variant(EX, "operands_truncated", "to_tf32 returns the float32 words unrounded: the tensor cores truncate them "
            "to TF32 (kernel 5's and kernel 6's operands; what skipping the rounding saves: about a tenth of the time)",
            {"matmul_internal.cuh": [(K5_TF32, "__device__ __forceinline__ uint32_t to_tf32(float x) { return __float_as_uint(x); }\n")]},
            # both operands truncated fail ordinary random checks too (twice rounding's spread); one alone
            # only the positive operands (kernel6_a_truncated below)
            loses={"tensor_cores_tf32", "wgmma_tf32"}, reason="outside TF32's error bound"),
    Variant(EX, "k_tail_dropped", "kernel 5 skips the last k step when there are several (a K that is not a multiple "
            "of the stage's k loses its tail, one that is loses a whole tile)",
            {"matmul_tensor_cores.cu": [(K5_STEPS, K5_STEPS.replace("const int64_t steps", "const int64_t all_steps") +
                            "  const int64_t steps = all_steps > 1 ? all_steps - 1 : all_steps;\n")]},
            loses=TC_GROUPS, reason="outside"),
    # Only slower: without the swizzle ldmatrix's rows share shared-memory slots (8-way conflicts for A,
    # 8-way for BF16 B, 4-way for TF32 B), the results are unchanged. The timed version is kernel 4, so the
    # grader cannot see it: it must keep every point (the resource report does not count bank conflicts)
    Variant(EX, "no_swizzle", "kernel 5 without its XOR swizzles: right results, bank conflicts",
            {"matmul_tensor_cores.cu": [("    return c ^ (r & 7);", "    return c + 0 * r;"),
                           ("    return c ^ ((r >> 1) & 3);", "    return c + 0 * r;"),
                           ("    return c ^ ((k & 3) << 1);", "    return c + 0 * k;"),
                           ("    return c ^ (k & 7);", "    return c + 0 * k;")]},
            loses=set()),
]

# Kernel 5 on tall float32 products (2048 rows or more) reads B^T, written rounded by
# matmul_transpose_tf32 (which kernel 6 shares): its fragments, its row stride and its rounding.
K5_BT_FRAGMENT = "      const int r = wcol + 8 * j + 8 * (q / 2) + r8, c = 2 * ks + q % 2;\n"
K5_BT_PASS = "      b_pass = kBRowStep * ldbt;\n"
BT_ROUND = "tile[i][threadIdx.x] = k < K && n < N ? to_tf32(B[k * ldb + n]) : 0u;"
VARIANTS += [
    Variant(EX, "kernel5_bt_matrices_swapped", "kernel 5's ldmatrix over B^T takes A's matrix order (rows 8 apart "
            "first, then the next chunk): b[j][1] holds the next tile's columns, b[j + 1][0] the next k half",
            {"matmul_tensor_cores.cu": [(K5_BT_FRAGMENT, K5_BT_FRAGMENT.replace("8 * (q / 2)", "8 * (q % 2)").replace("q % 2;", "q / 2;"))]},
            loses={"tensor_cores_tf32"}, reason="outside"),
    Variant(EX, "kernel5_bt_stride_unpadded", "kernel 5 steps between B^T's rows by K instead of the padded row "
            "length: right where K is a multiple of 4, wrong rows elsewhere",
            {"matmul_tensor_cores.cu": [(K5_BT_PASS, K5_BT_PASS.replace("* ldbt", "* K"))]},
            loses={"tensor_cores_tf32"}, reason="outside"),
    # truncated B alone passes on random signs; the positive operands' tall product (kernel 5) and short
    # one (kernel 6) catch it
    Variant(EX, "bt_unrounded", "matmul_transpose_tf32 writes B^T unrounded: the tensor cores truncate B's words "
            "(kernel 5's tall products and kernel 6)",
            {"matmul_tensor_cores.cu": [(BT_ROUND, BT_ROUND.replace("to_tf32(B[k * ldb + n])", "__float_as_uint(B[k * ldb + n])"))]},
            loses={"tensor_cores_tf32", "wgmma_tf32"}, reason="operands in [0.5, 1.5)"),
]

# Version 4's other shapes (issue 20): the matrix-vector kernels, split K and batches. Given code, so
# these stand for mistakes in the course's own fast paths that the grader must still catch.
REDUCE_END = "  const int64_t first = slice * per, last = first + per < splits ? first + per : splits;\n"
VARIANTS += [
    Variant(EX, "split_k_drops_last_split", "the split-K reduction sums splits 0 .. splits - 2: the last K range "
            "(of a split tile product or of a split matrix-vector product) is left out",
            {"matmul_shapes.cu": [(REDUCE_END, REDUCE_END.replace(": splits;", ": splits - 1;"))]},
            # version 5 sums its splits with the same reduction
            loses={"async_pipeline", "performance"} | TC_GROUPS, reason="relative error"),
    Variant(EX, "split_k_first_split_twice", "the split-K reduction starts each slice's sum from split 0's partial "
            "product and then adds the slice's splits: split 0 counts more than once",
            {"matmul_shapes.cu": [("      float sum[kVec] = {}, part[kVec] = {};\n",
                            "      float sum[kVec] = {}, part[kVec] = {};\n      load_vec<kVec>(sum, p);\n")]},
            loses={"async_pipeline", "performance"} | TC_GROUPS, reason="relative error"),
    Variant(EX, "gemv_tail_ignored", "the N == 1 kernel's float4 path skips what follows its last whole 128-float "
            "step of a row (a K range that is not a multiple of 128 loses its tail)",
            {"matmul_shapes.cu": [("    k = full;\n", "    k = k1;\n")]},
            # version 5's float32 matrix-vector products take the same kernel (1 x 1 x 300)
            loses={"async_pipeline", "performance", "tensor_cores_tf32"}, reason="relative error"),
    Variant(EX, "gemv_cols_warp_dropped", "the M == 1 kernel adds its warps' sums from warp 2 on: the k that warp 1 "
            "took (every eighth, from k0 + 1) are left out",
            {"matmul_shapes.cu": [("    for (int w = 1; w < kGemvColsWarps; ++w) total += sums[w][threadIdx.x];\n",
                            "    for (int w = 2; w < kGemvColsWarps; ++w) total += sums[w][threadIdx.x];\n")]},
            # version 5's float32 matrix-vector products take the same kernel (1 x 777 x 5003)
            loses={"async_pipeline", "performance", "tensor_cores_tf32"}, reason="relative error"),
    Variant(EX, "gemv_cols_narrow_rows_not_added", "the M == 1 kernel's 16-column blocks skip the shuffles that add "
            "a warp's 8 rows: each warp keeps only its first row group's sums",
            {"matmul_shapes.cu": [("  for (int offset = kRowLanes; offset < 32; offset *= 2) {",
                            "  for (int offset = 32; offset < 32; offset *= 2) {")]},
            # version 5's float32 matrix-vector products take the same kernel (1 x 2203 x 999)
            loses={"async_pipeline", "performance", "tensor_cores_tf32"}, reason="relative error"),
    Variant(EX, "batch_stride_ignored", "kernel 4 offsets only C by the batch element: every element of a batch "
            "multiplies batch element 0's A and B",
            {"matmul_pipeline.cu": [(K4_BATCH, "")]},
            loses={"async_pipeline", "performance"}, reason="relative error"),
    # (a wrong row stride instead reads past B's end where N > K: a fault, which costs the group it happens in)
    Variant(EX, "transposed_b_splits_start_at_k0", "kernel 4's loader starts a transposed B "
            "at k = 0 in every split of K: each split's A columns meet B's first rows",
            {"matmul_pipeline.cu": [(K4_LOADER, K4_LOADER.replace("b(B, kTransB ? K : N, N, n0, k0, k_len)",
                                                         "b(B, kTransB ? K : N, N, n0, kTransB ? 0 : k0, k_len)"))]},
            loses={"async_pipeline", "performance"}, reason="relative error"),
    Variant(EX, "streamk_fixup_drops_the_last_worker", "stream-K's fix-up sums a shared tile's parts from its "
            "first worker up to, but not including, its last: each shared tile loses its last k steps",
            {"matmul_pipeline.cu": [("  for (int64_t w = w0; w <= w1; ++w) {\n    const int part = ",
                            "  for (int64_t w = w0; w < w1; ++w) {\n    const int part = ")]},
            loses={"async_pipeline", "performance"}, reason="relative error"),
    Variant(EX, "streamk_second_part_overwrites_the_first", "stream-K's workers store every tile part in slot 0 "
            "of their workspace: a worker that ends one tile and starts the next loses the first part",
            {"matmul_pipeline.cu": [("store_tile4<true>(workspace + (2 * worker + part) * kBM4 * kBN4,",
                            "store_tile4<true>(workspace + (2 * worker + 0 * part) * kBM4 * kBN4,")]},
            loses={"async_pipeline", "performance"}, reason="relative error"),
    Variant(EX, "transposed_views_copied", "version 4 copies a transposed A before its tiles, as versions 1 "
            "to 3 do: right results, a whole extra pass over the matrix",
            {"matmul.cpp": [("    trans_a = tiles4 && transposed_view(A);\n", "    trans_a = false;\n")]},
            loses={"async_pipeline", "performance"}, reason="read in place"),
    Variant(EX, "transposed_b_copied_beside_row_major_a", "version 4 reads a transposed B in place only beside a "
            "transposed A and copies it beside a row-major one (nn.Linear's x @ W.t()): right results, a pass over W",
            {"matmul.cpp": [("    trans_b = tiles4 && transposed_view(B);\n",
                             "    trans_b = trans_a && transposed_view(B);\n")]},
            loses={"async_pipeline", "performance"}, reason="read in place"),
    Variant(EX, "small_tiles_k_tail_dropped", "the small tiles run k_len / 16 steps, not ceil(k_len / 16): a K "
            "range that is not a multiple of 16 loses its last partial step",
            {"matmul_shapes.cu": [("  const int64_t steps = course::ceil_div<int64_t>(k_len, kSmallBK);\n",
                            "  const int64_t steps = k_len / kSmallBK;\n")]},
            loses={"async_pipeline", "performance"}, reason="relative error"),
    Variant(EX, "batch_stride_ignored_in_kernel5", "kernel 5 offsets only C by the batch element: every element of "
            "a batch multiplies batch element 0's A and B",
            {"matmul_tensor_cores.cu": [("  A += batch * M * K;\n  B += kBt ? batch * N * ldbt : batch * K * N;\n", "")]},
            loses=TC_GROUPS, reason="outside"),
    Variant(EX, "kernel5_splits_start_at_k0", "kernel 5's splits all read k from 0: each of a split product's K "
            "ranges sums the first range's k's (a product kernel 5 does not split is right)",
            {"matmul_tensor_cores.cu": [("  Loader5<T, kVecA, kVecB, kBt> loader(A, B, M, N, K, ldbt, k0, k_len, m0, n0);",
                            "  Loader5<T, kVecA, kVecB, kBt> loader(A, B, M, N, K, ldbt, 0, k_len, m0, n0);")]},
            loses=TC_GROUPS, reason="outside"),
    Variant(EX, "kernel5_split_written_to_c", "kernel 5 writes every split's partial product to C (in C's type) "
            "instead of the workspace: C holds one K range's sum, the reduction sums uninitialised memory",
            {"matmul_tensor_cores.cu": [("  if (splits > 1) {\n    store_c5<float>(", "  if (false) {\n    store_c5<float>(")]},
            loses=TC_GROUPS, reason="outside"),
    Variant(EX, "tail_reduced_into_the_head", "version 4's head-and-tail launch sums the tail's splits into C's "
            "first rows (the head's) instead of the rows after the head: the head is overwritten, the tail never "
            "written",
            {"matmul_pipeline.cu": [("    launch_splitk_reduce(workspace, C + head * N, 1, tail * N, plan.splits, stream);\n",
                            "    launch_splitk_reduce(workspace, C, 1, tail * N, plan.splits, stream);\n")]},
            loses={"async_pipeline", "performance"}, reason="relative error"),
    Variant(EX, "reduction_float4_drops_a_lane", "the split-K reduction's 4-outputs-a-thread path leaves the fourth "
            "output of each float4 at zero (products with many outputs and split K: 1031 x 1000 x 4099, a tail)",
            {"matmul_shapes.cu": [("          for (int c = 0; c < kVec; ++c) part[c] += v[j][c];\n",
                            "          for (int c = 0; c < kVec; ++c) part[c] += c == 3 ? 0.0f : v[j][c];\n")]},
            loses={"async_pipeline", "performance"} | TC_GROUPS, reason="relative error"),
]

# Kernel 6, Hopper's wgmma (issue 21's optional kernel). Its groups run only on a compute capability 9.0
# GPU from a "9.0a" build, so these variants are meant for an H100 or H200.
K6_ROUND = "      for (int w = 0; w < 4; ++w) a[ks][w] = to_tf32(__uint_as_float(a[ks][w]));\n"
K6_B_STEP = "smem_descriptor(stage_b + 32 * ks) : smem_descriptor(stage_b + 2048 * ks, 8192)"
K6_ROW = "  const int r = wrow + lane % 8 + 8 * ((lane / 8) % 2);\n"
K6_CHUNK = "    const int c = 2 * ks + lane / 16;\n"
VARIANTS += [
    # random signs hide it (the bias cancels): the group's positive operands catch it
    Variant(EX, "kernel6_a_truncated", "kernel 6 leaves A's fragments unrounded: the tensor cores drop their low 13 "
            "bits (truncation, twice rounding's error and biased toward zero), B^T still rounded",
            {"matmul_wgmma.cu": [(K6_ROUND, "")]},
            loses={"wgmma_tf32"}, reason="operands in [0.5, 1.5)"),
    Variant(EX, "kernel6_k_steps_overlap", "kernel 6 advances B's descriptor by half a wgmma k step (16 bytes of "
            "B^T's rows, 8 of bfloat16 B's): its k steps read half of the previous step's k again",
            {"matmul_wgmma.cu": [(K6_B_STEP, K6_B_STEP.replace("32 * ks", "16 * ks").replace("2048 * ks", "1024 * ks"))]},
            loses=WGMMA_GROUPS, reason="outside"),
    Variant(EX, "kernel6_fragment_halves_swapped", "kernel 6's ldmatrix gives matrices 1 and 2 each other's rows and "
            "chunks: a1 holds A(g, t + 4) and a2 A(g + 8, t), not the PTX ISA's fragment layout",
            {"matmul_wgmma.cu": [(K6_ROW, K6_ROW.replace("8 * ((lane / 8) % 2)", "8 * (lane / 16)")),
                           (K6_CHUNK, K6_CHUNK.replace("lane / 16", "(lane / 8) % 2"))]},
            loses=WGMMA_GROUPS, reason="outside"),
]

# One watch (grader.verify.observe.WATCH): an op cannot tell a value check from a kernel check.
VARIANTS += [
    Variant(EX, "cublas_for_version_3_when_not_profiled", "version 3 calls torch.mm (cuBLAS) whenever no profiling "
            "query (the autograd profiler's flags, its type, stream capture) says a profiler is on",
            {"matmul.py": [takes_over(CALL, f"int(version) == 3 and not {PROFILED}", "torch.mm(A, B)")]},
            # the value checks' hidden windows see cuBLAS's kernels; torch.mm takes a batch the input checks
            # want refused naming A (it says "self must be a matrix")
            loses={"register_blocked", "input_checks"}, reason="other than this exercise's own",
            extra={"kind": "one watch", "old": "full marks"}),
    Variant(EX, "version_3_wrong_while_profiled", "version 3 returns its product times 1.01 whenever a profiling "
            "query says a profiler is on",
            {"matmul.py": [takes_over(CALL, f"int(version) == 3 and {PROFILED}", "lib.ops.matmul(A, B, 3) * 1.01")]},
            # the visible own-kernel checks compare values (the multiply also runs a kernel of PyTorch's there)
            loses={"register_blocked"}, extra={"kind": "one watch", "old": "full marks"}),
]

# Issue 47: every precision probe on every path, and the tensor-core instruction in the machine code.
K5_MMA = """  if constexpr (sizeof(T) == 4) {
    asm volatile("mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                 "{%8, %9}, {%0, %1, %2, %3};\\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  } else {
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, "
                 "{%8, %9}, {%0, %1, %2, %3};\\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
"""
# mma16x8 by FMAs: each lane gathers its rows' A and its columns' B over the tile's k from the lanes that
# hold them in the fragment layouts (TF32 m16n8k8: a0 (g, t), a1 (g + 8, t), a2, a3 at k t + 4; b0 (k t,
# n g), b1 (k t + 4); BF16 m16n8k16: registers of two, k 2t and 2t + 1, and + 8), and multiplies in float32:
# the TF32 words are exact in float32 (11-bit products fit 24 bits), so the values are the tensor cores'
K5_FMA = """  const int lane = threadIdx.x % 32, g = lane / 4, t = lane % 4;
  constexpr int kK = sizeof(T) == 4 ? 8 : 16;
#pragma unroll
  for (int k = 0; k < kK; ++k) {
    const int hi = sizeof(T) == 4 ? k / 4 : k / 8, src = sizeof(T) == 4 ? k % 4 : (k % 8) / 2;
    const int half = sizeof(T) == 4 ? 0 : k % 2;
    auto value = [&](uint32_t w) {
      return sizeof(T) == 4 ? __uint_as_float(w) : __uint_as_float(half ? (w & 0xffff0000u) : (w << 16));
    };
    const float a0 = value(__shfl_sync(~0u, hi ? a[2] : a[0], 4 * g + src));
    const float a1 = value(__shfl_sync(~0u, hi ? a[3] : a[1], 4 * g + src));
    const float b0 = value(__shfl_sync(~0u, b[hi], 4 * (2 * t) + src));
    const float b1 = value(__shfl_sync(~0u, b[hi], 4 * (2 * t + 1) + src));
    d[0] = fmaf(a0, b0, d[0]), d[1] = fmaf(a0, b1, d[1]), d[2] = fmaf(a1, b0, d[2]), d[3] = fmaf(a1, b1, d[3]);
  }
"""
# BF16 through an FP16 mma: each register's two bfloat16s rounded to half (m16n8k16 .f16 has .bf16's
# fragment layouts), so the values near 1 are right and 1e5 overflows, 1e-6 is subnormal
K5_BF16_FP16 = K5_MMA.replace("""    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32""", """    auto h2 = [](uint32_t w) {
      const __half2 v = __floats2half2_rn(__uint_as_float(w << 16), __uint_as_float(w & 0xffff0000u));
      return *reinterpret_cast<const uint32_t*>(&v);
    };
    const uint32_t h[6] = {h2(a[0]), h2(a[1]), h2(a[2]), h2(a[3]), h2(b[0]), h2(b[1])};
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32""").replace(
    """                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
  }
""", """                 : "r"(h[0]), "r"(h[1]), "r"(h[2]), "r"(h[3]), "r"(h[4]), "r"(h[5]));
  }
""")
# in matmul_internal.cuh, which every kernel file includes
FP16_INCLUDE = ("#include <cuda_bf16.h>\n", "#include <cuda_bf16.h>\n#include <cuda_fp16.h>\n")
VARIANTS += [
    Variant(EX, "kernel5_by_fmas", "kernel 5's mma16x8 multiplies by plain FMAs (each lane gathers its fragments' "
            "rows and columns by shuffles): the same values as the tensor cores, no tensor-core instruction",
            {"matmul_tensor_cores.cu": [(K5_MMA, K5_FMA)]},
            # every value check passes (TF32 words multiply exactly in float32): only the machine code tells
            loses=TC_GROUPS, reason="no HMMA (mma.sync)", extra={"kind": "tensor-core instruction"}),
    Variant(EX, "bf16_through_fp16_mma", "kernel 5 multiplies bfloat16 operands on FP16 tensor cores (rounded to "
            "half: values near 1 are right, 1e5 overflows, 1e-6 is subnormal)",
            {"matmul_internal.cuh": [FP16_INCLUDE], "matmul_tensor_cores.cu": [(K5_MMA, K5_BF16_FP16)]},
            loses={"tensor_cores_bf16"}, reason="values near", extra={"kind": "precision probe"}),
    Variant(EX, "bt_through_fp16", "matmul_transpose_tf32 rounds B through float16 before TF32: B^T (kernel 5's "
            "tall float32 products, kernel 6's float32 products) overflows near 1e5",
            {"matmul_internal.cuh": [FP16_INCLUDE],
             "matmul_tensor_cores.cu": [(BT_ROUND, BT_ROUND.replace("to_tf32(B[k * ldb + n])",
                                                                    "to_tf32(__half2float(__float2half_rn(B[k * ldb + n])))"))]},
            # version 5's plain tiles are right: only the probes on its M >= 2048 path catch it
            loses={"tensor_cores_tf32", "wgmma_tf32"}, reason="values near", extra={"kind": "precision probe"}),
]
