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
# # Unit 2 · 2D grids: transpose, stencil, matrix product
#
# Unit 1's kernels touched each element once, in order: any reasonable thread layout was fast.
# This unit's three ops move data *across* a matrix, or reuse it many times, and their speed depends on
# how threads are laid out over the data and on what is staged in fast memory:
#
# 1. **2D grids**: `blockIdx.y` and `threadIdx.y` for rows, `.x` for columns, and the limits of each axis;
# 2. **coalescing**: why a warp should touch consecutive addresses, and why a naive transpose cannot;
# 3. **shared-memory tiles**: a block stages a tile, synchronises, and reads it back in another order;
#    padding the tile by one column against **bank conflicts**;
# 4. **halo tiles** for a stencil, and the filter in **constant memory**;
# 5. a **tiled matrix product**, then **register blocking**: each thread computes an 8 x 8 block of
#    outputs from values it holds in registers.
#
# **What you write.** A short Python warm-up (runs on a CPU), then the regions of three exercises:
# `03_transpose`, `04_stencil2d` and `05_matmul`. Each region is a cell starting with
# `%%solution <exercise>/<file> <function>`: the cell holds that part of the function, and
# `course.build()` compiles it inside the rest of the exercise's code (the same files as
# `exercises/<exercise>/`). A cell you have not written keeps the student copy's stub, which fails
# loudly ("not implemented yet") or, on the device, writes nothing.
#
# **How it is graded.** The graded cells run the same checks as `make grade EX=03` (and 04, 05): you see
# a few cases of each group here; grading runs all of them.
#
# | part | points |
# |---|---:|
# | warm-up: sectors and banks (runs on a CPU) | 1 |
# | 03 transpose: forward 5, input checks 1, autograd 1, performance 3 | 10 |
# | 04 stencil: forward 5, input checks 1, registration 1, performance 3 | 10 |
# | 05 matmul: naive 2, shared tiles 2, register blocked 3, input checks 1, registration 1, performance 3 | 12 |
#
# **Where it runs.** Builds and checks need a CUDA GPU; the first build of each exercise takes about a
# minute. Without a GPU, or under `nbgrader validate`, those cells print why and skip.

# %% nbgrader={"grade": false, "grade_id": "setup", "locked": true, "schema_version": 3, "solution": false} editable=false deletable=false
# @@setup@@

# %% [markdown] id="grids"
# ## 1. 2D grids
#
# A launch `kernel<<<grid, block>>>` accepts `dim3` sizes: `dim3 block(32, 8)` is a block of 32 x 8
# threads, `dim3 grid(gx, gy)` a grid of gx x gy blocks. Inside the kernel, `threadIdx.x`,
# `threadIdx.y`, `blockIdx.x`, `blockIdx.y` and `blockDim`, `gridDim` say where a thread is. For a
# row-major matrix the natural map is
#
# ```cpp
# const int64_t col = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;   // fastest-varying: x
# const int64_t row = int64_t(blockIdx.y) * blockDim.y + threadIdx.y;
# if (row < rows && col < cols) { ... m[row * cols + col] ... }
# ```
#
# Three facts decide how to use it:
#
# - **Warps are cut along x first.** A block's threads are numbered `threadIdx.x + blockDim.x *
#   threadIdx.y`, and each run of 32 numbers is a warp, which issues its loads and stores together. With
#   `blockDim.x = 32`, a warp is one row of the block: 32 consecutive columns. Put the matrix's
#   contiguous dimension on x.
# - **The axes have different limits.** `gridDim.x` may reach $2^{31} - 1$, but `gridDim.y` and
#   `gridDim.z` at most 65535, and a block holds at most 1024 threads. A matrix of 4,200,001 rows cut
#   into 64-row tiles needs 65,626 tiles along y: more than
#   one grid holds. The kernels of this unit
#   loop over the row tiles, grid-stride: `for (t = blockIdx.y; t < tiles; t += gridDim.y)`.
# - **Index in 64 bits.** `blockIdx.y * blockDim.y` is a 32-bit product; `row * cols` overflows `int`
#   beyond $2^{31}$ elements. Widen before multiplying.
#
# A block may also give each thread several elements: a 32 x 8 block that owns a 64 x 64 tile has each
# thread move 16 elements (rows `ty + 8 j`, columns `tx` and `tx + 32`). More work per thread means
# more independent loads in flight, and the index arithmetic is paid once.

# %% [markdown] id="coalescing"
# ## 2. Coalescing
#
# Global memory is read and written in **32-byte sectors** (a 128-byte cache line holds four). When a
# warp's 32 threads load 32 consecutive floats, the hardware moves exactly four sectors and uses every
# byte. When the 32 addresses are far apart, it moves 32 sectors and uses 4 of every 32 bytes: an eighth
# of the bandwidth does useful work. This is **coalescing**, and it is the first thing to check in any
# kernel that touches memory.
#
# A transpose, `out[c][r] = in[r][c]`, cannot be coalesced on both sides with one element per thread:
#
# | naive kernel, warp along x | reads `in[r][c .. c+31]` | writes `out[c .. c+31][r]` |
# |---|---|---|
# | addresses | consecutive | `rows * 4` bytes apart |
# | sectors per warp | 4 | 32 |
#
# Swapping the roles only moves the problem to the reads. On an H100, PyTorch's `x.t().contiguous()`
# runs at about 930 GB/s where a plain copy reaches about 2970 GB/s: roughly a third.
#
# ## 3. Shared memory and its banks
#
# The fix is to transpose **inside shared memory**, the on-chip scratchpad each block has (up to 228 KiB
# per multiprocessor on an H100). Shared memory has no sectors: it has **32 banks**, each 4 bytes wide,
# and word `i` of shared memory lives in bank `i % 32`. A warp's access is served in one pass when its 32
# threads hit 32 different banks (or the same word, which is broadcast); threads that hit *different
# words of the same bank* are served one after another: an **n-way bank conflict** costs n passes.
#
# Read a row of `float tile[32][32]` and the words are consecutive: conflict-free. Read a *column*
# (thread `t` reads `tile[t][c]`, word `32 t + c`) and every thread hits bank `c`: a 32-way conflict.
# Declare `float tile[32][33]` instead: word `33 t + c` lies in bank `(t + c) % 32`, different for
# every thread. One wasted column per row removes the conflict.
#
# **Warm-up (1 point, runs on a CPU).** Write both functions in Python. `sectors` counts the 32-byte
# sectors a warp's byte addresses touch; `bank_conflict_ways` says how many of a warp's accesses land in
# the busiest bank when thread `t` reads `tile[t][col]` of a row-major float tile `tile_width` floats
# wide (1 means conflict-free, 32 fully serialised).

