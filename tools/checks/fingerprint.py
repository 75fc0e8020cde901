"""Fingerprints of exported models: proof that a restructuring changed no exported byte.

Exports every model of the corpus (``tools.corpus.models.CORPUS``, at the default opset and, for each, at
opsets 17 and 23 and with ``optimize=False``) and the first sample of every OpInfo operator in a
few dtypes, and writes one JSON line per export: the SHA-256 of the serialized ``ModelProto``, or
the error an export raised (its type and first line, which must not change either). Two runs are
compared line by line with ``--compare``::

    python tools/checks/fingerprint.py --out /tmp/before.jsonl            # on the commit before
    python tools/checks/fingerprint.py --out /tmp/after.jsonl             # on the commit after
    python tools/checks/fingerprint.py --compare /tmp/before.jsonl /tmp/after.jsonl

Every model is built after ``torch.manual_seed(0)`` so its random weights are the same in both
runs, and the tool runs itself with ``PYTHONHASHSEED=0``: a few exports (torchlib's scripted
``embedding_bag``, whose loop-carried values onnxscript orders by a set) differ between processes
with Python's randomized string hashing, whatever the package's code. A whole run takes about half an hour on two cores; ``--models-only`` / ``--ops-only`` and
``--dtypes`` choose parts of it.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import os
import sys
import time
import warnings
from pathlib import Path
from typing import Any, Iterator

REPO = Path(__file__).resolve().parents[2]
for _path in (REPO, REPO / "tests"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

import torch  # noqa: E402

__all__ = ["fingerprint_models", "fingerprint_ops", "compare", "main"]

# Export variants of every corpus model beside the default call: the downgrade path, the fused
# operators of opset 23, and the unoptimized graph.
MODEL_VARIANTS: dict[str, dict[str, Any]] = {
    "default": {},
    "opset17": {"opset_version": 17},
    "opset23": {"opset_version": 23},
    "unoptimized": {"optimize": False},
}
DEFAULT_DTYPES = ("float32", "float16", "int32", "bool", "complex64")
TRACE_KEY = "pkg.torch.onnx.stack_trace"


def _outcome(export: Any) -> dict[str, Any]:
    """The hash of what ``export()`` returns, or the error it raised."""
    try:
        program = export()
    except Exception as exc:  # noqa: BLE001 - an error is an outcome, and must not change either
        first = (str(exc).strip().splitlines() or [""])[0]
        return {"error": f"{type(exc).__name__}: {first[:300]}"}
    proto = program.model_proto
    data = proto.SerializeToString()
    return {
        "sha256": hashlib.sha256(data).hexdigest(),
        "bytes": len(data),
        "sha256_without_traces": hashlib.sha256(_without_traces(proto).SerializeToString()).hexdigest(),
    }


def _without_traces(proto: Any) -> Any:
    """A copy without the nodes' stack traces: they hold the absolute paths of the files that
    made each node, which change when a module of the package (a library patch) moves."""
    import onnx

    copy = onnx.ModelProto()
    copy.CopyFrom(proto)
    graphs = [copy.graph, *(f for f in copy.functions)]
    while graphs:
        graph = graphs.pop()
        for node in graph.node:
            kept = [p for p in node.metadata_props if p.key != TRACE_KEY]
            del node.metadata_props[:]
            node.metadata_props.extend(kept)
            for attribute in node.attribute:
                if attribute.HasField("g"):
                    graphs.append(attribute.g)
                graphs.extend(attribute.graphs)
    return copy


def fingerprint_models(names: set[str] | None = None) -> Iterator[dict[str, Any]]:
    import torch_onnx_fx
    from tools.corpus.models import CORPUS

    for case in CORPUS:
        if names and case.name not in names:
            continue
        torch.manual_seed(0)
        model, args, kwargs, dynamic_shapes = case.build()
        for variant, options in MODEL_VARIANTS.items():
            start = time.perf_counter()
            outcome = _outcome(lambda: torch_onnx_fx.export(
                model, args, kwargs=kwargs, dynamic_shapes=dynamic_shapes, verbose=False, **options
            ))
            yield {"kind": "model", "key": f"{case.name}/{variant}", **outcome,
                   "seconds": round(time.perf_counter() - start, 2)}


def fingerprint_ops(dtypes: tuple[str, ...]) -> Iterator[dict[str, Any]]:
    import torch_onnx_fx
    from tools.sweeps.opsweep import DTYPES, OpCall, _first_samples, _random, op_infos, skip_reason

    for dtype_name in dtypes:
        dtype = DTYPES[dtype_name]
        for key, opinfo in op_infos().items():
            if skip_reason(opinfo, dtype) is not None:
                continue
            samples, reason = _first_samples(opinfo, dtype, 1)
            if reason is not None:
                continue
            module = OpCall(opinfo.op, samples[0])
            try:
                program = torch.export.export(module, module.fresh_inputs(), strict=False)
            except Exception:  # noqa: BLE001 - not capturable: nothing of ours to fingerprint
                continue
            if _random(program):
                continue
            outcome = _outcome(lambda: torch_onnx_fx.export(program, module.fresh_inputs(), verbose=False))
            yield {"kind": "op", "key": f"{key}/{dtype_name}", **outcome}


def compare(before: Path, after: Path) -> int:
    """Print every key whose outcome differs or that only one run has; 0 when there is none."""

    def load(path: Path) -> dict[str, dict[str, Any]]:
        entries = (json.loads(line) for line in path.read_text().splitlines())
        return {e["key"]: e for e in entries if "key" in e}

    def outcome(entry: dict[str, Any], *fields: str) -> tuple[Any, ...]:
        return tuple(entry.get(field) for field in (*fields, "error"))

    old, new = load(before), load(after)
    both = old.keys() & new.keys()
    differ = sorted(k for k in both if outcome(old[k], "sha256") != outcome(new[k], "sha256"))
    traces_only = [k for k in differ if outcome(old[k], "sha256_without_traces") == outcome(new[k], "sha256_without_traces")]
    only = sorted(old.keys() ^ new.keys())
    for key in differ:
        where = "stack traces only" if key in traces_only else "graph"
        print(f"differs ({where}): {key}: {outcome(old[key], 'sha256')} -> {outcome(new[key], 'sha256')}")
    for key in only:
        print(f"only in {'before' if key in old else 'after'}: {key}")
    errors = sum(1 for k in both if old[k].get("error") and k not in differ)
    print(f"{len(both) - len(differ)} byte-identical ({errors} of them the same export error), {len(differ)} differ "
          f"({len(traces_only)} in the nodes' stack traces only), {len(only)} in one run only")
    return 1 if len(differ) > len(traces_only) or only else 0


def main(argv: list[str] | None = None) -> int:
    if os.environ.get("PYTHONHASHSEED") != "0" and argv is None:
        os.execve(sys.executable, [sys.executable, *sys.argv], {**os.environ, "PYTHONHASHSEED": "0"})
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, help="the JSON-lines file to write")
    parser.add_argument("--compare", nargs=2, type=Path, metavar=("BEFORE", "AFTER"))
    parser.add_argument("--models-only", action="store_true")
    parser.add_argument("--ops-only", action="store_true")
    parser.add_argument("--models", nargs="*", help="only these corpus models")
    parser.add_argument("--dtypes", nargs="*", default=list(DEFAULT_DTYPES))
    options = parser.parse_args(argv)
    if options.compare:
        return compare(*options.compare)
    if options.out is None:
        parser.error("--out or --compare is required")
    warnings.simplefilter("ignore")
    logging.disable(logging.WARNING)
    parts = []
    if not options.ops_only:
        parts.append(fingerprint_models(set(options.models or ())))
    if not options.models_only:
        parts.append(fingerprint_ops(tuple(options.dtypes)))
    with options.out.open("w") as out:
        for part in parts:
            for entry in part:
                out.write(json.dumps(entry) + "\n")
                out.flush()
    return 0


if __name__ == "__main__":
    sys.exit(main())
