"""Correctness helpers shared by every exercise's spec: poisoning, comparison, input snapshots.

A failed check raises CheckFailure with a message written for the student: what was wrong, the
first mismatching indices with their values, and how to replay the case.
"""
from __future__ import annotations

import contextlib
import os
import re
from dataclasses import dataclass

import pytest
import torch

from grader.verify.observe import KernelRule, kernel_function, observe  # noqa: F401 (kernel_function: re-exported)
from grader.verify.scoring import NOT_RUN_HERE


class CheckFailure(AssertionError):
    """A graded check failed; the message is the reason the student sees."""


def ends_and_between(n: int, last: int, first: int, between: int, seed: int) -> torch.Tensor:
    """Indices into n items for a huge check's sample, on the GPU: the last `last` (past 2^31 elements,
    where a 32-bit offset wraps), the first `first`, then `between` drawn between them from `seed`."""
    drawn = torch.randint(first, n - last, (between,), generator=torch.Generator().manual_seed(seed))
    return torch.cat([torch.arange(n - last, n), torch.arange(first), drawn]).to("cuda")


# What the grader itself may hold through PyTorch at a check's start (its tensors between checks are
# small); only holdings past it are counted as the module's.
GRADER_HELD = 1 << 30


def require_free_memory(nbytes: int, what: str) -> None:
    """Skip the calling check, as not run here, unless the GPU has `nbytes` free, counting what this process
    holds through PyTorch past GRADER_HELD: at a check's start that is the exercise module's own tensors,
    and a module that kept GPU memory would otherwise turn the largest checks off (not run here costs
    nothing); so counted, the check runs, and fails if the module's own holdings leave it too little."""
    torch.cuda.empty_cache()  # this process's cached, unused blocks are free memory too
    free, total = torch.cuda.mem_get_info()
    held = torch.cuda.memory_reserved()
    if free + max(0, held - GRADER_HELD) < nbytes:
        pytest.skip(f"{NOT_RUN_HERE}{what} needs {nbytes / 2**30:.1f} GiB of free GPU memory; this GPU has "
                    f"{free / 2**30:.1f} of {total / 2**30:.1f} GiB free (this grading process holds "
                    f"{held / 2**30:.1f} GiB)")


def code_capability() -> tuple[int, int]:
    """The compute capability the extensions' code for this GPU was compiled for: the GPU's own, or,
    under TORCH_CUDA_ARCH_LIST, the highest listed architecture at or below it (a "7.5+PTX" build on
    an H100 runs compute_75 code, JIT-compiled: no instruction newer than a T4's)."""
    have = torch.cuda.get_device_capability()
    listed = [(int(m[1]), int(m[2])) for m in re.finditer(r"(\d+)\.(\d+)", os.environ.get("TORCH_CUDA_ARCH_LIST", ""))]
    below = [arch for arch in listed if arch <= have]
    return max(below) if below else have


# Compute capabilities whose instructions exist only in code built for that very GPU: "9.0a" has
# Hopper's wgmma and TMA (05's kernel 6), which neither a "9.0" build nor a newer GPU runs.
ARCH_SPECIFIC = {(9, 0): "9.0a"}


def built_arch_specific(arch: str) -> bool:
    """Whether TORCH_CUDA_ARCH_LIST lists `arch` ("9.0a", or "9.0a+PTX")."""
    listed = re.split(r"[;\s]+", os.environ.get("TORCH_CUDA_ARCH_LIST", ""))
    return any(entry.split("+")[0] == arch for entry in listed)


def runs_arch_specific(capability: tuple[int, int]) -> bool:
    """Whether an ARCH_SPECIFIC capability's code runs here: on that very GPU, from a build that has it."""
    return torch.cuda.get_device_capability() == capability and built_arch_specific(ARCH_SPECIFIC[capability])


def require_capability(major: int, minor: int, what: str) -> None:
    """Skip the calling check, as not run here, where the code running on this GPU is below compute
    capability major.minor (a T4, or a build for an older GPU: tensor-core instructions it lacks), or,
    for an ARCH_SPECIFIC capability, where the GPU is another or the build lacks its instructions;
    costs its group nothing (grader.verify.scoring)."""
    have, gpu = code_capability(), torch.cuda.get_device_capability()
    specific = ARCH_SPECIFIC.get((major, minor))
    if specific is not None:
        if not runs_arch_specific((major, minor)):
            built = "" if built_arch_specific(specific) else f", and this build has no {specific} code (TORCH_CUDA_ARCH_LIST)"
            pytest.skip(f"{NOT_RUN_HERE}{what} needs a compute capability {major}.{minor} GPU ({specific}'s own "
                        f"instructions); this GPU ({torch.cuda.get_device_name()}) is {gpu[0]}.{gpu[1]}{built}")
        return
    if have < (major, minor):
        built = "" if have == gpu else f", built for {have[0]}.{have[1]} (TORCH_CUDA_ARCH_LIST)"
        pytest.skip(f"{NOT_RUN_HERE}{what} needs compute capability {major}.{minor}; this GPU "
                    f"({torch.cuda.get_device_name()}) is {gpu[0]}.{gpu[1]}{built}")


@dataclass(frozen=True)
class Tolerance:
    """Elementwise |actual - expected| <= atol + rtol * |expected|."""

    rtol: float
    atol: float


# For elementwise ops computed in float (or double) arithmetic and rounded once to the output
# dtype. fp32's rtol is far below fp16's rounding error (4.9e-4), so a kernel that computes an
# fp32 exercise in fp16 fails; atol only covers values near the dtype's smallest normal number.
ELEMENTWISE_TOL = {
    torch.float64: Tolerance(1e-12, 1e-300),
    torch.float32: Tolerance(1e-5, 1e-37),
    torch.float16: Tolerance(1e-3, 1e-7),
    torch.bfloat16: Tolerance(8e-3, 1e-37),
}


