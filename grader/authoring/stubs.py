"""Generate the student tree exercises/ from solutions/, the single source of truth.

In every source file, each region

    // BEGIN SOLUTION            (or `# BEGIN SOLUTION` in Python)
    // GOAL: what to achieve     comment lines at the top: the goal (HINTS=goal keeps only this)
    // TODO: what to write ...   the steps (HINTS=steps, the default, keeps only these)
    // STUB: code                optional: code the stub gets instead (a host-side loud failure)
    ... reference code ...
    // END SOLUTION

keeps its markers and, by the hint level, its TODO lines (`steps`) or its GOAL lines written as
TODO lines (`goal`), gains a line giving the reference's size, and loses its code. At `goal` the
region also names the README's collapsed hint that holds its TODO lines: the README's Hints section
becomes <details> blocks, its general hints first, then one block per region with its steps.
A Python region with no STUB line gets `raise NotImplementedError(...)`. Nested, unterminated and
stray END markers are errors. Files without regions are copied unchanged. Each file's header line
says the level (`make exercises LEVEL=goal`; no LEVEL for `steps`), and --check reads it from
there, so a student tree at any level, or with levels mixed by exercise, checks as in sync.
At the open level (`LEVEL=open`) each OPEN region (grader/authoring/regions.py) becomes one region stating
its goal and size, whole kernels and functions; the other levels do not see the OPEN lines.
`make exercises` also prints what each level asks (the student's code lines and the given ones) and
rewrites that table in docs/authoring.md. At every level, a given declaration that only the blanked
code used is marked [[maybe_unused]] in the student's copy (mark_unused), so an untouched stub
compiles without warnings about code the student did not write.

    python -m grader.authoring.stubs                  write exercises/, each exercise at the level it has
    python -m grader.authoring.stubs --level goal     write exercises/ at the goal level (--level steps: back;
                                            --hints is another name for --level)
    python -m grader.authoring.stubs --ex 03 04       rewrite only those exercise folders
    python -m grader.authoring.stubs --check          exit 1 if exercises/ differs from what would be written
"""
from __future__ import annotations

import argparse
import filecmp
import re
import shutil
import subprocess
import sys
import tempfile
from dataclasses import dataclass
from pathlib import Path

from grader.authoring import readme_tables, regions
from grader.env import REPO
from grader.authoring.regions import COMMENT, RegionError

SOLUTIONS = REPO / "solutions"
EXERCISES = REPO / "exercises"

GENERATED_NOTE = ("GENERATED from solutions/{rel} by `make exercises{hints}`: edit only inside the BEGIN/END "
                  "SOLUTION regions.")
SKIP = {"__pycache__", ".ipynb_checkpoints"}

# How much a region's comment gives away: `steps` (its TODO lines, the default) or `goal` (its GOAL
# lines; the TODO lines go to the README's Hints, collapsed); `open` blanks whole kernels and
# functions (the OPEN regions, grader/authoring/regions.py) and states only their goals.
LEVELS = ("steps", "goal", "open")
DEFAULT_LEVEL = "steps"
# the order of a README's hint blocks: the kernels' file first, then the binding's, then Python
HINT_FILE_ORDER = {".cu": 0, ".cuh": 0, ".cpp": 1, ".h": 1, ".hpp": 1, ".py": 2}


def stub_text(text: str, suffix: str, where: str, level: str = DEFAULT_LEVEL) -> str:
    """The student version of one source file's text, at level `level`."""
    if level not in LEVELS:
        raise ValueError(f"unknown level {level!r}: choose one of {', '.join(LEVELS)}")
    prefix = COMMENT[suffix]
    lines = text.splitlines(keepends=True)
    regions.spans(lines, prefix, where)
    if level == "open":
        return mark_unused(_open_text(lines, prefix, where), suffix, text)
    # the steps and goal levels read the file without the open level's lines (the OPEN markers and
    # the GOAL/STUB lines that open them); errors still name the line of the whole file
    drop = regions.open_lines(lines, prefix, where)
    number = [i for i in range(len(lines)) if i not in drop]
    lines = [l for i, l in enumerate(lines) if i not in drop]
    found = regions.spans(lines, prefix, where)
    titles = hint_titles(text, where) if level == "goal" else [None] * len(found)
    # A region's line in the stub's messages is counted without the GOAL lines above it: a goal
    # written into the solution leaves its `steps` stub as it was.
    goal_lines = [l.strip().startswith(f"{prefix} {regions.GOAL}") for l in lines]
    out: list[str] = []
    last = 0
    for (begin, end), title in zip(found, titles):
        out += lines[last : begin + 1]
        out += _stub_region(lines[begin + 1 : end], prefix, regions.indent_of(lines[begin]), where, number[begin] + 1,
                            title, message_line=begin + 1 - sum(goal_lines[:begin]))
        last = end
    out += lines[last:]
    return mark_unused("".join(out), suffix, text)


def _open_text(lines: list[str], prefix: str, where: str) -> str:
    """The open level: each OPEN region becomes one solution region stating the OPEN region's goal,
    its size and its STUB lines; a solution region outside every OPEN region keeps its goal and size
    (its steps are not given at this level)."""
    opens = regions.open_spans(lines, prefix, where)
    outside = [(b, b, e) for b, e in regions.spans(lines, prefix, where)
               if not any(ob < b < oe for ob, _, oe in opens)]
    out: list[str] = []
    last = 0
    for begin, body, end in sorted(opens + outside):
        out += lines[last:begin]
        indent = regions.indent_of(lines[begin])
        out.append(f"{indent}{prefix} {regions.BEGIN}\n")
        if body == begin:  # a solution region outside the open ones: its goal, not its steps
            out += _stub_region(lines[begin + 1 : end], prefix, indent, where, begin + 1, goal_only=True,
                                message_line=len(out))
        else:  # the open region's own GOAL and STUB lines, and the size of all its code
            size = sum(_is_code(l, prefix) for l in lines[body:end])
            out += _stub_region(lines[begin + 1 : body] + [indent + "x\n"] * size, prefix, indent, where, begin + 1,
                                goal_only=True, message_line=len(out))
        out.append(f"{indent}{prefix} {regions.END}\n")
        last = end + 1
    out += lines[last:]
    return "".join(out)


