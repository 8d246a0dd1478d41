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
# # Unit 3 · Convolution: direct, as a matrix product, and transposed
#
# A 2-D convolution is the workhorse of vision networks, and on a GPU it is, underneath, the matrix
# product of unit 2. This unit builds `F.conv2d` twice and then its transpose:
#
# 1. the **operation and its output size**, with stride, padding and dilation;
# 2. a **direct kernel**: one thread per output, loops over input channels and taps;
# 3. **convolution as a matrix product** (im2col), and an **implicit GEMM** that runs unit 2's tiled,
#    register-blocked product while gathering the matrix from the image on the fly;
# 4. the **transposed convolution**, which is the gradient of `conv2d` with respect to its input,
#    written as a gather;
# 5. the **backward** of both, so that `Conv2d` and `ConvTranspose2d` train: each exercise's gradients
#    computed by its own forward op.
#
# **What you write.** A Python warm-up on the CPU (output sizes and im2col in PyTorch), then the regions
# of `06_conv2d` and `07_conv_transpose2d`. Each region is a cell starting with
# `%%solution <exercise>/<file> <function>`; `course.build()` compiles the cells inside the rest of the
# exercise's code (the same files as `exercises/<exercise>/`). A cell you have not written keeps the
# student copy's stub.
#
# **How it is graded.** The graded cells run the same checks as `make grade EX=06` and `EX=07`: you see a
# few cases of each group here; grading runs all of them.
#
# | part | points |
# |---|---:|
# | warm-up: output sizes and im2col (runs on a CPU) | 2 |
# | 06 conv2d: direct 2, implicit GEMM 3, depthwise 2, tensor cores 2, autograd 2, input checks 1, registration 1, performance 3 | 16 |
# | 07 conv_transpose2d: gather 2, implicit GEMM 3, autograd 2, input checks 1, registration 1, performance 3 | 12 |
#
# **Where it runs.** Builds and checks need a CUDA GPU; the first build of each exercise takes about a
# minute. Without a GPU, or under `nbgrader validate`, those cells print why and skip.

# %% nbgrader={"grade": false, "grade_id": "setup", "locked": true, "schema_version": 3, "solution": false} editable=false deletable=false
# @@setup@@

# %% [markdown] id="conv-as-gemm"
# ## 1. The operation and its output size
#
# An input `x` of shape (N, Cin, H, W), a weight (Cout, Cin, Kh, Kw) and a bias (Cout): each output
# channel `co` slides its Cin x Kh x Kw filter over the image and adds the bias. With stride
# $(s_h, s_w)$, padding $(p_h, p_w)$ and dilation $(d_h, d_w)$:
#
# $$y[n][c_o][o_h][o_w] = b[c_o] + \sum_{c_i, k_h, k_w} x[n][c_i][\,o_h s_h - p_h + k_h d_h\,][\,o_w s_w - p_w + k_w d_w\,] \; w[c_o][c_i][k_h][k_w]$$
#
# where a row or column outside the image reads 0 (the zero padding). Like the stencil of unit 2 this is
# a cross-correlation: the filter is not flipped.
#
# **The output size.** Along one axis, a dilated kernel spans $d (K - 1) + 1$ pixels, and placement `o`
# starts at $o s$ in the padded input of $H + 2p$ pixels. It fits while
# $o s + d (K - 1) \le H + 2p - 1$, so the number of placements is
#
# $$H_o = \left\lfloor \frac{H + 2p - d (K - 1) - 1}{s} \right\rfloor + 1.$$
#
# A 224-pixel image with a 7 x 7 kernel, stride 2 and padding 3 gives 112; a 56-pixel one with 3 x 3,
# stride 1 and padding 1 keeps 56 ("same" padding). When the dilated kernel is larger than the padded
# input there is no placement at all: the op rejects it.
#
# ## 2. Convolution is a matrix product
#
# Flatten the output pixels into one index and the reduction into another:
#
# | index | stands for | range |
# |---|---|---|
# | `m` | an output pixel `(n, oh, ow)` | M = N Ho Wo |
# | `k` | a tap `(ci, kh, kw)` | K = Cin Kh Kw |
# | `co` | an output channel | Cout |
#
# Define $A[m][k] = x[n][c_i][o_h s_h - p_h + k_h d_h][o_w s_w - p_w + k_w d_w]$ (0 in the padding): row
# `m` of A is the patch of input under output pixel `m`, unrolled. This is the **im2col** matrix. The
# weight, read as a Cout x K matrix, is $B^T$: $B[k][c_o] = w[c_o][c_i][k_h][k_w]$. Then
#
# $$Y = A B \quad (M \times K \text{ times } K \times C_{out}), \qquad y[n][c_o][o_h][o_w] = Y[m][c_o] + b[c_o].$$
#
# For a typical layer, 32 images of 64 x 56 x 56, 64 output channels, 3 x 3, padding 1:
# M = 100,352, Cout = 64, K = 576, or 7.4 GFLOP. Building A in memory would copy the input
# Kh Kw = 9 times over and send it through DRAM twice; the fast kernel of this unit never builds it.
#
# **Warm-up (2 points, runs on a CPU).** Write the two output-size formulas (for `conv_transpose2d`, see
# section 6: its output is the input size of the convolution it inverts, plus `output_padding`) and
# `im2col` in PyTorch. Slicing works well: for each tap `(kh, kw)`, the padded input sliced with the
# stride gives that tap's value for every output pixel at once. The next cell checks your `im2col` against
# `F.unfold` and the matrix product against `F.conv2d`.

# %% nbgrader={"grade": false, "grade_id": "warmup-answer", "locked": false, "schema_version": 3, "solution": true}
def conv_output_size(size: int, k: int, stride: int = 1, padding: int = 0, dilation: int = 1) -> int:
    # The number of positions of a (dilated) kernel of k taps in an input of `size` padded on both sides.
    ### BEGIN SOLUTION
    return (size + 2 * padding - dilation * (k - 1) - 1) // stride + 1
    ### END SOLUTION


def conv_transpose_output_size(size: int, k: int, stride: int = 1, padding: int = 0, output_padding: int = 0,
                               dilation: int = 1) -> int:
    # The output length of F.conv_transpose2d along one axis.
    ### BEGIN SOLUTION
    return (size - 1) * stride - 2 * padding + dilation * (k - 1) + output_padding + 1
    ### END SOLUTION


def im2col(x: torch.Tensor, kh: int, kw: int, stride=(1, 1), padding=(0, 0), dilation=(1, 1)) -> torch.Tensor:
    # x (N, C, H, W) -> A (N * Ho * Wo, C * kh * kw): row m = (n, oh, ow) holds the input patch under output
    # pixel (oh, ow) of image n, column k = (c, i, j) the tap at kernel row i, column j of channel c
    # (row-major order for both), 0 where the tap falls in the padding.
    ### BEGIN SOLUTION
    n, c, h, w = x.shape
    ho = conv_output_size(h, kh, stride[0], padding[0], dilation[0])
    wo = conv_output_size(w, kw, stride[1], padding[1], dilation[1])
    xp = F.pad(x, (padding[1], padding[1], padding[0], padding[0]))
    taps = []
    for i in range(kh):
        for j in range(kw):
            r0, c0 = i * dilation[0], j * dilation[1]
            taps.append(xp[:, :, r0 : r0 + stride[0] * (ho - 1) + 1 : stride[0],
                           c0 : c0 + stride[1] * (wo - 1) + 1 : stride[1]])
    a = torch.stack(taps, dim=2)  # (N, C, kh * kw, Ho, Wo)
    return a.reshape(n, c * kh * kw, ho * wo).transpose(1, 2).reshape(n * ho * wo, c * kh * kw)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "warmup-test", "locked": true, "schema_version": 3, "solution": false, "points": 2} editable=false deletable=false
