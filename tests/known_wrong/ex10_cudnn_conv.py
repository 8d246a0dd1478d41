from tests.known_wrong import Variant, memo_by_pointer, takes_over

EX = "10_cudnn_conv"

VARIANTS = [
    Variant(EX, "key_without_stride", "make_key leaves the stride out, so stride 1 and stride 2 share a plan",
            {"cudnn_conv.cu": [("  key.stride = a.stride;\n", "")]},
            loses={"forward", "backward", "cache"}, reason="cache key is missing a field"),
    # The seed's crash: cuDNN is handed a null workspace with a non-zero size.
    Variant(EX, "null_workspace", "execute passes nullptr as the workspace but keeps its size",
            {"cudnn_conv.cu": [("ws.get(), plan.workspace_bytes", "nullptr, plan.workspace_bytes")]},
            # on the H100 (cuDNN 9.19) cuDNN rejects it cleanly: every group that runs a plan needing a
            # workspace fails. The cache and thread checks' small shapes need one only if the benchmark
            # picks such an algorithm (each lost on one H100 run and kept on another): not claimed.
            loses={"forward", "backward"}, keeps={"descriptors", "streams", "input_checks"},
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
            {"cudnn_conv.py": [("    return _conv2d(x, weight, stride, padding, dilation, _mode(mode))\n",
                                "    return torch.nn.functional.conv2d(x, weight, None, stride, padding, dilation)\n")]},
            # streams requires the check that no PyTorch convolution ran
            loses={"forward", "cache", "threads", "input_checks", "streams"}, reason="PyTorch's convolution ran"),
    Variant(EX, "lru_never_evicts", "insert never evicts, so the cache grows without bound",
            {"cudnn_conv.cu": [("    kept = lru_.front().second;\n    evict_over_capacity();\n",
                                "    kept = lru_.front().second;\n")]},
            loses={"cache"}, reason="capacity 3"),
]

CALL = "    return _conv2d(x, weight, stride, padding, dilation, _mode(mode))\n"

# The trust rework's classes (issue: grader trust), each written against the grader before it.
VARIANTS += [
    Variant(EX, "pytorch_for_large_batches", "calls torch.nn.functional.conv2d for batches of 32 or more: the "
            "benchmark's, larger than any checked one",
            {"cudnn_conv.py": [takes_over(CALL, "x.shape[0] >= 32",
                                          "torch.nn.functional.conv2d(x, weight, None, stride, padding, dilation)")]},
            loses={"forward", "performance"}, reason="PyTorch's",
            extra={"timed": True, "kind": "tells timed from checked", "old": "full marks"}),
    Variant(EX, "memo_by_pointer", "for batches of 32 or more, keeps each result by its inputs' addresses and "
            "returns a copy of it when called on the same tensors again",
            {"cudnn_conv.py": memo_by_pointer(CALL, "x.shape[0] >= 32",
                                              "(x.data_ptr(), weight.data_ptr(), tuple(x.shape), tuple(weight.shape))",
                                              "_conv2d(x, weight, stride, padding, dilation, _mode(mode))")},
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
