"""fusion="onnxruntime" on models no one here built it for: the generated transformers corpus.

Every N-th case of ``tools/corpus/generated_models.py`` (each architecture and task head
transformers can build offline, small sizes, random weights, batch and sequence dynamic) is
exported with ``fusion="onnxruntime"`` and run in ONNX Runtime (default session options) on the
case's two sets of inputs; every output is compared with eager's, relative to its largest
magnitude. Where that export fails or differs, the ``"standard"`` export of the same model is
tried too, so a failure of the model itself is told from one of the ONNX Runtime operators.
Counted per case: the fused operators the graph has.

    python tools/sweeps/ort_fusion_sweep.py [--every 3] [--offset 0] [--opset 20]

Results: one JSON line per case in ``tools/results/ort_fusion.jsonl``, and a summary.
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
from tools.sweeps.torchao_sweep import PASS_BELOW, relative_difference  # noqa: E402

FUSED = ("GroupQueryAttention", "SkipSimplifiedLayerNormalization", "RotaryEmbedding", "Attention", "RMSNormalization")


def _exported(model: Any, args: tuple, kwargs: dict, shapes: Any, second: tuple, opset: int, fusion: str) -> tuple[Any, float | None]:
    """The program and its worst output difference from eager over both inputs (None: structure)."""
    import torch

    import torch_onnx_fx

    program = torch_onnx_fx.export(model, args, kwargs=kwargs, dynamic_shapes=shapes, verbose=False, opset_version=opset, fusion=fusion)
    worst: float | None = 0.0
    for call_args, call_kwargs in ((args, kwargs), second):
        with torch.no_grad():
            expected = flat_tensors(model(*call_args, **call_kwargs))
        difference = relative_difference(flat_tensors(program(*call_args, **call_kwargs)), expected)
        worst = None if difference is None or worst is None else max(worst, difference)
    return program, worst


def run_case(case: Any, opset: int) -> dict[str, Any]:
    record: dict[str, Any] = {"case": case.name, "opset": opset}
    start = time.perf_counter()
    try:
        model, args, kwargs, shapes = case.build()
        second = case.second_inputs()
    except Exception as exc:  # noqa: BLE001 - a model transformers cannot build is listed, not counted
        return {**record, "status": "build_failed", "error": f"{type(exc).__name__}: {str(exc)[:200]}"}
    try:
        program, difference = _exported(model, args, kwargs, shapes, second, opset, "onnxruntime")
    except Exception as exc:  # noqa: BLE001 - the failure is the result
        record.update(status="export_failed", error=f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}")
    else:
        counts = collections.Counter(node.op_type for node in program.model.graph)
        record.update(
            status="pass" if difference is not None and difference < PASS_BELOW else "mismatch", difference=difference,
            fused={name: counts[name] for name in FUSED if counts[name]},
        )
    if record["status"] != "pass":
        try:
            record["standard_difference"] = _exported(model, args, kwargs, shapes, second, opset, "standard")[1]
        except Exception as exc:  # noqa: BLE001
            record["standard_error"] = f"{type(exc).__name__}: {str(exc).splitlines()[0][:200]}"
    record["seconds"] = round(time.perf_counter() - start, 1)
    return record


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--every", type=int, default=3, help="keep every N-th case")
    parser.add_argument("--offset", type=int, default=0, help="start at the K-th case")
    parser.add_argument("--opset", type=int, default=20)
    parser.add_argument("--json", type=Path, default=REPO / "tools" / "results" / "ort_fusion.jsonl")
    options = parser.parse_args(argv)
    warnings.simplefilter("ignore")
    import logging

    logging.disable(logging.WARNING)
    from tools.corpus import generated_models

    cases = generated_models.cases()[options.offset :: options.every]
    header = machine_info("python tools/sweeps/ort_fusion_sweep.py " + " ".join(sys.argv[1:] if argv is None else argv))
    statuses: collections.Counter[str] = collections.Counter()
    fused: collections.Counter[str] = collections.Counter()
    with options.json.open("w") as out:
        out.write(json.dumps({"kind": "machine", **header}) + "\n")
        for case in cases:
            record = run_case(case, options.opset)
            statuses[record["status"]] += 1
            fused.update({name: 1 for name in record.get("fused", {})})
            out.write(json.dumps(record) + "\n")
            out.flush()
            if record["status"] not in ("pass", "build_failed"):
                print(json.dumps(record), flush=True)
    print(f"{len(cases)} cases: {dict(statuses)}; cases with each fused operator: {dict(fused)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
