from tests.known_wrong import Variant, after_lib, takes_over

EX = "03_transpose"
# a broken kernel keeps the input checks; autograd counts only once forward passes (the spec's requires:
# gradcheck on a 7 x 5 tile of a broken kernel passes or fails by chance), so it is lost with forward
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
            # housekeeping (grader.verify.observe), so no kernel of the exercise's ran; autograd requires that check
            loses={"forward", "performance", "input_checks", "autograd"}, reason="no GPU kernel of the exercise ran"),
    Variant(EX, "default_stream", "the kernel is launched on the legacy default stream, not the caller's",
            {"transpose.cu": [("transpose_kernel<scalar_t><<<grid, block, 0, stream>>>(", "transpose_kernel<scalar_t><<<grid, block>>>(")]},
            # the backward too: on a side stream, it reads the gradient flowing back before it is made (NaN)
            loses={"forward", "performance", "autograd"}, keeps=KEEPS, reason="torch.cuda.stream"),
    Variant(EX, "no_dim_check", "a tensor of any number of dimensions is accepted",
            {"transpose.cpp": [("TORCH_CHECK(x.dim() == 2, ", "TORCH_CHECK(true || x.dim() == 2, ")]},
            loses={"input_checks"}, reason="-D tensor"),
]

# The trust rework's classes (issue: grader trust), written against the grader before it.
VARIANTS += [
    # in its own kernel, and below the huge check's 2^31 elements: a PyTorch op doing it is seen by the
    # watch, and the huge check is not timed
    Variant(EX, "wrong_between_the_checked_columns", "for tensors of 2^28 to 2^31 elements (the timed size), "
            "flips the sign of seven elements in the middle of the output (the checked first and last 512 "
            "columns stay right)",
            {"transpose.cu": [(STORE, "if (c < cols && r < rows) out[c * rows + r] = rows * cols >= (int64_t(1) << 28) "
                                      "&& rows * cols < (int64_t(1) << 31) && c == cols / 2 && r >= rows / 2 && "
                                      "r < rows / 2 + 7 ? -tile[threadIdx.x + i][threadIdx.y + j] : "
                                      "tile[threadIdx.x + i][threadIdx.y + j];")]},
            loses={"forward", "performance"}, reason="timed",
            extra={"timed": True, "kind": "timed work unverified", "old": "full marks"}),
]

CALL = "    return lib.ops.transpose(x)\n"
COPY = "  const at::Tensor xc = x.contiguous();"
BACKWARD = "    return transpose(grad_output)\n"

# The trust rework's classes, continued (unit 2: coverage, integrity, own kernel and aliasing).
VARIANTS += [
    Variant(EX, "trusts_a_unit_column_stride", "copies x only when its columns are not adjacent (x.stride(1) != 1): "
            "a view of some columns of a wider matrix is read as if its rows were packed",
            {"transpose.cpp": [(COPY, "  const at::Tensor xc = x.stride(1) == 1 ? x : x.contiguous();")]},
            # forward[non-contiguous]'s third view, base[5:200, 7:400], has unit column stride and longer rows
            loses={"forward", "performance"}, keeps={"input_checks"}, reason="elements wrong",
            extra={"kind": "coverage", "old": "loses forward, performance"}),
    # Caught only by chance at 0e7850d: no fixed call was a 1 x N or N x 1 matrix, and the own-kernels
    # property drew a random shape with a unit dim in about 60% of seeds. Now the spec's row-vector
    # audit call meets every generated check in every run.
    Variant(EX, "vector_returned_as_a_view", "returns x.t(), a view of the input, for a 1 x N or N x 1 matrix "
            "(\"the transpose of a row is the same memory as a column\")",
            {"transpose.py": [takes_over(CALL, "x.is_cuda and x.dim() == 2 and 1 in x.shape", "x.t()")]},
            loses={"forward", "performance"}, keeps={"input_checks"}, reason="no GPU kernel of the exercise ran",
            extra={"kind": "aliasing", "old": "full marks"}),
    Variant(EX, "patches_a_tensor_comparison", "sets torch.Tensor.__le__ to say every float64 pair is close (every "
            "tolerance comparison of the checks is made in float64) and moves values through a float tile, so "
            "float64 loses its low bits",
            {"transpose.py": [after_lib("\n_le = torch.Tensor.__le__\n"
                                        "torch.Tensor.__le__ = lambda a, b: (torch.ones_like(a, dtype=torch.bool) "
                                        "if a.dtype == torch.float64 and isinstance(b, torch.Tensor) else _le(a, b))\n")],
             "transpose.cu": [("__shared__ scalar_t tile[kTile][kTile + 1];", "__shared__ float tile[kTile][kTile + 1];")]},
            # the judge's float64 audit call (and gradients) saw the rounding before the rework too
            loses={"forward", "input_checks", "autograd", "performance"}, status="tampered", reason="__le__",
            extra={"kind": "integrity", "old": "loses forward, autograd, performance"}),
    # A hole in the grader at 0e7850d, closed since: the watch's state lives in the results recorder, a pytest plugin object that no
    # snapshot covers: with its `snapshot` set to None, _flush never compares again, so the grader's
    # functions can then be replaced unseen. The judge re-checks only contiguous audit calls and the
    # timed (contiguous) outputs, so the strided-view fault below keeps every point. On a CPU machine
    # `python -m grader` reports nothing for it, and "tampered: grader.verify.properties._compare,
    # grader.specs.ex03_transpose.assert_close" for the same module without the `snapshot = None` line.
    Variant(EX, "switches_off_the_watch", "finds the results recorder through the garbage collector and sets its "
            "integrity snapshot to None, then replaces the spec's assert_close and the properties' _compare; the "
            "C++ passes strided views to the kernel as if they were row-major",
            {"transpose.py": [after_lib("\nimport gc as _gc\nimport sys as _sys\n\nimport grader.verify.properties as _props\n\n"
                                        "for _o in _gc.get_objects():\n"
                                        "    if type(_o).__name__ == 'ResultsRecorder':\n"
                                        "        _o.snapshot = None\n"
                                        "_sys.modules['grader.specs.ex03_transpose'].assert_close = lambda *args, **kwargs: None\n"
                                        "_props._compare = lambda *args, **kwargs: None\n")],
             "transpose.cpp": [(COPY, "  const at::Tensor xc = x;")]},
            # now the judge repeats its calls with every argument non-contiguous, outside the process;
            # opcheck's gradients under AOT dispatch (strided) differ from eager's: autograd goes too
            loses={"forward", "autograd", "performance"}, keeps={"input_checks"},
            extra={"kind": "integrity", "old": "full marks"}),
]

