from tests.known_wrong import Variant

EX = "03_transpose"
# a broken kernel keeps the input checks; gradcheck on a 7 x 5 tile may pass or fail with it
KEEPS = {"input_checks"}
# the store loop's guard and index, and the barrier between the tile's load and store phases
STORE = "if (c < cols && r < rows) out[c * rows + r] = tile[threadIdx.x + i][threadIdx.y + j];"
LOAD_BARRIER = "    __syncthreads();\n#pragma unroll\n    for (int j = 0; j < kTile; j += kBlockY) {\n#pragma unroll\n      for (int i = 0; i < kTile; i += kBlockX) {\n        const int64_t c = c0"

VARIANTS = [
    Variant(EX, "empty_kernel", "the kernel stores nothing",
            {"transpose.cu": [(STORE, "")]},
            loses={"forward", "performance"}, keeps=KEEPS, reason="got nan"),
    Variant(EX, "store_edges_unguarded", "the store skips the row bound (r < rows): a partial tile's extra "
            "columns spill into the next output row",
            {"transpose.cu": [(STORE, "if (c < cols) out[c * rows + r] = tile[threadIdx.x + i][threadIdx.y + j];")]},
            loses={"forward", "performance"}, keeps=KEEPS, reason="elements wrong"),
    Variant(EX, "missing_syncthreads", "no barrier between writing the tile and reading it transposed",
            {"transpose.cu": [(LOAD_BARRIER, LOAD_BARRIER.replace("    __syncthreads();\n", "", 1))]},
            loses={"forward", "performance"}, keeps=KEEPS, reason="elements wrong"),
    Variant(EX, "row_col_swapped", "the tile is read back as it was written (tile[row][col]): each 64 x 64 tile "
            "lands in its transposed place without being transposed itself",
            {"transpose.cu": [(STORE, "if (c < cols && r < rows) out[c * rows + r] = tile[threadIdx.y + j][threadIdx.x + i];")]},
            loses={"forward", "performance"}, keeps=KEEPS, reason="elements wrong"),
    Variant(EX, "pytorch_fallback", "the Python wrapper calls x.t().contiguous()",
            {"transpose.py": [("return lib.ops.transpose(x)", "return x.t().contiguous()")]},
            # PyTorch's op also accepts a CPU tensor, which the exercise must refuse; its copy kernel is
            # housekeeping (grader.observe), so no kernel of the exercise's ran; autograd requires that check
            loses={"forward", "performance", "input_checks", "autograd"}, reason="no GPU kernel of the exercise ran"),
    Variant(EX, "default_stream", "the kernel is launched on the legacy default stream, not the caller's",
            {"transpose.cu": [("transpose_kernel<scalar_t><<<grid, block, 0, stream>>>(", "transpose_kernel<scalar_t><<<grid, block>>>(")]},
            loses={"forward", "performance"}, keeps=KEEPS, reason="torch.cuda.stream"),
    Variant(EX, "no_dim_check", "a tensor of any number of dimensions is accepted",
            {"transpose.cpp": [("TORCH_CHECK(x.dim() == 2, ", "TORCH_CHECK(true || x.dim() == 2, ")]},
            loses={"input_checks"}, reason="-D tensor"),
]

# The trust rework's classes (issue: grader trust), written against the grader before it.
VARIANTS += [
    Variant(EX, "wrong_between_the_checked_columns", "for tensors of 2^28 elements or more, flips the sign of "
            "seven elements in the middle of the output (the checked first and last 512 columns stay right)",
            {"transpose.py": [("    return lib.ops.transpose(x)\n",
                               "    y = lib.ops.transpose(x)\n"
                               "    if x.numel() >= 1 << 28:\n"
                               "        y[y.shape[0] // 2, y.shape[1] // 2:y.shape[1] // 2 + 7] *= -1\n"
                               "    return y\n")]},
            loses={"forward", "performance"}, reason="timed",
            extra={"timed": True, "kind": "timed work unverified", "old": "full marks"}),
]
