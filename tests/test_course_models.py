"""ResNet-50 and MobileNetV2 built from the course's modules (grader.bench.course_models) against PyTorch's
(grader.bench.models): issue 20's "run forward and backward and match PyTorch's outputs and gradients".

On the CPU: the course's factory builds both models (on the meta device) with the right layers, each
routed to the exercise that can run it, with PyTorch's state dict names and grader.bench.model_shapes's
layer lists; and the comparison, with PyTorch's channels_last path standing in for a second float32
implementation, passes its tolerances. On a GPU: one training step, an eval forward and an eval
forward and backward of each course model, in strict float32, against PyTorch's model with the same
weights (the tolerances and their reasons: grader/bench/course_models.py, above `OUT_TOL`); and the
profiler's word that no PyTorch convolution ran and the course's ops did.
"""
from __future__ import annotations

import pytest
import torch

from grader.bench import course_models as cm, model_shapes as ms
from grader.bench.models import MODELS, ConvBN

BATCH, SIZE, SEED = 2, 128, 0
NAMES = list(MODELS)
# (convolutions, of which depthwise, of which run by 09/08, nn.Linear layers)
LAYERS = {"ResNet-50": (53, 0, 33, 1), "MobileNetV2": (52, 17, 0, 1)}


@pytest.fixture(scope="module")
def layers():
    return cm.CourseLayers()  # builds 08, 09 and 10 (cached)


def _on_meta(name, layers, **kwargs):
    with torch.device("meta"):
        return MODELS[name](layers, **kwargs)


@pytest.mark.parametrize("name", NAMES)
def test_the_course_factory_builds_each_model_with_its_layers(name, layers):
    model = _on_meta(name, layers)
    blocks = [m for m in model.modules() if isinstance(m, ConvBN)]
    assert all(isinstance(m, cm.CourseConvBN) for m in blocks)
    depthwise = [m for m in blocks if m.conv.groups == m.conv.in_channels == m.conv.out_channels > 1]
    fused = [m for m in blocks if m.route == cm.FUSED]
    linear = [m for m in model.modules() if isinstance(m, torch.nn.Linear)]
    assert (len(blocks), len(depthwise), len(fused), len(linear)) == LAYERS[name]
    # 09/08 exactly where they apply: a dense convolution followed by BatchNorm and ReLU
    assert all((m.route == cm.FUSED) == (m.act == "relu" and m.conv.groups == 1) for m in blocks)


@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("mode", ["train", "eval"])
def test_the_course_models_layers_are_model_shapes_lists(name, mode, layers):
    """Traced through the course's ops on the meta device (their registered fakes: 09 in training, 08
    in eval, 10 elsewhere), the course model's layers are model_shapes's, shapes and names."""
    model = _on_meta(name, layers)
    model.train(mode == "train")
    expected = ms.resnet50(BATCH, SIZE) if name == "ResNet-50" else ms.mobilenet_v2(BATCH, SIZE)
    assert ms.layers_of(model, name, BATCH, SIZE) == expected


@pytest.mark.parametrize("name", NAMES)
def test_the_course_model_has_pytorchs_state_dict(name, layers):
    """The same parameter and buffer names and shapes: PyTorch's weights load into the course model
    (the 09 and 08 modules a block calls share its conv and bn, and are not in the module tree)."""
    course, reference = _on_meta(name, layers), _on_meta(name, None)
    assert {k: v.shape for k, v in course.state_dict().items()} == {k: v.shape for k, v in reference.state_dict().items()}
    fused = next(m for m in course.modules() if isinstance(m, cm.CourseConvBN) and m.route == cm.FUSED) \
        if name == "ResNet-50" else None
    if fused is not None:
        assert fused._fused.conv is fused.conv and fused._fused.bn is fused.bn and fused._inference.conv is fused.conv


@pytest.mark.parametrize("name", ["MobileNetV2"])
def test_a_second_float32_implementation_passes_the_comparison(name, monkeypatch):
    """compare() on the CPU, with PyTorch's channels_last path (another summation order) in place of the
    course's model: every parameter, running statistic and output compared, within the tolerances, and
    not all equal (so the stand-in does differ). compare() does not depend on the model; MobileNetV2
    alone (ResNet-50 adds 6-30 s to CI, which is at its limit; the GPU test compares both)."""
    monkeypatch.setattr(cm, "course_model", lambda model_name, root=None, **kwargs:
                        MODELS[model_name](**kwargs).to(memory_format=torch.channels_last))
    r = cm.compare(name, batch=BATCH, size=SIZE, seed=SEED, device="cpu")
    assert len(r.grads) == len(r.eval_grads) == sum(1 for _ in MODELS[name]().parameters())
    assert len(r.stats) == 2 * LAYERS[name][0] and r.batches_tracked_equal
    assert 0 < r.output.vs_torch and r.output.torch_vs_fp64 < cm.OUT_TOL
    assert not r.problems(), "\n".join(r.problems())


@pytest.mark.gpu
@pytest.mark.parametrize("name", NAMES)
def test_the_course_model_matches_pytorch_in_strict_fp32(name):
    before = (torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32)
    r = cm.compare(name, batch=BATCH, size=SIZE, seed=SEED)
    assert (torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32) == before  # restored
    assert len(r.grads) == len(r.eval_grads) == sum(1 for _ in MODELS[name]().parameters())
    assert not r.problems(), f"{name}:\n" + "\n".join(r.problems())


@pytest.mark.gpu
@pytest.mark.parametrize("name", NAMES)
def test_the_course_model_runs_the_course_kernels_and_no_pytorch_convolution(name):
    counts = cm.check_course_kernels(name, batch=BATCH, size=SIZE, seed=SEED)  # raises CheckFailure when not
    assert counts
