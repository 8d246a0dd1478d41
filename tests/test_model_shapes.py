"""The model layers `make bench` times every op on (grader/bench/model_shapes.py), checked against what is
published of those models, and the benchmark page's table of them (grader.bench.benchmarks), without a GPU."""
from __future__ import annotations

import pytest

from grader.bench import benchmarks, model_shapes as ms


def _resnet50_from_tables(n: int = 32, size: int = 224) -> list:
    """Every layer of torchvision's ResNet-50 in order (bottlenecks 3-4-6-3, stride on the 3x3)."""
    out: list = [ms.Conv("ResNet-50", "conv1", n, 3, size, size, 64, 7, 2, 3)]
    h, cin = size // 4, 64  # conv1's stride 2, then the 3x3 max pool's
    for stage, (width, blocks, stride) in enumerate([(64, 3, 1), (128, 4, 2), (256, 6, 2), (512, 3, 2)], 1):
        for b in range(blocks):
            s = stride if b == 0 else 1
            tag = f"layer{stage}.{b}"
            out += [ms.Conv("ResNet-50", f"{tag}.conv1", n, cin, h, h, width, 1),
                    ms.Conv("ResNet-50", f"{tag}.conv2", n, width, h, h, width, 3, s, 1),
                    ms.Conv("ResNet-50", f"{tag}.conv3", n, width, h // s, h // s, 4 * width, 1)]
            if b == 0:
                out.append(ms.Conv("ResNet-50", f"{tag}.downsample", n, cin, h, h, 4 * width, 1, s))
            h, cin = h // s, 4 * width
    out.append(ms.Matmul("ResNet-50", "fc", n, 2048, 1000))
    return out


def _mobilenet_v2_from_tables(n: int = 32, size: int = 224) -> list:
    """Every layer of MobileNetV2 in order: inverted residuals (1x1 expansion, depthwise 3x3, 1x1
    projection) from its (expansion, channels, repeats, stride) table."""
    out: list = [ms.Conv("MobileNetV2", "features.0", n, 3, size, size, 32, 3, 2, 1)]
    h, cin, index = size // 2, 32, 1
    for t, c, repeats, stride in [(1, 16, 1, 1), (6, 24, 2, 2), (6, 32, 3, 2), (6, 64, 4, 2), (6, 96, 3, 1),
                                  (6, 160, 3, 2), (6, 320, 1, 1)]:
        for i in range(repeats):
            s, hidden, tag = stride if i == 0 else 1, cin * t, f"features.{index}"
            if t != 1:
                out.append(ms.Conv("MobileNetV2", f"{tag}.expand", n, cin, h, h, hidden, 1))
            out.append(ms.Conv("MobileNetV2", f"{tag}.depthwise", n, hidden, h, h, hidden, 3, s, 1, groups=hidden))
            h = (h - 1) // s + 1
            out.append(ms.Conv("MobileNetV2", f"{tag}.project", n, hidden, h, h, c, 1))
            cin, index = c, index + 1
    out += [ms.Conv("MobileNetV2", "features.18", n, cin, h, h, 1280, 1), ms.Matmul("MobileNetV2", "classifier", n, 1280, 1000)]
    return out


@pytest.mark.parametrize("derived,tables", [(ms.resnet50, _resnet50_from_tables),
                                            (ms.mobilenet_v2, _mobilenet_v2_from_tables)])
@pytest.mark.parametrize("n,size", [(32, 224), (1, 224), (2, 128)])
def test_the_layers_traced_from_the_modules_equal_those_of_the_stage_tables(derived, tables, n, size):
    """model_shapes traces ResNet-50 and MobileNetV2 from their modules (grader.bench.models); the layers
    it generated before from each model's stage table, kept here, must be the same, names included."""
    assert derived(n, size) == tables(n, size)


@pytest.mark.parametrize("layers,macs", [(ms.resnet50, 4.089e9), (ms.mobilenet_v2, 300.77e6)])
def test_each_model_costs_what_is_published(layers, macs):
    """torchvision lists ResNet-50 at 4.09 GFLOPs and MobileNetV2 at 0.30 (multiply-adds per 224 x 224
    image): a wrong stride, width or block count in a generator would move the total."""
    total = sum(layer.macs for layer in layers(n=1))
    assert abs(total - macs) / macs < 1e-3, total


def test_every_layer_is_well_formed():
    for layer in ms.all_layers():
        assert layer.macs > 0, layer
        if isinstance(layer, (ms.Conv, ms.ConvTranspose)):
            assert min(layer.out_hw) > 0, layer
        if isinstance(layer, ms.Conv):
            assert layer.cin % layer.groups == 0 and layer.cout % layer.groups == 0, layer


def test_the_models_the_bench_promises_are_there():
    layers = ms.all_layers()
    assert {layer.model for layer in layers} == {"ResNet-50", "MobileNetV2", "UNet decoder", "GPT-2"}
    depthwise = [x for x in layers if isinstance(x, ms.Conv) and x.groups == x.cin == x.cout > 1]
    assert len(depthwise) == 17  # one per MobileNetV2 inverted residual
    ups = [x for x in layers if isinstance(x, ms.ConvTranspose)]
    assert [x.out_hw[0] for x in ups] == [2 * x.h for x in ups] and len(ups) == 4
    assert any(isinstance(x, ms.Matmul) and x.m == 1 for x in layers)  # a matrix-vector product


def test_unique_keeps_one_layer_per_shape_and_counts_the_rest():
    layers = ms.all_layers()
    kept = ms.unique(layers)
    assert sum(count for _, count in kept) == len(layers)
    keys = [(x.model, type(x).__name__, x.shape) for x, _ in kept]
    assert len(keys) == len(set(keys))
    assert any(count > 1 for _, count in kept)


def test_the_page_shows_the_layers_and_the_terminal_sums_them_up():
    rows = [{"model": "ResNet-50", "layer": "conv1", "shape": "1x3x8x8, 3->4, 3x3", "count": 1, "tflops": 1.5,
             "ours_us": 10.0, "pytorch_strict_us": 8.0, "vs_strict": 0.8, "ours_tf32_us": 10.0,
             "pytorch_tf32_us": 5.0, "vs_tf32": 0.5},
            {"model": "MobileNetV2", "layer": "features.1.depthwise", "shape": "x", "count": 1,
             "skipped": "grouped (depthwise) convolution: this op takes no groups yet"}]
    result = {"exercise": "06_conv2d", "label": "fp32", "unit": "FLOP", "rows": [
        {"version": "kernel2", "time_s": 1e-3, "rate": 1e12}, {"version": "PyTorch", "time_s": 1e-3, "rate": 1e12}],
        "extra": {"model layers": rows, "other": 1}}
    info = {"gpu": "GPU", "driver": "1", "cuda": "13.0", "cudnn": "9", "torch": "2", "date": "today", "sms": 1}
    text, md = benchmarks.render([result], {"copy_bandwidth": 1e12, "fp32_matmul": 1e13}, info)
    assert "model layers: 1 timed, vs PyTorch strict fp32 0.80x-0.80x" in text and "1 not supported yet" in text
    assert "| ResNet-50 | conv1 | 1x3x8x8, 3->4, 3x3 | 1 | 10.0 us | 1.50 | 0.80x | 0.50x |" in md
    assert "not run: grouped (depthwise)" in md and "- other: 1" in md and "vs_strict" not in md


def test_the_published_page_shows_every_measurement_as_text_not_json():
    """The results page (docs/results/<gpu>/results.md, rendered from results.json) shows each
    exercise's other measurements as lists and tables a reader can scan: every value of every record
    the benchmark wrote appears in the page, and none of the shapes it writes falls back to a JSON dump."""
    import json
    from pathlib import Path

    for page in sorted(Path(benchmarks.env.REPO, "docs", "results").glob("*/results.json")):
        data = json.loads(page.read_text())
        _, md = benchmarks.render(data["results"], data["limits"], data["info"])
        assert "```json" not in md, page
        for result in data["results"]:
            for key, value in (result.get("extra") or {}).items():
                if key == ms.EXTRA_KEY:
                    continue
                assert key in md, (page, result["exercise"], key)
                rows = benchmarks._records(value) if not benchmarks._scalar(value) else [{"value": value}]
                for row in rows:
                    for cell in row.values():
                        assert benchmarks._cell(cell) in md, (result["exercise"], key, cell)


def test_the_layers_summary_gives_the_worst_and_the_median_ratio_in_both_math_modes():
    from grader.bench.benchmarks import layers_summary

    rows = [{"vs_strict": v, "vs_tf32": t} for v, t in ((0.5, 0.9), (1.2, 0.7), (0.8, 1.1))]
    line = layers_summary(rows + [{"skipped": "failed: RuntimeError"}])
    assert "0.50x-1.20x (median 0.80x)" in line and "0.70x-1.10x (median 0.90x)" in line and "1 FAILED" in line


def test_the_page_plots_each_ops_worst_and_median_layer_ratio_in_both_math_modes(tmp_path):
    rows = [{"model": "ResNet-50", "layer": f"conv{i}", "shape": "s", "count": 1, "tflops": 1.0, "ours_us": 1.0,
             "vs_strict": v, "vs_tf32": t} for i, (v, t) in enumerate(((0.5, 0.9), (1.2, 0.7), (0.8, 1.1)))]
    layered = {"exercise": "10_cudnn_conv", "label": "fp32", "unit": "FLOP", "work": 1e9, "rows": [
        {"version": "reference", "time_s": 1e-3, "rate": 1e12}, {"version": "PyTorch", "time_s": 1e-3, "rate": 1e12}],
        "extra": {ms.EXTRA_KEY: rows + [{"model": "UNet", "layer": "up", "shape": "s", "count": 1,
                                          "skipped": "failed: RuntimeError"}]}}
    plain = {**layered, "exercise": "01_leaky_relu", "unit": "B", "extra": {}}
    assert benchmarks.layer_ratios([plain, layered]) == [
        ("10_cudnn_conv", {"strict fp32": (0.5, 0.8), "TF32 allowed": (0.7, 0.9)})]
    limits = {"copy_bandwidth": 1e12, "fp32_matmul": 1e13}
    benchmarks.plot([plain, layered], limits, tmp_path)
    assert (tmp_path / "layers.png").stat().st_size > 1000
    info = {"gpu": "GPU", "driver": "1", "cuda": "13.0", "cudnn": "9", "torch": "2", "date": "today", "sms": 1}
    assert "(layers.png)" in benchmarks.render([plain, layered], limits, info)[1]
    # no layer timed: no plot, no link
    (tmp_path / "none").mkdir()
    benchmarks.plot([plain], limits, tmp_path / "none")
    assert not (tmp_path / "none" / "layers.png").exists()
    assert "(layers.png)" not in benchmarks.render([plain], limits, info)[1]


def test_every_bench_layer_s_geometry_is_pytorch_s():
    """Each layer `make bench` times (the models' and the shape classes'), run by PyTorch on the meta
    device: its weight shape is accepted, and its output size and multiply-adds are the layer's."""
    import torch
    import torch.nn.functional as F

    for layer in ms.bench_layers():
        if isinstance(layer, ms.Matmul):
            continue
        x, w = torch.empty(layer.x_shape, device="meta"), torch.empty(layer.w_shape, device="meta")
        if isinstance(layer, ms.Conv):
            y = F.conv2d(x, w, None, layer.stride, layer.padding, layer.dilation, layer.groups)
            macs = y.numel() * w[0].numel()
        else:
            y = F.conv_transpose2d(x, w, None, layer.stride, layer.padding, layer.output_padding, layer.groups,
                                   layer.dilation)
            macs = x.numel() * w[0].numel()
        assert tuple(y.shape[2:]) == layer.out_hw and layer.macs == macs, layer


def test_the_shape_classes_hold_the_kinds_the_models_lack():
    """What public kernel benchmarks pose and the models do not: each kind by its geometry, not its name."""
    classes = ms.shape_classes()
    convs = [x for x in classes if isinstance(x, ms.Conv)]
    ups = [x for x in classes if isinstance(x, ms.ConvTranspose)]
    assert {x.model for x in classes} == {ms.CLASSES}
    for kind in (convs, ups):
        assert any(x.kernel[0] != x.kernel[1] for x in kind), "a kernel wider than tall (or taller than wide)"
        assert any(x.dilation > 1 for x in kind), "dilation"
        assert any(x.n >= 128 and x.cin <= 32 for x in kind), "a large batch of few channels"
        assert any(1 < x.groups < x.cin for x in kind), "groups, not depthwise"
    assert any(x.dilation > 1 and x.stride > 1 and x.padding > 0 and x.output_padding > 0 for x in ups)
    assert any(x.stride > 2 for x in ups) and any(x.dilation > 1 and x.stride > 1 for x in convs)
    assert any(x.groups == x.cin == x.cout and x.k > 3 for x in convs), "a depthwise kernel past 3x3"
    assert any(x.h != x.w for x in convs), "an image wider than tall"
    shapes = [(type(x).__name__, x.shape) for x in ms.bench_layers()]
    assert all(shapes.count(s) == 1 for s in {(type(x).__name__, x.shape) for x in classes}), \
        "a shape class repeats a model's layer"


def _signatures(path, names):
    """The parameters, in order, of the functions `names` in a solution's Python file (read, not imported:
    importing builds its extension)."""
    import ast

    tree = ast.parse(path.read_text())
    return {f.name: [a.arg for a in f.args.args] for f in tree.body
            if isinstance(f, ast.FunctionDef) and f.name in names}


def test_the_bench_passes_every_layer_s_geometry_to_ours_and_to_pytorch(monkeypatch):
    """06's, 07's and 10's calls of `make bench` on every layer, with each op stood in for by PyTorch's on the
    meta device under the solution's own parameter names and order: ours and PyTorch's give the layer's
    output, so no geometry field (kernel width, dilation, output padding, groups) is dropped on either side."""
    import inspect

    import torch
    import torch.nn.functional as F

    from grader.bench import benchmark_extras as be

    def conv2d(x, weight, bias=None, stride=1, padding=0, dilation=1, groups=1, version=None, mode=None):
        return F.conv2d(x, weight, bias, stride, padding, dilation, groups)

    def conv_transpose2d(x, weight, bias=None, stride=1, padding=0, output_padding=0, groups=1, dilation=1,
                         version=None, mode=None):
        return F.conv_transpose2d(x, weight, bias, stride, padding, output_padding, groups, dilation)

    solutions = be.env.REPO / "solutions"
    own = {**_signatures(solutions / "06_conv2d" / "conv2d.py", {"conv2d"}),
           **_signatures(solutions / "07_conv_transpose2d" / "conv_transpose2d.py", {"conv_transpose2d"})}
    cudnn = _signatures(solutions / "10_cudnn_conv" / "cudnn_conv.py", {"conv2d", "conv_transpose2d"})
    for name, fake in (("conv2d", conv2d), ("conv_transpose2d", conv_transpose2d)):
        params = list(inspect.signature(fake).parameters)
        assert own[name] == [p for p in params if p != "mode"], (name, own[name])
        assert cudnn[name] == [p for p in params if p != "version"], (name, cudnn[name])

    module = type("Module", (), {"conv2d": staticmethod(conv2d), "conv_transpose2d": staticmethod(conv_transpose2d)})
    monkeypatch.setattr(be, "_reference", lambda exercise: module)
    monkeypatch.setattr(be.torch.cuda, "get_device_capability", lambda *a: (9, 0))
    seen = []

    def time_layers(kind, inputs_of, calls, skip=lambda layer: None):
        for layer in ms.bench_layers():
            if not isinstance(layer, kind) or skip(layer):
                continue
            inp = (torch.empty(layer.x_shape, device="meta"), torch.empty(layer.w_shape, device="meta"))
            for call in calls(layer):
                if call is not None:
                    assert tuple(call(inp).shape[2:]) == layer.out_hw, layer
            seen.append(layer)
        return []

    monkeypatch.setattr(be, "time_layers", time_layers)
    be.conv2d_layers(), be.conv_transpose2d_layers(), be.cudnn_conv_layers()
    assert set(ms.shape_classes()) <= set(seen)


def test_the_summary_names_the_shape_classes_worst_apart():
    from grader.bench.benchmarks import layers_summary

    rows = [{"model": "ResNet-50", "vs_strict": 0.5, "vs_tf32": 0.6},
            {"model": ms.CLASSES, "vs_strict": 0.9, "vs_tf32": 1.3},
            {"model": ms.CLASSES, "vs_strict": 1.1, "vs_tf32": 0.7}]
    assert "the 2 shape classes' worst 0.90x strict, 0.70x TF32" in layers_summary(rows)
    assert "shape classes" not in layers_summary(rows[:1])
