"""Mutation testing of the grader: how many small faults in the reference solutions does it catch?

    python -m grader.run.mutants [--ex 01 05] [--n 300] [--seed 1] [--budget 540]
    python -m grader.run.mutants --same-code [--append]    (no GPU: which survivors compile to the solution's code)

A mutant is a copy of a solution folder with ONE textual change at one place, of the kinds a
student's slip makes (`OPERATORS`): a relational operator moved (`<` to `<=` or `>=`), `+` and `-`
or `*` and `/` swapped, a `+ 1` dropped, `&&` and `||` swapped, a constant moved by one, a
threshold doubled or halved, a check (`TORCH_CHECK`, `course::check_*`), a `__syncthreads()` or an
early `return` removed, a guard `if (i < n)` made `if (true)`, `threadIdx.x` and `.y` swapped (never inside
a statement that only marks a planner path for the coverage test: `path_marks`). A
sample of them, stratified by exercise and seeded, is built and graded as a student's folder is
(stopping at the first failed check), and each ends:

    stillborn    it does not compile or its module does not load (left out of the rate)
    killed       it lost a point: a check failed, the timing fell below its tier, it crashed or hung
    survived     it kept every point: a hole in the grader, or a program equivalent to the solution
    equivalent   listed in tests/mutants/equivalent.txt with the reason it cannot be told apart

The kill rate is killed / (killed + survived). Reports go to mutants-report/ (report.json,
report.md); results are reused by a later run while the solution and the grader are unchanged, and a
kill while the solution alone is (a grader that gains checks still kills it; a survivor is graded
again); `--fresh` grades everything again. So a sample too large for one GPU lease finishes over several.

Speed: mutants are written into a few fixed "slot" folders per exercise, so each slot keeps its
ninja build folder and only the changed file recompiles (grader.toolchain.build); a round builds and grades
several mutants of every exercise at once (each in its own time-limited process, the timings alone on
the GPU: grader.run.gate), while the next round's slots compile.
"""
from __future__ import annotations

import argparse
import ast
import hashlib
import io
import json
import math
import os
import platform
import re
import shutil
import sys
import tempfile
import threading
import time
import tokenize
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Iterable, Mapping, Sequence

from grader import env
from grader.toolchain.build import write_slot
from grader.verify.outcomes import ExerciseRow

SOLUTIONS = env.REPO / "solutions"
EQUIVALENTS = env.REPO / "tests" / "mutants" / "equivalent.txt"
REPORT_DIR = env.REPO / "mutants-report"
SLOTS = env.BUILD_ROOT / "mutants"  # the slot folders (each keeps its build folder between runs)
SUFFIXES = (".cu", ".cpp", ".h", ".cuh", ".py")
FINAL = ("killed", "survived", "stillborn")  # outcomes a later run may reuse

OPERATORS = {
    "relational": "< <= > >= == != moved: a boundary (< and <=, > and >=) or negated (< and >=, == and !=)",
    "arithmetic": "binary + and -, * and / swapped (also +=, -=, *=, /=)",
    "drop-one": "a `+ 1` or `- 1` dropped",
    "logical": "&& and || (and, or) swapped",
    "constant": "a number literal plus or minus one",
    "threshold": "a number compared with doubled or halved",
    "remove-check": "a TORCH_CHECK / course::check_* / check_* call (Python: *check* call) not run",
    "remove-sync": "a __syncthreads() / __syncwarp() not run",
    "remove-return": "an early return (one inside an if) not taken",
    "guard-true": "an if whose condition compares (a bounds check) made if (true); "
                  "Python: an if that raises made if False",
    "swap-index": "threadIdx.x and threadIdx.y, blockIdx.x and blockIdx.y swapped",
}


@dataclass(frozen=True)
class Mutant:
    exercise: str  # e.g. "01_leaky_relu"
    file: str  # a file of the solution folder
    line: int  # 1-based
    operator: str  # a key of OPERATORS
    start: int  # the change: text[start:end] (== old) becomes new
    end: int
    old: str
    new: str
    old_line: str
    new_line: str

    @property
    def id(self) -> str:
        """`NN:file:line:operator:hash`; the hash is of the line before and after, so the id is the
        same as long as that line and its number are."""
        h = hashlib.sha1(f"{self.operator}\0{self.old_line.strip()}\0{self.new_line.strip()}".encode()).hexdigest()[:8]
        return f"{self.exercise[:2]}:{self.file}:{self.line}:{self.operator}:{h}"

    @property
    def diff(self) -> str:
        return f"- {self.old_line.strip()}\n+ {self.new_line.strip()}"

    def apply(self, text: str) -> str:
        assert text[self.start:self.end] == self.old, f"{self.id}: the source changed"
        return text[:self.start] + self.new + text[self.end:]

    def texts(self, source: Path | None = None) -> dict[str, str]:
        """The mutant's changed file: {file: its whole text} (for write_slot)."""
        src = source or SOLUTIONS / self.exercise
        return {self.file: self.apply((src / self.file).read_text())}

    def materialize(self, root: Path, source: Path | None = None) -> Path:
        """Write the mutant as `root/<exercise>/` (laid out like exercises/); returns that folder."""
        src = source or SOLUTIONS / self.exercise
        dst = root / self.exercise
        shutil.copytree(src, dst, ignore=shutil.ignore_patterns("__pycache__"))
        (dst / self.file).write_text(self.apply((src / self.file).read_text()))
        return dst


def _line_bounds(text: str, pos: int) -> tuple[int, int]:
    a = text.rfind("\n", 0, pos) + 1
    b = text.find("\n", pos)
    return a, len(text) if b < 0 else b


def _make(exercise: str, file: str, text: str, op: str, start: int, end: int, new: str) -> Mutant | None:
    old = text[start:end]
    if old == new or "\n" in old or "\n" in new:
        return None  # one line changes, always
    a, b = _line_bounds(text, start)
    new_line = text[a:start] + new + text[end:b]
    return Mutant(exercise, file, text.count("\n", 0, start) + 1, op, start, end, old, new, text[a:b], new_line)


# --- numbers -----------------------------------------------------------------------------------

_INT = re.compile(r"(0[xX][0-9a-fA-F]+|\d+)([uUlL]*)$")
_FLOAT = re.compile(r"((?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?)([fFlL]?)$")


