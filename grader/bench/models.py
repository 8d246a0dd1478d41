"""ResNet-50 and MobileNetV2 as plain torch.nn modules, built through a layer factory: the one home
of these architectures in the course.

Every convolution of both models is followed by a BatchNorm2d, so a factory makes each
convolution as a `ConvBN` block (Conv2d without bias, BatchNorm2d, then ReLU, ReLU6 or nothing)
and each fully connected layer: `resnet50(TorchLayers())` is PyTorch's model,
`resnet50(CourseLayers())` (grader.bench.course_models) the same model run by the course's kernels, with
the same parameter and buffer names, so that `course.load_state_dict(torch_model.state_dict())`
makes the two comparable. `trace(model, x_shape)` lists the blocks in the order the forward runs
them, with their input shapes: grader.bench.model_shapes derives its ResNet-50 and MobileNetV2 layers from
it, on the meta device.

- ResNet-50 as torchvision's (v1.5): bottlenecks 3-4-6-3, the stride on the 3x3 convolution, a
  1x1 convolution + BatchNorm2d as the shortcut of each stage's first block.
- MobileNetV2 as torchvision's at width 1.0: inverted residuals (1x1 expansion, depthwise 3x3 with
  groups = channels, 1x1 linear projection), ReLU6, dropout 0.2 before the classifier.
Both initialised as torchvision does. Module names follow torchvision's where a block stands for
one of its layers ("layer1.0.conv2"); a block holds its convolution and normalisation as `.conv`
and `.bn`, and MobileNetV2's blocks are named by role ("features.3.expand", ".depthwise", ".project").
"""
from __future__ import annotations

from typing import Protocol

import torch
import torch.nn.functional as F
from torch import nn

ACTIVATIONS = {None: None, "relu": F.relu, "relu6": F.relu6}


class ConvBN(nn.Module):
    """act(bn(conv(x))): an nn.Conv2d without bias, an nn.BatchNorm2d, then `act` ("relu", "relu6"
    or None). PyTorch's own; the course's blocks (grader.bench.course_models) subclass it and keep its
    parameters, so that both load the same state dict."""

    def __init__(self, cin: int, cout: int, kernel_size: int, stride: int = 1, padding: int = 0, groups: int = 1,
                 act: str | None = None):
        super().__init__()
        if act not in ACTIVATIONS:
            raise ValueError(f"act must be one of {', '.join(map(str, ACTIVATIONS))}, not {act!r}")
        self.conv = nn.Conv2d(cin, cout, kernel_size, stride, padding, groups=groups, bias=False)
        self.bn = nn.BatchNorm2d(cout)
        self.act = act

    def activate(self, y: torch.Tensor) -> torch.Tensor:
        return y if self.act is None else ACTIVATIONS[self.act](y)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.activate(self.bn(self.conv(x)))

    def extra_repr(self) -> str:
        return f"act={self.act}"


class Layers(Protocol):
    """What the models ask a factory for."""

    def conv_bn(self, cin: int, cout: int, kernel_size: int, stride: int = 1, padding: int = 0, groups: int = 1,
                act: str | None = None) -> ConvBN: ...

    def linear(self, cin: int, cout: int) -> nn.Module: ...


class TorchLayers:
    """PyTorch's layers."""

    def conv_bn(self, cin, cout, kernel_size, stride=1, padding=0, groups=1, act=None) -> ConvBN:
        return ConvBN(cin, cout, kernel_size, stride, padding, groups, act)

    def linear(self, cin, cout) -> nn.Module:
        return nn.Linear(cin, cout)


# ------------------------------------------------------------------------------------- ResNet-50
class Bottleneck(nn.Module):
    """1x1 (to `width`), 3x3 (`stride`), 1x1 (to 4 x width), each with BatchNorm2d; the shortcut is
    `downsample` (1x1 with `stride` + BatchNorm2d) where the shape changes; ReLU after the sum."""

    expansion = 4

    def __init__(self, layers: Layers, cin: int, width: int, stride: int = 1):
        super().__init__()
        cout = width * self.expansion
        self.conv1 = layers.conv_bn(cin, width, 1, act="relu")
        self.conv2 = layers.conv_bn(width, width, 3, stride, 1, act="relu")
        self.conv3 = layers.conv_bn(width, cout, 1)
        self.downsample = layers.conv_bn(cin, cout, 1, stride) if stride != 1 or cin != cout else None

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = self.conv3(self.conv2(self.conv1(x)))
        identity = x if self.downsample is None else self.downsample(x)  # after conv3, as torchvision
        return F.relu(out + identity)


