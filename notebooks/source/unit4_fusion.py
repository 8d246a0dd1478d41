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
# # Unit 4 · Fusion: Conv2d + BatchNorm2d + ReLU, for inference and for training
#
# `Conv2d → BatchNorm2d → ReLU` is the building block of most convolutional networks. Run eagerly, it
# is three operators: three kernel launches, and the activation written to memory and read back twice
# between them. This unit fuses them, twice:
#
# 1. **Exercise 08, inference.** With the running statistics fixed, BatchNorm is a per-channel affine map
#    that folds into the convolution's epilogue: one kernel, and the output is the only tensor written.
# 2. **Exercise 09, training.** Batch statistics need the whole batch before anything can be normalised,
#    the running statistics must be updated exactly as `nn.BatchNorm2d` does it, and the backward needs
#    five gradients. You write the statistics, their update, the backward of BatchNorm + ReLU, the
#    launches, and the `torch.autograd.Function` that ties the forward and backward ops into autograd.
#
# **What you write.** Three small warm-ups in PyTorch that run on a CPU (the BatchNorm fold, the
# running-statistics update, and the backward you derive below), then the regions of the two exercises.
# Each region is a cell starting with `%%solution <exercise>/<file> <name>`; `course.build()` compiles
# the cells inside the rest of the exercise's code (the same files as `exercises/08_*` and
# `exercises/09_*`). The implicit-GEMM engine (unit 3's idea) is given; your parts are where the
# convolution meets BatchNorm.
#
# **How it is graded.** The graded cells run the same checks as `make grade EX=08` and `make grade EX=09`
# (`grader/specs/ex08_*.py`, `ex09_*.py`): here you see a few cases of each group; grading runs all of them.
#
# | part | points |
# |---|---:|
# | warm-up: BatchNorm folded into a scale and a shift (runs on a CPU) | 1 |
# | 08 forward | 5 |
# | 08 TF32 tensor cores (version 2; on a GPU below compute capability 8.0 not run, no points lost) | 2 |
# | 08 input checks | 1 |
# | 08 performance (against the reference, in the same run) | 4 |
# | warm-up: the running-statistics update (runs on a CPU) | 1 |
# | warm-up: the backward of BatchNorm + ReLU (runs on a CPU) | 2 |
# | 09 forward | 3 |
# | 09 running statistics | 2 |
# | 09 backward | 4 |
# | 09 autograd (`gradcheck`) | 2 |
# | 09 module (`FusedConvBNReLU`) | 2 |
# | 09 TF32 tensor cores (version 2; on a GPU below compute capability 8.0 not run, no points lost) | 2 |
# | 09 input checks | 1 |
# | 09 performance (against the reference, in the same run) | 3 |
#
# **Where it runs.** Builds and checks need a CUDA GPU; each exercise's first build takes a minute or two.
# Without a GPU, or under `nbgrader validate`, those cells print why and skip; the warm-ups run anywhere.

# %% nbgrader={"grade": false, "grade_id": "setup", "locked": true, "schema_version": 3, "solution": false} editable=false deletable=false
# @@setup@@

# %% [markdown] id="why-fuse"
# ## 1. What fusion saves
#
# A kernel launch costs a few microseconds of host and GPU time however little it does, and between two
# kernels every intermediate result makes a round trip through device memory: written by one, read by
# the next. Fusing operators into one kernel removes both: the launches, and the round trips of the
# tensors that only existed to pass data from one operator to the next.
#
# For `relu(batchnorm(conv(x)))` in eval mode, with `A` the size of one output activation:
#
# | eager PyTorch | reads | writes |
# |---|---|---|
# | the convolution (cuDNN) | `x`, the filters | `z = conv(x)`: **A** |
# | BatchNorm | `z`: **A** | its output: **A** |
# | ReLU | BatchNorm's output: **A** | `y`: **A** |
#
# Fused, the kernel reads `x` and the filters and writes `y`: the four **A** in the middle are gone, and
# so are two launches and two temporary allocations. The cell below puts numbers on it.
#
# Is it worth it? A 3x3 convolution does `2·C·9` floating-point operations per output element and is
# usually limited by arithmetic, not memory. The saving is a fixed amount of memory traffic, so it
# matters most where the convolution is cheap: 1x1 convolutions, few channels, small images, small
# batches, where eager PyTorch spends much of its time moving activations and launching kernels.

# %% id="traffic"
# Bytes moved by eager Conv -> BatchNorm -> ReLU (eval) and by one fused kernel, float32.
def traffic(n, c, hw, k, r=3):
    x, w, a = 4 * n * c * hw * hw, 4 * k * c * r * r, 4 * n * k * hw * hw  # stride 1, "same" padding
    flops = 2 * n * k * hw * hw * c * r * r
    eager = x + w + a + 2 * a + 2 * a  # conv, BatchNorm (read + write), ReLU (read + write)
    fused = x + w + a
    return flops, eager, fused, a


print(f"{'layer (batch 32)':<26}{'GFLOP':>7}{'eager MB':>10}{'fused MB':>10}{'FLOP/byte fused':>17}")
for label, c, hw, k, r in (("56x56, 64->64, 3x3", 64, 56, 64, 3), ("56x56, 256->64, 1x1", 256, 56, 64, 1),
                           ("14x14, 256->256, 3x3", 256, 14, 256, 3), ("7x7, 512->512, 3x3", 512, 7, 512, 3)):
    flops, eager, fused, a = traffic(32, c, hw, k, r)
    print(f"{label:<26}{flops / 1e9:>7.1f}{eager / 1e6:>10.1f}{fused / 1e6:>10.1f}{flops / fused:>17.0f}")


# %% [markdown] id="fold"
# The first layer is the exercise's benchmark: 7.4 GFLOP, and fusion saves about 103 MB of traffic. On an
# H100 (about 3 TB/s) that is some 35 µs against the 331 µs eager PyTorch takes for the layer in strict
# fp32: a tenth. At a high ratio of FLOPs to bytes, fusion is a modest win; the launches and traffic it
# removes matter more for the 1x1 layer, and in training (section 5), where eager PyTorch moves the
# activation about six times in the forward alone.
#
# ## 2. BatchNorm in eval mode is a per-channel scale and shift
#
# In eval mode BatchNorm uses the running statistics it collected during training, which are now
# constants. For output channel $k$, with $z$ the convolution's output (bias $b_k$ included):
#
# $$\mathrm{BN}(z) = \gamma_k \frac{z - \mu_k}{\sqrt{\sigma_k^2 + \varepsilon}} + \beta_k .$$
#
# Write $z = \mathrm{acc} + b_k$ with $\mathrm{acc}$ the accumulated sum of products. Everything except
# $\mathrm{acc}$ is a per-channel constant, so
#
# $$\mathrm{BN}(z) = s_k \cdot \mathrm{acc} + t_k,\qquad s_k = \frac{\gamma_k}{\sqrt{\sigma_k^2 + \varepsilon}},
# \qquad t_k = \beta_k + (b_k - \mu_k)\, s_k .$$
#
# The whole layer becomes $y = \max(s_k \cdot \mathrm{acc} + t_k,\ 0)$: one multiply-add and one
# comparison applied to an accumulator that is already in a register. The kernel computes $s_k$ and
# $t_k$ once per channel for its tile (64 channels), keeps them in shared memory, and applies them in
# the epilogue. (Deployment tools often go one step further and fold $s_k$ into the weights
# themselves; the kernel does it at run time, so the op takes the module's tensors unchanged.)
#
# **Warm-up (1 point, runs on a CPU).** Write the fold in PyTorch. `conv_bias` may be `None`.

