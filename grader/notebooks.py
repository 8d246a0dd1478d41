"""The public face of grader.authoring.notebooks, the same module: the name the notebooks' runtime (`from grader import notebooks as nb`)."""
import sys

from grader.authoring import notebooks as _module

sys.modules[__name__] = _module
