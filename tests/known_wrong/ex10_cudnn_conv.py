from tests.known_wrong import SIDE_STREAM, Variant, after_lib, memo_by_pointer, takes_over

EX = "10_cudnn_conv"

VARIANTS = [
    Variant(EX, "key_without_stride", "make_key leaves the stride out, so stride 1 and stride 2 share a plan",
            {"cudnn_conv.cu": [("  key.stride = a.stride;\n", "")]},
            loses={"forward", "backward", "cache"}, reason="cache key is missing a field"),
    # The seed's crash: cuDNN is handed a null workspace with a non-zero size.
    Variant(EX, "null_workspace", "execute passes nullptr as the workspace but keeps its size",
            {"cudnn_conv.cu": [("ws.get(), plan.workspace_bytes", "nullptr, plan.workspace_bytes", 3)]},
            # on the H100 (cuDNN 9.19) cuDNN rejects it cleanly: every group that runs a plan needing a
            # workspace fails. The cache and thread checks' small shapes need one only if the benchmark
            # picks such an algorithm (each lost on one H100 run and kept on another): not claimed; nor
            # streams, paid only while forward's check that no PyTorch convolution ran passes, whose
            # benchmarked plan may need a workspace (it did on the H200, 2026-11-30)
            loses={"forward", "backward"}, keeps={"descriptors", "input_checks"},
            reason="CUDNN_STATUS_BAD_PARAM"),
    # Still only "streams": the launch cache binds the handle to its capture stream itself (and back)
    # and replays on the caller's stream, but the first call on a set of buffers is never graphed, so
    # the streams check's side-stream call runs plainly on the default stream, and inside the caller's
    # torch.cuda.graph capture cuDNN's work runs eagerly instead of being recorded. The other groups'
    # checks run on the default stream, where the handle is.
    Variant(EX, "stale_handle_stream", "cudnnSetStream is never called: the handle stays on the default stream",
            {"cudnn_conv.cu": [("      CUDNN_CHECK(cudnnSetStream(handle_, stream));\n", "")]},
            # the generated current-stream checks of every op (forward, backward) see it too
            loses={"streams", "forward", "backward"}, reason="current stream"),
    # A graph replayed for a call whose output is another buffer writes the old buffer and leaves the
    # new one unwritten. Certain losses: the cache group's new-output check and the threads check
    # (each thread's 8 outputs kept alive on the same x, w and workspace). gradcheck (backward) and
    # others may lose too, depending on where the allocator puts outputs: not claimed either way.
    Variant(EX, "graph_key_without_output", "the launch cache's key leaves out b.y (the forward's output)",
            {"cudnn_conv.cu": [("  k.y = reinterpret_cast<uintptr_t>(b.y);\n", "")]},
            loses={"cache", "threads"}, keeps={"descriptors", "input_checks"}, reason="its own output buffer"),
    Variant(EX, "pytorch_fallback", "the Python wrapper calls torch.nn.functional.conv2d when no gradient is needed",
            {"cudnn_conv.py": [("    return _conv2d(x, weight, bias, stride, padding, dilation, groups, _mode(mode))\n",
                                "    return torch.nn.functional.conv2d(x, weight, bias, stride, padding, dilation, groups)\n")]},
            # streams requires the check that no PyTorch convolution ran
            loses={"forward", "cache", "threads", "input_checks", "streams"}, reason="PyTorch's convolution ran"),
    Variant(EX, "lru_never_evicts", "insert never evicts, so the cache grows without bound",
            {"cudnn_conv.cu": [("    kept = lru_.front().second;\n    evict_over_capacity();\n",
                                "    kept = lru_.front().second;\n")]},
            loses={"cache"}, reason="capacity 3"),
]

CALL = "    return _conv2d(x, weight, bias, stride, padding, dilation, groups, _mode(mode))\n"

