"""The large-model recipe end to end, measured: meta build, export, weights from safetensors shards,
save with external data, and a check of the saved model against eager.

    python tools/benchmarks/large_model_recipe.py [--layers 2] [--out /tmp/recipe]

A Llama-3-8B-shaped model (hidden 4096, 32 heads, 8 KV heads, intermediate 14336, vocab 128256)
with ``--layers`` layers: exported from the ``meta`` device with default settings, given real
random weights from two safetensors shards (written here by the ``safetensors`` package, as a
checkpoint would be), saved, run from disk in ONNX Runtime and compared with eager PyTorch.
Prints one JSON line of times, peak RSS and the largest difference; results in
``tools/results/large_model_recipe.json``.

``--int4``: the model quantized by torchao (``IntxWeightOnlyConfig(torch.int4, PerGroup(32))``, every
Linear) on the meta device, exported at opset 21 with ``fusion="onnxruntime"`` (4-bit weights as
``MatMulNBits``), then given the quantized real model's own state dict (torchao's tensors do not
go into safetensors shards) and compared with that model; ``--export-only`` stops after the
export (for 32 layers, which the real weights would not fit in memory for here). Results in
``tools/results/large_model_recipe_int4.json``.
"""

from __future__ import annotations

import argparse
import json
import resource
import sys
import time
from pathlib import Path
from typing import Any

import torch

REPO = Path(__file__).resolve().parents[2]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--out", type=Path, default=Path("/tmp/large_model_recipe"))
    parser.add_argument("--int4", action="store_true", help="torchao int4 weight-only, as MatMulNBits")
    parser.add_argument("--export-only", action="store_true", help="with --int4: stop after the meta export")
    options = parser.parse_args(argv)
    if options.int4:
        return _int4(options)

    import onnxruntime
    import transformers
    from safetensors.torch import save_file

    import torch_onnx_fx

    config = _config(options.layers)
    record: dict[str, float | int | str] = {"layers": options.layers}
    options.out.mkdir(parents=True, exist_ok=True)
    ids = torch.randint(0, config.vocab_size, (1, 16))

    # 1. The checkpoint: real random weights in two shards (what a download would give).
    torch.manual_seed(0)
    real = transformers.LlamaForCausalLM(config).eval()
    state = real.state_dict()
    names = list(state)
    for part, chunk in enumerate((names[: len(names) // 2], names[len(names) // 2 :])):
        save_file({k: state[k].contiguous() for k in chunk}, str(options.out / f"model-{part + 1:05d}-of-00002.safetensors"))
    with torch.no_grad():
        expected = real(ids, use_cache=False).logits
    del real, state
    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024

    # 2. Build on meta and export with the default settings.
    start = time.perf_counter()
    with torch.device("meta"):
        skeleton = transformers.LlamaForCausalLM(config).eval()
    program = torch_onnx_fx.export(skeleton, (ids.to("meta"),), kwargs={"use_cache": False}, verbose=False)
    record["export_seconds"] = round(time.perf_counter() - start, 2)

    # 3. Weights from the shards (memory-mapped), then a save that streams them to disk.
    start = time.perf_counter()
    # A checkpoint holds parameters and persistent buffers only; the rotary frequencies are a
    # non-persistent buffer the model computes from its config, so they come from the module.
    rotary = transformers.models.llama.modeling_llama.LlamaRotaryEmbedding(config)
    program.apply_weights([options.out, {"model.rotary_emb.inv_freq": rotary.inv_freq}])
    record["apply_weights_seconds"] = round(time.perf_counter() - start, 2)
    start = time.perf_counter()
    program.save(options.out / "model.onnx", external_data=True)
    record["save_seconds"] = round(time.perf_counter() - start, 2)
    record["peak_rss_mb_after_checkpoint"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    record["peak_rss_mb_before_export"] = round(rss_before)

    # 4. The saved model, from disk, against eager.
    session = onnxruntime.InferenceSession(str(options.out / "model.onnx"), providers=["CPUExecutionProvider"])
    (logits,) = session.run(None, {session.get_inputs()[0].name: ids.numpy()})
    record["max_abs_diff"] = float((torch.from_numpy(logits) - expected).abs().max())
    record["max_abs_logit"] = float(expected.abs().max())
    print(json.dumps(record))
    (REPO / "tools" / "results" / "large_model_recipe.json").write_text(json.dumps(record, indent=1) + "\n")
    return 0


def _config(layers: int, **extra: Any) -> Any:
    """The Llama-3-8B shape with ``layers`` layers."""
    import transformers

    config = transformers.LlamaConfig(
        hidden_size=4096, num_hidden_layers=layers, num_attention_heads=32, num_key_value_heads=8,
        intermediate_size=14336, vocab_size=128256, **extra,
    )
    config._attn_implementation = "sdpa"
    return config


def _int4(options: argparse.Namespace) -> int:
    import collections

    import onnxruntime
    import transformers
    from torchao.quantization import IntxWeightOnlyConfig, quantize_
    from torchao.quantization.granularity import PerGroup

    import torch_onnx_fx

    config = _config(options.layers, use_cache=False)
    quantization = IntxWeightOnlyConfig(weight_dtype=torch.int4, granularity=PerGroup(32))
    record: dict[str, float | int | str] = {"layers": options.layers, "weights": "int4 group 32, MatMulNBits"}
    ids = torch.randint(0, config.vocab_size, (1, 16))

    start = time.perf_counter()
    with torch.device("meta"):
        skeleton = transformers.LlamaForCausalLM(config).eval()
    quantize_(skeleton, quantization)
    program = torch_onnx_fx.export(skeleton, (ids.to("meta"),), opset_version=21, fusion="onnxruntime", verbose=False)
    record["export_seconds"] = round(time.perf_counter() - start, 2)
    record["peak_rss_mb_after_export"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    record["matmul_nbits"] = collections.Counter(node.op_type for node in program.model.graph)["MatMulNBits"]
    if not options.export_only:
        torch.manual_seed(0)
        real = transformers.LlamaForCausalLM(config).eval()
        quantize_(real, quantization)
        with torch.no_grad():
            expected = real(ids).logits
        start = time.perf_counter()
        rotary = transformers.models.llama.modeling_llama.LlamaRotaryEmbedding(config)
        program.apply_weights({**real.state_dict(), "model.rotary_emb.inv_freq": rotary.inv_freq})
        record["apply_weights_seconds"] = round(time.perf_counter() - start, 2)
        options.out.mkdir(parents=True, exist_ok=True)
        start = time.perf_counter()
        program.save(options.out / "model_int4.onnx", external_data=True)
        record["save_seconds"] = round(time.perf_counter() - start, 2)
        record["saved_mb"] = round(sum(f.stat().st_size for f in options.out.glob("model_int4.onnx*")) / 1e6)
        session = onnxruntime.InferenceSession(str(options.out / "model_int4.onnx"), providers=["CPUExecutionProvider"])
        (logits,) = session.run(None, {session.get_inputs()[0].name: ids.numpy()})
        record["max_abs_diff"] = float((torch.from_numpy(logits) - expected).abs().max())
        record["max_abs_logit"] = float(expected.abs().max())
        record["peak_rss_mb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024)
    print(json.dumps(record))
    suffix = "_export" if options.export_only else ""
    (REPO / "tools" / "results" / f"large_model_recipe_int4{suffix}.json").write_text(json.dumps(record, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