def hint_titles(text: str, where: str) -> list[str]:
    """The name of each region's hint in the README, in the file's order: "matmul.cu: matmul_kernel1",
    and "stencil2d.cu: stencil2d_kernel, region 2 of 2" where a function holds several regions."""
    file = Path(where).name
    found = regions.regions_of(Path(where), text)
    bases = [r.name.split("#")[0] for r in found]
    titles = []
    for i, base in enumerate(bases):
        n, k = bases.count(base), bases[: i + 1].count(base)
        titles.append(f"{file}: {base}" + (f", region {k} of {n}" if n > 1 else ""))
    return titles


def _is_code(line: str, prefix: str) -> bool:
    s = line.strip()
    return bool(s) and not s.startswith(prefix)


def _stub_region(lines: list[str], prefix: str, indent: str, where: str, begin_line: int,
                 hint_title: str | None = None, message_line: int | None = None, goal_only: bool = False) -> list[str]:
    """The stub of one region: its TODO lines (or, given the title of its README hint, its GOAL
    lines as TODO lines and a pointer to that hint; or, goal_only, its GOAL lines alone), its size,
    and its STUB lines."""
    todo, goal, stub = [], [], []
    for line in lines:
        s = line.strip()
        if s.startswith(f"{prefix} TODO"):
            todo.append(line)
        elif s.startswith(f"{prefix} {regions.GOAL}"):
            goal.append(f"{indent}{prefix} TODO:{s[len(prefix) + 1 + len(regions.GOAL):].rstrip()}\n")
        elif s.startswith(f"{prefix} STUB:"):
            stub.append(indent + s[len(prefix) + len(" STUB:") :].strip() + "\n")
    if not todo and not (goal_only and goal):
        raise RegionError(f"{where}:{begin_line}: a solution region needs a `{prefix} TODO: ...` line saying what to write")
    size = sum(_is_code(l, prefix) for l in lines)
    if hint_title is not None or goal_only:
        if not goal:
            raise RegionError(f"{where}:{begin_line}: LEVEL=goal and LEVEL=open need a `{prefix} GOAL: ...` line in "
                              f"every region, saying what the region must achieve (its TODO lines are the steps)")
        todo = goal
    todo.append(f"{indent}{prefix} TODO: (the reference solution takes about {size} line{'s' if size != 1 else ''})\n")
    if hint_title is not None:
        todo.append(f'{indent}{prefix} TODO: (the steps, when you want them: README.md, Hints, "{hint_title}")\n')
    if not stub and prefix == "#":
        line = begin_line if message_line is None else message_line
        stub = [f'{indent}raise NotImplementedError("{where}: line {line} is not implemented yet")\n']
    return todo + stub


def steps_of(lines: list[str], prefix: str) -> list[str]:
    """A region's TODO lines as text: without the comment prefix and "TODO:" (a continuation's own
    indentation kept)."""
    out = []
    for line in lines:
        s = line.strip()
        if s.startswith(f"{prefix} TODO"):
            rest = s[len(prefix) + len(" TODO") :]
            rest = rest[1:] if rest.startswith(":") else rest
            out.append(rest[1:] if rest.startswith(" ") else rest)
    return out


HINTS_INTRO = """\
Open these one at a time, the general hints first. Each region of your files states its goal and the
size of the reference's answer; the block named after a region (as its last TODO line names it) gives
its steps."""


def readme_with_hints(readme: str, folder: Path, where: str) -> str:
    """The README of a goal-level exercise: its Hints section collapsed into <details> blocks, from
    gentle to explicit: the README's own hints, then one block per region of the folder's sources
    (kernels' file first) with the region's TODO lines, the steps its goal-level stub leaves out."""
    lines = readme.splitlines()
    try:
        start = next(i for i, l in enumerate(lines) if l.strip() == "## Hints")
    except StopIteration:
        raise RegionError(f"{where}: LEVEL=goal needs a `## Hints` section to put the regions' steps in") from None
    end = next((i for i in range(start + 1, len(lines)) if lines[i].startswith("## ")), len(lines))
    general = "\n".join(lines[start + 1 : end]).strip("\n")
    blocks = [f"<details>\n<summary>General hints</summary>\n\n{general}\n\n</details>"] if general.strip() else []
    sources = sorted((p for p in folder.iterdir() if p.suffix in COMMENT),
                     key=lambda p: (HINT_FILE_ORDER.get(p.suffix, 9), p.name))
    for src in sources:
        text = src.read_text()
        rel = f"{Path(where).parent}/{src.name}"
        found = regions.regions_of(src, text)
        if not found:
            continue
        stub_lines = stub_text(text, src.suffix, rel, "goal").splitlines()
        begins = [b for b, _ in regions.spans(stub_lines, COMMENT[src.suffix], rel)]
        for region, title, begin in zip(found, hint_titles(text, rel), begins):
            steps = "\n".join(steps_of(region.lines, region.prefix))
            # the line of the region's BEGIN marker in the student's file, under its header line
            blocks.append(f"<details>\n<summary>{title} (line {begin + 2}), step by step</summary>\n\n"
                          f"```text\n{steps}\n```\n\n</details>")
    body = ["", HINTS_INTRO, ""] + "\n\n".join(blocks).splitlines() + [""]
    out = lines[: start + 1] + body + lines[end:]
    return "\n".join(out) + ("\n" if readme.endswith("\n") else "")