# %% nbgrader={"grade": false, "grade_id": "fold-answer", "locked": false, "schema_version": 3, "solution": true}
def fold_batchnorm(conv_bias, gamma, beta, running_mean, running_var, eps):
    # Per-channel (scale, shift) such that scale * acc + shift equals eval-mode BatchNorm of acc + conv_bias.
    ### BEGIN SOLUTION
    b = conv_bias if conv_bias is not None else torch.zeros_like(gamma)
    scale = gamma / torch.sqrt(running_var + eps)
    shift = beta + (b - running_mean) * scale
    return scale, shift
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "fold-test", "locked": true, "schema_version": 3, "solution": false, "points": 1} editable=false deletable=false
def check_fold(seed, with_bias, eps, k=7):
    g = torch.Generator().manual_seed(seed)
    acc = torch.randn(3, k, 4, 5, generator=g, dtype=torch.float64)  # the convolution without its bias
    bias = torch.randn(k, generator=g, dtype=torch.float64) if with_bias else None
    gamma = torch.rand(k, generator=g, dtype=torch.float64) + 0.5
    beta = torch.randn(k, generator=g, dtype=torch.float64)
    mean = torch.randn(k, generator=g, dtype=torch.float64)
    var = torch.rand(k, generator=g, dtype=torch.float64) + 0.1
    scale, shift = fold_batchnorm(bias, gamma, beta, mean, var, eps)
    z = acc if bias is None else acc + bias[None, :, None, None]
    expected = F.batch_norm(z, mean, var, gamma, beta, training=False, eps=eps)
    got = scale[None, :, None, None] * acc + shift[None, :, None, None]
    assert torch.allclose(got, expected, rtol=1e-12, atol=1e-12), \
        f"bias={with_bias}, eps={eps}: largest difference {(got - expected).abs().max().item():.3g}"


check_fold(1, with_bias=True, eps=1e-5)
check_fold(2, with_bias=False, eps=1e-5)
print("ok: scale * acc + shift is eval-mode BatchNorm")
### BEGIN HIDDEN TESTS
for seed in range(3, 8):
    for with_bias in (True, False):
        check_fold(seed, with_bias, eps=0.1, k=1 + seed)
### END HIDDEN TESTS

# %% [markdown] id="im2col"
# ## 3. Exercise 08: the fused inference kernel
#
# The convolution is an implicit GEMM, as in unit 3: output channels are the rows, output pixels
# $(n, p, q)$ the columns, and the reduction runs over $(c, r, s)$, the input channel and the filter
# tap. A block of 128 threads computes a 64-channel x 128-pixel tile; each thread owns 8 x 8 outputs in
# registers. Per step of 8 along the reduction, the block stages a slice of the filters and a slice of
# the gathered input in shared memory (two buffers, so the next slice's loads are in flight while the
# current one is multiplied). `gemm_tile` and the weight loader are given.
#
# **The input loader.** Column $(n, p, q)$ of the gathered matrix, at reduction index
# $k = (c \cdot R + r) \cdot S + s$, is the input pixel under filter tap $(r, s)$ of output pixel
# $(p, q)$: `x[n, c, p*stride - pad + r*dil, q*stride - pad + s*dil]`, or 0 where that falls in the
# padding. Each thread owns one column for the whole block, so the constructor decodes $(n, p, q)$ once;
# `load` fills the thread's 8 values for one slice. Two integer divisions per value would cost more
# than the loads themselves: decode $k_0$ once, then step $(s, r, c)$ like the digits of an odometer.
#
# @@context 08_conv_bn_relu_inference/conv_bn_relu_inference.cu gemm_tile from "// forward B[(c, r, s)][(n, p, q)]"@@
#
# The cell is named `gemm_tile` because regions are named after the nearest function defined at the top
# level of the file above them; what you write is the body of `Im2colB::load`.

# %% nbgrader={"grade": false, "grade_id": "ex08-im2col-load", "locked": false, "schema_version": 3, "solution": true}
# %%solution 08_conv_bn_relu_inference/conv_bn_relu_inference.cu gemm_tile

# %% [markdown] id="ex08-fold-intro"
# **The fold, in the kernel.** Before the main loop, the first 64 threads each compute the scale and
# shift of one channel of the block's tile (section 2) with `fold_bn`, and store them in shared memory;
# `gemm_tile`'s first barrier makes them visible to every thread. Use `sqrt` (it is overloaded for
# `float` and `double`; the kernel is instantiated for both). Both versions of the kernel call `fold_bn`.
#
# @@context 08_conv_bn_relu_inference/conv_bn_relu_inference.cu fold_bn@@

# %% nbgrader={"grade": false, "grade_id": "ex08-fold", "locked": false, "schema_version": 3, "solution": true}
# %%solution 08_conv_bn_relu_inference/conv_bn_relu_inference.cu fold_bn

# %% [markdown] id="ex08-epilogue-intro"
# **The epilogue.** After the last slice each thread holds 64 finished accumulators. Row `i` of the
# thread's 8 x 8 outputs is channel `row_of(i)` of the tile; apply that channel's scale and shift and the
# ReLU to the 8 values of the row. `store4` (given) writes them, as 16-byte stores where the row's
# columns are one aligned run.
#
# @@context 08_conv_bn_relu_inference/conv_bn_relu_inference.cu conv_bn_relu_kernel from "  // epilogue: output offsets"@@

# %% nbgrader={"grade": false, "grade_id": "ex08-epilogue", "locked": false, "schema_version": 3, "solution": true}
# %%solution 08_conv_bn_relu_inference/conv_bn_relu_inference.cu conv_bn_relu_kernel

# %% [markdown] id="ex08-launch-intro"
# **The launch.** One block per tile: `ceil(N·P·Q / BN)` tiles along the pixels (`gridDim.x`, which may
# be large) and `ceil(K / BM)` along the channels. An empty batch has no tiles, and a grid of 0 blocks is
# an error: return first. Launch on `stream` and check the launch.
#
# @@context 08_conv_bn_relu_inference/conv_bn_relu_inference.cu conv_bn_relu_inference_cuda@@

# %% nbgrader={"grade": false, "grade_id": "ex08-launch", "locked": false, "schema_version": 3, "solution": true}
# %%solution 08_conv_bn_relu_inference/conv_bn_relu_inference.cu conv_bn_relu_inference_cuda

# %% [markdown] id="ex08-tf32-intro"
# **Version 2: the same layer on TF32 tensor cores.** PyTorch convolves float32 in TF32 unless told not to
# (`torch.backends.cudnn.allow_tf32`, default True), and so does `conv_bn_relu_inference` without a
# `version`, on GPUs of compute capability 8.0 and newer. Unit 3's exercise 06 (version 3) explains TF32,
# the `mma.sync.aligned.m16n8k8` fragments, the `cp.async` ring and the swizzle; `conv_bn_relu_tf32_kernel`
# takes that engine as it is (given: `tc_conv_gemm`), with the GEMM transposed (rows are output pixels,
# columns channels). What is yours is the epilogue: each lane holds, for each of its channels, the
# accumulators of 4 neighbouring output pixels; apply the channel's folded scale and shift (the same
# `fold_bn` as version 1) and the ReLU to them, in registers, before the one 16-byte store.
#
# @@context 08_conv_bn_relu_inference/conv_bn_relu_inference.cu conv_bn_relu_tf32_kernel from "  // Epilogue. With 06's renumbered pixels"@@

# %% nbgrader={"grade": false, "grade_id": "ex08-tf32-epilogue", "locked": false, "schema_version": 3, "solution": true}
# %%solution 08_conv_bn_relu_inference/conv_bn_relu_inference.cu conv_bn_relu_tf32_kernel

# %% [markdown] id="ex08-tf32-launch-intro"
# Its launch: one block of `kTcThreads` (4 warps) per tile of `kTcPixels` output pixels x `kTcChannels`
# channels. (The caller, given, refuses a GPU below compute capability 8.0 and chooses the 16-byte weight
# copies where every filter row starts on 16 bytes.)
#
# @@context 08_conv_bn_relu_inference/conv_bn_relu_inference.cu launch_tf32_tiles@@

# %% nbgrader={"grade": false, "grade_id": "ex08-tf32-launch", "locked": false, "schema_version": 3, "solution": true}
# %%solution 08_conv_bn_relu_inference/conv_bn_relu_inference.cu launch_tf32_tiles