def require_plain_tensor(value, what: str) -> None:
    """An op returns a plain torch.Tensor: a subclass can compute its values when someone reads them
    (after the timing), or hold something other than what its storage holds."""
    if type(value) is not torch.Tensor:
        kind = f"a {type(value).__module__}.{type(value).__qualname__}" if isinstance(value, torch.Tensor) else \
            f"a {type(value).__name__}"
        raise CheckFailure(f"{what}: expected a plain torch.Tensor, got {kind}")


def poison(t: torch.Tensor) -> torch.Tensor:
    """Fill with NaN (or the max value for integers) so an unwritten element can never pass."""
    if t.is_floating_point():
        return t.fill_(float("nan"))
    return t.fill_(torch.iinfo(t.dtype).max)


# After these errors the process's CUDA context is unusable: every later CUDA call fails the same way.
_CONTEXT_LOST = ("illegal memory access", "misaligned address", "illegal instruction", "unspecified launch failure",
                 "device-side assert", "hardware stack error")


def cuda_context_lost(message: str) -> bool:
    """Whether an error message says the CUDA context is gone (a kernel faulted)."""
    return any(s in message for s in _CONTEXT_LOST)


def poison_next_allocation(numel: int, dtype: torch.dtype = torch.float32, blocks: int | None = 2) -> None:
    """Fill `blocks` blocks of `numel` elements with NaN and free them: the caching allocator hands that
    memory to the next allocations of that size on the current stream (the op's output, or a temporary
    and then the output), so an element the op never writes stays NaN. Call it right before the op,
    after any copy the check itself makes (`unmodified` snapshots its inputs): a copy would take the block.
    blocks=None: 16 for a tensor of up to 1 MiB, which shares the allocator's small-block pool with every
    scalar and temporary a call makes (so all its free blocks, as a rule, are poisoned), else 4."""
    if blocks is None:
        blocks = 16 if numel * torch.empty((), dtype=dtype).element_size() <= 1 << 20 else 4
    if numel:
        held = [poison(torch.empty(numel, dtype=dtype, device="cuda")) for _ in range(blocks)]  # distinct blocks
        held.clear()


def poisoned_empty(shape, dtype, device) -> torch.Tensor:
    return poison(torch.empty(shape, dtype=dtype, device=device))


def _describe_mismatches(actual: torch.Tensor, expected: torch.Tensor, bad: torch.Tensor, limit: int = 5) -> str:
    idx = bad.nonzero()[:limit].tolist()
    parts = []
    for i in idx:
        where = tuple(i)
        parts.append(f"at {list(where)}: got {actual[where].item():.8g}, expected {expected[where].item():.8g}")
    return "; ".join(parts)


def assert_close(actual: torch.Tensor, expected: torch.Tensor, tol: Tolerance, what: str, chunk: int = 1 << 26) -> None:
    """Compare elementwise against a higher-precision `expected`; NaN and inf never pass.

    Works in chunks so that multi-GiB outputs can be checked without a float64 copy of them.
    """
    require_plain_tensor(actual, what)
    if tuple(actual.shape) != tuple(expected.shape):
        raise CheckFailure(f"{what}: shape {tuple(actual.shape)}, expected {tuple(expected.shape)}")
    if actual.dtype != expected.dtype and expected.dtype != torch.float64:
        raise CheckFailure(f"{what}: dtype {actual.dtype}, expected {expected.dtype}")
    if actual.device != expected.device:
        raise CheckFailure(f"{what}: on {actual.device}, expected on {expected.device}")
    a_flat, e_flat = actual.reshape(-1), expected.reshape(-1)
    n = a_flat.numel()
    total_bad = 0
    first_msg = ""
    for start in range(0, n, chunk):
        a = a_flat[start : start + chunk].to(torch.float64)
        e = e_flat[start : start + chunk].to(torch.float64)
        bad = ~(torch.abs(a - e) <= tol.atol + tol.rtol * torch.abs(e))  # NaN compares False: bad
        bad |= ~torch.isfinite(a) & torch.isfinite(e)
        count = int(bad.sum())
        if count and not first_msg:
            # report indices in the tensor's own shape
            flat_idx = bad.nonzero()[:5].flatten() + start
            coords = [torch.unravel_index(i, actual.shape) if actual.dim() else () for i in flat_idx]
            first_msg = "; ".join(
                f"at {[int(c) for c in co]}: got {a_flat[i].item():.8g}, expected {e_flat[i].item():.8g}"
                for co, i in zip(coords, flat_idx.tolist())
            )
        total_bad += count
    if total_bad:
        raise CheckFailure(
            f"{what}: {total_bad} of {n} elements wrong (tolerance {tol.rtol:g} relative); first: {first_msg}"
        )


