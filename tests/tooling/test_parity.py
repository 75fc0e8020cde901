"""Differential test against torch.onnx: the boundary cases of tools/sweeps/parity.py show no divergence
that is not listed as deliberate (and explained in docs/migration.md)."""

from __future__ import annotations

import pytest

from tools.sweeps import parity

CASES = {case.name: case for case in parity.all_cases(["boundary"], None, 1)}


@pytest.mark.parametrize("name", sorted(CASES))
def test_boundary_case_matches_torch_onnx(name):
    record = parity.run_case(CASES[name])
    views = record["views"]
    assert views[parity.OURS]["status"] == "ok", views[parity.OURS]["error"]
    undiagnosed = [d for d in record["divergences"] if d["deliberate"] is None]
    assert not undiagnosed, undiagnosed


def test_a_divergence_is_reported_unless_deliberate():
    ours = {"status": "ok", "inputs": [["x", "FLOAT", [2]]], "outputs": [["y", "FLOAT", [2]]], "call": [["float32", [2]]], "warnings": []}
    theirs = dict(ours, outputs=[["y", "FLOAT", [3]]])
    (found,) = parity.divergences(ours, theirs)
    assert found["field"] == "outputs" and found["deliberate"] is None
    renumbered = dict(ours, outputs=[["y_4", "FLOAT", [2]]])
    (found,) = parity.divergences(ours, renumbered)
    assert found["deliberate"] is not None