# %% [markdown] id="ex08-checks"
# **The input checks**, in the binding (`.cpp`). The kernels use 32-bit offsets and assume a valid
# geometry, so the binding is where bad input must stop, with a message that names the argument. The
# helpers in `course/ops.h` (`course::check_cuda`, `check_dtype`, `check_dim`, `shape_of`, `str`)
# raise `RuntimeError` through `TORCH_CHECK`; pass only strings (and C strings) to `TORCH_CHECK`:
# `course::str(n)` formats a number. The output size of a dimension is
# $\lfloor (H + 2\,\mathrm{pad} - \mathrm{dil}\,(R - 1) - 1) / \mathrm{stride} \rfloor + 1$, and it must be
# at least 1: an input smaller than the dilated kernel (plus padding) is an error that names `x`.
#
# @@context 08_conv_bn_relu_inference/conv_bn_relu_inference.cpp conv_shape@@

# %% nbgrader={"grade": false, "grade_id": "ex08-conv-shape", "locked": false, "schema_version": 3, "solution": true}
# %%solution 08_conv_bn_relu_inference/conv_bn_relu_inference.cpp conv_shape

# %% [markdown] id="ex08-build-intro"
# ### Build and try
#
# This compiles your cells inside the rest of exercise 08 and compares the fused module with
# `nn.Sequential(conv, bn, ReLU())` in eval mode. A compile error shows the compiler's message; the file
# and line it names are in the assembled copy (under `.build/notebooks/`). After an illegal memory access
# the CUDA context is unusable: fix the bug, restart the kernel, and run the cells again.

# %% nbgrader={"grade": false, "grade_id": "ex08-build", "locked": true, "schema_version": 3, "solution": false} editable=false deletable=false
reason = nb.heavy_skip_reason()
if reason:
    print(f"build: {reason}")
else:
    from grader.timer import math_mode

    ex08 = course.build("08_conv_bn_relu_inference")
    torch.manual_seed(0)
    conv = torch.nn.Conv2d(16, 40, 3, stride=2, padding=1).cuda()
    bn = torch.nn.BatchNorm2d(40).cuda()
    with torch.no_grad():  # running statistics as if trained
        bn.running_mean.uniform_(-0.5, 0.5)
        bn.running_var.uniform_(0.5, 2.0)
    eager = torch.nn.Sequential(conv, bn, torch.nn.ReLU()).eval()
    fused = ex08.ConvBNReLUInference.from_modules(conv, bn)
    x = torch.randn(4, 16, 29, 31, device="cuda")
    with math_mode(), torch.no_grad():
        y, expected = fused(x), eager(x)
    print(f"output {tuple(y.shape)}; largest difference from eager: {(y - expected).abs().max().item():.2e}")

# %% [markdown] id="ex08-graded-intro"
# ### Graded checks for exercise 08
#
# Each cell runs one group of the grader's checks on your build: fresh random inputs drawn from the
# printed seed (set `COURSE_SEED` to replay them), outputs compared with float64 eager PyTorch (normwise,
# 1e-5 in float32 for version 1: its arithmetic must be strict fp32, no TF32), output memory poisoned with
# NaN first, inputs checked unmodified. `forward[one kernel, no intermediate]` checks the fusion itself:
# exactly one kernel ran, and nothing beyond the output was allocated. Version 2 is graded against a bound
# derived from TF32's precision (06's, on the BatchNorm-folded weights; the README's How it is graded),
# with inputs near 1e5 and 1e-6 that FP16 cannot hold. A group earns its points only when all of its
# checks pass.

# %% nbgrader={"grade": true, "grade_id": "ex08-forward", "locked": true, "schema_version": 3, "solution": false, "points": 5} editable=false deletable=false
# 08_conv_bn_relu_inference forward: the grader's own checks. Shown here: a few cases; at grading, every forward check.
course.check("forward", "08_conv_bn_relu_inference", only=[
    "forward[float32-odd-dilated-bias]",
    "forward[float32-k70-5x5]",
    "forward[float32-pixels-off-128]",
    "forward[float64-k70-5x5]",
    "forward[empty batch]",
    "forward[one kernel, no intermediate]",
    "forward[module]",
])
### BEGIN HIDDEN TESTS
course.check("forward", "08_conv_bn_relu_inference")
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "ex08-tensor-cores", "locked": true, "schema_version": 3, "solution": false, "points": 2} editable=false deletable=false
# 08_conv_bn_relu_inference tensor_cores_tf32: the grader's own checks. Shown here: a few cases; at grading, every tensor_cores_tf32 check.
course.check("tensor_cores_tf32", "08_conv_bn_relu_inference", only=[
    "tensor_cores_tf32[float32-odd-dilated-bias]",
    "tensor_cores_tf32[float32-k70-5x5]",
    "tensor_cores_tf32[values near 100000]",
    "tensor_cores_tf32[values near 1e-06]",
])
### BEGIN HIDDEN TESTS
course.check("tensor_cores_tf32", "08_conv_bn_relu_inference")
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "ex08-input-checks", "locked": true, "schema_version": 3, "solution": false, "points": 1} editable=false deletable=false
# 08_conv_bn_relu_inference input_checks: the grader's own checks. Shown here: a few cases; at grading, every input_checks check.
course.check("input_checks", "08_conv_bn_relu_inference", only=[
    "input_checks[cpu x]",
    "input_checks[weight channels]",
    "input_checks[stride 0]",
    "input_checks[x smaller than the kernel]",
])
### BEGIN HIDDEN TESTS
course.check("input_checks", "08_conv_bn_relu_inference")
### END HIDDEN TESTS

# %% [markdown] id="ex08-speed"
# **Speed.** The timed layer is the ResNet block above (32x64x56x56, 64 → 64 channels, 3x3, padding 1)
# in strict fp32, against the reference solution in the same run: half of the reference's speed earns
# 2 points, 0.85 of it earns 4. It needs the forward checks to pass first. Eager PyTorch (cuDNN with
# `cudnn.benchmark` on) is timed beside it; the reference matches it.

# %% nbgrader={"grade": true, "grade_id": "ex08-performance", "locked": true, "schema_version": 3, "solution": false, "points": 4} editable=false deletable=false
# performance: the points earned are this cell's result (nbgrader's partial credit)
course.performance("08_conv_bn_relu_inference")

# %% [markdown] id="ex08-plot-intro"
# Where the time goes: cuDNN's convolution alone, eager convolution + BatchNorm + ReLU, and your fused
# kernel, on ResNet-like layers (batch 32, 3x3, strict fp32). The gap between the first two bars is what
# the unfused epilogue costs; it is largest where the convolution itself is cheap.

# %% id="ex08-plot"
reason = nb.heavy_skip_reason()
if reason:
    print(f"fusion plot: {reason}")
else:
    import matplotlib.pyplot as plt

    from grader.timer import L2Flusher, time_fn, tuned_strict_fp32

    ex08 = course.build("08_conv_bn_relu_inference")
    flush = L2Flusher()
    layers = [("56x56, 64->64", 64, 56, 64), ("28x28, 128->128", 128, 28, 128),
              ("14x14, 256->256", 256, 14, 256), ("7x7, 512->512", 512, 7, 512)]
    rows = []
    with tuned_strict_fp32():  # TF32 off, cudnn.benchmark on
        with torch.no_grad():
            for label, c, hw, k in layers:
                x = torch.randn(32, c, hw, hw, device="cuda")
                w = torch.randn(k, c, 3, 3, device="cuda") / (9 * c) ** 0.5
                gamma, beta = torch.rand(k, device="cuda") + 0.5, torch.randn(k, device="cuda")
                mean, var = 0.1 * torch.randn(k, device="cuda"), torch.rand(k, device="cuda") + 0.5
                calls = (
                    lambda _: F.conv2d(x, w, None, 1, 1),
                    lambda _: F.relu(F.batch_norm(F.conv2d(x, w, None, 1, 1), mean, var, gamma, beta,
                                                  False, 0.0, 1e-5)),
                    lambda _: ex08.conv_bn_relu_inference(x, w, None, gamma, beta, mean, var, 1e-5, 1, 1),
                )
                rows.append([label] + [time_fn(f, [None], flush=flush, max_seconds=1.0).median_s * 1e6
                                       for f in calls])
    names = ["cuDNN conv alone", "eager conv + BN + ReLU", "your fused kernel"]
    print(f"{'layer':<18}" + "".join(f"{n:>26}" for n in names) + "   (µs)")
    for label, *t in rows:
        print(f"{label:<18}" + "".join(f"{v:>26.1f}" for v in t))
    fig, ax = plt.subplots(figsize=(8, 4))
    width = 0.27
    for i, name in enumerate(names):
        ax.bar([j + (i - 1) * width for j in range(len(rows))], [r[1 + i] for r in rows], width, label=name)
    ax.set_xticks(range(len(rows)), [r[0] for r in rows])
    ax.set_ylabel("µs per call (median)")
    ax.set_title(f"Conv + BatchNorm + ReLU, eval, batch 32, fp32, on {torch.cuda.get_device_name()}")
    ax.legend()
    plt.show()