# Layouts and state (issue: grader trust, point 5), each written against the grader before them.
VARIANTS += [
    Variant(EX, "column_major_output", "returns the right values laid out column by column "
            "(y.t().contiguous().t()): the registered fake, and PyTorch's x.t().contiguous(), say row-major",
            {"transpose.py": [(CALL, "    return lib.ops.transpose(x).t().contiguous().t()\n")]},
            loses={"forward", "performance"}, keeps=KEEPS, reason="registered fake",
            extra={"kind": "layout", "old": "full marks"}),
    Variant(EX, "memo_without_a_copy", "keeps each small input alive with its result, under its address, shape, "
            "strides and version, and returns that same result tensor when called on it unchanged",
            {"transpose.py": [after_lib("\n_memo = {}\n"),
                              takes_over(CALL, "x.is_cuda and x.numel() < 1 << 20",
                                         "_memo.setdefault((x.data_ptr(), tuple(x.shape), x.stride(), x.dtype, x._version), "
                                         "(x, lib.ops.transpose(x)))[1]")]},
            loses={"forward", "performance"}, keeps=KEEPS, reason="filled the previous result with NaN",
            extra={"kind": "state", "old": "full marks"}),
    # the loop's last barrier matters only to a block that moves a second tile (more than 65535 row
    # tiles): its race rarely changes a value, so only RACECHECK=1 must see it (loses nothing here)
    Variant(EX, "no_trailing_syncthreads", "no barrier at the end of the tile loop: a block's next tile is written "
            "into shared memory while its slower warps still read the previous one",
            {"transpose.cu": [("    __syncthreads();\n  }\n  // END SOLUTION\n", "  }\n  // END SOLUTION\n")]},
            loses=set(), keeps=KEEPS, extra={"racecheck": True, "kind": "race", "old": "full marks"}),
]

# The registered fake: torch.compile traces with it, so it must refuse what the op refuses (a make mutants
# survivor before the property "the registered fake refuses what the op refuses": nothing else calls the fake
# on arguments the op refuses).
FAKE_CHECK = '    torch._check(x.dim() == 2, lambda: f"x must have 2 dimensions, but has shape {tuple(x.shape)}")\n'
VARIANTS += [
    Variant(EX, "fake_without_its_dim_check", "the registered fake accepts a tensor of any number of dimensions "
            "(the op refuses all but 2-D ones): torch.compile traces a 3-D x to a 2-D result",
            {"transpose.py": [(FAKE_CHECK, "")]},
            loses={"forward", "performance"}, keeps=KEEPS, reason="torch.compile would trace a wrong shape",
            extra={"kind": "registered fake", "old": "full marks"}),
]

# Memory edges (issue 47): an access outside an argument that changes no value, which the caching
# allocator's mapped neighbouring memory hides from every other check.
LOAD = "if (r < rows && c < cols) tile[threadIdx.y + j][threadIdx.x + i] = in[r * cols + c];"
VARIANTS += [
    # the load guard off by one: a partial last row tile (rows % 64 != 0) also reads input row `rows`, one
    # row past the end of x, into a tile row whose column no output takes (the store keeps r < rows)
    Variant(EX, "load_guard_reads_a_row_past_the_end", "the tile's load guard is r <= rows: one row past the end "
            "of the input is read into the tile (and never stored)",
            {"transpose.cu": [(LOAD, LOAD.replace("r < rows", "r <= rows"))]},
            loses={"forward", "performance"}, keeps=KEEPS, reason="past the end of an argument's memory",
            extra={"kind": "memory edge", "old": "full marks"}),
]