def conv2d_via_im2col(x, w, b, stride=(1, 1), padding=(0, 0), dilation=(1, 1)):
    n, _, h, wd = x.shape
    cout, _, kh, kw = w.shape
    ho = conv_output_size(h, kh, stride[0], padding[0], dilation[0])
    wo = conv_output_size(wd, kw, stride[1], padding[1], dilation[1])
    a = im2col(x, kh, kw, stride, padding, dilation)  # (N Ho Wo, Cin Kh Kw)
    y = a @ w.reshape(cout, -1).t() + b                # the matrix product: (N Ho Wo, Cout)
    return y.reshape(n, ho, wo, cout).permute(0, 3, 1, 2)


assert conv_output_size(56, 3, 1, 1) == 56
assert conv_output_size(224, 7, 2, 3) == 112
assert conv_output_size(10, 3, 1, 0, 2) == 6
assert conv_transpose_output_size(6, 3, 2, 1) == 11
assert conv_transpose_output_size(6, 3, 2, 1, output_padding=1) == 12
g = torch.Generator().manual_seed(0)
x = torch.randn(2, 3, 9, 11, dtype=torch.float64, generator=g)
w = torch.randn(4, 3, 3, 2, dtype=torch.float64, generator=g)
b = torch.randn(4, dtype=torch.float64, generator=g)
cfg = dict(stride=(2, 1), padding=(1, 0), dilation=(1, 2))
a = im2col(x, 3, 2, **cfg)
unfolded = F.unfold(x, (3, 2), **cfg)  # (N, C kh kw, Ho Wo)
assert tuple(a.shape) == (unfolded.shape[0] * unfolded.shape[2], unfolded.shape[1]), tuple(a.shape)
torch.testing.assert_close(a, unfolded.transpose(1, 2).reshape(a.shape))
torch.testing.assert_close(conv2d_via_im2col(x, w, b, **cfg), F.conv2d(x, w, b, **cfg))
print(f"ok: im2col gives A of {tuple(a.shape)}, and A @ W^T is the convolution")
### BEGIN HIDDEN TESTS
for size, k, s, p, d in ((1, 1, 1, 0, 1), (5, 5, 1, 0, 1), (7, 3, 3, 0, 1), (8, 3, 2, 1, 1), (13, 4, 2, 3, 2),
                         (31, 5, 4, 2, 3)):
    ref = F.conv2d(torch.zeros(1, 1, size, 1), torch.zeros(1, 1, k, 1), stride=(s, 1), padding=(p, 0),
                   dilation=(d, 1)).shape[2]
    assert conv_output_size(size, k, s, p, d) == ref, (size, k, s, p, d)
for size, k, s, p, op, d in ((1, 1, 1, 0, 0, 1), (5, 3, 2, 1, 1, 1), (7, 4, 3, 2, 2, 1), (9, 3, 1, 0, 1, 2),
                             (4, 5, 2, 0, 0, 3)):
    ref = F.conv_transpose2d(torch.zeros(1, 1, size, 1), torch.zeros(1, 1, k, 1), stride=(s, 1),
                             padding=(p, 0), output_padding=(op, 0), dilation=(d, 1)).shape[2]
    assert conv_transpose_output_size(size, k, s, p, op, d) == ref, (size, k, s, p, op, d)
for shape, wshape, cfg in (
    ((1, 1, 1, 1), (1, 1, 1, 1), dict()),
    ((3, 2, 8, 8), (5, 2, 3, 3), dict(stride=(1, 1), padding=(1, 1), dilation=(1, 1))),
    ((2, 4, 13, 7), (3, 4, 1, 5), dict(stride=(1, 3), padding=(0, 2), dilation=(1, 1))),
    ((1, 3, 17, 19), (2, 3, 3, 3), dict(stride=(2, 2), padding=(3, 1), dilation=(2, 3))),
    ((2, 1, 6, 6), (4, 1, 6, 6), dict(stride=(1, 1), padding=(0, 0), dilation=(1, 1))),
):
    x = torch.randn(shape, dtype=torch.float64, generator=g)
    w = torch.randn(wshape, dtype=torch.float64, generator=g)
    b = torch.randn(wshape[0], dtype=torch.float64, generator=g)
    torch.testing.assert_close(conv2d_via_im2col(x, w, b, **cfg), F.conv2d(x, w, b, **cfg))
### END HIDDEN TESTS

# %% [markdown] id="direct-intro"
# ## 3. Exercise 06, version 1: the direct kernel
#
# First the host side, in `conv2d.cpp`. The output size, per axis (`conv2d` calls it for rows and
# columns):
#
# @@context 06_conv2d/conv2d.cpp conv_output_size@@

# %% nbgrader={"grade": false, "grade_id": "conv-output-size", "locked": false, "schema_version": 3, "solution": true}
# %%solution 06_conv2d/conv2d.cpp conv_output_size

# %% [markdown] id="conv-checks"
# The argument checks: a convolution has many ways to be called wrong, and each message should name the
# argument at fault and show what it got. `stride`, `padding` and `dilation` arrive as checked
# (height, width) pairs. Messages pass only strings to `TORCH_CHECK` (`course::str` formats shapes and
# numbers).
#
# @@context 06_conv2d/conv2d.cpp check_conv_args@@

# %% nbgrader={"grade": false, "grade_id": "conv-check-args", "locked": false, "schema_version": 3, "solution": true}
# %%solution 06_conv2d/conv2d.cpp check_conv_args

# %% [markdown] id="direct-kernel"
# **The direct kernel.** A 1D grid-stride loop over the `N Cout Ho Wo` outputs, one thread per output:
# decode the flat index with `ow` fastest (so a warp's threads sit on neighbouring output pixels of one
# channel: their input reads are neighbours, and they all read the same weight, a broadcast), then loop
# over `ci`, `kh`, `kw`. `load_padded` (given) returns 0 outside the image.
#
# It is correct and simple, and slow: each FMA needs one input and one weight load, so it is limited by
# the cache bandwidth, far below the FMA units' rate (about 1.7 TFLOP/s on an H100 for the layer above).
#
# @@context 06_conv2d/conv2d.cu conv2d_kernel1@@

# %% nbgrader={"grade": false, "grade_id": "conv2d-kernel1", "locked": false, "schema_version": 3, "solution": true}
# %%solution 06_conv2d/conv2d.cu conv2d_kernel1

# %% [markdown] id="direct-launch"
# Its launcher: `course::grid_for(total, threads)` gives enough blocks for the outputs, capped at one full
# wave (the grid-stride loop covers the rest). No outputs, no launch.
#
# @@context 06_conv2d/conv2d.cu launch_direct@@

# %% nbgrader={"grade": false, "grade_id": "conv2d-launch-direct", "locked": false, "schema_version": 3, "solution": true}
# %%solution 06_conv2d/conv2d.cu launch_direct