# %% [markdown] id="train-stats"
# ## 4. Training: batch statistics and the running statistics
#
# In training, BatchNorm normalises each channel with the **statistics of the current batch**. For
# channel $k$ with its $M = N \cdot P \cdot Q$ values $z_i$:
#
# $$\mu = \frac1M \sum_i z_i,\qquad \sigma^2 = \frac1M \sum_i (z_i - \mu)^2,\qquad
# r = \frac{1}{\sqrt{\sigma^2 + \varepsilon}},\qquad \hat z_i = (z_i - \mu)\, r,\qquad
# y_i = \max(\gamma \hat z_i + \beta,\ 0).$$
#
# This breaks the single-kernel design: no output can be normalised before the whole batch has been
# convolved. Exercise 09's forward therefore takes three kernels: the convolution writes `z` and
# per-tile statistics, a small kernel merges those into each channel's $\mu$ and $r$ (and updates the
# running statistics), and an elementwise kernel writes $y$.
#
# **Computing the variance stably.** The textbook shortcut $\sigma^2 = \overline{z^2} - \bar z^2$
# subtracts two large, nearly equal numbers when $|\mu| \gg \sigma$, and float32 keeps only about 7
# digits: the result can be garbage, even negative. The fused kernel never forms $\overline{z^2}$. Its
# epilogue holds a 64-channel x 128-pixel tile in registers, so per channel it computes the tile's mean
# and then $M_2 = \sum (z - \bar z_{\text{tile}})^2$, exactly (two passes over registers cost nothing).
# The finalize kernel merges the tiles' $(n, \text{mean}, M_2)$ with Chan's formula, in double:
#
# $$\delta = \bar z_b - \bar z_a,\quad n = n_a + n_b,\quad \bar z = \bar z_a + \delta\,\frac{n_b}{n},\quad
# M_2 = M_{2,a} + M_{2,b} + \delta^2 \frac{n_a n_b}{n}.$$
#
# The cell below shows the difference on float32 data with mean 1000 and standard deviation 0.01.

# %% id="cancellation"
# float32 values with a large mean and a small spread: the one-pass shortcut loses everything.
g = torch.Generator().manual_seed(0)
z = (1000 + 0.01 * torch.randn(32 * 56 * 56, generator=g, dtype=torch.float64)).float()
exact = z.double().var(correction=0).item()
naive = ((z * z).mean() - z.mean() ** 2).item()
two_pass = ((z - z.mean()) ** 2).mean().item()

# per-tile (count, mean, M2) of 128 values each, merged with Chan's formula in double
n, mean, m2 = 0.0, 0.0, 0.0
for tile in z.split(128):
    nb_, mb, m2b = tile.numel(), tile.mean().item(), ((tile - tile.mean()) ** 2).sum().item()
    delta, total = mb - mean, n + nb_
    mean, m2, n = mean + delta * nb_ / total, m2 + m2b + delta * delta * n * nb_ / total, total
print(f"exact (float64)          {exact:.6e}")
print(f"E[z^2] - E[z]^2, float32 {naive:.6e}")
print(f"two passes, float32      {two_pass:.6e}")
print(f"tiles merged (Chan)      {m2 / n:.6e}")


# %% [markdown] id="running-stats"
# **The running statistics.** Each training forward also updates two buffers that eval mode will use,
# exactly as `nn.BatchNorm2d` does:
#
# - `num_batches_tracked += 1`;
# - the factor $f$ is `momentum` (default 0.1), or, when `momentum=None`, $1 / \text{num\_batches\_tracked}$
#   (counted after the increment): a cumulative average of all batches seen, each with equal weight;
# - `running_mean` $\leftarrow (1 - f)\cdot$ `running_mean` $+ f \cdot \mu$;
# - `running_var` $\leftarrow (1 - f)\cdot$ `running_var` $+ f \cdot \sigma^2 \frac{M}{M - 1}$.
#
# Mind the last factor: the batch is normalised with the **biased** variance (divided by $M$), but the
# running estimate stores the **unbiased** one (divided by $M - 1$), an estimate of the population's
# variance. The difference is small for large $M$ and decisive for small ones; the grader checks it.
# (PyTorch's name "momentum" is the weight of the *new* value, the opposite of an optimiser's momentum.)
# In the fused op all of this happens in the finalize kernel on the GPU: it reads
# `num_batches_tracked` there, so the host never waits for the device.
#
# **Warm-up (1 point, runs on a CPU).** Write the update in PyTorch, in place, for one batch `z`
# of shape `[N, K, H, W]`. `num_batches_tracked` is a 0-d int64 tensor.

# %% nbgrader={"grade": false, "grade_id": "running-stats-answer", "locked": false, "schema_version": 3, "solution": true}
def update_running_stats(running_mean, running_var, num_batches_tracked, z, momentum):
    # Update the three buffers in place, as one training forward of nn.BatchNorm2d on z does.
    ### BEGIN SOLUTION
    num_batches_tracked.add_(1)
    f = 1.0 / num_batches_tracked.item() if momentum is None else momentum
    mean = z.mean(dim=(0, 2, 3))
    var = z.var(dim=(0, 2, 3), correction=1)  # unbiased: divided by M - 1
    running_mean.mul_(1 - f).add_(mean, alpha=f)
    running_var.mul_(1 - f).add_(var, alpha=f)
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "running-stats-test", "locked": true, "schema_version": 3, "solution": false, "points": 1} editable=false deletable=false
def check_running_stats(momentum, shape=(4, 6, 5, 3), steps=4):
    g = torch.Generator().manual_seed(3)
    k = shape[1]
    bn = torch.nn.BatchNorm2d(k, momentum=momentum).double().train()
    with torch.no_grad():
        bn.running_mean.uniform_(-0.5, 0.5, generator=g)
        bn.running_var.uniform_(0.5, 2.0, generator=g)
    mean, var = bn.running_mean.clone(), bn.running_var.clone()
    count = torch.zeros((), dtype=torch.long)
    for step in range(steps):
        z = torch.randn(shape, generator=g, dtype=torch.float64) * (1 + step) + step
        with torch.no_grad():
            bn(z)
        update_running_stats(mean, var, count, z, momentum)
        where = f"momentum={momentum}, shape {shape}, after step {step + 1}"
        assert int(count) == int(bn.num_batches_tracked), f"{where}: num_batches_tracked is {int(count)}"
        assert torch.allclose(mean, bn.running_mean, rtol=1e-12, atol=1e-12), f"{where}: running_mean"
        assert torch.allclose(var, bn.running_var, rtol=1e-12, atol=1e-12), f"{where}: running_var"


check_running_stats(0.1)
print("ok: the buffers follow nn.BatchNorm2d's")
### BEGIN HIDDEN TESTS
check_running_stats(0.3)
check_running_stats(None, steps=5)
check_running_stats(None, shape=(1, 3, 2, 1))  # M = 2: the unbiased factor doubles the variance
check_running_stats(1.0, shape=(2, 2, 1, 2))
### END HIDDEN TESTS

