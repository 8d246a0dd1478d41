"""Grading a class: the class's grading, its gradebook, Slurm, nbgrader's feedback."""
