"""Building an exercise: the compiler's flags and caches, and the course's C++ headers (include/)."""
