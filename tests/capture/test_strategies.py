"""Capture is as lenient as torch.onnx's: size-1 dynamic dims, refinable Dim ranges."""

from __future__ import annotations

import warnings

import pytest
import torch
from torch import nn
from torch.export import Dim

import torch_onnx_fx
from helpers import assert_matches_eager


class CatAdd(nn.Module):
    def forward(self, x, y, z):
        return torch.cat((x, y), dim=1) + z


def test_dynamic_dims_of_size_one_stay_symbolic():
    args = (torch.randn(1, 3), torch.randn(1, 5), torch.randn(1, 8))
    shapes = ({0: "batch", 1: "a"}, {0: "batch", 1: "b"}, {0: "batch", 1: "c"})
    program = assert_matches_eager(
        CatAdd(), args, dynamic_shapes=shapes,
        more_inputs=[((torch.randn(4, 2), torch.randn(4, 6), torch.randn(4, 8)), {})],
    )
    assert [str(d) for d in program.model.graph.inputs[0].shape] == ["batch", "a"]


class RmsNorm(nn.Module):
    """Phi-3's RMSNorm: re-traced by decomposition, which must keep size-1 dims symbolic too."""

    def __init__(self):
        super().__init__()
        self.weight = nn.Parameter(torch.rand(16))

    def forward(self, hidden_states):
        variance = hidden_states.float().pow(2).mean(-1, keepdim=True)
        return self.weight * (hidden_states * torch.rsqrt(variance + 1e-6))


def test_size_one_batch_is_not_specialised_through_decomposition():
    program = assert_matches_eager(
        RmsNorm(), (), {"hidden_states": torch.rand(1, 5, 16)},
        dynamic_shapes={"hidden_states": {0: "batch", 1: "seq"}},
        more_inputs=[((), {"hidden_states": torch.rand(3, 2, 16)})],
    )
    assert str(program.model.graph.outputs[0].shape[0]) == "batch"


class NeedsRange(nn.Module):
    def forward(self, x, y):
        if x.shape[0] >= 6 and y.shape[0] <= 16:
            return x * 2.0, y + 1
        return x, y


def test_conflicting_dim_ranges_are_refined_with_a_warning():
    shapes = {"x": (Dim("dx"),), "y": (Dim("dy"),)}
    with pytest.warns(UserWarning, match=r"suggested fixes were applied[\s\S]*dx = Dim\('dx', min=6\)"):
        program = assert_matches_eager(
            NeedsRange(), (torch.randn(16), torch.randn(12)), dynamic_shapes=shapes,
            more_inputs=[((torch.randn(9), torch.randn(3)), {})],
        )
    assert "dy = Dim('dy', max=16)" in program.capture_refinements
    assert program.capture_strategy == "torch.export(strict=False)"


def test_shapes_taken_as_given_record_no_refinement():
    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        program = torch_onnx_fx.export(CatAdd().eval(), (torch.randn(2, 3), torch.randn(2, 5), torch.randn(2, 8)), verbose=False)
    assert program.capture_refinements == ""


def test_fixes_that_specialise_a_dim_are_applied_too():
    class Square(nn.Module):
        def forward(self, x):
            return x @ x

    with pytest.warns(UserWarning, match="suggested fixes were applied"):
        program = assert_matches_eager(Square(), (torch.randn(3, 3),), dynamic_shapes=({0: Dim("rows"), 1: None},))
    assert list(program.model.graph.inputs[0].shape) == [3, 3]


def test_data_dependent_control_flow_still_fails_with_a_capture_error():
    class Branch(nn.Module):
        def forward(self, x):
            return x + 1 if x.sum() > 0 else x - 1

    with pytest.raises(torch_onnx_fx.CaptureError, match="torch.export could not capture"):
        torch_onnx_fx.export(Branch(), (torch.randn(3),), verbose=False)


def test_eager_mode_quantized_model_is_told_what_to_do_instead():
    class Quantized(nn.Module):
        def __init__(self):
            super().__init__()
            self.linear = torch.ao.nn.quantized.Linear(4, 4)

        def forward(self, x):
            # A per-channel quantized tensor made in forward: not something a module stands for.
            scales, zero_points = torch.full((2,), 0.1), torch.zeros(2, dtype=torch.long)
            return self.linear(torch.quantize_per_channel(x, scales, zero_points, 0, torch.quint8)).dequantize()

    # The quantized modules themselves are captured (tests/capture/test_eager_quantization.py).
    with pytest.raises(torch_onnx_fx.errors.CaptureError, match=r"(?s)eager-mode quantized modules \(Linear\).*cannot be traced.*quantize_pt2e") as caught:
        torch_onnx_fx.export(Quantized().eval(), (torch.randn(2, 4),), verbose=False)
    # No frame of the user's code failed: none is shown (the standard library's is no help).
    assert "contextlib.py" not in str(caught.value)



def test_failure_inside_an_installed_model_library_names_its_line_and_the_callers(tmp_path, monkeypatch):
    # Most models are a library's (transformers, diffusers): the line that stops the capture is in
    # an installed package, and is the one to show, with the user's own line that called it.
    library = tmp_path / "site-packages" / "modellib_for_tofx_test"
    library.mkdir(parents=True)
    (library / "__init__.py").write_text(
        "def scaled(x):\n"
        "    if x.sum() > 0:\n"
        "        return x * 2\n"
        "    return x\n"
    )
    monkeypatch.syspath_prepend(str(tmp_path / "site-packages"))
    import modellib_for_tofx_test

    class Model(nn.Module):
        def forward(self, x):
            return modellib_for_tofx_test.scaled(x) + 1

    with pytest.raises(torch_onnx_fx.CaptureError) as caught:
        torch_onnx_fx.export(Model(), (torch.randn(4, 3),), dynamic_shapes=({0: "batch"},), verbose=False)
    message = str(caught.value)
    assert "modellib_for_tofx_test" in message and "__init__.py:2: if x.sum() > 0:" in message, message
    assert "called from " in message and "test_strategies.py" in message and "return modellib_for_tofx_test.scaled(x) + 1" in message, message
    assert "Fix the reported line" in message


