"""Layer shapes of real models, so that no kernel is tuned to one benchmark shape.

`make bench` times each op of the course on the layers it can run (grader.bench.benchmark_extras), beside
PyTorch in strict float32 and in PyTorch's default math (TF32 for convolutions). The layers are
generated from each model's own definition, not typed in one by one: ResNet-50 (torchvision's, stride
on the 3x3 convolution) and MobileNetV2 (its depthwise 3x3s included) traced from their modules in
grader.bench.models on the meta device (`layers_of`; the same definitions the course's kernels run whole,
grader.bench.course_models), and from stage widths, block counts and strides the decoder of a UNet (2x2 transposed convolutions that double the size, then two 3x3
convolutions), and GPT-2 small's projections (prompt: 8 sequences of 1024 tokens; decoding: one
token, a matrix-vector product). `unique()` keeps one of each distinct shape, with its count.

Models alone leave out kinds of convolution that users run and public kernel benchmarks pose: kernels
wider than tall, dilation, a stride with a dilation and a padding in a transposed convolution, large
batches of few channels. `shape_classes()` adds one layer of each such class, and `make bench` times
them with the models' layers (`bench_layers()`).
"""
from __future__ import annotations

from dataclasses import dataclass, field

# the key under which an exercise's benchmark extras hold its timings on these layers (grader.bench.benchmark_extras
# writes it, grader.bench.benchmarks renders it)
EXTRA_KEY = "model layers"


@dataclass(frozen=True)
class _Window:
    """A layer that slides a k x k window over an n x cin x h x w input, producing cout channels."""
    model: str
    name: str
    n: int
    cin: int
    h: int
    w: int
    cout: int
    k: int  # the kernel's height, and its width unless k_w says otherwise
    stride: int = 1
    padding: int = 0
    k_w: int = field(default=0, kw_only=True)  # the kernel's width where it is not k
    dilation: int = field(default=1, kw_only=True)

    @property
    def x_shape(self) -> tuple[int, ...]:
        return (self.n, self.cin, self.h, self.w)

    @property
    def kernel(self) -> tuple[int, int]:
        return self.k, self.k_w or self.k

    def _geometry(self) -> str:
        kh, kw = self.kernel
        return (f"{kh}x{kw}" + (f", stride {self.stride}" if self.stride != 1 else "")
                + (f", pad {self.padding}" if self.padding else "")
                + (f", dilation {self.dilation}" if self.dilation != 1 else ""))