# %% [markdown] id="direct-build-intro"
# ### Build and try
#
# The op takes `version=1` (direct) or `version=2` (implicit GEMM, the default, next section: until its
# cells are written it is the student copy's stub).

# %% nbgrader={"grade": false, "grade_id": "direct-build", "locked": true, "schema_version": 3, "solution": false} editable=false deletable=false
reason = nb.heavy_skip_reason()
if reason:
    print(f"build 06_conv2d: {reason}")
else:
    conv_ext = course.build("06_conv2d")
    x = torch.randn(2, 5, 17, 19, device="cuda", dtype=torch.float64)
    w = torch.randn(7, 5, 3, 3, device="cuda", dtype=torch.float64)
    b = torch.randn(7, device="cuda", dtype=torch.float64)
    for stride, padding, dilation in ((1, 0, 1), (1, 1, 1), (2, 1, 1), ((2, 1), (0, 2), (2, 3))):
        y = conv_ext.conv2d(x, w, b, stride, padding, dilation, version=1)
        ref = F.conv2d(x, w, b, stride, padding, dilation)
        print(f"stride {stride}, padding {padding}, dilation {dilation}: shape {tuple(y.shape)}, "
              f"relative error {((y - ref).norm() / ref.norm()).item():.1e}")

# %% [markdown] id="direct-graded-intro"
# ### Graded checks for version 1
#
# Results are compared with `F.conv2d` in float64, normwise: relative error `1e-5` in float32, `1e-11`
# in float64. Each output is a sum of K products, and the order of summation changes its rounding, so
# the comparison cannot be exact. (cuDNN's TF32 mode, the default on recent GPUs, lands near `1e-3` and
# would fail.) The profiler must see `conv2d_kernel1`, not a PyTorch or cuDNN kernel.

# %% nbgrader={"grade": true, "grade_id": "conv-direct", "locked": true, "schema_version": 3, "solution": false, "points": 2} editable=false deletable=false
# 06_conv2d direct: the grader's own checks. Shown here: a few cases; at grading, every direct check.
course.check("direct", "06_conv2d", only=[
    "direct[float32, k3s1p1]",
    "direct[float32, k3s2p1]",
    "direct[float32, non-square kernel 4x2]",
    "direct[float32, dilation (2, 3)]",
    "direct[float32, no bias]",
    "direct[float64, k7s2p3]",
    "direct[empty batch]",
    "direct[non-contiguous inputs]",
])
### BEGIN HIDDEN TESTS
course.check("direct", "06_conv2d")
### END HIDDEN TESTS

# %% [markdown] id="gemm-intro"
# ## 4. Exercise 06, version 2: the implicit GEMM
#
# Version 2 runs unit 2's register-blocked matrix product $Y = A B$, but never builds A: each tile of A
# is **gathered from the image** while it is loaded into shared memory.
#
# - **Tiles.** A block computes a BM x 64 tile of Y: BM output pixels (128, or 64 when the problem is
#   too small to give the GPU enough 128-pixel blocks) by 64 output channels, with BM threads. The K
#   loop takes 8 columns of A and 8 rows of B at a time into shared memory (`As[k][m]`, `Bs[k][co]`).
# - **Register blocking.** Thread `t` owns 8 output pixels (rows `4 tm ..` and `BM/2 + 4 tm ..` of the
#   tile) times 8 channels (`4 tn ..` and `32 + 4 tn ..`): per k it reads 8 values of A and 8 of B, 16
#   bytes at a time, and does 64 FMAs into `acc[8][8]`.
# - **The gather.** Thread `t` loads row `m0 + t` of A: one output pixel, decoded once into its image and
#   the top-left input position `(ih0, iw0)` of its patch. Neighbouring threads have neighbouring pixels,
#   so their loads are coalesced. Because every thread walks `k = 0, 1, 2, ...` in order, the tap
#   `(ci, kh, kw)` advances by increments (`kw` fastest, then `kh`, then the channel plane offset
#   `c_off`) instead of by divisions.
# - **Weights.** `B[k][co]` is `weight[co][k]`: each thread loads a few consecutive k of one output
#   channel's weight row (`w_row`).
# - **Double buffering**, as in unit 2: the next K step's global loads go into registers (`a_reg`,
#   `b_reg`) before this step's FMAs; the lambda `store_tile` (given) moves them to the other buffer.
# - **Zeros** in every tile element past M, K or Cout (K = Cin Kh Kw is rarely a multiple of 8: 5 x 3 x 3
#   = 45), so the FMA loop has no tests; the epilogue (given) guards the stores.
#
# The first cell is the body of `load_tile`: global memory to registers.
#
# @@context 06_conv2d/conv2d.cu conv2d_kernel2@@

# %% nbgrader={"grade": false, "grade_id": "conv2d-load-tile", "locked": false, "schema_version": 3, "solution": true}
# %%solution 06_conv2d/conv2d.cu conv2d_kernel2

# %% [markdown] id="gemm-math"
# The second cell is the math of one K step: from the current shared buffer, this thread's 8 + 8
# values per `kk` (read as `Vec4`, `course::Vec<scalar_t, 4>`: 16 bytes for float32, two loads' worth
# for float64), and their outer product into `acc`. With `#pragma unroll` on every loop with a constant
# trip count, `acc` stays in registers; a run-time index would push it into local memory.
#
# @@context 06_conv2d/conv2d.cu conv2d_kernel2#2@@

# %% nbgrader={"grade": false, "grade_id": "conv2d-outer-product", "locked": false, "schema_version": 3, "solution": true}
# %%solution 06_conv2d/conv2d.cu conv2d_kernel2#2

# %% [markdown] id="gemm-launch"
# The launcher of one tile size: a 2D grid, output pixels along x (M may be large; `gridDim.x` allows
# $2^{31} - 1$) and channel tiles along y. The given `launch_implicit_gemm` picks BM = 128 or 64 from the
# number of multiprocessors.
#
# @@context 06_conv2d/conv2d.cu launch_implicit_gemm_tiles@@

# %% nbgrader={"grade": false, "grade_id": "conv2d-launch-implicit-gemm", "locked": false, "schema_version": 3, "solution": true}
# %%solution 06_conv2d/conv2d.cu launch_implicit_gemm_tiles

# %% [markdown] id="depthwise-intro"
# ### Groups, and the depthwise path
#
# With `groups` $g$, the channels split into $g$ independent convolutions: output channels
# $j \cdot C_{out}/g ..$ read only input channels $j \cdot C_{in}/g ..$, through a weight of shape
# $(C_{out}, C_{in}/g, K_h, K_w)$. Both versions take them: the direct kernel sums over its output
# channel's group only, and the implicit GEMM runs one GEMM per group (`blockIdx.z`).
#
# **Depthwise** ($g = C_{in}$, MobileNet's 3x3 layers) is the extreme: each output channel reads one
# input channel through 9 weights. As a GEMM that is $C_{in}$ products with K = 9: nothing to reuse, the
# tiles mostly empty. Each output costs 9 FMAs and each input pixel is read by 9 outputs, so the kernel
# is bound by memory: read the input once, write the output once. Version 2 takes its own kernel for
# 3x3 filters (`conv2d_depthwise_kernel`): each thread computes a few neighbouring outputs of one row (4,
# or 2 at a stride on wide rows) and reads its inputs **straight from global memory**. No shared
# memory: neighbouring threads read overlapping pixels, and the L1 cache serves the overlap, so each
# input pixel still comes from DRAM about once. (An earlier version copied each block's input tile, halo
# included, into shared memory first; on MobileNetV2's stride-2 and small-plane layers its few large
# blocks spent most of their time copying, and the direct kernel is 1.3-1.7x faster there. Other filter
# sizes still take that tile kernel, given code.)
#
# The cell computes one thread's strip of outputs:
#
# @@context 06_conv2d/conv2d.cu conv2d_depthwise_kernel@@

