"""The student tree is generated from solutions/ and must stay in sync with it."""
from pathlib import Path

import pytest

from grader.authoring import regions, stubs


def test_exercises_in_sync_with_solutions():
    problems = stubs.check()
    assert not problems, "run `make exercises`:\n" + "\n".join(problems)


def test_every_solution_has_regions_and_a_readme():
    for folder in sorted(p for p in stubs.SOLUTIONS.iterdir() if p.is_dir()):
        assert (folder / "README.md").exists(), f"{folder.name} has no README.md"
        sources = [p for p in folder.iterdir() if p.suffix in stubs.COMMENT]
        assert any("BEGIN SOLUTION" in p.read_text() for p in sources), f"{folder.name} has no student region"


def test_generated_files_say_they_are_generated():
    for path in stubs.EXERCISES.rglob("*"):
        if path.is_file() and (path.suffix in stubs.COMMENT or path.suffix == ".md"):
            assert "GENERATED from solutions/" in path.read_text().splitlines()[0], path


CPP = """int f() {
  // BEGIN SOLUTION
  // TODO: return the answer.
  // STUB: TORCH_CHECK(false, "f is not implemented yet");
  int a = 40;
  return a + 2;
  // END SOLUTION
}
"""


def test_region_keeps_markers_todo_and_stub():
    out = stubs.stub_text(CPP, ".cpp", "x.cpp")
    assert "// BEGIN SOLUTION" in out and "// END SOLUTION" in out
    assert "// TODO: return the answer." in out
    assert "about 2 lines" in out
    assert '  TORCH_CHECK(false, "f is not implemented yet");' in out
    assert "return a + 2" not in out and "STUB:" not in out


def test_python_region_raises_by_default():
    py = "def f():\n    # BEGIN SOLUTION\n    # TODO: compute.\n    return 1\n    # END SOLUTION\n"
    out = stubs.stub_text(py, ".py", "x.py")
    assert 'raise NotImplementedError("x.py: line 2 is not implemented yet")' in out
    compile(out, "x.py", "exec")


def test_text_outside_regions_is_unchanged():
    out = stubs.stub_text(CPP, ".cpp", "x.cpp")
    assert out.startswith("int f() {\n") and out.endswith("}\n")


@pytest.mark.parametrize(
    "text, message",
    [
        ("// BEGIN SOLUTION\n// TODO: a\n// BEGIN SOLUTION\n// END SOLUTION\n", "x.cu:3: nested"),
        ("// BEGIN SOLUTION\n// TODO: a\nint x;\n", "x.cu:1: BEGIN SOLUTION is never closed"),
        ("int x;\n// END SOLUTION\n", "x.cu:2: END SOLUTION without"),
        ("// BEGIN SOLUTION\nint x;\n// END SOLUTION\n", "x.cu:1: a solution region needs"),
    ],
)
def test_bad_regions_are_errors_with_line_numbers(text, message):
    with pytest.raises(stubs.RegionError, match=message):
        stubs.stub_text(text, ".cu", "x.cu")


def test_generate_fails_before_touching_anything(tmp_path):
    (tmp_path / "solutions" / "99_bad").mkdir(parents=True)
    (tmp_path / "solutions" / "99_bad" / "bad.cu").write_text("// BEGIN SOLUTION\n// TODO: x\n")
    with pytest.raises(stubs.RegionError):
        stubs.generate(tmp_path / "solutions", tmp_path / "out")


@pytest.mark.parametrize(
    "text, message",
    [
        ("int f() {\n// BEGIN SOLUTION\n// TODO: a\n// BEGIN SOLUTION\n// END SOLUTION\n}\n", "x.cu:4: nested"),
        ("int f() {\n// BEGIN SOLUTION\n// TODO: a\n}\n", "x.cu:2: BEGIN SOLUTION is never closed"),
        ("int x;\n// END SOLUTION\n", "x.cu:2: END SOLUTION without"),
    ],
)
def test_notebooks_read_regions_with_the_same_parser(text, message):
    """grader/authoring/regions.py is the one parser: the notebooks' named regions fail as the stubs do."""
    with pytest.raises(regions.RegionError, match=message):
        regions.regions_of(Path("x.cu"), text)


