"""grader.run.mutants: the enumerator, the sampler, materialization, the equivalents file, and one mutant of
01 built as a real extension and graded killed by the checks a CPU runs; grader.run.same_code: 01's mutants
compiled here and their machine code compared with the solution's (`--same-code`)."""
from __future__ import annotations

import json
import math
import os
import shutil

import pytest

from grader.run import mutants as M
from grader.run import same_code as S
from grader.verify.outcomes import ExerciseRow, GroupScore, TestOutcome
from tests.grading import SOLUTIONS

CPP = """\
#include <cstdint>  // a < b in a comment, n + 1
#define LIMIT (a < b)
// TORCH_CHECK(x < y, "in a comment");
namespace {
__global__ void k(const float* x, float* y, int64_t n) {
  const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x;
  if (i < n) y[i] = x[i] * 2.0f;
  __syncthreads();
}
void launch(int64_t n) {
  if (n == 0) return;
  const char* s = "a < b, n + 1";
  TORCH_CHECK(n <= 1024, "n must be at most 1024, got a - b");
  course::check_cuda(t, "x");
  int m = n + 1;
  bool both = n > 4 && m != 3;
}
}  // namespace
COURSE_LIBRARY(m) {
  m.def("op(Tensor x, int n) -> Tensor");
}
"""

PY = '''\
"""Docstring: a < b and n + 1."""
import torch

from grader.toolchain.build import load_library  # a < b

lib = load_library(__file__)


@torch.library.register_fake(lib.qualname("op"))
def f(x, n: int = 3):
    if n < 0:
        raise ValueError("n < 0")  # n - 1
    if x.dim() == 0:
        return x
    torch._check(n >= 1, lambda: "n + 1")
    return x * n + 1
'''


def mutants_of(text, file="k.cu"):
    return M.source_mutants(text, file, "99_synthetic")


def changes(ms):
    """(operator, line, the line after) of each mutant."""
    return {(m.operator, m.line, m.new_line.strip()) for m in ms}


def test_cpp_operators_each_make_their_change():
    found = changes(mutants_of(CPP))
    expected = {
        ("relational", 7, "if (i <= n) y[i] = x[i] * 2.0f;"),
        ("relational", 7, "if (i >= n) y[i] = x[i] * 2.0f;"),
        ("relational", 11, "if (n != 0) return;"),
        ("arithmetic", 7, "if (i < n) y[i] = x[i] / 2.0f;"),
        ("arithmetic", 6, "const int64_t i = blockIdx.x * int64_t(blockDim.x) - threadIdx.x;"),
        ("drop-one", 15, "int m = n;"),
        ("arithmetic", 15, "int m = n - 1;"),
        ("constant", 7, "if (i < n) y[i] = x[i] * 3.0f;"),
        ("constant", 7, "if (i < n) y[i] = x[i] * 1.0f;"),
        ("constant", 11, "if (n == 1) return;"),
        ("threshold", 13, 'TORCH_CHECK(n <= 2048, "n must be at most 1024, got a - b");'),
        ("threshold", 13, 'TORCH_CHECK(n <= 512, "n must be at most 1024, got a - b");'),
        ("logical", 16, "bool both = n > 4 || m != 3;"),
        ("remove-sync", 8, "if (false) __syncthreads();"),
        ("remove-check", 13, 'if (false) TORCH_CHECK(n <= 1024, "n must be at most 1024, got a - b");'),
        ("remove-check", 14, 'if (false) course::check_cuda(t, "x");'),
        ("remove-return", 11, "if (n == 0) if (false) return;"),
        ("guard-true", 7, "if (true) y[i] = x[i] * 2.0f;"),
        ("swap-index", 6, "const int64_t i = blockIdx.y * int64_t(blockDim.x) + threadIdx.x;"),
        ("swap-index", 6, "const int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.y;"),
    }
    assert expected <= found, sorted(expected - found)


def test_cpp_comments_strings_preprocessor_and_registration_are_not_mutated():
    ms = mutants_of(CPP)
    left_alone = (1, 2, 3, 12, 19, 20, 21)
    assert not [m.id for m in ms if m.line in left_alone]
    # nor the string inside a mutated line, nor a pointer's `*`, nor the template-free `<<<`
    for m in ms:
        assert '"' not in m.old and m.old_line.count('"') == m.new_line.count('"')
    assert not [m for m in ms if m.line == 5]  # `const float* x`: a declarator, not a product