class Comparison:
    """A comparison of values fed piece by piece (chunks of a large output, or sampled elements),
    against a Tolerance (each element) or a float (normwise relative error over all pieces); NaN
    and inf never pass where a finite value is expected."""

    def __init__(self, tol: "Tolerance | float", what: str):
        self.tol, self.what = tol, what
        self.count = self.bad = 0
        self.err_sq = self.ref_sq = 0.0
        self.nonfinite = False
        self.first = ""

    def add(self, actual: torch.Tensor, expected: torch.Tensor, positions: torch.Tensor | None = None,
            offset: int = 0) -> None:
        """Compare flat `actual` with flat float64 `expected`; `positions` names the elements in the
        message (default: their order in this piece, plus `offset`)."""
        a, e = actual.reshape(-1).to(torch.float64), expected.reshape(-1).to(torch.float64)
        self.count += a.numel()
        finite = torch.isfinite(a) | ~torch.isfinite(e)
        if isinstance(self.tol, Tolerance):
            bad = ~(torch.abs(a - e) <= self.tol.atol + self.tol.rtol * torch.abs(e)) | ~finite
            n = int(bad.sum())
            if n and not self.first:
                where = bad.nonzero()[:5].flatten()
                pos = positions.reshape(-1)[where.to(positions.device)] if positions is not None else where + offset
                self.first = "; ".join(f"at {int(p)}: got {a[i].item():.8g}, expected {e[i].item():.8g}"
                                       for p, i in zip(pos.tolist(), where.tolist()))
            self.bad += n
        else:
            if not bool(finite.all()):
                self.nonfinite = True
            self.err_sq += float(torch.sum((a - e)[finite] ** 2))
            self.ref_sq += float(torch.sum(e[torch.isfinite(e)] ** 2))

    def problem(self) -> str | None:
        if isinstance(self.tol, Tolerance):
            if self.bad:
                return (f"{self.what}: {self.bad} of {self.count} elements wrong (tolerance {self.tol.rtol:g} "
                        f"relative); first (flat index): {self.first}")
            return None
        err = float("inf") if self.nonfinite else (self.err_sq ** 0.5 / self.ref_sq ** 0.5 if self.ref_sq > 0
                                                     else self.err_sq ** 0.5)
        if not err <= self.tol:
            return f"{self.what}: relative error {err:.3g} exceeds {self.tol:g}"
        return None


# --- a call's tolerance: one home for the generated properties and the judge -------------------------
# normwise relative error by the lowest precision among a call's floating tensors: far below the
# rounding of the next lower precision
CALL_TOLERANCE = {torch.float64: 1e-10, torch.float32: 1e-5, torch.float16: 1e-3, torch.bfloat16: 8e-3}


def call_dtype(call) -> torch.dtype:
    """The floating dtype of an AuditCall's tensors (the lowest precision among them; float64 if none)."""
    order = [torch.bfloat16, torch.float16, torch.float32, torch.float64]
    found = {a.dtype for a in call.args if isinstance(a, torch.Tensor) and a.is_floating_point()}
    return next((d for d in order if d in found), torch.float64)


def call_tolerance(call, args=None) -> float:
    """The normwise relative error an AuditCall's result may have: none for an op that only moves
    values, the call's own tolerance where it gives one (a float, or a function of the arguments: those
    given, e.g. the call at one of its edges, else the call's own), else by its dtype (CALL_TOLERANCE).
    Relative to the answer's norm, or for a call that sums products to its terms' norm where that is larger
    (`call_terms`)."""
    if call.exact:
        return 0.0
    if call.tolerance is not None:
        if not callable(call.tolerance):
            return float(call.tolerance)
        return float(call.tolerance(*(call.args if args is None else args)))
    return CALL_TOLERANCE[call_dtype(call)]


# the special values an output must hold where its reference does, and nowhere else
_SPECIAL = (("NaN", torch.isnan), ("+inf", lambda t: t == float("inf")), ("-inf", lambda t: t == -float("inf")))


def host_values(*vectors: torch.Tensor | None) -> list[list[float] | None]:
    """Each of `vectors` (1-D tensors; None for none) as a list of floats, copied to the host in one copy
    per device: each copy from a GPU waits for it, and the GPU is shared with the other grading processes."""
    by_device: dict = {}
    for k, v in enumerate(vectors):
        if v is not None:
            by_device.setdefault(v.device, []).append(k)
    found: list[list[float] | None] = [None] * len(vectors)
    for ids in by_device.values():
        flat = torch.cat([vectors[k].reshape(-1).to(torch.float64) for k in ids]).tolist()
        at = 0
        for k in ids:
            n = vectors[k].numel()
            found[k], at = flat[at:at + n], at + n
    return found