def _header(suffix: str, rel: str, level: str = DEFAULT_LEVEL) -> str:
    note = GENERATED_NOTE.format(rel=rel, hints="" if level == DEFAULT_LEVEL else f" LEVEL={level}")
    if suffix == ".md":
        return f"<!-- {note} -->\n"
    return f"{COMMENT[suffix]} {note}\n"


def level_of(folder: Path) -> str:
    """The hint level a generated exercise folder has: its README's header line says it."""
    readme = folder / "README.md"
    first = readme.read_text().split("\n", 1)[0] if readme.is_file() else ""
    m = re.search(r"`make exercises (?:LEVEL|HINTS)=(\w+)`", first)
    return m.group(1) if m and m.group(1) in LEVELS else DEFAULT_LEVEL


def levels_of(root: Path = EXERCISES) -> dict[str, str]:
    """Each exercise folder of a generated tree and its hint level."""
    return {d.name: level_of(d) for d in sorted(root.iterdir()) if d.is_dir()} if root.is_dir() else {}


def generate(solutions: Path = SOLUTIONS, out: Path = EXERCISES, hints: str | dict[str, str] = DEFAULT_LEVEL) -> list[Path]:
    """Write the student tree for every solutions/NN_* folder into `out`; return the files written.
    `hints`: the level of every exercise, or a level per exercise folder (others: `steps`)."""
    for level in [hints] if isinstance(hints, str) else hints.values():
        if level not in LEVELS:
            raise ValueError(f"unknown hint level {level!r}: choose one of {', '.join(LEVELS)}")
    written = []
    for src in sorted(solutions.rglob("*")):
        rel = src.relative_to(solutions)
        if src.is_dir() or SKIP.intersection(rel.parts) or src.suffix == ".pyc":
            continue
        dst = out / rel
        dst.parent.mkdir(parents=True, exist_ok=True)
        level = hints if isinstance(hints, str) else hints.get(rel.parts[0], DEFAULT_LEVEL)
        if src.suffix in COMMENT or src.suffix == ".md":
            text = src.read_text()
            if src.suffix in COMMENT:
                text = stub_text(text, src.suffix, f"{out.name}/{rel}", level)
            elif level == "goal" and src.name == "README.md" and len(rel.parts) == 2:
                text = readme_with_hints(text, src.parent, f"{out.name}/{rel}")
            header = _header(src.suffix, rel.as_posix(), level)
            dst.write_text(header + text)
        else:
            shutil.copy2(src, dst)
        written.append(dst)
    return written


# --- given code that only the blanked code used -----------------------------------------------------
#
# A stub keeps the given helpers (functions, constants, a kernel's locals) that the reference's
# regions call; once the regions are blanked, nothing in the student's file refers to them, and the
# compiler says "declared but never referenced" about code the student did not write (a student who
# reads warnings about the course's code learns to ignore warnings). So the stub marks each such
# declaration [[maybe_unused]], by a rule: a C++ declaration of the given code whose name the blanked
# code used and that occurs nowhere else in the stub's code (a name, not a type check: a helper whose
# name something else also has stays unmarked, and so does one used implicitly, such as a container's
# operator== or a smart pointer's deleter; tests/test_stub_warnings.py finds those, and the solution
# marks them itself). Left alone, since the compiler does not warn about them: a function with
# external linkage, a class's data members, a local constructed with arguments (a lock guard).

MAYBE_UNUSED = "[[maybe_unused]]"
# nvcc ignores [[maybe_unused]] on a class's members: a class (or a member defined outside it) whose
# members only the student's code uses is compiled with the warning off, for its lines only
SUPPRESS_UNUSED = ["#pragma nv_diagnostic push\n",
                   "#pragma nv_diag_suppress 177  // generated: only your code uses some of what follows\n"]
RESTORE_UNUSED = "#pragma nv_diagnostic pop\n"
# nvcc's front end warns about unused declarations; the host compiler runs without -Wall (torch's
# extension build), so a .cpp file's given helpers need no mark
_CPP = {".cu", ".cuh"}
_WORD = re.compile(r"[A-Za-z_]\w*")
# statements that start like a declaration but are not one
_NOT_A_TYPE = {"return", "else", "case", "goto", "throw", "new", "delete", "using", "typedef", "if", "while", "for",
               "switch", "do", "sizeof", "static_assert", "struct", "class", "union", "enum", "namespace", "friend",
               "public", "private", "protected", "template", "typename", "operator", "co_return", "co_yield", "default"}
_SPECIFIERS = {"static", "inline", "constexpr", "const", "volatile", "extern", "__device__", "__host__", "__global__",
               "__forceinline__", "__noinline__", "__constant__", "__shared__", "__managed__", "unsigned", "signed",
               "thread_local", "mutable", "auto", "register", "__restrict__"}
_TEMPLATE_HEAD = re.compile(r"template\s*<(?:[^<>]|<[^<>]*>)*>\s*")
_ARGS = r"<(?:[^<>;(){}]|<(?:[^<>;(){}]|<[^<>;(){}]*>)*>)*>"  # template arguments, nested twice
_ATTR = r"(?:__\w+__\s*\((?:[^()]|\([^()]*\))*\)|\[\[[^\]]*\]\])"  # __launch_bounds__(..), [[nodiscard]]
# A declaration's start: its specifiers and type (words, qualified or templated, each followed by a
# space or a pointer or reference), the declared name, then what follows a declarator: ( = [ { ; ,
_DECLARATION = re.compile(rf"^((?:(?:{_ATTR}|[A-Za-z_]\w*(?:\s*::\s*[A-Za-z_]\w*)*(?:\s*{_ARGS})?)"
                          rf"(?:\s*[*&]+\s*|\s+))+?)"
                          rf"(?P<owner>(?:[A-Za-z_]\w*::)*)([A-Za-z_]\w*)\s*(?:\[[^\]]*\]\s*)*([(=\[{{;,])")