# %% nbgrader={"grade": false, "grade_id": "conv2d-depthwise-math", "locked": false, "schema_version": 3, "solution": true}
# %%solution 06_conv2d/conv2d.cu conv2d_depthwise_kernel

# %% nbgrader={"grade": true, "grade_id": "conv-implicit-gemm", "locked": true, "schema_version": 3, "solution": false, "points": 3} editable=false deletable=false
# 06_conv2d implicit_gemm: the grader's own checks. Shown here: a few cases; at grading, every implicit_gemm check
# (version 2 with groups == in_channels runs the depthwise kernel above, so some of them need it too).
course.check("implicit_gemm", "06_conv2d", only=[
    "implicit_gemm[float32, k3s1p1]",
    "implicit_gemm[float32, k3s2p1]",
    "implicit_gemm[float32, non-square kernel 4x2]",
    "implicit_gemm[float32, dilation (2, 3)]",
    "implicit_gemm[float32, odd channels 67 -> 65]",
    "implicit_gemm[float64, k7s2p3]",
    "implicit_gemm[empty batch]",
    "implicit_gemm[non-contiguous inputs]",
])
### BEGIN HIDDEN TESTS
course.check("implicit_gemm", "06_conv2d")
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "conv-depthwise", "locked": true, "schema_version": 3, "solution": false, "points": 2} editable=false deletable=false
# 06_conv2d depthwise: the grader's own checks. Shown here: a few cases; at grading, every depthwise check.
course.check("depthwise", "06_conv2d", only=[
    "depthwise[float32, 3x3 pad 1, 24 channels]",
    "depthwise[float32, 3x3 stride 2 pad 1]",
    "depthwise[float32, 3x3, 70x70 planes (row tiles)]",
    "depthwise[float32, 3x3, 7x7 planes, 96 channels (many planes a block)]",
    "depthwise[float32, 5x5 pad 2]",
    "depthwise[empty batch]",
])
### BEGIN HIDDEN TESTS
course.check("depthwise", "06_conv2d")
### END HIDDEN TESTS

# %% [markdown] id="tc-intro"
# ## 5. Exercise 06, version 3: the implicit GEMM on TF32 tensor cores
#
# From compute capability 8.0 on, one `mma.sync.aligned.m16n8k8` instruction makes a warp multiply a
# 16 x 8 tile of the im2col matrix (pixels x k) by an 8 x 8 tile of the weights (k x channels), operands
# rounded to TF32 (10-bit mantissa), sums in float32: the arithmetic PyTorch's own convolutions use by
# default (`torch.backends.cudnn.allow_tf32`), and what `conv2d` without a `version` runs while that
# flag is on. With `g = lane / 4`, `t = lane % 4`, A's fragment is A(g, t), A(g + 8, t), A(g, t + 4),
# A(g + 8, t + 4), B's is B(t, g), B(t + 4, g) and Y's is Y(g, 2t), Y(g, 2t + 1), Y(g + 8, 2t),
# Y(g + 8, 2t + 1). The given code gathers the im2col tile with `cp.async` into `A[k][m]` (XOR-swizzled,
# so the fragment reads are conflict-free) and copies the weights into `B[co][k]`; the kernel renumbers
# k and the pixels so that every fragment read is one float4 (the README explains both). Your cells:
# the B fragments, the A fragments of one mma step, the mma loop, the store of Y, and the launch. On a
# GPU below 8.0 (a T4) version 3 refuses to run and its checks are not graded.
#
# @@context 06_conv2d/conv2d.cu mma_stage3@@

# %% nbgrader={"grade": false, "grade_id": "conv2d-tc-b-fragments", "locked": false, "schema_version": 3, "solution": true}
# %%solution 06_conv2d/conv2d.cu mma_stage3

# %% nbgrader={"grade": false, "grade_id": "conv2d-tc-a-fragments", "locked": false, "schema_version": 3, "solution": true}
# %%solution 06_conv2d/conv2d.cu mma_stage3#2

# %% nbgrader={"grade": false, "grade_id": "conv2d-tc-mma", "locked": false, "schema_version": 3, "solution": true}
# %%solution 06_conv2d/conv2d.cu mma_stage3#3

# %% [markdown] id="tc-store"
# Y's fragments go back to `y` (NCHW) with the bias, inside y only: for one channel a lane holds 4
# neighbouring pixels, one 16-byte store where they lie in one image.
#
# @@context 06_conv2d/conv2d.cu store_y3@@

# %% nbgrader={"grade": false, "grade_id": "conv2d-tc-store", "locked": false, "schema_version": 3, "solution": true}
# %%solution 06_conv2d/conv2d.cu store_y3

# %% [markdown] id="tc-launch"
# The launcher of one tile width: pixels along x, channel tiles along y, `2 BN` threads. The given
# `launch_tensor_cores` checks the GPU and picks BN = 64 or 128 and the weight-copy path.
#
# @@context 06_conv2d/conv2d.cu launch_tensor_core_tiles@@

# %% nbgrader={"grade": false, "grade_id": "conv2d-tc-launch", "locked": false, "schema_version": 3, "solution": true}
# %%solution 06_conv2d/conv2d.cu launch_tensor_core_tiles

# %% nbgrader={"grade": true, "grade_id": "conv-tensor-cores-tf32", "locked": true, "schema_version": 3, "solution": false, "points": 2} editable=false deletable=false
# 06_conv2d tensor_cores_tf32: the grader's own checks. Shown here: a few cases; at grading, every tensor_cores_tf32 check.
course.check("tensor_cores_tf32", "06_conv2d", only=[
    "tensor_cores_tf32[float32, k3s1p1]",
    "tensor_cores_tf32[float32, odd channels 67 -> 65]",
    "tensor_cores_tf32[values near 100000]",
    "tensor_cores_tf32[empty batch]",
])
### BEGIN HIDDEN TESTS
course.check("tensor_cores_tf32", "06_conv2d")
### END HIDDEN TESTS