# %% [markdown] id="backward-derivation"
# ## 5. The backward of BatchNorm + ReLU, step by step
#
# The forward of section 4 for one channel, with $M$ values. Given $\partial L/\partial y_i$ (`dy`), we
# want $\partial L/\partial z_i$ (which then flows into the convolution), $\partial L/\partial\gamma$ and
# $\partial L/\partial\beta$.
#
# **Step 1: the ReLU.** $y_i = \max(t_i, 0)$ with $t_i = \gamma\hat z_i + \beta$, so
# $g_i := \partial L/\partial t_i = dy_i \cdot [y_i > 0]$. The mask comes from the forward's output:
# $y_i > 0$ exactly when $t_i > 0$. (Never from the gradient's sign.)
#
# **Step 2: the affine part.** $t_i$ depends on $\gamma$ and $\beta$ directly:
#
# $$\frac{\partial L}{\partial\beta} = \sum_i g_i =: d\beta,\qquad
# \frac{\partial L}{\partial\gamma} = \sum_i g_i\, \hat z_i =: d\gamma,\qquad
# \frac{\partial L}{\partial \hat z_i} = \gamma\, g_i .$$
#
# **Step 3: the normalisation.** This is the subtle part: in training, $\hat z_i = (z_i - \mu)\,r$ depends
# on every $z_j$ of the channel, through $\mu$ and through $r$.
#
# - $\partial\mu/\partial z_j = 1/M$.
# - $\partial\sigma^2/\partial z_j = \frac2M \sum_i (z_i - \mu)(\delta_{ij} - \frac1M) = \frac{2(z_j - \mu)}{M}$:
#   the term through $\mu$ vanishes because the deviations from the mean sum to zero.
# - $r = (\sigma^2 + \varepsilon)^{-1/2}$, so
#   $\partial r/\partial z_j = -\tfrac12 r^3 \cdot \frac{2(z_j - \mu)}{M} = -\frac{r^2 \hat z_j}{M}$.
# - By the product rule,
#   $\dfrac{\partial\hat z_i}{\partial z_j} = r\left(\delta_{ij} - \frac1M\right) + (z_i - \mu)\,\frac{\partial r}{\partial z_j}
#   = r\left(\delta_{ij} - \frac1M - \frac{\hat z_i \hat z_j}{M}\right).$
#
# **Step 4: the chain rule.** Sum over every $i$ that $z_j$ influences:
#
# $$\frac{\partial L}{\partial z_j} = \sum_i \gamma g_i \cdot r\left(\delta_{ij} - \frac1M - \frac{\hat z_i\hat z_j}{M}\right)
# = \gamma r \left(g_j - \frac{d\beta}{M} - \hat z_j\,\frac{d\gamma}{M}\right).$$
#
# Two per-channel sums, $d\beta$ and $d\gamma$, then one elementwise pass. In **eval** mode $\mu$ and $r$
# are constants and the formula collapses to $\partial L/\partial z_j = \gamma r\, g_j$.
#
# **Step 5: the convolution's bias.** $z = \mathrm{conv}(x) + b$, so
# $\partial L/\partial b = \sum_j \partial L/\partial z_j = \gamma r\,(d\beta - d\beta - d\gamma \sum_j \hat z_j / M) = 0$
# in training, because $\sum_j \hat z_j = 0$. The batch mean subtracts any per-channel shift: a bias in
# front of train-mode BatchNorm does nothing, and its gradient is exactly zero (in eval mode it is
# $\gamma r\, d\beta$).
#
# **Step 6: the convolution.** With $dz = \partial L/\partial z$, the two remaining gradients are
# convolutions again: `grad_input` is the transposed convolution of $dz$ with the filters (unit 3's
# exercise 07: a reduction over $K \cdot R \cdot S$ for every input pixel), and `grad_weight` correlates
# $x$ with $dz$ (a reduction over $N \cdot P \cdot Q$ for each of the few filter values: long sums, so the
# kernel splits them across blocks and adds the partial tiles in a fixed order, which keeps the result
# deterministic). Exercise 09 gives you both as implicit GEMMs with their own loaders.
#
# **Warm-up (2 points, runs on a CPU).** Write steps 1 to 4 in PyTorch, for tensors of shape
# `[N, K, H, W]` and per-channel `[K]` tensors (`ch` broadcasts them). The test compares with autograd
# through `F.batch_norm` in float64, in training and in eval mode.

# %% nbgrader={"grade": false, "grade_id": "backward-answer", "locked": false, "schema_version": 3, "solution": true}
def ch(t):
    # A per-channel tensor [K], shaped to broadcast against [N, K, H, W].
    return t[None, :, None, None]


def bn_relu_backward(dy, y, z, gamma, mean, invstd, training):
    # (dz, dgamma, dbeta) for y = relu(gamma * (z - mean) * invstd + beta), per channel (dimension 1).
    # In training mean and invstd are the batch's own statistics of z; in eval they are constants.
    ### BEGIN SOLUTION
    dims = (0, 2, 3)
    g = torch.where(y > 0, dy, torch.zeros_like(dy))
    xhat = (z - ch(mean)) * ch(invstd)
    dbeta = g.sum(dims)
    dgamma = (g * xhat).sum(dims)
    if training:
        m = z.numel() // z.shape[1]
        dz = ch(gamma * invstd) * (g - ch(dbeta) / m - xhat * ch(dgamma) / m)
    else:
        dz = ch(gamma * invstd) * g
    return dz, dgamma, dbeta
    ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "backward-test", "locked": true, "schema_version": 3, "solution": false, "points": 2} editable=false deletable=false
def backward_case(training, seed, shape=(3, 5, 4, 6), eps=1e-5):
    # inputs for bn_relu_backward, and autograd's (dz, dgamma, dbeta) through F.batch_norm
    g = torch.Generator().manual_seed(seed)
    k = shape[1]
    z = (2 * torch.randn(shape, generator=g, dtype=torch.float64) + 0.5).requires_grad_()
    gamma = (torch.rand(k, generator=g, dtype=torch.float64) + 0.5).requires_grad_()
    beta = (0.3 * torch.randn(k, generator=g, dtype=torch.float64)).requires_grad_()
    running_mean = 0.2 * torch.randn(k, generator=g, dtype=torch.float64)
    running_var = torch.rand(k, generator=g, dtype=torch.float64) + 0.5
    dy = torch.randn(shape, generator=g, dtype=torch.float64)
    if training:
        y = F.relu(F.batch_norm(z, None, None, gamma, beta, True, 0.0, eps))
        mean = z.detach().mean((0, 2, 3))
        invstd = 1 / torch.sqrt(z.detach().var((0, 2, 3), correction=0) + eps)
    else:
        y = F.relu(F.batch_norm(z, running_mean, running_var, gamma, beta, False, 0.0, eps))
        mean, invstd = running_mean, 1 / torch.sqrt(running_var + eps)
    expected = torch.autograd.grad(y, (z, gamma, beta), dy)
    return (dy, y.detach(), z.detach(), gamma.detach(), mean, invstd, training), expected


def check_backward(training, seed, **kw):
    args, expected = backward_case(training, seed, **kw)
    got = bn_relu_backward(*args)
    mode = "train" if training else "eval"
    for name, a, e in zip(("dz", "dgamma", "dbeta"), got, expected):
        assert a.shape == e.shape, f"{mode}: {name} has shape {tuple(a.shape)}, expected {tuple(e.shape)}"
        assert torch.allclose(a, e, rtol=1e-9, atol=1e-12), \
            f"{mode}: {name} differs from autograd's by up to {(a - e).abs().max().item():.3g}"
    return got


check_backward(True, 1)
check_backward(False, 2)
print("ok: dz, dgamma and dbeta match autograd in training and in eval")
### BEGIN HIDDEN TESTS
check_backward(True, 9, shape=(1, 4, 1, 3))  # M = 3
check_backward(True, 10, shape=(5, 2, 1, 1), eps=0.1)
for seed in range(3, 6):
    dz, _, _ = check_backward(True, seed, shape=(2, 3, 5, 7))
    assert dz.sum((0, 2, 3)).abs().max() < 1e-10  # the conv bias gets no gradient in training
    check_backward(False, seed, shape=(2, 3, 5, 7))
### END HIDDEN TESTS

