# ---
# jupyter:
#   kernelspec:
#     display_name: Python 3 (ipykernel)
#     language: python
#     name: python3
#   language_info:
#     name: python
# ---

# %% [markdown] id="colab"
# @@colab@@

# %% [markdown] id="intro"
# # Unit 1 · Scalar kernels: LeakyReLU with a slope chosen in Python
#
# LeakyReLU keeps positive inputs and scales negative ones:
# $y = x$ for $x > 0$, $y = \text{negative\_slope} \cdot x$ otherwise.
# It is a small op, but writing it well for PyTorch takes every habit the later units rely on:
#
# 1. a **scalar passed by value** from Python to the kernel, so the slope can change on every call;
# 2. **bounds checks and grid-stride loops**, so any size works, from 1 element to more than $2^{31}$;
# 3. **launching on PyTorch's current stream**, and checking the launch;
# 4. **input checks** with messages that name the argument;
# 5. **building and registering** the op: `load`, `load_inline` with pybind, `setup.py`, and
#    `TORCH_LIBRARY` + `torch.library`, which the course's exercises use.
#
# **What you write.** A short Python warm-up, then five small regions of C++/CUDA. Each region is a
# cell starting with `%%solution 01_leaky_relu/<file> <function>`: the cell holds the body of that
# function, and `course.build()` compiles it inside the rest of the exercise's code (the same files as
# `exercises/01_leaky_relu/`).
#
# **How it is graded.** The graded cells run the same checks as `make grade EX=01`
# (`grader/specs/ex01_leaky_relu.py`): here you see a few cases of each group; grading runs all of them.
#
# | part | points |
# |---|---:|
# | warm-up: grid-stride indices (runs on a CPU) | 1 |
# | forward | 4 |
# | backward | 2 |
# | input checks | 1 |
# | autograd (`gradcheck`, `opcheck`) | 1 |
# | performance (against the reference, in the same run) | 2 |
#
# **Where it runs.** Builds and checks need a CUDA GPU; the first build takes about a minute. Without a
# GPU, or under `nbgrader validate`, those cells print why and skip.

# %% nbgrader={"grade": false, "grade_id": "setup", "locked": true, "schema_version": 3, "solution": false} editable=false deletable=false
# @@setup@@

# %% [markdown] id="scalar-by-value"
# ## 1. A scalar, by value, from Python to the kernel
#
# When a kernel is launched, its arguments are copied into a small constant bank that every thread
# of the launch can read. A `float negative_slope` parameter therefore costs nothing per element: no
# global-memory load, no cache traffic, and no recompilation when the value changes. The slope can be
# different on every call.
#
# The value travels this way:
#
# | where | what it is |
# |---|---|
# | Python: `leaky_relu(x, 0.2)` | a Python `float` |
# | the op's schema: `leaky_relu(Tensor x, float negative_slope)` | `float` in a schema is C++ `double` |
# | the launcher | converts it once: `static_cast<course::opmath_t<scalar_t>>(negative_slope)` |
# | the kernel | a parameter of type `opmath` (`float` for float16/bfloat16/float32, `double` for float64) |
#
# Exercise 02's ELU passes its `alpha` the same way; so will every scalar hyperparameter in this course
# (an epsilon, a momentum, a scale).
#
# Three classic mistakes this avoids:
#
# - **hard-coding** `0.01f` in the kernel (then `negative_slope=0.2` silently gives wrong answers);
# - passing the slope as a **tensor**: one more load per thread, and if it lives on the CPU, a copy
#   (and a synchronisation) on every call;
# - computing in **double** for a float tensor: consumer GPUs run float64 arithmetic 32 to 64 times
#   slower than float32. `opmath_t` does the arithmetic in the narrowest type that is exact enough:
#   half types are widened to `float`, because half-precision arithmetic would lose accuracy for no
#   gain in a memory-bound kernel.

