"""A torchao int4 weight-only (and int8 dynamic) Llama's decode step in ONNX Runtime, beside its float32 export.

A Llama of ~60 M parameters (hidden 768, 8 layers, 12 query heads sharing 4 KV heads, random
weights) is quantized with ``quantize_(model, IntxWeightOnlyConfig(torch.int4, PerGroup(32)))``
(every Linear, the output head included) and wrapped as one decode step over plain tensors (token,
mask, KV cache in; logits and the grown cache out). Exported graphs, each run interleaved call by
call in one process at 1 and 2 intra-op threads, ONNX Runtime's default session options:

- ``float32``: the model before quantization, ``torch_onnx_fx.export`` (opset 20, the default);
- ``int4 DequantizeLinear``: the quantized model at opset 21 (blocked DequantizeLinear into Gemm);
- ``int4 MatMulNBits``: the same with ``fusion="onnxruntime"`` (accuracy level 1);
- ``int4 MatMulNBits level 4``: that graph with the attribute set to 4 by hand, never emitted by
  the exporter (it quantizes the activations): what the faster kernel costs in accuracy;
- ``torch.onnx int4``: ``torch.onnx.export(dynamo=True)`` of the quantized model;
- ``int8 dynamic``: the model quantized with ``Int8DynamicActivationInt8WeightConfig()`` (int8
  weights, activations quantized per token at run time, ``aten::_int_mm``), exported at the
  default opset, and ``torch.onnx int8 dynamic`` the same by torch.onnx.

Reported: median milliseconds per step and the ratio to the float32 export; the largest logit
difference from the model each graph was exported from (the torchao model for the int4 ones);
the bytes of the saved weights.

    python tools/benchmarks/weight_only_bench.py [--past 128] [--calls 30]

Results: ``tools/results/weight_only.jsonl``, merged by (variant, threads); the table in
``docs/quantization.md`` between its weight-only-bench markers (``--render-only`` redraws it).
"""

from __future__ import annotations

import argparse
import importlib.metadata
import statistics
import sys
import tempfile
import time
import warnings
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tools.benchmarks import decode_bench  # noqa: E402
from tools._common import (  # noqa: E402
    describe_machine, describe_versions, machine_info, merge_results, read_results, replace_section,
)

RESULTS = REPO / "tools" / "results" / "weight_only.jsonl"
PAGE = REPO / "docs" / "quantization.md"
START, END = "<!-- weight-only-bench:start -->", "<!-- weight-only-bench:end -->"
LAYERS, KV_HEADS = 8, 4
VARIANTS = (
    "float32", "int4 DequantizeLinear", "int4 MatMulNBits", "int4 MatMulNBits level 4", "torch.onnx int4",
    "int8 dynamic", "torch.onnx int8 dynamic",
)


def _source(variant: str) -> str:
    """Which model a variant exports: the float one, the int4 weight-only or the int8 dynamic one."""
    return "float32" if variant == "float32" else "int8dyn" if "int8 dynamic" in variant else "int4"


def _model() -> Any:
    import transformers

    config = transformers.LlamaConfig(
        vocab_size=32000, hidden_size=768, intermediate_size=2048, num_hidden_layers=LAYERS, num_attention_heads=12,
        num_key_value_heads=KV_HEADS, max_position_embeddings=4096,
    )
    config._attn_implementation = "sdpa"
    return transformers.LlamaForCausalLM(config).eval()


def _export(variant: str, step: Any, example: tuple[Any, ...], path: Path) -> int:
    """Export ``variant`` to ``path``; the bytes of its weights."""
    import onnx
    import torch

    shapes = decode_bench.cache_shapes(LAYERS)
    if variant.startswith("torch.onnx"):
        program = torch.onnx.export(step, example, dynamic_shapes=shapes, dynamo=True, verbose=False)
    else:
        import torch_onnx_fx

        options: dict[str, Any] = {"opset_version": 21} if variant.startswith("int4") else {}
        if "MatMulNBits" in variant:
            options["fusion"] = "onnxruntime"
        program = torch_onnx_fx.export(step, example, dynamic_shapes=shapes, verbose=False, **options)
    if variant.endswith("level 4"):
        import onnx_ir as ir

        for node in program.model.graph:
            if node.op_type == "MatMulNBits":
                node.attributes["accuracy_level"] = ir.AttrInt64("accuracy_level", 4)
    program.save(str(path), external_data=True)
    model = onnx.load(str(path), load_external_data=False)
    return sum(
        int(entry.value) for tensor in model.graph.initializer for entry in tensor.external_data if entry.key == "length"
    ) + sum(len(tensor.raw_data) for tensor in model.graph.initializer)