# %% [markdown] id="conv-backward-intro"
# ### Training: the backward, through your own forward op
#
# `conv2d` is registered with `torch.library.register_autograd`, so `Conv2d` trains. Its backward has
# no kernel of its own: both gradients are convolutions, and the forward op computes them. Along one
# axis, with $g = \partial L / \partial y$:
#
# - **The input's gradient** is the transposed convolution of $g$ with the weight (section 6 derives
#   it). With stride 1 that is a plain convolution with the kernel **flipped**, its channel axes swapped
#   within each group, padding $d (K - 1) - p$ and the same dilation. With stride $s$, first spread
#   $g$ out to stride 1: $s - 1$ zeros between its pixels, plus the rows the forward's floor division
#   dropped at the far end, so the result has exactly x's size. Where $p > d (K - 1)$ the padding would
#   be negative: crop $g$ instead. The spread-out $g$ is $s^2$ times larger, zeros mostly, and the
#   convolution does $s^2$ times the forward's multiply-adds: the price of having no kernel of its own
#   (07's transposed convolution skips the zeros).
# - **The weight's gradient** $\partial L / \partial W[c_o][c_i][a] = \sum_{n, o} x[n][c_i][o s - p + a d]
#   \, g[n][c_o][o]$ is a convolution of x with $g$ as the kernel, with the roles swapped: the channels
#   of x are the images, the images are the channels, stride $d$, dilation $s$, padding $p$, one group
#   per group of W. It has a small output and a long sum ($N H_o W_o$ products per value), so the batch
#   is split into chunks carried as extra groups (the given `weight_grad_chunks` picks how many, for
#   enough output tiles to fill the GPU) and the chunks' results are summed.
# - The bias's gradient is $g$ summed over the images and pixels.
#
# The backward runs the forward's version, with one exception: version 3 takes groups 1 only, so its
# weight gradient in chunks goes through version 2. Write the two identities; the wiring
# (`_setup_context`, `_backward`, the chunk choice) is given.
#
# @@context 06_conv2d/conv2d.py conv2d_input_grad@@

# %% nbgrader={"grade": false, "grade_id": "conv2d-input-grad", "locked": false, "schema_version": 3, "solution": true}
# %%solution 06_conv2d/conv2d.py conv2d_input_grad

# %% [markdown] id="conv-weight-grad-intro"
# @@context 06_conv2d/conv2d.py conv2d_weight_grad@@

# %% nbgrader={"grade": false, "grade_id": "conv2d-weight-grad", "locked": false, "schema_version": 3, "solution": true}
# %%solution 06_conv2d/conv2d.py conv2d_weight_grad

# %% [markdown] id="conv-autograd-graded-intro"
# The autograd group: `gradcheck` in float64 (a stride per axis with a padding beyond $d (K - 1)$,
# dilation, groups, depthwise, a channel multiplier, a batch in chunks), float32 gradients against
# autograd of `F.conv2d` in float64, on a side stream too, `opcheck`'s autograd registration, and the
# profiler: the backward of each version runs that version's kernels, never PyTorch's convolution.

# %% nbgrader={"grade": true, "grade_id": "conv-autograd", "locked": true, "schema_version": 3, "solution": false, "points": 2} editable=false deletable=false
# 06_conv2d autograd: the grader's own checks. Shown here: a few cases; at grading, every autograd check.
course.check("autograd", "06_conv2d", only=[
    "autograd[float32, stride (2, 1), dilation (1, 2)]",
    "autograd[float32, groups 4]",
    "autograd[float32, depthwise 3x3]",
    "autograd[float32, 8 images in chunks, on a side stream]",
])
### BEGIN HIDDEN TESTS
course.check("autograd", "06_conv2d")
### END HIDDEN TESTS

# %% [markdown] id="conv-checks-intro"
# ### The input checks and the registration
#
# These run once versions 1 and 2 are written: `opcheck` calls the op with `version=1` and `version=2`.

# %% nbgrader={"grade": true, "grade_id": "conv-input-checks", "locked": true, "schema_version": 3, "solution": false, "points": 1} editable=false deletable=false
# 06_conv2d input_checks: the grader's own checks. Shown here: a few cases; at grading, every input_checks check.
course.check("input_checks", "06_conv2d", only=[
    "input_checks[a CPU tensor]",
    "input_checks[mismatched channels]",
    "input_checks[stride 0]",
    "input_checks[a kernel larger than the padded input]",
])
### BEGIN HIDDEN TESTS
course.check("input_checks", "06_conv2d")
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "conv-registration", "locked": true, "schema_version": 3, "solution": false, "points": 1} editable=false deletable=false
# 06_conv2d registration: the grader's own checks. Shown here: a few cases; at grading, every registration check.
course.check("registration", "06_conv2d", only=[
    "registration[opcheck]",
])
### BEGIN HIDDEN TESTS
course.check("registration", "06_conv2d")
### END HIDDEN TESTS

# %% [markdown] id="gemm-speed"
# ### Speed
#
# The graded cell times version 2 on 32 x 64 x 56 x 56, 64 -> 64, 3 x 3, padding 1, in strict float32
# (TF32 off for cuDNN too, so both sides do fp32 FMAs), against the reference solution in the same run:
# half the points at 0.5x its throughput, all 3 at 0.85x, once `implicit_gemm` passes. On an H100 the
# reference measured about 21 TFLOP/s, within 1.1x of cuDNN's time.

# %% nbgrader={"grade": true, "grade_id": "conv-performance", "locked": true, "schema_version": 3, "solution": false, "points": 3} editable=false deletable=false
# performance: the points earned are this cell's result (nbgrader's partial credit)
course.performance("06_conv2d")

# %% [markdown] id="conv-plot-intro"
# Both versions beside cuDNN on three layers: the benchmark's, a deep 7 x 7 layer with 512 channels, and
# a stride-2 layer. The 7 x 7 layer has only M = 1568 output pixels for K = 4608: few blocks, each with a
# long K loop, leave most of the GPU idle. Splitting K across blocks (split-K, then a sum) is what it
# would need.

# %% id="conv-plot"
reason = nb.heavy_skip_reason()
if reason:
    print(f"convolution throughput plot: {reason}")
else:
    import matplotlib.pyplot as plt

    from grader.timer import L2Flusher, time_fn, tuned_strict_fp32

    conv_ext = course.build("06_conv2d")
    layers = [  # label, x shape, (cout, k), stride, padding
        ("32x64x56x56, 64->64", (32, 64, 56, 56), (64, 3), 1, 1),
        ("32x512x7x7, 512->512", (32, 512, 7, 7), (512, 3), 1, 1),
        ("32x128x28x28, 128->256, s2", (32, 128, 28, 28), (256, 3), 2, 1),
    ]
    kinds = ("direct (version 1)", "implicit GEMM (version 2)", "cuDNN, strict fp32")
    flush = L2Flusher()
    rates = {k: [] for k in kinds}
    with tuned_strict_fp32():  # TF32 off, cudnn.benchmark on
        for label, xs, (cout, k), stride, padding in layers:
            inputs = [(torch.randn(xs, device="cuda"), torch.randn(cout, xs[1], k, k, device="cuda") / 10)
                      for _ in range(2)]
            n, cin, h, w = xs
            ho = (h + 2 * padding - k) // stride + 1
            flops = 2 * n * cout * ho * ho * cin * k * k
            fns = (lambda i: conv_ext.conv2d(i[0], i[1], None, stride, padding, 1, version=1),
                   lambda i: conv_ext.conv2d(i[0], i[1], None, stride, padding, 1, version=2),
                   lambda i: F.conv2d(i[0], i[1], None, stride, padding))
            for kind, fn in zip(kinds, fns):
                rates[kind].append(time_fn(fn, inputs, flush=flush, max_seconds=0.5, max_samples=50).rate(flops))
            del inputs
            torch.cuda.empty_cache()

    fig, ax = plt.subplots(figsize=(8, 4))
    width = 0.27
    for i, kind in enumerate(kinds):
        ax.bar([j + (i - 1) * width for j in range(len(layers))], [r / 1e12 for r in rates[kind]], width,
               label=kind)
    ax.set_xticks(range(len(layers)), [l[0] for l in layers])
    ax.set_ylabel("TFLOP/s")
    ax.set_title(f"conv2d, 3x3, float32, on {torch.cuda.get_device_name()}")
    ax.legend()
    plt.show()

