"""The judge (grader.verify.judge): results re-checked in the parent, where the submission's code never runs.
On the CPU, with the ops played by PyTorch functions: no build, no GPU."""
from __future__ import annotations

import pickle
import types

import pytest
import torch
import torch.nn.functional as F

from grader import specs as spec
from grader.verify import judge
from grader.run import gate
from grader.run.grading import _judge_outputs_path, _results_path, grading_row
from grader.verify.outcomes import TestOutcome
from grader.verify.results import save_atomic, write_json_atomic
from grader.verify.scoring import score_exercise

LEAKY = spec.by_exercise("01")
SEED = 1234
ALL_PASSED = [TestOutcome(c.name, c.group, "passed") for c in LEAKY.checks()]


def _leaky(slope_used=None):
    """LeakyReLU played by PyTorch; `slope_used` fixed: the 'slope ignored' bug."""
    def forward(x, p):
        return F.leaky_relu(x, p if slope_used is None else slope_used)

    def backward(g, x, p):
        return torch.where(x > 0, g, g * (p if slope_used is None else slope_used))
    return types.SimpleNamespace(leaky_relu=forward, leaky_relu_backward=backward)


def _verdicts(module, tmp_path, tests=ALL_PASSED, input_checks=False):
    """The judge's verdicts on `module`'s outputs; without the wrong-device calls unless asked (on the
    CPU they cannot be recorded: see _with_input_answers)."""
    path = tmp_path / "outputs.pt"
    judge.record_outputs(module, LEAKY, SEED, path, device="cpu")
    judge.record_layouts(module, LEAKY, SEED, path, device="cpu")
    return {e.name: e for e in judge.verdicts(LEAKY, SEED, path, tests)
            if input_checks or e.group != "input_checks"}


def _layouts(label: str) -> set[str]:
    call = next(c for c in judge.judged_calls(LEAKY, SEED) if c.label == label)
    return {judge.JUDGE_PREFIX + name for name, _, _ in judge.layout_variants(call)}


@pytest.mark.parametrize("s", spec.all_specs(), ids=lambda s: s.exercise)
def test_every_spec_gives_the_judge_calls_it_can_check_on_the_cpu(s):
    calls = judge.judged_calls(s, SEED)
    assert calls, f"{s.exercise}: no audit call with a reference to judge"
    for call, again, other in zip(calls, judge.judged_calls(s, SEED), judge.judged_calls(s, SEED + 1)):
        assert call.group in s.points, f"{call.label}: group {call.group!r} is not scored"
        first = next(a for a in call.args if judge.is_tensor(a))
        assert torch.equal(first, next(a for a in again.args if judge.is_tensor(a))), "one seed, one input"
        assert not torch.equal(first, next(a for a in other.args if judge.is_tensor(a))), "fresh inputs per run"
        assert call.reference(*call.args) is not None
        if call.grad_args:  # the reference is differentiable where the judge differentiates it
            assert "autograd" in s.points, f"{call.label}: grad_args, but no autograd group"
            grads = judge._differentiate(call.reference, call, SEED, "cpu")
            assert all(g is not None and torch.isfinite(g).all() for g in grads), call.label


def test_judges_running_at_once_in_threads_each_draw_from_their_own_seed():
    """The parent judges several exercises and students at once, in threads (class grading, the
    gate's parallel jobs): each thread's calls hold its own seed's values, as when drawn alone. (A
    seed offset shared between threads once re-checked right answers against other inputs.)"""
    from concurrent.futures import ThreadPoolExecutor

    def tensors(s, seed):
        return [a for call in judge.judged_calls(s, seed) for a in call.args if judge.is_tensor(a)]

    work = [(s, seed) for s in spec.all_specs() for seed in (SEED, SEED + 1, SEED + 2)]
    alone = {(s.exercise, seed): tensors(s, seed) for s, seed in work}
    with ThreadPoolExecutor(max_workers=8) as pool:
        for _ in range(3):
            for (s, seed), drawn in zip(work, pool.map(lambda w: tensors(*w), work)):
                want = alone[s.exercise, seed]
                assert len(drawn) == len(want) and all(torch.equal(a, b) for a, b in zip(drawn, want)), \
                    f"{s.exercise}, seed {seed}: other inputs when drawn beside other threads"


