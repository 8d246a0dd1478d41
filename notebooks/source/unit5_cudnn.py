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
# # Unit 5 · cuDNN: descriptors, algorithm choice, workspaces, and a cache of plans
#
# Units 3 and 4 wrote convolutions by hand. This unit calls NVIDIA's cuDNN instead, the library behind
# `F.conv2d`, and the arithmetic is no longer your problem: cuDNN's kernels are as fast as that GPU gets.
# What is left is everything **around** the call, and it decides whether a small convolution costs 40 µs
# or 400 µs:
#
# 1. **descriptors**: cuDNN does not take tensors, it takes descriptions of them (shape, type, layout)
#    and of the convolution (padding, stride, dilation, arithmetic);
# 2. **algorithm choice**: for one convolution cuDNN offers a dozen algorithms (implicit GEMM, FFT,
#    Winograd, ...); you pick one by timing them all (what `torch.backends.cudnn.benchmark = True` does)
#    or by asking cuDNN's heuristic;
# 3. **workspaces**: many algorithms need scratch memory, which you must supply;
# 4. **caching**: descriptors and the algorithm search cost far more host time than queueing the
#    convolution, so a plan is built once per configuration and kept, in a thread-safe, bounded cache
#    whose key must hold every field that changes the plan.
#
# The op: `conv2d(x, weight, bias, stride, padding, dilation, groups, mode)` like `F.conv2d`, grouped and
# depthwise convolutions and an optional bias included, its gradients (cuDNN's backward-data, which is
# also the transposed convolution, backward-filter and backward-bias), and
# `mode="benchmark" | "heuristic" | "uncached"`.
#
# **What you write.** A small warm-up in Python (the cache's logic, on a CPU), then eight regions of
# `cudnn_conv.cu`: the descriptors, binding the handle to the stream, the algorithm choice, the call with
# its workspace, the bias, the key, and the cache's lookup and insertion. The binding, the Python wrapper
# with its autograd, and the plumbing between them are given.
#
# **How it is graded.** The graded cells run the same checks as `make grade EX=10`
# (`grader/specs/ex10_cudnn_conv.py`): here you see a few cases of each group; grading runs all of them.
#
# | part | points |
# |---|---:|
# | warm-up: a least-recently-used plan cache (runs on a CPU) | 1 |
# | descriptors (output shapes, cuDNN's errors) | 1 |
# | forward | 3 |
# | backward (data, filter, bias, transposed convolution, autograd) | 3 |
# | cache (hits, misses, every key field, eviction, uncached mode, the launch cache's graphs) | 2 |
# | threads | 1 |
# | streams (the handle, a replayed graph, inside your own graph capture) | 1 |
# | input checks | 1 |
# | performance (against the reference, in the same run) | 3 |
#
# **Where it runs.** Builds and checks need a CUDA GPU (and the cuDNN that comes with PyTorch's wheels;
# the exercise's `build.json` points the build at it). Without a GPU, or under `nbgrader validate`, those
# cells print why and skip; the warm-up runs anywhere.

# %% nbgrader={"grade": false, "grade_id": "setup", "locked": true, "schema_version": 3, "solution": false} editable=false deletable=false
# @@setup@@

# %% nbgrader={"grade": false, "grade_id": "show-helper", "locked": true, "schema_version": 3, "solution": false} editable=false deletable=false
def show(file, start, stop):
    # Print the given code of exercise 10's `file` from the line with `start` up to `stop`.
    text = (course.skeleton("10_cudnn_conv") / file).read_text()
    first = text.index(start)
    print(text[first:text.index(stop, first)].rstrip())


# %% [markdown] id="api"
# ## 1. Which API, and what one call costs
#
# cuDNN 9 has two APIs. The **graph API** (used by PyTorch through the header-only `cudnn_frontend`
# library) describes an operation as a graph and can fuse, say, a convolution with its bias and
# activation. The older **convolution API** (`cudnnConvolutionForward`, `cudnnFind...`, ...) is
# deprecated but still shipped, and has exactly one call per idea this unit teaches: a descriptor per
# tensor, one "find" and one "heuristic" query per operation, one call to run. It needs only the
# `cudnn.h` of PyTorch's cuDNN wheel, and its plans are small structs you can cache and reason about. So
# this exercise uses it. The price, measured on an H100: the legacy calls sit on top of the graph API
# and do more host work per call than PyTorch's cached execution plans, and their TF32 algorithms are
# slower there. In strict fp32 the reference reaches 1.06x and 0.87x of `F.conv2d`'s throughput on the
# two benchmark layers.
#
# A convolution through this API, done naively on every call:
#
# | step | work | cost |
# |---|---|---|
# | create and set 4 descriptors | host | µs each |
# | choose an algorithm: time every candidate (`Find`) or ask the heuristic (`Get`) | GPU (`Find`) or host | milliseconds, or tens of µs |
# | ask the chosen algorithm's workspace size, allocate it | host | µs |
# | queue the convolution | host | a few µs |
# | destroy the descriptors | host | µs |
#
# Only the fourth row must happen on every call. The rest depends only on the **configuration** (shapes,
# parameters, data type, math mode, device), so it is computed once, kept in a **plan**, and found again
# by a key. On the H100, for a tiny 1x16x7x7 input, that is the difference between 433 µs and 42 µs of
# host time per call; on a large ResNet layer, between 2944 µs and 345 µs, because the uncached path also
# settles for the heuristic's algorithm instead of the fastest one.