# %% [markdown] id="grid-stride"
# ## 2. Threads, bounds checks and grid-stride loops
#
# A launch `kernel<<<blocks, threads>>>` runs `blocks × threads` threads, and thread `t` of block `b`
# has the global index `b * blockDim.x + t`. Blocks come whole, so with `n = 1000` and 256 threads per
# block you need 4 blocks, and 24 threads have no element: every thread must check `i < n` before it
# reads or writes.
#
# A **grid-stride loop** decouples the grid from the size: each thread starts at its global index and
# steps by the number of threads in the grid (`gridDim.x * blockDim.x`) until it passes `n`.
# With `n = 10` and 2 blocks of 4 threads (stride 8):
#
# | block, thread | global index | elements |
# |---|---:|---|
# | 0, 0 | 0 | 0, 8 |
# | 0, 1 | 1 | 1, 9 |
# | 0, 2 and 0, 3 | 2, 3 | 2; 3 |
# | 1, 0 to 1, 3 | 4 to 7 | 4; 5; 6; 7 |
#
# Why bother: a fixed grid of a few blocks per multiprocessor covers any `n`, the block scheduler
# has little to do, and each thread amortises its index arithmetic over several elements.
# Use `int64_t` for indices: `blockIdx.x * blockDim.x` is computed in 32 bits unless you widen it, and
# the grader feeds a tensor of $2^{31}+7$ elements.
#
# **Warm-up (1 point, runs on a CPU).** Write both functions in Python; the next cell checks that
# every element is visited exactly once.

# %% nbgrader={"grade": false, "grade_id": "warmup-answer", "locked": false, "schema_version": 3, "solution": true}
def blocks_needed(n: int, threads: int) -> int:
    # Blocks of `threads` threads needed to give each of n elements a thread of its own.
    ### BEGIN SOLUTION
    return (n + threads - 1) // threads
    ### END SOLUTION


def grid_stride_indices(block: int, thread: int, block_dim: int, grid_dim: int, n: int) -> list[int]:
    # The elements that thread `thread` of block `block` handles in a grid-stride loop over n elements.
    ### BEGIN SOLUTION
    first = block * block_dim + thread
    stride = grid_dim * block_dim
    return list(range(first, n, stride))
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "warmup-test", "locked": true, "schema_version": 3, "solution": false, "points": 1} editable=false deletable=false
def visits_each_once(n: int, block_dim: int, grid_dim: int) -> bool:
    seen = [i for b in range(grid_dim) for t in range(block_dim)
            for i in grid_stride_indices(b, t, block_dim, grid_dim, n)]
    return sorted(seen) == list(range(n))


assert blocks_needed(1, 256) == 1 and blocks_needed(256, 256) == 1 and blocks_needed(257, 256) == 2
assert grid_stride_indices(0, 0, 4, 2, 10) == [0, 8]
assert grid_stride_indices(1, 3, 4, 2, 10) == [7]
assert visits_each_once(10, 4, 2) and visits_each_once(3, 4, 2)
print("ok: every element is visited exactly once")
### BEGIN HIDDEN TESTS
assert blocks_needed(0, 256) == 0
assert blocks_needed(2**31 + 7, 256) == 8388609
for n in (0, 1, 31, 255, 256, 257, 1000):
    for block_dim, grid_dim in ((32, 1), (32, 3), (64, 5)):
        assert visits_each_once(n, block_dim, grid_dim), (n, block_dim, grid_dim)
### END HIDDEN TESTS

# %% [markdown] id="kernels"
# ## 3. The kernels
#
# The given code (in `exercises/01_leaky_relu/leaky_relu.cu`) has the one-element functions
# `leaky_relu_value(x, negative_slope)` and `leaky_relu_grad(grad_y, x, negative_slope)`, computed in
# `opmath`. Your cell is the body of the kernel:
#
# @@context 01_leaky_relu/leaky_relu.cu leaky_relu_kernel@@
#
# A plain grid-stride loop over the `n` elements earns the correctness points. To match the
# reference's speed, move 16 bytes per load and store instruction: `course::Vec<scalar_t, V>` with
# `V = course::kVec16<scalar_t>` (4 floats, 8 halves) is such a vector. Use it only when
# `course::is_aligned16(x, y)` holds (a view like `x[1:]` is not aligned), and finish the `n % V`
# tail elements one at a time.

