"""The student regions of a source file in solutions/: the one parser of `BEGIN/END SOLUTION` markers,
used by the student copies (grader/authoring/stubs.py) and by the notebooks (their `%%solution` cells).

    // BEGIN SOLUTION            (`# BEGIN SOLUTION` in Python)
    // GOAL: what to achieve     the region's goal: all a `make exercises LEVEL=goal` copy keeps
    // TODO: what to write ...   the steps, kept in the student copy (the default level, `steps`)
                                 and in the notebook's cell; at LEVEL=goal, in the README's Hints
    // STUB: code                optional: what the student copy runs instead (grader/authoring/stubs.py)
    ... reference code ...
    // END SOLUTION

A marker is a line holding only the language's comment prefix (once or repeated) and the words.
Nested, unterminated and stray END markers are errors (RegionError, naming the file and line). A
region is named by the function around it ("leaky_relu_kernel"; "f#2" for the second region in f).

The open level (`make exercises LEVEL=open`) widens the regions to whole kernels and functions with
an outer region that holds solution regions (the one nesting allowed):

    // BEGIN OPEN                (`# BEGIN OPEN` in Python)
    // GOAL: what the whole ...  what the open-level copy says (at least one line)
    // STUB: code                optional, as above: what the open-level copy runs instead
    ... given code and BEGIN/END SOLUTION regions ...
    // END OPEN

Only the open level blanks it (into a BEGIN/END SOLUTION region of the student's file); the other
levels, the notebooks and every reader of regions here see the file without its OPEN lines (the
markers and the GOAL/STUB lines that open it): `inner_lines`. An OPEN region inside another, or one
that a solution region straddles, is an error.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path

COMMENT = {".cu": "//", ".cuh": "//", ".cpp": "//", ".h": "//", ".hpp": "//", ".py": "#"}
BEGIN, END = "BEGIN SOLUTION", "END SOLUTION"
OPEN_BEGIN, OPEN_END = "BEGIN OPEN", "END OPEN"
GOAL, TODO, STUB = "GOAL:", "TODO", "STUB:"  # the comment lines a region opens with (after the prefix)


class RegionError(ValueError):
    pass


def marker(line: str, prefix: str) -> str | None:
    """BEGIN or END when the line is a marker comment, else None."""
    m = re.match(rf"\s*{re.escape(prefix)}+\s*({BEGIN}|{END})\s*$", line)
    return m.group(1) if m else None


def open_marker(line: str, prefix: str) -> str | None:
    """OPEN_BEGIN or OPEN_END when the line is an open-level marker comment, else None."""
    m = re.match(rf"\s*{re.escape(prefix)}+\s*({OPEN_BEGIN}|{OPEN_END})\s*$", line)
    return m.group(1) if m else None


def _is_open_header(line: str, prefix: str) -> bool:
    return line.strip().startswith((f"{prefix} {GOAL}", f"{prefix} {STUB}"))


def open_spans(lines: list[str], prefix: str, where: str) -> list[tuple[int, int, int]]:
    """(begin, body, end) of each OPEN region: the 0-based indices of its BEGIN OPEN line, of its first
    line after the GOAL/STUB lines that open it, and of its END OPEN line. Checks how OPEN and
    SOLUTION markers nest (spans() checks the SOLUTION markers among themselves)."""
    found: list[tuple[int, int, int]] = []
    open_at: int | None = None
    solution_at: int | None = None
    for i, line in enumerate(lines):
        m, s = open_marker(line, prefix), marker(line, prefix)
        if s == BEGIN:
            solution_at = i
        elif s == END:
            solution_at = None
        elif m == OPEN_BEGIN:
            if open_at is not None:
                raise RegionError(f"{where}:{i + 1}: nested {OPEN_BEGIN} (the open region opened at line "
                                  f"{open_at + 1} is not closed)")
            if solution_at is not None:
                raise RegionError(f"{where}:{i + 1}: {OPEN_BEGIN} inside the solution region opened at line "
                                  f"{solution_at + 1} (an open region holds solution regions, not the reverse)")
            open_at = i
        elif m == OPEN_END:
            if open_at is None:
                raise RegionError(f"{where}:{i + 1}: {OPEN_END} without a {OPEN_BEGIN}")
            if solution_at is not None:
                raise RegionError(f"{where}:{i + 1}: {OPEN_END} inside the solution region opened at line "
                                  f"{solution_at + 1} (close it first)")
            body = open_at + 1
            while body < i and _is_open_header(lines[body], prefix):
                body += 1
            if not any(lines[j].strip().startswith(f"{prefix} {GOAL}") for j in range(open_at + 1, body)):
                raise RegionError(f"{where}:{open_at + 1}: an open region needs a `{prefix} {GOAL} ...` line "
                                  f"right after {OPEN_BEGIN}, saying what the student writes there")
            found.append((open_at, body, i))
            open_at = None
    if open_at is not None:
        raise RegionError(f"{where}:{open_at + 1}: {OPEN_BEGIN} is never closed by {OPEN_END}")
    return found


def open_lines(lines: list[str], prefix: str, where: str) -> set[int]:
    """The indices of the lines that only the open level reads: each OPEN region's markers and the
    GOAL/STUB lines that open it."""
    out: set[int] = set()
    for begin, body, end in open_spans(lines, prefix, where):
        out.update(range(begin, body))
        out.add(end)
    return out


def inner_lines(lines: list[str], prefix: str, where: str = "<text>") -> list[str]:
    """The lines without the open level's own (what the steps and goal levels and the notebooks read)."""
    spans(lines, prefix, where)  # a SOLUTION marker error is reported at its line in the whole file
    drop = open_lines(lines, prefix, where)
    return [l for i, l in enumerate(lines) if i not in drop]


