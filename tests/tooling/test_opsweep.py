"""The operator sweep (tools/sweeps/opsweep.py): its quick subset in process, and its comparison and page."""

from __future__ import annotations

import pytest
import torch

# torch's OpInfo database imports expecttest, which torch itself does not install.
pytest.importorskip("expecttest", reason="the OpInfo database needs expecttest: pip install expecttest")

from tools.sweeps import opsweep  # noqa: E402


@pytest.fixture(scope="module")
def infos() -> dict:
    return opsweep.op_infos()


@pytest.mark.parametrize("key", opsweep.QUICK_OPS)
def test_quick_op_matches_eager(infos: dict, key: str) -> None:
    records = opsweep.sweep_op(infos[key], torch.float32, samples=1, exporters=(opsweep.OURS,))
    assert records, f"{key} produced no records"
    # Samples torch.export cannot capture say nothing about the exporter.
    failed = [r for r in records if r.status not in ("pass", "capture_failed")]
    assert not failed, "; ".join(f"sample {r.sample} ({r.inputs}): {r.status}: {r.error}" for r in failed)


def test_skips_random_ops_by_name_only(infos: dict) -> None:
    assert opsweep.skip_reason(infos["normal"], torch.float32).startswith("random")
    assert opsweep.skip_reason(infos["nn.functional.dropout"], torch.float32).startswith("random")
    assert opsweep.skip_reason(infos["empty_like"], torch.float32).startswith("nondeterministic")
    # Deterministic ops whose names merely contain a marker.
    assert opsweep.skip_reason(infos["__rand__"], torch.int64) is None
    assert opsweep.skip_reason(infos["nn.functional.normalize"], torch.float32) is None


def test_compare_views_real_pairs_as_complex_and_checks_dtype() -> None:
    expected = torch.tensor([1 + 2j, 3 - 1j], dtype=torch.complex64)
    opsweep.compare(expected, [torch.view_as_real(expected)])
    opsweep.compare((torch.ones(2), torch.arange(3)), [torch.ones(2), torch.arange(3)])
    with pytest.raises(AssertionError, match="3 ONNX outputs for 2 eager outputs"):
        # An extra output (a mutated buffer, say) is a divergence, not something to skip over.
        opsweep.compare((torch.ones(2), torch.arange(3)), [torch.zeros(1), torch.ones(2), torch.arange(3)])
    with pytest.raises(AssertionError, match=r"output 1 of 2: dtype torch.int32 != eager torch.int64"):
        opsweep.compare((torch.ones(2), torch.arange(3)), [torch.ones(2), torch.arange(3, dtype=torch.int32)])
    with pytest.raises(AssertionError, match="Mismatched elements: 1 / 2"):
        opsweep.compare(torch.ones(2), [torch.tensor([1.0, 1.1])])


def test_page_lists_what_torch_onnx_passes_and_groups_causes() -> None:
    records = [
        opsweep.Record("add", 0, opsweep.OURS, "pass"),
        opsweep.Record("add", 0, opsweep.THEIRS, "pass"),
        opsweep.Record("foo", 0, opsweep.OURS, "export_failed", inputs="float32[3]", error="TranslationError: node 'foo_1' failed at 3"),
        opsweep.Record("foo", 0, opsweep.THEIRS, "pass"),
        opsweep.Record("foo", 1, opsweep.OURS, "export_failed", error="TranslationError: node 'foo_2' failed at 4"),
        opsweep.Record("foo", 1, opsweep.THEIRS, "export_failed", error="ConversionError: …"),
        opsweep.Record(
            "baz", 0, opsweep.OURS, "export_failed",
            error="MissingTranslationError: 2 operator(s) have no ONNX translation and no decomposition: aten::baz, prims::qux.",
        ),
        opsweep.Record("baz", 0, opsweep.THEIRS, "mismatch", error="AssertionError: Tensor-likes are not close!; Mismatched elements: 1 / 2"),
        opsweep.Record("bar", 0, opsweep.OURS, "capture_failed", error="UserError: data-dependent"),
        opsweep.Record("bar", 0, opsweep.THEIRS, "capture_failed", error="UserError: data-dependent"),
        opsweep.Record("normal", None, opsweep.OURS, "skipped", error="random: draws random numbers"),
        opsweep.Record("normal", None, opsweep.THEIRS, "skipped", error="random: draws random numbers"),
    ]
    header = {
        "dtype": "float32", "samples": 3, "command": "python tools/sweeps/opsweep.py", "exporters": list(opsweep.EXPORTERS),
        "ops": ["add", "foo", "baz", "bar", "normal"], "torch": "x", "onnxscript": "x", "onnxruntime": "x",
        "commit": "abc", "date": "today", "minutes": 1.0, "jobs": 1,
    }
    page = opsweep.render_markdown(header, records)
    assert "python tools/sweeps/opsweep.py" in page
    assert "| **pass rate** | **25.0%** | **50.0%** |" in page
    assert "## torch.onnx passes, torch_onnx_fx fails: 1 samples" in page
    assert "| foo | 0 | `float32[3]` | export_failed |" in page
    # Both failures of foo are one cause once node names and numbers are blanked.
    assert "| 2 | export_failed | TranslationError: node 'foo_N' failed at N | foo |" in page
    assert "| `aten::baz` | 1 | baz |" in page and "| `prims::qux` | 1 | baz |" in page
    assert "| **foo** | export_failed 2 | pass 1, export_failed 1 |  |" in page
    assert "1 samples torch.export cannot capture" in page