def _code_lines(text: str) -> list[str]:
    """Each line of C++ text with its comments and string and character literals blanked (so that
    a name in a message or a comment is not a use of it)."""
    out, block = [], False
    for line in text.splitlines():
        code, i = [], 0
        while i < len(line):
            if block:
                end = line.find("*/", i)
                if end < 0:
                    i = len(line)
                else:
                    block, i = False, end + 2
                continue
            c = line[i]
            if line.startswith("//", i):
                break
            if line.startswith("/*", i):
                block, i = True, i + 2
                continue
            if c in "\"'" and not (c == "'" and i and line[i - 1].isalnum()):  # 1'000 is a number
                j = i + 1
                while j < len(line) and line[j] != c:
                    j += 2 if line[j] == "\\" else 1
                code.append(c + " " * max(0, min(j, len(line)) - i - 1) + c)
                i = j + 1
                continue
            code.append(c)
            i += 1
        out.append("".join(code))
    return out


@dataclass
class _Frame:
    kind: str  # "anon" (an anonymous namespace), "ns" (a named one), "class" (a class, struct or union),
    #            "enum", "block" (a function's body, a statement's, an initializer)
    name: str  # the class's or the function's name ("" for others)
    template: bool  # a template's body: the compiler checks its uses only where it is instantiated
    first: int  # the line its head starts on


def _scopes(code: list[str]) -> list[tuple[tuple[_Frame, ...], bool, bool]]:
    """For each line: the braces open where it starts, outermost first; whether a statement starts
    there (not the continuation of one, such as a signature's second line); and whether that
    statement is a template's (`template <...>` before it)."""
    out, stack, pending, first = [], [], "", 0
    for n, line in enumerate(code):
        head = pending.strip()
        templated = bool(_TEMPLATE_HEAD.fullmatch(head + " ")) if head else line.lstrip().startswith("template")
        out.append((tuple(stack), not head or templated, templated))
        if line.lstrip().startswith("#") or re.match(r"\s*(?:public|private|protected|default)\s*:\s*$", line):
            continue  # a preprocessor line or a label ends no statement and starts none
        for c in line:
            if not pending.strip():
                first = n
            if c == "{":
                head = pending.strip()
                template = head.startswith("template")
                name = ""
                if re.search(r"\bnamespace$", head):
                    kind = "anon"
                elif re.search(r"\bnamespace\s+[\w:]+$", head) or re.search(r'\bextern\s*"\s*"$', head):
                    kind = "ns"
                elif re.search(r"\benum\b", head):
                    kind = "enum"
                elif (m := re.search(r"(?:^|[\s;>])(?:struct|class|union)\s+(\w+)[^()]*$", head)) and "=" not in head:
                    kind, name = "class", m.group(1)
                else:
                    kind = "block"
                    m = re.search(r"([A-Za-z_]\w*)\s*\(", regions._ATTRIBUTE.sub(" ", _TEMPLATE_HEAD.sub(" ", head)))
                    name = m.group(1) if m else ""
                stack.append(_Frame(kind, name, template, first))
                pending = ""
            elif c in "};":
                if c == "}" and stack:
                    stack.pop()
                pending = ""
            else:
                pending += c
        pending += " "
    return out


def _declared(code: str) -> tuple[int, list[str], str, bool] | None:
    """A line that starts a declaration: (where [[maybe_unused]] goes, the names it declares, what
    follows the first name, whether that name is qualified: a member defined outside its class), or
    None."""
    if code.lstrip().startswith("#"):
        return None
    code = re.sub(_ATTR, lambda m: " " * len(m.group(0)), code)  # __launch_bounds__(256) is no name
    indent = len(code) - len(code.lstrip())
    head = _TEMPLATE_HEAD.match(code[indent:])
    at = indent + (head.end() if head else 0)
    m = _DECLARATION.match(code[at:])
    if not m:
        return None
    words = _WORD.findall(re.sub(_ATTR, " ", m.group(1)))
    if not words or any(w in _NOT_A_TYPE for w in words):
        return None
    names = [m.group(3)]
    if m.group(4) != "(":  # more declarators after commas at depth 0: `int a = 0, b = 1;`
        depth = 0
        for i in range(at + m.end() - 1, len(code)):
            c = code[i]
            depth += (c in "([{") - (c in ")]}")
            if c == "," and depth == 0:
                more = re.match(r"\s*[*&]*\s*([A-Za-z_]\w*)\s*(?:\[[^\]]*\]\s*)*[=\[{;,]", code[i + 1 :])
                if more:
                    names.append(more.group(1))
            elif c == ";" and depth == 0:
                break
    return at, names, m.group(4), bool(m.group("owner"))


def _occurrences(code: list[str]) -> list[dict[str, int]]:
    """Per line, how often each name occurs; `Q::name` counts for `name` only where Q is a class or
    namespace of this file (`c10::cuda::CUDACachingAllocator::get` is not this file's `get`)."""
    own = set(re.findall(r"\b(?:struct|class|union|namespace)\s+([A-Za-z_]\w*)", "\n".join(code)))
    out = []
    for line in code:
        found: dict[str, int] = {}
        for m in re.finditer(r"(?:([A-Za-z_]\w*)\s*::\s*)?([A-Za-z_]\w*)", line):
            for w in filter(None, m.groups()):
                found[w] = found.get(w, 0) + 1
            if m.group(1) and m.group(1) not in own:
                found[m.group(2)] -= 1
        out.append(found)
    return out