# %% [markdown] id="saved"
# ## 6. What the fused backward costs: the saved tensors
#
# The forward could be fused far because each output needed only its own accumulator (plus per-channel
# constants). The backward cannot be fused that far: $dz$ needs the whole-channel sums $d\beta$ and
# $d\gamma$ before its first element exists, and both convolution gradients need all of $dz$. So the
# fused backward is a reduction pass over `(dy, y, z)`, an elementwise pass that writes $dz$ (scaled:
# the kernels store $u = dz / (\gamma r)$ and apply the per-channel factor $\gamma r$ inside the two
# convolution kernels, where it is one multiply per output, or folded into the filter values as they
# are loaded), and the two convolution gradients.
#
# What must the forward keep for that? `x` (for `grad_weight`), `z` (to recompute $\hat z$ without
# another convolution), `y` (for the ReLU mask; a 1-bit mask would do, but autograd keeps the output
# anyway), and per channel $\gamma$, $\mu$ and $r$. That is the same set of activations eager PyTorch
# keeps, as the cell below shows by listing what autograd saves for the eager layer (on a CPU). The
# alternatives trade memory for time: saving only `x` and recomputing `z` in the backward saves one
# activation at the price of a second forward convolution; storing the mask as bits saves most of another.

# %% id="saved-tensors"
# What autograd keeps for backward in eager Conv2d -> BatchNorm2d -> ReLU, in training (CPU, small).
layer = torch.nn.Sequential(torch.nn.Conv2d(8, 16, 3, padding=1, bias=False), torch.nn.BatchNorm2d(16),
                            torch.nn.ReLU()).double().train()
x = torch.randn(4, 8, 10, 10, dtype=torch.float64, requires_grad=True)
saved = {}


def keep(t):
    saved.setdefault(t.data_ptr(), (tuple(t.shape), t.numel() * t.element_size()))
    return t


with torch.autograd.graph.saved_tensors_hooks(keep, lambda t: t):
    y = layer(x)
activation = y.numel() * y.element_size()
for shape, nbytes in saved.values():
    print(f"saved {str(shape):<18} {nbytes / activation:5.2f} activations")
print(f"total: {sum(b for _, b in saved.values()) / activation:.2f} activations (x, the conv output, "
      "the ReLU output, and small per-channel tensors)")

# %% [markdown] id="ex09-intro"
# ## 7. Exercise 09: the fused training forward
#
# The convolution kernel is exercise 08's with a second epilogue. The input loader and the input
# checks are **the same code as in exercise 08**: copy your two cells.

# %% nbgrader={"grade": false, "grade_id": "ex09-im2col-load", "locked": false, "schema_version": 3, "solution": true}
# %%solution 09_conv_bn_relu_training/conv_bn_relu_training.cu gemm_tile

# %% nbgrader={"grade": false, "grade_id": "ex09-conv-shape", "locked": false, "schema_version": 3, "solution": true}
# %%solution 09_conv_bn_relu_training/conv_bn_relu_training.cpp conv_shape

# %% [markdown] id="ex09-stats"
# **The tile's statistics.** In training, the epilogue adds the bias, stores `z`, and then computes, for
# each channel of the tile, the mean of its valid pixels and $M_2$, the sum of squared deviations from
# that mean. Row `i` of a thread's outputs is shared by the 16 threads with the same `threadIdx.x / 16`,
# which are 16 consecutive lanes of one warp: `__shfl_xor_sync` with offsets 8, 4, 2, 1 sums across them
# without shared memory (every lane ends up with the total). Two reductions: first the sum (then divide
# by `nvalid`, the pixels of this tile that exist), then the squared deviations. Columns past the end
# (`valid[j]` false) must not count. One lane per valid row writes the results.
#
# @@context 09_conv_bn_relu_training/conv_bn_relu_training.cu conv_bn_relu_forward_kernel from "  const bool vec_ok = PQ % 4 == 0 && course::is_aligned_for<course::Vec<T, 4>>(z, y);"@@

# %% nbgrader={"grade": false, "grade_id": "ex09-tile-stats", "locked": false, "schema_version": 3, "solution": true}
# %%solution 09_conv_bn_relu_training/conv_bn_relu_training.cu conv_bn_relu_forward_kernel

# %% [markdown] id="ex09-finalize-intro"
# **The finalize kernel.** One block; 32 channels at a time, its warps sum the per-tile statistics
# (given): the channel's mean from the tiles' means weighted by their counts, then `m2` as the tiles'
# `m2` plus their counts times the squared distance of their mean from the channel's (Chan et al.'s
# merge). Lane `l` of warp 0 then holds channel `c = c0 + l`'s count `n`, mean and `m2`, and writes
# everything downstream needs: `save_mean` and
# `save_invstd` (for the backward), the channel's `scale` and `shift` (for the apply kernel:
# $y = \max(\text{scale}\cdot z + \text{shift}, 0)$ with $\text{scale} = \gamma r$,
# $\text{shift} = \beta - \mu\,\gamma r$), and the running statistics of section 4. `factor` is already
# computed from the momentum (or from `num_batches_tracked` when the momentum is `None`, passed as a
# negative value); thread 0 increments the counter after the loop.
#
# @@context 09_conv_bn_relu_training/conv_bn_relu_training.cu bn_stats_finalize_kernel@@

# %% nbgrader={"grade": false, "grade_id": "ex09-finalize", "locked": false, "schema_version": 3, "solution": true}
# %%solution 09_conv_bn_relu_training/conv_bn_relu_training.cu bn_stats_finalize_kernel

# %% [markdown] id="ex09-forward-launch-intro"
# **The training forward's launches.** Three kernels on one stream, each checked: the convolution with
# `training = true` (`launch_forward`, given, launches the version's kernel and checks it; it writes `z`
# and the per-tile statistics into the two halves of `part`), the
# finalize kernel (one block of 1024 threads; `scale_shift` holds the scales, then the shifts), and the
# apply kernel (one block of 256 threads per `(image, channel)` plane). The stream orders them: no
# synchronisation is needed between them, and none with the host.
#
# @@context 09_conv_bn_relu_training/conv_bn_relu_training.cu conv_bn_relu_train_forward_cuda@@

# %% nbgrader={"grade": false, "grade_id": "ex09-forward-launch", "locked": false, "schema_version": 3, "solution": true}
# %%solution 09_conv_bn_relu_training/conv_bn_relu_training.cu conv_bn_relu_train_forward_cuda

# %% [markdown] id="ex09-mask"
# ## 8. Exercise 09: the fused backward
#
# Section 5's formulas, split across kernels. First the ReLU's mask, used by both backward kernels:
#
# @@context 09_conv_bn_relu_training/conv_bn_relu_training.cu relu_masked_grad@@

# %% nbgrader={"grade": false, "grade_id": "ex09-relu-mask", "locked": false, "schema_version": 3, "solution": true}
# %%solution 09_conv_bn_relu_training/conv_bn_relu_training.cu relu_masked_grad

# %% [markdown] id="ex09-backward-kernel-intro"
# `bn_relu_backward_reduce_kernel` (given) sums $g$ and $g\,(z - \mu)$ per channel, in partial sums per
# block. `bn_relu_backward_kernel` merges them into $d\beta$ and $d\gamma$ (note $d\gamma = r \sum g (z - \mu)$),
# writes the three per-channel gradients, and then, your part, the elementwise pass: for each pixel of
# its `(image, channel)` plane it writes $u = dz / (\gamma r)$, that is
# $u = g - d\beta / M - \hat z\, d\gamma / M$ in training (`count` is $M$) and $u = g$ in eval.
#
# @@context 09_conv_bn_relu_training/conv_bn_relu_training.cu bn_relu_backward_kernel@@

# %% nbgrader={"grade": false, "grade_id": "ex09-backward-kernel", "locked": false, "schema_version": 3, "solution": true}
# %%solution 09_conv_bn_relu_training/conv_bn_relu_training.cu bn_relu_backward_kernel

