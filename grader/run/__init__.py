"""Running a grade: the command line, grading processes and their gate, reports, resources, the suite."""
