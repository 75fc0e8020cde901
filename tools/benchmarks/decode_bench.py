"""One decode step of a decoder LLM in ONNX Runtime: torch_onnx_fx's graphs beside torch.onnx's.

Generation is dominated by the step that takes one new token and the KV cache of every earlier
one. A Llama of ~20 M parameters (hidden 512, 4 layers, 8 query heads sharing 4 KV heads, random
weights) is wrapped so that its inputs are the token, the attention mask and the cache as plain
tensors and its outputs the logits and the grown cache, exported once with a dynamic cache length
by ``torch.onnx.export(dynamo=True)`` and by ``torch_onnx_fx.export`` at opset 20 (the default)
and 23 (the standard's fused Attention), each also with ``fusion="onnxruntime"`` (ONNX Runtime's
GroupQueryAttention and SkipSimplifiedLayerNormalization), and run at a past of 128 and 1024
positions. With ``--mobius`` (the ``mobius-onnx`` package importable), the graph ONNX Runtime's
model builder writes by hand for the same weights runs beside them. The graphs run interleaved
call by call in one process (ONNX Runtime CPU, ``--threads`` intra-op threads that do not spin
between calls), so load on the machine weighs on all alike; the median is reported with its ratio to torch.onnx's. Every graph's
logits are compared with eager PyTorch first.

    python tools/benchmarks/decode_bench.py [--pasts 128,1024] [--calls 40] [--threads 1] [--mobius]

Results: ``tools/results/decode.jsonl`` (one line per run and variant).
"""

from __future__ import annotations

import argparse
import json
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

from tools._common import machine_info  # noqa: E402

RESULTS = REPO / "tools" / "results" / "decode.jsonl"
VARIANTS = (
    "torch.onnx", "torch_onnx_fx", "torch_onnx_fx opset 23", "torch_onnx_fx onnxruntime", "torch_onnx_fx opset 23 onnxruntime",
)
MOBIUS = "mobius (model builder)"
LAYERS, KV_HEADS = 4, 4


def _model() -> Any:
    import transformers

    config = transformers.LlamaConfig(
        vocab_size=32000, hidden_size=512, intermediate_size=1376, num_hidden_layers=LAYERS, num_attention_heads=8,
        num_key_value_heads=KV_HEADS, max_position_embeddings=4096,
    )
    config._attn_implementation = "sdpa"
    return transformers.LlamaForCausalLM(config).eval()