# %% nbgrader={"grade": false, "grade_id": "warmup-answer", "locked": false, "schema_version": 3, "solution": true}
def sectors(addresses: list[int]) -> int:
    # The number of distinct 32-byte sectors that these byte addresses (one warp's accesses) touch.
    ### BEGIN SOLUTION
    return len({a // 32 for a in addresses})
    ### END SOLUTION


def bank_conflict_ways(tile_width: int, col: int) -> int:
    # Thread t (t < 32) reads float tile[t][col] of a row-major tile `tile_width` floats wide; float
    # word i lies in bank i % 32. Return the number of threads whose words share the busiest bank.
    ### BEGIN SOLUTION
    counts = [0] * 32
    for t in range(32):
        counts[(t * tile_width + col) % 32] += 1
    return max(counts)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "warmup-test", "locked": true, "schema_version": 3, "solution": false, "points": 1} editable=false deletable=false
row_read = [4 * i for i in range(32)]            # 32 consecutive floats
column_write = [4 * 1024 * i for i in range(32)]  # one float in each of 32 rows of a 1024-wide matrix
assert sectors(row_read) == 4, sectors(row_read)
assert sectors(column_write) == 32, sectors(column_write)
assert bank_conflict_ways(32, 0) == 32
assert bank_conflict_ways(33, 0) == 1
print("ok: a row read moves 4 sectors, a column write 32; tile[32][33] has no column conflict")
### BEGIN HIDDEN TESTS
assert sectors([0] * 32) == 1
assert sectors([4 * i + 16 for i in range(32)]) == 5  # a row that starts mid-sector
assert sectors([8 * i for i in range(32)]) == 8  # doubles
assert sectors([2 * i for i in range(32)]) == 2  # halves
assert sectors([]) == 0
assert bank_conflict_ways(64, 5) == 32
assert bank_conflict_ways(65, 3) == 1
assert bank_conflict_ways(34, 0) == 2
assert bank_conflict_ways(48, 1) == 16
assert all(bank_conflict_ways(w, c) == 1 for w in (1, 33, 97) for c in range(40))
### END HIDDEN TESTS

# %% [markdown] id="transpose-tile"
# ## 4. Exercise 03: transpose through a tile
#
# Block `(bx, by)` owns a 64 x 64 tile of the input. Its 32 x 8 threads
#
# 1. read the tile **row by row** from global memory (a warp reads 32 consecutive columns: coalesced)
#    and store it in `tile[row][col]`;
# 2. `__syncthreads()`: each thread will next read elements that *other warps* wrote;
# 3. read the tile **column by column** (`tile[col][row]`) and write it as rows of the output, starting
#    at the block's origin with the coordinates swapped: output row `c0 + ...`, output column `r0 + ...`.
#    Again a warp writes 32 consecutive addresses;
# 4. `__syncthreads()` again before the next row tile overwrites `tile`: a fast warp must not clobber
#    values a slow warp has not read yet.
#
# Step 3 reads a column of the tile, so the tile is declared `kTile x (kTile + 1)`. With 64-wide tiles,
# `tile[r][c]` is word `65 r + c`, in bank `(r + c) % 32`: a column is conflict-free.
#
# Guard both phases, each in its own coordinates: the read with the input's `rows x cols`, the write
# with the output's `cols x rows`. Shapes like 1 x 1000, 33 x 31 and primes leave partial tiles. The
# given code around your cell:
#
# @@context 03_transpose/transpose.cu transpose_kernel@@

# %% nbgrader={"grade": false, "grade_id": "transpose-kernel", "locked": false, "schema_version": 3, "solution": true}
# %%solution 03_transpose/transpose.cu transpose_kernel

# %% [markdown] id="transpose-launch"
# The launcher chooses the 2D grid: `ceil(cols / 64)` blocks along x, and along y the number of row
# tiles, capped at 65535 (the kernel's loop takes the rest). An empty matrix has nothing to launch, and
# a grid with 0 blocks is an error.
#
# @@context 03_transpose/transpose.cu transpose_cuda@@

# %% nbgrader={"grade": false, "grade_id": "transpose-cuda", "locked": false, "schema_version": 3, "solution": true}
# %%solution 03_transpose/transpose.cu transpose_cuda

# %% [markdown] id="transpose-checks"
# The op's input checks, in `transpose.cpp` (as in unit 1: `course::check_cuda`, `course::check_dtype`,
# and a `TORCH_CHECK` on the number of dimensions that names `x`):
#
# @@context 03_transpose/transpose.cpp transpose@@

# %% nbgrader={"grade": false, "grade_id": "transpose-input-checks", "locked": false, "schema_version": 3, "solution": true}
# %%solution 03_transpose/transpose.cpp transpose

# %% [markdown] id="transpose-build-intro"
# ### Build and try
#
# A compile error shows the compiler's message; the file and line it names are in the assembled copy
# (under `.build/notebooks/`). After an illegal memory access the CUDA context is unusable: fix the bug,
# restart the kernel and run the cells again.

# %% nbgrader={"grade": false, "grade_id": "transpose-build", "locked": true, "schema_version": 3, "solution": false} editable=false deletable=false
reason = nb.heavy_skip_reason()
if reason:
    print(f"build 03_transpose: {reason}")
else:
    transpose_ext = course.build("03_transpose")
    x = torch.arange(15, device="cuda", dtype=torch.float32).reshape(3, 5)
    print(transpose_ext.transpose(x))
    for shape in ((1, 1), (33, 31), (1000, 1003)):
        x = torch.randn(shape, device="cuda")
        print(shape, "equal to x.t():", torch.equal(transpose_ext.transpose(x), x.t()))

# %% [markdown] id="transpose-graded-intro"
# ### Graded checks for 03
#
# Each cell runs one group of the grader's checks on your build: fresh random inputs from the printed
# seed (set `COURSE_SEED` to replay them), outputs poisoned with NaN first, inputs checked unmodified,
# and a profiler check that your kernel did the work. A transpose does no arithmetic, so results must be
# exact. A group earns its points only when all of its checks pass.

# %% nbgrader={"grade": true, "grade_id": "transpose-forward", "locked": true, "schema_version": 3, "solution": false, "points": 5} editable=false deletable=false
# 03_transpose forward: the grader's own checks. Shown here: a few cases; at grading, every forward check.
course.check("forward", "03_transpose", only=[
    "forward[float32-1x1]",
    "forward[float32-1x1000]",
    "forward[float32-33x31]",
    "forward[float32-1000x1003]",
    "forward[float16-257x129]",
    "forward[float64-3x70001]",
    "forward[tall: more than 65535 row tiles]",
    "forward[non-contiguous]",
    "forward[empty]",
    "forward[output poisoned]",
])
### BEGIN HIDDEN TESTS
course.check("forward", "03_transpose")
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "transpose-input-checks-test", "locked": true, "schema_version": 3, "solution": false, "points": 1} editable=false deletable=false
# 03_transpose input_checks: the grader's own checks. Shown here: a few cases; at grading, every input_checks check.
course.check("input_checks", "03_transpose", only=[
    "input_checks[cpu tensor]",
    "input_checks[1-D]",
])
### BEGIN HIDDEN TESTS
course.check("input_checks", "03_transpose")
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "transpose-autograd", "locked": true, "schema_version": 3, "solution": false, "points": 1} editable=false deletable=false
# 03_transpose autograd: the grader's own checks. Shown here: a few cases; at grading, every autograd check.
course.check("autograd", "03_transpose", only=[
    "autograd[gradcheck float64]",
])
### BEGIN HIDDEN TESTS
course.check("autograd", "03_transpose")
### END HIDDEN TESTS

