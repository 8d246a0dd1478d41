"""nbgrader's feedback without the hidden tests: a preprocessor that nbgrader_config.py adds to
`nbgrader generate_feedback`, before nbgrader's own ClearHiddenTests (which cleans the cells' source).
"""
from __future__ import annotations

import re

from grader.authoring.notebooks import NB_HIDDEN_BEGIN, NB_HIDDEN_END

_ANSI = re.compile(r"\x1b\[[0-9;]*m")
_TRACEBACK_SOURCE = re.compile(r"\s*(?:-*>)?\s*\d+ ?(.*)$")


def hidden_lines(source: str) -> set[str]:
    """The stripped lines of a cell's hidden-test regions, markers included."""
    hidden, inside = set(), False
    for line in source.splitlines():
        if NB_HIDDEN_BEGIN in line:
            inside = True
        if inside and line.strip():
            hidden.add(line.strip())
        if NB_HIDDEN_END in line:
            inside = False
    return hidden


def _load_preprocessor_base():
    try:
        from nbconvert.preprocessors import Preprocessor
    except ImportError:  # nbgrader's machinery is absent; the class is only used by nbgrader
        return object
    return Preprocessor


class HideHiddenTestsInTracebacks(_load_preprocessor_base()):
    """nbgrader feedback preprocessor: IPython's tracebacks quote the lines around the failing one,
    which can include hidden tests. Drop those lines from graded cells' error outputs (run it before
    nbgrader's ClearHiddenTests, which cleans the cell's source)."""

    def __init__(self, **kwargs):
        super().__init__(**kwargs)
        self.enabled = True  # nbconvert's preprocessors are off unless enabled

    def preprocess_cell(self, cell, resources, index):
        if cell.cell_type != "code" or not cell.metadata.get("nbgrader", {}).get("grade"):
            return cell, resources
        hidden = hidden_lines(cell.source)
        if not hidden:
            return cell, resources
        for output in cell.get("outputs", []):
            if output.output_type == "error":
                output.traceback = [_drop_quoted(entry, hidden) for entry in output.traceback]
        return cell, resources


def _drop_quoted(entry: str, hidden: set[str]) -> str:
    kept = []
    for line in entry.split("\n"):
        m = _TRACEBACK_SOURCE.match(_ANSI.sub("", line))
        if m and m.group(1).strip() in hidden:
            continue
        kept.append(line)
    return "\n".join(kept)