# %% [markdown] id="ex09-backward-launch-intro"
# **The backward's launches.** Five kernels, in dependency order, each checked: the reduction (grid
# `(K, splits)`), the elementwise pass (one block per plane), `grad_input` (`launch_dgrad`, given, launches
# the version's kernel; its unit-stride instance skips the divisibility tests when both strides are 1),
# `grad_weight` (`launch_wgrad`, likewise) split along
# its long reduction as `wgrad_plan` says (partial tiles into `scratch`, after the reduction's partial
# sums, when there is more than one split), and the kernel that adds those partial tiles.
#
# @@context 09_conv_bn_relu_training/conv_bn_relu_training.cu conv_bn_relu_backward_cuda@@

# %% nbgrader={"grade": false, "grade_id": "ex09-backward-launch", "locked": false, "schema_version": 3, "solution": true}
# %%solution 09_conv_bn_relu_training/conv_bn_relu_training.cu conv_bn_relu_backward_cuda

# %% [markdown] id="ex09-tf32-intro"
# **Version 2: the three convolutions on TF32 tensor cores**, as PyTorch runs them while
# `torch.backends.cudnn.allow_tf32` is True (`conv_bn_relu` without a `version` follows that flag, forward
# and backward alike). The forward kernel takes exercise 08's version-2 engine (given); its training
# epilogue writes `z` and each tile's statistics from the accumulator fragments. A lane holds 4
# neighbouring pixels of 8 channels; the other lanes holding the same channels are the 8 with the same
# `lane % 4` (every `g = lane / 4`). Sum across them with shuffles, as the version-1 epilogue did across its
# 16 lanes:
#
# @@context 09_conv_bn_relu_training/conv_bn_relu_training.cu warp_channel_sum@@

# %% nbgrader={"grade": false, "grade_id": "ex09-warp-channel-sum", "locked": false, "schema_version": 3, "solution": true}
# %%solution 09_conv_bn_relu_training/conv_bn_relu_training.cu warp_channel_sum

# %% [markdown] id="ex09-tf32-backward"
# The backward's two GEMMs keep version 1's loaders and shared slices (`gemm_tile`) and replace the FMAs by
# one m16n8k8 step per slice of 8 k: each warp owns 32 rows x 64 columns of the block's tile, as 2 x 8 mma
# tiles. Read the A and B fragments straight from version 1's layout (`sm.a[buf][k][row]`,
# `sm.b[buf][k][col]`), rounded to TF32, with the fragment layout of `course/cuda.cuh`'s `mma_tf32`.
#
# @@context 09_conv_bn_relu_training/conv_bn_relu_training.cu gemm_tile_tf32 from "template <class LoadA, class LoadB>"@@

# %% nbgrader={"grade": false, "grade_id": "ex09-gemm-tile-tf32", "locked": false, "schema_version": 3, "solution": true}
# %%solution 09_conv_bn_relu_training/conv_bn_relu_training.cu gemm_tile_tf32

# %% [markdown] id="autograd-function"
# ## 9. Into autograd: `torch.autograd.Function`, then an `nn.Module`
#
# The C++ ops are plain functions: `conv_bn_relu_forward(...) -> (y, z, save_mean, save_invstd)` and
# `conv_bn_relu_backward(grad_y, x, weight, z, y, bn_weight, save_mean, save_invstd, ...) -> five gradients`.
# A `torch.autograd.Function` connects them:
#
# - `forward(ctx, *inputs)` runs the forward op and keeps what the backward needs. Tensors go through
#   `ctx.save_for_backward(...)`, which lets autograd detect if one of them is modified in place before
#   the backward runs, and frees them with the graph; other settings (stride, training, whether there
#   was a bias) can be plain attributes of `ctx`.
# - `ctx.needs_input_grad` says which inputs require a gradient. When none of the five differentiable
#   ones does (a model whose parameters are frozen, on an input that needs no gradient), there will be
#   no backward, and in eval mode the forward then need not write `z` at all (`keep_z`; in training
#   the apply kernel reads `z`, so it is always written).
# - `backward(ctx, grad_y)` returns **one value per input of forward**, in order: a gradient for each
#   differentiable tensor, `None` for the rest (the running statistics, the counter, the settings), and
#   `None` for `bias` when there was none.
#
# The running statistics are updated inside the forward op. Its schema says so
# (`Tensor(a!) running_mean` marks an argument the op mutates), which keeps `torch.compile` and
# `torch.library.opcheck` honest about it.
#
# @@context 09_conv_bn_relu_training/conv_bn_relu_training.py forward@@

# %% nbgrader={"grade": false, "grade_id": "ex09-function-forward", "locked": false, "schema_version": 3, "solution": true}
# %%solution 09_conv_bn_relu_training/conv_bn_relu_training.py forward

# %% [markdown] id="autograd-backward"
# @@context 09_conv_bn_relu_training/conv_bn_relu_training.py backward@@

# %% nbgrader={"grade": false, "grade_id": "ex09-function-backward", "locked": false, "schema_version": 3, "solution": true}
# %%solution 09_conv_bn_relu_training/conv_bn_relu_training.py backward

# %% [markdown] id="module"
# **The module.** `FusedConvBNReLU` (given) is a drop-in for `nn.Sequential(Conv2d, BatchNorm2d, ReLU)`.
# It owns a real `nn.Conv2d` and a real `nn.BatchNorm2d` as submodules and never calls their forwards:
# that way the parameters and buffers get those modules' names, shapes and initialisation, the
# `state_dict` keys are the familiar `conv.weight`, `bn.running_mean`, ..., `train()` and `eval()`
# switch the mode, and an optimiser sees the same parameters. Loading a trained `Sequential` is a
# renaming of keys (`0.` → `conv.`, `1.` → `bn.`):

# %% nbgrader={"grade": false, "grade_id": "show-module", "locked": true, "schema_version": 3, "solution": false} editable=false deletable=false
source = (course.skeleton("09_conv_bn_relu_training") / "conv_bn_relu_training.py").read_text()
print(source[source.index("class FusedConvBNReLU"):source.index("    @classmethod\n    def from_modules")])

# %% [markdown] id="ex09-build-intro"
# ### Build and try
#
# One training step of a `FusedConvBNReLU` made from an eager `Sequential`, against that `Sequential`:
# the outputs, the running statistics and the gradients should agree to float32 rounding.

# %% nbgrader={"grade": false, "grade_id": "ex09-build", "locked": true, "schema_version": 3, "solution": false} editable=false deletable=false
reason = nb.heavy_skip_reason()
if reason:
    print(f"build: {reason}")
else:
    from grader.timer import math_mode

    ex09 = course.build("09_conv_bn_relu_training")
    torch.manual_seed(0)
    eager = torch.nn.Sequential(torch.nn.Conv2d(8, 24, 3, padding=1), torch.nn.BatchNorm2d(24),
                                torch.nn.ReLU()).cuda().train()
    fused = ex09.FusedConvBNReLU.from_sequential(eager)
    x = torch.randn(6, 8, 21, 19, device="cuda")
    gy = torch.randn(6, 24, 21, 19, device="cuda")
    with math_mode():
        y_eager, y_fused = eager(x), fused(x)
        y_eager.backward(gy)
        y_fused.backward(gy)


    def rel(a, b):
        return ((a - b).norm() / b.norm()).item()


    print(f"output:        {rel(y_fused, y_eager):.1e} (relative difference)")
    print(f"running_var:   {rel(fused.bn.running_var, eager[1].running_var):.1e}")
    for name in ("conv.weight", "bn.weight", "bn.bias"):
        mine = dict(fused.named_parameters())[name].grad
        theirs = dict(eager.named_parameters())[name.replace("conv.", "0.").replace("bn.", "1.")].grad
        print(f"{name + ' grad:':<15}{rel(mine, theirs):.1e}")
    print("conv.bias grad: largest magnitude", f"{fused.conv.bias.grad.abs().max().item():.1e}",
          "(zero in training: the batch mean cancels it)")

# %% [markdown] id="ex09-graded-intro"
# ### Graded checks for exercise 09
#
# The references are eager `Conv2d` + `BatchNorm2d` + `ReLU` in float64 on the same inputs; outputs and
# running statistics must agree to 2e-5 and the gradients to 1e-4 (normwise), in strict fp32 (version 1;
# version 2 against bounds derived from TF32's precision, the README's How it is graded). Where the
# float64 pre-activation is within 1e-3 of the ReLU's kink, the incoming gradient is set to 0, so rounding
# on either side of the kink cannot decide a check. The `own kernels ran` checks use the profiler: the
# work must be done by this exercise's kernels, not by PyTorch's.