# %% [markdown] id="transpose-speed"
# ### Speed
#
# A transpose reads and writes each element once: on 16384 x 16384 float32 that is 2 GiB of traffic, and
# the best it can do is the copy bandwidth. The graded cell times your op as the grader does (L2 flushed
# between runs, the median of many) against the reference solution in the same run: half the
# reference's throughput earns half the points, 0.85 of it all 3. It needs the forward checks to pass
# first.

# %% nbgrader={"grade": true, "grade_id": "transpose-performance", "locked": true, "schema_version": 3, "solution": false, "points": 3} editable=false deletable=false
# performance: the points earned are this cell's result (nbgrader's partial credit)
course.performance("03_transpose")

# %% [markdown] id="transpose-plot-intro"
# The picture: your tiled kernel, a naive one-element-per-thread kernel (built here with `load_inline`),
# and PyTorch's `x.t().contiguous()`, against the copy bandwidth. On small matrices launch latency
# dominates; on large ones the naive kernel's uncoalesced writes hold it to a fraction of the tiled one.

# %% id="transpose-plot"
reason = nb.heavy_skip_reason()
if reason:
    print(f"transpose throughput plot: {reason}")
else:
    import hashlib

    import matplotlib.pyplot as plt
    from torch.utils.cpp_extension import load_inline

    from grader.timer import L2Flusher, copy_bandwidth, time_fn

    NAIVE_CUDA = r'''
    #include <torch/extension.h>
    #include <c10/cuda/CUDAException.h>
    #include <c10/cuda/CUDAStream.h>

    // Grid (ceil(cols / 32), ceil(rows / 8)), block (32, 8): one element per thread. The read is
    // coalesced (a warp reads 32 consecutive columns); the write is not (32 rows apart).
    __global__ void naive_transpose_kernel(const float* in, float* out, int64_t rows, int64_t cols) {
      const int64_t c = int64_t(blockIdx.x) * blockDim.x + threadIdx.x;
      const int64_t r = int64_t(blockIdx.y) * blockDim.y + threadIdx.y;
      if (r < rows && c < cols) out[c * rows + r] = in[r * cols + c];
    }

    torch::Tensor naive_transpose(torch::Tensor x) {
      TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat && x.dim() == 2, "x: a 2-D float32 CUDA tensor");
      const torch::Tensor xc = x.contiguous();
      const int64_t rows = xc.size(0), cols = xc.size(1);
      torch::Tensor y = torch::empty({cols, rows}, xc.options());
      if (rows == 0 || cols == 0) return y;
      const dim3 block(32, 8), grid((cols + 31) / 32, (rows + 7) / 8);
      naive_transpose_kernel<<<grid, block, 0, c10::cuda::getCurrentCUDAStream()>>>(
          xc.data_ptr<float>(), y.data_ptr<float>(), rows, cols);
      C10_CUDA_KERNEL_LAUNCH_CHECK();
      return y;
    }
    '''
    NAIVE_CPP = "torch::Tensor naive_transpose(torch::Tensor x);"
    name = "naive_transpose_" + hashlib.sha1((NAIVE_CPP + NAIVE_CUDA).encode()).hexdigest()[:10]
    naive = load_inline(name=name, cpp_sources=NAIVE_CPP, cuda_sources=NAIVE_CUDA,
                        functions=["naive_transpose"], build_directory=str(nb.scratch_dir(name)))
    transpose_ext = course.build("03_transpose")
    x = torch.randn(1000, 1003, device="cuda")
    assert torch.equal(naive.naive_transpose(x), x.t())

    flush = L2Flusher()
    sizes = [256, 512, 1024, 2048, 4096, 8192, 16384]
    kinds = {"your tiled transpose": transpose_ext.transpose, "naive kernel": naive.naive_transpose,
             "x.t().contiguous() (PyTorch)": lambda m: m.t().contiguous()}
    rates = {k: [] for k in kinds}
    for n in sizes:
        inputs = [torch.randn(n, n, device="cuda") for _ in range(2)]
        for label, fn in kinds.items():
            timing = time_fn(fn, inputs, flush=flush, max_seconds=0.5, max_samples=100)
            rates[label].append(timing.rate(8 * n * n))  # read 4 bytes, write 4 bytes per element
        del inputs
        torch.cuda.empty_cache()
    limit = copy_bandwidth(8 * sizes[-1] ** 2, flush=flush)

    fig, ax = plt.subplots(figsize=(7, 4))
    for (label, r), style in zip(rates.items(), ("o-", "s--", "^:")):
        ax.plot(sizes, [v / 1e9 for v in r], style, label=label)
    ax.axhline(limit / 1e9, color="gray", linestyle=":", label=f"copy bandwidth ({limit / 1e9:.0f} GB/s)")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("n (an n x n float32 matrix)")
    ax.set_ylabel("GB/s (8 bytes per element)")
    ax.set_title(f"Transpose throughput on {torch.cuda.get_device_name()}")
    ax.legend()
    plt.show()