# %% [markdown] id="transpose-is-gradient"
# ## 6. The transposed convolution is the gradient of conv2d
#
# Take one axis of a convolution from C to D channels, weight W of shape (D, C, K):
# $z[d][o] = \sum_{c, k} a[c][\,o s - p + k\,\text{dil}\,] \, W[d][c][k]$. Input position `i` of channel
# `c` is used by every output `o` and tap `k` with $o s - p + k\,\text{dil} = i$, so for an upstream
# gradient $g = \partial L / \partial z$,
#
# $$\frac{\partial L}{\partial a[c][i]} = \sum_{d}\; \sum_{k, o \,:\, o s - p + k\,\text{dil} = i} g[d][o] \, W[d][c][k].$$
#
# Read from `g`'s side, each gradient pixel `g[d][o]` is **spread** over the positions
# $o s - p + k\,\text{dil}$, weighted by the taps. That operation is `F.conv_transpose2d(g, W, stride=s,
# padding=p, dilation=dil)`: its input has D channels, and its weight is *the same tensor*, read as
# (Cin = D, Cout = C, Kh, Kw). Transposed convolutions upsample in decoders and generators, and every
# `conv2d` backward runs one. The cell below checks the identity with autograd, on the CPU, and the
# special case of stride 1: a convolution with the kernel flipped, the channel axes swapped and the
# padding `dil (K - 1) - p`.

# %% id="transpose-demo"
g = torch.Generator().manual_seed(0)
a = torch.randn(2, 3, 11, 11, dtype=torch.float64, generator=g, requires_grad=True)
W = torch.randn(4, 3, 3, 3, dtype=torch.float64, generator=g)
z = F.conv2d(a, W, stride=2, padding=1)  # (2, 4, 6, 6)
upstream = torch.randn(z.shape, dtype=torch.float64, generator=g)
(grad_a,) = torch.autograd.grad(z, a, upstream)
torch.testing.assert_close(grad_a, F.conv_transpose2d(upstream, W, stride=2, padding=1))
print(f"the gradient of conv2d w.r.t. its input {tuple(grad_a.shape)} is conv_transpose2d of the upstream "
      f"gradient {tuple(upstream.shape)} with the same weight")

x = torch.randn(2, 4, 9, 7, dtype=torch.float64, generator=g)
padding, dilation, k = 1, 2, 3
flipped = W.flip(2, 3).transpose(0, 1)  # (C, D, K, K): the taps reversed, the channel axes swapped
torch.testing.assert_close(F.conv_transpose2d(x, W, padding=padding, dilation=dilation),
                           F.conv2d(x, flipped, padding=dilation * (k - 1) - padding, dilation=dilation))
print("stride 1: conv_transpose2d is conv2d with the flipped kernel and padding dil (K - 1) - p")

# %% [markdown] id="convt-size"
# **The output size.** Inverting the convolution's formula, an output length $H_o$ comes from any input
# length $H = (H_o - 1) s - 2p + d (K - 1) + 1 + r$ with $0 \le r < s$: with a stride, several input
# sizes give the same output size (11 and 12 both give 6 above). The transposed convolution cannot know
# which one was meant, so `output_padding` is that `r`:
#
# $$H_{out} = (H - 1) s - 2p + d (K - 1) + \text{output\_padding} + 1.$$
#
# Padding here *crops* `p` rows at each end; PyTorch accepts `output_padding` smaller than the stride *or*
# than the dilation. The same formula as the warm-up, in C++:
#
# @@context 07_conv_transpose2d/conv_transpose2d.cpp conv_transpose_output_size@@

# %% nbgrader={"grade": false, "grade_id": "convt-output-size", "locked": false, "schema_version": 3, "solution": true}
# %%solution 07_conv_transpose2d/conv_transpose2d.cpp conv_transpose_output_size

# %% [markdown] id="convt-checks"
# The argument checks mirror 06's, with the weight's channel axes the other way round (Cin, Cout, Kh,
# Kw), the rule on `output_padding`, and a padding that would crop the whole output.
#
# @@context 07_conv_transpose2d/conv_transpose2d.cpp check_conv_transpose_args@@

# %% nbgrader={"grade": false, "grade_id": "convt-check-args", "locked": false, "schema_version": 3, "solution": true}
# %%solution 07_conv_transpose2d/conv_transpose2d.cpp check_conv_transpose_args

# %% [markdown] id="convt-kernel"
# **Scatter or gather.** Written as the definition reads, one thread per *input* pixel adding into every
# output it reaches, threads collide on the same outputs: that needs atomic adds, and the result then
# depends on their order. Turn it around: one thread per *output* `o` finds the taps that reach it. Tap
# `k` does when $t = o + p - k\,\text{dil}$ is a non-negative multiple of the stride and $i = t / s$ lies
# inside the input; `source_index` (given) returns that `i` or -1. Every output is written once, by one
# thread, without atomics.
#
# Loop over the taps outside and the channels inside: the tap test is then done once per tap, not once
# per (tap, channel).
#
# @@context 07_conv_transpose2d/conv_transpose2d.cu conv_transpose2d_kernel1@@

# %% nbgrader={"grade": false, "grade_id": "convt-kernel-cell", "locked": false, "schema_version": 3, "solution": true}
# %%solution 07_conv_transpose2d/conv_transpose2d.cu conv_transpose2d_kernel1

# %% [markdown] id="convt-launch"
# Its launcher, as 06's direct one (`version=1`):
#
# @@context 07_conv_transpose2d/conv_transpose2d.cu conv_transpose2d_cuda@@

# %% nbgrader={"grade": false, "grade_id": "convt-launch-cell", "locked": false, "schema_version": 3, "solution": true}
# %%solution 07_conv_transpose2d/conv_transpose2d.cu conv_transpose2d_cuda

# %% [markdown] id="convt-igemm"
# ### Version 2: the transposed convolution as an implicit GEMM
#
# The gather does one load per multiply-add, and with stride `s` only about $1/s^2$ of its tap tests
# succeed. But the transposed convolution *is* the input gradient of a convolution, and that is a
# GEMM like 06's version 2: $Y[C_{out} \times N H_o W_o] = A[C_{out} \times C_{in} K_h K_w] \cdot
# B[C_{in} K_h K_w \times N H_o W_o]$, where $A$ is the weight read with its channel axes swapped
# (`weight[ci][co][r][s]`) and column $(n, o_h, o_w)$ of $B$ holds, at reduction index
# $(c_i, r, s)$, the input pixel that tap $(r, s)$ brings to that output: $x[n, c_i, i_h, i_w]$ with
# $i_h s = o_h + p - r\,\text{dil}$ (and likewise $i_w$), or 0 where no whole $i_h$ in range exists.
# The GEMM engine is given (the one unit 4 uses for all three convolutions of its backward: 64 x 128
# tiles, 8 x 8 outputs per thread, double-buffered shared memory); you write the loader of $B$, the
# same odometer walk as the warm-up's `source_index` test, per slice of 8 reduction indices.
#
# @@context 07_conv_transpose2d/conv_transpose2d.cu gemm_tile from "// B: thread t loads column t"@@
#
# The cell is named `gemm_tile` because regions are named after the nearest function defined at the
# top level of the file above them; what you write is the body of `GatherB::load`.