def test_named_regions_are_the_stubbed_ones():
    (region,) = regions.regions_of(Path("x.cpp"), CPP)
    assert region.name == "f" and region.todo == ["  // TODO: return the answer."]
    assert region.teaching_lines() == ["// TODO: return the answer.", "int a = 40;", "return a + 2;"]


# --- hint levels: LEVEL=steps (the TODO lines, the default) and LEVEL=goal (the GOAL lines) ----------

GOAL_CPP = """int f() {
  // BEGIN SOLUTION
  // GOAL: the answer.
  // TODO: return the answer,
  // TODO:   computed.
  // STUB: TORCH_CHECK(false, "f is not implemented yet");
  int a = 40;
  return a + 2;
  // END SOLUTION
}
"""


def test_goal_level_keeps_the_goal_the_size_and_where_the_steps_are():
    out = stubs.stub_text(GOAL_CPP, ".cpp", "ex/f.cpp", "goal")
    region = out.split("// BEGIN SOLUTION\n")[1].split("  // END SOLUTION")[0]
    assert region == ('  // TODO: the answer.\n'
                      '  // TODO: (the reference solution takes about 2 lines)\n'
                      '  // TODO: (the steps, when you want them: README.md, Hints, "f.cpp: f")\n'
                      '  TORCH_CHECK(false, "f is not implemented yet");\n')


def test_steps_level_ignores_goal_lines():
    assert stubs.stub_text(GOAL_CPP, ".cpp", "x.cpp") == stubs.stub_text(GOAL_CPP.replace("  // GOAL: the answer.\n", ""),
                                                                        ".cpp", "x.cpp")
    py = ("def f():\n    # BEGIN SOLUTION\n    # GOAL: one.\n    # TODO: return 1.\n    return 1\n    # END SOLUTION\n\n"
          "def g():\n    # BEGIN SOLUTION\n    # GOAL: two.\n    # TODO: return 2.\n    return 2\n    # END SOLUTION\n")
    out = stubs.stub_text(py, ".py", "x.py")
    assert out == stubs.stub_text(py.replace("    # GOAL: one.\n", "").replace("    # GOAL: two.\n", ""), ".py", "x.py")
    assert '"x.py: line 8 is not implemented yet"' in out  # numbered as if there were no GOAL lines


def test_goal_level_needs_a_goal_in_every_region():
    with pytest.raises(stubs.RegionError, match=r"x.cpp:2: LEVEL=goal and LEVEL=open need a `// GOAL: \.\.\.` line"):
        stubs.stub_text(CPP, ".cpp", "x.cpp", "goal")
    with pytest.raises(ValueError, match="unknown level 'some'"):
        stubs.stub_text(CPP, ".cpp", "x.cpp", "some")


def test_goal_lines_stay_out_of_the_notebooks():
    (region,) = regions.regions_of(Path("x.cpp"), GOAL_CPP)
    assert region.goal == ["  // GOAL: the answer."]
    assert region.teaching_lines()[0] == "// TODO: return the answer,"


TWO_REGIONS_CU = """__global__ void k(float* y) {
  // BEGIN SOLUTION
  // GOAL: load.
  // TODO: load the tile
  // END SOLUTION
  // BEGIN SOLUTION
  // GOAL: store.
  // TODO: store it, then sync
  // END SOLUTION
}
"""
README = "# 99\n\n## Goal\nx\n\n## Hints\n- a general hint\n\n## Run\nmake grade\n"


def _goal_tree(tmp_path):
    src = tmp_path / "solutions" / "99_two"
    src.mkdir(parents=True)
    (src / "two.cu").write_text(TWO_REGIONS_CU)
    (src / "two.cpp").write_text(GOAL_CPP)
    (src / "README.md").write_text(README)
    return src