class OutputCheck:
    """output_problem in two steps, so that a caller can fetch several checks' numbers in one copy
    (`host_values`): the statistics of every output compared by value are queued on the device when
    made (`stats`: five per output), and `problem(values)` judges them once on the host."""

    def __init__(self, actual, expected, tol: float, what: str, same_device: bool = False,
                 terms: torch.Tensor | None = None):
        self.tol = tol
        self.pairs: list[tuple[torch.Tensor, torch.Tensor, str]] = []
        # the first problem found without the values (a count, a type, a shape, a device): it counts only
        # where no output before it is wrong by value
        self.early = self._collect(actual, expected, what, same_device)
        # a single output that may cancel: its error relative to the larger of its norm and its terms' norm
        # (call_terms), on the device with the other numbers
        self.terms = terms if isinstance(expected, torch.Tensor) and len(self.pairs) == 1 else None
        stats = [self._stats(a, e, self.terms) for a, e, _ in self.pairs]
        # one vector on the first one's device (references on two devices, which no call makes, cost a copy)
        self.stats = torch.cat([t.to(stats[0].device) for t in stats]) if stats else None

    def _collect(self, actual, expected, what: str, same_device: bool) -> str | None:
        if expected is None:
            return None
        if isinstance(expected, (tuple, list)):
            if not isinstance(actual, (tuple, list)) or len(actual) != len(expected):
                return f"{what}: expected {len(expected)} outputs, got {type(actual).__name__}"
            for k, (a, e) in enumerate(zip(actual, expected)):
                problem = self._collect(a, e, f"{what}[{k}]", same_device)
                if problem:
                    return problem
            return None
        if not isinstance(actual, torch.Tensor):
            return f"{what}: expected a tensor, got {type(actual).__name__}"
        if tuple(actual.shape) != tuple(expected.shape):
            return f"{what}: shape {list(actual.shape)}, expected {list(expected.shape)}"
        if same_device and actual.device != expected.device:
            return f"{what}: on {actual.device}, expected on {expected.device}"
        e = expected.to(torch.float64)
        self.pairs.append((actual.detach().to(e.device, torch.float64), e, what))
        return None

    @staticmethod
    def _stats(a: torch.Tensor, e: torch.Tensor, terms: torch.Tensor | None = None) -> torch.Tensor:
        finite = torch.isfinite(e)
        scale = torch.linalg.vector_norm(torch.where(finite, e, 0.0))
        if terms is not None:
            scale = torch.maximum(scale, torch.linalg.vector_norm(torch.where(finite, terms.to(e.dtype), 0.0)))
        return torch.stack([*((test(a) != test(e)).any().to(torch.float64) for _, test in _SPECIAL),
                            torch.linalg.vector_norm(torch.where(finite, a - e, 0.0)), scale])

    def problem(self, values: list[float] | None = None) -> str | None:
        """Why the outputs do not match, or None; `values`: `stats` as host_values copied them (copied
        here when not given)."""
        if values is None and self.stats is not None:
            values = self.stats.tolist()
        for k, (a, e, what) in enumerate(self.pairs):
            *differ, err, ref = values[5 * k:5 * k + 5]
            for (name, test), differs in zip(_SPECIAL, differ):
                if differs:
                    i = (test(a) != test(e)).nonzero()[0].tolist()
                    return (f"{what}: at {i} got {a[tuple(i)].item():.8g}, expected {e[tuple(i)].item():.8g} "
                            f"({name} where the reference has{' none' if not bool(test(e)[tuple(i)]) else ' one'})")
            rel = err / ref if ref > 0 else err
            if not rel <= self.tol:
                of = " (of the larger of the answer's norm and its terms' norm)" if self.terms is not None else ""
                return f"{what}: relative error {rel:.3g}{of} exceeds {self.tol:g}"
        return self.early


def output_problem(actual, expected, tol: float, what: str, same_device: bool = False,
                   terms: torch.Tensor | None = None) -> str | None:
    """Why `actual` (a tensor, or a tuple/list of them) does not match `expected` (None where not
    compared), or None: the same shape, NaN and infinities at the same positions, and the finite values
    within `tol` in norm (relative to the reference's). One home for the generated properties and the
    judge; `same_device` also requires the reference's device. Every output's numbers come to the host
    in one copy (`OutputCheck`), not one per output. `terms`: a single output's terms' norms (call_terms)."""
    return OutputCheck(actual, expected, tol, what, same_device, terms).problem()


def relative_error(actual: torch.Tensor, expected: torch.Tensor) -> float:
    """‖actual - expected‖ / ‖expected‖ in float64 (inf if actual has NaN/inf)."""
    return _relative_error(_relative_error_stats(actual.to(torch.float64), expected.to(torch.float64)).tolist())


def _relative_error_stats(a: torch.Tensor, e: torch.Tensor, terms: torch.Tensor | None = None) -> torch.Tensor:
    """(all of a finite, ‖a - e‖, the denominator) on the device: one copy to the host brings all three (each
    copy waits on the GPU, which the other grading processes share). The denominator: ‖e‖, or the larger of
    ‖e‖ and ‖terms‖ (`terms_norm`)."""
    denom = torch.linalg.vector_norm(e)
    if terms is not None:
        denom = torch.maximum(denom, torch.linalg.vector_norm(terms.to(torch.float64)))
    return torch.stack([torch.isfinite(a).all().to(torch.float64), torch.linalg.vector_norm(a - e), denom])


def _relative_error(stats: list[float]) -> float:
    finite, num, denom = stats
    if not finite:
        return float("inf")
    return num / denom if denom > 0 else num


# --- sums of products: an answer that cancels ------------------------------------------------------
# An output that is a sum of products (a matmul's or a convolution's, its bias added) rounds, in float32, in
# proportion to its terms' norm sqrt(sum of the squared terms), not to its own value: a 1 x 1 product of K =
# 300 random terms can land near 0, and a thread's float32 summation order is then past 1e-5 of the answer
# (1.06% of 20,000 draws: a right kernel failing at random). Relative to the larger of the two norms,
# nothing changes where the answer does not cancel (for random data the two norms are alike), and any wrong
# term or precision still shows: a term dropped is ~1/sqrt(K) of the terms' norm, TF32 ~1e-4 of it. Only an
# output of few elements can cancel: over n random outputs the norms' ratio has a spread of about 1/sqrt(2n)
# (above SMALL_OUTPUT elements, a ratio below 1/2 is five of those spreads away), so a larger output keeps
# the plain rule and costs no second reference; a small one's terms' norm travels with the comparison's
# other numbers (one copy to the host for all).
SMALL_OUTPUT = 64


def terms_norm(reference, args) -> torch.Tensor:
    """Each output element's terms' norm sqrt(sum of its squared terms), for an op each of whose outputs is a
    sum of products of its tensor arguments' elements with coefficients 0 or 1 (matmul, a convolution and
    its transpose and their gradients, a bias added): `reference` (float64) on every floating tensor of
    `args` squared (non-finite values as 0: they are judged on their own)."""
    return reference(*squares(args)).clamp_min(0).sqrt()


