from tests.known_wrong import Variant

EX = "04_stencil2d"
# a broken kernel keeps the input checks; opcheck (registration) may pass or fail with it
KEEPS = {"input_checks"}
TAP = "acc[c][i] = fmaf(c_filter[dy * K + dx], v, acc[c][i]);"
STORE = "dst[int64_t(y) * width + x] = acc[c][i];"

VARIANTS = [
    Variant(EX, "empty_kernel", "the kernel stores nothing",
            {"stencil2d.cu": [(STORE, "{}")]},
            loses={"forward", "performance"}, keeps=KEEPS, reason="got nan"),
    Variant(EX, "halo_unguarded", "the halo load checks the rows but not the columns: the left and right "
            "borders read the neighbouring image rows instead of zeros",
            {"stencil2d.cu": [("y < height && x >= 0 && x < width)\n", "y < height)\n")]},
            # reading before the first row's start can leave the allocation: an illegal address then
            # ends the exercise's later checks too, so only the forward's loss is certain
            loses={"forward", "performance"}, keeps=set(), reason="elements wrong"),
    Variant(EX, "missing_syncthreads", "no barrier between loading the tile and reading it",
            {"stencil2d.cu": [("      }\n    }\n    __syncthreads();\n    // END SOLUTION\n\n", "      }\n    }\n    // END SOLUTION\n\n")]},
            loses={"forward", "performance"}, keeps=KEEPS, reason="elements wrong"),
    Variant(EX, "row_col_swapped", "outputs stored at [x][y] instead of [y][x]",
            {"stencil2d.cu": [(STORE, "dst[int64_t(x) * height + y] = acc[c][i];")]},
            loses={"forward", "performance"}, keeps=KEEPS, reason="elements wrong"),
    Variant(EX, "filter_transposed", "the filter is indexed [dx][dy]",
            {"stencil2d.cu": [(TAP, "acc[c][i] = fmaf(c_filter[dx * K + dy], v, acc[c][i]);")]},
            loses={"forward", "performance"}, keeps=KEEPS, reason="elements wrong"),
    Variant(EX, "filter_cached", "the filter is copied to constant memory on the first call only",
            {"stencil2d.cpp": [("  stencil2d_set_filter(wc.const_data_ptr<float>(), static_cast<int>(wc.size(0)), stream);",
                                "  static bool copied = false;\n  if (!copied) stencil2d_set_filter(wc.const_data_ptr<float>(), "
                                "static_cast<int>(wc.size(0)), stream);\n  copied = true;")]},
            loses={"forward", "performance"}, keeps=KEEPS, reason="elements wrong"),
    Variant(EX, "filter_on_default_stream", "the filter is copied to constant memory on the legacy default stream",
            {"stencil2d.cu": [("cudaMemcpyDeviceToDevice,\n                                         stream));",
                               "cudaMemcpyDeviceToDevice,\n                                         0));")]},
            loses={"forward", "performance"}, keeps=KEEPS, reason="torch.cuda.stream"),
    Variant(EX, "pytorch_fallback", "the Python wrapper calls F.conv2d",
            {"stencil2d.py": [("    return lib.ops.stencil2d(x, weight)",
                               "    k = weight.shape[-1]\n    return torch.nn.functional.conv2d(x.reshape(-1, 1, *x.shape[-2:]), "
                               "weight[None, None], padding=k // 2).reshape(x.shape)")]},
            # PyTorch's op also accepts CPU tensors, which the exercise must refuse
            loses={"forward", "performance", "input_checks"}, reason="other than this exercise's own"),
    Variant(EX, "no_filter_size_check", "an even filter size is accepted",
            {"stencil2d.cpp": [("weight.size(0) % 2 == 1 && weight.size(0) <= kMaxFilter", "weight.size(0) <= kMaxFilter")]},
            loses={"input_checks"}, reason="K even"),
]