def test_a_dynamic_dim_the_model_makes_constant_is_reported_at_the_line_that_did_it():
    # torch.export says only that tracing inferred a static size; the line is found by tracing
    # again with torch's record of specializations on.
    class Listed(nn.Module):
        def forward(self, x):
            return x + torch.tensor([1.0] * x.shape[0])[:, None]

    with pytest.raises(torch_onnx_fx.CaptureError) as caught:
        torch_onnx_fx.export(Listed(), (torch.randn(3, 4),), dynamic_shapes=({0: "batch"},), verbose=False)
    message = str(caught.value)
    assert "x.shape[0] became 3 at " in message, message
    assert "test_strategies.py" in message and "return x + torch.tensor([1.0] * x.shape[0])[:, None]" in message, message
    assert "Keep those sizes symbolic" in message and "No line of the model's own code" not in message


def test_a_dim_pinned_by_several_guards_of_one_line_is_said_once():
    from torch_onnx_fx.capture.specializations import Specialization, describe

    same = Specialization(("x.shape[0]",), "3", "model.py:7: n = int(x.shape[0])")
    text = describe([same, same, Specialization(("y.shape[1]",), "4", None)])
    assert text.count("x.shape[0] became 3 at model.py:7") == 1 and "y.shape[1]" not in text, text


class TimestepRowsByImageBatch(nn.Module):
    """diffusers' LTX-Video: the timestep embedding viewed by the *image* batch, so its rows are
    (timestep batch) // (image batch), 1 wherever the batches agree, and added to every token."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(1, 8)

    def forward(self, hidden_states, timestep):
        batch = hidden_states.shape[0]
        emb = self.embed(timestep[:, None])
        return hidden_states + emb.view(batch, -1, emb.shape[-1])


def test_a_size_that_is_one_only_by_its_examples_is_captured_from_them():
    # Size-oblivious tracing cannot see that the rows are 1 and fails at the broadcast (as
    # torch.onnx does); traced from the examples, the two batches are found equal.
    shapes = {"hidden_states": {0: "batch", 1: "tokens"}, "timestep": {0: "batch"}}
    program = assert_matches_eager(
        TimestepRowsByImageBatch().eval(), (torch.randn(2, 5, 8), torch.rand(2)), dynamic_shapes=shapes,
        more_inputs=[((torch.randn(3, 7, 8), torch.rand(3)), {})],
    )
    assert program.capture_strategy == "torch.export(strict=False) with sizes traced from their examples"
    assert program._capture_strategy == "TorchExportNonStrictStrategy"


def test_dims_found_equal_from_the_examples_are_checked_as_one():
    # Traced from the examples, the rows (timestep batch) // (image batch) are 1 and torch.export
    # merges the batches: the graph views the embedding as 1 row. An image batch of 1 beside 3
    # timesteps is valid in eager (3 rows against 3 tokens) and would broadcast to a wrong
    # result: the call is refused, as the export warned.
    model = TimestepRowsByImageBatch().eval()
    shapes = {"hidden_states": {0: "batch", 1: "tokens"}, "timestep": {0: "steps"}}
    with pytest.warns(UserWarning, match="valid only for inputs where hidden_states.shape.0. == timestep.shape.0."):
        program = torch_onnx_fx.export(model, (torch.randn(2, 5, 8), torch.rand(2)), dynamic_shapes=shapes, verbose=False)
    assert program.size_conditions == ["hidden_states.shape[0] == timestep.shape[0] (both batch)"]
    with pytest.raises(torch_onnx_fx.InputMismatchError, match=r"timestep.shape\[0\] = 3"):
        program(torch.randn(1, 3, 8), torch.rand(3))
    assert_matches_eager(model, (torch.randn(3, 7, 8), torch.rand(3)), program=program)


def test_an_input_dim_traced_as_an_expression_of_another_is_checked():
    # Traced from the examples, t's length is merged into 2 * (h's batch): the graph takes every
    # other row of t viewed by 2 * batch. t of 6 beside a batch of 1 is valid in eager (3 rows
    # against 3 tokens) and broadcast wrong in the graph: the call is refused.
    class EveryOtherRow(nn.Module):
        def forward(self, h, t):
            return h + t[:, None].expand(-1, 4).view(2 * h.shape[0], -1, 4)[::2]

    model = EveryOtherRow()
    with pytest.warns(UserWarning, match=r"t.shape\[0\] == 2\*B"):
        program = torch_onnx_fx.export(
            model, (torch.randn(2, 5, 4), torch.rand(4)), dynamic_shapes={"h": {0: "B", 1: "L"}, "t": {0: "T"}}, verbose=False,
        )
    with pytest.raises(torch_onnx_fx.InputMismatchError, match=r"t.shape\[0\] = 6"):
        program(torch.randn(1, 3, 4), torch.rand(6))
    assert_matches_eager(model, (torch.randn(3, 7, 4), torch.rand(6)), program=program)