# The trust rework's classes (issue: grader trust), each written against the grader before it.
VARIANTS += [
    Variant(EX, "pytorch_for_large_batches", "calls torch.nn.functional.conv2d for batches of 32 or more: the "
            "benchmark's, larger than any checked one",
            {"cudnn_conv.py": [takes_over(CALL, "x.shape[0] >= 32",
                                          "torch.nn.functional.conv2d(x, weight, bias, stride, padding, dilation, groups)")]},
            # forward's check that no PyTorch convolution ran calls a batch of 32 (streams is paid only
            # while it passes)
            loses={"forward", "streams", "performance"}, reason="PyTorch's",
            extra={"timed": True, "kind": "tells timed from checked", "old": "full marks"}),
    Variant(EX, "memo_by_pointer", "for batches of 32 or more, keeps each result by its inputs' addresses and "
            "returns a copy of it when called on the same tensors again",
            {"cudnn_conv.py": memo_by_pointer(CALL, "x.shape[0] >= 32",
                                              "(x.data_ptr(), weight.data_ptr(), tuple(x.shape), tuple(weight.shape))",
                                              "_conv2d(x, weight, bias, stride, padding, dilation, groups, _mode(mode))")},
            loses={"forward", "performance"}, reason="timed",
            extra={"timed": True, "kind": "tells timed from checked", "old": "full marks"}),
    Variant(EX, "key_without_the_input_channels", "make_key leaves the channel count out of x's and w's shapes, so "
            "calls that differ only in it share a plan (and cache_stats still counts the first of each as a miss)",
            {"cudnn_conv.cu": [("  key.x = a.x;\n  key.w = a.w;\n",
                                "  key.x = {a.x[0], 0, a.x[2], a.x[3]};\n  key.w = {a.w[0], 0, a.w[2], a.w[3]};\n")]},
            # the reference's own cache refuses a plan whose descriptors differ from the call's
            loses={"cache"}, keeps={"descriptors", "input_checks"}, reason="every key field",
            extra={"kind": "coverage", "old": "full marks"}),
]

LARGE = "x.shape[0] >= 32"
# splits a large batch into chunks of 16 images, but the loop's bound drops the last chunk
IN_CHUNKS = """

def _in_chunks(x, weight, bias, stride, padding, dilation, groups, mode):
    parts = [_conv2d(x[i:i + 16], weight, bias, stride, padding, dilation, groups, mode)
             for i in range(0, x.shape[0] - 16, 16)]
    y = parts[0].new_empty((x.shape[0], *parts[0].shape[1:]))
    for i, part in enumerate(parts):
        y[16 * i:16 * (i + 1)].copy_(part)
    return y
"""
# strict fp32 planned as TF32: Tensor Core math asked for and allowed in every plan
TF32_ALWAYS = [("  return a.allow_tf32 ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH;", "  return CUDNN_TENSOR_OP_MATH;"),
               ("const bool strict = a.dtype == CUDNN_DATA_FLOAT && !a.allow_tf32;", "const bool strict = false;")]
CPP_INCLUDES = "#include <ATen/ops/empty.h>\n"
FILTER_GUARD = "  const c10::cuda::CUDAGuard guard(x.device());\n  const at::Tensor gc = dense(grad_output), xc = dense(x);"
ALL_GROUPS = {"descriptors", "forward", "backward", "cache", "threads", "streams", "input_checks", "performance"}