# %% [markdown] id="stencil-intro"
# ## 5. Exercise 04: a stencil with a halo tile and a constant-memory filter
#
# A K x K filter over an image ("same" size, zeros outside):
# $\text{out}[y][x] = \sum_{dy, dx < K} w[dy][dx] \cdot \text{in}[y + dy - R][x + dx - R]$ with
# $R = \lfloor K/2 \rfloor$. Each output reads $K^2$ inputs and each input feeds $K^2$ outputs: plenty of
# reuse, if the values are kept close.
#
# **The halo tile.** A block computes a 64 x 64 output tile. The inputs it needs are a
# $(64 + 2R) \times (64 + 2R)$ region: the tile plus a **halo** of R pixels on each side, which the
# neighbouring blocks also read (about 6% extra for K = 3, mostly from L2). The block copies that region
# into shared memory once; after a `__syncthreads()`, every tap is a shared-memory read. **Zero padding
# happens during the load**: a pixel outside the image is stored as 0, so the compute loop needs no bounds
# checks; only the final store checks `y < H && x < W`.
#
# **The filter in constant memory.** `__constant__ float c_filter[49]` lives in a 64 KiB read-only space
# with its own cache, which serves one address to a whole warp in a single broadcast: exactly how the
# taps are read (all threads use tap `(dy, dx)` at the same time). The host fills it with
# `cudaMemcpyToSymbolAsync` on the op's stream, so the copy is ordered before the kernel without a
# synchronisation, and a new filter on every call just works.
#
# **K as a template parameter.** `stencil2d_kernel<K>` (dispatched by a `switch` on K = 1, 3, 5, 7):
# the tap loops unroll completely, the tile's size is a compile-time constant, and each thread's 16
# sums stay in registers.
#
# First the filter copy:
#
# @@context 04_stencil2d/stencil2d.cu stencil2d_set_filter@@

# %% nbgrader={"grade": false, "grade_id": "stencil-set-filter", "locked": false, "schema_version": 3, "solution": true}
# %%solution 04_stencil2d/stencil2d.cu stencil2d_set_filter

# %% [markdown] id="stencil-load"
# The kernel has two cells. The first loads the tile with its halo: with compile-time bounds
# (`kSmemH`, `kSmemW`) the loops unroll and every thread issues its loads together. Thread `(tx, ty)` takes
# tile rows `ty + 8 j` and columns `tx + 32 i`: a warp reads consecutive pixels of one row.
#
# @@context 04_stencil2d/stencil2d.cu stencil2d_kernel@@

# %% nbgrader={"grade": false, "grade_id": "stencil-load-tile", "locked": false, "schema_version": 3, "solution": true}
# %%solution 04_stencil2d/stencil2d.cu stencil2d_kernel

# %% [markdown] id="stencil-compute"
# The second computes this thread's 2 x 8 outputs (columns `tx` and `tx + 32`, rows `8 ty .. 8 ty + 7`
# of the tile) from shared memory and stores them. A good order: walk the `8 + K - 1` tile rows the
# thread needs once; each value read feeds up to K of its outputs (one per `dy`). End with
# `__syncthreads()` before the next tile overwrites `tile`.
#
# @@context 04_stencil2d/stencil2d.cu stencil2d_kernel#2@@

# %% nbgrader={"grade": false, "grade_id": "stencil-compute-tile", "locked": false, "schema_version": 3, "solution": true}
# %%solution 04_stencil2d/stencil2d.cu stencil2d_kernel#2

# %% [markdown] id="stencil-launch"
# The launcher: a 2D grid of 64 x 64 tiles, with the batch folded into y (`B * ceil(H / 64)` tiles,
# capped at 65535; the kernel walks the rest).
#
# @@context 04_stencil2d/stencil2d.cu launch@@

# %% nbgrader={"grade": false, "grade_id": "stencil-launch-cell", "locked": false, "schema_version": 3, "solution": true}
# %%solution 04_stencil2d/stencil2d.cu launch

# %% [markdown] id="stencil-checks"
# The input checks name the argument at fault: `x` and `weight` on the GPU and float32, `x` 2-D or 3-D,
# `weight` square with K odd and at most 7, and on `x`'s device.
#
# @@context 04_stencil2d/stencil2d.cpp stencil2d@@

# %% nbgrader={"grade": false, "grade_id": "stencil-input-checks", "locked": false, "schema_version": 3, "solution": true}
# %%solution 04_stencil2d/stencil2d.cpp stencil2d

# %% [markdown] id="stencil-build-intro"
# ### Build and try
#
# The stencil is a cross-correlation, like `F.conv2d(x[:, None], w[None, None], padding=K // 2)`. A
# filter that is not symmetric catches swapped `dy` and `dx`.

# %% nbgrader={"grade": false, "grade_id": "stencil-build", "locked": true, "schema_version": 3, "solution": false} editable=false deletable=false
reason = nb.heavy_skip_reason()
if reason:
    print(f"build 04_stencil2d: {reason}")
else:
    stencil_ext = course.build("04_stencil2d")
    x = torch.randn(2, 97, 131, device="cuda")
    for k in (1, 3, 5, 7):
        w = torch.randn(k, k, device="cuda")
        ref = F.conv2d(x[:, None].double(), w[None, None].double(), padding=k // 2)[:, 0]
        err = (stencil_ext.stencil2d(x, w) - ref).abs().max().item()
        print(f"K = {k}: largest difference from F.conv2d in float64 {err:.2e}")

# %% [markdown] id="stencil-graded-intro"
# ### Graded checks for 04
#
# Tolerance: elementwise against a float64 `F.conv2d`, a relative `1e-5` plus a few float32 roundings of
# the largest possible sum. The filter copy may run beside your kernel; PyTorch's convolution may not.

# %% nbgrader={"grade": true, "grade_id": "stencil-forward", "locked": true, "schema_version": 3, "solution": false, "points": 5} editable=false deletable=false
# 04_stencil2d forward: the grader's own checks. Shown here: a few cases; at grading, every forward check.
course.check("forward", "04_stencil2d", only=[
    "forward[1x1 K=3]",
    "forward[2x2 K=7]",
    "forward[31x33 K=3]",
    "forward[97x101 K=7]",
    "forward[batch 3x45x67 K=3]",
    "forward[filter changes between calls]",
    "forward[non-contiguous]",
    "forward[empty]",
])
### BEGIN HIDDEN TESTS
course.check("forward", "04_stencil2d")
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "stencil-input-checks-test", "locked": true, "schema_version": 3, "solution": false, "points": 1} editable=false deletable=false
# 04_stencil2d input_checks: the grader's own checks. Shown here: a few cases; at grading, every input_checks check.
course.check("input_checks", "04_stencil2d", only=[
    "input_checks[cpu x]",
    "input_checks[non-square weight]",
    "input_checks[even K]",
])
### BEGIN HIDDEN TESTS
course.check("input_checks", "04_stencil2d")
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "stencil-registration", "locked": true, "schema_version": 3, "solution": false, "points": 1} editable=false deletable=false
# 04_stencil2d registration: the grader's own checks. Shown here: a few cases; at grading, every registration check.
course.check("registration", "04_stencil2d", only=[
    "registration[opcheck]",
])
### BEGIN HIDDEN TESTS
course.check("registration", "04_stencil2d")
### END HIDDEN TESTS

