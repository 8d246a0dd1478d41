"""A unit's notebook, written once: notebooks/source/<unit>.py, a jupytext percent-format file.

    # %% [markdown] id="kernels"                  a markdown cell, named by `id`
    # %% id="plot"                                a code cell
    # %% nbgrader={"grade": true, ...} editable=false deletable=false
                                                  an nbgrader cell, named by its grade_id

Four things in it come from elsewhere, and `make notebooks` fills them in:

    # %%solution 01_leaky_relu/leaky_relu.cu leaky_relu_kernel
        a code cell of this line alone: the region's TODO lines and code from solutions/, between
        nbgrader's solution delimiters (the student release keeps the TODO lines)
    # @@setup@@
        a code cell of this line alone: the course's setup cell (SETUP below), which also sets the
        course up when the notebook runs outside the repository (Colab): it clones GITHUB_REPO
    # @@colab@@
        a line of a markdown cell (the first cell of every unit): the "Open in Colab" badge of this
        unit's release notebook on GitHub (GITHUB_REPO below)
    # @@context 01_leaky_relu/leaky_relu.cu leaky_relu_kernel@@
    # @@context TARGET REGION from "a line above it"@@
        a line of a markdown cell: the given code around the region (from its function's signature,
        or from the first line containing the quoted text), as a fenced block

`notebook(unit)` runs the jupytext command line (`python -m jupytext --to ipynb`) on the file and
fills those in: the instructor's notebook, with solutions and hidden tests, the same bytes every time.
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from grader.env import REPO
from grader.authoring.notebooks import MAGIC, NB_BEGIN, NB_END, SOLUTIONS, parse_solution_cell
from grader.authoring.regions import find_region, regions_of, source_lines

NOTEBOOKS = REPO / "notebooks"
SOURCE = NOTEBOOKS / "source"

SETUP_DIRECTIVE = "# @@setup@@"
CONTEXT_DIRECTIVE = re.compile(r'^@@context (\S+) (\S+)(?: from (".*"))?@@$', re.MULTILINE)

# The course's GitHub repository, owner/name, and the branch students open. Every Colab badge
# (README.md and each notebook's `@@colab@@` cell) links to the release notebooks there, and the setup
# cell clones the course from there when a notebook runs outside the repository. It is set in one
# place, pyproject.toml's `[tool.course] repo`, which `make notebooks COURSE_REPO=<url>` writes
# (grader/authoring/notebook_release.py) before it rewrites the release and the README.
PYPROJECT = REPO / "pyproject.toml"
PLACEHOLDER_REPO = "OWNER/cuda-course"
GITHUB_BRANCH = "main"
_GITHUB_REPO_RE = re.compile(
    r"^(?:(?:https?://|git@)?github\.com[/:])?(?P<repo>[A-Za-z0-9][A-Za-z0-9-]*/[A-Za-z0-9._-]+?)(?:\.git)?/?$")


def course_config(pyproject: Path | None = None) -> dict:
    """pyproject.toml's `[tool.course]` table: `repo` (owner/name) and `template` (a bool). Read by
    line (tomllib is Python 3.11+, the course supports 3.10): `key = "string"` or `key = true|false`."""
    text = (pyproject or PYPROJECT).read_text() if (pyproject or PYPROJECT).is_file() else ""
    table = re.search(r"^\[tool\.course\][ \t]*\n(.*?)(?=^\[|\Z)", text, re.M | re.S)
    config = {}
    for key, value in re.findall(r"^([A-Za-z_]+)[ \t]*=[ \t]*(\"[^\"\n]*\"|true|false)[ \t]*(?:#.*)?$",
                                 table.group(1) if table else "", re.M):
        config[key] = value.strip('"') if value.startswith('"') else value == "true"
    return config


def github_repo(url: str) -> str:
    """owner/name from a GitHub repository's URL (https://github.com/owner/name[.git],
    git@github.com:owner/name.git) or from owner/name itself; ValueError for anything else (Colab
    opens notebooks from GitHub only)."""
    match = _GITHUB_REPO_RE.match(url.strip())
    if not match:
        raise ValueError(f"COURSE_REPO={url!r} is not a GitHub repository: give https://github.com/OWNER/NAME "
                         "or OWNER/NAME (Colab opens notebooks from GitHub)")
    return match.group("repo")


GITHUB_REPO = course_config().get("repo") or PLACEHOLDER_REPO

COLAB_DIRECTIVE = "@@colab@@"
COLAB_BADGE = "https://colab.research.google.com/assets/colab-badge.svg"
# What the setup cell installs when it runs outside the repository and this Python lacks it:
# pyproject.toml's dependencies less torch (Colab has its own; a pip install would replace it).
RUNTIME_PACKAGES = ("ninja", "numpy", "matplotlib", "pytest")


def clone_url() -> str:
    return f"https://github.com/{GITHUB_REPO}.git"


def colab_url(unit: str) -> str:
    """The release notebook of `unit`, opened in Colab from GitHub."""
    return (f"https://colab.research.google.com/github/{GITHUB_REPO}/blob/{GITHUB_BRANCH}/"
            f"notebooks/release/{unit}/{unit}.ipynb")


def colab_badge(unit: str) -> str:
    return f"[![Open In Colab]({COLAB_BADGE})]({colab_url(unit)})"


def colab_cell(unit: str) -> str:
    """What a markdown line `@@colab@@` becomes: the badge, and what to choose in Colab."""
    return (f"{colab_badge(unit)} In Colab, choose *Runtime > Change runtime type > T4 GPU* for the builds "
            "and checks, then run the cells from the top: the setup cell clones the course into the runtime.")


README_BEGIN = "<!-- colab:begin (written by `make notebooks`; the repository: COURSE_REPO, or [tool.course] repo in pyproject.toml) -->"
README_END = "<!-- colab:end -->"


def title(unit: str) -> str:
    """The unit's title: the first heading of its source."""
    return next(line[4:].strip() for line in source_of(unit).read_text().splitlines() if line.startswith("# # "))