# The trust rework's classes, continued (unit 5: timed work unverified, coverage, integrity, own
# kernel and aliasing).
VARIANTS += [
    Variant(EX, "drops_the_last_chunk", "splits batches of more than 16 images into chunks of 16 (the benchmark's "
            "batches of 32, larger than any checked one), and the loop's bound leaves the last chunk out: its "
            "images are never written",
            {"cudnn_conv.py": [after_lib(IN_CHUNKS),
                               takes_over(CALL, "x.shape[0] > 16", "_in_chunks(x, weight, bias, stride, padding, "
                                                                   "dilation, groups, _mode(mode))")]},
            # every timed output may be checked in full, the last always; the parent re-checks samples.
            # Before that, forward's check that no PyTorch convolution ran calls a batch of 32 (a Winograd
            # shape of a real model) and compares its values: it fails there, and streams, paid only
            # while it passes, with it
            loses={"forward", "streams", "performance"}, reason="relative error",
            extra={"timed": True, "kind": "timed work unverified", "old": "keeps forward, loses performance"}),
    Variant(EX, "side_stream_for_large_batches", "for batches of 32 or more (the benchmark's), runs the op on a "
            "stream of its own that never joins the current one: the timer's events see none of the work",
            {"cudnn_conv.py": [after_lib(SIDE_STREAM),
                               takes_over(CALL, LARGE, "_on_a_side_stream(lambda: _conv2d(x, weight, bias, stride, "
                                                       "padding, dilation, groups, _mode(mode)))")]},
            # the work starts during the timer's GPU sleep, before the current stream reaches the call:
            # the watched timed calls see it (speed.unordered_work), and forward, the group the timed
            # calls vouch for, loses (streams and performance with it). Its timed outputs were right in
            # every checked call (H200, 2026-12-02: the late inputs' copies had ended by the time it read
            # them), and only the timing was refused ("not credited"), until the order itself was judged
            loses={"forward", "performance"}, reason="the benchmark's shape",
            # before the rework only the device's busy time after the end event told (about 270 us of
            # cuDNN work queued during a 250 us sleep): perhaps within its 50 us margin
            extra={"timed": True, "kind": "timed work unverified", "old": "loses performance, or full marks"}),
    Variant(EX, "key_with_one_dilation_value", "make_key keeps the height's dilation for both dimensions, so calls "
            "that differ only in the width's dilation share a plan",
            {"cudnn_conv.cu": [("  key.dilation = a.dilation;\n", "  key.dilation = {a.dilation[0], a.dilation[0]};\n")]},
            # "dilation (width only)" finds the base call's plan, whose output shape differs: the
            # reference's own check_plan stops it. No other check calls one shape with two dilations.
            loses={"cache"}, keeps={"descriptors", "input_checks"}, reason="cache key is missing a field",
            extra={"kind": "coverage", "old": "full marks"}),
    Variant(EX, "edits_the_tolerance_table", "sets the spec's strict-fp32 tolerance (grader.specs.ex10_cudnn_conv.TOL, "
            "edited in place) to TF32's, and plans strict fp32 with Tensor Core (TF32) math",
            {"cudnn_conv.py": [after_lib("\nimport grader.specs.ex10_cudnn_conv as _spec\n\n"
                                         "_spec.TOL[\"strict\"] = _spec.TOL[\"tf32\"]\n")],
             "cudnn_conv.cu": TF32_ALWAYS},
            loses=ALL_GROUPS, status="tampered", reason="TOL", extra={"kind": "integrity", "old": "full marks"}),
    Variant(EX, "edits_the_benchmark_shapes", "rebinds the spec's BENCH to batches of 16 (so the timed calls are "
            "checked at a shape it gets right), and drops the last chunk of batches over 16",
            {"cudnn_conv.py": [after_lib("\nimport grader.specs.ex10_cudnn_conv as _spec\n\n"
                                         "_spec.BENCH = tuple(((16, *x[1:]), k) for x, k in _spec.BENCH)\n" + IN_CHUNKS),
                               takes_over(CALL, "x.shape[0] > 16", "_in_chunks(x, weight, bias, stride, padding, "
                                                                   "dilation, groups, _mode(mode))")]},
            loses=ALL_GROUPS, status="tampered", reason="BENCH", extra={"kind": "integrity", "old": "full marks"}),
    # A hole in the grader at 0e7850d, closed since: every check that no PyTorch convolution ran is made in
    # float32 (backward[no PyTorch convolution ran], the own-kernels property in property_dtypes =
    # ("float32",)); the float64 backward checks, gradcheck and the judge's float64 audit calls compare
    # values only, and backward-filter is in no cache-key check. Read from that grader, it would get full marks there (not run).
    Variant(EX, "pytorch_backward_filter_for_float64", "after its argument checks, conv2d_backward_weight returns "
            "at::convolution_backward (PyTorch's convolution) for float64 tensors",
            {"cudnn_conv.cpp": [(CPP_INCLUDES, CPP_INCLUDES + "#include <ATen/ops/convolution_backward.h>\n"),
                                (FILTER_GUARD, "  if (x.scalar_type() == at::kDouble) {\n"
                                               "    return std::get<1>(at::convolution_backward(grad_output, x, "
                                               "at::empty(weight_size, x.options()), std::nullopt, stride, padding, "
                                               "dilation, false, {0, 0}, groups, {false, true, false}));\n  }\n" + FILTER_GUARD)]},
            # (performance requires only the forward.) Since issue 20 the cache's key-field check also runs
            # backward-filter in float64, where this variant never reaches the cache, so the miss that call
            # must count never comes: cache is lost too (not run on a GPU yet)
            loses={"backward", "cache"}, keeps={"descriptors", "forward", "input_checks"},
            reason="PyTorch's", extra={"kind": "own kernel", "old": "full marks"}),
    Variant(EX, "one_output_buffer_per_shape", "without autograd, copies each result into one buffer per shape and "
            "dtype and returns that buffer every time, so a second call overwrites the first call's result",
            {"cudnn_conv.py": [after_lib("\n_buffers = {}\n"),
                               (CALL, "    y = _conv2d(x, weight, bias, stride, padding, dilation, groups, _mode(mode))\n"
                                      "    return _buffers.setdefault((tuple(y.shape), y.dtype, y.device), "
                                      "torch.empty_like(y)).copy_(y)\n")]},
            # "two results held at once" keeps both results of one shape (forward); the launch cache's
            # new-output check keeps four outputs of one shape alive (cache)
            loses={"forward", "cache", "performance"}, keeps={"descriptors", "backward", "input_checks", "streams"},
            reason="shares memory", extra={"kind": "aliasing", "old": "loses cache"}),
]

