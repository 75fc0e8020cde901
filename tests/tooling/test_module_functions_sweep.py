"""What tools/sweeps/module_functions.py computes for one corpus model, and how it renders."""

from __future__ import annotations

import dataclasses
import json

import pytest

pytest.importorskip("transformers", reason="the corpus's llama case builds a transformers model")

from tools.corpus.models import CORPUS, named  # noqa: E402
from tools.sweeps import module_functions  # noqa: E402


def test_a_decoder_gets_one_function_identical_to_the_inlined_export():
    record = module_functions.run_case(named(CORPUS, "llama"))
    assert record.status == "same", record.error
    assert (record.functions, record.calls) == (1, 2)
    assert record.nodes_main < record.nodes_inlined
    assert record.default_max_diff is not None and record.session_functions_s > 0


def test_a_model_without_repeated_blocks_is_reported_so():
    record = module_functions.run_case(named(CORPUS, "mlp"))
    assert record.status == "no_blocks" and record.functions == 0


def test_the_page_counts_statuses_and_lists_failures(tmp_path, monkeypatch):
    path = tmp_path / "module_functions.jsonl"
    monkeypatch.setattr(module_functions, "results_path", lambda corpus: path)
    records = [
        module_functions.Record("a", "decoder", "same", functions=1, calls=4, nodes_inlined=100, nodes_main=20,
                                bytes_inlined=1000, bytes_functions=500, export_inlined_s=1.0, export_functions_s=1.0,
                                session_inlined_s=0.1, session_functions_s=0.2),
        module_functions.Record("b", "vision", "differs", error="input set 1: not identical"),
    ]
    path.write_text("\n".join(['{"kind": "run", "torch": "2.x", "commit": "abc"}'] + [
        json.dumps({"kind": "record", **dataclasses.asdict(r)}) for r in records
    ]) + "\n")
    page = module_functions.render(["hand"])
    assert "| same | 1 |" in page and "| differs | 1 |" in page
    assert "main-graph nodes 0.20" in page and "ONNX Runtime session creation 2.00" in page
    assert "| b | differs | input set 1: not identical |" in page