def test_right_outputs_pass(tmp_path):
    found = _verdicts(_leaky(), tmp_path)
    layouts = _layouts("leaky_relu") | _layouts("leaky_relu_backward")
    assert layouts, "no non-contiguous layout of the judged calls"
    assert set(found) == {"judge: leaky_relu", "judge: leaky_relu_backward", "judge: leaky_relu autograd"} | layouts
    assert all(e.outcome == "passed" for e in found.values()), found
    assert found["judge: leaky_relu autograd"].group == "autograd"


@pytest.mark.parametrize("slope_used", [None, 0.5], ids=["right", "slope ignored"])
def test_answers_computed_ahead_in_a_thread_give_the_verdicts_computed_at_the_end(tmp_path, monkeypatch, slope_used):
    """The parent computes the judge's answers while the checks run (grader.run.grading.judge_ahead):
    the verdicts, reasons included, are those computed at the end, and scoring then computes none."""
    import threading

    path = tmp_path / "outputs.pt"
    judge.record_outputs(_leaky(slope_used), LEAKY, SEED, path, device="cpu")
    judge.record_layouts(_leaky(slope_used), LEAKY, SEED, path, device="cpu")
    at_the_end = [(v.name, v.group, v.outcome, v.reason) for v in judge.verdicts(LEAKY, SEED, path, ALL_PASSED)]
    # (the wrong-device calls are not recorded on the CPU: their verdicts fail either way)
    assert any(o == "failed" for _, g, o, _ in at_the_end if g != "input_checks") == (slope_used is not None)
    ahead = judge.References(LEAKY, SEED)
    worker = threading.Thread(target=ahead.compute_all)
    worker.start()
    worker.join()

    def computed_again(*_):
        raise AssertionError("an answer computed ahead was computed again")
    monkeypatch.setattr(judge, "_reference_answer", computed_again)
    monkeypatch.setattr(judge, "_differentiate", computed_again)
    monkeypatch.setattr(judge, "gradient_terms", computed_again)
    assert [(v.name, v.group, v.outcome, v.reason) for v in judge.verdicts(LEAKY, SEED, path, ALL_PASSED, ahead)] == at_the_end


def test_the_parent_computes_every_answer_in_a_thread_of_its_own(monkeypatch):
    """grading.judge_ahead, as a grade on a GPU starts it: a thread of the parent computes each exercise's
    answers (References for the run's seed); once it has ended, none is computed again."""
    import threading

    from grader.run.grading import judge_ahead
    from grader.specs import Selection

    answers = judge_ahead(Selection.of([LEAKY]), [LEAKY.exercise], SEED)
    for thread in threading.enumerate():
        if thread.name == "judge ahead":
            thread.join(120)
    ahead = answers[LEAKY.exercise]
    assert isinstance(ahead, judge.References) and ahead.seed == SEED

    def computed_again(*_):
        raise AssertionError("an answer computed ahead was computed again")
    monkeypatch.setattr(judge, "_reference_answer", computed_again)
    monkeypatch.setattr(judge, "_differentiate", computed_again)
    assert [ahead.answer(call) for call in ahead.calls()]
    monkeypatch.setattr(judge, "gradient_terms", computed_again)
    assert [ahead.gradients(call) for call in ahead.calls("gradients") if call.grad_args]
    assert len([ahead.gradient_terms(call) for call in ahead.calls("gradients") if call.grad_args])


def _reads_any_layout_as_contiguous(x, p):
    dense = torch.as_strided(x, x.shape, torch.empty(x.shape).stride(), x.storage_offset())
    return F.leaky_relu(dense, p)


def _refuses_non_contiguous_x(x, p):
    if not x.is_contiguous():
        raise ValueError("x must be contiguous")
    return F.leaky_relu(x, p)