# %% nbgrader={"grade": false, "grade_id": "leaky-relu-kernel", "locked": false, "schema_version": 3, "solution": true}
# %%solution 01_leaky_relu/leaky_relu.cu leaky_relu_kernel

# %% [markdown] id="backward-kernel"
# The backward kernel reads two inputs per element and writes one; it has the same geometry.
#
# @@context 01_leaky_relu/leaky_relu.cu leaky_relu_backward_kernel@@

# %% nbgrader={"grade": false, "grade_id": "leaky-relu-backward-kernel", "locked": false, "schema_version": 3, "solution": true}
# %%solution 01_leaky_relu/leaky_relu.cu leaky_relu_backward_kernel

# %% [markdown] id="launch"
# ## 4. Launching on PyTorch's stream
#
# PyTorch queues its GPU work on a **current stream**, which the caller may have changed
# (`with torch.cuda.stream(s): ...`). A kernel launched with `<<<blocks, threads>>>` goes to the legacy
# default stream instead, and may run before the work that produced `x` or after the work that reads
# `y`. The binding (`leaky_relu.cpp`) passes `c10::cuda::getCurrentCUDAStream()` to the launcher; launch
# with it as the fourth launch parameter, `<<<blocks, threads, 0, stream>>>`.
#
# A launch returns before the kernel runs, and a bad configuration (0 blocks, too many threads) fails
# silently unless you ask: `C10_CUDA_KERNEL_LAUNCH_CHECK()` right after the launch turns it into a C++
# exception, which Python sees as a `RuntimeError`. An empty tensor would need 0 blocks, so return
# before launching.
#
# The grid: `blocks_for<scalar_t>(n)` (given) asks `course::cover_grid` for a thread per 16-byte
# vector, capped at gridDim.x's limit; the grid-stride loop covers anything past the cap. On the H100 a
# grid covering the tensor streamed at copy speed (3013 GB/s), while one occupancy wave of blocks
# stepping through it reached 2815 GB/s: many short blocks cost nothing measurable here.
#
# @@context 01_leaky_relu/leaky_relu.cu leaky_relu_forward_cuda@@

# %% nbgrader={"grade": false, "grade_id": "leaky-relu-forward-cuda", "locked": false, "schema_version": 3, "solution": true}
# %%solution 01_leaky_relu/leaky_relu.cu leaky_relu_forward_cuda

# %% [markdown] id="backward-launch"
# The backward launcher is the same with the backward kernel.
#
# @@context 01_leaky_relu/leaky_relu.cu leaky_relu_backward_cuda@@

# %% nbgrader={"grade": false, "grade_id": "leaky-relu-backward-cuda", "locked": false, "schema_version": 3, "solution": true}
# %%solution 01_leaky_relu/leaky_relu.cu leaky_relu_backward_cuda

# %% [markdown] id="input-checks"
# ## 5. Input checks
#
# The kernel dereferences `x.data_ptr()` on the GPU. If `x` lives on the CPU, that pointer means nothing
# there: at best an illegal memory access, which also ruins the CUDA context for the rest of the
# process. If `x` is an integer tensor, the dtype dispatch has no case for it. Check first, and say
# what is wrong in terms the caller knows: `x must be a CUDA tensor, but it is on cpu`.
#
# `course/ops.h` has `course::check_cuda(t, name)` and `course::check_dtype(t, {...}, name)`, which
# raise with `TORCH_CHECK` (a `RuntimeError` in Python). The binding calls your function for `x` and for
# `grad_output`, and already checks that the gradient matches `x` in shape and dtype.
#
# @@context 01_leaky_relu/leaky_relu.cpp check_input@@