# %% nbgrader={"grade": false, "grade_id": "convt-gather-b", "locked": false, "schema_version": 3, "solution": true}
# %%solution 07_conv_transpose2d/conv_transpose2d.cu gemm_tile

# %% [markdown] id="convt-igemm-launch"
# And its launch (`version=2`): one block per 64-channel x 128-pixel tile, the unit-stride loader
# (no division) when both strides are 1.
#
# @@context 07_conv_transpose2d/conv_transpose2d.cu conv_transpose2d_cuda#2@@

# %% nbgrader={"grade": false, "grade_id": "convt-igemm-launch-cell", "locked": false, "schema_version": 3, "solution": true}
# %%solution 07_conv_transpose2d/conv_transpose2d.cu conv_transpose2d_cuda#2

# %% [markdown] id="convt-winograd-intro"
# ### Version 3: Winograd's minimal filtering (3 x 3 kernels at stride 1)
#
# At stride 1 a 3 x 3 transposed convolution is a correlation with the flipped kernel, and for that
# Winograd's $F(4 \times 4, 3 \times 3)$ computes a 4 x 4 tile of output from the 6 x 6 tile of input
# under it with 36 multiplications per channel pair instead of 144:
# $Y = A^T \left[ (G g G^T) \odot (B^T d B) \right] A$. Summed over the input channels, the 36
# element-by-element products become 36 matrix products, one per position of the 6 x 6, and those are
# one grouped 1 x 1 transposed convolution: version 2's kernel does them. You write the three small
# matrix products (each applied to a tile's columns, then to its rows, by the given transform kernels)
# and the shape of that grouped product. The matrices are in the comment above the kernels. In float32
# the fractions of $G$ and the 4s and 8s of $A^T$ cost accuracy: about 2e-6 normwise relative error,
# ten times the direct sum's, still inside the tolerance.
#
# @@context 07_conv_transpose2d/conv_transpose2d.cu winograd_g@@

# %% nbgrader={"grade": false, "grade_id": "convt-winograd-g", "locked": false, "schema_version": 3, "solution": true}
# %%solution 07_conv_transpose2d/conv_transpose2d.cu winograd_g

# %% nbgrader={"grade": false, "grade_id": "convt-winograd-bt", "locked": false, "schema_version": 3, "solution": true}
# %%solution 07_conv_transpose2d/conv_transpose2d.cu winograd_bt

# %% nbgrader={"grade": false, "grade_id": "convt-winograd-at", "locked": false, "schema_version": 3, "solution": true}
# %%solution 07_conv_transpose2d/conv_transpose2d.cu winograd_at

# %% [markdown] id="convt-winograd-product-intro"
# @@context 07_conv_transpose2d/conv_transpose2d.cu conv_transpose2d_winograd_cuda@@

# %% nbgrader={"grade": false, "grade_id": "convt-winograd-product", "locked": false, "schema_version": 3, "solution": true}
# %%solution 07_conv_transpose2d/conv_transpose2d.cu conv_transpose2d_winograd_cuda

# %% [markdown] id="convt-build-intro"
# ### Build and try
#
# Your op against the gradient that autograd computes for `F.conv2d`, on the GPU in float64, and the
# time of both versions beside cuDNN's transposed convolution on the benchmark layer.

# %% nbgrader={"grade": false, "grade_id": "convt-build", "locked": true, "schema_version": 3, "solution": false} editable=false deletable=false
reason = nb.heavy_skip_reason()
if reason:
    print(f"build 07_conv_transpose2d: {reason}")
else:
    from grader.timer import L2Flusher, time_fn, tuned_strict_fp32

    convt_ext = course.build("07_conv_transpose2d")
    a = torch.randn(2, 3, 12, 12, device="cuda", dtype=torch.float64, requires_grad=True)
    W = torch.randn(4, 3, 3, 3, device="cuda", dtype=torch.float64)
    z = F.conv2d(a, W, stride=2, padding=1)
    upstream = torch.randn_like(z)
    (grad_a,) = torch.autograd.grad(z, a, upstream)
    for version in (1, 2):
        mine = convt_ext.conv_transpose2d(upstream, W, None, stride=2, padding=1, output_padding=1, version=version)
        print(f"version {version}: shape {tuple(mine.shape)} (output_padding=1 recovers 12 from 6); "
              f"largest difference from autograd {(mine - grad_a).abs().max().item():.1e}")
    z1 = F.conv2d(a, W, padding=1)  # stride 1: version 3 (Winograd) applies
    (grad_a1,) = torch.autograd.grad(z1, a, torch.ones_like(z1))
    try:
        mine = convt_ext.conv_transpose2d(torch.ones_like(z1), W, None, stride=1, padding=1, version=3)
        print(f"version 3 at stride 1: largest difference from autograd {(mine - grad_a1).abs().max().item():.1e}")
    except RuntimeError as e:
        print(f"version 3: {str(e).splitlines()[0]}")

    inputs = [(torch.randn(32, 64, 56, 56, device="cuda"), torch.randn(64, 64, 3, 3, device="cuda") / 10)
              for _ in range(2)]
    flops = 2 * 32 * 64 * 56 * 56 * 64 * 9
    with tuned_strict_fp32():  # TF32 off, cudnn.benchmark on
        flush = L2Flusher()
        ours = {v: time_fn(lambda i, v=v: convt_ext.conv_transpose2d(i[0], i[1], None, 1, 1, version=v), inputs,
                           flush=flush, max_seconds=0.5, max_samples=50) for v in (1, 2)}
        try:
            ours[3] = time_fn(lambda i: convt_ext.conv_transpose2d(i[0], i[1], None, 1, 1, version=3), inputs,
                              flush=flush, max_seconds=0.5, max_samples=50)
        except RuntimeError:
            pass
        theirs = time_fn(lambda i: F.conv_transpose2d(i[0], i[1], None, 1, 1), inputs, flush=flush,
                         max_seconds=0.5, max_samples=50)
    print(f"32x64x56x56, 64->64, 3x3: your gather {ours[1].rate(flops) / 1e12:.1f} TFLOP/s, your implicit GEMM "
          f"{ours[2].rate(flops) / 1e12:.1f} TFLOP/s, cuDNN (strict fp32) {theirs.rate(flops) / 1e12:.1f} TFLOP/s")
    if 3 in ours:  # the direct sum's FLOPs over its time: Winograd does fewer
        print(f"your Winograd: {ours[3].rate(flops) / 1e12:.1f} TFLOP/s equivalent, {theirs.median_s / ours[3].median_s:.2f}x cuDNN")