# %% nbgrader={"grade": true, "grade_id": "ex09-forward", "locked": true, "schema_version": 3, "solution": false, "points": 3} editable=false deletable=false
# 09_conv_bn_relu_training forward: the grader's own checks. Shown here: a few cases; at grading, every forward check.
course.check("forward", "09_conv_bn_relu_training", only=[
    "forward[train-odd-dilated-bias]",
    "forward[train-1x1-bias]",
    "forward[eval-odd-dilated-bias]",
    "forward[own kernels ran]",
])
### BEGIN HIDDEN TESTS
course.check("forward", "09_conv_bn_relu_training")
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "ex09-running-stats", "locked": true, "schema_version": 3, "solution": false, "points": 2} editable=false deletable=false
# 09_conv_bn_relu_training running_stats: the grader's own checks. Shown here: a few cases; at grading, every running_stats check.
course.check("running_stats", "09_conv_bn_relu_training", only=[
    "running_stats[momentum=0.1]",
    "running_stats[momentum=None]",
])
### BEGIN HIDDEN TESTS
course.check("running_stats", "09_conv_bn_relu_training")
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "ex09-backward", "locked": true, "schema_version": 3, "solution": false, "points": 4} editable=false deletable=false
# 09_conv_bn_relu_training backward: the grader's own checks. Shown here: a few cases; at grading, every backward check.
course.check("backward", "09_conv_bn_relu_training", only=[
    "backward[train-odd-dilated-bias]",
    "backward[train-1x1-bias]",
    "backward[eval-odd-dilated-bias]",
    "backward[own kernels ran]",
])
### BEGIN HIDDEN TESTS
course.check("backward", "09_conv_bn_relu_training")
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "ex09-autograd", "locked": true, "schema_version": 3, "solution": false, "points": 2} editable=false deletable=false
# 09_conv_bn_relu_training autograd: the grader's own checks. Shown here: a few cases; at grading, every autograd check.
course.check("autograd", "09_conv_bn_relu_training", only=[
    "autograd[gradcheck float64 train small]",
    "autograd[gradcheck float64 eval small]",
])
### BEGIN HIDDEN TESTS
course.check("autograd", "09_conv_bn_relu_training")
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "ex09-module", "locked": true, "schema_version": 3, "solution": false, "points": 2} editable=false deletable=false
# 09_conv_bn_relu_training module: the grader's own checks. Shown here: a few cases; at grading, every module check.
course.check("module", "09_conv_bn_relu_training", only=[
    "module[state_dict, train/eval]",
])
### BEGIN HIDDEN TESTS
course.check("module", "09_conv_bn_relu_training")
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "ex09-tensor-cores", "locked": true, "schema_version": 3, "solution": false, "points": 2} editable=false deletable=false
# 09_conv_bn_relu_training tensor_cores_tf32: the grader's own checks. Shown here: a few cases; at grading, every tensor_cores_tf32 check.
course.check("tensor_cores_tf32", "09_conv_bn_relu_training", only=[
    "tensor_cores_tf32[forward train-odd-dilated-bias]",
    "tensor_cores_tf32[backward train-odd-dilated-bias]",
    "tensor_cores_tf32[values near 100000]",
    "tensor_cores_tf32[own kernels ran]",
])
### BEGIN HIDDEN TESTS
course.check("tensor_cores_tf32", "09_conv_bn_relu_training")
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "ex09-input-checks", "locked": true, "schema_version": 3, "solution": false, "points": 1} editable=false deletable=false
# 09_conv_bn_relu_training input_checks: the grader's own checks. Shown here: a few cases; at grading, every input_checks check.
course.check("input_checks", "09_conv_bn_relu_training", only=[
    "input_checks[cpu x]",
    "input_checks[stride 0]",
    "input_checks[one value per channel in training]",
])
### BEGIN HIDDEN TESTS
course.check("input_checks", "09_conv_bn_relu_training")
### END HIDDEN TESTS

# %% [markdown] id="ex09-speed"
# **Speed.** One training step (forward and the four gradients) of the benchmark layer, 32x64x56x56,
# 64 → 64 channels, 3x3, padding 1, strict fp32, against the reference solution in the same run: half of
# its speed earns 1.5 points, 0.85 of it earns 3. It needs the forward and backward checks to pass first.

# %% nbgrader={"grade": true, "grade_id": "ex09-performance", "locked": true, "schema_version": 3, "solution": false, "points": 3} editable=false deletable=false
# performance: the points earned are this cell's result (nbgrader's partial credit)
course.performance("09_conv_bn_relu_training")

# %% [markdown] id="ex09-plot-intro"
# Time and peak memory of that training step, yours against eager PyTorch (cuDNN, `cudnn.benchmark` on).
# Peak memory counts what the step allocates beyond its inputs: the saved activations of section 6 and
# the backward's temporaries.

# %% id="ex09-plot"
reason = nb.heavy_skip_reason()
if reason:
    print(f"training-step plot: {reason}")
else:
    import matplotlib.pyplot as plt

    from grader.benchmark_extras import peak_mib
    from grader.timer import L2Flusher, time_fn, tuned_strict_fp32

    ex09 = course.build("09_conv_bn_relu_training")
    n, c, hw, k = 32, 64, 56, 64
    x = torch.randn(n, c, hw, hw, device="cuda", requires_grad=True)
    w = (torch.randn(k, c, 3, 3, device="cuda") / (9 * c) ** 0.5).requires_grad_()
    gamma = torch.ones(k, device="cuda", requires_grad=True)
    beta = torch.zeros(k, device="cuda", requires_grad=True)
    gy = torch.randn(n, k, hw, hw, device="cuda")
    rm, rv = torch.zeros(k, device="cuda"), torch.ones(k, device="cuda")
    count = torch.zeros((), dtype=torch.long, device="cuda")


    def fused_step(_):
        y = ex09.conv_bn_relu(x, w, None, gamma, beta, rm, rv, count, training=True, padding=1)
        return torch.autograd.grad(y, (x, w, gamma, beta), gy)


    def eager_step(_):
        y = F.relu(F.batch_norm(F.conv2d(x, w, None, 1, 1), rm, rv, gamma, beta, True, 0.1, 1e-5))
        return torch.autograd.grad(y, (x, w, gamma, beta), gy)


    with tuned_strict_fp32():  # TF32 off, cudnn.benchmark on
        flush = L2Flusher()
        steps = {"yours (fused)": fused_step, "eager PyTorch": eager_step}
        micros = {name: time_fn(f, [None], flush=flush, max_seconds=2.0).median_s * 1e6
                  for name, f in steps.items()}
        peaks = {name: peak_mib(f) for name, f in steps.items()}
    activation = n * k * hw * hw * 4 / 2**20
    for name in steps:
        print(f"{name:<15} {micros[name]:8.0f} µs   peak {peaks[name]:7.0f} MiB "
              f"({peaks[name] / activation:.1f} activations of {activation:.1f} MiB)")
    fig, (left, right) = plt.subplots(1, 2, figsize=(9, 3.5))
    left.bar(list(steps), [micros[s] for s in steps], color=["tab:orange", "tab:blue"])
    left.set_ylabel("µs per training step (median)")
    right.bar(list(steps), [peaks[s] for s in steps], color=["tab:orange", "tab:blue"])
    right.set_ylabel("peak MiB beyond the inputs")
    fig.suptitle(f"Conv + BN + ReLU training step, 32x64x56x56, fp32, on {torch.cuda.get_device_name()}")
    fig.tight_layout()
    plt.show()

# %% [markdown] id="next"
# ## What next
#
# Unit 5 leaves the arithmetic to cuDNN and looks at everything around a library call instead:
# descriptors, algorithm choice, workspaces, and why a cache of plans decides whether a small
# convolution costs 40 µs or 400 µs of host time (`exercises/10_cudnn_conv/`, `make grade EX=10`).