# The output's size is cuDNN's to refuse when the op does not check it: a status that names no limit.
VARIANTS += [
    Variant(EX, "output_size_unchecked", "make_args checks x's and the weight's element counts but not one output "
            "image's",
            {"cudnn_conv.cpp": [("  TORCH_CHECK(a.y[1] * a.y[2] * a.y[3] <= kMaxElements,",
                                 "  TORCH_CHECK(true || a.y[1] * a.y[2] * a.y[3] <= kMaxElements,")]},
            # refused by cuDNN or the allocator instead, with a message that names no limit: the output of
            # 2^31 elements, conv2d_backward_input's grad_output and conv_transpose2d's x of 2^31 elements
            loses={"input_checks"}, reason="2^31"),
]

# Issue 20: groups and bias.
GROUP_COUNT = "  CUDNN_CHECK(cudnnSetConvolutionGroupCount(plan.conv_desc.get(), as_int(a.groups)));\n"
ADD_BIAS = "  if (b.bias != nullptr) add_bias(plan, a, b, h);  // queued after the convolution, on the same stream\n"
VARIANTS += [
    # cuDNN's descriptors then see a filter of C_in / groups channels for an input of C_in: every grouped
    # call (describe's included) is refused with cuDNN's status, and describe accepts a dense weight with
    # groups 2. The binding's own checks (input_checks) and the dense calls of threads keep.
    Variant(EX, "groups_ignored", "describe never sets the group count on the convolution descriptor "
            "(cudnnSetConvolutionGroupCount): groups are accepted and checked, but cuDNN is told there is one",
            {"cudnn_conv.cu": [(GROUP_COUNT, "")]},
            # streams is graded only once forward passes, so it is lost with it
            loses={"descriptors", "forward", "backward", "cache", "streams"}, keeps={"threads", "input_checks"},
            reason="CUDNN_STATUS_BAD_PARAM"),
    # Leaving only groups out of the key is harmless in this design: the weight's dimension 1 is
    # C_in / groups and both shapes are in the key, so the shapes already tell the groups apart (such a
    # variant would keep every point, and is not listed). The key goes wrong when it also drops the
    # weight's channels (implied, one might think, by x's channels): then a grouped call finds its
    # groups=1 twin's plan, and the reference's own check_plan stops it (the forward's and backward's
    # grouped checks run that twin first on the same x; the cache's key-field check changes groups alone).
    Variant(EX, "key_without_groups", "make_key leaves groups out, and the weight's channel count too (as if "
            "x's channels implied it): a grouped call and its groups=1 twin on the same x share a plan",
            {"cudnn_conv.cu": [("  key.groups = a.groups;\n", ""),
                               ("  key.w = a.w;\n", "  key.w = {a.w[0], 0, a.w[2], a.w[3]};\n")]},
            loses={"forward", "backward", "cache", "streams"}, keeps={"descriptors", "threads", "input_checks"},
            reason="cache key is missing a field"),
    Variant(EX, "bias_ignored", "execute never adds the bias: conv2d and conv_transpose2d accept and check one, "
            "and return the convolution alone",
            {"cudnn_conv.cu": [(ADD_BIAS, "")]},
            # the forward's cases with a bias, conv_transpose2d's (backward), gradcheck with a bias
            # (backward), the launch cache's bias check and the key-field check's call with a bias (cache)
            loses={"forward", "backward", "cache"}, keeps={"descriptors", "threads", "streams", "input_checks"},
            reason="with a bias"),
    # A graph holds the bias's address: without it in the key, a call with another bias tensor on the
    # same x, w and output buffers replays the graph captured with the first bias. Certain: the cache's
    # bias check. The properties may meet it too (forward, backward), depending on where the allocator
    # puts the tensors: not claimed either way.
    Variant(EX, "graph_key_without_bias", "the launch cache's key leaves out the bias's address",
            {"cudnn_conv.cu": [("  k.bias = reinterpret_cast<uintptr_t>(b.bias);  // 0 without a bias: a graph with "
                                "one is another graph\n", "")]},
            loses={"cache"}, keeps={"descriptors", "threads", "streams", "input_checks"}, reason="another bias tensor"),
    # The convolution's input of 2^31 elements reaches cuDNN (the failure): conv2d's x,
    # conv2d_backward_input's input_size and conv_transpose2d's output are copied or allocated (8 GiB each,
    # one after another), then cuDNN refuses the tensor descriptor (CUDNN_STATUS_NOT_SUPPORTED with cuDNN
    # 9.24, describe on the CPU machine), a message that says no 2^31 and names no argument. The weight's
    # check is left in place on purpose: cuDNN's filter descriptor accepts 2^31 elements (same probe), so
    # a variant without it would run a convolution cuDNN may not index correctly.
    Variant(EX, "input_size_unchecked", "make_args takes the convolution input's shape as it is, without "
            "shape4's element count check (nor its other checks)",
            {"cudnn_conv.cpp": [("  a.x = shape4(x_shape, names.x, /*batch=*/true);\n",
                                 "  a.x = {x_shape[0], x_shape[1], x_shape[2], x_shape[3]};\n")]},
            loses={"input_checks"}, reason="2^31"),
]