@dataclass(frozen=True)
class Conv(_Window):
    groups: int = 1

    @property
    def out_hw(self) -> tuple[int, int]:
        return tuple((s + 2 * self.padding - self.dilation * (k - 1) - 1) // self.stride + 1
                     for s, k in zip((self.h, self.w), self.kernel))

    @property
    def w_shape(self) -> tuple[int, ...]:
        return (self.cout, self.cin // self.groups, *self.kernel)

    @property
    def macs(self) -> int:
        ho, wo = self.out_hw
        kh, kw = self.kernel
        return self.n * self.cout * ho * wo * (self.cin // self.groups) * kh * kw

    @property
    def shape(self) -> str:
        groups = (", depthwise" if self.groups == self.cin == self.cout and self.groups > 1
                  else (f", groups {self.groups}" if self.groups > 1 else ""))
        return f"{self.n}x{self.cin}x{self.h}x{self.w}, {self.cin}->{self.cout}, {self._geometry()}{groups}"


@dataclass(frozen=True)
class ConvTranspose(_Window):
    output_padding: int = 0
    groups: int = 1

    @property
    def out_hw(self) -> tuple[int, int]:
        return tuple((s - 1) * self.stride - 2 * self.padding + self.dilation * (k - 1) + self.output_padding + 1
                     for s, k in zip((self.h, self.w), self.kernel))

    @property
    def w_shape(self) -> tuple[int, ...]:
        return (self.cin, self.cout // self.groups, *self.kernel)

    @property
    def macs(self) -> int:
        kh, kw = self.kernel
        return self.n * self.cin * self.h * self.w * (self.cout // self.groups) * kh * kw

    @property
    def shape(self) -> str:
        return (f"{self.n}x{self.cin}x{self.h}x{self.w}, {self.cin}->{self.cout}, {self._geometry()}"
                + (f", output pad {self.output_padding}" if self.output_padding else "")
                + (f", groups {self.groups}" if self.groups > 1 else ""))


@dataclass(frozen=True)
class Matmul:
    model: str
    name: str
    m: int
    k: int
    n: int

    @property
    def macs(self) -> int:
        return self.m * self.k * self.n

    @property
    def shape(self) -> str:
        return f"{self.m}x{self.k} @ {self.k}x{self.n}"


Layer = Conv | ConvTranspose | Matmul


def layers_of(model, model_name: str, n: int, size: int) -> list[Layer]:
    """The layers of a grader.bench.models model (any factory's) in the order its forward runs them, for an
    n x 3 x size x size input: each ConvBN block as a Conv, each nn.Linear as a Matmul."""
    import torch

    from grader.bench.models import trace

    out: list[Layer] = []
    for name, module, x_shape in trace(model, (n, 3, size, size)):
        if isinstance(module, torch.nn.Linear):
            out.append(Matmul(model_name, name, x_shape[0], module.in_features, module.out_features))
            continue
        c = module.conv
        if len({*c.kernel_size}) > 1 or len({*c.stride}) > 1 or len({*c.padding}) > 1 or c.dilation != (1, 1):
            raise ValueError(f"{name}: only square kernels, strides and paddings without dilation are listed")
        out.append(Conv(model_name, name, *x_shape, c.out_channels, c.kernel_size[0], c.stride[0], c.padding[0],
                        groups=c.groups))
    return out


def _from_model(model_name: str, n: int, size: int) -> list[Layer]:
    import torch

    from grader.bench import models

    with torch.device("meta"):  # shapes only: nothing is allocated or computed
        model = models.MODELS[model_name]()
    return layers_of(model, model_name, n, size)


def resnet50(n: int = 32, size: int = 224) -> list[Layer]:
    """Every layer of torchvision's ResNet-50 in order (bottlenecks 3-4-6-3, stride on the 3x3), from
    its definition in grader.bench.models."""
    return _from_model("ResNet-50", n, size)


def mobilenet_v2(n: int = 32, size: int = 224) -> list[Layer]:
    """Every layer of MobileNetV2 in order: inverted residuals (1x1 expansion, depthwise 3x3, 1x1
    projection), from its definition in grader.bench.models."""
    return _from_model("MobileNetV2", n, size)


def unet_decoder(n: int = 8, size: int = 256) -> list[Layer]:
    """A UNet's decoder (widths 1024 -> 64, 'same' padding): per stage a 2x2 stride-2 transposed
    convolution halving the channels, then on the concatenation with the skip two 3x3 convolutions."""
    out: list[Layer] = []
    h, cin = size // 16, 1024
    for stage in range(1, 5):
        half = cin // 2
        out.append(ConvTranspose("UNet decoder", f"up{stage}.transpose", n, cin, h, h, half, 2, 2))
        h *= 2
        out += [Conv("UNet decoder", f"up{stage}.conv1", n, cin, h, h, half, 3, 1, 1),
                Conv("UNet decoder", f"up{stage}.conv2", n, half, h, h, half, 3, 1, 1)]
        cin = half
    out.append(Conv("UNet decoder", "out", n, cin, h, h, 2, 1))
    return out


def gpt2_projections(batch: int = 8, tokens: int = 1024, d: int = 768) -> list[Layer]:
    """GPT-2 small's matrix products per block: attention in and out, the MLP's up and down, over a
    prompt (batch x tokens rows) and for one decoded token (a matrix-vector product)."""
    out: list[Layer] = []
    for rows, phase in ((batch * tokens, "prompt"), (1, "decode")):
        out += [Matmul("GPT-2", f"{phase} attn.c_attn", rows, d, 3 * d), Matmul("GPT-2", f"{phase} attn.c_proj", rows, d, d),
                Matmul("GPT-2", f"{phase} mlp.c_fc", rows, d, 4 * d), Matmul("GPT-2", f"{phase} mlp.c_proj", rows, 4 * d, d)]
    return out


def all_layers() -> list[Layer]:
    return resnet50() + mobilenet_v2() + unet_decoder() + gpt2_projections()


CLASSES = "shape classes"  # the `model` of shape_classes()'s layers


def shape_classes() -> list[Layer]:
    """One layer of each kind of convolution the models above do not have: kernels wider than tall and a
    column kernel, dilation, large batches of few channels and a large plane of many, a depthwise 5 x 5
    and a grouped 3 x 3; transposed: the generators' 4 x 4 stride 2, a stride with a dilation, a padding
    and an output padding, a kernel wider than tall, a stride of 3, a large batch of few channels, groups."""
    c, t = Conv, ConvTranspose
    return [
        c(CLASSES, "kernel wider than tall", 8, 64, 128, 128, 128, 3, 1, 1, k_w=7),
        c(CLASSES, "column kernel", 32, 192, 17, 17, 192, 7, k_w=1),
        c(CLASSES, "dilated", 4, 256, 64, 64, 256, 3, 1, 2, dilation=2),
        c(CLASSES, "dilated, strided", 16, 64, 96, 96, 128, 3, 2, 2, dilation=2),
        c(CLASSES, "large batch, few channels", 256, 3, 32, 32, 64, 3, 1, 1),
        c(CLASSES, "strided 5x5", 16, 32, 128, 128, 64, 5, 2, 2),
        c(CLASSES, "large plane, pointwise", 16, 64, 256, 256, 128, 1),
        c(CLASSES, "image wider than tall", 8, 16, 256, 1024, 32, 3, 1, 1),
        c(CLASSES, "depthwise 5x5", 32, 240, 28, 28, 240, 5, 1, 2, groups=240),
        c(CLASSES, "grouped, 32 groups", 16, 256, 56, 56, 256, 3, 1, 1, groups=32),
        t(CLASSES, "transposed 4x4, stride 2", 64, 256, 16, 16, 128, 4, 2, 1),
        t(CLASSES, "transposed, strided, dilated, padded", 16, 64, 64, 64, 64, 3, 2, 2, output_padding=1, dilation=2),
        t(CLASSES, "transposed, kernel wider than tall", 16, 64, 64, 64, 32, 3, k_w=5),
        t(CLASSES, "transposed, stride 3", 16, 64, 32, 32, 32, 5, 3, 1),
        t(CLASSES, "transposed, large batch, few channels", 128, 32, 32, 32, 16, 3, 1, 1),
        t(CLASSES, "transposed, 4 groups", 16, 128, 32, 32, 128, 4, 2, 1, groups=4),
    ]


def bench_layers() -> list[Layer]:
    """What `make bench` times each op on: the models' layers, then the shape classes."""
    return all_layers() + shape_classes()


def unique(layers: list[Layer]) -> list[tuple[Layer, int]]:
    """One layer per distinct shape (the first to have it), with how many layers share it."""
    seen: dict[tuple, list] = {}
    for layer in layers:
        key = (layer.model, type(layer).__name__, layer.shape)
        if key in seen:
            seen[key][1] += 1
        else:
            seen[key] = [layer, 1]
    return [(layer, count) for layer, count in seen.values()]