# %% [markdown] id="descriptors"
# ## 2. Descriptors
#
# cuDNN describes each operand separately from its memory:
#
# - a **tensor descriptor** for `x` and for `y`: layout (`CUDNN_TENSOR_NCHW`), data type
#   (`CUDNN_DATA_FLOAT` or `CUDNN_DATA_DOUBLE`) and the four sizes (`cudnnSetTensor4dDescriptor`);
# - a **filter descriptor** for `w`: data type, layout and `K, C, R, S` (`cudnnSetFilter4dDescriptor`:
#   note its argument order, data type before layout);
# - a **convolution descriptor**: padding, stride and dilation per dimension, the mode and the type the
#   arithmetic is done in (`cudnnSetConvolution2dDescriptor`), the group count
#   (`cudnnSetConvolutionGroupCount`) and the math type (`cudnnSetConvolutionMathType`). The mode is
#   `CUDNN_CROSS_CORRELATION`: what deep learning calls a convolution does not flip the filter, and
#   `CUDNN_CONVOLUTION` would.
#
# **Groups.** With `groups = g`, x's `C` channels and the output's `K` are split into `g` groups, and output
# group `i` sees input group `i` only: the filter is `K x (C / g) x R x S`, `g` times less arithmetic.
# `g = C` with `K = C` (or a multiple) is the **depthwise** convolution of MobileNet and ConvNeXt; ResNeXt
# uses 32 groups. cuDNN takes the filter as it is (`C / g` channels) and the group count on the
# convolution descriptor; without the count it sees a filter of `C / g` channels for an input of `C`, and
# refuses.
#
# From the three input descriptions cuDNN computes the output's shape
# (`cudnnGetConvolution2dForwardOutputDim`), from which `y`'s descriptor is set. cuDNN also validates
# here: a stride of 0 or a negative padding returns `CUDNN_STATUS_BAD_PARAM`. Every call goes through
# `CUDNN_CHECK`, which turns a failed status into a Python `RuntimeError` naming the call, the status and
# cuDNN's own explanation.
#
# **Math type.** Strict fp32 (`torch.backends.cudnn.allow_tf32 = False`) must stay on the FMA units:
# `CUDNN_FMA_MATH`. With TF32 allowed, the plan asks for Tensor Core math (`CUDNN_TENSOR_OP_MATH`);
# `math_type_for(a)` (given) decides. TF32 keeps 10 bits of mantissa: about 3 decimal digits, which the
# grader's strict tolerance (1e-4, which the Winograd and FFT algorithms strict fp32 may take stay well
# within, but for the non-fused Winograd of kernels past 3x3, which `strict_refuses`) tells apart from fp32.
#
# **Ownership.** A descriptor is created and must be destroyed exactly once. `Owned<...>` (in
# `cudnn_conv.h`) does that: created in its constructor, destroyed in its destructor, movable and never
# copied (a copy would destroy the same descriptor twice). A `Plan` holds five of them (the fifth
# describes the bias, section 5), so creating a `Plan` creates the descriptors, and they die with it:

# %% nbgrader={"grade": false, "grade_id": "show-owned", "locked": true, "schema_version": 3, "solution": false} editable=false deletable=false
show("cudnn_conv.h", "// RAII ownership of one cuDNN object", "// Descriptors only")

# %% [markdown] id="describe-intro"
# Your first region sets the four descriptors of a plan from the call's `Args` (shapes `a.x` and `a.w`,
# `a.stride`, `a.padding`, `a.dilation`, `a.groups`, `a.dtype`; the helper `as_int` narrows a size, which
# the binding has checked fits: cuDNN's descriptors hold int32 sizes, so the binding refuses any tensor
# of 2^31 elements or more, naming it). The bias's descriptor is set after your region (given). It needs
# no GPU and no handle, so `describe` can be tested anywhere.
#
# @@context 10_cudnn_conv/cudnn_conv.cu describe@@

# %% nbgrader={"grade": false, "grade_id": "describe", "locked": false, "schema_version": 3, "solution": true}
# %%solution 10_cudnn_conv/cudnn_conv.cu describe