def _step(model: Any) -> Any:
    """The model as one decode step over plain tensors: (token, mask, [k0, v0, k1, ...]) ->
    (logits, k0', v0', ...), the cache rebuilt as transformers' DynamicCache inside."""
    import torch
    from transformers import DynamicCache

    layers = model.config.num_hidden_layers

    class Step(torch.nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.model = model

        def forward(self, token: Any, mask: Any, cache: list[Any]) -> Any:
            past = DynamicCache(config=self.model.config)
            for layer in range(layers):
                past.update(cache[2 * layer], cache[2 * layer + 1], layer)
            out = self.model(input_ids=token, attention_mask=mask, past_key_values=past, use_cache=True)
            return (out.logits, *[t for layer in out.past_key_values.layers for t in (layer.keys, layer.values)])

    return Step().eval()


def _inputs(past: int, config: Any) -> tuple[Any, ...]:
    """A step's inputs for a cache of ``past`` positions of the model of ``config``."""
    import torch

    generator = torch.Generator().manual_seed(past)
    token = torch.randint(3, config.vocab_size, (1, 1), generator=generator)
    mask = torch.ones(1, past + 1, dtype=torch.int64)
    head_dim = config.hidden_size // config.num_attention_heads
    cache = [
        torch.randn(1, config.num_key_value_heads, past, head_dim, generator=generator)
        for _ in range(2 * config.num_hidden_layers)
    ]
    return token, mask, cache


def cache_shapes(layers: int) -> tuple[Any, ...]:
    """The step's dynamic shapes: the mask's length and every cache tensor's past length."""
    import torch

    past, total = torch.export.Dim("past", min=1, max=4000), torch.export.Dim("total", min=2, max=4001)
    return ({}, {1: total}, [{2: past}] * (2 * layers))


def export_variant(variant: str, module: Any, example: tuple[Any, ...], shapes: Any, path: Path) -> int:
    """Export ``module`` as ``variant`` (one of ``VARIANTS``), save it to ``path``, return its node count."""
    import onnx_ir as ir
    import torch

    if variant == "torch.onnx":
        program = torch.onnx.export(module, example, dynamic_shapes=shapes, dynamo=True, verbose=False)
    else:
        import torch_onnx_fx

        opset = 23 if "opset 23" in variant else None
        fusion = "onnxruntime" if variant.endswith("onnxruntime") else "standard"
        program = torch_onnx_fx.export(module, example, dynamic_shapes=shapes, opset_version=opset, fusion=fusion, verbose=False)
    program.save(str(path))
    return sum(1 for _ in ir.traversal.RecursiveGraphIterator(program.model.graph))


def export_graphs(model: Any, module: Any, example: tuple[Any, ...], shapes: Any, folder: Path, options: Any) -> tuple[dict[str, int], dict[str, Any]]:
    """Every variant of ``module`` (and with ``options.mobius`` mobius's graph of ``model``) saved in
    ``folder``: each one's node count, and a session of ``options.threads`` threads on it."""
    nodes, paths = {}, {}
    for variant in VARIANTS:
        paths[variant] = folder / f"{variant.replace(' ', '_')}.onnx"
        nodes[variant] = export_variant(variant, module, example, shapes, paths[variant])
    if options.mobius:
        paths[MOBIUS], nodes[MOBIUS] = _mobius(model, folder / "mobius")
    return nodes, open_sessions(paths, options.threads)


def timed_rows(
    fields: dict[str, Any], sessions: dict[str, Any], feeds: dict[str, dict[str, Any]], expected: Any, nodes: dict[str, int],
    calls: int,
) -> list[dict[str, Any]]:
    """One result row per session: ``fields``, its median ms and ratio to torch.onnx's, its node
    count and its first output's largest difference from ``expected``."""
    import numpy as np

    diffs = {v: float(np.abs(s.run(None, feeds[v])[0] - expected).max()) for v, s in sessions.items()}
    medians = time_interleaved(sessions, feeds, calls)
    base = medians["torch.onnx"]
    return [
        {**fields, "variant": v, "ms": round(medians[v], 3), "ratio": round(medians[v] / base, 3), "nodes": nodes[v], "max_abs_diff": diffs[v]}
        for v in sessions
    ]


def report(rows: list[dict[str, Any]], key: str, label: str, path: Path) -> None:
    """Print ``rows`` as a table (``key`` the size column, headed ``label``) and append them to ``path``."""
    print(f"| {label} | variant | ms | ratio to torch.onnx | nodes | max diff |")
    print("|---:|---|---:|---:|---:|---:|")
    for row in rows:
        print(f"| {row[key]} | {row['variant']} | {row['ms']:.2f} | {row['ratio']:.2f} | {row['nodes']} | {row['max_abs_diff']:.1e} |")
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("a") as out:
        for row in rows:
            out.write(json.dumps(row) + "\n")


def _mobius(model: Any, folder: Path) -> tuple[Path, int]:
    """mobius's hand-written graph of ``model`` (its CPU build: GroupQueryAttention, fused norms,
    packed QKV) with the model's weights; its path and node count. Its inputs come in the
    step's order (ids, mask, then each layer's key and value), so the feeds are the same."""
    import mobius
    import onnx_ir as ir
    from mobius._configs import ArchitectureConfig

    config = ArchitectureConfig.from_transformers(model.config)
    config.dtype = ir.DataType.FLOAT
    package = mobius.build_from_module(mobius.registry.get(model.config.model_type)(config), config, execution_provider="cpu")
    package.apply_weights(model.state_dict())
    package.save(str(folder))
    return folder / "model.onnx", sum(1 for _ in package["model"].graph)


def open_sessions(paths: dict[str, Path | bytes], threads: int) -> dict[str, Any]:
    """An ONNX Runtime CPU session per graph (a file, or a serialized model), with ``threads``
    intra-op threads."""
    import onnxruntime as ort

    sessions = {}
    for variant, path in paths.items():
        session_options = ort.SessionOptions()
        session_options.intra_op_num_threads = threads
        # Interleaved sessions: a session's pool spinning after its call would take the cores
        # from the next session's call.
        session_options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        model = path if isinstance(path, bytes) else str(path)
        sessions[variant] = ort.InferenceSession(model, session_options, providers=["CPUExecutionProvider"])
    return sessions


def time_interleaved(sessions: dict[str, Any], feeds: dict[str, dict[str, Any]], calls: int) -> dict[str, float]:
    """Median milliseconds per call of each session, the sessions called in turn (after three
    warm-up rounds), so load on the machine weighs on all alike."""
    times: dict[str, list[float]] = {v: [] for v in sessions}
    for _ in range(3):
        for v, session in sessions.items():
            session.run(None, feeds[v])
    for _ in range(calls):
        for v, session in sessions.items():
            start = time.perf_counter()
            session.run(None, feeds[v])
            times[v].append((time.perf_counter() - start) * 1000)
    return {v: statistics.median(t) for v, t in times.items()}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--pasts", default="128,1024", help="cache lengths to time, comma-separated")
    parser.add_argument("--calls", type=int, default=40, help="timed calls per graph and cache length")
    parser.add_argument("--threads", type=int, default=1, help="ONNX Runtime intra-op threads")
    parser.add_argument("--mobius", action="store_true", help="time mobius's graph too (needs mobius-onnx)")
    parser.add_argument("--json", type=Path, default=RESULTS)
    options = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    import torch

    torch.manual_seed(0)
    model = _model()
    step = _step(model)
    pasts = [int(p) for p in options.pasts.split(",")]
    header = machine_info("python tools/benchmarks/decode_bench.py " + " ".join(sys.argv[1:] if argv is None else argv))
    rows: list[dict[str, Any]] = []
    with tempfile.TemporaryDirectory() as scratch:
        nodes, sessions = export_graphs(model, step, _inputs(pasts[0], model.config), cache_shapes(LAYERS), Path(scratch), options)
        for past in pasts:
            token, mask, cache = _inputs(past, model.config)
            with torch.no_grad():
                expected = step(token, mask, cache)[0].numpy()
            arrays = [token.numpy(), mask.numpy(), *(c.numpy() for c in cache)]
            feeds = {v: {i.name: a for i, a in zip(s.get_inputs(), arrays, strict=True)} for v, s in sessions.items()}
            rows += timed_rows({**header, "past": past, "threads": options.threads}, sessions, feeds, expected, nodes, options.calls)
    report(rows, "past", "past", options.json)
    return 0


if __name__ == "__main__":
    sys.exit(main())
