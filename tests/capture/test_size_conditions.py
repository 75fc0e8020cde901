"""capture/size_conditions.py: the sizes a graph is valid for, said at export and checked by program(...).

A model whose Python code branches on a size is traced along one branch; the ONNX graph computes
only that branch. Before, such graphs were presented as dynamic and failed in ONNX Runtime at other
sizes — or, where the branch changed values, returned wrong numbers.
"""

from __future__ import annotations

import json
import warnings

import pytest
import torch
import torch.nn.functional as F

import torch_onnx_fx
from helpers import assert_matches_eager
from torch_onnx_fx.errors import InputMismatchError


def pad_to_windows(x):
    pad = (4 - x.shape[-1] % 4) % 4
    if pad > 0:
        x = F.pad(x, (0, pad))
    return x.reshape(*x.shape[:-1], -1, 4).sum(-1)


def doubled_when_long(x):
    return x * 2 if x.shape[-1] > 8 else x - 1


def _export(fn, x):
    with pytest.warns(UserWarning, match="The exported graph is valid only for inputs where"):
        return torch_onnx_fx.export(fn, (x,), dynamic_shapes=({1: "length"},), verbose=False)


def _checked(fn, example, conditions, inside, outside, message):
    """Exported with ``conditions``, equal to eager at the sizes ``inside``, refused at ``outside``."""
    program = _export(fn, example)
    assert program.size_conditions == conditions
    assert_matches_eager(fn, (example,), program=program, more_inputs=[((x,), {}) for x in inside])
    with pytest.raises(InputMismatchError, match=message):
        program(outside)


def test_a_branch_that_changes_values_is_a_bound_the_program_checks():
    # Eager doubles at 12; the graph would subtract 1: refused, not wrong.
    _checked(doubled_when_long, torch.randn(2, 8), ["length <= 8"], [torch.randn(2, 5)], torch.randn(2, 12), r"length = 12\) break length <= 8")


def test_a_branch_that_changes_shapes_is_a_multiple_the_program_checks():
    program = _export(pad_to_windows, torch.randn(2, 8))
    assert program.size_conditions == ["length % 4 == 0"]
    assert_matches_eager(pad_to_windows, (torch.randn(2, 8),), program=program, more_inputs=[((torch.randn(2, 12),), {})])
    with pytest.raises(InputMismatchError, match="length % 4 == 0"):
        program(torch.randn(2, 9))


def pooled_to_seven(x):
    return F.adaptive_avg_pool1d(x, 7)


def test_a_condition_on_a_residue_torch_cannot_evaluate_everywhere_is_checked():
    # torch's decomposition of adaptive pooling chose fixed windows at length 8 and recorded
    # 7 % (length % 7) == 0 (undefined at multiples of 7): the condition went unchecked, and
    # lengths 9 to 13 returned the windows of 8, up to 0.77 off (torch.onnx too).
    program = _export(pooled_to_seven, torch.randn(3, 8))
    assert program.size_conditions == ["length % 7 == 1"]
    assert_matches_eager(pooled_to_seven, (torch.randn(3, 8),), program=program, more_inputs=[((torch.randn(3, 15),), {})])
    for length in (7, 9, 13):
        with pytest.raises(InputMismatchError, match=rf"length = {length}\) break length % 7 == 1"):
            program(torch.randn(3, length))


def test_branch_decisions_of_a_decomposition_after_capture_are_checked_on_every_dim():
    # An ExportedProgram passed in is decomposed after capture: adaptive pooling's window choices
    # were only in the shape environment's guards, unread, and with both spatial dims dynamic
    # the sampled sizes never met both narrow ranges at once, so every condition passed as
    # implied. The graph computes the example's windows only.
    model = torch.nn.AdaptiveAvgPool2d((5, 7))
    dims = {d: torch.export.Dim.AUTO for d in range(4)}
    captured = torch.export.export(model, (torch.randn(1, 8, 8, 8),), dynamic_shapes=(dims,), strict=False)
    with pytest.warns(UserWarning, match="valid only for inputs where"):
        program = torch_onnx_fx.export(captured, verbose=False)
    for height, width in ((7, 8), (9, 8)):
        assert_matches_eager(model, (torch.randn(1, 3, height, width),), program=program)
    for height, width in ((6, 8), (8, 9), (8, 12)):
        with pytest.raises(InputMismatchError):
            program(torch.randn(1, 8, height, width))


def seventy_percent(x):
    return x[:, : int(x.shape[-1] * 0.7)]


def attention_scaled_by_length(x):
    q = x[None]
    return F.scaled_dot_product_attention(q, q, q, scale=x.shape[-1] ** -0.5)


def test_decisions_torch_export_does_not_write_into_the_graph_are_checked_too():
    # A decision in float arithmetic is an assert torch.export cannot write as graph code: it
    # dropped it without a word, and the dim stayed dynamic with the example's decision built
    # in (2 columns at length 12 for eager's 8; torch.onnx returns them too).
    _checked(seventy_percent, torch.randn(2, 4), ["3 <= length <= 4"], [torch.randn(2, 3)], torch.randn(2, 12), r"length = 12\) break 3 <= length <= 4")
    _checked(attention_scaled_by_length, torch.randn(3, 4), ["length == 4"], [], torch.randn(3, 9), "length == 4")


