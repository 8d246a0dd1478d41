"""nbgrader configuration of the course: run nbgrader from the repository root.

    python -m grader.authoring.notebook_release release (make notebooks) the student release, notebooks/release/
    nbgrader autograde unit1_scalar_kernels   grade notebooks/submitted/<student>/<unit>/ (needs a GPU)
    nbgrader generate_feedback unit1_scalar_kernels

Layout, all under notebooks/ (git tracks source/<unit>.py and release/):
    source/<unit>.py                the notebook's source (jupytext percent format), written by hand
    source/<unit>/<unit>.ipynb      the instructor's notebooks, with solutions and hidden tests (generated
                                    from source/<unit>.py by `make notebooks`)
    release/<unit>/                 what students get (solutions cleared, hidden tests removed)
    submitted/<student>/<unit>/     what they hand in; autograded/ and feedback/ the same shape
"""
import os
import sys

from nbconvert.preprocessors import CSSHTMLHeaderPreprocessor
from nbgrader.preprocessors import ClearHiddenTests, GetGrades

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)
from grader.classroom.nbgrader_feedback import HideHiddenTestsInTracebacks  # noqa: E402

c = get_config()  # noqa: F821 (defined by traitlets when it loads this file)

c.CourseDirectory.course_id = "cuda-kernels-for-pytorch"
c.CourseDirectory.root = os.path.join(HERE, "notebooks")
c.CourseDirectory.source_directory = "source"
c.CourseDirectory.release_directory = "release"
c.CourseDirectory.submitted_directory = "submitted"
c.CourseDirectory.autograded_directory = "autograded"
c.CourseDirectory.feedback_directory = "feedback"
# build outputs never belong to an assignment
c.CourseDirectory.ignore = [".ipynb_checkpoints", "*.pyc", "__pycache__", "feedback", "*.so", "*.o", ".build"]

# A cell may compile a CUDA extension (a minute or more on a small machine): allow 10 minutes a cell.
c.ExecutePreprocessor.timeout = 600
c.Execute.timeout = 600

# Hidden tests run at autograde but never show: not in the release, not in the feedback (neither in
# the cells' source nor in the lines that a traceback quotes around a failing line).
c.GenerateFeedback.preprocessors = [GetGrades, HideHiddenTestsInTracebacks, ClearHiddenTests, CSSHTMLHeaderPreprocessor]