@dataclass
class _Declaration:
    line: int
    at: int  # where [[maybe_unused]] goes
    names: list[str]
    lines: range  # its signature's and its body's
    markable: bool  # the compiler may warn about it (see mark_unused)
    external: bool  # a function other files may call: never dead
    context: str | None  # the template whose instantiation decides whether it is compiled, if any
    context_body: set[int]  # the lines of that template's body
    owner: _Frame | None  # the class it is a member of
    qualified: bool  # a member defined outside its class (`PlanCache::find`)


def mark_unused(text: str, suffix: str, source: str) -> str:
    """The stub `text` of the solution file `source`, with [[maybe_unused]] on each given declaration
    (a function, a constant, a local variable) that the solution uses and the stub no longer does:
    its name occurs only on its declarations, inside them (a recursion, an overload calling another),
    or in dead code (declarations unused themselves, templates nothing instantiates any more: a helper
    of a helper that only the blanked code called). Never marked, since the compiler does not warn
    about them: a function with external linkage, a class's data members, a local constructed with
    arguments (a lock guard), a template, anything inside a template nothing instantiates; nor a
    declaration that says it already."""
    if suffix not in _CPP:
        return text
    lines = text.splitlines(keepends=True)
    code = _code_lines(text)
    per_line = _occurrences(code)
    before: dict[str, int] = {}
    for counts in _occurrences(_code_lines(source)):
        for n, k in counts.items():
            before[n] = before.get(n, 0) + k
    scopes = _scopes(code)

    def span(i: int) -> range:  # a statement's lines from line i: its signature's and its body's
        depth, end = len(scopes[i][0]), i + 1
        while end < len(code) and (len(scopes[end][0]) > depth or not scopes[end][1]):
            end += 1
        return range(i, end)

    inside: dict[int, set[int]] = {}  # a frame (its id) -> the lines inside its braces
    for j, (frames, _, _) in enumerate(scopes):
        for f in frames:
            inside.setdefault(id(f), set()).add(j)

    def opened(i: int) -> _Frame | None:  # the braces the declaration at line i opens (its body)
        depth = len(scopes[i][0])
        for j in range(i + 1, len(code)):
            if len(scopes[j][0]) > depth:
                return scopes[j][0][depth]
            if scopes[j][1]:
                return None
        return None

    found: list[_Declaration] = []
    # names declared as something else than a use: data members and parameters (`bool* capture` is
    # no use of a function `capture`)
    other_declarations: dict[str, dict[int, int]] = {}
    for i, (line, (frames, starts, templated)) in enumerate(zip(code, scopes)):
        kinds = [f.kind for f in frames]
        if not starts or (kinds and kinds[-1] == "enum"):
            continue
        d = _declared(line)
        if d is None:
            continue
        at, names, follows, qualified = d
        if follows == "(":  # a function's parameters, on the lines of its signature
            for j in span(i):
                if j > i and len(scopes[j][0]) > len(frames):
                    break
                params = code[j][at + code[j][at:].index("(") + 1:] if j == i else code[j]
                for name in re.findall(r"[\w>*&\]]\s+[*&]*\s*([A-Za-z_]\w*)\s*(?:\[[^\]]*\]\s*)*(?=[,)=])", params):
                    other_declarations.setdefault(name, {}).setdefault(j, 0)
                    other_declarations[name][j] += 1
        specifiers = set(_WORD.findall(line[:at] + line[at:].split(names[0], 1)[0]))
        inner = kinds[-1] if kinds else "ns"
        external = (inner in ("ns", "anon") and follows == "(" and "anon" not in kinds and not templated
                    and not specifiers & {"static", "inline", "__forceinline__", "__device__", "__global__"})
        in_template = templated or any(f.template for f in frames)
        markable = not (external or templated or MAYBE_UNUSED in line
                        or (inner == "block" and (follows in "({"  # a guard, used by living
                                                  or in_template))  # a template's local: never reported
                        or (inner == "class" and follows != "(" and "static" not in specifiers))  # a data member
        # what an instantiation decides: the outermost function body around it (a member function of a
        # class template is compiled only where called), else the outermost class template
        context, frame = None, None
        if in_template:
            frame = next((f for f in frames if f.kind == "block"), None) or next((f for f in frames if f.template), None)
            context = frame.name if frame else None
            if follows == "(" and inner != "block":  # a function template, or a class template's member
                context, frame = names[0], opened(i)
        owner = frames[-1] if inner == "class" else None
        found.append(_Declaration(i, at, names, span(i), markable, external, context,
                                  inside.get(id(frame), set()) if frame else set(), owner, qualified))
    declaring: dict[str, set[int]] = {}  # name -> the lines of its declarations' signatures and bodies
    declared_at: dict[str, dict[int, int]] = {}  # name -> the lines declaring it -> how many times
    for d in found:
        for n in d.names:
            declaring.setdefault(n, set()).update(d.lines[1:])
            declared_at.setdefault(n, {})[d.line] = declared_at.get(n, {}).get(d.line, 0) + 1
    for n, at_lines in other_declarations.items():
        for j, k in at_lines.items():
            declared_at.setdefault(n, {})[j] = declared_at.get(n, {}).get(j, 0) + k
    # a name used inside a class that declares it is that member's, not another declaration's
    members: dict[str, dict[int, set[int]]] = {}  # name -> the classes declaring it -> their bodies
    for d in found:
        if d.owner is not None:
            for n in d.names:
                members.setdefault(n, {})[id(d.owner)] = inside.get(id(d.owner), set())

    accessed = []  # per line, the names used as members of an object (`a.load`), with their counts
    for line in code:
        counts: dict[str, int] = {}
        for name in re.findall(r"(?:\.|->)\s*([A-Za-z_]\w*)", line):
            counts[name] = counts.get(name, 0) + 1
        accessed.append(counts)

    def others(n: str, d: _Declaration) -> set[int]:  # where n is another class's own member
        return {j for owner, lines in members.get(n, {}).items() if owner != id(d.owner) for j in lines
                if n not in accessed[j]}

    where: dict[str, list[int]] = {}
    for i, counts in enumerate(per_line):
        for n, k in counts.items():
            if k > 0:
                where.setdefault(n, []).append(i)

    def used(n: str, outside: set[int] | range, dead: set[int], free: bool = False) -> bool:
        """Whether n occurs in live code outside `outside`, its declarators not counted (nor, for a
        `free` name, one not a class's member, its uses as an object's member)."""
        at = declared_at.get(n, {})
        return any(per_line[i][n] > at.get(i, 0) + (accessed[i].get(n, 0) if free else 0)
                   and i not in outside and i not in dead for i in where.get(n, []))

    # The compiler counts a use in code it compiles, not in the body of a template nothing
    # instantiates: such bodies are dead, and what only they use is unused in turn.
    dead: set[int] = set()
    changed = True
    while changed:
        grown = set(dead)
        for d in found:
            if d.context is not None and not used(d.context, declaring.get(d.context, set()) | d.context_body, dead):
                grown.update(d.context_body)
        changed = grown != dead
        dead = grown
    wraps: dict[int, int] = {}  # first line -> last line of code to compile under SUPPRESS_UNUSED
    for d in found:
        unused = any(before.get(n, 0) > sum(declared_at[n].values())  # the solution uses it, the stub does not
                     and not used(n, declaring[n] | others(n, d), dead, free=d.owner is None and not d.qualified)
                     for n in d.names)
        if not d.markable or not unused or (d.context is not None and d.line in dead):
            continue
        if d.owner is not None:  # nvcc ignores [[maybe_unused]] on a member: its whole class, then
            wraps[d.owner.first] = max(inside[id(d.owner)])
        elif d.qualified:  # a member defined outside its class: that definition
            wraps[d.line] = d.lines[-1]
        else:
            lines[d.line] = lines[d.line][:d.at] + MAYBE_UNUSED + " " + lines[d.line][d.at:]
    if wraps:
        out, last = [], -1
        for i, line in enumerate(lines):
            if i in wraps and i > last:
                out += SUPPRESS_UNUSED
                last = wraps[i]
            out.append(line)
            if i == last:
                out.append(RESTORE_UNUSED)
        lines = out
    return "".join(lines)