# %% [markdown] id="handle-intro"
# ## 3. One handle per device, bound to the caller's stream
#
# A `cudnnHandle_t` holds cuDNN's state for one device, and creating one costs far more than a
# convolution (it loads cuDNN's kernels and allocates), so there is one per device for the whole process (`handle_for`, given), shared by every thread. A
# handle also remembers **one stream**, the one its work is queued on. PyTorch's caller may be on any
# stream (`with torch.cuda.stream(s): ...`), and another thread may have used the same handle a moment
# ago on another stream. So every call must, while holding the device's lock, make sure the handle is
# bound to the caller's current stream and queue its work; then release the lock. Queueing takes
# microseconds; the GPU runs the work later, after the lock is gone. Binding (`cudnnSetStream`) is
# host time too, and most calls come on the stream the last one used: `DeviceHandle::stream` remembers
# the stream the handle is bound to, so a call binds only when its stream is another.
#
# `BoundHandle` is that lock plus binding, for as long as the object lives. Your region is its
# constructor. (The cell is named `handle_for` because regions are named after the nearest function
# defined at the top level of the file above them.)
#
# @@context 10_cudnn_conv/cudnn_conv.cu handle_for@@

# %% nbgrader={"grade": false, "grade_id": "bound-handle", "locked": false, "schema_version": 3, "solution": true}
# %%solution 10_cudnn_conv/cudnn_conv.cu handle_for

# %% [markdown] id="algorithm-intro"
# ## 4. Choosing an algorithm: benchmark or heuristic
#
# For one convolution cuDNN has many algorithms, and which is fastest depends on the shapes, the data
# type, the math type and the GPU. Two ways to choose:
#
# - **Benchmark** (`cudnnFind...AlgorithmEx`): cuDNN runs every algorithm on the call's own buffers,
#   times them, and returns them fastest first, each with its status, time, workspace size and math type.
#   This is what `torch.backends.cudnn.benchmark = True` does in PyTorch. It costs milliseconds of GPU time,
#   once per configuration, and picks the truly fastest algorithm. (It writes the output buffer while it
#   times; the real call overwrites it next.) `find_workspace` (given) gives it scratch memory as large as
#   the hungriest algorithm asks for, halved while the allocator is out of memory.
# - **Heuristic** (`cudnnGet...Algorithm_v7`): cuDNN ranks the algorithms from a model of the hardware,
#   without running anything. Cheap, and usually good, but not always the fastest.
#
# Both return a list of candidates, best first (`heuristic_candidates` and `benchmark_candidates`, given,
# turn cuDNN's three result types into one `Candidate` struct). Take the first that is usable: its status
# is `CUDNN_STATUS_SUCCESS` (the list also reports the algorithms that failed or are not supported here),
# and, in strict fp32, its math type is not a Tensor Core one (`CUDNN_TENSOR_OP_MATH` or
# `..._ALLOW_CONVERSION`): such candidates would use TF32. Then set the chosen math type on the
# convolution descriptor, and only then ask the algorithm's workspace size: it depends on the math type.
#
# @@context 10_cudnn_conv/cudnn_conv.cu choose_algorithm@@

# %% nbgrader={"grade": false, "grade_id": "choose-algorithm", "locked": false, "schema_version": 3, "solution": true}
# %%solution 10_cudnn_conv/cudnn_conv.cu choose_algorithm

# %% [markdown] id="workspace-intro"
# ## 5. Workspaces, and the null-workspace pitfall
#
# FFT and Winograd algorithms transform their operands into scratch buffers, and some GEMM-based ones
# precompute index tables: the chosen algorithm may need a **workspace** of `plan.workspace_bytes`, from
# a few KB to hundreds of MB. Take it from PyTorch's caching allocator (`allocate_workspace`, given),
# never from `cudaMalloc`:
#
# - after the first call of a size it is a lookup in the allocator's free lists, not a `cudaMalloc` (which
#   synchronises the device and costs far more than the convolution's launch);
# - it is **stream-ordered**: memory freed after work was queued on a stream is reused only by work
#   queued later on that same stream. So the `DataPtr` can go out of scope right after the convolution is
#   queued, even though the GPU has not run it yet.
#
# **The pitfall.** The exercise's first version passed a null pointer as the workspace while still
# passing the algorithm's workspace size. On small tests the chosen algorithms needed no workspace and
# everything passed; on a ResNet-sized layer the fastest algorithm needs one, and the call fails
# (cuDNN 9 rejects it with `CUDNN_STATUS_BAD_PARAM`; an unchecked call would have read and written
# through a null pointer). The rule: the pointer and the size come from one allocation, and a null
# pointer goes only with a size of 0 (which is what the allocator returns for 0 bytes). The grader's
# `plans with a workspace` checks use layers large enough to need one, in both modes and both math modes.
#
# `run` (given) allocates the workspace before the call, because its address is part of the launch
# cache's key (section 7), and hands it to your region as `ws`. Your region runs the plan's algorithm
# with it, by operation: the forward writes `b.y`, backward-data writes `b.x`, backward-filter writes
# `b.w`. `one(a.dtype)` and `zero(a.dtype)` are the scaling factors cuDNN expects
# (`y = 1 · conv + 0 · y`: overwrite), in the type it expects them in.
#
# @@context 10_cudnn_conv/cudnn_conv.cu execute@@

