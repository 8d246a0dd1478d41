from tests.known_wrong import PROFILED, Variant, after_lib, takes_over

EX = "02_elu"

VARIANTS = [
    Variant(EX, "exp_minus_one", "alpha * (exp(x) - 1) instead of expm1: inaccurate near zero",
            {"elu.cu": [("alpha * expm1_of(x)", "alpha * (exp_of(x) - opmath(1))")]},
            loses={"forward", "performance"}, reason="expm1"),
    Variant(EX, "grad_missing_exp", "the backward uses alpha instead of alpha * exp(x) for x <= 0",
            {"elu.cu": [("grad_y * alpha * exp_of(x)", "grad_y * alpha")]},
            loses={"backward", "autograd"}, reason="elements wrong"),
    Variant(EX, "alpha_ignored", "the forward launcher passes 1.0 instead of alpha",
            {"elu.cu": [("x, y, n, static_cast<course::opmath_t<scalar_t>>(alpha));",
                         "x, y, n, static_cast<course::opmath_t<scalar_t>>(1.0));")]},
            # gradcheck with another alpha sees the forward disagree with the backward
            loses={"forward", "performance", "autograd"}, reason="alpha="),
]

FORWARD_CALL = "    return lib.ops.elu(x, float(alpha))\n"
FORWARD_VALUE = "return x > opmath(0) ? x : alpha * expm1_of(x);"

# The trust rework's classes (issue: grader trust), each written against the grader before it.
VARIANTS += [
    Variant(EX, "nan_becomes_zero", "computes ELU as max(x, 0) + (x < 0 ? alpha * expm1(x) : 0): right for every "
            "finite x and for +-inf, but NaN comes out as 0",
            {"elu.cu": [(FORWARD_VALUE, "return fmax(x, opmath(0)) + (x < opmath(0) ? alpha * expm1_of(x) : opmath(0));")]},
            loses={"forward", "performance"}, reason="NaN", extra={"kind": "coverage", "old": "full marks"}),
    Variant(EX, "backward_ignores_the_sign_of_alpha", "the backward uses |alpha|: right for every alpha >= 0",
            {"elu.cu": [("grad_y * alpha * exp_of(x)", "grad_y * fabs(alpha) * exp_of(x)")]},
            loses={"backward", "autograd"}, reason="alpha=-0.7", extra={"kind": "coverage", "old": "full marks"}),
    Variant(EX, "pytorch_for_float16", "calls torch.nn.functional.elu for float16 tensors (the exercise's kernel "
            "for the others)",
            {"elu.py": [takes_over(FORWARD_CALL, "x.dtype == torch.float16", "torch.nn.functional.elu(x, float(alpha))")]},
            loses={"forward", "performance"}, keeps={"backward", "input_checks"}, reason="other than this exercise's own",
            extra={"kind": "own kernel", "old": "full marks"}),
    Variant(EX, "swaps_a_code_object", "gives grader.verify.checks.assert_close the code of a function that accepts "
            "anything (the function object stays the same) and computes float32 with a 1% wrong alpha",
            {"elu.py": [after_lib("\nimport grader.verify.checks as _checks\n\n"
                                  "_checks.assert_close.__code__ = (lambda actual, expected, tol, what, chunk=1 << 26: None).__code__\n")],
             "elu.cu": [("x, y, n, static_cast<course::opmath_t<scalar_t>>(alpha));",
                         "x, y, n, static_cast<course::opmath_t<scalar_t>>(sizeof(scalar_t) == 4 ? alpha * 1.01 : alpha));")]},
            loses={"forward", "backward", "input_checks", "autograd", "performance"}, status="tampered",
            reason="grader.verify.checks.assert_close", extra={"kind": "integrity", "old": "full marks"}),
]

# One watch (grader.verify.observe.WATCH): an op cannot tell a value check from a kernel check.
VARIANTS += [
    Variant(EX, "pytorch_for_half_types_when_not_profiled", "calls torch.nn.functional.elu for float16 and bfloat16 "
            "tensors whenever no profiling query (the autograd profiler's flags, its type, stream capture) says a "
            "profiler is on; the exercise's kernel otherwise",
            {"elu.py": [takes_over(FORWARD_CALL, f"x.dtype in (torch.float16, torch.bfloat16) and not {PROFILED}",
                                   "torch.nn.functional.elu(x, float(alpha))")]},
            # the value checks' hidden windows see PyTorch's elementwise kernel (the generated properties in
            # every dtype); the visible own-kernel checks see the exercise's
            loses={"forward", "performance"}, keeps={"backward", "input_checks", "autograd"},
            reason="other than this exercise's own", extra={"kind": "one watch", "old": "full marks"}),
    Variant(EX, "wrong_while_profiled", "computes float32 with a 1% wrong alpha whenever a profiling query says a "
            "profiler is on: right in every check that profiles nothing",
            {"elu.py": [takes_over(FORWARD_CALL, f"x.dtype == torch.float32 and {PROFILED}",
                                   "lib.ops.elu(x, float(alpha) * 1.01)")]},
            # the visible own-kernel checks compare values
            loses={"forward", "performance"}, keeps={"backward", "input_checks", "autograd"},
            reason="relative error", extra={"kind": "one watch", "old": "full marks"}),
]

# Parameter values never graded (issue 47): each an edge of a declared domain (grader.verify.spec.Edge), which the
# generated checks reach in every dtype whatever the seed.
VARIANTS += [
    Variant(EX, "derivative_at_zero_is_one", "the backward takes x >= 0 as the positive side: at x exactly 0 the "
            "derivative is 1, not alpha (the same only for alpha = 1, the hand-written check's)",
            {"elu.cu": [("return x > opmath(0) ? grad_y : grad_y * alpha * exp_of(x);",
                         "return x >= opmath(0) ? grad_y : grad_y * alpha * exp_of(x);")]},
            # the backward op and the gradients through elu at x's edge "exact zeros", alpha 0.5
            loses={"backward", "autograd"}, reason="exact zeros", extra={"kind": "coverage", "old": "full marks"}),
]

# Drop-in defaults (issue 47): the op called as PyTorch's is, with its scalar left out
VARIANTS += [
    Variant(EX, "default_alpha_not_pytorchs", "the signature's default alpha differs from F.elu's: "
            "a caller who leaves it out gets another function",
            {"elu.py": [("alpha: float = 1.0, inplace: bool = False) -> torch.Tensor:",
                         "alpha: float = 0.5, inplace: bool = False) -> torch.Tensor:")]},
            loses={"forward", "performance"}, keeps={"backward", "input_checks"}, reason="PyTorch's defaults",
            extra={"kind": "drop-in defaults", "old": "full marks"}),
    Variant(EX, "inplace_backward_reads_the_result", "ELU(inplace=True) keeps no copy of x: its backward reads the "
            "result that overwrote x, and below zero gives grad * alpha * exp(y), not grad * alpha * exp(x)",
            {"elu.py": [("        kept = x.clone() if ctx.needs_input_grad[0] else None\n", ""),
                        ("        ctx.save_for_backward(kept)\n", "        ctx.save_for_backward(x)\n")]},
            # the drop-in check's gradients (autograd) through ELU(0.5, True) and ELU(alpha=2.5, inplace=True)
            loses={"autograd"}, keeps={"forward", "backward", "input_checks", "performance"},
            reason="the gradient of the input", extra={"kind": "drop-in defaults"}),
]