# --- what each level asks: the student's lines and the given ones ----------------------------------

DOC = REPO / "docs" / "authoring.md"
TABLE_BEGIN = "<!-- the level table: generated by `make exercises` (grader/authoring/stubs.py, level_table) -->"
TABLE_END = "<!-- end of the level table -->"
OPEN_TARGET = 0.40  # the open level's share of the kernel code of 05 to 10 that is the student's
OPEN_EXERCISES = ("05", "06", "07", "08", "09", "10")


def line_counts(folder: Path) -> dict[str, tuple[int, int]]:
    """Per level, (the student's code lines, all code lines) of one solutions/ exercise: over its
    .cu, .cpp, .h and .py files (the shared course headers are not the exercise's), a code line being
    one that is neither blank nor a whole-line comment. At steps and goal the student writes the
    solution regions; at open, the OPEN regions and the solution regions outside them."""
    inner = total = wide = 0
    for src in sorted(p for p in folder.iterdir() if p.suffix in COMMENT):
        prefix = COMMENT[src.suffix]
        lines = src.read_text().splitlines()
        code = [_is_code(l, prefix) for l in lines]
        found = regions.spans(lines, prefix, str(src))
        opens = regions.open_spans(lines, prefix, str(src))
        total += sum(code)
        mine = {i for b, e in found for i in range(b, e)}
        inner += sum(code[i] for i in mine)
        mine |= {i for b, _, e in opens for i in range(b, e)}
        wide += sum(code[i] for i in mine)
    return {"steps": (inner, total), "goal": (inner, total), "open": (wide, total)}


def _share(mine: int, total: int) -> str:
    return f"{mine} of {total} ({100 * mine / total:.0f}%)" if total else "0 of 0"


def level_table(solutions: Path = SOLUTIONS) -> str:
    """The Markdown table of what each level asks, per exercise, with the sum over 05 to 10."""
    rows = ["| exercise | steps and goal: the student's code lines | open: the student's code lines |",
            "|---|---|---|"]
    sums = {"steps": [0, 0], "open": [0, 0]}
    for folder in sorted(d for d in solutions.iterdir() if d.is_dir()):
        counts = line_counts(folder)
        rows.append(f"| {folder.name} | {_share(*counts['steps'])} | {_share(*counts['open'])} |")
        if folder.name[:2] in OPEN_EXERCISES:
            for level in sums:
                sums[level][0] += counts[level][0]
                sums[level][1] += counts[level][1]
    rows.append(f"| {OPEN_EXERCISES[0]} to {OPEN_EXERCISES[-1]} | {_share(*sums['steps'])} | {_share(*sums['open'])} |")
    return "\n".join(rows) + "\n"


def doc_with_table(doc: str, table: str) -> str:
    """docs/authoring.md with the table between its markers replaced by `table`."""
    if TABLE_BEGIN not in doc or TABLE_END not in doc:
        raise RegionError(f"{DOC}: the level table needs its markers {TABLE_BEGIN!r} and {TABLE_END!r}")
    head, rest = doc.split(TABLE_BEGIN, 1)
    return head + TABLE_BEGIN + "\n" + table + TABLE_END + rest.split(TABLE_END, 1)[1]


LIST_BEGIN = "<!-- generated by `make exercises` (grader/authoring/stubs.py, level_list): what each level asks -->"
LIST_END = "<!-- end of the level list -->"
LIST_SECTION = "## What is yours, per level"