def _number_variants(text: str, compared: bool, python: bool) -> list[tuple[str, str]]:
    """(operator, new text) for a number literal: plus and minus one (never below zero for an
    integer), and doubled and halved where it is compared with (a threshold)."""
    out: list[tuple[str, str]] = []
    m = _INT.match(text)
    if m and not (python and text.lower().endswith("j")):
        digits, suffix = m.groups()
        value = int(digits, 16) if digits[:2].lower() == "0x" else int(digits)
        fmt = (lambda v: hex(v) + suffix) if digits[:2].lower() == "0x" else (lambda v: str(v) + suffix)
        out += [("constant", fmt(value + 1))] + ([("constant", fmt(value - 1))] if value > 0 else [])
        if compared and value > 2:
            out += [("threshold", fmt(value * 2)), ("threshold", fmt(value // 2))]
        return out
    m = _FLOAT.match(text)
    if m:
        value, suffix = float(m.group(1)), m.group(2)
        fmt = lambda v: repr(float(v)) + suffix  # noqa: E731 (repr keeps a "." or an "e": still a float)
        out += [("constant", fmt(value + 1))] + ([("constant", fmt(value - 1))] if value != 0 else [])
        if compared and value != 0:
            out += [("threshold", fmt(value * 2)), ("threshold", fmt(value / 2))]
        # 1e30 + 1 is 1e30 again: the same number written otherwise is no mutant
        out = [(op, t) for op, t in out if float(t.rstrip("fFlL")) != value]
    return out


RELATIONAL = {"<": ("<=", ">="), "<=": ("<", ">"), ">": (">=", "<="), ">=": (">", "<"), "==": ("!=",), "!=": ("==",)}
ARITHMETIC = {"+": "-", "-": "+", "*": "/", "/": "*", "+=": "-=", "-=": "+=", "*=": "/=", "/=": "*="}


# --- C++ and CUDA ------------------------------------------------------------------------------

def mask_cpp(text: str) -> str:
    """`text` with comments, string and character literals and preprocessor lines (with their
    continuations) blanked to spaces, newlines kept: every offset still points at the same place."""
    out = list(text)
    i, n = 0, len(text)

    def blank(a: int, b: int) -> None:
        for k in range(a, min(b, n)):
            if out[k] != "\n":
                out[k] = " "

    line_start = True
    while i < n:
        c = text[i]
        if line_start and c == "#":
            j = i
            while True:  # to the end of the line, and of each continued line
                e = text.find("\n", j)
                e = n if e < 0 else e
                if e > 0 and text[e - 1] == "\\" and e < n:
                    j = e + 1
                    continue
                break
            blank(i, e)
            i = e
            continue
        if c == "\n":
            line_start = True
            i += 1
            continue
        if not c.isspace():
            line_start = False
        if text.startswith("//", i):
            e = text.find("\n", i)
            e = n if e < 0 else e
            blank(i, e)
            i = e
        elif text.startswith("/*", i):
            e = text.find("*/", i + 2)
            e = n if e < 0 else e + 2
            blank(i, e)
            i = e
        elif c == "R" and text.startswith('R"', i) and (i == 0 or not (text[i - 1].isalnum() or text[i - 1] == "_")):
            m = re.match(r'R"([^(\s]*)\(', text[i:])
            if m:
                e = text.find(")" + m.group(1) + '"', i)
                e = n if e < 0 else e + len(m.group(1)) + 2
                blank(i, e)
                i = e
            else:
                i += 1
        elif c in "\"'":
            if c == "'" and i > 0 and text[i - 1].isalnum():  # a digit separator (1'000)
                i += 1
                continue
            j = i + 1
            while j < n and text[j] != c and text[j] != "\n":
                j += 2 if text[j] == "\\" else 1
            blank(i, j + 1)
            i = j + 1
        else:
            i += 1
    masked = "".join(out)
    # registration (COURSE_LIBRARY / TORCH_LIBRARY blocks): schema strings and m.impl lines only
    for m in re.finditer(r"\b(?:COURSE|TORCH)_LIBRARY(?:_IMPL)?\s*\(", masked):
        o = masked.find("{", m.end())
        close = _match_brace(masked, o) if o >= 0 else -1
        if close > 0:
            masked = masked[:m.start()] + re.sub(r"[^\n]", " ", masked[m.start():close + 1]) + masked[close + 1:]
    return masked


def _match_brace(s: str, o: int) -> int:
    depth = 0
    for k in range(o, len(s)):
        if s[k] == "{":
            depth += 1
        elif s[k] == "}":
            depth -= 1
            if depth == 0:
                return k
    return -1


_CPP_TOKEN = re.compile(r"""
  (?P<id>[A-Za-z_]\w*)
 |(?P<num>(?:0[xX][0-9a-fA-F]+|(?:\d+\.\d*|\.\d+|\d+)(?:[eE][+-]?\d+)?)[uUlLfF]*)
 |(?P<op><<<|>>>|<<=|>>=|->|::|<=|>=|==|!=|&&|\|\||\+\+|--|\+=|-=|\*=|/=|%=|&=|\|=|\^=|<<|>>
       |[-+*/%<>=!&|^~?:;,.(){}\[\]])
""", re.X)
_KEYWORDS = {"return", "case", "if", "while", "for", "else", "do", "throw", "co_return", "sizeof", "template",
             "typename", "new", "delete", "operator"}


@dataclass
class _Tok:
    kind: str
    text: str
    start: int
    end: int


def _cpp_tokens(masked: str) -> list[_Tok]:
    return [_Tok(m.lastgroup, m.group(), m.start(), m.end()) for m in _CPP_TOKEN.finditer(masked)]


def _spaced(masked: str, t: _Tok) -> bool:
    """A binary operator as clang-format writes one: a space before and a space (or line end) after.
    Pointer declarators (`T* p`), dereferences (`*p`), unary minus and template brackets are not."""
    return (t.start > 0 and masked[t.start - 1] in " \t") and (t.end < len(masked) and masked[t.end] in " \t\n")


def _operand_end(t: _Tok | None) -> bool:
    return t is not None and (t.kind == "num" or (t.kind == "id" and t.text not in _KEYWORDS) or t.text in (")", "]"))


def cpp_mutants(text: str, file: str, exercise: str) -> list[Mutant]:
    masked = mask_cpp(text)
    toks = _cpp_tokens(masked)
    pair: dict[int, int] = {}
    stack: list[int] = []
    for i, t in enumerate(toks):
        if t.text in "({[" and t.kind == "op":
            stack.append(i)
        elif t.text in ")}]" and t.kind == "op" and stack:
            j = stack.pop()
            pair[i], pair[j] = j, i
    found: list[Mutant | None] = []

    def add(op: str, start: int, end: int, new: str) -> None:
        found.append(_make(exercise, file, text, op, start, end, new))

    def prev(i: int) -> _Tok | None:
        return toks[i - 1] if i > 0 else None

    def nxt(i: int) -> _Tok | None:
        return toks[i + 1] if i + 1 < len(toks) else None

    def opens_if(close: int) -> bool:
        """toks[close] is the `)` of an `if (...)`."""
        o = pair.get(close)
        return o is not None and o > 0 and toks[o - 1].text == "if"

    def statement_start(i: int) -> bool:
        p = prev(i)
        return p is None or p.text in (";", "{", "}", "else") or (p.text == ")" and opens_if(i - 1))

    def disable(i: int, last: int, op: str) -> None:
        """Statement toks[i..last] (last is its `;`) not run: `if (false) ` before it; none where an
        `else` follows a braceless if's body (it would bind to the new if)."""
        following = nxt(last)
        if following is not None and following.text == "else":
            return
        add(op, toks[i].start, toks[i].start, "if (false) ")

    def statement_end(i: int) -> int | None:
        k = i
        while k < len(toks):
            if toks[k].text == ";":
                return k
            if toks[k].text in "({[" and k in pair:
                k = pair[k]
            elif toks[k].text in ("{", "}"):
                return None
            k += 1
        return None

    for i, t in enumerate(toks):
        p, q = prev(i), nxt(i)
        if t.kind == "op":
            if t.text in RELATIONAL and _spaced(masked, t) and _operand_end(p):
                for new in RELATIONAL[t.text]:
                    add("relational", t.start, t.end, new)
            elif t.text in ("&&", "||") and _spaced(masked, t):
                add("logical", t.start, t.end, "||" if t.text == "&&" else "&&")
            elif t.text in ARITHMETIC and _spaced(masked, t) and (len(t.text) == 2 or _operand_end(p)):
                add("arithmetic", t.start, t.end, ARITHMETIC[t.text])
                after = toks[i + 2] if i + 2 < len(toks) else None
                if (t.text in ("+", "-") and q is not None and q.kind == "num" and re.fullmatch(r"1[uUlL]*", q.text)
                        and (after is None or after.text not in ("*", "/", "%", ".", "(", "[", "++", "--"))):
                    add("drop-one", t.start - 1, q.end, "")
        elif t.kind == "num":
            if p is not None and p.text in (".", "->"):
                continue
            compared = (p is not None and p.text in RELATIONAL and _spaced(masked, p)) or \
                       (q is not None and q.text in RELATIONAL and _spaced(masked, q))
            for op, new in _number_variants(t.text, compared, python=False):
                add(op, t.start, t.end, new)
        elif t.kind == "id":
            if t.text in ("threadIdx", "blockIdx") and q is not None and q.text == "." and i + 2 < len(toks):
                axis = toks[i + 2]
                if axis.text in ("x", "y"):
                    add("swap-index", axis.start, axis.end, "y" if axis.text == "x" else "x")
            elif t.text in ("__syncthreads", "__syncwarp") and statement_start(i):
                last = statement_end(i)
                if last is not None:
                    disable(i, last, "remove-sync")
            elif (t.text.startswith("TORCH_CHECK") or t.text.startswith("check_") or
                  (t.text == "course" and q is not None and q.text == "::" and i + 2 < len(toks)
                   and toks[i + 2].text.startswith("check_"))) and statement_start(i):
                last = statement_end(i)
                if last is not None:
                    disable(i, last, "remove-check")
            elif t.text == "return" and statement_start(i) and _early(toks, i, pair, opens_if):
                last = statement_end(i)
                if last is not None:
                    disable(i, last, "remove-return")
            elif t.text == "if" and q is not None and q.text == "(" and i + 1 in pair:
                close = pair[i + 1]
                inner = masked[q.end:toks[close].start]
                comparing = any(toks[k].text in ("<", "<=", ">", ">=") and _spaced(masked, toks[k])
                                for k in range(i + 2, close))
                if comparing and "\n" not in inner and inner.strip() != "true":
                    add("guard-true", q.end, toks[close].start, "true")
    return [m for m in found if m is not None]


def _early(toks: list[_Tok], i: int, pair: dict[int, int], opens_if) -> bool:
    """toks[i] (a `return`) is the body of an if or else, braced or not: an early exit."""
    p = toks[i - 1] if i > 0 else None
    if p is not None and (p.text == "else" or (p.text == ")" and opens_if(i - 1))):
        return True
    depth = 0
    for k in range(i - 1, -1, -1):  # the innermost enclosing `{`
        if toks[k].text == "}":
            depth += 1
        elif toks[k].text == "{":
            if depth == 0:
                before = toks[k - 1] if k > 0 else None
                return before is not None and (before.text == "else" or (before.text == ")" and opens_if(k - 1)))
            depth -= 1
    return False


# --- Python ------------------------------------------------------------------------------------

_PY_KEYWORDS = {"return", "in", "not", "and", "or", "is", "if", "else", "elif", "while", "for", "lambda", "yield",
                "assert", "del", "await", "print", "import", "from", "with", "as", "raise", "except"}


def py_mutants(text: str, file: str, exercise: str) -> list[Mutant]:
    tree = ast.parse(text)
    starts = [0]
    for line in text.splitlines(keepends=True):
        starts.append(starts[-1] + len(line))

    def off(row: int, col: int) -> int:
        return starts[row - 1] + col

    skip_lines: set[int] = set()
    parent: dict[ast.AST, ast.AST] = {}
    for node in ast.walk(tree):
        for child in ast.iter_child_nodes(node):
            parent[child] = node
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            skip_lines.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            for d in node.decorator_list:  # registration: @torch.library.register_fake(...)
                skip_lines.update(range(d.lineno, (d.end_lineno or d.lineno) + 1))
    found: list[Mutant | None] = []

    def add(op: str, start: int, end: int, new: str) -> None:
        found.append(_make(exercise, file, text, op, start, end, new))

    toks = [t for t in tokenize.generate_tokens(io.StringIO(text).readline)
            if t.type not in (tokenize.NL, tokenize.NEWLINE, tokenize.COMMENT, tokenize.INDENT, tokenize.DEDENT)]

    def operand_end(t) -> bool:
        return t is not None and (t.type in (tokenize.NUMBER, tokenize.STRING)
                                  or (t.type == tokenize.NAME and t.string not in _PY_KEYWORDS)
                                  or t.string in (")", "]", "}"))

    for i, t in enumerate(toks):
        if t.start[0] in skip_lines or t.start[0] != t.end[0]:
            continue
        p = toks[i - 1] if i > 0 else None
        q = toks[i + 1] if i + 1 < len(toks) else None
        a, b = off(*t.start), off(*t.end)
        if t.type == tokenize.OP:
            if t.string in RELATIONAL:
                for new in RELATIONAL[t.string]:
                    add("relational", a, b, new)
            elif t.string in ARITHMETIC and (len(t.string) == 2 or operand_end(p)):
                add("arithmetic", a, b, ARITHMETIC[t.string])
                after = toks[i + 2] if i + 2 < len(toks) else None
                if (t.string in ("+", "-") and q is not None and q.type == tokenize.NUMBER and q.string == "1"
                        and text[a - 1] == " "
                        and (after is None or after.string not in ("*", "/", "//", "%", "**", ".", "(", "["))):
                    add("drop-one", a - 1, off(*q.end), "")
        elif t.type == tokenize.NAME and t.string in ("and", "or"):
            add("logical", a, b, "or" if t.string == "and" else "and")
        elif t.type == tokenize.NUMBER:
            compared = (p is not None and p.string in RELATIONAL) or (q is not None and q.string in RELATIONAL)
            for op, new in _number_variants(t.string.replace("_", ""), compared, python=True):
                add(op, a, b, new)
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Return, ast.Expr, ast.If)) or node.lineno in skip_lines:
            continue
        line_text = text[starts[node.lineno - 1]:starts[node.lineno]]
        first_col = len(line_text) - len(line_text.lstrip())
        a = off(node.lineno, node.col_offset)
        if isinstance(node, ast.Return) and isinstance(parent.get(node), ast.If):
            if node.value is None:
                add("remove-return", a, a + len("return"), "pass")
            else:
                add("remove-return", a, off(node.value.lineno, node.value.col_offset), "")
        elif (isinstance(node, ast.Expr) and isinstance(node.value, ast.Call) and node.col_offset == first_col
              and "check" in ast.unparse(node.value.func).split(".")[-1].lower()):
            add("remove-check", a, a, "if False: ")
        elif isinstance(node, ast.If) and node.body and isinstance(node.body[0], ast.Raise) \
                and node.test.lineno == node.test.end_lineno:
            t = node.test
            add("guard-true", off(t.lineno, t.col_offset), off(t.end_lineno, t.end_col_offset), "False")
    return [m for m in found if m is not None]


# --- enumeration and sampling ------------------------------------------------------------------

# Statements that only mark a planner path for the coverage test (grader/verify/paths.py): `course::took(...);`
# with the `if (...)` that guards it alone, and Python's `lib.took(...)`. They record which branch ran and
# compute nothing the op returns, so a change inside them is equivalent by construction for every
# check of a submission (tests/test_gpu_grading.py's declared-paths test is what trusts them)
_PATH_MARKS = (re.compile(r"(?:\bif\s*\([^;{}]*\)\s*)?\bcourse::took\s*(?:<[^>]*>)?\s*\(.*?\)\s*;", re.S),
               re.compile(r"\blib\.took\(.*\)[ \t]*$", re.M))


def path_marks(text: str) -> list[tuple[int, int]]:
    """The (start, end) spans of a source's path-marking statements (`_PATH_MARKS`)."""
    return [m.span() for rx in _PATH_MARKS for m in rx.finditer(mask_cpp(text) if rx is _PATH_MARKS[0] else text)]


def source_mutants(text: str, file: str, exercise: str) -> list[Mutant]:
    """Every mutant of one file's text, each once (by id), in the order of the text; none inside a
    statement that only marks a planner path (`path_marks`)."""
    make = py_mutants if file.endswith(".py") else cpp_mutants
    marks = path_marks(text)
    unique: dict[str, Mutant] = {}
    for m in make(text, file, exercise):
        if not any(a <= m.start < b for a, b in marks):
            unique.setdefault(m.id, m)
    return sorted(unique.values(), key=lambda m: (m.start, m.operator, m.new))


def exercise_mutants(folder: Path) -> list[Mutant]:
    """Every mutant of a solution folder's sources (.cu .cpp .h .cuh .py)."""
    out = []
    for p in sorted(folder.iterdir()):
        if p.suffix in SUFFIXES and p.is_file():
            out += source_mutants(p.read_text(), p.name, folder.name)
    return out


def sample(by_exercise: dict[str, list[Mutant]], n: int, seed: int) -> dict[str, list[Mutant]]:
    """At least ceil(n / exercises) mutants of each exercise (all of them where it has fewer), chosen
    by a seeded hash of each mutant's id: the same seed picks the same mutants, and a mutant added
    or removed elsewhere does not change which others are picked."""
    share = math.ceil(n / max(1, len(by_exercise)))

    def rank(m: Mutant) -> str:
        return hashlib.sha256(f"{seed}\0{m.id}".encode()).hexdigest()

    return {e: sorted(sorted(ms, key=rank)[:share], key=lambda m: (m.file, m.start)) for e, ms in by_exercise.items()}


def read_equivalents(path: Path = EQUIVALENTS) -> dict[str, str]:
    """Mutant id -> why it is equivalent to the solution (`<id> # <reason>` per line, `#` comments)."""
    out = {}
    if not path.is_file():
        return out
    for n, raw in enumerate(path.read_text().splitlines(), 1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        mid, sep, reason = line.partition(" # ")
        if not sep or not reason.strip() or len(mid.split(":")) != 5:
            raise ValueError(f"{path}:{n}: expected '<NN:file:line:operator:hash> # <reason>', got {raw!r}")
        out[mid.strip()] = reason.strip()
    return out


# --- classification ----------------------------------------------------------------------------

BAD_STATUS = ("timed out", "crashed", "error", "tampered", "memory errors")


def classify(row: ExerciseRow) -> tuple[str, str]:
    """(outcome, why) of a graded mutant's row (grader.verify.scoring.score_exercise)."""
    if row.status == "build failed":
        first = next((l for l in (row.error or "").splitlines() if l.strip()), "")
        return "stillborn", f"does not compile: {first[:200]}"
    failed = [t for t in row.tests if t.outcome == "failed"]
    if failed and all(t.reason.startswith("could not load") for t in failed):
        return "stillborn", f"does not load: {failed[0].reason[:200]}"
    if row.status in BAD_STATUS:
        return "killed", f"{row.status}: {(row.error or '')[:200]}"
    if failed:
        first = (failed[0].reason or "").splitlines()
        return "killed", f"{failed[0].name}: {first[0][:200] if first else ''}"
    lost = [(g, v) for g, v in row.groups.items() if v.state in ("failed", "partial")]
    if lost:
        return "killed", f"{lost[0][0]}: {(lost[0][1].reason or '')[:200]}"
    return "survived", ""


# --- the slots and the rounds ------------------------------------------------------------------

def tree_hash(folder: Path, suffixes: Iterable[str] | None = None) -> str:
    h = hashlib.sha256()
    for p in sorted(folder.rglob("*")):
        if p.is_file() and "__pycache__" not in p.parts and (suffixes is None or p.suffix in suffixes):
            h.update(str(p.relative_to(folder)).encode() + b"\0" + p.read_bytes() + b"\0")
    return h.hexdigest()[:16]


@dataclass
class Entry:
    """One mutant in one round: where it is written, and once graded, how it ended."""

    mutant: Mutant
    folder: Path
    name: str  # the grading job's name
    outcome: str = ""
    why: str = ""
    build_s: float = 0.0
    grade_s: float = 0.0
    points: float = 0.0
    max_points: float = 0.0


def grade_round(entries: list[Entry], specs: dict, builds: dict[Path, Future], *, seed: int, timeout: float,
                stall: float, parallel: int, yardsticks: dict, references: dict[str, Path], compiling, on_yardstick=None) -> None:
    """Grade one round's mutants (their builds started by the caller) in one run of the gate: each in
    its own process that stops at its first failed check, several at once, each timing alone on the
    GPU and none while `compiling()`. `references` (exercise -> its reference folder, built in
    `builds`) are timed first by a yardstick, once per run (`yardsticks`); `on_yardstick()` is called
    once it has ended (at once without one)."""
    from grader.run import gate
    from grader.run.grading import (default_resident, grading_job, grading_row, read_results, read_yardstick,
                                    release_when_built, yardstick_job, _build_result_path)
    from grader.run.options import GradeOptions
    from grader.verify.scoring import score_exercise

    gpu = env.gpu_present()
    with tempfile.TemporaryDirectory(prefix="course-mutants-") as tmp:
        tmp = Path(tmp)
        jobs: dict[str, gate.Job] = {}
        for e in entries:
            work = tmp / e.name
            work.mkdir()
            job = grading_job(e.mutant.exercise, e.folder, work, GradeOptions(seed=seed, first_failure=True, stall=stall))
            job.name = e.name
            job.env["OMP_NUM_THREADS"] = str(max(1, env.usable_cores() // max(1, min(parallel, len(entries)))))
            job.held = True
            jobs[e.name] = job
        stick = None
        refs = {x: r for x, r in references.items() if gpu and (None, x) not in yardsticks}
        if refs:
            stick = yardstick_job(refs, tmp)
            stick.held = True
            jobs[stick.name] = stick
        waits = [(e.name, {e.mutant.exercise: builds[e.folder]}, _build_result_path(tmp / e.name, e.mutant.exercise))
                 for e in entries]
        if stick is not None:
            waits.append((stick.name, {x: builds[r] for x, r in refs.items()}, _build_result_path(tmp, stick.name)))
        release_when_built(jobs, waits)
        by_name = {e.name: e for e in entries}

        def done(job: gate.Job) -> None:
            if job.name in by_name:  # from its build's end: the time the mutant itself costs
                by_name[job.name].grade_s = max(0.0, job.wall_s - job.held_s)
            elif job is stick and on_yardstick is not None:
                on_yardstick()

        if stick is None and on_yardstick is not None:
            on_yardstick()
        interrupted = False
        try:
            # the next round's compilers are suspended for each timing, which then need not wait for them
            gate.run(list(jobs.values()), tmp, parallel=parallel, resident=default_resident(parallel),
                     compiling=compiling, timeout=timeout, on_finish=done, stop_compilers=True)
        except KeyboardInterrupt:
            # the kills of the processes that ended before it still count (below); the rest stay ungraded
            interrupted = True
        finally:
            if on_yardstick is not None:
                on_yardstick()
        if stick is not None and not interrupted:
            measured = read_yardstick(stick, tmp)
            for x in refs:
                yardsticks[(None, x)] = measured.get(x) or measured.get("*") or {"error": "not measured"}
        for e in entries:
            spec = specs[e.mutant.exercise]
            if interrupted and (not builds[e.folder].done() or jobs[e.name].returncode is None):
                continue  # its process was stopped by the interrupt: not graded
            built = builds[e.folder].result()
            e.build_s = 0.0 if built.get("cached") else float(built.get("wall_s") or built.get("seconds") or 0.0)
            if not built["ok"]:
                row = score_exercise(spec, [], "build failed", built.get("error", ""))
            else:
                job, work = jobs[e.name], tmp / e.name
                try:
                    tests = read_results(work / f"{e.mutant.exercise}.json")["tests"]
                except (OSError, ValueError, KeyError, TypeError):
                    tests = []
                already = job.timed_out or (job.returncode or 0) < 0 or any(t.outcome == "failed" for t in tests)
                if interrupted and not already:
                    continue  # it passed its checks, but the judge's re-check did not run
                # killed already: no need for the judge's re-check (it runs here, one mutant after another)
                judge = gpu and not already
                row = grading_row(spec, job, work, timeout, False, seed if judge else None,
                                  yardsticks.get((None, e.mutant.exercise)), None, False)
            e.outcome, e.why = classify(row)
            e.points, e.max_points = row.points, row.max_points
        if interrupted:
            raise KeyboardInterrupt


def plan_rounds(sampled: dict[str, list[Mutant]], width: int) -> list[list[tuple[Mutant, int]]]:
    """Rounds of at most `width` mutants per exercise, each with its slot number. Each exercise's
    mutants are in file order, and slot w takes every width-th of them: one slot's next mutant is
    mostly in the same file, so its build recompiles one file."""
    out: list[list[tuple[Mutant, int]]] = []
    for ms in sampled.values():
        for k, m in enumerate(ms):
            r = k // width
            while len(out) <= r:
                out.append([])
            out[r].append((m, k % width))
    return out


def slot_folder(round_index: int, slot: int, exercise: str) -> Path:
    """Two sets of slots: round r writes set r % 2 while round r - 1 grades in the other."""
    return SLOTS / f"s{round_index % 2}{slot:02d}" / exercise


# --- the report --------------------------------------------------------------------------------

def summarize(results: list[dict], generated: dict[str, int], exercises: Sequence[str]) -> list[dict]:
    rows = []
    for x in exercises:
        mine = [r for r in results if r["exercise"] == x]
        count = {k: sum(r["outcome"] == k for r in mine) for k in ("stillborn", "killed", "survived", "equivalent")}
        graded = count["killed"] + count["survived"]
        rows.append({"exercise": x, "generated": generated.get(x, 0), "sampled": len(mine), **count,
                     "not graded": len(mine) - sum(count.values()),
                     "kill_rate": count["killed"] / graded if graded else None})
    return rows


def table(rows: list[dict]) -> str:
    cols = ["generated", "sampled", "stillborn", "killed", "survived", "equivalent", "not graded"]
    head = f"{'exercise':26s}" + "".join(f"{c:>11s}" for c in cols) + f"{'kill rate':>11s}"
    lines = [head, "-" * len(head)]
    total = {c: 0 for c in cols}
    for r in rows:
        rate = "-" if r["kill_rate"] is None else f"{r['kill_rate']:.0%}"
        lines.append(f"{r['exercise']:26s}" + "".join(f"{r[c]:>11d}" for c in cols) + f"{rate:>11s}")
        for c in cols:
            total[c] += r[c]
    graded = total["killed"] + total["survived"]
    rate = f"{total['killed'] / graded:.0%}" if graded else "-"
    lines.append(f"{'total':26s}" + "".join(f"{total[c]:>11d}" for c in cols) + f"{rate:>11s}")
    return "\n".join(lines)


def markdown(header: dict, rows: list[dict], results: list[dict]) -> str:
    out = ["# Mutants of the solutions, graded", "",
           f"{header['date']}, {header['device'] or 'no GPU'}, Python {header.get('python', '?')}, seed "
           f"{header['seed']}, {header['n']} asked, "
           f"{header['wall_s']:.0f} s. Kill rate = killed / (killed + survived).", "", "```", table(rows), "```", ""]
    survivors = [r for r in results if r["outcome"] == "survived"]
    out += ["## Survivors", "", "Each is a hole in the grader (fix it, and add a known-wrong variant) or a program "
            "equivalent to the solution (list it in tests/mutants/equivalent.txt with the reason).", ""]
    for r in survivors or []:
        out += [f"- `{r['id']}` ({r['exercise']}/{r['file']}:{r['line']}, {r['operator']})", "", "  ```diff",
                *(f"  {l}" for l in r["diff"].splitlines()), "  ```"]
    if not survivors:
        out.append("None.")
    killed = [r for r in results if r["outcome"] in ("killed", "stillborn")]
    out += ["", "## Killed and stillborn, with the first reason", ""]
    out += [f"- `{r['id']}` {r['outcome']}: {r['why']}" for r in killed]
    return "\n".join(out) + "\n"


# --- the run -----------------------------------------------------------------------------------

def main(argv: list[str] | None = None) -> int:
    from grader.run.cli import UsageParser  # as `python -m grader`: a wrong usage in one line

    parser = UsageParser(prog="python -m grader.run.mutants", description=__doc__,
                         formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--ex", nargs="*", default=[], help="exercise numbers or names (default: all)")
    parser.add_argument("--n", type=int, default=300, help="mutants to sample (at least N / exercises of each)")
    parser.add_argument("--seed", type=int, default=1, help="which mutants are sampled (and the checks' seed)")
    parser.add_argument("--budget", type=float, default=None,
                        help="seconds: no round starts that would end after them; what was graded is reported")
    parser.add_argument("--timeout", type=float, default=240.0,
                        help="seconds per mutant's grading process (its own time: not while it waits for its "
                             "build or the GPU); past it the mutant is killed as timed out")
    parser.add_argument("--stall", type=float, default=120.0,
                        help="seconds of a mutant's grading with no check starting or ending: killed as timed out "
                             "(a hang; the solutions' longest check on the H200 takes 7.4 s)")
    parser.add_argument("--width", type=int, default=None,
                        help="mutants per exercise per round (default: about 48 per round in all)")
    parser.add_argument("--jobs", type=int, default=env.usable_cores(), help="builds at once (default: the cores)")
    parser.add_argument("--parallel", type=int, default=None, help="grading processes running checks at once")
    parser.add_argument("--fresh", action="store_true", help="grade again mutants an earlier run graded")
    parser.add_argument("--list", action="store_true", help="only list the sampled mutants")
    parser.add_argument("--id", dest="ids", action="append", default=[],
                        help="grade this mutant (an id of the report; repeatable) instead of a sample")
    parser.add_argument("--out", type=Path, default=REPORT_DIR)
    parser.add_argument("--same-code", action="store_true",
                        help="grade nothing: compile the report's survivors not in the equivalents file (or the "
                             "--id mutants) here, on the CPU, and print the equivalents-file lines of those whose "
                             "machine code is the solution's (grader.run.same_code)")
    parser.add_argument("--append", action="store_true", help="with --same-code: add those lines to the file")
    args = parser.parse_args(argv)
    began = time.perf_counter()

    from grader.run.grading import default_parallel, start_builds
    from grader.specs import Selection

    if args.same_code and not os.environ.get("TORCH_CUDA_ARCH_LIST"):
        # the graded build's architectures: an H200's (env.configure's choice there), not this machine's default
        os.environ["TORCH_CUDA_ARCH_LIST"] = env.HOPPER_ARCH_LIST
    env.configure()
    os.environ["PYTHONDONTWRITEBYTECODE"] = "1"  # a slot's .py changes within a second: no stale .pyc
    chosen = Selection.start([e for e in args.ex if e])
    exercises = [x for x in chosen.exercises if (SOLUTIONS / x).is_dir()]
    every = {x: exercise_mutants(SOLUTIONS / x) for x in exercises}
    if args.ids:
        unknown = set(args.ids) - {m.id for ms in every.values() for m in ms}
        if unknown:
            raise SystemExit(f"no such mutant of today's solutions: {', '.join(sorted(unknown))}")
        sampled = {x: [m for m in ms if m.id in args.ids] for x, ms in every.items()}
        exercises = [x for x in exercises if sampled[x]]
    else:
        sampled = sample(every, args.n, args.seed)
    equivalents = read_equivalents()
    if args.same_code:
        from grader.run.same_code import check_survivors

        return check_survivors(args.out / "report.json", every, equivalents, args.ids,
                               append=EQUIVALENTS if args.append else None)
    known = {m.id for ms in every.values() for m in ms}
    chosen_numbers = {x[:2] for x in exercises}  # a line of an exercise not chosen is not looked at
    stale = sorted(m for m in set(equivalents) - known if m.split(":", 1)[0] in chosen_numbers)
    print(f"{sum(map(len, every.values()))} mutants of {len(exercises)} exercise(s); {sum(map(len, sampled.values()))} "
          f"sampled (seed {args.seed}): " + ", ".join(f"{x[:2]} {len(sampled[x])}/{len(every[x])}" for x in exercises))
    if stale:
        print(f"warning: {len(stale)} line(s) of {EQUIVALENTS.relative_to(env.REPO)} name no mutant of today's "
              f"solutions (a line moved or changed?): {', '.join(stale[:5])}")
    if args.list:
        for x in exercises:
            for m in sampled[x]:
                print(f"{m.id}\n{m.diff}")
        return 0

    grader_key = tree_hash(env.REPO / "grader")
    solution_keys = {x: tree_hash(SOLUTIONS / x, SUFFIXES) for x in exercises}  # its code: a README edit keeps kills
    keys = {x: hashlib.sha256(f"{grader_key}\0{solution_keys[x]}".encode()).hexdigest()[:16] for x in exercises}
    previous: dict[str, dict] = {}
    if not args.fresh and (args.out / "report.json").is_file():
        try:
            for r in json.loads((args.out / "report.json").read_text()).get("mutants", []):
                if r["outcome"] not in FINAL:
                    continue
                if r.get("key") == keys.get(r["exercise"]):
                    previous[r["id"]] = r
                elif r["outcome"] != "survived" and r.get("solution_key") == solution_keys.get(r["exercise"]):
                    # a kill (or a build failure) of the same program stays one under a later grader: the
                    # grader only gains checks, and the solutions' full marks and the known-wrong suite
                    # keep each check failing what it failed; a survivor is graded again
                    previous[r["id"]] = {**r, "earlier_grader": True}
        except (ValueError, KeyError):
            previous = {}

    if not args.ids:
        for line in population_drift(args.out / "report.json", {x: len(every[x]) for x in exercises}, solution_keys):
            print(f"warning: {line}")

    results: dict[str, dict] = {}

    def record(m: Mutant, outcome: str, why: str, **extra) -> None:
        results[m.id] = {"id": m.id, "exercise": m.exercise, "file": m.file, "line": m.line, "operator": m.operator,
                         "diff": m.diff, "outcome": outcome, "why": why, "key": keys[m.exercise],
                         "solution_key": solution_keys[m.exercise], "grader_key": grader_key, **extra}

    def record_entry(e: Entry) -> None:
        record(e.mutant, e.outcome, e.why, build_s=round(e.build_s, 1), grade_s=round(e.grade_s, 1),
               points=e.points, max_points=e.max_points)

    todo: dict[str, list[Mutant]] = {}
    for x in exercises:
        todo[x] = []
        for m in sampled[x]:
            if m.id in equivalents:
                record(m, "equivalent", equivalents[m.id])
            elif m.id in previous:
                results[m.id] = {**previous[m.id], "reused": True, "diff": m.diff}
            else:
                record(m, "not graded", "the budget ran out first")
                todo[x].append(m)
    reused = sum(1 for r in results.values() if r.get("reused"))
    if reused:
        earlier = sum(1 for r in results.values() if r.get("reused") and r.get("earlier_grader"))
        print(f"{reused} mutant(s) graded by an earlier run of these solutions: kept (--fresh regrades)"
              + (f"; {earlier} of them kills by an earlier grader" if earlier else ""))
    count = sum(map(len, todo.values()))
    with_todo = [x for x in exercises if todo[x]]
    width = args.width or max(1, min(48, math.ceil(48 / max(1, len(with_todo)))))
    schedule = plan_rounds({x: todo[x] for x in with_todo}, width)
    specs = chosen.specs()
    gpu = env.gpu_present()
    device = env.device_name() if gpu else ""
    if not gpu:
        print("warning: no GPU here, so only the checks that run on the CPU run: a mutant they do not catch is "
              "counted as survived")
    print(f"{count} to grade in {len(schedule)} round(s) of up to {width} per exercise; "
          f"{'on ' + device if gpu else 'no GPU: the checks that run on the CPU only'}"
          + (f"; budget {args.budget:.0f} s" if args.budget else ""), flush=True)

    pool = ThreadPoolExecutor(max_workers=max(1, args.jobs), thread_name_prefix="build")
    builds: dict[Path, Future] = {}
    references = {x: SOLUTIONS / x for x in with_todo} if gpu else {}
    yardsticks: dict = {}
    rounds_s: list[float] = []
    build_began: dict[int, float] = {}
    per_exercise: dict[str, list[tuple[float, float]]] = {}

    def start_round(r: int) -> list[Entry]:
        entries = []
        # quick builds first: a round's first `parallel` processes start at once, and each runs its
        # checks as soon as its own build is done (a .py mutant needs none, a .cu one the longest)
        order = {".py": 0, ".cpp": 1, ".h": 2, ".cuh": 2, ".cu": 3}
        for m, slot in sorted(schedule[r], key=lambda ms: order.get(Path(ms[0].file).suffix, 3)):
            folder = slot_folder(r, slot, m.exercise)
            write_slot(folder, SOLUTIONS / m.exercise, m.texts())
            entries.append(Entry(m, folder, f"r{r}-{m.exercise[:2]}-{slot}"))
        build_began[r] = time.perf_counter()
        dirs = [e.folder for e in entries] + (list(references.values()) if r == 0 else [])
        builds.update(start_builds(dirs, args.jobs, pool, log=lambda *a: None))
        return entries

    def predicted_end(now: float) -> float:
        """When a round whose builds start now would end: after the round grading now (about half a
        round left), a round's time (the mean of the last three, or the time so far)."""
        last = rounds_s[-3:] or [now - began]
        return now + 1.5 * sum(last) / len(last)

    timed = threading.Event()  # set once the run's yardstick has ended (round 0)
    interrupted = False
    current: list[Entry] = []
    try:
        current = start_round(0) if schedule else []
        for r in range(len(schedule)):
            t0 = time.perf_counter()
            following: dict = {}  # round r + 1's entries, once its builds started
            next_futures: list[Future] = []

            def begin_next(r=r, following=following, next_futures=next_futures) -> None:
                """Once round r's builds are done: round r + 1's slots compile beside its grading."""
                if r + 1 >= len(schedule) or "entries" in following:
                    return
                if args.budget and predicted_end(time.perf_counter()) - began > args.budget:
                    following["entries"] = None
                    return
                entries = start_round(r + 1)
                next_futures.extend(builds[e.folder] for e in entries)
                following["entries"] = entries  # last: `compiling` reads it

            mine = [builds[e.folder] for e in current]
            built_at: list[float] = []

            def watch(mine=mine, built_at=built_at, begin_next=begin_next) -> None:
                for f in mine:
                    f.result()
                built_at.append(time.perf_counter())
                timed.wait()  # the yardstick times the references with no compiler beside it
                begin_next()

            watcher = threading.Thread(target=watch, daemon=True)
            watcher.start()
            try:
                grade_round(current, specs, builds, seed=args.seed, timeout=args.timeout, stall=args.stall,
                            parallel=args.parallel or default_parallel(len(current)), yardsticks=yardsticks,
                            references=references if r == 0 else {}, on_yardstick=timed.set,
                            # no timing until round r + 1's builds have started and ended (or will not
                            # start); they start once the yardstick, which runs first, has ended
                            compiling=lambda: (r + 1 < len(schedule) and "entries" not in following and timed.is_set())
                            or not all(f.done() for f in next_futures))
            except Exception as e:  # a fault of this runner on one round: the others still count
                import traceback

                traceback.print_exc()
                for entry in current:
                    entry.outcome, entry.why = "not graded", f"the round failed: {type(e).__name__}: {e}"
            watcher.join()
            took = time.perf_counter() - t0
            rounds_s.append(took)
            for e in current:
                record_entry(e)
                per_exercise.setdefault(e.mutant.exercise, []).append((e.build_s, e.grade_s))
            tally = {k: sum(e.outcome == k for e in current) for k in ("killed", "survived", "stillborn")}
            slowest = max(current, key=lambda e: e.build_s + e.grade_s)
            # a round's builds start while the round before it grades
            built = f"its builds took {built_at[0] - build_began[r]:.1f} s, " if built_at else ""
            print(f"round {r + 1}/{len(schedule)}: {len(current)} mutants in {took:.1f} s ({built}"
                  f"{tally['killed']} killed, {tally['survived']} survived, {tally['stillborn']} stillborn; "
                  f"slowest {slowest.mutant.exercise[:2]} build {slowest.build_s:.1f} s "
                  f"+ grade {slowest.grade_s:.1f} s); "
                  f"{time.perf_counter() - began:.0f} s elapsed", flush=True)
            for e in current:
                if e.outcome == "survived":
                    diff = e.mutant.diff.replace("\n", "\n    ")
                    print(f"  survived {e.mutant.id}\n    {diff}", flush=True)
            write_report(args, results, every, exercises, device, began, equivalents)
            if "entries" not in following:
                begin_next()
            if following.get("entries") is None:
                if r + 1 < len(schedule):
                    print(f"budget: {len(schedule) - r - 1} round(s) not started", flush=True)
                break
            current = following["entries"]
    except KeyboardInterrupt:
        interrupted = True
        # the round in progress: the mutants whose grading process had already failed a check are kills
        # (the judge only ever adds failures); the others stay "not graded"
        for e in current:
            if e.outcome:
                record_entry(e)
        print("interrupted: reporting what was graded", flush=True)
    finally:
        pool.shutdown(wait=False, cancel_futures=True)
    if per_exercise:
        print("\ntime per mutant by exercise (build, grading process; the round runs many at once):")
        for x, times in per_exercise.items():
            b = sum(t[0] for t in times) / len(times)
            g = sum(t[1] for t in times) / len(times)
            print(f"  {x:26s} build {b:5.1f} s + grade {g:5.1f} s  ({len(times)} graded)")
        if rounds_s:
            done = sum(len(schedule[i]) for i in range(len(rounds_s)))
            left = count - done
            print(f"  wall: {sum(rounds_s) / done:.2f} s per mutant over {done} in {len(rounds_s)} round(s)"
                  + (f"; the {left} not graded would take about {left * sum(rounds_s) / done:.0f} s more"
                     if left else ""))
    rows = write_report(args, results, every, exercises, device, began, equivalents)
    print()
    survivors = [r for r in results.values() if r["outcome"] == "survived"]
    if survivors:
        print("survivors (fix the grader, or list them in tests/mutants/equivalent.txt with the reason):")
        for s in survivors:
            print(f"  {s['id']}\n    " + s["diff"].replace("\n", "\n    "))
        print()
    print(f"report: {args.out / 'report.md'}")
    print(table(rows))
    return 130 if interrupted else 0


def population_drift(report: Path, generated: dict[str, int], solution_keys: dict[str, str]) -> list[str]:
    """Exercises whose solution is the one an earlier report sampled but whose mutants number otherwise
    here: the generator's population depends on the Python that tokenizes the wrappers (3.12 splits an
    f-string's fields into tokens, 3.11 keeps the whole f-string one string), and a seed draws its sample
    from the population, so this run's sample is another and the report would hold two."""
    try:
        earlier = json.loads(report.read_text())
    except (OSError, ValueError):
        return []
    same = {r.get("exercise") for r in earlier.get("mutants", [])
            if r.get("solution_key") == solution_keys.get(r.get("exercise"))}
    lines = []
    for row in earlier.get("exercises", []):
        x, then = row.get("exercise"), row.get("generated")
        if x in same and x in generated and then is not None and then != generated[x]:
            lines.append(f"{x}: the report's sample was drawn from {then} mutants of this solution (Python "
                         f"{earlier.get('python', 'unrecorded')}); Python {platform.python_version()} generates "
                         f"{generated[x]}, so the seed draws another sample here: grade with the report's Python")
    return lines


def write_report(args, results: dict[str, dict], every: dict, exercises: list[str], device: str, began: float,
                 equivalents: dict) -> list[dict]:
    from grader.verify.results import write_json_atomic, write_text_atomic

    listed = sorted(results.values(), key=lambda r: (r["exercise"], r["file"], r["line"], r["id"]))
    rows = summarize(listed, {x: len(every[x]) for x in exercises}, exercises)
    header = {"date": time.strftime("%Y-%m-%d %H:%M:%S"), "device": device, "seed": args.seed,
              "n": len(args.ids) if args.ids else args.n,
              "wall_s": time.perf_counter() - began, "python": platform.python_version(), "operators": OPERATORS}
    write_json_atomic(args.out / "report.json", {**header, "exercises": rows, "mutants": listed})
    write_text_atomic(args.out / "report.md", markdown(header, rows, listed))
    return rows


if __name__ == "__main__":
    sys.exit(main())