# %% [markdown] id="stencil-speed"
# ### Speed
#
# With the halo from shared memory, the stencil is memory-bound again: one read of every input pixel
# and one write of every output, `8 H W` bytes. The graded cell times a 3 x 3 filter on an 8192 x 8192
# image against the reference solution in the same run (the target on an H100 is 2400 GB/s; cuDNN's
# convolution reaches about 900): half the points at 0.5x, all 3 at 0.85x.

# %% nbgrader={"grade": true, "grade_id": "stencil-performance", "locked": true, "schema_version": 3, "solution": false, "points": 3} editable=false deletable=false
# performance: the points earned are this cell's result (nbgrader's partial credit)
course.performance("04_stencil2d")

# %% [markdown] id="matmul-intro"
# ## 6. Exercise 05: the matrix product, in four steps
#
# $C = A B$ with A of M x K and B of K x N costs $2 M N K$ FLOPs on $4 (M K + K N + M N)$ bytes of
# distinct data: at $4096^3$, 683 FLOPs per byte. On an H100, cuBLAS reaches about 50 TFLOP/s in strict
# float32 and memory moves about 3 TB/s, so a matrix product *can* be compute-bound, but only if each value loaded from
# memory is used many times from something faster. The four numbered kernels climb that ladder; the
# op's `version` argument picks one, and each is graded on its own.
#
# **Kernel 1, naive.** A 2D grid, one thread per output: `row = 8 by + ty`, `col = 32 bx + tx`, and a
# loop over k. A warp shares one row of A (all 32 threads read the same `A[row][k]`: a broadcast) and
# reads 32 consecutive elements of a row of B (coalesced). Still, every FMA needs two loads from the
# cache hierarchy: about 3 TFLOP/s on an H100.
#
# @@context 05_matmul/matmul_basic.cu matmul_kernel1@@

# %% nbgrader={"grade": false, "grade_id": "matmul-kernel1", "locked": false, "schema_version": 3, "solution": true}
# %%solution 05_matmul/matmul_basic.cu matmul_kernel1

# %% [markdown] id="matmul-launch1"
# Its launcher: blocks of 32 x 8 threads, a grid covering C. `check_grid_rows` (given) refuses an M whose
# row blocks would not fit in `gridDim.y`. K = 0 is legal and must produce zeros: the kernel's loop then
# runs zero times and stores the 0 it started with.
#
# @@context 05_matmul/matmul_basic.cu matmul_cuda1@@

# %% nbgrader={"grade": false, "grade_id": "matmul-cuda1", "locked": false, "schema_version": 3, "solution": true}
# %%solution 05_matmul/matmul_basic.cu matmul_cuda1

# %% nbgrader={"grade": true, "grade_id": "matmul-naive", "locked": true, "schema_version": 3, "solution": false, "points": 2} editable=false deletable=false
# 05_matmul naive: the grader's own checks. Shown here: a few cases; at grading, every naive check.
course.check("naive", "05_matmul", only=[
    "naive[1x1x1]",
    "naive[31x33x17]",
    "naive[127x129x131]",
    "naive[K = 0 gives zeros]",
    "naive[non-contiguous]",
])
### BEGIN HIDDEN TESTS
course.check("naive", "05_matmul")
### END HIDDEN TESTS

# %% [markdown] id="matmul-tiles"
# **Kernel 2, shared-memory tiles.** A 32 x 32 block computes a 32 x 32 tile of C. For each 32-wide step
# of k, every thread copies one element of A's tile and one of B's into shared memory (`As[ty][tx] =
# A[row][k0 + tx]`, `Bs[ty][tx] = B[k0 + ty][col]`, both coalesced), the block waits, and each thread
# does 32 FMAs from shared memory. Each global load is now reused 32 times. Outside the matrices the
# tiles hold zeros, so partial tiles need no test in the inner loop. Two barriers per step: after the
# copy (others' values must be there) and after the FMAs (before the next copy overwrites them). Forget
# either and the result changes from run to run.
#
# @@context 05_matmul/matmul_basic.cu matmul_kernel2@@

# %% nbgrader={"grade": false, "grade_id": "matmul-kernel2", "locked": false, "schema_version": 3, "solution": true}
# %%solution 05_matmul/matmul_basic.cu matmul_kernel2

# %% [markdown] id="matmul-launch2"
# Its launcher: 32 x 32 blocks, one per tile of C.
#
# @@context 05_matmul/matmul_basic.cu matmul_cuda2@@

# %% nbgrader={"grade": false, "grade_id": "matmul-cuda2", "locked": false, "schema_version": 3, "solution": true}
# %%solution 05_matmul/matmul_basic.cu matmul_cuda2

# %% nbgrader={"grade": true, "grade_id": "matmul-shared-tiles", "locked": true, "schema_version": 3, "solution": false, "points": 2} editable=false deletable=false
# 05_matmul shared_tiles: the grader's own checks. Shown here: a few cases; at grading, every shared_tiles check.
course.check("shared_tiles", "05_matmul", only=[
    "shared_tiles[1x1x1]",
    "shared_tiles[31x33x17]",
    "shared_tiles[127x129x131]",
    "shared_tiles[K = 0 gives zeros]",
    "shared_tiles[non-contiguous]",
])
### BEGIN HIDDEN TESTS
course.check("shared_tiles", "05_matmul")
### END HIDDEN TESTS

# %% [markdown] id="matmul-register-blocking"
# **Kernel 3, register blocking.** Kernel 2 still reads two shared-memory values per FMA, and shared
# memory cannot feed the FMA units at that rate (it reached about 9 TFLOP/s on an H100). The next level
# of reuse is the **register file**: a 128 x 128 block tile, 256 threads, and each thread computes an
# **8 x 8 block of C** held in 64 registers (`acc[8][8]`). Per k it reads 8 values of A (a column
# fragment) and 8 of B (a row fragment) and accumulates their **outer product**: 64 FMAs for 16 loads.
#
# The details that make it fast:
#
# - **16-byte reads.** A is stored *transposed* in shared memory (`As[k][m]`), so a thread's rows of one k
#   are contiguous, like B's columns: four `float4` reads per k instead of sixteen scalar ones. The
#   thread's 8 rows are two groups of 4, 64 apart (`4 ty ..` and `64 + 4 ty ..`), and the same for columns.
# - **Few distinct addresses per warp.** The 256 threads form a 16 x 16 layout in which each warp is a
#   4 x 8 patch: a warp's `float4` reads of `As` hit 4 addresses and of `Bs` 8, each broadcast to the
#   threads that share it.
# - **Double buffering.** Two shared buffers: the next k step's global loads are issued into registers
#   (`load_stage`) *before* the FMAs on the current step, so their latency hides behind the arithmetic;
#   after the FMAs they are stored into the other buffer (`store_stage`), and one `__syncthreads()` per
#   step suffices (the other buffer was last read in the previous step, which ended with that barrier).
# - **Vector global loads** where K (for A) or N (for B) is a multiple of 4 and the pointer is 16-byte
#   aligned; a template parameter picks the path, so the inner loop has no run-time test.
#
# `load_stage` and `store_stage` are given (read from the exercise's file):