# %% nbgrader={"grade": false, "grade_id": "execute", "locked": false, "schema_version": 3, "solution": true}
# %%solution 10_cudnn_conv/cudnn_conv.cu execute

# %% [markdown] id="bias-intro"
# **The bias.** `conv2d(x, weight, bias)` adds `bias[k]` to every element of output channel `k`
# (`conv_transpose2d` the same, to its output). cuDNN's `cudnnAddTensor` computes `C = alpha · A + beta · C`
# where `A` may have a dimension of 1 wherever `C` has any size: described as `(1, K, 1, 1)` (the plan's
# `bias_desc`, given), the bias is broadcast over the batch and the pixels. With `beta = 1` it keeps the
# convolution the output already holds. `execute` (given, after your region above) calls your region when
# the call has a bias, on the same stream, so a captured graph holds both. (The fused alternative,
# `cudnnConvolutionBiasActivationForward`, needs an activation and a particular algorithm; the graph API
# of section 1 fuses them properly.) The bias's gradient is `grad_output` summed over the batch and the
# pixels: `cudnnConvolutionBackwardBias` (given, `backward_bias`).
#
# @@context 10_cudnn_conv/cudnn_conv.cu add_bias@@

# %% nbgrader={"grade": false, "grade_id": "add-bias", "locked": false, "schema_version": 3, "solution": true}
# %%solution 10_cudnn_conv/cudnn_conv.cu add_bias

# %% [markdown] id="key"
# ## 6. The plan cache
#
# **The key** is everything that changes the plan: the operation, the algorithm mode, the device, the
# data type, the layout, whether TF32 is allowed, the groups, the shapes of `x` and `w`, the stride, the
# padding and the dilation. (The output shape follows from those. So do the groups, strictly: `w` holds
# `C / groups` channels; but a key that trusted that and kept `w` without its channels would give a
# grouped call its dense twin's plan, so the groups go in too.) A field left out means two calls that
# need different plans share one. The bias is not a field: it changes no descriptor of the convolution. `Key` is a struct of `int64_t` fields only, so it has no padding bytes and can be
# compared and hashed as raw bytes:

# %% nbgrader={"grade": false, "grade_id": "show-key", "locked": true, "schema_version": 3, "solution": false} editable=false deletable=false
show("cudnn_conv.h", "// The cache key", "// RAII ownership")


# %% [markdown] id="missing-field-intro"
# What does a missing field do? The cell below imitates a cache keyed without the stride (in plain Python,
# so it runs here): a stride-1 call stores a plan, and the stride-2 call that follows finds it.

# %% id="missing-field"
def output_width(width, kernel, stride, padding):
    return (width + 2 * padding - kernel) // stride + 1


plans = {}


def plan_for(width, kernel, stride, padding):
    key = (width, kernel, padding)  # the stride is missing
    if key not in plans:
        plans[key] = {"stride": stride, "output width": output_width(width, kernel, stride, padding)}
    return plans[key]


for stride in (1, 2):
    plan = plan_for(23, 3, stride, 1)
    print(f"stride {stride}: the call's output is {output_width(23, 3, stride, 1)} wide; "
          f"the plan found describes stride {plan['stride']}, {plan['output width']} wide")

# %% [markdown] id="make-key-intro"
# cuDNN would then write a 23-wide output into a buffer allocated for 12: out of bounds, silently or
# with an illegal memory access much later. The exercise's `run` calls `check_plan` (given) on every
# plan it uses: the plan's shapes must be the call's, or the call stops with an error that blames the
# key. The grader's `cache[every key field]` check changes each field alone and expects a miss.
#
# Your region fills the key:
#
# @@context 10_cudnn_conv/cudnn_conv.cu make_key@@

# %% nbgrader={"grade": false, "grade_id": "make-key", "locked": false, "schema_version": 3, "solution": true}
# %%solution 10_cudnn_conv/cudnn_conv.cu make_key

# %% [markdown] id="cache"
# **The cache itself** maps keys to plans, with:
#
# - a **bound** (`capacity`, 256 by default): each plan holds descriptors and the configuration's
#   workspace needs, and a program that sees endless shapes (variable-length inputs) must not grow
#   without limit. When full, the **least recently used** plan goes: a `std::list` of entries, most
#   recently used first, and an `unordered_map` from key to the entry's position in the list, so that
#   both the lookup and the move to the front take constant time (`std::list::splice` moves a node
#   without invalidating iterators to it);
# - **counters**: hits, misses and evictions, which tell you (and the grader) whether the cache works;
# - a **mutex**: several threads may call the op at once (the grader runs six);
# - **`shared_ptr` plans**: a plan evicted, or cleared, while another thread is still running it stays
#   alive until that thread lets go.
#
# `run` looks a plan up and, on a miss, builds it outside the cache's lock (building may take
# milliseconds) and inserts it. Two threads may miss the same key at once and both build a plan: the
# insertion keeps whichever came first, and both threads use that one. (The cache's lock and the
# device's lock are never held together, so they cannot deadlock.)

