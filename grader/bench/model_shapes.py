"""Layer shapes of real models, so that no kernel is tuned to one benchmark shape.

`make bench` times each op of the course on the layers it can run (grader.bench.benchmark_extras), beside
PyTorch in strict float32 and in PyTorch's default math (TF32 for convolutions). The layers are
generated from each model's own definition, not typed in one by one: ResNet-50 (torchvision's, stride
on the 3x3 convolution) and MobileNetV2 (its depthwise 3x3s included) traced from their modules in
grader.bench.models on the meta device (`layers_of`; the same definitions the course's kernels run whole,
grader.bench.course_models), and from stage widths, block counts and strides the decoder of a UNet (2x2 transposed convolutions that double the size, then two 3x3
convolutions), and GPT-2 small's projections (prompt: 8 sequences of 1024 tokens; decoding: one
token, a matrix-vector product). `unique()` keeps one of each distinct shape, with its count.
"""
from __future__ import annotations

from dataclasses import dataclass

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
    k: int
    stride: int = 1
    padding: int = 0

    @property
    def x_shape(self) -> tuple[int, ...]:
        return (self.n, self.cin, self.h, self.w)


@dataclass(frozen=True)
class Conv(_Window):
    groups: int = 1

    @property
    def out_hw(self) -> tuple[int, int]:
        return tuple((s + 2 * self.padding - self.k) // self.stride + 1 for s in (self.h, self.w))

    @property
    def w_shape(self) -> tuple[int, ...]:
        return (self.cout, self.cin // self.groups, self.k, self.k)

    @property
    def macs(self) -> int:
        ho, wo = self.out_hw
        return self.n * self.cout * ho * wo * (self.cin // self.groups) * self.k * self.k

    @property
    def shape(self) -> str:
        extra = "".join([f", stride {self.stride}" if self.stride != 1 else "", f", pad {self.padding}" if self.padding else "",
                         ", depthwise" if self.groups == self.cin == self.cout and self.groups > 1
                         else (f", groups {self.groups}" if self.groups > 1 else "")])
        return f"{self.n}x{self.cin}x{self.h}x{self.w}, {self.cin}->{self.cout}, {self.k}x{self.k}{extra}"


@dataclass(frozen=True)
class ConvTranspose(_Window):
    output_padding: int = 0
    groups: int = 1

    @property
    def out_hw(self) -> tuple[int, int]:
        return tuple((s - 1) * self.stride - 2 * self.padding + self.k + self.output_padding for s in (self.h, self.w))

    @property
    def w_shape(self) -> tuple[int, ...]:
        return (self.cin, self.cout // self.groups, self.k, self.k)

    @property
    def macs(self) -> int:
        return self.n * self.cin * self.h * self.w * (self.cout // self.groups) * self.k * self.k

    @property
    def shape(self) -> str:
        return (f"{self.n}x{self.cin}x{self.h}x{self.w}, {self.cin}->{self.cout}, {self.k}x{self.k}"
                + (f", stride {self.stride}" if self.stride != 1 else "") + (f", pad {self.padding}" if self.padding else "")
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