# %% nbgrader={"grade": false, "grade_id": "matmul-show-stages", "locked": true, "schema_version": 3, "solution": false} editable=false deletable=false
cu = (course.skeleton("05_matmul") / "matmul_basic.cu").read_text()
print(cu[cu.index("// One k step's slices"):cu.index("// Grid (ceil(N / 128)")])

# %% [markdown] id="matmul-kernel3-context"
# Your cell is the main loop: stage k step 0, then for each step load the next stage, do the
# `8 x 8 x kBK` FMAs from shared memory, store the next stage into the other buffer, and synchronise.
# The epilogue that writes `acc` to C is given.
#
# @@context 05_matmul/matmul_basic.cu matmul_kernel3@@

# %% nbgrader={"grade": false, "grade_id": "matmul-kernel3", "locked": false, "schema_version": 3, "solution": true}
# %%solution 05_matmul/matmul_basic.cu matmul_kernel3

# %% [markdown] id="matmul-launch3"
# The launcher picks one of the four instantiations `matmul_kernel3<vec_a, vec_b>`: a template
# parameter must be a compile-time constant, so a run-time choice is an `if`/`else` over the launches.
#
# @@context 05_matmul/matmul_basic.cu matmul_cuda3@@

# %% nbgrader={"grade": false, "grade_id": "matmul-cuda3", "locked": false, "schema_version": 3, "solution": true}
# %%solution 05_matmul/matmul_basic.cu matmul_cuda3

# %% nbgrader={"grade": true, "grade_id": "matmul-register-blocked", "locked": true, "schema_version": 3, "solution": false, "points": 3} editable=false deletable=false
# 05_matmul register_blocked: the grader's own checks. Shown here: a few cases; at grading, every register_blocked check.
course.check("register_blocked", "05_matmul", only=[
    "register_blocked[1x1x1]",
    "register_blocked[31x33x17]",
    "register_blocked[127x129x131]",
    "register_blocked[200x1032x257]",
    "register_blocked[K = 0 gives zeros]",
    "register_blocked[unaligned views]",
])
### BEGIN HIDDEN TESTS
course.check("register_blocked", "05_matmul")
### END HIDDEN TESTS

# %% [markdown] id="matmul-kernel4-context"
# **Kernel 4, cp.async and a multi-stage ring.** Kernel 3 issues the next step's loads before the FMAs,
# but that is only the order in the source: the loads go into registers and do not depend on the FMAs,
# so the compiler schedules them *after* the FMAs, and each step still waits for global memory (about
# 37 TFLOP/s, 0.71 of cuBLAS). `cp.async` (compute capability 8.0 and newer) copies global -> shared
# memory in the background, with no staging registers and nothing for the compiler to move: a thread
# issues copies, closes them into a group (`cp_async_commit`), and later waits until at most n of its
# groups are still pending (`cp_async_wait<n>`).
#
# With a **ring of 3 shared buffers**, the copies for steps k + 1 and k + 2 are in flight while step k
# computes. Each step: wait for this step's group (`cp_async_wait<kStages4 - 2>`: only the newer one may
# be pending), `__syncthreads()` (everyone's copies landed, and nobody still reads the buffer about to be
# refilled), issue step k + 2's copies into the free buffer and commit (an empty group when there is no
# such step, so the counting stays right), compute on the current buffer, and advance both indices,
# wrapping after the third buffer. The tiling changes too: 128 threads (2 x 2 warps of 64 x 64 outputs),
# 16 x 8 outputs per thread. On an H100: 46.2 TFLOP/s, 0.89 of cuBLAS.
#
# On a T4 (compute capability 7.5) there is no `cp.async`: the copy helpers fall back, under
# `#if __CUDA_ARCH__ >= 800`, to ordinary loads and stores, commit and wait do nothing, and the same
# kernel stays correct, just without the overlap. The copy helpers and the per-thread copy bookkeeping
# (`Loader4`) are given; your cell is the main loop.
#
# @@context 05_matmul/matmul_pipeline.cu tile_product4@@

# %% nbgrader={"grade": false, "grade_id": "matmul-kernel4", "locked": false, "schema_version": 3, "solution": true}
# %%solution 05_matmul/matmul_pipeline.cu tile_product4

# %% [markdown] id="matmul-launch4"
# Its launcher: two instantiations, `matmul_kernel4<vec_b>` (16-byte copies of B or 4-byte ones).
#
# @@context 05_matmul/matmul_pipeline.cu launch4@@

# %% nbgrader={"grade": false, "grade_id": "matmul-cuda4", "locked": false, "schema_version": 3, "solution": true}
# %%solution 05_matmul/matmul_pipeline.cu launch4

# %% nbgrader={"grade": true, "grade_id": "matmul-async-pipeline", "locked": true, "schema_version": 3, "solution": false, "points": 2} editable=false deletable=false
# 05_matmul async_pipeline: the grader's own checks. Shown here: a few cases; at grading, every async_pipeline check.
course.check("async_pipeline", "05_matmul", only=[
    "async_pipeline[1x1x1]",
    "async_pipeline[31x33x17]",
    "async_pipeline[127x129x131]",
    "async_pipeline[200x1032x257]",
    "async_pipeline[K = 0 gives zeros]",
    "async_pipeline[unaligned views]",
])
### BEGIN HIDDEN TESTS
course.check("async_pipeline", "05_matmul")
### END HIDDEN TESTS