def test_path_marks_are_not_mutated_but_the_code_beside_them_is():
    """A planner path's mark (course::took, with the if that guards it alone; Python's lib.took) computes
    nothing the op returns: no mutant inside it; the statements around it are mutated as before."""
    cpp = ("void launch(int64_t n, int64_t m) {\n"
           "  if (n >= (int64_t(1) << 31)) course::took<scalar_t>(n > 0 ? \"a\" : \"b\");\n"
           "  course::took(\n      m == 1 ? \"k1\" : \"k3\");\n"
           "  if (n < m) x = n + 1;\n}\n")
    ms = M.source_mutants(cpp, "k.cu", "01_x")
    assert {m.line for m in ms} == {5}, [m.diff for m in ms]
    py = "def f(x, v):\n    lib.took(\"a\" if v == 2 else \"b\", x.dtype)\n    return x + 1\n"
    ms = M.source_mutants(py, "k.py", "01_x")
    assert ms and {m.line for m in ms} == {3}, [m.diff for m in ms]
    for folder in sorted(SOLUTIONS.iterdir()):  # and in the solutions: no mutant's line marks a path
        if folder.is_dir() and folder.name[:2].isdigit():
            assert not [m.id for m in M.exercise_mutants(folder) if "took(" in m.old_line and "took(" in m.new_line
                        and m.old_line.strip().startswith(("if", "course::took", "lib.took"))]


def test_cpp_no_if_false_before_a_braceless_body_followed_by_else():
    ms = mutants_of("void f(int n) {\n  if (n) TORCH_CHECK(n > 1, \"m\");\n  else g();\n}\n")
    assert not [m for m in ms if m.operator == "remove-check"]


def test_cpp_a_return_that_is_not_an_early_exit_is_kept():
    ms = mutants_of("int f(int n) {\n  int m = n;\n  return m;\n}\n")
    assert not [m for m in ms if m.operator == "remove-return"]


def test_python_operators_each_make_their_change():
    found = changes(mutants_of(PY, "op.py"))
    expected = {
        ("relational", 11, "if n <= 0:"),
        ("relational", 11, "if n >= 0:"),
        ("relational", 13, "if x.dim() != 0:"),
        ("guard-true", 11, "if False:"),
        ("remove-return", 14, "x"),
        ("remove-check", 15, 'if False: torch._check(n >= 1, lambda: "n + 1")'),
        ("arithmetic", 16, "return x / n + 1"),
        ("arithmetic", 16, "return x * n - 1"),
        ("drop-one", 16, "return x * n"),
        ("constant", 10, "def f(x, n: int = 4):"),
    }
    assert expected <= found, sorted(expected - found)


def test_python_docstrings_comments_imports_and_registration_are_not_mutated():
    ms = mutants_of(PY, "op.py")
    assert not [m for m in ms if m.line in (1, 2, 4, 6, 9)], [m.id for m in ms if m.line in (1, 2, 4, 6, 9)]
    assert not [m for m in ms if m.line == 12 and m.operator != "arithmetic"]  # the raise's message is a string


def test_ids_are_unique_stable_and_survive_an_edit_below():
    ms = mutants_of(CPP)
    ids = [m.id for m in ms]
    assert len(ids) == len(set(ids))
    assert ids == [m.id for m in mutants_of(CPP)]
    edited = CPP.replace("int m = n + 1;", "int m = n + 2;  // changed")
    above = {m.id for m in ms if m.line < 15}
    assert above <= {m.id for m in mutants_of(edited)}
    for m in ms:
        number, file, line, op, digest = m.id.split(":")
        assert (number, file, int(line), op, len(digest)) == ("99", "k.cu", m.line, m.operator, 8)


