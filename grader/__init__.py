"""The course's grader. Its wings (grader/*/) are mapped in docs/authoring.md.

The public faces: `grader.build`, `grader.conv_args`, `grader.timer`, `grader.benchmark_extras` and
`grader.notebooks` are the names the students' wrappers, the notebooks and the solutions' benchmarks
import. Each is the very module of its wing under a second name (as `os.path` is `posixpath`), so a patch
through either name is seen by both. The finder below answers the first four; `grader/notebooks.py` stays a file, because
every released notebook's setup cell finds the course's folder by it.
"""
import importlib
import importlib.abc
import importlib.util
import sys

PUBLIC_FACES = {"grader.build": "grader.toolchain.build", "grader.conv_args": "grader.toolchain.conv_args",
                "grader.timer": "grader.verify.timer", "grader.benchmark_extras": "grader.bench.benchmark_extras"}


class _PublicFaces(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Imports a public face as its wing's module (imported under its own name first)."""

    def find_spec(self, name, path=None, target=None):
        return importlib.util.spec_from_loader(name, self) if name in PUBLIC_FACES else None

    def create_module(self, spec):
        return importlib.import_module(PUBLIC_FACES[spec.name])

    def exec_module(self, module):
        pass  # executed once, by its import under its wing's name


if not any(isinstance(f, _PublicFaces) for f in sys.meta_path):
    sys.meta_path.append(_PublicFaces())