# %% [markdown] id="matmul-kernel5-context"
# **Kernel 5, tensor cores.** From compute capability 8.0 on, one `mma.sync` instruction makes a warp
# multiply a 16 x 8 tile of A by an 8 x 8 tile of B (TF32: float32 rounded to a 10-bit mantissa) or a
# 16 x 16 by 16 x 8 (bfloat16) and add the 16 x 8 product to float32 sums. The tiles live in the 32
# lanes' registers, each lane holding the elements the PTX ISA assigns it; with `g = lane / 4` and
# `t = lane % 4`, TF32's A fragment is A(g, t), A(g + 8, t), A(g, t + 4), A(g + 8, t + 4), B's is
# B(t, g), B(t + 4, g), and C's is C(g, 2t), C(g, 2t + 1), C(g + 8, 2t), C(g + 8, 2t + 1) (the README
# draws them, and the bfloat16 ones). `ldmatrix` loads a whole A fragment in one instruction, and an XOR
# swizzle of the shared tiles keeps its rows in different banks. Tall float32 products (2048 rows or
# more) first write B^T rounded to TF32 (`matmul_transpose_tf32`, given), and the kernel (`kBt`) reads
# B^T's rows as it reads A's: then B's fragments are `ldmatrix` loads too. Kernel 4's cp.async ring, the swizzles,
# `ldmatrix_x4`, `to_tf32` and `mma16x8` are given; your cells are one mma k step's fragment loads and
# products, the store of the C fragments, and the launch. On a GPU below 8.0 (a T4) version 5 refuses to
# run and its checks are not graded.
#
# @@context 05_matmul/matmul_tensor_cores.cu load_fragments5@@

# %% nbgrader={"grade": false, "grade_id": "matmul-mma-stage", "locked": false, "schema_version": 3, "solution": true}
# %%solution 05_matmul/matmul_tensor_cores.cu load_fragments5

# %% [markdown] id="matmul-mma-fragments5"
# The products of one mma k step: float32 words rounded to TF32 first (bfloat16 ones go as they are, and
# B^T's were rounded when written). The kernel's loop calls the two in turn; for bfloat16 and B^T it
# loads the next step's fragments while this step's `mma`s issue (the kernel's comment says why float32
# read from B does not).
#
# @@context 05_matmul/matmul_tensor_cores.cu mma_fragments5@@

# %% nbgrader={"grade": false, "grade_id": "matmul-mma-fragments5-cell", "locked": false, "schema_version": 3, "solution": true}
# %%solution 05_matmul/matmul_tensor_cores.cu mma_fragments5

# %% [markdown] id="matmul-store-c5"
# The C fragments go back to C with the layout above, inside C only.
#
# @@context 05_matmul/matmul_tensor_cores.cu store_c5@@

# %% nbgrader={"grade": false, "grade_id": "matmul-store-c5-cell", "locked": false, "schema_version": 3, "solution": true}
# %%solution 05_matmul/matmul_tensor_cores.cu store_c5

# %% [markdown] id="matmul-launch5"
# Its launcher, one template for both input types and both layouts of B: six instantiations
# `matmul_kernel5<T, vec_a, vec_b, kBt>` (B^T's copies are always whole 16-byte chunks).
#
# @@context 05_matmul/matmul_tensor_cores.cu launch5@@

# %% nbgrader={"grade": false, "grade_id": "matmul-launch5-cell", "locked": false, "schema_version": 3, "solution": true}
# %%solution 05_matmul/matmul_tensor_cores.cu launch5

# %% nbgrader={"grade": true, "grade_id": "matmul-tensor-cores-tf32", "locked": true, "schema_version": 3, "solution": false, "points": 2} editable=false deletable=false
# 05_matmul tensor_cores_tf32: the grader's own checks. Shown here: a few cases; at grading, every tensor_cores_tf32 check.
course.check("tensor_cores_tf32", "05_matmul", only=[
    "tensor_cores_tf32[1x1x1]",
    "tensor_cores_tf32[31x33x17]",
    "tensor_cores_tf32[127x129x131]",
    "tensor_cores_tf32[2049x130x1001]",
    "tensor_cores_tf32[values near 100000]",
])
### BEGIN HIDDEN TESTS
course.check("tensor_cores_tf32", "05_matmul")
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "matmul-tensor-cores-bf16", "locked": true, "schema_version": 3, "solution": false, "points": 1} editable=false deletable=false
# 05_matmul tensor_cores_bf16: the grader's own checks. Shown here: a few cases; at grading, every tensor_cores_bf16 check.
course.check("tensor_cores_bf16", "05_matmul", only=[
    "tensor_cores_bf16[1x1x1]",
    "tensor_cores_bf16[31x33x17]",
    "tensor_cores_bf16[unaligned views]",
])
### BEGIN HIDDEN TESTS
course.check("tensor_cores_bf16", "05_matmul")
### END HIDDEN TESTS

# %% [markdown] id="matmul-kernel6-context"
# **Kernel 6, Hopper's tensor cores** (compute capability 9.0 only, built for `9.0a`; `make grade` builds
# so on such a GPU). One `wgmma` instruction makes a whole warpgroup (4 warps) multiply a 64 x 8 (TF32)
# or 64 x 16 (BF16) slice of A, taken from the threads' registers in mma.sync's fragment layout, by a
# slice of 256 columns of B that the tensor cores read straight from shared memory: no fragment loads of
# B at all. The copies are TMA's: one thread of a producer warpgroup copies a whole box of A and of B^T
# into a stage of a 4-stage ring (128-byte swizzle) and an mbarrier counts their bytes; the two consumer
# warpgroups wait on it, multiply, and release the stage on a second mbarrier once their `wgmma`s are done.
# TF32 `wgmma` reads B K-major, so for float32 `matmul_transpose_tf32` (given) first writes B^T, rounded to
# TF32; BF16 `wgmma` transposes bfloat16 B itself, read as it is stored. The
# producer and the barriers are given (a wrong barrier hangs rather than fails); yours: the A fragments,
# a consumer's `wgmma`s and the launch. Elsewhere version 6 refuses to run and its checks are not graded.
#
# @@context 05_matmul/matmul_wgmma.cu load_a6@@

# %% nbgrader={"grade": false, "grade_id": "matmul-load-a6", "locked": false, "schema_version": 3, "solution": true}
# %%solution 05_matmul/matmul_wgmma.cu load_a6

# %% [markdown] id="matmul-consume6"
# A consumer's k step, between the given wait for the stage's copies and the given release of the stage
# before (its group finished, as `wgmma.wait_group 1` has just seen): the A fragments and the stage's
# `wgmma`s.
#
# @@context 05_matmul/matmul_wgmma.cu consume6@@

# %% nbgrader={"grade": false, "grade_id": "matmul-consume6-cell", "locked": false, "schema_version": 3, "solution": true}
# %%solution 05_matmul/matmul_wgmma.cu consume6

# %% [markdown] id="matmul-launch6"
# The launch, batch elements in gridDim.z.
#
# @@context 05_matmul/matmul_wgmma.cu matmul6@@

# %% nbgrader={"grade": false, "grade_id": "matmul-launch6-cell", "locked": false, "schema_version": 3, "solution": true}
# %%solution 05_matmul/matmul_wgmma.cu matmul6

