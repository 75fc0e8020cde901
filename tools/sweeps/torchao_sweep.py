"""torchao-quantized transformers models, exported and compared with the quantized eager model.

Every N-th case of the generated corpus (``tools/corpus/generated_models.py``: each architecture
transformers can build offline, small sizes, random weights) for one task is quantized with a
torchao configuration (each ``nn.Linear`` whose input size is a multiple of 32), exported with
``opset_version=21, fusion="onnxruntime"`` and run in ONNX Runtime (default session options) on
the case's inputs; every output is compared with the quantized eager model's, relative to its
largest magnitude. Configurations:

- ``int4``: ``IntxWeightOnlyConfig(torch.int4, PerGroup(32))``, products as ``MatMulNBits``;
- ``int8dyn``: ``Int8DynamicActivationInt8WeightConfig()``, activations quantized per token at run
  time. Such a model turns float differences of one ulp into whole quantization steps, so each
  case also reports the eager model's own sensitivity: the change of its outputs when the
  embedding table moves by one ulp.

    python tools/sweeps/torchao_sweep.py --config int4 [--task causal-lm] [--every 4]

Results: one JSON line per case in ``tools/results/torchao_<config>.jsonl``, and a summary.
"""

from __future__ import annotations

import argparse
import collections
import json
import sys
import time
import warnings
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
for _path in (REPO, REPO / "tests"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from helpers import flat_tensors  # noqa: E402
from tools._common import machine_info  # noqa: E402

PASS_BELOW = 1e-4


def relative_difference(actual: list[Any], expected: list[Any]) -> float | None:
    """The largest output difference relative to the output's magnitude; None on a structural
    mismatch (count, shape, or an integer output that differs)."""
    import torch

    if len(actual) != len(expected):
        return None
    worst = 0.0
    for got, want in zip(actual, expected):
        if got.shape != want.shape:
            return None
        if not want.is_floating_point():
            if not torch.equal(got, want):
                return None
            continue
        scale = want.abs().max().item() or 1.0
        worst = max(worst, (got.float() - want.float()).abs().max().item() / scale)
    return worst


def _sensitivity(model: Any, kwargs: dict, expected: list[Any]) -> float | None:
    """How far the eager model's outputs move when its embedding table moves by one ulp."""
    import torch

    embedding = model.get_input_embeddings() if hasattr(model, "get_input_embeddings") else None
    if embedding is None or not hasattr(embedding, "weight"):
        return None
    with torch.no_grad():
        saved = embedding.weight.clone()
        embedding.weight.copy_(torch.nextafter(saved, torch.full_like(saved, float("inf"))))
        moved = flat_tensors(model(**kwargs))
        embedding.weight.copy_(saved)
    return relative_difference(moved, expected)


def run_case(case: Any, config_name: str) -> dict[str, Any]:
    import torch
    from torchao.quantization import Int8DynamicActivationInt8WeightConfig, IntxWeightOnlyConfig, quantize_
    from torchao.quantization.granularity import PerGroup

    import torch_onnx_fx

    record: dict[str, Any] = {"case": case.name, "config": config_name}
    start = time.perf_counter()
    try:
        model, args, kwargs, shapes = case.build()
    except Exception as exc:  # noqa: BLE001 - a model transformers cannot build is listed, not counted
        return {**record, "status": "build_failed", "error": f"{type(exc).__name__}: {str(exc)[:200]}"}
    config = (
        IntxWeightOnlyConfig(weight_dtype=torch.int4, granularity=PerGroup(32)) if config_name == "int4"
        else Int8DynamicActivationInt8WeightConfig()
    )
    try:
        quantize_(model, config, filter_fn=lambda module, _: isinstance(module, torch.nn.Linear) and module.in_features % 32 == 0)
        with torch.no_grad():
            expected = flat_tensors(model(*args, **kwargs))
    except Exception as exc:  # noqa: BLE001 - torchao's own failure on the model
        return {**record, "status": "quantize_failed", "error": f"{type(exc).__name__}: {str(exc)[:200]}"}
    try:
        program = torch_onnx_fx.export(
            model, args, kwargs=kwargs, dynamic_shapes=shapes, verbose=False, opset_version=21, fusion="onnxruntime",
        )
        actual = flat_tensors(program(*args, **kwargs))
    except Exception as exc:  # noqa: BLE001 - the failure is the result
        return {**record, "status": "export_failed", "error": f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"}
    difference = relative_difference(actual, expected)
    record.update(
        status="pass" if difference is not None and difference < PASS_BELOW else "mismatch",
        difference=difference,
        matmul_nbits=sum(node.op_type == "MatMulNBits" for node in program.model.graph),
        seconds=round(time.perf_counter() - start, 1),
    )
    if config_name == "int8dyn" and not args:
        record["eager_sensitivity"] = _sensitivity(model, kwargs, expected)
    return record


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--config", choices=("int4", "int8dyn"), default="int4")
    parser.add_argument("--task", default="causal-lm")
    parser.add_argument("--every", type=int, default=4, help="keep every N-th case")
    options = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    import logging

    logging.disable(logging.WARNING)
    from tools.corpus import generated_models

    cases = [case for case in generated_models.cases() if case.name.endswith(f"-{options.task}")][:: options.every]
    header = machine_info("python tools/sweeps/torchao_sweep.py " + " ".join(sys.argv[1:] if argv is None else argv))
    path = REPO / "tools" / "results" / f"torchao_{options.config}.jsonl"
    counts: collections.Counter[str] = collections.Counter()
    with path.open("w") as out:
        out.write(json.dumps({"kind": "machine", **header}) + "\n")
        for case in cases:
            record = run_case(case, options.config)
            counts[record["status"]] += 1
            out.write(json.dumps({"kind": "record", **record}) + "\n")
            out.flush()
            print(json.dumps(record), flush=True)
    print(dict(counts))
    return 0


if __name__ == "__main__":
    sys.exit(main())