def squares(args) -> list:
    """Each floating tensor of `args` squared in float64 (non-finite values as 0); the rest as they are."""
    return [torch.nan_to_num(a.detach().double(), nan=0.0, posinf=0.0, neginf=0.0) ** 2
            if isinstance(a, torch.Tensor) and a.is_floating_point() else a for a in args]


def cancelling_terms(reference, args, expected: torch.Tensor) -> torch.Tensor | None:
    """terms_norm of a sum-of-products op's call on the answer's device, where its output (`expected`) is
    small enough to cancel (SMALL_OUTPUT); None otherwise: assert_rel_error's and OutputCheck's `terms`,
    queued with the comparison's other numbers (no copy to the host of its own)."""
    if expected.numel() > SMALL_OUTPUT:
        return None
    # (the judge's answer is on the CPU where a call's arguments may be on another GPU)
    return terms_norm(reference, args).to(expected.device)


def call_terms(call, args, expected) -> torch.Tensor | None:
    """cancelling_terms of an AuditCall on `args` (its answer there: `expected`) where it sums products
    (`AuditCall.sums_products`) and compares by a tolerance; None otherwise."""
    if not call.sums_products or call.exact or not isinstance(expected, torch.Tensor):
        return None
    return cancelling_terms(call.reference, args, expected)


def assert_rel_error(actual: torch.Tensor, expected: torch.Tensor, tol: float, what: str,
                     terms: torch.Tensor | None = None) -> None:
    """Normwise check for reductions (matmul, convolution) whose rounding depends on the order of
    summation; all-zeros gives 1.0 and fails, NaN gives inf and fails. `terms`: the outputs' terms' norms
    (`terms_norm`), for an answer that may cancel: the error is then relative to the larger norm."""
    with RelErrors() as errors:
        errors.add(actual, expected, tol, what, terms)


class RelErrors:
    """assert_rel_error for several results of one check, their numbers brought to the host in one copy
    (each copy from a GPU waits for this context's turn on the GPU the grading processes share):
    `add` each as it is made, and the first wrong one in order fails when the block ends, or before an
    exception of the block is let through (a wrong output is the failure, not the backward that followed)."""

    def __init__(self):
        self.items: list = []

    def __enter__(self) -> RelErrors:
        return self

    def __exit__(self, kind, error, tb) -> bool:
        self.judge()
        return False

    def add(self, actual: torch.Tensor, expected: torch.Tensor, tol: float, what: str,
            terms: torch.Tensor | None = None) -> None:
        problem = None
        try:
            require_plain_tensor(actual, what)
        except CheckFailure as e:
            problem = str(e)
        if problem is None and tuple(actual.shape) != tuple(expected.shape):
            problem = f"{what}: shape {tuple(actual.shape)}, expected {tuple(expected.shape)}"
        if problem is not None:
            self.judge()  # the results before it first
            raise CheckFailure(problem)
        a, e = actual.detach().to(torch.float64), expected.detach().to(torch.float64)
        self.items.append((a, e, tol, what, terms is not None, _relative_error_stats(a, e, terms)))

    def judge(self) -> None:
        items, self.items = self.items, []
        for (a, e, tol, what, cancels, _), stats in zip(items, host_values(*(item[5] for item in items))):
            err = _relative_error(stats)
            if not err <= tol:
                bad = ~(torch.abs(a - e) <= 10 * tol * e.abs().max())
                detail = _describe_mismatches(a, e, bad) if bad.any() else ""
                of = " (of the larger of the answer's norm and its terms' norm)" if cancels else ""
                raise CheckFailure(f"{what}: relative error {err:.3g}{of} exceeds {tol:g}"
                                   + (f"; first: {detail}" if detail else ""))


@contextlib.contextmanager
def unmodified(**tensors: torch.Tensor):
    """Fail if the body changes any of the named tensors (bits, shape or strides)."""
    before = {k: (v.detach().clone(), v.shape, v.stride()) for k, v in tensors.items()}
    yield
    for k, v in tensors.items():
        _, shape, stride = before[k]
        if v.shape != shape or v.stride() != stride:
            raise CheckFailure(f"the input `{k}` was modified; an op must not write to its inputs")
    # whether any bit changed, each on its tensor's device, brought to the host together
    changed = host_values(*((_bits(v) != _bits(before[k][0])).any().reshape(1) for k, v in tensors.items()))
    for k, flag in zip(tensors, changed):
        if flag[0]:
            raise CheckFailure(f"the input `{k}` was modified; an op must not write to its inputs")


def _bits(t: torch.Tensor) -> torch.Tensor:
    """The raw bits, so that NaN == NaN and -0.0 != 0.0."""
    ints = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}[t.element_size()]
    return t.detach().contiguous().view(ints)


# PyTorch's own message when a CPU tensor reaches the device guard of an op's C++ front end
# (c10::cuda::CUDAGuard): the op's input checks let it through
_GUARD_ERROR = "CUDAGuardImpl initialized with non-CUDA DeviceType"


def _op_front_end(tb, args, op: str | None = None) -> tuple[str, str] | None:
    """(.cpp file, C++ function) registered for the op whose call raised (traceback `tb`): the last
    Python frame calling `ops.<op>(` names the op (else `op`, the name the caller called), the
    exercise folder's `m.impl("<op>", &fn)` the function. The folder is that frame's, else that of a
    module among `args`."""
    import traceback
    from pathlib import Path

    frames = traceback.extract_tb(tb)
    folders = [Path(f.filename).parent for f in frames]
    folders += [Path(a.__file__).parent for a in args if getattr(a, "__file__", None)]
    called = [(m.group(1), Path(f.filename).parent) for f in reversed(frames)
              if (m := re.search(r"\bops\.(\w+)\s*\(", f.line or ""))]
    for name, home in called + ([(op.rsplit(".", 1)[-1], None)] if op else []):
        for folder in dict.fromkeys([home, *folders] if home else folders):
            for cpp in sorted(folder.glob("*.cpp")):
                fn = re.search(rf'impl\(\s*"{name}"\s*,\s*&?\s*([\w:]+)', cpp.read_text(errors="replace"))
                if fn:
                    return cpp.name, fn.group(1).split("::")[-1]
    return None


