"""ONNX Runtime latency of exported transformers, torch_onnx_fx's graphs beside torch.onnx's.

Llama, Qwen2, Mistral (decoders), BERT (encoder) and ViT, each of 50-100 M parameters with
random weights, are exported once with a dynamic batch and sequence by
``torch.onnx.export(dynamo=True)`` (its defaults), by ``torch_onnx_fx.export`` (its defaults:
opset 20, no fused operators) and by ``torch_onnx_fx.export(opset_version=23)`` (the standard's
fused Attention, RMSNormalization and RotaryEmbedding: ``fusion="standard"``, docs/fusion.md).
Each graph runs in ONNX Runtime (CPU, one intra-op thread) at sequence 128 and 512 (ViT:
images of 384 x 384 pixels, 577 tokens), the variants interleaved run by run so that a load
on the machine weighs on all alike; the median of the timed runs is reported with its ratio to
torch.onnx's. Every graph's outputs are compared with eager PyTorch (inputs with padding, so that
fully masked attention rows are exercised), and ``onnxruntime.tools.symbolic_shape_infer`` is
run on every graph (ORT's transformer tools need it).

    python tools/benchmarks/latency_bench.py [--models llama,bert] [--runs 10]

Results: ``tools/results/latency.jsonl`` and the generated section of ``docs/fusion.md``.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import time
import warnings
from pathlib import Path
from typing import Any, Callable

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tools._common import machine_info, replace_section  # noqa: E402

RESULTS = REPO / "tools" / "results" / "latency.jsonl"
PAGE = REPO / "docs" / "fusion.md"
START, END = "<!-- latency:start -->", "<!-- latency:end -->"
VARIANTS = ("torch.onnx", "torch_onnx_fx", "torch_onnx_fx opset 23")
FUSED = ("Attention", "RMSNormalization", "RotaryEmbedding")


def _decoder(kind: str) -> Any:
    import transformers

    config_class = {"llama": "LlamaConfig", "qwen2": "Qwen2Config", "mistral": "MistralConfig"}[kind]
    model_class = {"llama": "LlamaForCausalLM", "qwen2": "Qwen2ForCausalLM", "mistral": "MistralForCausalLM"}[kind]
    config = getattr(transformers, config_class)(
        vocab_size=32000, hidden_size=512, intermediate_size=1376, num_hidden_layers=8, num_attention_heads=8,
        num_key_value_heads=4, max_position_embeddings=1024, use_cache=False,
    )
    config._attn_implementation = "sdpa"
    return getattr(transformers, model_class)(config).eval()


def _bert() -> Any:
    import transformers

    config = transformers.BertConfig(
        vocab_size=30522, hidden_size=512, intermediate_size=2048, num_hidden_layers=8, num_attention_heads=8,
        max_position_embeddings=1024,
    )
    config._attn_implementation = "sdpa"
    return transformers.BertModel(config).eval()


def _vit() -> Any:
    import transformers

    config = transformers.ViTConfig(
        hidden_size=768, intermediate_size=3072, num_hidden_layers=8, num_attention_heads=12, image_size=384,
        patch_size=16,
    )
    config._attn_implementation = "sdpa"
    return transformers.ViTModel(config, add_pooling_layer=False).eval()


def _tokens(length: int, left_padding: bool) -> dict[str, Any]:
    import torch

    ids = torch.randint(3, 30000, (2, length), generator=torch.Generator().manual_seed(length))
    mask = torch.ones(2, length, dtype=torch.int64)
    if left_padding:
        mask[1, : length // 8] = 0
    else:
        mask[1, -length // 8:] = 0
    return {"input_ids": ids, "attention_mask": mask}


def _pixels(size: int) -> dict[str, Any]:
    import torch

    return {"pixel_values": torch.randn(2, 3, size, size, generator=torch.Generator().manual_seed(size))}


_TEXT_SHAPES = {"input_ids": {0: "batch", 1: "sequence"}, "attention_mask": {0: "batch", 1: "sequence"}}
# name -> (build, inputs for a size, sizes, dynamic shapes)
MODELS: dict[str, tuple[Callable[[], Any], Callable[[int], dict], tuple[int, ...], Any]] = {
    "llama": (lambda: _decoder("llama"), lambda n: _tokens(n, True), (128, 512), _TEXT_SHAPES),
    "qwen2": (lambda: _decoder("qwen2"), lambda n: _tokens(n, True), (128, 512), _TEXT_SHAPES),
    "mistral": (lambda: _decoder("mistral"), lambda n: _tokens(n, True), (128, 512), _TEXT_SHAPES),
    "bert": (_bert, lambda n: _tokens(n, False), (128, 512), _TEXT_SHAPES),
    "vit": (_vit, _pixels, (384,), {"pixel_values": {0: "batch"}}),
}


def _export(variant: str, model: Any, kwargs: dict, shapes: Any) -> Any:
    import torch

    if variant == "torch.onnx":
        return torch.onnx.export(model, (), kwargs=kwargs, dynamic_shapes=shapes, dynamo=True, verbose=False)
    import torch_onnx_fx

    opset = 23 if variant.endswith("opset 23") else None
    return torch_onnx_fx.export(model, (), kwargs=kwargs, dynamic_shapes=shapes, opset_version=opset, verbose=False)


def _session(proto: Any) -> Any:
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = 1
    return ort.InferenceSession(proto.SerializeToString(), options, providers=["CPUExecutionProvider"])


def _shape_inference(proto: Any) -> str:
    from onnxruntime.tools.symbolic_shape_infer import SymbolicShapeInference

    try:
        SymbolicShapeInference.infer_shapes(proto, auto_merge=True)
        return "ok"
    except Exception as exc:  # noqa: BLE001 - the tool's failure is the result
        return f"{type(exc).__name__}: {str(exc).splitlines()[0][:120] if str(exc) else 'no message'}"


def measure(name: str, runs: int) -> list[dict[str, Any]]:
    import numpy as np
    import torch

    build, inputs, sizes, shapes = MODELS[name]
    torch.manual_seed(0)
    model = build()
    parameters = sum(p.numel() for p in model.parameters())
    example = inputs(sizes[0])
    programs = {variant: _export(variant, model, example, shapes) for variant in VARIANTS}
    sessions = {variant: _session(p.model_proto) for variant, p in programs.items()}
    records = []
    for size in sizes:
        feeds_torch = inputs(size)
        with torch.no_grad():
            expected = model(**feeds_torch)[0]
        record: dict[str, Any] = {"model": name, "parameters": parameters, "size": size, "variants": {}}
        feeds = {}
        for variant, program in programs.items():
            graph_inputs = [i.name for i in program.model_proto.graph.input]
            feeds[variant] = {k: v.numpy() for k, v in zip(graph_inputs, feeds_torch.values())}
            out = sessions[variant].run(None, feeds[variant])[0]
            ops = collections.Counter(n.op_type for n in program.model_proto.graph.node)
            record["variants"][variant] = {
                "nodes": len(program.model_proto.graph.node),
                "fused": {op: ops[op] for op in FUSED if ops[op]},
                "max_abs_diff": float(np.abs(out - expected.numpy()).max()),
                "symbolic_shape_inference": _shape_inference(program.model_proto),
            }
        times: dict[str, list[float]] = {variant: [] for variant in VARIANTS}
        for _ in range(2):
            for variant in VARIANTS:
                sessions[variant].run(None, feeds[variant])
        for _ in range(runs):
            for variant in VARIANTS:
                start = time.perf_counter()
                sessions[variant].run(None, feeds[variant])
                times[variant].append(time.perf_counter() - start)
        base = float(np.median(times["torch.onnx"]))
        for variant in VARIANTS:
            median = float(np.median(times[variant]))
            record["variants"][variant].update(ms=round(1000 * median, 2), ratio=round(median / base, 3))
        records.append(record)
        print(json.dumps(record), flush=True)
    return records


def render(header: dict[str, Any], records: list[dict[str, Any]]) -> str:
    lines = [
        START,
        "Generated by `tools/benchmarks/latency_bench.py`; do not edit this section by hand. Regenerate it with "
        "`python tools/benchmarks/latency_bench.py`.",
        "",
        f"Measured {header['date']} on {header['cores']} cores ({header['cpu']}), torch {header['torch']}, "
        f"onnxruntime {header['onnxruntime']}, commit {header['commit']}; ONNX Runtime on the CPU with one "
        "intra-op thread, batch 2, median of the timed runs, the three graphs interleaved run by run.",
        "",
        "| model | params | seq | torch.onnx ms | ours ms (ratio) | ours opset 23 ms (ratio) | nodes (torch.onnx / ours / opset 23) "
        "| fused at opset 23 | max diff vs eager (ours / opset 23 / torch.onnx) | symbolic shape inference (ours / opset 23) |",
        "|---|---:|---:|---:|---:|---:|---|---|---|---|",
    ]
    for r in records:
        v = r["variants"]
        theirs, ours, fused = v["torch.onnx"], v["torch_onnx_fx"], v["torch_onnx_fx opset 23"]
        seq = f"{r['size']}px" if r["model"] == "vit" else str(r["size"])
        lines.append(
            f"| {r['model']} | {r['parameters'] / 1e6:.0f} M | {seq} | {theirs['ms']:.1f} | {ours['ms']:.1f} ({ours['ratio']:.2f}) "
            f"| {fused['ms']:.1f} ({fused['ratio']:.2f}) | {theirs['nodes']} / {ours['nodes']} / {fused['nodes']} "
            f"| {', '.join(f'{n} {op}' for op, n in fused['fused'].items()) or '–'} "
            f"| {ours['max_abs_diff']:.1e} / {fused['max_abs_diff']:.1e} / {theirs['max_abs_diff']:.1e} "
            f"| {ours['symbolic_shape_inference']} / {fused['symbolic_shape_inference']} |"
        )
    lines.append(END)
    return "\n".join(lines)


def write_page(section: str) -> None:
    replaced = replace_section(PAGE.read_text(), START, END, section)
    if replaced is None:
        raise SystemExit(f"{PAGE} lacks the markers {START} ... {END}")
    PAGE.write_text(replaced)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", default=",".join(MODELS))
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--render-only", action="store_true")
    options = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    if options.render_only:
        header, *records = [json.loads(line) for line in RESULTS.read_text().splitlines()]
    else:
        header = machine_info("python tools/benchmarks/latency_bench.py " + " ".join(argv or sys.argv[1:]))
        records = [record for name in options.models.split(",") for record in measure(name, options.runs)]
        RESULTS.write_text("\n".join(json.dumps(entry) for entry in [header, *records]) + "\n")
    write_page(render(header, records))
    return 0


if __name__ == "__main__":
    sys.exit(main())