def readme_block(selected: list[str] | None = None) -> str:
    """The README's table of the units' notebooks, each with its Colab badge, between the colab markers."""
    rows = ["| unit | notebook | |", "|---|---|---|"]
    for unit in selected or units():
        rows.append(f"| {title(unit)} | [`{unit}.ipynb`](notebooks/release/{unit}/{unit}.ipynb) | {colab_badge(unit)} |")
    return "\n".join([README_BEGIN, *rows, README_END])


def with_readme_block(text: str) -> str:
    """README.md's text with its colab block made what readme_block() says."""
    if README_BEGIN not in text or README_END not in text:
        raise AuthoringError(f"README.md has no `{README_BEGIN}` ... `{README_END}` block for the Colab badges")
    head, rest = text.split(README_BEGIN, 1)
    return head + readme_block() + rest.split(README_END, 1)[1]


# The locked first code cell of every unit: find the repository (or clone it), set up CUDA, make the Course.
SETUP = '''\
import os
import sys
from pathlib import Path

# This notebook runs from notebooks/source, notebooks/release or nbgrader's folder per student:
# find the course repository above it and import the grader from there. Anywhere else (Colab, a
# notebook downloaded alone), clone the course here first, from $COURSE_REPO if set (a URL or a
# path), install what this Python lacks of the course's requirements (never torch), and work there.
ROOT = next((p for p in [Path.cwd(), *Path.cwd().parents] if (p / "grader" / "notebooks.py").is_file()), None)
if ROOT is None:
    import importlib.util
    import subprocess

    ROOT = Path.cwd() / "{clone_dir}"
    if not (ROOT / "grader" / "notebooks.py").is_file():
        repo = os.environ.get("COURSE_REPO")
        source, branch = (repo, []) if repo else ("{clone_url}", ["--branch", "{branch}"])
        git = subprocess.run(["git", "clone", "--quiet", "--depth", "1", *branch, source, str(ROOT)],
                             capture_output=True, text=True)
        if git.returncode != 0:
            raise RuntimeError(f"could not clone the course from {{source}} (set COURSE_REPO to its git URL or path):"
                               f"\\n{{git.stderr}}")
        print(f"course: cloned {{source}} into {{ROOT}}")
    missing = [m for m in {packages} if importlib.util.find_spec(m) is None]
    if missing:
        pip = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", *missing], capture_output=True, text=True)
        if pip.returncode != 0:
            raise RuntimeError(f"could not install {{' '.join(missing)}}:\\n{{pip.stderr[-2000:]}}")
        importlib.invalidate_caches()
        print(f"course: installed {{' '.join(missing)}}")
    os.chdir(ROOT)
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from grader import env

env.configure()  # CUDA_HOME and TORCH_CUDA_ARCH_LIST for the builds

import torch
import torch.nn.functional as F

from grader import notebooks as nb

course = nb.Course("{unit}")  # also defines the %%solution cell magic
gpu = torch.cuda.get_device_name() if torch.cuda.is_available() else "none"
print(f"torch {{torch.__version__}}; GPU: {{gpu}}")
print(nb.heavy_skip_reason() or "builds, checks and benchmarks run here")'''