def _quantized(model: Any, source: str) -> Any:
    import copy

    import torch
    from torchao.quantization import Int8DynamicActivationInt8WeightConfig, IntxWeightOnlyConfig, quantize_
    from torchao.quantization.granularity import PerGroup

    quantized = copy.deepcopy(model)
    if source == "int8dyn":
        quantize_(quantized, Int8DynamicActivationInt8WeightConfig())
    else:
        quantize_(quantized, IntxWeightOnlyConfig(weight_dtype=torch.int4, granularity=PerGroup(32)))
    return quantized


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--past", type=int, default=128, help="cache length")
    parser.add_argument("--calls", type=int, default=30, help="timed calls per graph and thread count")
    parser.add_argument("--threads", default="1,2")
    parser.add_argument("--render-only", action="store_true", help="redraw the page's table from the results")
    options = parser.parse_args(argv)
    if options.render_only:
        machine, records = read_results(RESULTS)
        _write_page(machine, records)
        return 0
    warnings.simplefilter("ignore")
    import numpy as np
    import onnxruntime as ort
    import torch

    torch.manual_seed(0)
    float_model = _model()
    steps = {"float32": decode_bench._step(float_model)}
    for source in ("int4", "int8dyn"):
        steps[source] = decode_bench._step(_quantized(float_model, source))
    token, mask, cache = decode_bench._inputs(options.past, float_model.config)
    with torch.no_grad():
        expected = {name: step(token, mask, cache)[0].numpy() for name, step in steps.items()}
    header = machine_info("python tools/benchmarks/weight_only_bench.py " + " ".join(sys.argv[1:] if argv is None else argv))
    header["torchao"] = importlib.metadata.version("torchao")
    arrays = [token.numpy(), mask.numpy(), *(c.numpy() for c in cache)]
    records: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as scratch:
        sizes, paths = {}, {}
        for variant in VARIANTS:
            paths[variant] = Path(scratch) / f"{variant.replace(' ', '_').replace('.', '_')}.onnx"
            step = steps[_source(variant)]
            try:
                sizes[variant] = _export(variant, step, (token, mask, cache), paths[variant])
            except Exception as exc:  # noqa: BLE001 - a competitor's failure is a result
                print(f"{variant}: export failed: {type(exc).__name__}: {str(exc)[:200]}")
        for threads in (int(t) for t in options.threads.split(",")):
            sessions = {}
            for variant in sizes:
                session_options = ort.SessionOptions()
                session_options.intra_op_num_threads = threads
                # Interleaved sessions: a finished run's spinning workers would take the cores the
                # next session needs (2-thread float32 measured 2.6x slower than 1 thread with them).
                session_options.add_session_config_entry("session.intra_op.allow_spinning", "0")
                sessions[variant] = ort.InferenceSession(str(paths[variant]), session_options, providers=["CPUExecutionProvider"])
            feeds = {v: {i.name: a for i, a in zip(s.get_inputs(), arrays, strict=True)} for v, s in sessions.items()}
            diffs = {
                v: float(np.abs(s.run(None, feeds[v])[0] - expected[_source(v)]).max())
                for v, s in sessions.items()
            }
            times: dict[str, list[float]] = {v: [] for v in sessions}
            for _ in range(3):
                for v, s in sessions.items():
                    s.run(None, feeds[v])
            for _ in range(options.calls):
                for v, s in sessions.items():
                    start = time.perf_counter()
                    s.run(None, feeds[v])
                    times[v].append((time.perf_counter() - start) * 1000)
            base = statistics.median(times["float32"])
            for v in sessions:
                median = statistics.median(times[v])
                records.append({
                    "variant": v, "threads": threads, "past": options.past, "ms": round(median, 3),
                    "ratio": round(median / base, 3), "max_abs_diff": diffs[v], "weight_bytes": sizes[v],
                    "max_abs_logit": float(np.abs(expected[_source(v)]).max()),
                })
    records = merge_results(RESULTS, header, records, key=("variant", "threads"))
    print(_table(records))
    _write_page(header, records)
    return 0


def _table(records: list[dict[str, Any]]) -> str:
    lines = [
        "| graph | threads | ms per step | ratio to float32 | logits max difference (largest logit) | weights MB |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for r in records:
        lines.append(
            f"| {r['variant']} | {r['threads']} | {r['ms']:.2f} | {r['ratio']:.2f} "
            f"| {r['max_abs_diff']:.1e} ({r.get('max_abs_logit', float('nan')):.2f}) | {r['weight_bytes'] / 1e6:.0f} |"
        )
    return "\n".join(lines)


def _write_page(machine: dict[str, Any] | None, records: list[dict[str, Any]]) -> None:
    if machine is None:
        raise SystemExit(f"no results in {RESULTS}: run the benchmark first")
    section = "\n".join([
        START,
        f"Generated by `python tools/benchmarks/weight_only_bench.py` on {describe_machine(machine)}, "
        f"{describe_versions(machine, ('torch', 'torchao', 'onnxruntime'))}, commit {machine['commit']}, {machine['date']}. "
        f"Decode step at a past of {records[0]['past'] if records else '?'} positions; ONNX Runtime's default session options.",
        "",
        _table(records),
        END,
    ])
    updated = replace_section(PAGE.read_text(), START, END, section)
    if updated is None:
        raise SystemExit(f"{PAGE} lacks the {START} / {END} markers")
    PAGE.write_text(updated)


if __name__ == "__main__":
    sys.exit(main())