# %% nbgrader={"grade": true, "grade_id": "matmul-wgmma-tf32", "locked": true, "schema_version": 3, "solution": false, "points": 1} editable=false deletable=false
# 05_matmul wgmma_tf32: the grader's own checks. Shown here: a few cases; at grading, every wgmma_tf32 check.
course.check("wgmma_tf32", "05_matmul", only=[
    "wgmma_tf32[1x1x1]",
    "wgmma_tf32[129x257x33]",
    "wgmma_tf32[values near 100000]",
])
### BEGIN HIDDEN TESTS
course.check("wgmma_tf32", "05_matmul")
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "matmul-wgmma-bf16", "locked": true, "schema_version": 3, "solution": false, "points": 1} editable=false deletable=false
# 05_matmul wgmma_bf16: the grader's own checks. Shown here: a few cases; at grading, every wgmma_bf16 check.
course.check("wgmma_bf16", "05_matmul", only=[
    "wgmma_bf16[1x1x1]",
    "wgmma_bf16[129x257x33]",
    "wgmma_bf16[unaligned views]",
])
### BEGIN HIDDEN TESTS
course.check("wgmma_bf16", "05_matmul")
### END HIDDEN TESTS

# %% [markdown] id="matmul-checks"
# Last, the op's input checks: both operands on the GPU, float32 or bfloat16 and 2-D, on the same device
# and of the same dtype, with matching inner sizes (name both shapes), a version of 1 to 6, and bfloat16
# for versions 5 and 6 only.
#
# @@context 05_matmul/matmul.cpp matmul@@

# %% nbgrader={"grade": false, "grade_id": "matmul-input-checks", "locked": false, "schema_version": 3, "solution": true}
# %%solution 05_matmul/matmul.cpp matmul

# %% nbgrader={"grade": false, "grade_id": "matmul-build", "locked": true, "schema_version": 3, "solution": false} editable=false deletable=false
reason = nb.heavy_skip_reason()
if reason:
    print(f"build 05_matmul: {reason}")
else:
    matmul_ext = course.build("05_matmul")
    a = torch.randn(300, 200, device="cuda")
    b = torch.randn(200, 100, device="cuda")
    ref = a.double() @ b.double()
    # version 5 needs tensor cores with TF32 (compute capability 8.0 and newer)
    for version in (1, 2, 3, 4) + ((5,) if torch.cuda.get_device_capability() >= (8, 0) else ()):
        c = matmul_ext.matmul(a, b, version)
        print(f"version {version}: relative error {((c - ref).norm() / ref.norm()).item():.1e}")

# %% [markdown] id="matmul-graded-intro"
# ### Graded checks and speed for 05
#
# Kernels 1-4 are compared with a float64 product, normwise, at `1e-5`: strict float32 lands near
# `1e-7`; TF32 tensor cores (about `3e-4`) fail. Kernel 5 is held, element by element, to a bound derived
# from its precision (the README's Accuracy). The speed cell times kernel 4 on $4096^3$ against the reference
# (about 46 TFLOP/s on an H100, 0.89 of cuBLAS with TF32 off): half the points at 0.5x, all 3 at 0.85x,
# once `async_pipeline` passes.

# %% nbgrader={"grade": true, "grade_id": "matmul-input-checks-test", "locked": true, "schema_version": 3, "solution": false, "points": 1} editable=false deletable=false
# 05_matmul input_checks: the grader's own checks. Shown here: a few cases; at grading, every input_checks check.
course.check("input_checks", "05_matmul", only=[
    "input_checks[cpu A]",
    "input_checks[inner sizes differ]",
    "input_checks[version=0]",
])
### BEGIN HIDDEN TESTS
course.check("input_checks", "05_matmul")
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "matmul-registration", "locked": true, "schema_version": 3, "solution": false, "points": 1} editable=false deletable=false
# 05_matmul registration: the grader's own checks. Shown here: a few cases; at grading, every registration check.
course.check("registration", "05_matmul", only=[
    "registration[opcheck]",
])
### BEGIN HIDDEN TESTS
course.check("registration", "05_matmul")
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "matmul-performance", "locked": true, "schema_version": 3, "solution": false, "points": 3} editable=false deletable=false
# performance: the points earned are this cell's result (nbgrader's partial credit)
course.performance("05_matmul")

# %% [markdown] id="matmul-plot-intro"
# The four kernels against cuBLAS (TF32 off, so all five do strict float32 FMAs) as the matrices grow.
# Small products cannot fill the GPU; from about $2048^3$ on, each step of reuse shows as a step in
# TFLOP/s.

# %% id="matmul-plot"
reason = nb.heavy_skip_reason()
if reason:
    print(f"matmul throughput plot: {reason}")
else:
    import matplotlib.pyplot as plt

    from grader.timer import L2Flusher, math_mode, time_fn

    matmul_ext = course.build("05_matmul")
    flush = L2Flusher()
    sizes = [256, 512, 1024, 2048, 4096]
    kinds = {f"kernel {v}": (lambda ab, v=v: matmul_ext.matmul(ab[0], ab[1], v)) for v in (1, 2, 3, 4)}
    kinds["cuBLAS (torch.matmul, TF32 off)"] = lambda ab: torch.matmul(ab[0], ab[1])
    rates = {k: [] for k in kinds}
    with math_mode():  # TF32 off: cuBLAS in strict fp32, like the kernels
        for n in sizes:
            inputs = [(torch.randn(n, n, device="cuda"), torch.randn(n, n, device="cuda")) for _ in range(2)]
            for label, fn in kinds.items():
                timing = time_fn(fn, inputs, flush=flush, max_seconds=0.5, max_samples=50)
                rates[label].append(timing.rate(2 * n**3))
            del inputs
            torch.cuda.empty_cache()

    fig, ax = plt.subplots(figsize=(7, 4))
    for (label, r), style in zip(rates.items(), ("o-", "s-", "^-", "D-", "k--")):
        ax.plot(sizes, [v / 1e12 for v in r], style, label=label)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("n (n x n times n x n, float32)")
    ax.set_ylabel("TFLOP/s")
    ax.set_title(f"Matrix product on {torch.cuda.get_device_name()}")
    ax.legend()
    plt.show()

# %% [markdown] id="next"
# ## What next
#
# Unit 3 turns convolution into exactly this matrix product, without ever building the matrix: an
# implicit GEMM whose tiles of A are gathered from the image as they are loaded. Grade this unit's
# exercises from the command line with `make grade EX=03` (and 04, 05); `make bench EX=05` times all four
# matrix-product kernels beside cuBLAS.