def _enclosing(lines: list[str], at: int) -> int | None:
    """The line of the nearest definition above line `at` that is less indented than it (the first
    line of a signature that continues on more lines), or None."""
    depth = len(regions.indent_of(lines[at]))
    for i in range(at - 1, -1, -1):
        line = lines[i]
        if line.strip() and len(regions.indent_of(line)) < depth and not line.lstrip().startswith(("//", "#", "}", ")")):
            return i
    return None


_NOT_A_FUNCTION = re.compile(r"\s*(?:(?:for|if|while|switch|do|else|try|catch)\b|(?:public|private|protected)\s*:)|.*\]\s*\(")


def _function_name(lines: list[str], at: int) -> str:
    """What a reader calls the function around line `at`: `f`, a member `Class::f` (C++) or
    `Class.f` (Python), `Class::operator()`; a loop, a branch or a lambda is climbed out of."""
    i = _enclosing(lines, at)
    while i is not None and _NOT_A_FUNCTION.match(lines[i]):
        i = _enclosing(lines, i)
    if i is None:
        return "?"
    py = re.match(r"\s*def\s+(\w+)", lines[i])
    if py:
        name = py.group(1)
    else:  # the signature may continue on the next lines, and carry attributes before the name
        text = " ".join(l.split("//")[0] for l in lines[i : i + 8])
        m = re.search(r"([\w:~]*operator\s*\(\s*\)|[\w:~]+)\s*\(", regions._ATTRIBUTE.sub(" ", text))
        name = re.sub(r"\s+", "", m.group(1)) if m else lines[i].strip()
    if "::" not in name and regions.indent_of(lines[i]):  # a member defined in its class: name the class
        outer = _enclosing(lines, i)
        while outer is not None and _NOT_A_FUNCTION.match(lines[outer]):
            outer = _enclosing(lines, outer)
        c = re.match(r"\s*(?:class|struct)\s+(\w+)", lines[outer]) if outer is not None else None
        if c:
            name = f"{c.group(1)}{'.' if py else '::'}{name}"
    return name


def _named(folder: Path, level: str) -> list[str]:
    """Per source file, the functions the student writes at `level`: `file: f, g` (a function whose
    OPEN region holds all of it written `f (whole)`)."""
    out = []
    for src in sorted((p for p in folder.iterdir() if p.suffix in COMMENT),
                      key=lambda p: (HINT_FILE_ORDER.get(p.suffix, 9), p.name)):
        text = src.read_text()
        prefix = COMMENT[src.suffix]
        if level == "open":
            stub = stub_text(text, src.suffix, src.name, "open").splitlines()
            whole = {_open_begin_in_stub("\n".join(stub), text, src.suffix, b)
                     for b, _, _ in regions.open_spans(text.splitlines(), prefix, src.name)}
            names = [_function_name(stub, b) + (" (whole)" if b in whole else "")
                     for b, _ in regions.spans(stub, prefix, src.name)]
        else:
            lines = regions.source_lines(src)
            names = [_function_name(lines, b) for b, _ in regions.spans(lines, prefix, src.name)]
        names = list(dict.fromkeys(names))
        if names:
            out.append(f"`{src.name}`: " + ", ".join(names))
    return out


def _open_begin_in_stub(stub: str, text: str, suffix: str, begin: int) -> int:
    """The line of the stub where the OPEN region beginning at line `begin` of the solution starts:
    the nth BEGIN SOLUTION of the stub, n counted over the solution's OPEN and outside regions."""
    prefix = COMMENT[suffix]
    lines = text.splitlines()
    opens = regions.open_spans(lines, prefix, "x")
    outside = [b for b, e in regions.spans(lines, prefix, "x") if not any(ob < b < oe for ob, _, oe in opens)]
    order = sorted([b for b, _, _ in opens] + outside)
    stub_begins = [b for b, _ in regions.spans(stub.splitlines(), prefix, "x")]
    return stub_begins[order.index(begin)]


def level_list(folder: Path) -> str:
    """The README's per-level list of what is the student's and what is given, from the markers."""
    counts = line_counts(folder)
    inner, total = counts["steps"]
    wide = counts["open"][0]
    opened = any(regions.open_spans(p.read_text().splitlines(), COMMENT[p.suffix], p.name)
                 for p in folder.iterdir() if p.suffix in COMMENT)
    steps = (f"- **steps** and **goal** (`make exercises`, `LEVEL=goal`): yours are the regions in "
             + "; ".join(_named(folder, "steps")) + f" ({inner} of the {total} code lines).")
    if opened:
        open_ = (f"- **open** (`LEVEL=open`): yours are " + "; ".join(_named(folder, "open"))
                 + f" ({wide} of the {total} code lines; whole: all of the function's body, its signature and the "
                 f"comment above it given).")
    else:
        open_ = "- **open** (`LEVEL=open`): the same as goal (this exercise has no wider regions)."
    given = ("- **Given** at every level: everything else (the bindings and registration, the launch helpers and "
             "the other functions not listed, the shared course headers).")
    return "\n".join([steps, open_, given]) + "\n"


def readme_with_level_list(readme: str, folder: Path) -> str:
    """A solution README with its per-level list rewritten (a new section before `## Hints` if none)."""
    block = LIST_BEGIN + "\n" + level_list(folder) + LIST_END
    if LIST_BEGIN in readme and LIST_END in readme:
        head, rest = readme.split(LIST_BEGIN, 1)
        return head + block + rest.split(LIST_END, 1)[1]
    if "\n## Hints\n" not in readme:
        raise RegionError(f"{folder}/README.md: needs a `## Hints` section to put the per-level list before")
    head, rest = readme.split("\n## Hints\n", 1)
    return head + f"\n{LIST_SECTION}\n\n{block}\n\n## Hints\n" + rest


