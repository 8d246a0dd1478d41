"""The public face of grader.bench.benchmark_extras, the same module: the name the solutions' benchmarks import (`from grader.benchmark_extras import peak_mib`)."""
import sys

from grader.bench import benchmark_extras as _module

sys.modules[__name__] = _module