# %% nbgrader={"grade": false, "grade_id": "show-cache", "locked": true, "schema_version": 3, "solution": false} editable=false deletable=false
show("cudnn_conv.cu", "// Plans by key, least recently used evicted first.", "std::shared_ptr<const Plan> PlanCache::find")

# %% [markdown] id="warmup"
# **Warm-up (1 point, runs on a CPU).** The same logic in Python, where an `OrderedDict` plays both the
# list and the map (`move_to_end`, `popitem(last=False)`). `find` returns the plan cached under `key`
# (and makes it the most recently used) or `None`, counting a hit or a miss; `insert` caches `plan`
# under `key` unless a plan is already there, evicts the least recently used plans beyond the capacity,
# and returns the plan now cached under `key`.

# %% nbgrader={"grade": false, "grade_id": "warmup-answer", "locked": false, "schema_version": 3, "solution": true}
from collections import OrderedDict


class PlanCache:
    def __init__(self, capacity):
        self.capacity = capacity
        self.plans = OrderedDict()  # least recently used first
        self.hits = self.misses = self.evictions = 0

    def find(self, key):
        ### BEGIN SOLUTION
        if key not in self.plans:
            self.misses += 1
            return None
        self.hits += 1
        self.plans.move_to_end(key)
        return self.plans[key]
        ### END SOLUTION

    def insert(self, key, plan):
        ### BEGIN SOLUTION
        if key in self.plans:
            return self.plans[key]
        self.plans[key] = plan
        while len(self.plans) > self.capacity:
            self.plans.popitem(last=False)
            self.evictions += 1
        return plan
        ### END SOLUTION


# %% nbgrader={"grade": true, "grade_id": "warmup-test", "locked": true, "schema_version": 3, "solution": false, "points": 1} editable=false deletable=false
def use(cache, key):
    # what run() does: look up, and on a miss build and insert
    plan = cache.find(key)
    return plan if plan is not None else cache.insert(key, f"plan for {key}")


def counts(cache):
    return cache.hits, cache.misses, cache.evictions, len(cache.plans)


c = PlanCache(3)
for height in (20, 21, 22, 23, 24):  # five keys: 20 and 21 are evicted
    use(c, height)
assert counts(c) == (0, 5, 2, 3), f"five new keys with capacity 3: (hits, misses, evictions, size) {counts(c)}"
assert use(c, 22) == "plan for 22"  # a hit: 22 becomes the most recently used
use(c, 20)  # a miss: evicts 23, now the least recently used
assert use(c, 22) == "plan for 22"
assert counts(c) == (2, 6, 3, 3), f"after a hit, a miss and a hit: {counts(c)}"
assert list(c.plans) == [24, 20, 22], f"least recently used first: {list(c.plans)}"
print("ok: hits, misses and least-recently-used eviction as the C++ cache counts them")
### BEGIN HIDDEN TESTS
c = PlanCache(2)
assert c.find("a") is None and counts(c) == (0, 1, 0, 0)
assert c.insert("a", 1) == 1
assert c.insert("a", 2) == 1  # another thread was first: keep its plan
assert c.find("a") == 1 and counts(c) == (1, 1, 0, 1)
c.insert("b", 3)
c.find("a")
c.insert("c", 4)  # evicts b, the least recently used
assert "b" not in c.plans and list(c.plans) == ["a", "c"] and c.evictions == 1
one = PlanCache(1)
for key in range(10):
    use(one, key)
    use(one, key)
assert counts(one) == (10, 10, 9, 1)
### END HIDDEN TESTS

# %% [markdown] id="find-intro"
# Now the C++ cache's two operations. `find`:
#
# @@context 10_cudnn_conv/cudnn_conv.cu find@@

# %% nbgrader={"grade": false, "grade_id": "cache-find", "locked": false, "schema_version": 3, "solution": true}
# %%solution 10_cudnn_conv/cudnn_conv.cu find

# %% [markdown] id="insert-intro"
# and `insert`, which ends with `evict_over_capacity()` (given):
#
# @@context 10_cudnn_conv/cudnn_conv.cu insert@@

# %% nbgrader={"grade": false, "grade_id": "cache-insert", "locked": false, "schema_version": 3, "solution": true}
# %%solution 10_cudnn_conv/cudnn_conv.cu insert