# Layouts and state (issue: grader trust, point 5), written against the grader before them.
VARIANTS += [
    # The state property calls each op on the same tensors (a graph is captured and replayed), then
    # swaps in a weight made beforehand at another address with other values, the calls allocating
    # alike (the same output and workspace): the graph of the old weight's address is replayed. Which
    # other groups' ops replay a graph with that key was not measured: not claimed either way.
    Variant(EX, "graph_key_without_the_filter", "the launch cache's key leaves out b.w (the filter): a call that "
            "differs only in its weight's address replays the graph of another weight",
            {"cudnn_conv.cu": [("  k.w = reinterpret_cast<uintptr_t>(b.w);\n", "")]},
            loses={"forward"}, keeps={"descriptors", "input_checks"}, reason="at a new address",
            extra={"kind": "state", "old": "full marks"}),
    # The same class for the convolution's input (the forward's x; backward-data's output): the state
    # property moves x alone, the old tensor alive, and the graph of the old address is replayed.
    Variant(EX, "graph_key_without_input", "the launch cache's key leaves out b.x (the forward's input, "
            "backward-data's output): a call that differs only in that buffer's address replays another's graph",
            {"cudnn_conv.cu": [("  k.x = reinterpret_cast<uintptr_t>(b.x);\n", "")]},
            loses={"forward"}, keeps={"descriptors", "input_checks"}, reason="at a new address",
            extra={"kind": "state"}),
]

