"""make bench: the benchmarks, their extras, and the models whose layers they time."""