# %% nbgrader={"grade": false, "grade_id": "check-input", "locked": false, "schema_version": 3, "solution": true}
# %%solution 01_leaky_relu/leaky_relu.cpp check_input

# %% [markdown] id="build-ways"
# ## 6. Three ways to build an extension, and two ways to expose it
#
# **`torch.utils.cpp_extension.load(name, sources=[...])`** compiles source files with ninja the
# first time it is called, caches the result in a build directory (rebuilding only what changed), and
# loads it. The grader builds every exercise this way (`grader/toolchain/build.py`), with
# `is_python_module=False`: the result is a library of ops registered with PyTorch, not a Python module.
#
# **`load_inline(name, cpp_sources=..., cuda_sources=..., functions=[...])`** does the same from
# strings: handy in a notebook. With `functions=`, it writes the pybind11 bindings for you, and the
# module it returns has those functions. The name matters: it names the build folder and the Python
# module, and a process imports a module name once. The cell below names it after a hash of its
# source, so an edited and re-run cell builds and imports a new module instead of colliding with, or
# silently reusing, the old one.
#
# **`setup.py`** with `CUDAExtension` and `BuildExtension` builds ahead of time, for a package you
# install (`pip install .`) or ship as a wheel:
#
# ```python
# from setuptools import setup
# from torch.utils.cpp_extension import BuildExtension, CUDAExtension
#
# setup(name="leaky_relu_ext",
#       ext_modules=[CUDAExtension("leaky_relu_ext", ["leaky_relu.cpp", "leaky_relu.cu"])],
#       cmdclass={"build_ext": BuildExtension})
# ```
#
# **pybind11 or `TORCH_LIBRARY`?** A pybind function is a plain Python callable: PyTorch does not know
# its schema, so autograd cannot differentiate it, `torch.compile` has to break its graph around it,
# and nothing can check it. `TORCH_LIBRARY` registers an **op** with a schema in PyTorch's dispatcher;
# from Python, `torch.library.register_autograd` gives it a backward, `torch.library.register_fake` its
# output shapes (so `torch.compile` can trace it), and `torch.library.opcheck` tests that it is
# registered consistently. The course's exercises use this route. Each build gets its own namespace
# (`COURSE_LIBRARY` expands to `TORCH_LIBRARY(<namespace>, m)`), so your build and the reference can be
# loaded side by side in one process.

# %% id="load-inline"
import hashlib

import torch.nn.functional as F

TINY_CUDA = r'''
#include <torch/extension.h>
#include <c10/cuda/CUDAException.h>
#include <c10/cuda/CUDAStream.h>

// 1D grid-stride loop: thread t handles elements t, t + stride, ...
__global__ void tiny_leaky_relu_kernel(const float* x, float* y, int64_t n, float negative_slope) {
  const int64_t stride = int64_t(gridDim.x) * blockDim.x;
  for (int64_t i = blockIdx.x * int64_t(blockDim.x) + threadIdx.x; i < n; i += stride) {
    y[i] = x[i] > 0.f ? x[i] : x[i] * negative_slope;
  }
}

torch::Tensor tiny_leaky_relu(torch::Tensor x, double negative_slope) {
  TORCH_CHECK(x.is_cuda(), "x must be a CUDA tensor, but it is on ", x.device());
  TORCH_CHECK(x.scalar_type() == torch::kFloat, "x must be float32, but it is ", x.scalar_type());
  const torch::Tensor xc = x.contiguous();
  torch::Tensor y = torch::empty_like(xc);
  const int64_t n = xc.numel();
  if (n == 0) return y;
  const int threads = 256;
  const int blocks = static_cast<int>(std::min<int64_t>((n + threads - 1) / threads, 4096));
  tiny_leaky_relu_kernel<<<blocks, threads, 0, c10::cuda::getCurrentCUDAStream()>>>(
      xc.data_ptr<float>(), y.data_ptr<float>(), n, static_cast<float>(negative_slope));
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return y;
}
'''
TINY_CPP = "torch::Tensor tiny_leaky_relu(torch::Tensor x, double negative_slope);"