# The launch cache's memory of first calls (GraphCache::seen_) forgotten at every new key: one layer
# called alone captures on its second call, but a model's layers called in turn never do (a mutant of
# the solution that survived until the cache's interleaved check). Values stay right (no graph is
# replayed at all): only the cache group can see it.
VARIANTS += [
    Variant(EX, "graph_cache_remembers_one_key", "GraphCache::find forgets every key seen once when it meets a "
            "new one: layers called in turn never reach their second call",
            {"cudnn_conv.cu": [("      if (seen_.size() >= kSeenCapacity) seen_.clear();\n", "      seen_.clear();\n")]},
            loses={"cache"}, keeps={"descriptors", "forward", "backward", "input_checks", "threads", "streams"},
            reason="called in turn", extra={"kind": "state", "old": "full marks"}),
]

# The registered conv_transpose2d's fake without its check of x against output_size (and of the
# geometry that goes with it): only an audit call of the registered op itself, which takes the
# output's size, hands the fake a size that does not match x.
VARIANTS += [
    Variant(EX, "transposed_fake_without_its_size_check", "the registered conv_transpose2d's fake returns "
            "output_size as given, without checking that the convolution of that size gives x's shape",
            {"cudnn_conv.py": [('    _check_output(x, "x", _out_shape(output_size, weight.shape, stride, padding, '
                                'dilation, groups,\n                                     ("output_size", "weight")))\n',
                                "")]},
            loses={"backward"}, keeps={"forward", "input_checks"}, reason="torch.compile would trace a wrong shape",
            extra={"kind": "registered fake", "old": "full marks"}),
]

# Strict fp32 on Tensor Cores (TF32_ALWAYS): strict calls run TF32 kernels (their names say so: the own-kernel
# calls and the strict watch's profile them) and round to TF32's 2.9e-4 and more, past strict fp32's 1e-4; each
# group's first failure is a strict comparison's ("exceeds 0.0001"). Whether the small cache and thread checks'
# plans use Tensor Cores is cuDNN's choice: those groups are not asserted. (Not yet graded on a GPU.)
VARIANTS += [
    Variant(EX, "strict_on_tensor_cores", "math_type_for asks for CUDNN_TENSOR_OP_MATH in strict fp32 too, and "
            "choose_algorithm plans strict calls as TF32 ones: strict calls run TF32 kernels",
            {"cudnn_conv.cu": TF32_ALWAYS},
            loses={"forward", "backward", "streams", "performance"}, keeps={"descriptors"},
            reason="exceeds 0.0001", extra={"kind": "precision", "old": "full marks"}),
    Variant(EX, "strict_skips_transforms", "choose_algorithm skips the Winograd and FFT algorithms in strict fp32 "
            "(their enumerators and those after them): slower than PyTorch's strict path where cuDNN ranks them first",
            {"cudnn_conv.cu": [("    if (strict && (c.math == CUDNN_TENSOR_OP_MATH || c.math == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION)) continue;\n",
                                "    if (strict && (c.math == CUDNN_TENSOR_OP_MATH || c.math == CUDNN_TENSOR_OP_MATH_ALLOW_CONVERSION ||\n"
                                "                   c.algo >= (a.op == Op::kForward ? int(CUDNN_CONVOLUTION_FWD_ALGO_FFT)\n"
                                "                          : a.op == Op::kBackwardData ? int(CUDNN_CONVOLUTION_BWD_DATA_ALGO_FFT)\n"
                                "                          : int(CUDNN_CONVOLUTION_BWD_FILTER_ALGO_FFT)))) continue;\n")]},
            loses={"forward", "backward", "streams", "performance"}, keeps={"descriptors", "input_checks", "cache", "threads"},
            reason="Winograd or FFT",
            extra={"kind": "coverage", "old": "full marks"}),
    Variant(EX, "strict_takes_a_5x5_winograd", "choose_algorithm takes every transforming algorithm in strict fp32, "
            "the non-fused Winograd of a 5 x 5 kernel too: its weight gradient 1.2e-3 off float64 at the workspace "
            "check's 8 x 128 x 28 x 28 and 4.9e-4 at the key check's 2 x 6 x 16 x 15, where cuDNN's heuristic ranks "
            "it first (H200, cuDNN 9)",
            {"cudnn_conv.cu": [("    if (strict && strict_refuses(a, c.algo)) continue;\n", "")]},
            # cache and forward: lost where timing picks that algorithm for a 5 x 5 call (the key check's, the
            # forward's: each did on an H200), so not claimed either way
            loses={"backward"}, keeps={"descriptors", "input_checks", "threads", "streams"},
            reason="exceeds 0.0001", extra={"kind": "precision", "old": "full marks"}),
]