def test_goal_readme_has_the_hints_collapsed_from_gentle_to_explicit(tmp_path):
    src = _goal_tree(tmp_path)
    out = tmp_path / "exercises"
    stubs.generate(src.parent, out, "goal")
    readme = (out / "99_two" / "README.md").read_text()
    assert readme.splitlines()[0] == ("<!-- GENERATED from solutions/99_two/README.md by `make exercises LEVEL=goal`: "
                                      "edit only inside the BEGIN/END SOLUTION regions. -->")
    hints = readme.split("## Hints\n")[1].split("## Run")[0]
    summaries = [l for l in hints.splitlines() if l.startswith("<summary>")]
    assert summaries == ["<summary>General hints</summary>",
                         "<summary>two.cu: k, region 1 of 2 (line 3), step by step</summary>",
                         "<summary>two.cu: k, region 2 of 2 (line 8), step by step</summary>",
                         "<summary>two.cpp: f (line 3), step by step</summary>"]
    assert hints.count("<details>") == hints.count("</details>") == 4
    assert "- a general hint" in hints and "```text\nstore it, then sync\n```" in hints
    assert "```text\nreturn the answer,\n  computed.\n```" in hints
    cu = (out / "99_two" / "two.cu").read_text().splitlines()
    assert cu[2] == "  // BEGIN SOLUTION" and '"two.cu: k, region 1 of 2"' in cu[5]  # line 3, as the README says
    assert cu[7] == "  // BEGIN SOLUTION" and '"two.cu: k, region 2 of 2"' in cu[10]
    assert "load the tile" not in "\n".join(cu)


def test_each_exercise_checks_at_the_level_its_header_says(tmp_path):
    src = _goal_tree(tmp_path)
    (tmp_path / "solutions" / "98_one").mkdir()
    (tmp_path / "solutions" / "98_one" / "one.cpp").write_text(GOAL_CPP)
    (tmp_path / "solutions" / "98_one" / "README.md").write_text(README)
    out = tmp_path / "exercises"
    stubs.generate(src.parent, out, {"99_two": "goal"})
    assert stubs.levels_of(out) == {"98_one": "steps", "99_two": "goal"}
    again = tmp_path / "again"
    stubs.generate(src.parent, again, stubs.levels_of(out))
    assert stubs.differences(again, out) == []
    stubs.generate(src.parent, again, "steps")
    assert stubs.differences(again, out) == ["differs from its generated version: exercises/99_two/README.md",
                                             "differs from its generated version: exercises/99_two/two.cpp",
                                             "differs from its generated version: exercises/99_two/two.cu"]


def test_every_region_of_the_solutions_opens_with_its_goal():
    """LEVEL=goal needs a goal in every region: its GOAL lines first, then the TODO lines (the steps)."""
    missing = []
    for path in sorted(stubs.SOLUTIONS.rglob("*")):
        if path.suffix not in stubs.COMMENT or stubs.SKIP.intersection(path.parts):
            continue
        for region in regions.regions_of(path):
            where = f"{path.relative_to(stubs.SOLUTIONS)}: {region.name}"
            n = len(region.goal)
            if not n or region.lines[:n] != region.goal or not region.lines[n].strip().startswith(f"{region.prefix} TODO"):
                missing.append(where)
    assert not missing, "regions that do not open with `GOAL:` lines, then `TODO` lines:\n" + "\n".join(missing)


# --- the open level: OPEN regions hold solution regions, and only LEVEL=open blanks them --------------

OPEN_CU = """__global__ void k(float* y, int n) {
  // BEGIN OPEN
  // GOAL: the whole kernel: y[i] = 2 i for i < n.
  int i = threadIdx.x;
  // BEGIN SOLUTION
  // GOAL: store.
  // TODO: y[i] = 2 * i
  if (i < n) y[i] = 2 * i;
  // END SOLUTION
  // END OPEN
}
int f() {
  // BEGIN OPEN
  // GOAL: the answer.
  // STUB: TORCH_CHECK(false, "f is not implemented yet");
  int a = 40;
  // BEGIN SOLUTION
  // GOAL: add.
  // TODO: return a + 2
  // STUB: TORCH_CHECK(false, "f is not implemented yet");
  return a + 2;
  // END SOLUTION
  // END OPEN
}
int g() {
  // BEGIN SOLUTION
  // GOAL: one.
  // TODO: return 1
  // STUB: TORCH_CHECK(false, "g is not implemented yet");
  return 1;
  // END SOLUTION
}
"""


