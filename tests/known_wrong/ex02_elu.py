from tests.known_wrong import Variant

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
