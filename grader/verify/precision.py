"""Precision probes: operands that tell a tensor-core precision apart from its look-alikes, for every
tensor-core group (05's TF32, BF16 and wgmma; 06's, 08's and 09's TF32, forward and backward).

On ordinary random data TF32 (8 exponent bits, 10 mantissa bits, rounded to nearest), FP16 (5 and 10)
and TF32 truncated (the tensor cores' own conversion of an unrounded float32 word: its low 13 bits
dropped) all land within a TF32 bound; BF16 operands through FP16 `mma` likewise where the values are
near 1. A probe is the operands' distribution that separates them, and the bound it must meet is the
group's own (each spec's per-element or normwise bound, unchanged: the probes only choose the inputs):

- range (values near 1e5 and 1e-6): FP16 overflows past 65504 and keeps 4 or 5 significant bits below
  its smallest normal, 6.1e-5, so an FP16 operand is infinite, or off by up to 1/16, where TF32 and BF16
  (float32's 8 exponent bits) are off by at most 2^-11 (2^-8 for BF16's inputs, which are exact). The
  bounds are relative (they scale with the operands), so they hold as they are.
- positive (operands in [0.5, 1.5)): every product has the same sign, so a biased error adds up instead
  of cancelling. Truncating a TF32 operand (unit roundoff u = 2^-11: 10 mantissa bits) moves it by
  -2u f / m (f uniform in [0, 1), m its mantissa in [1, 2)): a mean of about -0.8 u over [0.5, 1.5), so
  each product and the whole sum C = sum_k a_k b_k are low by about 0.8 u |C| ~ 0.8 u K E[ab] per
  truncated operand. The TF32 bound allows 5 u sqrt(sum_k (a_k b_k)^2) ~ 5 u sqrt(K) rms(ab) (rounded to
  nearest, the errors have random signs and cancel as sqrt(K)), and over [0.5, 1.5) E[ab] = 1, rms(ab) =
  13/12: truncation exceeds the bound once sqrt(K) > 6.8 (K > 46), by a factor sqrt(K) / 6.8.
  POSITIVE_MIN_K = 512 gives 3.3x for a single truncated operand (tests/test_precision_probes.py
  emulates it). For BF16 (inputs exact) the same probe catches a truncated
  result (2^-7 relative, twice the rounding's 2^-8) and bfloat16 sums (K u_bf16 |C|).
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

TF32_U = 2.0**-11
# K at or above which a truncated TF32 operand's bias (0.8 u K E[ab]) passes 5 u sqrt(K) rms(ab) 3.3-fold
POSITIVE_MIN_K = 512


@dataclass(frozen=True)
class Probe:
    """Operands drawn to tell two precisions apart: `kind` "range" (standard normal times `scale`) or
    "positive" (uniform in [0.5, 1.5)); `label` goes in check names, `tells` in failures."""

    kind: str
    label: str
    tells: str
    scale: float = 1.0

    def draw(self, g: torch.Generator, shape, dtype=torch.float32, device="cuda") -> torch.Tensor:
        """One operand of `shape`, from `g` (drawn in float32, then converted: bfloat16 takes it rounded)."""
        if self.kind == "range":
            t = torch.randn(shape, generator=g, device=device) * self.scale
        else:
            t = torch.rand(shape, generator=g, device=device) + 0.5
        return t.to(dtype)

    def scaled(self, t: torch.Tensor) -> torch.Tensor:
        """An operand drawn elsewhere, made this probe's: times `scale` (range), or |t| mapped into
        [0.5, 1.5) (positive: t's own values fold to the same distribution's support)."""
        if self.kind == "range":
            return t * self.scale
        return torch.remainder(t.abs(), 1.0) + 0.5


RANGE_SCALES = (1e5, 1e-6)
RANGE_PROBES = (
    Probe("range", f"values near {1e5:g}", "which float16 cannot hold (past its largest, 65504; TF32 and BF16 can)",
          1e5),
    Probe("range", f"values near {1e-6:g}", "which float16 cannot hold (below its smallest normal, 6.1e-5, 4 or 5 "
          "bits left; TF32 and BF16 can)", 1e-6),
)
POSITIVE = Probe("positive", "positive operands", "operands in [0.5, 1.5): rounded to nearest, their errors cancel; "
                 "truncated, they add up")
PROBES = RANGE_PROBES + (POSITIVE,)


def check_name(group: str, probe: Probe, path: str | None = None) -> str:
    """`group[probe's label]` on a group's first path, `group[probe's label: path]` on the others (e.g.
    "tensor_cores_tf32[values near 100000: split K, 48x130x4099]"): the one naming of probe checks."""
    return f"{group}[{probe.label}]" if path is None else f"{group}[{probe.label}: {path}]"


def what(group: str, probe: Probe, path: str) -> str:
    """A failure's context: the group, the probe, the planner path it ran and what it tells apart."""
    return f"{group}[{probe.label}, {path}: {probe.tells}]"