def test_dtype_summary_merges_runs_and_counts_silent_mismatches(tmp_path) -> None:
    import dataclasses
    import json

    from tools.sweeps import dtypesweep

    def run(path, exporter, statuses):
        header = {"kind": "header", "dtype": "int8", "samples": 2, "exporters": [exporter], "commit": exporter,
                  "date": "today", "minutes": 1.0, "ops": ["a", "b", "c"], "jobs": 1, "opset": None, "command": "x"}
        records = [opsweep.Record(op, 0, exporter, status) for op, status in statuses.items()]
        path.write_text("\n".join([json.dumps(header)] + [json.dumps({"kind": "record", **dataclasses.asdict(r)}) for r in records]))
        return path

    ours = run(tmp_path / "ours.jsonl", opsweep.OURS, {"a": "pass", "b": "mismatch", "c": "export_failed"})
    theirs = run(tmp_path / "theirs.jsonl", opsweep.THEIRS, {"a": "pass", "b": "pass", "c": "ort_failed"})
    fixed = run(tmp_path / "rerun.jsonl", opsweep.OURS, {"c": "pass"})
    header, records = dtypesweep.merge(ours, theirs, [fixed])
    assert header["exporters"] == [opsweep.OURS, opsweep.THEIRS]
    section = dtypesweep.dtype_section({"int8": (header, records)})
    # ours: a, c pass, b mismatches (torch.onnx passes it); torch.onnx: a, b pass.
    assert "| int8 | 3 | 2 (66.7%) | 2 (66.7%) | 1 | 0 | 1 |" in section


def test_programs_that_draw_random_numbers_are_not_compared() -> None:
    class Dropout(torch.nn.Module):
        def __init__(self, p: float, train: bool):
            super().__init__()
            self.p, self.train_ = p, train

        def forward(self, x):
            return torch.nn.functional.dropout(x, self.p, self.train_) + 1

    x = torch.ones(4)
    assert opsweep.draws_random(torch.export.export(Dropout(0.5, True), (x,)))
    assert not opsweep.draws_random(torch.export.export(Dropout(0.5, False), (x,)))
    assert not opsweep.draws_random(torch.export.export(Dropout(0.0, True), (x,)))
    # An eval-mode LSTM carries the tag for its dropout between layers, off when not training.
    lstm = torch.nn.LSTM(4, 3, num_layers=2, dropout=0.5).eval()
    assert not opsweep.draws_random(torch.export.export(lstm, (torch.ones(2, 1, 4),)))


def test_eigenvectors_are_compared_up_to_sign_and_phase() -> None:
    for dtype in (torch.float64, torch.complex128):
        a = torch.randn(4, 4, dtype=dtype)
        values, vectors = torch.linalg.eigh(a @ a.mH)
        flipped = vectors * torch.tensor([1, -1, 1j if dtype.is_complex else 1, -1], dtype=dtype)
        opsweep._same_eigenvectors((values, vectors), [values, flipped])
        with pytest.raises(AssertionError):
            opsweep._same_eigenvectors((values, vectors), [values, vectors[:, [1, 0, 2, 3]]])


def test_float32_output_closer_to_float64_than_eager_passes() -> None:
    class Sample:
        input = torch.tensor([1.0, 2.0])
        args: tuple = ()
        kwargs: dict = {}

    class Info:
        @staticmethod
        def op(x):
            return x * 3

    exact = torch.tensor([3.0, 6.0])
    eager_off = exact + torch.tensor([0.0, 1e-2])  # eager's own rounding, say
    compare = opsweep.closer_than_eager(Info, Sample, opsweep.compare)
    compare(eager_off, [exact])  # ours is the exact result: passes
    with pytest.raises(AssertionError):
        compare(exact, [eager_off])  # ours is farther than eager: fails
