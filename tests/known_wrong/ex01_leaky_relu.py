from tests.known_wrong import IN_TIMING, Variant, after_lib, takes_over

EX = "01_leaky_relu"
# a stream of the wrapper's own, made to wait for the caller's current stream (never the other way)
UNJOINED = """

_own = []


def _on_own_stream(op):
    if not _own:
        _own.append(torch.cuda.Stream())
    _own[0].wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(_own[0]):
        return op()
"""
FORWARD_VEC = "for (int k = 0; k < V; ++k) v.v[k] = leaky_relu_value<opmath>(v.v[k], negative_slope);"
FORWARD_TAIL = "y[i] = leaky_relu_value<opmath>(x[i], negative_slope);"

VARIANTS = [
    Variant(EX, "empty_kernel", "the forward kernel body does nothing",
            {"leaky_relu.cu": [(FORWARD_VEC, ""), (FORWARD_TAIL, "")]},
            # gradcheck differentiates the forward numerically, so autograd fails too
            loses={"forward", "performance", "autograd"}, reason="got nan"),
    Variant(EX, "off_by_one", "the scalar tail loop stops one element early",
            {"leaky_relu.cu": [("for (int64_t i = n_vec * V + first; i < n; i += stride) {\n    y[i]",
                                "for (int64_t i = n_vec * V + first; i < n - 1; i += stride) {\n    y[i]")]},
            loses={"forward", "performance"}, reason="got nan"),
    Variant(EX, "slope_ignored", "the forward launcher passes a hard-coded 0.01 instead of negative_slope",
            {"leaky_relu.cu": [("x, y, n, static_cast<course::opmath_t<scalar_t>>(negative_slope));",
                                "x, y, n, static_cast<course::opmath_t<scalar_t>>(0.01));")]},
            # gradcheck with another slope sees the forward disagree with the backward
            loses={"forward", "performance", "autograd"}, reason="negative_slope="),
    Variant(EX, "fp16_arithmetic", "the forward computes in float16 whatever the input dtype",
            {"leaky_relu.cu": [(FORWARD_VEC, "for (int k = 0; k < V; ++k) v.v[k] = static_cast<scalar_t>(static_cast<float>("
                                             "leaky_relu_value<c10::Half>(c10::Half(static_cast<float>(v.v[k])), c10::Half(static_cast<float>(negative_slope)))));"),
                               (FORWARD_TAIL, "y[i] = static_cast<scalar_t>(static_cast<float>("
                                              "leaky_relu_value<c10::Half>(c10::Half(static_cast<float>(x[i])), c10::Half(static_cast<float>(negative_slope)))));")]},
            # gradcheck in float64 goes through the same kernel, so autograd goes too
            loses={"forward", "performance", "autograd"}, reason="float32"),
    Variant(EX, "pytorch_fallback", "the Python wrapper calls torch.nn.functional.leaky_relu",
            {"leaky_relu.py": [("return lib.ops.leaky_relu(x, float(negative_slope))",
                                "return torch.nn.functional.leaky_relu(x, float(negative_slope))")]},
            # PyTorch's op also accepts a CPU tensor, which the exercise must refuse
            loses={"forward", "performance", "autograd", "input_checks"}, reason="other than this exercise's own"),
    Variant(EX, "no_input_checks", "check_input accepts anything",
            {"leaky_relu.cpp": [("  course::check_cuda(t, name);\n  course::check_dtype(t, {at::kHalf, at::kBFloat16, at::kFloat, at::kDouble}, name);\n", "")]},
            # graded with its timing: the wrong-device calls come before the timing's turn, and where one
            # faults (a host pointer in a kernel) the timing goes on in a fresh process, keeping its points
            loses={"input_checks"}, reason="a CPU tensor", extra={"timed": True}),
    Variant(EX, "compile_error", "an undeclared name in the kernel file",
            {"leaky_relu.cu": [("if (n == 0) return;\n  leaky_relu_kernel", "if (n == 0) return;\n  blocks_total += 1;\n  leaky_relu_kernel")]},
            loses={"forward", "backward", "input_checks", "autograd", "performance"}, status="build failed",
            reason="error"),
    Variant(EX, "segfault", "the launcher writes through an invalid host pointer",
            {"leaky_relu.cu": [("if (n == 0) return;\n  leaky_relu_kernel", "if (n == 0) return;\n  *reinterpret_cast<volatile int*>(static_cast<uintptr_t>(n > 0) * 8) = 1;\n  leaky_relu_kernel")]},
            loses={"forward", "backward", "input_checks", "autograd", "performance"}, reason="SIGSEGV"),
    # Crashes on the host, before any GPU work, so containment is shown on a CPU machine too.
    Variant(EX, "segfault_in_checks", "check_input writes through an invalid pointer",
            {"leaky_relu.cpp": [("  course::check_cuda(t, name);\n", "  *reinterpret_cast<volatile int*>(static_cast<uintptr_t>(t.dim() >= 0) * 8) = 1;\n  course::check_cuda(t, name);\n")]},
            loses={"forward", "backward", "input_checks", "autograd", "performance"}, reason="SIGSEGV",
            extra={"cpu": True}),
    Variant(EX, "hang_in_checks", "check_input never returns",
            {"leaky_relu.cpp": [("  course::check_cuda(t, name);\n", "  for (volatile bool spin = true; spin;) {}\n  course::check_cuda(t, name);\n")]},
            # stopped by the process's time limit or, sooner, by its stall limit: both say this
            loses={"forward", "backward", "input_checks", "autograd", "performance"}, reason="an endless loop",
            extra={"cpu": True}),
    # The cheats that have beaten kernel graders, each caught by name.
    Variant(EX, "default_stream", "the forward kernel is launched on the legacy default stream",
            {"leaky_relu.cu": [("leaky_relu_kernel<scalar_t><<<blocks_for<scalar_t>(n), kThreads, 0, stream>>>(",
                                "leaky_relu_kernel<scalar_t><<<blocks_for<scalar_t>(n), kThreads>>>(")]},
            loses={"forward", "performance"}, keeps={"backward", "input_checks"}, reason="torch.cuda.stream"),
    Variant(EX, "side_stream", "the forward runs on a stream of its own, outside the timed one",
            {"leaky_relu.cpp": [("negative_slope, c10::cuda::getCurrentCUDAStream());\n  });\n  return y;",
                                 "negative_slope, c10::cuda::getStreamFromPool());\n  });\n  return y;")]},
            # no reason asserted: the kernel races with the producer of x, so which check fails first varies;
            # the finite differences' inputs arrive late on the caller's stream, so autograd fails every run
            loses={"forward", "performance", "autograd"}, keeps={"backward", "input_checks"}),
    Variant(EX, "side_stream_never_joined", "the forward runs on a stream of its own that waits for the caller's "
            "stream, which never waits for it back: right only for a caller that synchronizes before reading",
            {"leaky_relu.py": [after_lib(UNJOINED),
                               ("    return lib.ops.leaky_relu(x, float(negative_slope))\n",
                                "    return _on_own_stream(lambda: lib.ops.leaky_relu(x, float(negative_slope)))\n")]},
            # the stream property's mark, queued on the current stream, starts before the op's kernel ends
            # (and the timing finds the device busy after its end event); a value check can meet the race
            # first and read the output before the kernel wrote it (the drop-in module's, in one run of two on
            # the H200; the in-place call's "elements wrong", H200, 2026-12-02): either is the fault
            loses={"forward", "performance"}, keeps={"backward", "input_checks"},
            reason=("the current stream's next work started", "relative error", "elements wrong"),
            extra={"kind": "own stream", "old": "loses performance"}),
    Variant(EX, "backward_never_joined", "autograd's backward runs the backward op on a stream of its own that "
            "waits for the caller's stream, which never waits for it back: x.grad is right only for a caller that "
            "synchronizes before reading it",
            {"leaky_relu.py": [after_lib(UNJOINED),
                               ("    return leaky_relu_backward(grad_output, x, ctx.negative_slope), None\n",
                                "    return _on_own_stream(lambda: leaky_relu_backward(grad_output, x, "
                                "ctx.negative_slope)), None\n")]},
            # the ops called directly (the forward and backward groups, the timing) are the solution's; the
            # gradients on a side stream queue a mark after the backward, which starts before its kernel ends,
            # and read the gradients there. gradcheck, earlier in the group, meets the race first in some runs
            # (two of three on the H200): its reentrance test, the backward twice, two answers
            loses={"autograd"}, keeps={"forward", "backward", "input_checks", "performance"},
            reason=("the current stream's next work started", "Backward is not reentrant"), extra={"kind": "own stream"}),
    Variant(EX, "keeps_every_output", "the Python wrapper appends every result to a module-level list: right "
            "values, and memory that grows with every call",
            {"leaky_relu.py": [after_lib("\n_kept = []\n"),
                               ("    return lib.ops.leaky_relu(x, float(negative_slope))\n",
                                "    _kept.append(lib.ops.leaky_relu(x, float(negative_slope)))\n    return _kept[-1]\n")]},
            # every value is right and no output is reused; the calls at the benchmark's shape before the
            # timing (grader.verify.speed.grown_per_calls) leave their outputs allocated, 512 MiB each
            loses={"forward", "performance"}, keeps={"backward", "input_checks", "autograd"},
            reason="keeps memory with every call", extra={"timed": True, "kind": "state", "old": "full marks"}),
    Variant(EX, "replays_output", "the Python wrapper keeps its first output per shape and returns it again",
            {"leaky_relu.py": [("    return lib.ops.leaky_relu(x, float(negative_slope))\n",
                                "    key = (tuple(x.shape), x.dtype, float(negative_slope))\n"
                                "    if key not in _replay:\n"
                                "        _replay[key] = lib.ops.leaky_relu(x, float(negative_slope))\n"
                                "    return _replay[key]\n\n\n_replay = {}\n")]},
            # caught first where one shape is called twice: the output-poisoning check. The judge's
            # wrong-device call repeats the shape of its valid one: the replayed GPU output answers a
            # CPU tensor, so the input checks go too
            loses={"forward", "performance", "input_checks"}, keeps={"backward"}, reason="output poisoned"),
    Variant(EX, "overwrites_input", "the forward writes its result into x and returns x",
            {"leaky_relu.cpp": [("  at::Tensor y = at::empty(xc.sizes(), xc.options());\n  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, xc.scalar_type(), \"leaky_relu\"",
                                 "  at::Tensor y = xc;\n  AT_DISPATCH_FLOATING_TYPES_AND2(at::kHalf, at::kBFloat16, xc.scalar_type(), \"leaky_relu\"")]},
            loses={"forward", "performance"}, keeps={"backward", "input_checks"}, reason="modified"),
    # Right answers, but one thread writes y[n], past the end of the output (only where the caching
    # allocator's padding absorbs it, so normal grading cannot see it): only SANITIZE=1 catches it.
    Variant(EX, "write_past_the_end", "the forward kernel also writes y[n]",
            {"leaky_relu.cu": [(FORWARD_TAIL + "\n  }\n",
                                FORWARD_TAIL + "\n  }\n  if (first == 0 && n % 128 != 0) y[n] = scalar_t(0);\n")]},
            # the stray write may land in a neighbouring allocation of gradcheck's: autograd is not judged
            loses=set(), keeps={"forward", "backward", "input_checks"}, extra={"sanitize": True}),
    # Tampering: the module disables the grader's comparison and PyTorch's, and does no work.
    Variant(EX, "patches_the_grader", "the Python module replaces grader.verify.checks.assert_close and torch.allclose",
            {"leaky_relu.py": [("lib = load_library(__file__)\n",
                                "lib = load_library(__file__)\n\nimport grader.verify.checks\n\n"
                                "grader.verify.checks.assert_close = lambda *args, **kwargs: None\n"
                                "torch.allclose = lambda *args, **kwargs: True\n")],
             "leaky_relu.cu": [(FORWARD_VEC, "(void)0;"), (FORWARD_TAIL, "(void)0;")]},
            loses={"forward", "backward", "input_checks", "autograd", "performance"}, status="tampered",
            reason="grader.verify.checks.assert_close", extra={"cpu": True}),
    # Forgery the integrity snapshot cannot see: nothing is replaced, but the module finds pytest's
    # config through the garbage collector and registers a plugin that, as the run ends, rewrites the
    # results file to say every test passed. The judge re-checks the forward's output outside this
    # process and fails it. The backward is right, so backward and autograd stand (the judge's
    # gradients come from the backward), and so do the input checks (the judge's wrong-device calls
    # get the solution's own errors).
    Variant(EX, "forges_results", "the forward does no work; a plugin marks every test passed as the run ends",
            {"leaky_relu.py": [("lib = load_library(__file__)\n",
                                "lib = load_library(__file__)\n\nimport gc, json\n\n\n"
                                "class _Forger:\n"
                                "    def pytest_unconfigure(self, config):\n"
                                "        path = config.getoption('--results')\n"
                                "        data = json.load(open(path))\n"
                                "        for t in data['tests']:\n"
                                "            t['outcome'], t['reason'] = 'passed', ''\n"
                                "        open(path, 'w').write(json.dumps(data))\n\n\n"
                                "for _o in gc.get_objects():\n"
                                "    if type(_o).__name__ == 'Config' and hasattr(_o, 'pluginmanager'):\n"
                                "        _o.pluginmanager.register(_Forger(), 'forger')\n"
                                "        break\n")],
             "leaky_relu.cu": [(FORWARD_VEC, "(void)0;"), (FORWARD_TAIL, "(void)0;")]},
            # registering a plugin changes pytest's state the integrity snapshot holds: the whole run is void
            loses={"forward", "backward", "input_checks", "autograd", "performance"}, status="tampered",
            reason="pytest plugins"),
]