def test_every_solution_mutant_changes_one_line_and_applies():
    for folder in sorted(SOLUTIONS.iterdir()):
        if not folder.is_dir():
            continue
        ms = M.exercise_mutants(folder)
        assert ms, folder.name
        assert len({m.id for m in ms}) == len(ms)
        texts = {}
        for m in ms[:: max(1, len(ms) // 40)]:
            before = texts.setdefault(m.file, (folder / m.file).read_text())
            after = m.apply(before).splitlines()
            diff = [i for i, (a, b) in enumerate(zip(before.splitlines(), after)) if a != b]
            assert diff == [m.line - 1] and len(after) == len(before.splitlines()), m.id


def test_materialize_and_write_slot_differ_from_the_solution_in_exactly_one_line(tmp_path):
    folder = SOLUTIONS / "01_leaky_relu"
    ms = M.exercise_mutants(folder)
    chosen = [next(m for m in ms if m.file.endswith(s)) for s in (".cu", ".cpp", ".py")]
    slot = tmp_path / "slot" / folder.name
    for m in chosen:
        for dst in (m.materialize(tmp_path / m.operator / m.file), None):
            if dst is None:
                M.write_slot(slot, folder, m.texts())
                dst = slot
            lines = []
            for p in sorted(folder.iterdir()):
                if p.is_file():
                    old, new = p.read_text().splitlines(), (dst / p.name).read_text().splitlines()
                    assert len(old) == len(new)
                    lines += [(p.name, i + 1) for i, (a, b) in enumerate(zip(old, new)) if a != b]
            assert lines == [(m.file, m.line)], m.id
    M.write_slot(slot, folder)  # back to the solution
    assert all((slot / p.name).read_bytes() == p.read_bytes() for p in folder.iterdir() if p.is_file())


def test_every_equivalent_line_names_a_mutant_of_todays_solutions():
    """An edit above a listed mutant moves its line, and so its id: the stale line then classifies
    nothing, and the mutant it meant counts as a survivor until someone notices the runner's warning."""
    ids = {m.id for folder in sorted(SOLUTIONS.iterdir()) if folder.is_dir() for m in M.exercise_mutants(folder)}
    stale = [i for i in M.read_equivalents() if i not in ids]
    assert not stale, f"tests/mutants/equivalent.txt names no mutant of today's solutions (moved lines?): {stale}"


def test_sample_is_stratified_seeded_and_reproducible():
    every = {x: M.exercise_mutants(SOLUTIONS / x) for x in ("01_leaky_relu", "03_transpose", "05_matmul")}
    n = 20
    a, b, c = M.sample(every, n, 1), M.sample(every, n, 1), M.sample(every, n, 2)
    share = math.ceil(n / len(every))
    assert {x: len(v) for x, v in a.items()} == {x: min(share, len(every[x])) for x in every}
    assert {x: [m.id for m in v] for x, v in a.items()} == {x: [m.id for m in v] for x, v in b.items()}
    assert {x: [m.id for m in v] for x, v in a.items()} != {x: [m.id for m in v] for x, v in c.items()}
    # an exercise's pick does not depend on which other exercises are sampled
    alone = M.sample({"03_transpose": every["03_transpose"]}, share, 1)
    assert [m.id for m in alone["03_transpose"]] == [m.id for m in a["03_transpose"]]


def test_rounds_hold_at_most_width_of_each_exercise_one_slot_each():
    every = {x: M.exercise_mutants(SOLUTIONS / x)[:7] for x in ("01_leaky_relu", "02_elu")}
    rounds = M.plan_rounds(every, 3)
    assert [len(r) for r in rounds] == [6, 6, 2]
    for r in rounds:
        slots = [(m.exercise, s) for m, s in r]
        assert len(slots) == len(set(slots)) and all(s < 3 for _, s in slots)


def test_equivalents_file_parses_and_rejects_a_line_without_reason(tmp_path):
    listed = M.read_equivalents()
    assert all(len(k.split(":")) == 5 and v for k, v in listed.items())
    bad = tmp_path / "eq.txt"
    bad.write_text("# header\n01:leaky_relu.cu:100:constant:2a3e3ac6 # launch's shared memory unused\n")
    assert M.read_equivalents(bad) == {"01:leaky_relu.cu:100:constant:2a3e3ac6": "launch's shared memory unused"}
    bad.write_text("01:leaky_relu.cu:100:constant:2a3e3ac6\n")
    with pytest.raises(ValueError):
        M.read_equivalents(bad)


def test_classify():
    def row(status="graded", error="", tests=(("a", "passed", ""),), groups=(("g", "passed", ""),)):
        return ExerciseRow("01_leaky_relu", "", status, error, 0.0, 1,
                           {g: GroupScore(0.0, 1, state, reason) for g, state, reason in groups},
                           tuple(TestOutcome(n, "g", o, r) for n, o, r in tests))

    assert M.classify(row())[0] == "survived"
    assert M.classify(row(groups=[("performance", "partial", "0.8x")]))[0] == "killed"
    assert M.classify(row(status="timed out", error="hang"))[0] == "killed"
    assert M.classify(row(status="build failed", error="x.cu:3: error: y", tests=()))[0] == "stillborn"
    assert M.classify(row(tests=[("a", "failed", "could not load ex01: ImportError")]))[0] == "stillborn"
    assert M.classify(row(tests=[("a", "failed", "wrong values")])) == ("killed", "a: wrong values")


def test_a_removed_input_check_of_01_is_built_and_graded_killed(tmp_path):
    """End to end, on the CPU: 01's `course::check_cuda` removed, built as a real extension in its slot,
    graded by the checks a CPU runs (the CPU-tensor input check catches it)."""
    mutant = next(m for m in M.exercise_mutants(SOLUTIONS / "01_leaky_relu")
                  if m.operator == "remove-check" and "check_cuda" in m.old_line)
    assert M.main(["--ex", "01", "--id", mutant.id, "--out", str(tmp_path), "--fresh", "--timeout", "300"]) == 0
    report = json.loads((tmp_path / "report.json").read_text())
    (result,) = report["mutants"]
    assert result["id"] == mutant.id and result["outcome"] == "killed", result
    assert "input_checks" in result["why"] or "CPU" in result["why"], result
    (row,) = report["exercises"]
    assert (row["killed"], row["survived"], row["kill_rate"]) == (1, 0, 1.0)


def test_an_interrupted_round_keeps_the_kills_of_the_processes_that_had_ended(monkeypatch, tmp_path):
    """Ctrl-C (or the device call's time limit) arriving after a mutant's grading process failed a check,
    while others still run: that kill is reported, not lost with the round, and the run says it was
    interrupted (130). The real build and grading process; only the interrupt's moment is chosen."""
    from grader.run import gate

    mutants = M.exercise_mutants(SOLUTIONS / "01_leaky_relu")
    mutant = next(m for m in mutants if m.operator == "remove-check" and "check_cuda" in m.old_line)
    # a kernel change: no check a CPU runs fails it, so only the judge (not run once interrupted) could
    passing = next(m for m in mutants if m.file.endswith(".cu") and m.operator == "arithmetic")
    real_run = gate.run

    def run_then_interrupt(*args, **kwargs):
        real_run(*args, **kwargs)
        raise KeyboardInterrupt

    monkeypatch.setattr(gate, "run", run_then_interrupt)
    assert M.main(["--ex", "01", "--id", mutant.id, "--id", passing.id, "--out", str(tmp_path), "--fresh",
                   "--timeout", "300"]) == 130
    outcomes = {r["id"]: r["outcome"] for r in json.loads((tmp_path / "report.json").read_text())["mutants"]}
    assert outcomes == {mutant.id: "killed", passing.id: "not graded"}, outcomes


def test_listings_normalise_anonymous_names_and_line_info_columns_only():
    """nvcc names an anonymous namespace `_GLOBAL__N__<hash>_<len>_<file>_<hash>_<pid>` (and an internal
    name `_INTERNAL_...`): two compiles of one file differ there, even in the mangled length (a pid of
    five digits or six); the file's name and everything around it still count."""
    one = "_ZN52_GLOBAL__N__d462c6db_13_leaky_relu_cu_f2ab6284_3002217leaky_relu_kernelIfEEvPKT_"
    two = "_ZN53_GLOBAL__N__0badf00d_13_leaky_relu_cu_12345678_30022117leaky_relu_kernelIfEEvPKT_"
    assert S.anon_normalised(one) == S.anon_normalised(two) != one
    assert "17leaky_relu_kernel" in S.anon_normalised(one) and "leaky_relu_cu" in S.anon_normalised(one)
    assert S.anon_normalised(one) != S.anon_normalised(one.replace("kernelIf", "kernelId"))
    other_file = "_ZN44_GLOBAL__N__d462c6db_6_elu_cu_f2ab6284_3002217leaky_relu_kernelIfEEvPKT_"
    assert S.anon_normalised(other_file) != S.anon_normalised(one)
    internal = ("_ZN50_INTERNAL_5fdf270c_13_leaky_relu_cu_0277435e_3058352_GLOBAL__N__5fdf270c_13_leaky_relu_cu"
                "_0277435e_3058317leaky_relu_kernel")
    elsewhen = ("_ZN48_INTERNAL_5fdf270c_13_leaky_relu_cu_0277435e_61050_GLOBAL__N__5fdf270c_13_leaky_relu_cu"
                "_0277435e_61017leaky_relu_kernel")  # nvcc's process 610
    assert S.anon_normalised(internal) == S.anon_normalised(elsewhen)
    # PTX's line info writes the names as bytes: read as text first
    ptx = ".b8 " + ",".join(str(b) for b in one.encode()) + "\n.b8 0\n"
    assert S.ptx_normalised(ptx) == S.ptx_normalised(".b8 " + ",".join(str(b) for b in two.encode()) + ",0\n")
    # line info's columns move with a change earlier in the line; its lines do not
    loc = "\t.loc\t1 80 5\n\t.loc\t2 48 3, function_name $L__info_string0, inlined_at 1 39 3\n"
    assert S.ptx_normalised(loc) == S.ptx_normalised(loc.replace(" 80 5", " 80 16").replace("39 3", "39 14"))
    assert S.ptx_normalised(loc) != S.ptx_normalised(loc.replace(" 80 5", " 81 5"))
    assert S.ptx_normalised(loc) != S.ptx_normalised(loc.replace("1 39 3", "1 40 3"))


@pytest.mark.skipif(not (shutil.which("nvcc") or os.path.isfile("/usr/local/cuda/bin/nvcc"))
                    or not shutil.which("objdump"), reason="no CUDA compiler or no objdump here")
def test_same_code_tells_01s_dead_register_store_from_a_block_size(monkeypatch, tmp_path):
    """On the CPU, 01 built for the graded H200 (9.0a): the backward's loop one step past its register
    arrays (k <= V: nvcc drops the dead element) compiles to the solution's own host object and PTX;
    a block of 257 threads for 256 does not (the launch differs in the host code); a .py mutant is not
    decided. About 30 s on two cores (01's build once, then three compiles of one file)."""
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "9.0a")
    mutants = {m.id: m for m in M.exercise_mutants(SOLUTIONS / "01_leaky_relu")}
    dead_store = mutants["01:leaky_relu.cu:71:relational:a338241d"]
    assert "k <= V" in dead_store.new_line
    block = mutants["01:leaky_relu.cu:80:constant:016ac02c"]
    assert "257" in block.new_line
    same = S.same_code(dead_store)
    assert same.same is True, same
    assert "host objects and PTX identical" in same.why and "sm_90a" in same.why and "-O3" in same.why
    other = S.same_code(block)
    assert other.same is False and "leaky_relu.cuda.o: host" in other.differ, other
    python = next(m for m in mutants.values() if m.file.endswith(".py"))
    assert S.same_code(python).same is None
    # the folder compiled in holds the solution again
    assert (S.WORK / "01_leaky_relu" / "leaky_relu.cu").read_text() == (SOLUTIONS / "01_leaky_relu" / "leaky_relu.cu").read_text()
    # --same-code --id ... --append: the same-code mutant's line appended to the equivalents file, parsed
    # as the run reads it; the other listed as different
    printed: list[str] = []
    equivalents = tmp_path / "equivalent.txt"
    equivalents.write_text("# a header\n")
    every = {"01_leaky_relu": list(mutants.values())}
    assert S.check_survivors(tmp_path / "none.json", every, {}, [dead_store.id, block.id], append=equivalents,
                             out=printed.append) == 0
    assert M.read_equivalents(equivalents) == {dead_store.id: same.why}, "\n".join(printed)
    header = next(k for k, line in enumerate(printed) if line.startswith("different code"))
    assert printed[header + 1].strip().startswith(block.id), printed


def test_a_report_drawn_from_another_population_of_the_same_solution_is_named(tmp_path):
    """population_drift: an exercise whose solution the report sampled, but whose mutants this Python
    numbers otherwise (f-string fields are tokens from 3.12 on), is named with both counts; a changed
    solution, an unchanged count, or no report, is not."""
    report = tmp_path / "report.json"
    assert M.population_drift(report, {"06_conv2d": 10}, {"06_conv2d": "a"}) == []
    report.write_text(json.dumps({"python": "3.12.3", "exercises": [
        {"exercise": "06_conv2d", "generated": 12}, {"exercise": "10_cudnn_conv", "generated": 7},
        {"exercise": "01_leaky_relu", "generated": 5}],
        "mutants": [{"exercise": "06_conv2d", "solution_key": "a"}, {"exercise": "10_cudnn_conv", "solution_key": "old"},
                    {"exercise": "01_leaky_relu", "solution_key": "c"}]}))
    lines = M.population_drift(report, {"06_conv2d": 10, "10_cudnn_conv": 9, "01_leaky_relu": 5},
                               {"06_conv2d": "a", "10_cudnn_conv": "b", "01_leaky_relu": "c"})
    assert len(lines) == 1 and lines[0].startswith("06_conv2d:") and "12 mutants" in lines[0]
    assert "Python 3.12.3" in lines[0] and "generates 10" in lines[0]