def without_cpp_stack(e: BaseException) -> str:
    """An exception's message without the C++ stack PyTorch appends ("Exception raised from ...")."""
    return str(e).split("\nException raised from")[0].strip()


def run_check(check, ctx) -> str | None:
    """Run one check: None when it passes, else its failure as the report words it (a CheckFailure's
    text, or the error's type and message). pytest's skip passes through (a check not run here)."""
    try:
        check.run(ctx)
    except CheckFailure as e:
        return str(e)
    except (RuntimeError, ValueError, TypeError, IndexError, NotImplementedError) as e:
        return f"{type(e).__name__}: {without_cpp_stack(e)}"
    return None


def error_message(e: BaseException, *args, op: str | None = None) -> str:
    """An op's error as a student reads it: without PyTorch's C++ stack, and where a CPU tensor got
    past the op's input checks to its CUDA device guard (PyTorch's "CUDAGuardImpl initialized with
    non-CUDA DeviceType: cpu"), the student's .cpp file and function whose checks must refuse it
    (worded so as to name no argument: the judge requires a refusal naming one).
    `args`: what the call was given (the exercise's module among them, to find its folder); `op`:
    the op's name where the traceback holds no `ops.<op>(` call (a direct call of `lib.ops.<op>`)."""
    msg = without_cpp_stack(e)
    if _GUARD_ERROR not in msg:
        return msg
    where = _op_front_end(e.__traceback__, args, op)
    place = f"{where[0]}: {where[1]}()" if where else "the op's C++ front end (its .cpp file)"
    return (f"{place}: a CPU tensor reached the CUDA guard (PyTorch: {msg}); the checks before the "
            "guard (course::check_* in course/ops.h, or TORCH_CHECK) must refuse it, naming the argument")


def _argument_names(names: tuple[str, ...]) -> str:
    """The arguments a list of message patterns looks for ("x must", "`x`", "A's" -> x, A)."""
    found = [m.group(0) for m in (re.search(r"[A-Za-z_]\w*", n.removesuffix("'s")) for n in names) if m]
    return " or ".join(dict.fromkeys(found)) or "the argument"


def expect_error(fn, *args, names: tuple[str, ...] = (), what: str = "") -> str:
    """Require `fn(*args)` to raise a RuntimeError/ValueError/TypeError whose message names one of
    `names`; return the message. A crash of the process is not an error message: the grader's
    isolation reports it separately."""
    try:
        fn(*args)
    except (RuntimeError, ValueError, TypeError, IndexError, NotImplementedError) as e:
        msg = error_message(e, *args)
    else:
        msg = None
    if msg is not None:
        if "not implemented yet" in msg or _GUARD_ERROR in msg:
            raise CheckFailure(f"{what}: {msg}")
        if names and not any(n in msg for n in names):
            raise CheckFailure(f"{what}: raised an error that does not name {_argument_names(names)}: {msg[:200]}")
        return msg
    if torch.cuda.is_available():
        torch.cuda.synchronize()
    raise CheckFailure(f"{what}: was accepted, but should raise an error naming {' or '.join(names) or 'the problem'}")


def late_copies(args, later_sizes=()) -> list:
    """Called inside a side stream's context: copies of the tensor arguments that the current stream
    fills only after a GPU sleep of some milliseconds (NaN until then), so an op that reads them on
    any other stream reads them too early. Other arguments pass through. `later_sizes`: element
    counts of tensors the caller will make on this stream after the sleep (an output, a cotangent,
    gradients): blocks of those sizes are filled with NaN and freed first, so that an op on another
    stream that reads them early reads NaN, every run, not what an earlier tensor left there."""
    late = [torch.full_like(a, float("nan")) if isinstance(a, torch.Tensor) and a.is_floating_point()
            else (torch.zeros_like(a) if isinstance(a, torch.Tensor) else a) for a in args]
    if torch.cuda.is_available():
        dtype = next((a.dtype for a in args if isinstance(a, torch.Tensor) and a.is_floating_point()), torch.float32)
        for numel in sorted(set(later_sizes)):
            poison_next_allocation(numel, dtype, blocks=None)
    _copied_after_a_sleep([(copy, a) for copy, a in zip(late, args) if isinstance(a, torch.Tensor)])
    return late


def _copied_after_a_sleep(pairs) -> None:
    """Each (tensor, value) of `pairs` copied on the current stream after a GPU sleep there."""
    if torch.cuda.is_available():
        torch.cuda._sleep(20_000_000)  # GPU clock cycles: milliseconds on any GPU
    for t, v in pairs:
        t.copy_(v)


def refill_late(tensors, values) -> None:
    """Called inside a side stream's context: each tensor of `tensors` holds NaN (zeros where not floating)
    now and its match in `values` only after a GPU sleep of some milliseconds on the current stream. The
    same tensors again: an op that has seen their addresses (the timing's repeated inputs) and runs such
    calls on a stream of its own reads them too early, whatever the allocator reuses."""
    pairs = [(t, v) for t, v in zip(tensors, values) if isinstance(t, torch.Tensor)]
    for t, _ in pairs:
        t.fill_(float("nan") if t.is_floating_point() else 0)
    if torch.cuda.is_available():
        torch.cuda.synchronize()  # NaN before anything of the op's can run
    _copied_after_a_sleep(pairs)