FORWARD_CALL = "    return lib.ops.leaky_relu(x, float(negative_slope))\n"
BACKWARD_VEC = "for (int k = 0; k < V; ++k) g.v[k] = leaky_relu_grad<opmath>(g.v[k], v.v[k], negative_slope);"
FORWARD_SLOPE = "x, y, n, static_cast<course::opmath_t<scalar_t>>(negative_slope));"
WRONG_IN_FP32 = ("for (int k = 0; k < V; ++k) v.v[k] = leaky_relu_value<opmath>(v.v[k], sizeof(scalar_t) == 4 ? "
                 "negative_slope * opmath(1.01) : negative_slope);")

# The trust rework's classes (issue: grader trust), each written against the grader before it.
VARIANTS += [
    Variant(EX, "pytorch_when_timed", "calls torch.nn.functional.leaky_relu when its call stack shows the timer",
            {"leaky_relu.py": [takes_over(FORWARD_CALL, IN_TIMING,
                                          "torch.nn.functional.leaky_relu(x, float(negative_slope))")]},
            loses={"forward", "performance"}, reason="other than this exercise's own",
            extra={"timed": True, "kind": "tells timed from checked", "old": "full marks"}),
    Variant(EX, "slope_fixed_when_large", "the launcher passes 0.01 for tensors of 2^27 elements or more (the "
            "benchmark's size and slope), whatever negative_slope is",
            {"leaky_relu.cu": [(FORWARD_SLOPE, "x, y, n, static_cast<course::opmath_t<scalar_t>>(n >= (int64_t(1) << 27) "
                                               "&& n < (int64_t(1) << 30) ? 0.01 : negative_slope));")]},
            loses={"forward", "performance"}, reason="negative_slope=",
            extra={"timed": True, "kind": "tells timed from checked", "old": "full marks"}),
    Variant(EX, "wrong_past_the_checked_prefix", "for tensors of 2^27 elements or more, every element past "
            "the first 2^22 uses half the slope",
            {"leaky_relu.cu": [(FORWARD_VEC, "for (int k = 0; k < V; ++k) v.v[k] = leaky_relu_value<opmath>(v.v[k], "
                                             "n >= (int64_t(1) << 27) && n < (int64_t(1) << 30) && i * V >= (int64_t(1) << 22) "
                                             "? negative_slope * opmath(0.5) : negative_slope);")]},
            loses={"forward", "performance"}, reason="timed",
            extra={"timed": True, "kind": "timed work unverified", "old": "full marks"}),
    Variant(EX, "backward_wrong_past_the_checked_prefix", "the backward, for tensors of 2^27 elements or more, "
            "uses half the slope past the first 2^22 (the timed call's second output)",
            {"leaky_relu.cu": [(BACKWARD_VEC, "for (int k = 0; k < V; ++k) g.v[k] = leaky_relu_grad<opmath>(g.v[k], v.v[k], "
                                              "n >= (int64_t(1) << 27) && n < (int64_t(1) << 30) && i * V >= (int64_t(1) << 22) "
                                              "? negative_slope * opmath(0.5) : negative_slope);")]},
            loses={"backward", "performance"}, reason="timed",
            extra={"timed": True, "kind": "timed work unverified", "old": "full marks"}),
    Variant(EX, "backward_does_its_work_twice", "the backward's scalar tail loop starts at n_vec / V instead of "
            "n_vec * V: it redoes almost every element the vector loop did (right values, twice the traffic)",
            {"leaky_relu.cu": [("for (int64_t i = n_vec * V + first; i < n; i += stride) {\n    grad_x[i]",
                                "for (int64_t i = n_vec / V + first; i < n; i += stride) {\n    grad_x[i]")]},
            loses=set(), partial={"performance"}, keeps={"forward", "backward", "input_checks", "autograd"},
            reason="of the reference earns",
            extra={"timed": True, "kind": "an untimed kernel", "old": "full marks"}),
    Variant(EX, "returns_a_subclass", "returns its (right) output as a torch.Tensor subclass",
            {"leaky_relu.py": [after_lib("\n\nclass _Deferred(torch.Tensor):\n    pass\n"),
                               (FORWARD_CALL, "    return lib.ops.leaky_relu(x, float(negative_slope)).as_subclass(_Deferred)\n")]},
            loses={"forward", "performance"}, keeps={"backward", "input_checks"}, reason="plain torch.Tensor",
            extra={"kind": "timed work unverified", "old": "full marks"}),
    Variant(EX, "one_output_buffer_per_shape", "computes into one buffer per shape and dtype and returns it every "
            "time, so a second call overwrites the first call's result",
            {"leaky_relu.py": [after_lib("\n_buffers = {}\n"),
                               (FORWARD_CALL, "    y = lib.ops.leaky_relu(x, float(negative_slope))\n"
                                              "    if y.requires_grad:\n        return y\n"
                                              "    key = (tuple(x.shape), x.dtype, x.device)\n"
                                              "    return _buffers.setdefault(key, torch.empty_like(y)).copy_(y)\n")]},
            # the forward's finite differences read two results of one shape: the second overwrote the first
            loses={"forward", "performance", "autograd"}, keeps={"backward", "input_checks"}, reason="shares memory",
            extra={"kind": "aliasing", "old": "keeps forward"}),
    Variant(EX, "edits_the_tolerance_table", "widens the grader's float32 tolerance (a dict edited in place, no "
            "function replaced) and computes float32 with a 1% wrong slope",
            {"leaky_relu.py": [after_lib("\nimport grader.verify.checks as _checks\n\n"
                                         "_checks.ELEMENTWISE_TOL[torch.float32] = _checks.Tolerance(1.0, 1.0)\n")],
             "leaky_relu.cu": [(FORWARD_VEC, WRONG_IN_FP32)]},
            loses={"forward", "backward", "input_checks", "autograd", "performance"}, status="tampered",
            reason="ELEMENTWISE_TOL", extra={"kind": "integrity", "old": "full marks"}),
    Variant(EX, "overrides_an_aten_kernel", "registers its own CUDA kernel for aten::le (every tolerance "
            "comparison's), which says every element is close; float32 computed with a 1% wrong slope",
            {"leaky_relu.py": [after_lib("\n_aten = torch.library.Library('aten', 'IMPL')\n"
                                         "_aten.impl('le.Tensor', lambda a, b: torch.ones(torch.broadcast_shapes(a.shape, "
                                         "b.shape), dtype=torch.bool, device=a.device), 'CUDA')\n")],
             "leaky_relu.cu": [(FORWARD_VEC, WRONG_IN_FP32)]},
            loses={"forward", "backward", "input_checks", "autograd", "performance"}, status="tampered",
            reason="dispatcher aten::le", extra={"kind": "integrity", "old": "full marks"}),
]