def source_lines(path: Path) -> list[str]:
    """A source file's lines as the regions' readers see them: without the open level's lines."""
    path = Path(path)
    return inner_lines(path.read_text().splitlines(), COMMENT[path.suffix], str(path))


def spans(lines: list[str], prefix: str, where: str) -> list[tuple[int, int]]:
    """(begin, end): the 0-based indices of each region's BEGIN and END lines, in order."""
    found: list[tuple[int, int]] = []
    open_at: int | None = None
    for i, line in enumerate(lines):
        m = marker(line, prefix)
        if m == BEGIN:
            if open_at is not None:
                raise RegionError(f"{where}:{i + 1}: nested {BEGIN} (the region opened at line {open_at + 1} "
                                  f"is not closed)")
            open_at = i
        elif m == END:
            if open_at is None:
                raise RegionError(f"{where}:{i + 1}: {END} without a {BEGIN}")
            found.append((open_at, i))
            open_at = None
    if open_at is not None:
        raise RegionError(f"{where}:{open_at + 1}: {BEGIN} is never closed by {END}")
    return found


def indent_of(line: str) -> str:
    return line[: len(line) - len(line.lstrip())]


@dataclass
class Region:
    name: str  # the enclosing function, e.g. "leaky_relu_kernel" ("f#2" for a second region in f)
    indent: str
    begin: int  # 0-based line index of the BEGIN marker
    end: int  # 0-based line index of the END marker
    lines: list[str]  # the lines between the markers, without newlines
    prefix: str  # the comment prefix of the language

    def _tagged(self, tag: str) -> list[str]:
        return [l for l in self.lines if l.strip().startswith(f"{self.prefix} {tag}")]

    @property
    def goal(self) -> list[str]:
        return self._tagged(GOAL)

    @property
    def todo(self) -> list[str]:
        return self._tagged(TODO)

    @property
    def stub(self) -> list[str]:
        return self._tagged(STUB)

    def teaching_lines(self) -> list[str]:
        """The TODO and code lines (what a notebook cell shows), dedented; STUB lines are the
        student copy's business, not the student's, and GOAL lines the LEVEL=goal copy's (a notebook
        gives the steps: its cells hold the TODO lines)."""
        kept = [l for l in self.lines if not l.strip().startswith((f"{self.prefix} {STUB}", f"{self.prefix} {GOAL}"))]
        return [(l[len(self.indent):] if l.startswith(self.indent) else l).rstrip() for l in kept]

    def context(self, text_lines: list[str]) -> list[str]:
        """The given code above the region, from the enclosing definition (and its comments)."""
        start = _definition_line(text_lines, self.begin)
        while start > 0 and (text_lines[start - 1].startswith((self.prefix, "template")) or
                             text_lines[start - 1].startswith("__global__")):
            start -= 1
        return text_lines[start : self.begin]


_DEFINITION = re.compile(r"^(?!\s)(?!//|#)(?:.*?\b)?(\w+)\s*\(")


def _definition_line(lines: list[str], before: int) -> int:
    for i in range(before - 1, -1, -1):
        if _DEFINITION.match(lines[i]) and not lines[i].startswith(("template", "}", "#")):
            return i
        if lines[i].startswith("def ") or lines[i].startswith("    def "):
            return i
    raise ValueError(f"no enclosing function above line {before + 1}")


# Attributes between a kernel's return type and its name: `__global__ void __launch_bounds__(256, 2)`
_ATTRIBUTE = re.compile(r"\b__\w+__\s*\((?:[^()]|\([^()]*\))*\)")


def _definition_name(lines: list[str], at: int) -> str:
    """The name of the function defined at line `at`: a Python `def`, or a C++ declaration that may
    continue on the next lines and carry attributes (`__launch_bounds__(...)` is not the name)."""
    m = re.match(r"\s*def\s+(\w+)", lines[at])
    if m:
        return m.group(1)
    text = ""
    for line in lines[at : at + 8]:
        text += " " + line.split("//")[0]
        m = _DEFINITION.match(_ATTRIBUTE.sub(" ", text).strip())
        if m:
            return m.group(1)
    return _DEFINITION.match(lines[at]).group(1)


def regions_of(path: Path, text: str | None = None) -> list[Region]:
    """The solution regions of one source file, named by their enclosing function."""
    path = Path(path)
    prefix = COMMENT[path.suffix]
    lines = inner_lines((path.read_text() if text is None else text).splitlines(), prefix, str(path))
    regions: list[Region] = []
    seen: dict[str, int] = {}
    for begin, end in spans(lines, prefix, str(path)):
        name = _definition_name(lines, _definition_line(lines, begin))
        seen[name] = seen.get(name, 0) + 1
        if seen[name] > 1:
            name = f"{name}#{seen[name]}"
        regions.append(Region(name, indent_of(lines[begin]), begin, end, lines[begin + 1 : end], prefix))
    return regions


def find_region(path: Path, name: str) -> Region:
    regions = regions_of(path)
    for r in regions:
        if r.name == name:
            return r
    known = ", ".join(r.name for r in regions) or "none"
    raise KeyError(f"{path} has no solution region in {name!r} (its regions: {known})")


def replace_regions(text: str, suffix: str, bodies: dict[str, list[str]]) -> str:
    """`text` (without its open level's lines) with the inside of each named region replaced by
    `bodies[name]` (re-indented)."""
    lines = inner_lines(text.splitlines(), COMMENT[suffix])
    out: list[str] = []
    last = 0
    for r in regions_of(Path("x" + suffix), text):
        if r.name not in bodies:
            continue
        out += lines[last : r.begin + 1]
        out += [(r.indent + l) if l.strip() else "" for l in bodies[r.name]]
        last = r.end
    out += lines[last:]
    return "\n".join(out) + ("\n" if text.endswith("\n") else "")