def on_a_busy_stream(fn, *inputs: torch.Tensor):
    """Call `fn(*copies)` inside `torch.cuda.stream(s)`, where `s` fills each copy of `inputs` only
    after a sleep of some milliseconds: an op that launches on any stream but the current one reads
    its inputs (NaN until then) too early. Returns fn's result, synchronized."""
    side = torch.cuda.Stream()
    torch.cuda.synchronize()
    with torch.cuda.stream(side):
        out = fn(*late_copies(inputs))
    torch.cuda.synchronize()
    return out


def kernels_launched(fn) -> list[str]:
    """Names of the GPU kernels and copies that `fn()` ran, read with the profiler (CUPTI)."""
    return [k.name for k in observe(fn)[1].kernels]


def assert_backward_matches_forward(fn, x: torch.Tensor, what: str, *, generator=None, trials: int = 3,
                                    eps: float = 1e-6, tol: float = 1e-6) -> None:
    """gradcheck's fast mode, without torch.autograd.grad (whose first call in a process imports
    sympy: seconds, too slow for the quick edit-grade loop). For random directions u and cotangents
    v, in float64, the backward's <J^T v, u> must match the forward's central difference
    <v, (f(x + eps u) - f(x - eps u)) / (2 eps)>. `fn` must be smooth within eps of x.

    The same every run for an op that is wrong in a racy way: the three inputs reach the current stream
    only after a GPU sleep (an op on a stream of its own reads NaN), and every output and gradient is
    made in memory filled with NaN first (an op that leaves it unwritten never returns the values an
    earlier, right result left in the block). Nothing waits for the GPU before the last step."""
    def poisoned(numel: int, dtype: torch.dtype) -> None:
        if x.is_cuda:
            poison_next_allocation(numel, dtype)

    for trial in range(trials):
        u = torch.randn(x.shape, dtype=x.dtype, device=x.device, generator=generator)
        start, above, below = late_copies([x, x + eps * u, x - eps * u]) if x.is_cuda else (x, x + eps * u, x - eps * u)
        leaf = start.detach().clone().requires_grad_()
        poisoned(x.numel(), x.dtype)
        y = fn(leaf)
        v = torch.randn(y.shape, dtype=y.dtype, device=y.device, generator=generator)
        if y.requires_grad:
            weighted = (y * v).sum()
            poisoned(x.numel(), x.dtype)
            weighted.backward()  # a scalar's backward: no explicit gradient, no sympy
        if leaf.grad is None:
            raise CheckFailure(f"{what}: no gradient reached the input (is the backward registered?)")
        with torch.no_grad():
            poisoned(y.numel(), y.dtype)
            f_above = fn(above)
            poisoned(y.numel(), y.dtype)
            f_below = fn(below)
            analytic = float((leaf.grad * u).sum())
            numeric = float(((f_above - f_below) * v).sum()) / (2 * eps)
        if not abs(analytic - numeric) <= tol * max(1.0, abs(numeric)):
            raise CheckFailure(f"{what}: the backward gives {analytic:.10g} along a random direction, the forward's "
                               f"finite difference {numeric:.10g} (trial {trial + 1})")


def ops_called(fn) -> list[str]:
    """Names of the operators `fn()` dispatched, forward and backward ("aten::mul", "ns::op"), in
    order. Read with a dispatch mode, so cheap (no profiler): it tells which op did the work, e.g. a
    wrapper that calls torch.nn.functional instead of the exercise's op."""
    from torch.utils._python_dispatch import TorchDispatchMode

    class _Log(TorchDispatchMode):
        def __init__(self):
            super().__init__()
            self.names: list[str] = []

        def __torch_dispatch__(self, func, types, args=(), kwargs=None):
            self.names.append(func._schema.name)
            return func(*args, **(kwargs or {}))

    with _Log() as log:
        fn()
    return log.names


def assert_own_kernels(fn, allowed: tuple[str, ...] | KernelRule, what: str) -> None:
    """Require that the work was done by the exercise's own kernels: at least one ran, and every
    kernel that ran is one of the exercise's (which the given code fixes) or a copy or fill. A
    fall-back to PyTorch's ops, cuBLAS, cuDNN or a round trip through the CPU fails."""
    if os.environ.get("COURSE_SANITIZE"):
        # CUPTI (the profiler) and compute-sanitizer cannot instrument one process together
        pytest.skip("which kernels ran is not checked under compute-sanitizer (SANITIZE=1)")
    rule = allowed if isinstance(allowed, KernelRule) else KernelRule(tuple(allowed))
    _, seen = observe(fn, cpu_ops=rule.needs_cpu_ops)
    problem = rule.problem(seen, what)
    if problem:
        raise CheckFailure(problem)


# --- non-contiguous layouts of the same values: the generated checks and the judge ---------------

def strided_copy(t: torch.Tensor) -> torch.Tensor | None:
    """The same values in a view with gaps between them (every other element of a tensor twice as
    large in every dim); None when no such view is non-contiguous (a single element)."""
    if t.dim() == 0:
        return None
    base = torch.zeros([2 * s for s in t.shape], dtype=t.dtype, device=t.device)
    view = base[tuple(slice(None, None, 2) for _ in t.shape)]
    view.copy_(t)
    return None if view.is_contiguous() else view