reason = nb.heavy_skip_reason()
if reason:
    print(f"load_inline example: {reason}")
else:
    from torch.utils.cpp_extension import load_inline

    # one module name per source text, so re-running an edited cell never collides
    name = "tiny_leaky_relu_" + hashlib.sha1((TINY_CPP + TINY_CUDA).encode()).hexdigest()[:10]
    tiny = load_inline(name=name, cpp_sources=TINY_CPP, cuda_sources=TINY_CUDA,
                       functions=["tiny_leaky_relu"], build_directory=str(nb.scratch_dir(name)))
    x = torch.randn(1_000_003, device="cuda")
    for slope in (0.01, 0.2):  # a new slope is a new launch argument, not a rebuild
        diff = (tiny.tiny_leaky_relu(x, slope) - F.leaky_relu(x, slope)).abs().max().item()
        print(f"negative_slope={slope}: largest difference from F.leaky_relu {diff}")

# %% [markdown] id="torch-library"
# The course's version registers ops instead. Here is how `leaky_relu.cpp` declares and implements
# them, and how `leaky_relu.py` gives them shapes and a backward (read from the exercise's files):

# %% nbgrader={"grade": false, "grade_id": "show-registration", "locked": true, "schema_version": 3, "solution": false} editable=false deletable=false
folder = course.skeleton("01_leaky_relu")
cpp = (folder / "leaky_relu.cpp").read_text()
print(cpp[cpp.index("COURSE_LIBRARY(m)"):])
py = (folder / "leaky_relu.py").read_text()
print(py[py.index("# Shapes for tracing"):py.index("class LeakyReLU")])

# %% [markdown] id="build-intro"
# ## 7. Build and try
#
# This compiles your cells inside the rest of the exercise's code. A compile error shows the
# compiler's message; the file and line it names are in the assembled copy (under `.build/notebooks/`),
# where your cell's lines sit inside their function. After an illegal memory access the CUDA context
# is unusable: fix the bug, then restart the kernel and run the cells again.

# %% nbgrader={"grade": false, "grade_id": "build", "locked": true, "schema_version": 3, "solution": false} editable=false deletable=false
reason = nb.heavy_skip_reason()
if reason:
    print(f"build: {reason}")
else:
    leaky = course.build("01_leaky_relu")
    x = torch.linspace(-2, 2, 9, device="cuda")
    for slope in (0.01, 0.5):
        print(f"negative_slope={slope}:", leaky.leaky_relu(x, slope).tolist())

# %% [markdown] id="graded-intro"
# ## 8. Graded checks
#
# Each cell below runs one group of the grader's checks on your build: fresh random inputs drawn from
# the printed seed (set `COURSE_SEED` to replay them), outputs compared with a float64 reference,
# outputs poisoned with NaN first, inputs checked to be unmodified, and a profiler check that your
# kernel did the work. A group earns its points only when all of its checks pass.