# A batch past cuDNN's 2^31-element descriptors, run in pieces of whole images (cudnn_conv.cpp's by_images): the
# huge checks of the forward and the backward, the only calls large enough to be split.
VARIANTS += [
    Variant(EX, "weight_gradient_of_the_last_piece_only", "conv2d_backward_weight writes each piece's gradient over "
            "the one before instead of adding it: a batch past 2^31 elements gets its last piece's gradient",
            {"cudnn_conv.cpp": [("    if (n0 > 0) conv::add_into(piece.device", "    if (n0 > 0) grad_w.copy_(part);\n    if (false) conv::add_into(piece.device")]},
            loses={"backward"}, reason="of its terms' norm", extra={"huge": True, "kind": "coverage", "old": "full marks"}),
    Variant(EX, "pieces_written_from_image_0", "the forward writes every piece of a split batch at the output's first "
            "image: the later images of a batch past 2^31 elements are left unwritten",
            {"cudnn_conv.cpp": [("    write_images(y, n0, piece.y[0], [&](void* out) {\n",
                                 "    write_images(y, 0, piece.y[0], [&](void* out) {\n")]},
            loses={"forward", "performance"}, reason="huge",  # speed counts only once forward passes
            extra={"huge": True, "kind": "coverage", "old": "full marks"}),
]

# A gradient op's Python default not PyTorch's (the mutant that survived the defaults property before its calls at
# PyTorch's default geometry): one refused by the C++ checks, one computing another convolution's gradient.
VARIANTS += [
    Variant(EX, "backward_weight_default_stride_0", "conv2d_backward_weight's default stride is 0, not 1",
            {"cudnn_conv.py": [("def conv2d_backward_weight(grad_output, x, weight_size, stride=1,",
                                "def conv2d_backward_weight(grad_output, x, weight_size, stride=0,")]},
            loses={"backward"}, reason="PyTorch's defaults", extra={"kind": "coverage", "old": "full marks"}),
    Variant(EX, "backward_input_default_padding_1", "conv2d_backward_input's default padding is 1, not 0",
            {"cudnn_conv.py": [("def conv2d_backward_input(grad_output, weight, input_size, stride=1, padding=0,",
                                "def conv2d_backward_input(grad_output, weight, input_size, stride=1, padding=1,")]},
            loses={"backward"}, reason="PyTorch's defaults", extra={"kind": "coverage", "old": "full marks"}),
]

# The registered fakes' shape function taking groups >= 0 (a `make mutants` survivor): groups 0, a declared
# edge of every convolution call, then divides by zero in the fake, an error that names no argument.
VARIANTS += [
    Variant(EX, "fake_divides_by_groups_zero", "the registered fakes' shape checks let groups 0 through to "
            "`x[1] % groups`: a ZeroDivisionError where the op refuses naming groups",
            {"cudnn_conv.py": [("torch._check(groups >= 1 and x[1] % groups == 0",
                                "torch._check(groups >= 0 and x[1] % groups == 0")]},
            loses={"forward", "backward"}, keeps={"descriptors", "cache", "threads", "streams", "input_checks"},
            reason="names no argument", extra={"kind": "registered fake", "old": "full marks"}),
]

# The drop-in module classes (Spec.drop_ins, 06's and 07's constructions)
VARIANTS += [
    Variant(EX, "module_drops_the_bias", "the Conv2d module calls conv2d without its bias: a layer built with "
            "bias=True (torch.nn's default) adds nothing, and its bias never learns",
            {"cudnn_conv.py": [("        return conv2d(x, self.weight, self.bias, self.stride,",
                                "        return conv2d(x, self.weight, None, self.stride,")]},
            # the drop-in check's outputs (forward) and gradients (backward): no gradient reaches the bias
            loses={"forward", "backward", "performance"},
            keeps={"descriptors", "cache", "threads", "streams", "input_checks"},
            reason="a drop-in for torch.nn.Conv2d", extra={"kind": "drop-in defaults"}),
]