# %% [markdown] id="run"
# ## 7. Putting it together: `run`
#
# `run` (given) is the whole call. In `mode="uncached"` it builds a plan for this call alone, with the
# heuristic, and destroys it on return: the cost the cache removes, kept so you can measure it (section
# 9). It never touches the cache or its counters. Otherwise it looks the key up, builds and inserts on a
# miss, checks that the plan describes this call, allocates the workspace and runs the plan: replayed
# as a CUDA graph when the launch cache (below) has one for these exact buffers, else with your
# `execute`:

# %% nbgrader={"grade": false, "grade_id": "show-run", "locked": true, "schema_version": 3, "solution": false} editable=false deletable=false
show("cudnn_conv.cu", "void run(const Args& a, const Buffers& b) {", "void backward_bias(")

# %% [markdown] id="launch-cache"
# **The launch cache (given).** With the plan cached, a call's host time is mostly cuDNN's own: in
# cuDNN 9 the legacy `cudnnConvolutionForward` costs about 25 µs of host time per call on the H100,
# twice all of `F.conv2d`. A loop that calls the same convolution on the same buffers (PyTorch's
# caching allocator hands back the same blocks every iteration) can skip it: the second such call
# records cuDNN's launches into a CUDA graph (stream capture on a private stream), and every later one
# replays them with one `cudaGraphLaunch` on the caller's stream, as torch.compile's "reduce-overhead"
# mode does for a whole model. A graph holds raw addresses, so its key is the plan and every address
# the call touches (x, w, y, the workspace): a different output buffer never replays an old graph, and
# a replay reads the buffers' current values. The first call of a key, a call inside the caller's own
# `torch.cuda.graph` capture, and `mode="uncached"` never use it; `set_graphs(False)` turns it off, and
# `cache_stats()` counts `graph_hits` and `graph_captures`.

# %% [markdown] id="build-intro"
# The gradients are the same machinery with another operation in the key: `conv2d_backward_input` is
# cuDNN's backward-data (which is also the transposed convolution: `conv_transpose2d` is built on it, with
# its own bias) and `conv2d_backward_weight` is backward-filter; `conv2d_backward_bias` needs no plan. `cudnn_conv.py` (given) wires them into autograd with a
# `torch.autograd.Function`, as in unit 4.
#
# ### Build and try
#
# This compiles your cells inside the rest of exercise 10, then compares `describe` and `conv2d` with
# PyTorch, and shows the cache's counters: the first call of a configuration misses, the next ones hit,
# and a call that changes only the stride misses again. Last, a depthwise convolution with a bias.

# %% nbgrader={"grade": false, "grade_id": "build", "locked": true, "schema_version": 3, "solution": false} editable=false deletable=false
reason = nb.heavy_skip_reason()
if reason:
    print(f"build: {reason}")
else:
    from grader.timer import math_mode

    ex10 = course.build("10_cudnn_conv")
    print("describe((2, 3, 17, 17), (4, 3, 3, 3), stride 2, padding 1):",
          ex10.describe((2, 3, 17, 17), (4, 3, 3, 3), 2, 1))
    x = torch.randn(8, 32, 28, 28, device="cuda")
    w = torch.randn(48, 32, 3, 3, device="cuda") / (32 * 9) ** 0.5
    with math_mode():  # strict fp32, for both
        ex10.cache_clear()
        for stride in (1, 1, 1, 2):
            y = ex10.conv2d(x, w, None, stride, 1)
            err = ((y - F.conv2d(x, w, None, stride, 1)).norm() / y.norm()).item()
            stats = ex10.cache_stats()
            print(f"stride {stride}: relative difference from F.conv2d {err:.1e}; "
                  f"hits {stats['hits']}, misses {stats['misses']}, plans {stats['size']}, "
                  f"largest workspace {stats['max_workspace_bytes'] / 2**20:.1f} MiB")
        wd, b = torch.randn(32, 1, 3, 3, device="cuda") / 3, torch.randn(32, device="cuda")  # depthwise, a bias
        y = ex10.conv2d(x, wd, b, 1, 1, 1, 32)
        err = ((y - F.conv2d(x, wd, b, 1, 1, 1, 32)).norm() / y.norm()).item()
        print(f"depthwise (groups 32) with a bias: relative difference from F.conv2d {err:.1e}")