class ResNet(nn.Module):
    def __init__(self, layers: Layers, blocks=(3, 4, 6, 3), num_classes: int = 1000):
        super().__init__()
        self.conv1 = layers.conv_bn(3, 64, 7, 2, 3, act="relu")
        self.maxpool = nn.MaxPool2d(3, 2, 1)
        cin = 64
        for stage, (width, count) in enumerate(zip((64, 128, 256, 512), blocks), 1):
            stage_blocks = []
            for b in range(count):
                stage_blocks.append(Bottleneck(layers, cin, width, 2 if b == 0 and stage > 1 else 1))
                cin = width * Bottleneck.expansion
            setattr(self, f"layer{stage}", nn.Sequential(*stage_blocks))
        self.fc = layers.linear(cin, num_classes)
        for m in self.modules():  # torchvision's initialisation
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out", nonlinearity="relu")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.maxpool(self.conv1(x))
        x = self.layer4(self.layer3(self.layer2(self.layer1(x))))
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))


def resnet50(layers: Layers | None = None, num_classes: int = 1000) -> ResNet:
    """torchvision's ResNet-50 (v1.5), its layers made by `layers` (default: PyTorch's)."""
    return ResNet(layers or TorchLayers(), (3, 4, 6, 3), num_classes)


# ----------------------------------------------------------------------------------- MobileNetV2
class InvertedResidual(nn.Module):
    """1x1 expansion to cin x t channels (none when t = 1), depthwise 3x3 (`stride`), both with ReLU6,
    then a 1x1 linear projection to cout; the input is added back where the shape allows."""

    def __init__(self, layers: Layers, cin: int, cout: int, stride: int, t: int):
        super().__init__()
        hidden = cin * t
        self.expand = layers.conv_bn(cin, hidden, 1, act="relu6") if t != 1 else None
        self.depthwise = layers.conv_bn(hidden, hidden, 3, stride, 1, groups=hidden, act="relu6")
        self.project = layers.conv_bn(hidden, cout, 1)
        self.residual = stride == 1 and cin == cout

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = x if self.expand is None else self.expand(x)
        out = self.project(self.depthwise(out))
        return x + out if self.residual else out


# (expansion t, channels c, repeats n, stride s) of each stage, from the paper's Table 2
MOBILENET_V2_STAGES = ((1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1), (6, 160, 3, 2),
                       (6, 320, 1, 1))


class MobileNetV2(nn.Module):
    def __init__(self, layers: Layers, num_classes: int = 1000, dropout: float = 0.2):
        super().__init__()
        features: list[nn.Module] = [layers.conv_bn(3, 32, 3, 2, 1, act="relu6")]
        cin = 32
        for t, c, n, s in MOBILENET_V2_STAGES:
            for i in range(n):
                features.append(InvertedResidual(layers, cin, c, s if i == 0 else 1, t))
                cin = c
        features.append(layers.conv_bn(cin, 1280, 1, act="relu6"))
        self.features = nn.Sequential(*features)
        self.dropout = nn.Dropout(dropout)
        self.classifier = layers.linear(1280, num_classes)
        for m in self.modules():  # torchvision's initialisation
            if isinstance(m, nn.Conv2d):
                nn.init.kaiming_normal_(m.weight, mode="fan_out")
            elif isinstance(m, nn.BatchNorm2d):
                nn.init.ones_(m.weight)
                nn.init.zeros_(m.bias)
            elif isinstance(m, nn.Linear):
                nn.init.normal_(m.weight, 0, 0.01)
                nn.init.zeros_(m.bias)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = F.adaptive_avg_pool2d(self.features(x), 1)
        return self.classifier(self.dropout(torch.flatten(x, 1)))


def mobilenet_v2(layers: Layers | None = None, num_classes: int = 1000, dropout: float = 0.2) -> MobileNetV2:
    """torchvision's MobileNetV2 at width 1.0, its layers made by `layers` (default: PyTorch's)."""
    return MobileNetV2(layers or TorchLayers(), num_classes, dropout)


MODELS = {"ResNet-50": resnet50, "MobileNetV2": mobilenet_v2}


# ----------------------------------------------------------------------------------------- trace
def trace(model: nn.Module, x_shape) -> list[tuple[str, nn.Module, tuple[int, ...]]]:
    """Each ConvBN block and nn.Linear of `model`, in the order its forward runs them, with its name
    and the shape of its input: one forward without gradients of an input of `x_shape`, on the
    model's device (nothing is computed on the meta device), with a hook on each."""
    p = next(model.parameters())
    seen: list[tuple[str, nn.Module, tuple[int, ...]]] = []
    hooks = [m.register_forward_hook(lambda mod, args, out, name=name: seen.append((name, mod, tuple(args[0].shape))))
             for name, m in model.named_modules() if isinstance(m, (ConvBN, nn.Linear))]
    try:
        with torch.no_grad():
            model(torch.empty(x_shape, device=p.device, dtype=p.dtype))
    finally:
        for h in hooks:
            h.remove()
    return seen