def test_open_level_blanks_the_open_regions_whole():
    out = stubs.stub_text(OPEN_CU, ".cu", "x.cu", "open")
    assert out == """__global__ void k(float* y, int n) {
  // BEGIN SOLUTION
  // TODO: the whole kernel: y[i] = 2 i for i < n.
  // TODO: (the reference solution takes about 2 lines)
  // END SOLUTION
}
int f() {
  // BEGIN SOLUTION
  // TODO: the answer.
  // TODO: (the reference solution takes about 2 lines)
  TORCH_CHECK(false, "f is not implemented yet");
  // END SOLUTION
}
int g() {
  // BEGIN SOLUTION
  // TODO: one.
  // TODO: (the reference solution takes about 1 line)
  TORCH_CHECK(false, "g is not implemented yet");
  // END SOLUTION
}
"""
    assert [r.name for r in regions.regions_of(Path("x.cu"), out)] == ["k", "f", "g"]


def test_the_other_levels_and_the_notebooks_do_not_see_the_open_lines():
    for level in ("steps", "goal"):
        assert stubs.stub_text(OPEN_CU, ".cu", "x.cu", level) == stubs.stub_text(_no_open(OPEN_CU), ".cu", "x.cu", level)
    ours = regions.regions_of(Path("x.cu"), OPEN_CU)
    theirs = regions.regions_of(Path("x.cu"), _no_open(OPEN_CU))
    assert [(r.name, r.begin, r.end, r.lines) for r in ours] == [(r.name, r.begin, r.end, r.lines) for r in theirs]


def _no_open(text: str) -> str:
    lines = text.splitlines(keepends=True)
    drop = regions.open_lines([l.rstrip("\n") for l in lines], "//", "x.cu")
    return "".join(l for i, l in enumerate(lines) if i not in drop)


@pytest.mark.parametrize(
    "text, message",
    [
        ("int f() {\n// BEGIN OPEN\n// GOAL: a\n// BEGIN OPEN\n// END OPEN\n// END OPEN\n}\n", "x.cu:4: nested BEGIN OPEN"),
        ("int f() {\n// BEGIN SOLUTION\n// TODO: a\n// BEGIN OPEN\n// END SOLUTION\n}\n", "x.cu:4: BEGIN OPEN inside the solution region"),
        ("int f() {\n// BEGIN OPEN\n// GOAL: a\n// BEGIN SOLUTION\n// TODO: a\n// END OPEN\n// END SOLUTION\n}\n",
         "x.cu:6: END OPEN inside the solution region opened at line 4"),
        ("int f() {\n// BEGIN OPEN\n// GOAL: a\n}\n", "x.cu:2: BEGIN OPEN is never closed"),
        ("int f() {\n// END OPEN\n}\n", "x.cu:2: END OPEN without"),
        ("int f() {\n// BEGIN OPEN\nint x;\n// END OPEN\n}\n", "x.cu:2: an open region needs a `// GOAL: ...` line"),
    ],
)
def test_bad_open_regions_are_errors_with_line_numbers(text, message):
    for level in stubs.LEVELS:
        with pytest.raises(stubs.RegionError, match=message):
            stubs.stub_text(text, ".cu", "x.cu", level)
    with pytest.raises(regions.RegionError, match=message):
        regions.regions_of(Path("x.cu"), text)


def test_a_region_error_names_the_line_of_the_whole_file():
    text = "int f() {\n// BEGIN OPEN\n// GOAL: a\n// BEGIN SOLUTION\nint x;\n// END SOLUTION\n// END OPEN\n}\n"
    with pytest.raises(stubs.RegionError, match="x.cu:4: a solution region needs"):
        stubs.stub_text(text, ".cu", "x.cu")