def test_the_judge_repeats_its_calls_in_non_contiguous_layouts(tmp_path):
    """A submission that switched off the in-process checks of non-contiguous arguments still meets
    these, re-checked here: a wrong answer fails its group, an error naming the argument does not."""
    found = _verdicts(types.SimpleNamespace(leaky_relu=_reads_any_layout_as_contiguous,
                                            leaky_relu_backward=_leaky().leaky_relu_backward), tmp_path)
    wrong = {name for name, e in found.items() if e.outcome == "failed"}
    assert wrong and wrong <= _layouts("leaky_relu"), found
    assert all(found[name].group == "forward" for name in wrong)
    refused = _verdicts(types.SimpleNamespace(leaky_relu=_refuses_non_contiguous_x,
                                              leaky_relu_backward=_leaky().leaky_relu_backward), tmp_path)
    assert all(e.outcome == "passed" for e in refused.values()), refused


class _BackwardIgnoresSlope(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, p):
        ctx.save_for_backward(x)
        return F.leaky_relu(x, p)

    @staticmethod
    def backward(ctx, g):
        return g, None


@pytest.mark.parametrize("forward, why", [
    (_BackwardIgnoresSlope.apply, "relative error"),
    (lambda x, p: F.leaky_relu(x.detach(), p), "does not require grad"),
])
def test_a_wrong_or_missing_autograd_backward_fails_the_autograd_group_only(tmp_path, forward, why):
    module = types.SimpleNamespace(leaky_relu=forward, leaky_relu_backward=_leaky().leaky_relu_backward)
    found = _verdicts(module, tmp_path)
    assert found["judge: leaky_relu"].outcome == "passed"
    grads = found["judge: leaky_relu autograd"]
    assert grads.outcome == "failed" and why in grads.reason, grads


def test_a_wrong_output_fails_its_group_whatever_the_grading_process_said(tmp_path):
    found = _verdicts(_leaky(slope_used=0.01), tmp_path)
    forward = found["judge: leaky_relu"]
    assert forward.outcome == "failed" and forward.group == "forward"
    assert "relative error" in forward.reason and "outside the submission's process" in forward.reason
    row = score_exercise(LEAKY, ALL_PASSED + list(found.values()))
    assert row.groups["forward"].points == 0 and row.groups["backward"].points == 0
    assert row.groups["input_checks"].points == 1


def test_an_error_on_valid_arguments_fails(tmp_path):
    def broken(*_):
        raise RuntimeError("not implemented yet: leaky_relu")
    found = _verdicts(types.SimpleNamespace(leaky_relu=broken, leaky_relu_backward=broken), tmp_path)
    assert all(e.outcome == "failed" and "not implemented yet" in e.reason for e in found.values()), found
    assert len(found) == 3 + len(_layouts("leaky_relu") | _layouts("leaky_relu_backward"))


def test_groups_the_grading_process_did_not_run_are_not_judged(tmp_path):
    only_forward = [t for t in ALL_PASSED if t.group == "forward"]
    assert set(_verdicts(_leaky(), tmp_path, only_forward)) == {"judge: leaky_relu"} | _layouts("leaky_relu")
    only_autograd = [t for t in ALL_PASSED if t.group == "autograd"]
    assert set(_verdicts(_leaky(), tmp_path, only_autograd)) == {"judge: leaky_relu autograd"}
    skipped = [t.with_outcome("skipped", "") for t in ALL_PASSED]
    assert _verdicts(_leaky(), tmp_path, skipped) == {}