# Drop-in defaults (issue 47): the op called as PyTorch's is, with its scalar left out
VARIANTS += [
    Variant(EX, "default_negative_slope_not_pytorchs", "the signature's default negative_slope differs from F.leaky_relu's: "
            "a caller who leaves it out gets another function",
            {"leaky_relu.py": [("negative_slope: float = 0.01, inplace: bool = False) -> torch.Tensor:",
                                "negative_slope: float = 0.02, inplace: bool = False) -> torch.Tensor:")]},
            loses={"forward", "performance"}, keeps={"backward", "input_checks"}, reason="PyTorch's defaults",
            extra={"kind": "drop-in defaults", "old": "full marks"}),
    Variant(EX, "inplace_ignored", "LeakyReLU(inplace=True) computes out of place: a model that relies on its input "
            "being overwritten (or returned) sees the old values",
            {"leaky_relu.py": [("        return leaky_relu(x, self.negative_slope, self.inplace)\n",
                                "        return leaky_relu(x, self.negative_slope)\n")]},
            # the drop-in check's outputs (forward): its input after the call is not torch.nn's; the
            # gradients are right
            loses={"forward", "performance"}, keeps={"backward", "input_checks", "autograd"},
            reason="its input after the call", extra={"kind": "drop-in defaults"}),
    Variant(EX, "inplace_default_not_pytorchs", "leaky_relu_'s default negative_slope differs from F.leaky_relu_'s "
            "(the out-of-place function's and the module's are right): a caller who leaves it out gets another "
            "function",
            {"leaky_relu.py": [("def leaky_relu_(x: torch.Tensor, negative_slope: float = 0.01)",
                                "def leaky_relu_(x: torch.Tensor, negative_slope: float = 0.02)")]},
            # the make mutants survivor 01:leaky_relu.py:76:constant:f49db341 (H200, 2026-12-02)
            loses={"forward", "performance"}, reason="left out (PyTorch's default)",
            extra={"kind": "drop-in defaults", "old": "full marks"}),
    Variant(EX, "inplace_backward_past_its_domain", "the in-place LeakyReLU's backward reads its result at any "
            "slope: with a negative one, where x < 0 the result is positive and the gradient comes out 1",
            {"leaky_relu.py": [("        torch._check(ctx.negative_slope >= 0, ",
                                "        torch._check(True, ")]},
            # torch.nn's refuses that backward; the drop-in check's gradients (autograd) want a refusal or the
            # out-of-place module's gradients (the make mutants survivor 01:leaky_relu.py:70:remove-check:b807886c)
            loses={"autograd"}, reason="whose backward torch.nn's refuses",
            extra={"kind": "drop-in defaults", "old": "full marks"}),
]

# The gradient flowing back laid out as a caller's graph hands it (issue 47: every tensor argument non-contiguous,
# the backward's incoming gradient too)
VARIANTS += [
    Variant(EX, "backward_reads_grad_output_packed", "the backward op hands grad_output's storage to its kernel as "
            "it is (no .contiguous()): right for a dense gradient only",
            {"leaky_relu.cpp": [("  const at::Tensor gc = grad_output.contiguous();",
                                 "  const at::Tensor gc = grad_output;")]},
            # the backward op's own non-contiguous calls, and autograd's gradient flowing back strided and expanded
            loses={"backward", "autograd", "performance"}, keeps={"forward", "input_checks"},
            extra={"kind": "coverage", "old": "loses backward"}),
]