def test_open_level_python_region_raises():
    py = ("def f():\n    # BEGIN OPEN\n    # GOAL: all of f.\n    a = 1\n    # BEGIN SOLUTION\n    # GOAL: b.\n"
          "    # TODO: return a.\n    return a\n    # END SOLUTION\n    # END OPEN\n")
    out = stubs.stub_text(py, ".py", "x.py", "open")
    assert "raise NotImplementedError(" in out and "return a" not in out
    compile(out, "x.py", "exec")


def test_the_line_counts_of_a_level(tmp_path):
    folder = tmp_path / "99_x"
    folder.mkdir()
    (folder / "x.cu").write_text(OPEN_CU)
    # code lines: k: signature, i =, if, }, f: signature, a =, return, }, g: signature, return, }
    assert stubs.line_counts(folder) == {"steps": (3, 11), "goal": (3, 11), "open": (5, 11)}


def test_the_level_table_in_the_docs_is_generated():
    doc = stubs.DOC.read_text()
    assert stubs.doc_with_table(doc, stubs.level_table()) == doc, "run `make exercises` to regenerate the level table"


def test_the_open_level_asks_the_target_share():
    """At the open level the student writes at least OPEN_TARGET of the code of 05 to 10."""
    mine = total = 0
    for folder in sorted(d for d in stubs.SOLUTIONS.iterdir() if d.is_dir() and d.name[:2] in stubs.OPEN_EXERCISES):
        m, t = stubs.line_counts(folder)["open"]
        mine, total = mine + m, total + t
    assert mine >= stubs.OPEN_TARGET * total, f"the open level asks {mine} of {total} code lines of 05 to 10"


def test_each_readme_lists_what_each_level_asks():
    """The solutions' READMEs hold their per-level list as the markers make it (`make exercises`
    rewrites it; the student copies are generated from them)."""
    for folder in sorted(d for d in stubs.SOLUTIONS.iterdir() if d.is_dir()):
        readme = (folder / "README.md").read_text()
        assert stubs.LIST_BEGIN in readme, f"{folder.name}/README.md has no per-level list: run `make exercises`"
        assert stubs.readme_with_level_list(readme, folder) == readme, f"{folder.name}: run `make exercises`"


# --- given code the blanked code leaves unused: [[maybe_unused]] by a rule (mark_unused) ---------------

UNUSED_CU = """namespace {
constexpr int kOnlyBlanked = 4;
constexpr int kStillUsed = 8;
__device__ int helper(int x) { return x + kStillUsed; }
int host_helper(int v) { return v; }
struct Cache {
  int find(int k) { return k; }
  static constexpr int kCap = 2;
  int size_ = 0;
};
template <typename T>
__device__ T tmpl_helper(T v) { return v; }
template <typename T>
struct Tile {
  static constexpr int kK = 4;
  static constexpr int kSteps = 8;
};
static_assert(Tile<float>::kSteps == 8, "Tile<float> is instantiated");
}  // namespace

int external_run(int n) {  // other files may call it: never marked
  int kept = n, gone = 2;
  int scratch = kStillUsed;
  // BEGIN SOLUTION
  // GOAL: everything used.
  // TODO: use everything.
  Cache c;
  std::lock_guard<std::mutex> lock(mu);
  return helper(gone) + host_helper(scratch) + c.find(Cache::kCap) + tmpl_helper(n) + Tile<float>::kK + kOnlyBlanked;
  // END SOLUTION
  return kept;
}
"""


def _marked(out: str) -> set[str]:
    return {l.strip() for l in out.splitlines() if stubs.MAYBE_UNUSED in l}