# %% [markdown] id="convt-backward-intro"
# ### The backward of the transposed convolution, through itself
#
# As for 06, `conv_transpose2d` differentiates itself. Along one axis, $y[n][c_o][i s - p + a d]$ receives
# $x[n][c_i][i] \, W[c_i][c_o][a]$, so with $g = \partial L / \partial y$:
#
# - $\partial L / \partial x[n][c_i][i] = \sum_{c_o, a} g[n][c_o][i s - p + a d] \, W[c_i][c_o][a]$:
#   `conv2d(g, W, stride=s, padding=p, dilation=d, groups)` (the identity of section 6 read the other
#   way). With this op alone: a stride-1 correlation is a stride-1 transposed convolution with the kernel
#   flipped and its channel axes swapped within each group, padding $d (K - 1) - p$ (where that is
#   negative, the result is padded with zeros instead); the stride is every $s$-th row and column of it,
#   cut to x's size (`output_padding` may leave one more). All $s^2$ phases are computed and one is kept:
#   $s^2$ times the forward's multiply-adds.
# - $\partial L / \partial W[c_i][c_o][a] = \sum_{n, i} x[n][c_i][i] \, g[n][c_o][i s - p + a d]$: a
#   correlation of $g$ with x as the kernel, at every $d$-th tap. As a stride-1 transposed convolution:
#   $g$'s channels are the images and its images the channels, x flipped is the kernel (dilation $s$,
#   padding $s (H - 1) - p$), then every $d$-th tap, the first $K$; the batch in chunks as for 06.
#
# `sample(t, first, step, size)` (given) takes every `step`-th pixel from `first` on, zeros outside `t`.
#
# @@context 07_conv_transpose2d/conv_transpose2d.py conv_transpose2d_input_grad@@

# %% nbgrader={"grade": false, "grade_id": "convt-input-grad", "locked": false, "schema_version": 3, "solution": true}
# %%solution 07_conv_transpose2d/conv_transpose2d.py conv_transpose2d_input_grad

# %% [markdown] id="convt-weight-grad-intro"
# @@context 07_conv_transpose2d/conv_transpose2d.py conv_transpose2d_weight_grad@@

# %% nbgrader={"grade": false, "grade_id": "convt-weight-grad", "locked": false, "schema_version": 3, "solution": true}
# %%solution 07_conv_transpose2d/conv_transpose2d.py conv_transpose2d_weight_grad

# %% [markdown] id="convt-graded-intro"
# ### Graded checks and speed for 07
#
# Against `F.conv_transpose2d` in float64, with the same tolerances as 06, each version in its own
# group (version 3 only on 3 x 3 kernels at stride 1, and only once version 2, whose kernel it runs,
# passes). The speed cell times version 2 on the same layer against the reference in the same run:
# 1.5 points at 0.5x its throughput, 3 at 0.85x, once `implicit_gemm` passes.

# %% nbgrader={"grade": true, "grade_id": "convt-gather", "locked": true, "schema_version": 3, "solution": false, "points": 2} editable=false deletable=false
# 07_conv_transpose2d gather: the grader's own checks. Shown here: a few cases; at grading, every gather check.
course.check("gather", "07_conv_transpose2d", only=[
    "gather[float32, k3s1p1]",
    "gather[float32, k3s2p1]",
    "gather[float32, stride 2, output_padding 1]",
    "gather[float32, dilation (2, 3)]",
    "gather[float32, no bias]",
    "gather[float64, stride (3, 2), output_padding (2, 0)]",
    "gather[empty batch]",
    "gather[non-contiguous inputs]",
])
### BEGIN HIDDEN TESTS
course.check("gather", "07_conv_transpose2d")
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "convt-implicit-gemm", "locked": true, "schema_version": 3, "solution": false, "points": 3} editable=false deletable=false
# 07_conv_transpose2d implicit_gemm: the grader's own checks. Shown here: a few cases; at grading, every implicit_gemm check.
course.check("implicit_gemm", "07_conv_transpose2d", only=[
    "implicit_gemm[float32, k3s1p1]",
    "implicit_gemm[float32, k3s2p1]",
    "implicit_gemm[float32, stride 2, output_padding 1]",
    "implicit_gemm[float32, dilation (2, 3)]",
    "implicit_gemm[float32, no bias]",
    "implicit_gemm[float64, stride (3, 2), output_padding (2, 0)]",
    "implicit_gemm[empty batch]",
    "implicit_gemm[non-contiguous inputs]",
])
### BEGIN HIDDEN TESTS
course.check("implicit_gemm", "07_conv_transpose2d")
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "convt-winograd", "locked": true, "schema_version": 3, "solution": false, "points": 2} editable=false deletable=false
# 07_conv_transpose2d winograd: the grader's own checks. Shown here: a few cases; at grading, every winograd check.
course.check("winograd", "07_conv_transpose2d", only=[
    "winograd[float32, k3s1p1]",
    "winograd[float32, padding (0, 2)]",
    "winograd[float32, odd channels 67 -> 65]",
    "winograd[float32, resnext 32 groups of 4]",
    "winograd[float64, k3s1p0]",
    "winograd[empty batch]",
    "winograd[non-contiguous inputs]",
])
### BEGIN HIDDEN TESTS
course.check("winograd", "07_conv_transpose2d")
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "convt-autograd", "locked": true, "schema_version": 3, "solution": false, "points": 2} editable=false deletable=false
# 07_conv_transpose2d autograd: the grader's own checks. Shown here: a few cases; at grading, every autograd check.
course.check("autograd", "07_conv_transpose2d", only=[
    "autograd[float32, stride (2, 1), output_padding (1, 0), dilation (1, 2)]",
    "autograd[float32, groups 4, stride 2]",
    "autograd[float32, 8 images in chunks, on a side stream]",
])
### BEGIN HIDDEN TESTS
course.check("autograd", "07_conv_transpose2d")
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "convt-input-checks", "locked": true, "schema_version": 3, "solution": false, "points": 1} editable=false deletable=false
# 07_conv_transpose2d input_checks: the grader's own checks. Shown here: a few cases; at grading, every input_checks check.
course.check("input_checks", "07_conv_transpose2d", only=[
    "input_checks[a CPU tensor]",
    "input_checks[mismatched channels]",
    "input_checks[output_padding >= stride and >= dilation]",
    "input_checks[padding that leaves no output]",
])
### BEGIN HIDDEN TESTS
course.check("input_checks", "07_conv_transpose2d")
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "convt-registration", "locked": true, "schema_version": 3, "solution": false, "points": 1} editable=false deletable=false
# 07_conv_transpose2d registration: the grader's own checks. Shown here: a few cases; at grading, every registration check.
course.check("registration", "07_conv_transpose2d", only=[
    "registration[opcheck]",
])
### BEGIN HIDDEN TESTS
course.check("registration", "07_conv_transpose2d")
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "convt-performance", "locked": true, "schema_version": 3, "solution": false, "points": 3} editable=false deletable=false
# performance: the points earned are this cell's result (nbgrader's partial credit)
course.performance("07_conv_transpose2d")

# %% [markdown] id="next"
# ## What next
#
# Version 2 still tests every tap of every output, and with stride `s` only about $1/s^2$ of them reach
# it: the zeros it gathers are multiplied too. Splitting the outputs into the $s^2$ **phases**
# `(o + p) mod s`, within which the contributing taps are fixed (each phase an ordinary dense
# convolution), removes that waste for strided layers; tensor cores (TF32) are the other step.
#
# Unit 4 fuses a convolution with BatchNorm and ReLU, and writes the whole backward, including this
# input gradient. Grade this unit's exercises from the command line with `make grade EX=06` and
# `EX=07`; `make bench EX=06` times both versions beside cuDNN.
