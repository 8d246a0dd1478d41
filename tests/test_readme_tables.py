"""Each exercise README's points table is its spec's (grader.authoring.readme_tables, written by `make exercises`)."""
from __future__ import annotations

import copy
import shutil

import pytest

from grader.authoring import readme_tables
from grader.env import REPO
from grader.specs import select


def test_every_readme_table_is_its_specs():
    assert len(readme_tables.readmes()) == len(select([])) >= 10
    assert readme_tables.check() == []


@pytest.fixture
def one(tmp_path, monkeypatch):
    """01's README, copied, and a copy of its spec to change; the check reads only that pair."""
    readme = tmp_path / "01_leaky_relu" / "README.md"
    readme.parent.mkdir()
    shutil.copy(REPO / "solutions" / "01_leaky_relu" / "README.md", readme)
    spec = copy.copy(select(["01"])[0])
    monkeypatch.setattr(readme_tables, "readmes", lambda solutions=None: {readme: spec})
    return readme, spec


def test_the_check_sees_each_kind_of_drift(one):
    readme, spec = one
    assert readme_tables.check() == []
    spec.points = {**spec.points, "forward": 5}  # the points changed in the spec
    assert any("is not 01_leaky_relu's spec's" in p for p in readme_tables.check())
    readme_tables.write()
    assert "| forward | 5 |" in readme.read_text() and readme_tables.check() == []
    spec.points = {**spec.points, "streams": 1}  # a group the README does not describe yet
    readme_tables.write()
    assert any("'streams' is not described" in p for p in readme_tables.check())
    spec.points = {k: v for k, v in spec.points.items() if k not in ("streams", "backward")}  # a group dropped
    readme_tables.write()
    assert "| backward |" not in readme.read_text() and readme_tables.check() == []
    spec.perf_tiers = ((0.6, 0.5), (0.85, 1.0))  # a threshold the performance row does not state
    assert any("thresholds 0.6x" in p for p in readme_tables.check())


def test_the_prose_around_the_table_is_kept(one):
    readme, spec = one
    before = readme.read_text()
    spec.points = {**spec.points, "forward": 5}
    readme_tables.write()
    after = readme.read_text()
    start, end = readme_tables._section(after, readme)
    b_start, b_end = readme_tables._section(before, readme)
    assert after[:start] == before[:b_start] and after[end:] == before[b_end:]
    assert after.replace("| forward | 5 |", "| forward | 4 |") == before


def test_a_readme_without_markers_gets_them_around_its_table(one):
    readme, _ = one
    marked = readme.read_text()
    bare = marked.replace(readme_tables.BEGIN + "\n", "").replace("\n" + readme_tables.END + "\n", "")
    readme.write_text(bare)
    readme_tables.write()
    assert readme.read_text() == marked
