"""Tracing each distinct block once against the full trace, over a whole corpus.

    python tools/checks/block_replay.py                          # generated transformers corpus, language-model heads
    python tools/checks/block_replay.py --models hf-llama-causal-lm,hf-bert-masked-lm --layers 4

Each model is exported with ``export_modules_as_functions=True`` twice in one process: as
``export`` does it (capture traces each distinct repeated block once and copies its trace,
``capture/repeated_blocks``) and with that switched off (every block traced). The two ONNX models
must hold the same nodes in the same order (``helpers.onnx_structure``: values inside the graph
named by position, initializers by contents; a copied layer reads the constants its traced layer
created, where the full trace lifts each layer's equal constants separately). Statuses: ``same`` (blocks were copied and the models agree), ``differs``,
``no_copies`` (no block could be copied: a single instance, or every instance differs in what its
code reads), ``export_failed``, ``inlined_failed`` (the model does not export without functions
either, at this depth), ``build_failed``. ``--layers`` rebuilds the configs with that many
layers (the corpus has two; with more, more layer types alternate). Results:
``tools/results/block_replay.jsonl``; page: the replay section of ``docs/functions.md``.
"""

from __future__ import annotations

import argparse
import dataclasses
import sys
import time
import warnings
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[2]
for _path in (REPO, REPO / "tests"):
    if str(_path) not in sys.path:
        sys.path.insert(0, str(_path))

from tools._common import failure, save_model_records, write_section  # noqa: E402

RESULTS = REPO / "tools" / "results" / "block_replay.jsonl"
PAGE = REPO / "docs" / "functions.md"
START, END = "<!-- block-replay:start -->", "<!-- block-replay:end -->"
STATUSES = ("same", "no_copies", "differs", "export_failed", "inlined_failed", "build_failed")
LM_TASKS = ("-causal-lm", "-masked-lm", "-seq2seq-lm")


@dataclasses.dataclass
class Record:
    model: str
    status: str = "export_failed"
    layers: int | None = None
    copied: int = 0
    calls: int = 0
    capture_s: float | None = None  # the export with copies, then the full trace
    full_s: float | None = None
    error: str | None = None


def _with_layers(case: Any, layers: int) -> Any:
    """The case rebuilt with ``layers`` layers in every sub-config that has a layer count."""
    from tools.corpus import generated_models

    original = generated_models.small_config

    def deeper(config: Any, every_sub_config: bool | None = None) -> Any:
        config = original(config, every_sub_config)
        configs = [config, *(getattr(config, name) for name in getattr(config, "sub_configs", {}) if getattr(config, name, None) is not None)]
        for each in configs:
            for name in ("num_hidden_layers", "num_layers", "encoder_layers", "decoder_layers", "num_decoder_layers"):
                if isinstance(getattr(each, name, None), int):
                    setattr(each, name, layers)
            if isinstance(getattr(each, "layer_types", None), list):
                each.layer_types = [each.layer_types[i % len(each.layer_types)] for i in range(layers)]
        return config

    def build() -> Any:
        generated_models.small_config = deeper
        try:
            return case.build()
        finally:
            generated_models.small_config = original

    return dataclasses.replace(case, build=build)


def run_case(case: Any) -> Record:
    import torch_onnx_fx
    from helpers import onnx_structure
    from torch_onnx_fx.capture import strategies
    from tools.corpus.generated_models import built_and_run

    record = Record(case.name)
    built, record.error = built_and_run(case)
    if built is None:
        record.status = "build_failed"
        return record
    model, args, kwargs, dynamic_shapes = built

    def export() -> Any:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            start = time.perf_counter()
            program = torch_onnx_fx.export(model, args, kwargs=kwargs, dynamic_shapes=dynamic_shapes, export_modules_as_functions=True, verbose=False)
            return program, round(time.perf_counter() - start, 2)

    def full_trace(module: Any, args: Any, kwargs: Any, shapes: Any, blocks: Any) -> Any:
        program, fixes = strategies._export_refining(module, args, kwargs, shapes, False)
        return program, fixes, 0

    try:
        copied, record.capture_s = export()
        record.copied = copied.capture_blocks_replayed
        proto = copied.model_proto
        ids = {(f.domain, f.name) for f in proto.functions}
        record.calls = sum((n.domain, n.op_type) in ids for n in proto.graph.node)
        if not record.copied:
            record.status = "no_copies"
            return record
        replay = strategies._export_blocks_once
        strategies._export_blocks_once = full_trace
        try:
            full, record.full_s = export()
        finally:
            strategies._export_blocks_once = replay
    except Exception as exc:  # noqa: BLE001 - recorded
        record.error = failure(exc)
        try:
            torch_onnx_fx.export(model, args, kwargs=kwargs, dynamic_shapes=dynamic_shapes, verbose=False)
        except Exception:  # noqa: BLE001 - the model does not export at this depth at all
            record.status = "inlined_failed"
        return record
    same = onnx_structure(proto) == onnx_structure(full.model_proto)
    record.status = "same" if same else "differs"
    if not same:
        record.error = "the ONNX models differ"
    return record


def render(records: list[Record], run: dict[str, Any]) -> str:
    counts = {s: sum(r.status == s for r in records) for s in STATUSES}
    same = [r for r in records if r.status == "same"]
    lines = [
        START, "",
        f"Generated by `{run.get('command', 'python tools/checks/block_replay.py').strip()}`; torch {run.get('torch', '?')}, "
        f"commit {run.get('commit', '?')} (`--models` reruns merge into the results). {len(records)} models.", "",
        "| status | models |", "|---|---:|",
        *[f"| {s} | {n} |" for s, n in counts.items() if n], "",
    ]
    if same:
        lines += [
            f"In the {len(same)} models where blocks were copied, {sum(r.copied for r in same)} of "
            f"{sum(r.calls for r in same)} function calls were made from a copied trace; each model's ONNX graph "
            "holds the full trace's nodes in the same order.", "",
        ]
    bad = [r for r in records if r.status in ("differs", "export_failed")]
    if bad:
        lines += ["| model | status | error |", "|---|---|---|", *[f"| {r.model} | {r.status} | {(r.error or '').replace('|', '/')} |" for r in bad], ""]
    lines.append(END)
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--models", help="comma-separated case names (default: every language-model head)")
    parser.add_argument("--layers", type=int, default=None, help="rebuild the configs with this many layers")
    parser.add_argument("--sample", type=int, default=1, help="every N-th case")
    parser.add_argument("--render-only", action="store_true")
    options = parser.parse_args()
    if not options.render_only:
        from tools.corpus.generated_models import selected

        records = []
        for case in selected(options.models, LM_TASKS, options.sample):
            record = run_case(_with_layers(case, options.layers) if options.layers else case)
            record.layers = options.layers
            print(f"{record.model:50} {record.status:14} copied={record.copied}/{record.calls} {record.error or ''}", flush=True)
            records.append(record)
    command = "python tools/checks/block_replay.py " + " ".join(sys.argv[1:])
    first, every = save_model_records(RESULTS, Record, command, None if options.render_only else records, bool(options.models))
    write_section(PAGE, START, END, render(every, first))


if __name__ == "__main__":
    main()