def test_the_conditions_are_in_the_models_metadata_and_the_report(tmp_path):
    program = _export(pad_to_windows, torch.randn(2, 8))
    assert json.loads(program.model.metadata_props["pkg.torch_onnx_fx.size_conditions"]) == ["length % 4 == 0"]
    with pytest.warns(UserWarning):
        torch_onnx_fx.export(pad_to_windows, (torch.randn(2, 8),), dynamic_shapes=({1: "length"},), report=True, artifacts_dir=tmp_path, verbose=False)
    report = next(tmp_path.glob("*.md")).read_text()
    assert "## Size conditions" in report and "`length % 4 == 0`" in report


def test_an_exported_program_with_automatic_dims_keeps_its_guards():
    class Windows(torch.nn.Module):
        def forward(self, x):
            return pad_to_windows(x)

    auto = torch.export.Dim.AUTO
    captured = torch.export.export(Windows(), (torch.randn(2, 8),), dynamic_shapes=({0: auto, 1: auto},), strict=False)
    with pytest.warns(UserWarning, match="% 4 == 0"):
        program = torch_onnx_fx.export(captured, (torch.randn(2, 8),), verbose=False)
    assert len(program.size_conditions) == 1 and program.size_conditions[0].endswith("% 4 == 0")
    with pytest.raises(InputMismatchError):
        program(torch.randn(2, 10))


def test_models_without_size_decisions_say_nothing(recwarn):
    program = torch_onnx_fx.export(lambda x: x.relu().sum(-1), (torch.randn(2, 8),), dynamic_shapes=({0: "batch", 1: "length"},), verbose=False)
    assert program.size_conditions == []
    assert "pkg.torch_onnx_fx.size_conditions" not in program.model.metadata_props
    assert not [w for w in recwarn if "valid only" in str(w.message)]


def test_relations_between_two_dims_are_not_enforced():
    # torch.onnx runs a call whose batch of 1 broadcasts against a batch of 3; so does program(...).
    def model(x, y):
        return x + y

    program = torch_onnx_fx.export(model, (torch.randn(3, 4), torch.randn(3, 4)), dynamic_shapes=({0: "batch"}, {0: "batch"}), verbose=False)
    assert program.size_conditions == []
    assert_matches_eager(model, (torch.randn(1, 4), torch.randn(3, 4)), program=program)


def test_guards_of_a_varargs_forward_are_read():
    # forward(*tensors): torch.export names the input tensors_0 and its guards L['tensors'][0].
    class Windows(torch.nn.Module):
        def forward(self, *tensors):
            return pad_to_windows(tensors[0])

    auto = torch.export.Dim.AUTO
    captured = torch.export.export(Windows(), (torch.randn(2, 8),), dynamic_shapes=(({0: auto, 1: auto},),), strict=False)
    with pytest.warns(UserWarning, match="% 4 == 0"):
        program = torch_onnx_fx.export(captured, (torch.randn(2, 8),), verbose=False)
    with pytest.raises(InputMismatchError):
        program(torch.randn(2, 9))


def squeezed(x):
    return x.squeeze(1).exp(), x.squeeze((0, 2)) * 2, x[:, :-1].squeeze(1)


def test_a_dynamic_dim_squeezed_is_refused_at_one():
    """torch.export keeps a squeezed dynamic dim (it assumes it is not 1, and records nothing);
    eager drops it at 1, where the graph's result had a dim more than eager's (torch.onnx squeezes
    it and fails at every other size). ``length - 1``, which a slice squeezes, is 1 at length 2."""
    with pytest.warns(UserWarning, match="length != 1; length != 2"):
        program = torch_onnx_fx.export(squeezed, (torch.randn(1, 5, 1),), dynamic_shapes=({1: "length"},), verbose=False)
    assert program.size_conditions == ["length != 1", "length != 2"]
    assert_matches_eager(squeezed, (torch.randn(1, 5, 1),), program=program, more_inputs=[((torch.randn(1, 3, 1),), {})])
    for length in (1, 2):
        with pytest.raises(InputMismatchError, match=f"length = {length}\\) break length != {length}"):
            program(torch.randn(1, length, 1))


def test_a_static_or_unsqueezed_dim_adds_no_condition():
    def kept(x):
        return x.squeeze(0), x.squeeze(-1).sum(1)

    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        program = torch_onnx_fx.export(kept, (torch.randn(1, 5, 3),), dynamic_shapes=({1: "length"},), verbose=False)
    assert program.size_conditions == []
    assert_matches_eager(kept, (torch.randn(1, 5, 3),), program=program, more_inputs=[((torch.randn(1, 1, 3),), {})])


def test_a_squeezed_size_derived_from_a_dim_is_said_in_the_dims_name():
    def halves(x):
        return x.unflatten(1, (-1, 2)).squeeze(1) * 2

    with pytest.warns(UserWarning, match=r"length not in \(2, 3\)"):
        program = torch_onnx_fx.export(halves, (torch.randn(1, 8),), dynamic_shapes=({1: "length"},), verbose=False)
    assert program.size_conditions == ["length % 2 == 0", "length not in (2, 3)"]
    assert_matches_eager(halves, (torch.randn(1, 8),), program=program, more_inputs=[((torch.randn(1, 10),), {})])
    with pytest.raises(InputMismatchError, match=r"length = 2\) break length not in \(2, 3\)"):
        program(torch.randn(1, 2))
