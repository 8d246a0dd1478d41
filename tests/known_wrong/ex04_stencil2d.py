from tests.known_wrong import Variant

EX = "04_stencil2d"
# a broken kernel keeps the input checks; registration counts only once forward passes (the spec's
# requires: opcheck on a broken kernel passes or fails by chance), so it is lost with forward
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
            # costs the check it happens in (forward's), the rest going on in a fresh process
            loses={"forward", "performance"}, keeps=KEEPS, reason="elements wrong"),
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

ALL = {"forward", "input_checks", "registration", "performance"}
COPY = "  const at::Tensor xc = x.contiguous();"
INCLUDE = "#include <ATen/ops/empty.h>\n"

# The trust rework's classes (issue: grader trust), each written against the grader before it.
VARIANTS += [
    # A hole in the grader at 0e7850d, closed since: every non-contiguous x the checks pass has a last stride
    # other than 1 (base[1].t(), base[:, ::2, 1::3], the properties' every-other-element views); none is a
    # crop of wider images (unit column stride, longer rows), which this fault reads wrongly
    Variant(EX, "trusts_a_unit_column_stride", "copies x only when its columns are not adjacent (x.stride(-1) != 1): "
            "a crop of wider images (x[..., :, :300]) is read as if its rows were packed",
            {"stencil2d.cpp": [(COPY, "  const at::Tensor xc = x.stride(-1) == 1 ? x : x.contiguous();")]},
            loses={"forward", "performance"}, keeps=KEEPS,
            extra={"kind": "coverage", "old": "full marks"}),
    # A hole in the grader at 0e7850d, closed since: the output-metadata property compares the result with the registered fake for
    # contiguous arguments, every-other-element views (not dense: empty_like makes those contiguous) and
    # channels_last (4-D only); a transposed x (dense, permuted) is passed only to value checks
    Variant(EX, "output_layout_follows_the_input", "returns its (right) output in x's layout (at::empty_like(x), as "
            "PyTorch's elementwise ops do): a transposed x gives a transposed output, while the registered fake "
            "says contiguous",
            {"stencil2d.cpp": [(INCLUDE, INCLUDE + "#include <ATen/ops/empty_like.h>\n"),
                               ("  return y;\n}\n", "  return at::empty_like(x).copy_(y);\n}\n")]},
            loses={"forward", "performance"}, keeps=KEEPS, reason="registered fake",
            extra={"kind": "coverage", "old": "full marks"}),
    # forward[own kernel ran] profiles a batch; the generated property profiles the image call too (and
    # the timed calls, 8192 x 8192 images, would run cuDNN). No reason asserted: whether cuDNN's result
    # meets an image case's tolerance before the property runs was not measured
    Variant(EX, "images_through_cudnn", "the C++ op computes a single image (2-D x) with at::conv2d, batches with "
            "the exercise's kernel",
            {"stencil2d.cpp": [(INCLUDE, INCLUDE + "#include <ATen/ops/conv2d.h>\n"),
                               ("  if (y.numel() == 0) return y;\n",
                                "  if (y.numel() == 0) return y;\n"
                                "  if (xc.dim() == 2) {\n"
                                "    const int64_t k = wc.size(0);\n"
                                "    return at::conv2d(xc.view({1, 1, height, width}), wc.view({1, 1, k, k}), std::nullopt, "
                                "{1, 1}, {k / 2, k / 2}).view({height, width});\n"
                                "  }\n")]},
            loses={"forward", "performance"}, keeps=KEEPS,
            extra={"kind": "own kernel", "old": "full marks"}),
    Variant(EX, "zeroes_the_checks_images", "sets the default scale of the spec's _rand (a __defaults__ tuple, the "
            "function object unchanged) to 0, so every image the checks draw is zeros, and ignores the filter's last row",
            {"stencil2d.py": [("lib = load_library(__file__)\n",
                               "lib = load_library(__file__)\n\nimport sys as _sys\n\n"
                               "_sys.modules['grader.specs.ex04_stencil2d']._rand.__defaults__ = (torch.float32, 0.0)\n")],
             "stencil2d.cu": [("if (dy >= 0 && dy < K) acc", "if (dy >= 0 && dy < K - 1) acc")]},
            # before the rework the judge's audit calls (their own random values) and the timed rows saw it
            loses=ALL, status="tampered", reason="_rand", extra={"kind": "integrity", "old": "loses forward, performance"}),
]

# Layouts and state (issue: grader trust, point 5), each written against the grader before them.
IMAGE = "    const float* image = in + b * height64 * width64;"
DST = "    float* dst = out + b * height64 * width64;"
SIDE_CHECK = "  TORCH_CHECK(height < kMaxSide && width < kMaxSide, \"x: each side must be below 2^30 pixels, but x is \" +\n"
VARIANTS += [
    Variant(EX, "trusts_a_packed_batch_stride", "copies x only when its rows are not packed (last stride 1, row "
            "stride W), then reads image b at b * H * W: a slice of a longer batch, or images cropped from taller "
            "ones, is read as if its images were packed",
            {"stencil2d.cpp": [(COPY, "  const at::Tensor xc = x.stride(-1) == 1 && x.stride(-2) == x.size(-1) ? x "
                                      ": x.contiguous();")]},
            loses={"forward", "performance"}, keeps=KEEPS, reason="slice of a longer batch",
            extra={"kind": "layout", "old": "full marks"}),
    # shown only by the huge check (a batch of 2^31 + 12288 pixels): graded in full
    # (signed: an unsigned 32-bit offset wraps only past 2^32 pixels, which the check does not reach)
    Variant(EX, "image_offset_32_bit", "image b starts at a 32-bit offset (int(b * H * W)): past 2^31 pixels "
            "it turns negative and the last images read and write before their tensors",
            {"stencil2d.cu": [(IMAGE, "    const float* image = in + static_cast<int>(b * height64 * width64);"),
                              (DST, "    float* dst = out + static_cast<int>(b * height64 * width64);")]},
            loses={"forward", "performance"}, keeps=KEEPS, reason="more than 2^31 pixels",
            extra={"huge": True, "kind": "coverage", "old": "full marks"}),
    # shown only by the huge check of one row of 2^31 + 1 pixels (16 GiB): graded in full
    Variant(EX, "side_limit_unchecked", "no check of the sides' limit (below 2^30 pixels): a side past 2^31 - 1 "
            "wraps in the kernel's 32-bit int",
            {"stencil2d.cu": [(SIDE_CHECK, "  if (false) " + SIDE_CHECK.lstrip())]},
            loses={"forward", "performance"}, keeps=KEEPS, reason="2147483649 pixels",
            extra={"huge": True, "kind": "coverage", "old": "full marks"}),
]