# %% [markdown] id="graded-intro"
# ## 8. Graded checks
#
# Each cell runs one group of the grader's checks on your build: fresh random inputs drawn from the
# printed seed (set `COURSE_SEED` to replay them), results compared with float64 PyTorch (normwise: 1e-4
# in strict fp32, 5e-3 with TF32, 1e-12 in float64), outputs poisoned first, inputs checked unmodified.
# cuDNN's kernels may run, PyTorch's own convolution may not: the profiler checks that no
# `aten::conv*` or `aten::cudnn_*` operator ran. A group earns its points only when all of its checks
# pass.
#
# - **descriptors**: `describe` against `F.conv2d`'s output shapes, and cuDNN's own rejections (stride 0,
#   padding -1, dilation 0) surfacing as errors that name `CUDNN_STATUS_BAD_PARAM`. (`make grade EX=10`
#   runs this group without a GPU too.)
# - **forward** and **backward** include grouped and depthwise convolutions (each after its dense twin on
#   the same `x`) and calls with a bias.
# - **cache**: a repeated call hits; a call that differs in any one key field (groups included, in each
#   of the three operations) misses; `cache_clear()`
#   empties and resets; a capacity of 3 evicts the least recently used; `mode="uncached"` leaves the
#   counters alone. The launch cache: calls repeated on the same buffers refilled with new values
#   replay a graph and get the new results; a new output buffer, or another bias, never replays an old
#   graph; with
#   `set_graphs(False)` or `mode="uncached"` no graph is made.
# - **threads**: six Python threads, each on its own stream and shapes: every result right, and the hits
#   and misses add up exactly. **streams**: a call on a side stream must wait for that stream's earlier
#   work, which it does only if the handle is bound to the current stream; the same for a replayed
#   graph; and inside your own `torch.cuda.graph` capture the op's work must be recorded into it.

# %% nbgrader={"grade": true, "grade_id": "descriptors-test", "locked": true, "schema_version": 3, "solution": false, "points": 1} editable=false deletable=false
# 10_cudnn_conv descriptors: the grader's own checks. Shown here: a few cases; at grading, every descriptors check.
course.check("descriptors", "10_cudnn_conv", only=[
    "descriptors[output shapes]",
    "descriptors[cuDNN status errors]",
])
### BEGIN HIDDEN TESTS
course.check("descriptors", "10_cudnn_conv")
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "forward", "locked": true, "schema_version": 3, "solution": false, "points": 3} editable=false deletable=false
# 10_cudnn_conv forward: the grader's own checks. Shown here: a few cases; at grading, every forward check.
course.check("forward", "10_cudnn_conv", only=[
    "forward[strict-k3s2p1]",
    "forward[tf32-k7s2p3]",
    "forward[strict-groups depthwise]",
    "forward[float64-k3s2p1]",
    "forward[non-contiguous]",
    "forward[mode=uncached]",
    "forward[plans with a workspace]",
    "forward[no PyTorch convolution ran]",
])
### BEGIN HIDDEN TESTS
course.check("forward", "10_cudnn_conv")
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "backward", "locked": true, "schema_version": 3, "solution": false, "points": 3} editable=false deletable=false
# 10_cudnn_conv backward: the grader's own checks. Shown here: a few cases; at grading, every backward check.
course.check("backward", "10_cudnn_conv", only=[
    "backward[strict-k3s2p1]",
    "backward[strict-groups resnext 8x4]",
    "backward[conv_transpose2d strict]",
    "backward[autograd]",
    "backward[gradcheck float64]",
    "backward[plans with a workspace]",
])
### BEGIN HIDDEN TESTS
course.check("backward", "10_cudnn_conv")
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "cache-test", "locked": true, "schema_version": 3, "solution": false, "points": 2} editable=false deletable=false
# 10_cudnn_conv cache: the grader's own checks. Shown here: a few cases; at grading, every cache check.
course.check("cache", "10_cudnn_conv", only=[
    "cache[second identical call hits]",
    "cache[clear]",
    "cache[mode=uncached bypasses it]",
    "cache[graphs: repeated calls replay, reading new values]",
])
### BEGIN HIDDEN TESTS
course.check("cache", "10_cudnn_conv")
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "threads", "locked": true, "schema_version": 3, "solution": false, "points": 1} editable=false deletable=false
# 10_cudnn_conv threads: the grader's own checks. Shown here: a few cases; at grading, every threads check.
course.check("threads", "10_cudnn_conv", only=[
    "threads[6 threads, own streams and shapes]",
])
### BEGIN HIDDEN TESTS
course.check("threads", "10_cudnn_conv")
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "streams", "locked": true, "schema_version": 3, "solution": false, "points": 1} editable=false deletable=false
# 10_cudnn_conv streams: the grader's own checks. Shown here: a few cases; at grading, every streams check.
course.check("streams", "10_cudnn_conv", only=[
    "streams[runs on the current stream]",
    "streams[called inside torch.cuda.graph capture]",
])
### BEGIN HIDDEN TESTS
course.check("streams", "10_cudnn_conv")
### END HIDDEN TESTS

# %% nbgrader={"grade": true, "grade_id": "input-checks", "locked": true, "schema_version": 3, "solution": false, "points": 1} editable=false deletable=false
# 10_cudnn_conv input_checks: the grader's own checks. Shown here: a few cases; at grading, every input_checks check.
course.check("input_checks", "10_cudnn_conv", only=[
    "input_checks[a CPU tensor x]",
    "input_checks[stride 0]",
    "input_checks[a dense weight with groups 2]",
    "input_checks[grad_output of the wrong shape]",
    "input_checks[a valid call after the errors]",
])
### BEGIN HIDDEN TESTS
course.check("input_checks", "10_cudnn_conv")
### END HIDDEN TESTS