def _crop_of_wider(t: torch.Tensor, extra: int, offset: int) -> torch.Tensor | None:
    """t's values as a crop of a tensor `extra` elements wider in the last dim, `offset` elements in;
    None below two dims or where the crop is still contiguous."""
    if t.dim() < 2 or t.shape[-1] == 0:
        return None
    base = torch.zeros((*t.shape[:-1], t.shape[-1] + extra), dtype=t.dtype, device=t.device)
    view = base[..., offset:offset + t.shape[-1]]
    view.copy_(t)
    return None if view.is_contiguous() else view


def cropped_copy(t: torch.Tensor) -> torch.Tensor | None:
    """The same values as a crop of a wider tensor: rows further apart than they are long, the last
    dim still of unit stride, at an offset (a code that copies only when the last stride is not 1, or
    that reads the row length for the row stride, is wrong here); None below two dims."""
    return _crop_of_wider(t, 3, 1)


def aligned_cropped_copy(t: torch.Tensor) -> torch.Tensor | None:
    """A crop of a wider tensor that starts where its storage starts, its rows 64 bytes longer than the
    crop: where the row length is a multiple of 16 bytes, 16-byte vector paths take it as it is
    (cropped_copy's offset sends them to their element-by-element or padding paths), so a code reading
    the row length for the row stride is wrong there too; None below two dims."""
    return _crop_of_wider(t, 64 // t.element_size(), 0)


def transposed_copy(t: torch.Tensor) -> torch.Tensor | None:
    """The same values, dense but with the last two dims' strides swapped (a transpose's result);
    None where that is still contiguous."""
    if t.dim() < 2:
        return None
    view = torch.empty((*t.shape[:-2], t.shape[-1], t.shape[-2]), dtype=t.dtype, device=t.device).transpose(-1, -2)
    view.copy_(t)
    return None if view.is_contiguous() else view


def batch_slice_copy(t: torch.Tensor) -> torch.Tensor | None:
    """The same values as every other entry along dim 0 of a tensor twice as long there: each entry
    (image, matrix) packed, but entries further apart than they are long (a code that reads the batch
    stride as the product of the other sizes is wrong here, and every other layout hides it: their
    rows or columns are not packed, so such a code copies them first); None below three dims or
    where that is still contiguous (a batch of one)."""
    if t.dim() < 3:
        return None
    base = torch.zeros((2 * t.shape[0], *t.shape[1:]), dtype=t.dtype, device=t.device)
    view = base[::2]
    view.copy_(t)
    return None if view.is_contiguous() else view


def narrowed_copy(t: torch.Tensor) -> torch.Tensor | None:
    """The same values as a narrowed view of a tensor one longer in every dim but the first and the
    last (x[:, 1:, 1:] of a wider NCHW tensor: fewer channels and rows than it holds), one entry in:
    the rows stay packed, but the channel stride (dim 1 of four) and the batch stride are larger than
    the sizes below them say; None below three dims."""
    if t.dim() < 3:
        return None
    base = torch.zeros((t.shape[0], *(s + 1 for s in t.shape[1:-1]), t.shape[-1]), dtype=t.dtype, device=t.device)
    view = base[(slice(None), *(slice(1, None) for _ in t.shape[1:-1]))]
    view.copy_(t)
    return None if view.is_contiguous() else view


# the non-contiguous layouts every tensor argument is given, by what they catch
LAYOUTS = {"strided view": strided_copy, "crop of a wider tensor": cropped_copy, "transposed layout": transposed_copy,
           "slice of a longer batch": batch_slice_copy, "narrowed view (channels and rows not packed)": narrowed_copy}


# --- misshapen arguments: the bad-input audit's `rank` and `shape` kinds (tests/test_input_audit.py) and the
# property "the registered fake refuses what the op refuses" (grader.verify.properties) --------------------

def with_leading_dim(t: torch.Tensor) -> torch.Tensor:
    """t with an extra leading dim of size 2 (two copies of it)."""
    return torch.stack([t, t])


def grown(t: torch.Tensor, d: int) -> torch.Tensor:
    """One more slice along dim d (a copy of the first): the values stay valid (e.g. positive)."""
    return torch.cat([t, t.narrow(d, 0, 1)], dim=d)


def shape_spoils(t: torch.Tensor) -> list[tuple[str, object, int | None]]:
    """(description, spoil, grown) for each misshapen copy of a tensor argument: an extra dim of size 2 in front
    and of size 1 at the end, one dim fewer at each end (from two dims), and each non-empty dim one
    longer and cut to 1. Both ends: a check of `x.shape[1]` without `x.dim()` passes one of them; 1: a
    size check's `> 1` for `> 0`. (Not emptied: what PyTorch refuses is decided on the meta device, whose
    shape checks let a kernel of no columns through, and on the CPU some empty probes crash PyTorch:
    torch.nn.grad.conv2d_input, depthwise, with an empty grad_output batch.) `spoil(t)` makes it; `grown`:
    the size a dim was grown to (a refusal naming this tensor shows it), else None."""
    shape = "[" + ", ".join(map(str, t.shape)) + "]"
    out = [(f"{shape} with an extra leading dim", with_leading_dim, None),
           (f"{shape} with an extra trailing dim of 1", lambda t: t.unsqueeze(-1).clone(), None)]
    if t.dim() > 1:
        out.append((f"{shape} with one dim fewer (its first slice)", lambda t: t[0].clone(), None))
        out.append((f"{shape} with its last dim dropped (index 0 of it)", lambda t: t[..., 0].clone(), None))
    for d, n in enumerate(t.shape):
        if n:
            out.append((f"{shape} with dim {d} {n} -> {n + 1}", lambda t, d=d: grown(t, d), n + 1))
        if n > 1:
            out.append((f"{shape} with dim {d} {n} -> 1", lambda t, d=d: t.narrow(d, 0, 1).clone(), None))
    return out