def test_given_code_that_only_the_blanked_code_used_is_marked_maybe_unused():
    out = stubs.stub_text(UNUSED_CU, ".cu", "x.cu")
    marked = _marked(out)
    assert marked == {f"{stubs.MAYBE_UNUSED} {line}" for line in [
        "constexpr int kOnlyBlanked = 4;", "__device__ int helper(int x) { return x + kStillUsed; }",
        "int host_helper(int v) { return v; }", "int kept = n, gone = 2;", "int scratch = kStillUsed;"]}
    # nvcc ignores the attribute on members (Cache::find, Cache::kCap, Tile::kK): their classes are
    # compiled with the warning off, and only they
    lines = out.splitlines()
    for head in ["struct Cache {", "template <typename T>\nstruct Tile {"]:
        first = head.splitlines()[0]
        at = next(i for i, l in enumerate(lines) if l == first and "\n".join(lines[i:i + 2]).startswith(head))
        assert lines[at - 2 : at] == [l.rstrip("\n") for l in stubs.SUPPRESS_UNUSED], head
        assert lines[lines.index("};", at) + 1] == stubs.RESTORE_UNUSED.rstrip("\n"), head
    assert out.count(stubs.RESTORE_UNUSED) == 2
    # not marked: kStillUsed (a given helper uses it), tmpl_helper (a template is never reported unused),
    # kSteps (the static_assert uses it), size_ (a data member), external_run (other files may call it),
    # c and lock (constructed locals: the compiler does not report them)
    unmarked = "".join(l for l in out.splitlines(keepends=True) if l not in [*stubs.SUPPRESS_UNUSED, stubs.RESTORE_UNUSED])
    assert unmarked.replace(stubs.MAYBE_UNUSED + " ", "") == stubs.stub_text(UNUSED_CU, ".cpp", "x.cpp")
    # the mark is on the student's copy only: the solution's text and every level's graded code agree
    code = [l for l in out.splitlines() if not l.strip().startswith("//")]
    assert code == [l for l in stubs.stub_text(UNUSED_CU, ".cu", "x.cu", "goal").splitlines()
                    if not l.strip().startswith("//")]


def test_a_helper_of_a_template_nothing_instantiates_is_marked_and_its_locals_are_not():
    cu = """namespace {
__device__ void cp(float* d) { *d = 0; }
template <typename T>
__device__ void tile(T* p) {
  int i = 0;
  cp(p + i);
}
}  // namespace
__global__ void kernel(float* p) {
  // BEGIN SOLUTION
  // TODO: one tile.
  tile(p);
  // END SOLUTION
}
"""
    marked = _marked(stubs.stub_text(cu, ".cu", "x.cu"))
    assert marked == {f"{stubs.MAYBE_UNUSED} __device__ void cp(float* d) {{ *d = 0; }}"}


def test_a_member_used_through_another_object_stays_used():
    cu = """namespace {
struct A { __device__ void load(int* p) { *p = 1; } };
struct B {
  A a;
  __device__ void load(int* p) { a.load(p); }
};
}  // namespace
__global__ void kernel(int* p) {
  B b;
  b.load(p);
  // BEGIN SOLUTION
  // TODO: nothing.
  // END SOLUTION
}
"""
    assert not _marked(stubs.stub_text(cu, ".cu", "x.cu"))


def test_a_binding_file_is_not_marked():
    """The host compiler builds .cpp files without -Wall (torch's extension build): no warning to hide."""
    assert stubs.MAYBE_UNUSED not in stubs.stub_text(UNUSED_CU, ".cpp", "x.cpp")


def test_a_parameter_or_data_member_of_the_same_name_is_no_use():
    cu = """namespace {
struct Handle {
  int capture = 0;  // a data member: no use of the function
};
bool find(int key, bool* capture) { return key > 0; }  // its parameter: no use of the function
int capture(Handle& h) { return h.capture; }
}  // namespace
int run(Handle& h) {
  // BEGIN SOLUTION
  // GOAL: the capture.
  // TODO: capture.
  return capture(h) + find(1, nullptr);
  // END SOLUTION
}
"""
    marked = _marked(stubs.stub_text(cu, ".cu", "x.cu"))
    assert f"{stubs.MAYBE_UNUSED} int capture(Handle& h) {{ return h.capture; }}" in marked