def test_missing_or_unreadable_outputs_fail_and_run_no_code(tmp_path):
    missing = judge.verdicts(LEAKY, SEED, tmp_path / "none.pt", ALL_PASSED)
    assert missing and all("saved no outputs" in e.reason for e in missing)

    class Payload:  # a file that would run code if loaded with pickle
        def __reduce__(self):
            return (exec, ("import pathlib; pathlib.Path(%r).touch()" % str(tmp_path / "ran"),))
    evil = tmp_path / "evil.pt"
    evil.write_bytes(pickle.dumps({"leaky_relu": Payload()}, protocol=2))
    found = judge.verdicts(LEAKY, SEED, evil, ALL_PASSED)
    assert found and all(e.outcome == "failed" and "could not be read" in e.reason for e in found), found
    assert not (tmp_path / "ran").exists()

    save_atomic(tmp_path / "big.pt", {"leaky_relu": torch.zeros(judge.MAX_OUTPUTS_BYTES // 4 + 1)})
    assert all("far more" in e.reason for e in judge.verdicts(LEAKY, SEED, tmp_path / "big.pt", ALL_PASSED))


def test_a_forged_results_file_does_not_earn_the_points(tmp_path):
    """The grading process wrote 'everything passed' (as a patched grader would) and exited cleanly,
    but the op it handed the judge ignores the slope: forward and backward earn nothing."""
    write_json_atomic(_results_path(tmp_path, LEAKY.exercise), {"tests": [t.to_json() for t in ALL_PASSED], "running": None,
                                                                     "tampered": []})
    judge.record_outputs(_leaky(slope_used=0.01), LEAKY, SEED, _judge_outputs_path(tmp_path, LEAKY.exercise),
                         device="cpu")
    job = gate.Job(LEAKY.exercise, [], {}, tmp_path, returncode=0)
    row = grading_row(LEAKY, job, tmp_path, timeout=60, seed=SEED)
    assert row.groups["forward"].points == 0 and row.groups["backward"].points == 0, row.groups
    assert "re-checked by the grader" in row.groups["forward"].reason
    no_gpu = grading_row(LEAKY, job, tmp_path, timeout=60, seed=None)  # no GPU: nothing is believed
    assert no_gpu.points == 0 and no_gpu.groups["forward"].state == "skipped", no_gpu.groups


@pytest.mark.parametrize("forged", ['{"tests": [{"name": "forward[x]", "group": "forward", "outcome": "PASSED", '
                                    '"reason": "", "properties": {}}], "running": null, "tampered": []}',
                                    '{"tests": [{"name": "forward[x]"', '{"tests": 3}'],
                         ids=["unknown outcome", "cut short", "not a list"])
def test_a_results_file_the_grader_did_not_write_costs_its_exercise_alone(tmp_path, forged):
    """A results file the grader cannot read (an outcome it never writes, broken JSON, another shape:
    the grader writes it atomically, so only the submission's process could have) scores its exercise
    as tampered, and the parent goes on to the next exercise: no exception."""
    _results_path(tmp_path, LEAKY.exercise).write_text(forged)
    job = gate.Job(LEAKY.exercise, [], {}, tmp_path, returncode=0)
    row = grading_row(LEAKY, job, tmp_path, timeout=60, seed=None)
    assert row.status == "tampered" and row.points == 0, row
    assert "not one the grader writes" in row.error


def _with_input_answers(tmp_path, on_cpu) -> dict:
    """The judge's verdicts on wrong-device calls recorded by `judge.record_input_checks` itself,
    the meta device standing in for the GPU: given an argument on the CPU, each op calls
    `on_cpu(argument's name)`, which raises the op's error or returns (the call accepted)."""
    path = tmp_path / "outputs.pt"
    judge.record_outputs(_leaky(), LEAKY, SEED, path, device="cpu")

    def guarded(names):
        def op(*args):
            for name, a in zip(names, args):
                if judge.is_tensor(a) and a.device.type == "cpu":
                    on_cpu(name)
            return next(a for a in args if judge.is_tensor(a))
        return op
    calls = judge.judged_calls(LEAKY, SEED)
    judge.record_input_checks(types.SimpleNamespace(**{c.op: guarded(c.names) for c in calls}), LEAKY, SEED, path,
                              device="meta")
    return {e.name: e for e in judge.verdicts(LEAKY, SEED, path, ALL_PASSED) if e.group == "input_checks"}


def _raise(message):
    raise RuntimeError(message)


def test_input_checks_are_judged_by_the_error_naming_the_argument(tmp_path):
    named = _with_input_answers(tmp_path, lambda arg: _raise(f"{arg} must be a CUDA tensor, but is on cpu"))
    assert set(named) == {"judge: leaky_relu: device, x on the CPU", "judge: leaky_relu_backward: device, "
                          "grad_output on the CPU", "judge: leaky_relu_backward: device, x on the CPU"}
    assert all(e.outcome == "passed" for e in named.values()), named
    vague = _with_input_answers(tmp_path, lambda arg: _raise("Expected all tensors to be on the same device"))
    assert all("does not name" in e.reason for e in vague.values()), vague
    accepted = _with_input_answers(tmp_path, lambda arg: None)
    assert all("was accepted" in e.reason for e in accepted.values()), accepted


def test_a_fault_while_recording_the_input_checks_is_printed_not_raised(tmp_path, capsys):
    """It runs after every check: raising would be blamed on a test it is not part of, and a
    silent fault once cost every exercise its input_checks points."""
    judge.record_input_checks(_leaky(), LEAKY, SEED, tmp_path, device="meta")  # a folder: cannot be saved
    assert "Traceback" in capsys.readouterr().err


def test_an_unanswered_input_check_fails(tmp_path):
    """The grading process crashed on the wrong-device call (no input check), or ended before it."""
    found = {n: e for n, e in _verdicts(_leaky(), tmp_path, input_checks=True).items() if e.group == "input_checks"}
    assert found and all(e.outcome == "failed" and "no answer" in e.reason for e in found.values()), found


class _Deferred(torch.Tensor):
    pass


def test_a_tensor_subclass_fails_its_own_call_and_costs_no_other(tmp_path):
    """A subclass (which the judge could not load with weights_only) is recorded by its type's name:
    its group fails, and the answers of the calls after it are still there (on the H100 one such
    forward once cost the backward's and the gradients' answers too)."""
    module = _leaky()
    forward = module.leaky_relu
    module.leaky_relu = lambda x, p: forward(x, p).as_subclass(_Deferred)
    found = _verdicts(module, tmp_path)
    assert found["judge: leaky_relu"].outcome == "failed", found
    assert "_Deferred" in found["judge: leaky_relu"].reason
    assert found["judge: leaky_relu_backward"].outcome == "passed", found
    assert found["judge: leaky_relu autograd"].outcome == "passed", found


def test_answers_lost_to_an_earlier_fault_are_not_judged_but_other_missing_ones_fail(tmp_path):
    """The wrong-device and layout calls run after every check: after a check that faulted (the
    CUDA context gone) they found no GPU. Their missing answers are then left out (that check's group pays
    for the fault); without such a fault a missing answer fails, and a recorded wrong one fails either way."""
    path = tmp_path / "outputs.pt"
    judge.record_outputs(_leaky(), LEAKY, SEED, path, device="cpu")  # no layouts, no wrong-device answers
    faulted = [*ALL_PASSED[:-1], TestOutcome(ALL_PASSED[-1].name, ALL_PASSED[-1].group, "failed",
                                             "AcceleratorError: CUDA error: an illegal memory access was encountered")]
    found = judge.verdicts(LEAKY, SEED, path, faulted)
    assert found and not [e for e in found if e.group == "input_checks" or judge.LAYOUT_INFIX in e.name], found
    assert all(e.outcome == "passed" for e in found), found  # the calls recorded first are judged as ever
    missing = [e for e in judge.verdicts(LEAKY, SEED, path, ALL_PASSED) if e.outcome == "failed"]
    assert {e.group for e in missing} >= {"input_checks"} and any(judge.LAYOUT_INFIX in e.name for e in missing)
    assert all("no answer" in e.reason or "gave no output" in e.reason for e in missing), missing
    wrong = _leaky(slope_used=0.3)
    path2 = tmp_path / "wrong.pt"
    judge.record_outputs(wrong, LEAKY, SEED, path2, device="cpu")
    judge.record_layouts(wrong, LEAKY, SEED, path2, device="cpu")
    assert any(e.outcome == "failed" and judge.LAYOUT_INFIX in e.name for e in judge.verdicts(LEAKY, SEED, path2, faulted))


LOST = "CUDA error: an illegal memory access was encountered"


def _faulting_on_layouts():
    """LeakyReLU whose forward loses the CUDA context on a non-contiguous input (the judge's layout calls)."""
    module = _leaky()
    forward = module.leaky_relu
    module.leaky_relu = lambda x, p: forward(x, p) if x.is_contiguous() else _raise(LOST)
    return module


def test_a_fault_in_a_layout_call_costs_its_group_not_the_input_checks_after_it(tmp_path):
    """A layout call (made after every check) that loses the CUDA context leaves the wrong-device calls
    after it no GPU: their answers are not asked for, and not judged; the layout's own answer, the fault,
    fails its group. Seen on the H200: an unguarded halo read past a strided copy's allocation there."""
    module = _faulting_on_layouts()
    path = tmp_path / "outputs.pt"
    judge.record_outputs(module, LEAKY, SEED, path, device="cpu")
    judge.record_layouts(module, LEAKY, SEED, path, device="cpu")
    judge.record_input_checks(module, LEAKY, SEED, path, device="cpu")
    outputs, _ = judge.load_outputs(path)
    assert not [n for n in outputs if judge.DEVICE_INFIX in n], "asked on a GPU the fault had lost"
    found = judge.verdicts(LEAKY, SEED, path, ALL_PASSED)
    assert not [e for e in found if e.group == "input_checks"], found
    faulted = [e for e in found if e.outcome == "failed"]
    assert faulted and all(judge.LAYOUT_INFIX in e.name and e.group == "forward" for e in faulted), faulted
    assert LOST in faulted[0].reason
    # the same answers without the fault's mark: the wrong-device calls missing fail, as any missing answer
    outputs.pop(judge.CONTEXT_LOST_KEY)
    judge.save_atomic(path, outputs)
    assert any(e.group == "input_checks" and "no answer" in e.reason
               for e in judge.verdicts(LEAKY, SEED, path, ALL_PASSED))


def test_the_last_calls_are_made_once_and_a_fault_among_them_is_named_for_the_fresh_image(tmp_path):
    """LastCalls: the layouts and the wrong-device calls, made once per image; a call among them that loses
    the CUDA context is returned (the grading process then times in a fresh image), and that fresh image
    makes none of them again (the fault's answer is in the file): its op is never called there."""
    path = tmp_path / "outputs.pt"
    judge.record_outputs(_leaky(), LEAKY, SEED, path, device="cpu")
    last = judge.LastCalls(_leaky(), LEAKY, SEED, path, device="cpu")
    assert last.make() is None and last.make() is None
    outputs, _ = judge.load_outputs(path)
    assert [n for n in outputs if judge.LAYOUT_INFIX in n] and [n for n in outputs if judge.DEVICE_INFIX in n]

    module = _faulting_on_layouts()
    path2 = tmp_path / "faulted.pt"
    judge.record_outputs(module, LEAKY, SEED, path2, device="cpu")
    faulted = judge.LastCalls(module, LEAKY, SEED, path2, device="cpu").make()
    assert faulted and judge.LAYOUT_INFIX in faulted, faulted
    called = []
    fresh = types.SimpleNamespace(**{name: (lambda *a, name=name: called.append(name))
                                     for name in vars(_leaky())})
    assert judge.LastCalls(fresh, LEAKY, SEED, path2, device="cpu").make() is None
    assert not called, called


def test_a_fresh_image_records_what_the_faulted_one_left_unasked(tmp_path):
    """A forward call that lost the CUDA context ends the recording (every later call would fail); the fresh
    image (go_on) keeps the fault as that call's answer and records the rest, its gradients included: a
    fault in the forward costs the forward's group, not the gradients' ones."""
    lost = "CUDA error: an illegal memory access was encountered"
    first = types.SimpleNamespace(**vars(_leaky()))
    first.leaky_relu = lambda x, p: (_ for _ in ()).throw(RuntimeError(lost))
    path = tmp_path / "outputs.pt"
    problem = judge.record_outputs(first, LEAKY, SEED, path, device="cpu")
    assert problem and lost in problem, problem
    recorded, _ = judge.load_outputs(path)
    assert len(recorded) == 1 and lost in next(iter(recorded.values()))["error"], recorded
    assert judge.record_outputs(_leaky(), LEAKY, SEED, path, device="cpu", go_on=True) is None
    outputs, _ = judge.load_outputs(path)
    calls = judge.judged_calls(LEAKY, SEED)
    expected = {c.label for c in calls} | {c.label + judge.GRADS_SUFFIX for c in calls if c.grad_args}
    assert set(outputs) == expected, sorted(set(outputs) ^ expected)
    assert lost in outputs[calls[0].label]["error"], "the faulted call's answer is the fault, not asked again"
    grads = outputs[calls[0].label + judge.GRADS_SUFFIX]
    assert not (isinstance(grads, dict) and "error" in grads), grads
    # a later image replays every answered step (its one-time work done unwatched again), not the fault
    again, made = _leaky(), []
    for name, f in vars(_leaky()).items():
        setattr(again, name, lambda *a, f=f, name=name: made.append(name) or f(*a))
    assert judge.record_outputs(again, LEAKY, SEED, path, device="cpu", go_on=True) is None
    # leaky_relu once: the gradients' forward, not the faulted call
    assert "leaky_relu_backward" in made and made.count("leaky_relu") == 1, made
    assert judge.load_outputs(path)[0].keys() == outputs.keys()


@pytest.mark.parametrize("s", spec.all_specs(), ids=lambda s: s.exercise)
def test_the_timed_outputs_verdicts_have_a_name_each(s, tmp_path):
    """One verdict per timed output's group (01 and 02 time forward and backward, 09 three groups): each
    its own name, as every outcome of a report (its rows and the gradebook's feedback are keyed by name)."""
    verdicts = judge.timed_verdicts(s, tmp_path / "none.pt")
    names = [v.name for v in verdicts]
    assert len(names) == len(set(names)), names
    assert all(v.outcome == "failed" for v in verdicts), "a timing that saved nothing fails each group"


def test_a_calls_reference_is_computed_once_for_it_and_its_layouts(tmp_path, monkeypatch):
    """The parent's re-checks compute each judged call's float64 reference (on the CPU) once, for the call
    and each layout of it (the same values), not once per answer: the parent's scoring is a grade's tail."""
    computed = []
    real = judge._reference_answer
    monkeypatch.setattr(judge, "_reference_answer", lambda call: computed.append(call.label) or real(call))
    found = _verdicts(_leaky(), tmp_path)
    layouts = [n for n in found if judge.LAYOUT_INFIX in n]
    assert layouts and all(e.outcome == "passed" for e in found.values()), found
    assert len(computed) == len(set(computed)) == len(judge.judged_calls(LEAKY, SEED)), computed


def test_the_backward_of_gradients_runs_through_the_callers_hook():
    """judge.gradients hands its backward step and the leaves to `backward` (the gradient property observes
    it there, on a side stream, with a mark after it): the step runs once; the gradients are the ones it
    made, or what the hook returns in their place (the copies the current stream read)."""
    from grader.verify.judge import cotangent, gradients
    from grader.verify.spec import AuditCall

    x = torch.randn(5, dtype=torch.float64)
    call = AuditCall("f", (x, 2.0), ("x", "a"), lambda x, a: x * a, grad_args=(0,))
    steps = []

    def hook(step, leaves):
        steps.append(step)
        step()
        assert len(leaves) == 1 and leaves[0].grad is not None

    (grad,) = gradients(lambda x, a: x * a, call, [x, 2.0], 1, backward=hook)
    assert len(steps) == 1
    assert torch.allclose(grad, 2 * cotangent((5,), 1))
    (plain,) = gradients(lambda x, a: x * a, call, [x, 2.0], 1)
    assert torch.equal(grad, plain)
    read = torch.zeros(5, dtype=torch.float64)
    (got,) = gradients(lambda x, a: x * a, call, [x, 2.0], 1, backward=lambda step, leaves: (step(), [read])[1])
    assert got is read