# %% nbgrader={"grade": true, "grade_id": "forward", "locked": true, "schema_version": 3, "solution": false, "points": 4} editable=false deletable=false
# 01_leaky_relu forward: the grader's own checks. Shown here: a few cases; at grading, every forward check.
course.check("forward", "01_leaky_relu", only=[
    "forward[float32-1]",
    "forward[float32-257]",
    "forward[float32-1000003]",
    "forward[float16-4099]",
    "forward[negative_slope=0.2]",
    "forward[non-contiguous]",
    "forward[empty]",
    "forward[output poisoned]",
])
### BEGIN HIDDEN TESTS
course.check("forward", "01_leaky_relu")
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "backward", "locked": true, "schema_version": 3, "solution": false, "points": 2} editable=false deletable=false
# 01_leaky_relu backward: the grader's own checks. Shown here: a few cases; at grading, every backward check.
course.check("backward", "01_leaky_relu", only=[
    "backward[float32-257]",
    "backward[float16-1000003]",
    "backward[negative_slope=0.2]",
    "backward[zeros in x]",
])
### BEGIN HIDDEN TESTS
course.check("backward", "01_leaky_relu")
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "input-checks-test", "locked": true, "schema_version": 3, "solution": false, "points": 1} editable=false deletable=false
# 01_leaky_relu input_checks: the grader's own checks. Shown here: a few cases; at grading, every input_checks check.
course.check("input_checks", "01_leaky_relu", only=[
    "input_checks[cpu tensor]",
    "input_checks[integer dtype]",
])
### BEGIN HIDDEN TESTS
course.check("input_checks", "01_leaky_relu")
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "autograd", "locked": true, "schema_version": 3, "solution": false, "points": 1} editable=false deletable=false
# 01_leaky_relu autograd: the grader's own checks. Shown here: a few cases; at grading, every autograd check.
course.check("autograd", "01_leaky_relu", only=[
    "autograd[gradcheck float64]",
])
### BEGIN HIDDEN TESTS
course.check("autograd", "01_leaky_relu")
### END HIDDEN TESTS

# %% [markdown] id="speed"
# ## 9. Speed
#
# LeakyReLU reads 4 bytes and writes 4 bytes per float32 element, and does one comparison and one
# multiply: it is limited by memory bandwidth, and the best it can do is the speed of a device-to-device
# copy. The graded cell times your op on $2^{28}$ float32 elements as the grader does (L2 flushed
# between runs, the median of many) against the reference solution in the same run: half the reference's
# throughput earns 1 point, 0.85 of it earns 2. It needs the forward checks to pass first.

# %% nbgrader={"grade": true, "grade_id": "performance", "locked": true, "schema_version": 3, "solution": false, "points": 2} editable=false deletable=false
# performance: the points earned are this cell's result (nbgrader's partial credit)
course.performance("01_leaky_relu")

# %% [markdown] id="plot-intro"
# Throughput against size: small tensors cannot fill the GPU (launch latency dominates), large ones
# approach the copy bandwidth (the dotted line).

# %% id="plot"
reason = nb.heavy_skip_reason()
if reason:
    print(f"throughput plot: {reason}")
else:
    import matplotlib.pyplot as plt


    def make_input(n, seed):
        g = torch.Generator(device="cuda").manual_seed(seed)
        return torch.randn(n, device="cuda", generator=g)


    sizes = [2**k for k in range(12, 29, 2)]
    rows, limit = course.throughput_sweep(
        "01_leaky_relu", sizes, make_input,
        call=lambda module, x: module.leaky_relu(x, 0.01),
        baseline=lambda x: F.leaky_relu(x, 0.01),
        bytes_per_element=8,  # read 4 bytes, write 4 bytes
    )
    fig, ax = plt.subplots(figsize=(7, 4))
    ax.plot([r[0] for r in rows], [r[1] / 1e9 for r in rows], "o-", label="your leaky_relu")
    ax.plot([r[0] for r in rows], [r[2] / 1e9 for r in rows], "s--", label="F.leaky_relu (PyTorch)")
    ax.axhline(limit / 1e9, color="gray", linestyle=":", label=f"copy bandwidth ({limit / 1e9:.0f} GB/s)")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("elements (float32)")
    ax.set_ylabel("GB/s (8 bytes per element)")
    ax.set_title(f"LeakyReLU throughput on {torch.cuda.get_device_name()}")
    ax.legend()
    plt.show()

# %% [markdown] id="next"
# ## What next
#
# Exercise 02 (ELU, `exercises/02_elu/`) has the same shape with a different function, whose
# derivative you write yourself. Grade it with `make grade EX=02`.
