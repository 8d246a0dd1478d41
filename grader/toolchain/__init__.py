"""Building an exercise: the compiler's flags and caches, the course's C++ headers (include/), and the
convolution wrappers' shared argument spelling (conv_args.py)."""