def write_level_lists(solutions: Path = SOLUTIONS) -> None:
    for folder in sorted(d for d in solutions.iterdir() if d.is_dir()):
        readme = folder / "README.md"
        text = readme.read_text()
        new = readme_with_level_list(text, folder)
        if new != text:
            readme.write_text(new)


def write_level_table() -> str:
    table = level_table()
    if DOC.is_file():
        text = DOC.read_text()
        new = doc_with_table(text, table)
        if new != text:
            DOC.write_text(new)
    return table


def differences(expected_root: Path, actual_root: Path) -> list[str]:
    """Files that are missing, extra or different between two trees."""
    problems = []
    expected = {p.relative_to(expected_root) for p in expected_root.rglob("*") if p.is_file()}
    actual = {
        p.relative_to(actual_root)
        for p in actual_root.rglob("*")
        if p.is_file() and not SKIP.intersection(p.relative_to(actual_root).parts) and p.suffix != ".pyc"
    }
    problems += [f"missing: exercises/{p}" for p in sorted(expected - actual)]
    problems += [f"not generated from solutions/: exercises/{p}" for p in sorted(actual - expected)]
    problems += [
        f"differs from its generated version: exercises/{p}"
        for p in sorted(expected & actual)
        if not filecmp.cmp(expected_root / p, actual_root / p, shallow=False)
    ]
    return problems


def check() -> list[str]:
    """How exercises/ differs from what its generation writes, each exercise at the level its
    header says."""
    with tempfile.TemporaryDirectory() as tmp:
        generated = Path(tmp) / "exercises"
        generate(SOLUTIONS, generated, levels_of(EXERCISES))
        return differences(generated, EXERCISES)


def _student_edits(paths: list[str] | None = None) -> list[str]:
    """Uncommitted changes under exercises/ (a student's work), which regeneration would destroy."""
    try:
        out = subprocess.run(["git", "status", "--porcelain", "--", *(paths or ["exercises"])], cwd=REPO,
                             capture_output=True, text=True)
    except OSError:
        return []
    return [l for l in out.stdout.splitlines() if l.strip()] if out.returncode == 0 else []


def main(argv: list[str] | None = None) -> int:
    from grader.run.cli import UsageParser  # as `python -m grader`: a wrong usage in one line

    parser = UsageParser(prog="python -m grader.authoring.stubs", description=__doc__,
                         formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--check", action="store_true", help="only report differences")
    parser.add_argument("--force", action="store_true", help="overwrite uncommitted changes in exercises/")
    parser.add_argument("--ex", nargs="*", default=[], help="only these exercise folders (numbers or names)")
    parser.add_argument("--level", "--hints", dest="level", choices=LEVELS, default=None,
                        help="what the student writes: steps (each region with its TODO lines), goal (each region "
                             "with its goal and size; the steps go to the README's Hints) or open (whole kernels and "
                             "functions, each with its goal and size); --hints is another name for --level; "
                             "default: the level each exercise has now (steps for a new one)")
    args = parser.parse_args(argv)
    if args.check:
        problems = check()
        for p in problems:
            print(p)
        print("exercises/ is in sync with solutions/" if not problems else "run `make exercises` to regenerate")
        return 1 if problems else 0
    readme_tables.write()  # each solutions/ README's points table from its spec, before exercises/ copies it
    if args.ex:
        return _regenerate_some(args.ex, args.level, args.force)
    edits = _student_edits()
    if edits and not args.force:
        print("exercises/ has uncommitted changes; regenerating would overwrite them:", *edits, sep="\n  ")
        print("commit or stash them, or run `make exercises FORCE=1`")
        return 1
    hints = args.level or levels_of(EXERCISES)
    write_level_lists()  # the solutions' READMEs first: the student copies are generated from them
    with tempfile.TemporaryDirectory() as tmp:
        generated = Path(tmp) / "exercises"
        generate(SOLUTIONS, generated, hints)  # fails on a bad region before anything is touched
        if EXERCISES.exists():
            shutil.rmtree(EXERCISES)
        shutil.copytree(generated, EXERCISES)
    print(f"wrote {sum(1 for p in EXERCISES.rglob('*') if p.is_file())} files under exercises/")
    _print_levels()
    return 0


def _print_levels() -> None:
    for shown in ("goal", "open"):
        names = [name for name, level in levels_of(EXERCISES).items() if level == shown]
        if names:
            print(f"at the {shown} level: {', '.join(names)}")
    print("what each level asks (also in docs/authoring.md; a code line is neither blank nor a comment):")
    print(write_level_table(), end="")


def _regenerate_some(names: list[str], hints: str | None = None, force: bool = False) -> int:
    folders = [d for d in sorted(SOLUTIONS.iterdir()) if d.is_dir()
               and any(d.name == n or d.name.split("_", 1)[0] == n.zfill(2) for n in names)]
    if not folders:
        print(f"no solutions/ folder matches {names}")
        return 1
    edits = _student_edits([f"exercises/{d.name}" for d in folders])
    if edits and not force:
        print("these exercises have uncommitted changes; regenerating would overwrite them:", *edits, sep="\n  ")
        print("commit or stash them, or add FORCE=1")
        return 1
    for folder in folders:
        target = EXERCISES / folder.name
        level = hints or (level_of(target) if target.is_dir() else DEFAULT_LEVEL)
        with tempfile.TemporaryDirectory() as tmp:
            staging = Path(tmp) / "solutions" / folder.name
            shutil.copytree(folder, staging)
            generated = Path(tmp) / "exercises"
            generate(staging.parent, generated, level)
            if target.exists():
                shutil.rmtree(target)
            shutil.copytree(generated / folder.name, target)
        print(f"wrote exercises/{folder.name}" + (f" (LEVEL={level})" if level != DEFAULT_LEVEL else ""))
    return 0


if __name__ == "__main__":
    sys.exit(main())