def setup_cell(unit: str) -> str:
    """The setup cell of `unit`'s notebook."""
    return SETUP.format(unit=unit, clone_dir=GITHUB_REPO.split("/")[1], clone_url=clone_url(), branch=GITHUB_BRANCH,
                        packages=json.dumps(list(RUNTIME_PACKAGES)))


class AuthoringError(ValueError):
    pass


def units() -> list[str]:
    """The units with a notebook source, notebooks/source/<unit>.py."""
    return sorted(p.stem for p in SOURCE.glob("*.py") if not p.name.startswith("_"))


def source_of(unit: str) -> Path:
    return SOURCE / f"{unit}.py"


def notebook(unit: str):
    """The instructor's notebook of `unit`: its source through the jupytext command line, filled in."""
    return notebooks([unit])[unit]


def notebooks(selected: list[str] | None = None) -> dict:
    """The instructor's notebooks of these units (default all), from one run of the jupytext command
    line (`python -m jupytext --to ipynb`, seconds to start) over copies of their sources."""
    import nbformat

    selected = list(selected or units())
    for unit in selected:
        if not source_of(unit).is_file():
            raise AuthoringError(f"no notebook source notebooks/source/{unit}.py (units: {', '.join(units())})")
    with tempfile.TemporaryDirectory() as tmp:
        copies = [shutil.copy(source_of(unit), Path(tmp) / f"{unit}.py") for unit in selected]
        proc = subprocess.run([sys.executable, "-m", "jupytext", "--quiet", "--to", "ipynb", *map(str, copies)],
                              capture_output=True, text=True)
        if proc.returncode != 0:
            raise AuthoringError(f"jupytext could not read notebooks/source/ ({', '.join(selected)}):\n{proc.stderr}")
        out = {unit: nbformat.reads((Path(tmp) / f"{unit}.ipynb").read_text(), as_version=4) for unit in selected}
    for unit, nb in out.items():
        fill(nb, unit)
        nbformat.validate(nb)
    return out


def fill(nb, unit: str) -> None:
    """Name each cell, fill the cells and lines that come from solutions/ and SETUP, and drop
    jupytext's own metadata."""
    where = f"notebooks/source/{unit}.py"
    for i, cell in enumerate(nb.cells):
        cell_id = cell.metadata.pop("id", None) or cell.metadata.get("nbgrader", {}).get("grade_id")
        if not cell_id:
            raise AuthoringError(f"{where}, cell {i} ({cell.source[:40]!r}): no name; add id=\"...\" to its `# %%` line")
        cell.id = cell_id
        if cell.cell_type == "markdown":
            cell.source = CONTEXT_DIRECTIVE.sub(lambda m: _context(m, where, cell_id), cell.source)
            cell.source = cell.source.replace(COLAB_DIRECTIVE, colab_cell(unit))
            if "@@" in cell.source:
                raise AuthoringError(f"{where}, cell {cell_id}: a directive that is not `@@colab@@`, "
                                     "`@@context TARGET REGION@@` or `@@context TARGET REGION from \"LINE\"@@`")
        elif cell.source == SETUP_DIRECTIVE:
            cell.source = setup_cell(unit)
        else:
            sol = parse_solution_cell(cell.source)
            if sol is not None:
                if sol.body:
                    raise AuthoringError(f"{where}, cell {cell_id}: a {MAGIC} cell holds its first line only; "
                                         "the rest comes from solutions/")
                cell.source = region_cell_source(sol.target, sol.name)
    nb.metadata.pop("jupytext", None)