# %% [markdown] id="speed"
# **Speed.** Two ResNet layers in strict fp32 (32x512x7x7 with 512 → 512 channels, and 32x64x56x56 with
# 64 → 64, both 3x3, padding 1), against the reference solution in the same run: half of its speed earns
# 1.5 points, 0.85 of it earns 3. It needs the forward checks to pass first. Once the plan is cached, the
# time is cuDNN's, so what this measures is mostly whether your algorithm choice finds the fastest
# strict-fp32 algorithm, and whether each call avoids host work it does not need.

# %% nbgrader={"grade": true, "grade_id": "performance", "locked": true, "schema_version": 3, "solution": false, "points": 3} editable=false deletable=false
# performance: the points earned are this cell's result (nbgrader's partial credit)
course.performance("10_cudnn_conv")

# %% [markdown] id="plot-intro"
# ## 9. What the cache is worth
#
# Left: host time per call on a tiny convolution (1x16x7x7, 16 → 16 channels), where the GPU work takes
# a few microseconds and everything else is overhead: your op with cached plans (benchmark mode with the
# launch cache on, which replays a CUDA graph here since every call has the same buffers, and off; and
# heuristic mode), uncached, and `F.conv2d`. Right: the wall time of one synchronised call against the batch size
# of a 64-channel 56x56 layer, cached and uncached. The gap on the right is host time plus the slower
# algorithm the uncached path settles for; as the batch grows, the GPU's share grows and the host's
# share shrinks.

# %% id="plot"
reason = nb.heavy_skip_reason()
if reason:
    print(f"cache plot: {reason}")
else:
    import matplotlib.pyplot as plt

    from grader.timer import L2Flusher, time_fn, tuned_strict_fp32
    from grader.benchmark_extras import host_calls, host_inputs, host_times

    ex10 = course.build("10_cudnn_conv")
    with tuned_strict_fp32():  # TF32 off, cudnn.benchmark on
        x, w = host_inputs()  # 1x16x7x7, 16 -> 16 channels
        # best of 3 loops of 200 calls, no sync inside a loop: the host's enqueueing time
        host_us = {name.replace(", ", ",\n"): min(us)
                   for name, us in host_times(ex10, host_calls(ex10, x, w), loops=3).items()}

        flush = L2Flusher()
        batches = [1, 2, 4, 8, 16, 32]
        wall_us = {"cached": [], "uncached": [], "F.conv2d": []}
        for n in batches:
            inputs = [(torch.randn(n, 64, 56, 56, device="cuda"),
                       torch.randn(64, 64, 3, 3, device="cuda") / 24) for _ in range(2)]
            for name, fn in (("cached", lambda inp: ex10.conv2d(inp[0], inp[1], None, 1, 1)),
                             ("uncached", lambda inp: ex10.conv2d(inp[0], inp[1], None, 1, 1, mode="uncached")),
                             ("F.conv2d", lambda inp: F.conv2d(inp[0], inp[1], None, 1, 1))):
                wall_us[name].append(time_fn(fn, inputs, flush=flush, max_seconds=0.5,
                                             max_samples=50).wall_median_s * 1e6)

    for name, us in host_us.items():
        print(f"{name.replace(chr(10), ' '):<20} {us:8.1f} µs of host time per call")
    fig, (left, right) = plt.subplots(1, 2, figsize=(10, 4))
    left.bar(list(host_us), list(host_us.values()),
             color=["tab:green", "tab:cyan", "tab:olive", "tab:red", "tab:blue"])
    left.set_ylabel("µs of host time per call")
    left.tick_params(axis="x", labelsize=8)
    left.set_title("1x16x7x7, 16->16, 3x3")
    for name, style in (("cached", "o-"), ("uncached", "s--"), ("F.conv2d", "^:")):
        right.plot(batches, wall_us[name], style, label=name)
    right.set_xscale("log", base=2)
    right.set_yscale("log")
    right.set_xlabel("batch size (64 channels, 56x56, 3x3)")
    right.set_ylabel("µs per synchronised call (median)")
    right.legend()
    fig.suptitle(f"cuDNN plans cached or not, strict fp32, on {torch.cuda.get_device_name()}")
    fig.tight_layout()
    plt.show()
    print("cache after the plot:", ex10.cache_stats())

# %% [markdown] id="next"
# ## What next
#
# The legacy API's limits showed up above: more host time per call than PyTorch's cached graph-API
# plans (the launch cache hides it only for calls repeated on the same buffers), and slower TF32
# algorithms. cuDNN's graph API (through `cudnn_frontend`) describes the
# convolution, its bias and its activation as one graph and lets cuDNN fuse them: unit 4's fusion, with
# cuDNN's kernels. `make bench EX=10` reports your op against `F.conv2d` in both math modes, host time per
# call, and cached against uncached time.