def _context(m: re.Match, where: str, cell_id: str) -> str:
    target, name, start = m.group(1), m.group(2), m.group(3)
    try:
        return excerpt(target, json.loads(start), name) if start else region_context(target, name)
    except (KeyError, ValueError, FileNotFoundError, StopIteration) as e:
        raise AuthoringError(f"{where}, cell {cell_id}: {m.group(0)}: {e!r}") from None


def dumps(nb) -> str:
    import nbformat

    return nbformat.writes(nb) + "\n"


def write(selected: list[str] | None = None, root: Path = SOURCE) -> list[Path]:
    """Write the instructor's notebooks to root/<unit>/<unit>.ipynb (nbgrader's source layout)."""
    written = []
    for unit, nb in notebooks(selected).items():
        out = Path(root) / unit / f"{unit}.ipynb"
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(dumps(nb))
        written.append(out)
    return written


# ---------------------------------------------------------------------------------------------
# What comes from solutions/
# ---------------------------------------------------------------------------------------------
def region_cell_source(target: str, name: str) -> str:
    """The `%%solution` cell for one region of solutions/<target>: its TODO lines, then its code
    between nbgrader's delimiters."""
    exercise, file = target.split("/", 1)
    region = find_region(SOLUTIONS / exercise / file, name)
    lines = region.teaching_lines()
    todo = [l for l in lines if l.strip().startswith(f"{region.prefix} TODO")]
    rest = lines[len(todo):]
    if lines[: len(todo)] != todo:
        raise ValueError(f"{target} {name}: TODO lines must open the region")
    return "\n".join([f"{MAGIC} {target} {name}", *todo, f"### {NB_BEGIN}", *rest, f"### {NB_END}"])


def region_context(target: str, name: str) -> str:
    """The given code around a region (its signature and comments), as a fenced block for markdown."""
    exercise, file = target.split("/", 1)
    path = SOLUTIONS / exercise / file
    lines = source_lines(path)  # without the open level's lines, as the regions are counted
    region = find_region(path, name)
    head = region.context(lines)
    # an earlier region of the same function (its own cell) is shown as a placeholder, not as its solution
    start = region.begin - len(head)
    for earlier in reversed([r for r in regions_of(path) if start <= r.begin < region.begin]):
        placeholder = earlier.indent + f"{region.prefix} ... your code from the cell for {earlier.name} ..."
        head[earlier.begin - start : earlier.end + 1 - start] = [placeholder]
    lang = "cpp" if region.prefix == "//" else "python"
    body = head + [region.indent + f"{region.prefix} ... your code (the cell below) ..."]
    if region.prefix == "//":
        after = lines[region.end + 1].rstrip() if region.end + 1 < len(lines) else "}"
        if after != "}":  # the region sits inside a loop or is followed by given code
            body.append(f"  {region.prefix} ... (given code follows) ...")
        body.append("}")
    return f"```{lang}\n" + "\n".join(body) + "\n```"


def excerpt(target: str, start: str, name: str) -> str:
    """The given code of solutions/<target> from the first line containing `start` down to the region
    `name`, as a fenced block for markdown. A region inside that span (its own cell) is shown as a
    placeholder, never as its solution; region_context() starts at the enclosing function instead,
    which for a struct's member or a kernel's epilogue is a page of unrelated code."""
    exercise, file = target.split("/", 1)
    path = SOLUTIONS / exercise / file
    lines = source_lines(path)  # without the open level's lines, as the regions are counted
    region = find_region(path, name)
    first = next(i for i, line in enumerate(lines) if start in line)
    if first >= region.begin:
        raise ValueError(f"{target}: {start!r} is not above the region {name}")
    out, i = [], first
    for r in regions_of(path):
        if first <= r.begin < region.begin:
            out += lines[i : r.begin] + [r.indent + f"{r.prefix} ... your code from the cell for {r.name} ..."]
            i = r.end + 1
    out += lines[i : region.begin] + [region.indent + f"{region.prefix} ... your code (the cell below) ..."]
    text = "\n".join(out)
    if "SOLUTION" in text:
        raise ValueError(f"{target}: the excerpt above {name} would show a region marker")
    return "```cpp\n" + text + "\n```"
