"""Every bad input gets a clear error; legacy arguments warn or refuse, never pass silently."""

from __future__ import annotations

import warnings

import pytest
import torch
from torch import nn

import torch_onnx_fx
from helpers import assert_matches_eager, no_translation


def test_dynamo_false_is_refused():
    with pytest.raises(torch_onnx_fx.UnsupportedArgumentError, match="dynamo=False"):
        torch_onnx_fx.export(nn.ReLU(), (torch.randn(2),), dynamo=False)


def test_old_opset_is_refused():
    with pytest.raises(torch_onnx_fx.UnsupportedArgumentError, match="opset_version=12"):
        torch_onnx_fx.export(nn.ReLU(), (torch.randn(2),), opset_version=12)


def test_capture_failure_lists_every_strategy_with_user_line():
    class Bad(nn.Module):
        def forward(self, x):
            if x.sum() > 0:  # data-dependent control flow: torch.export cannot capture it
                return x + 1
            return x - 1

    with pytest.raises(torch_onnx_fx.CaptureError) as info:
        torch_onnx_fx.export(Bad(), (torch.randn(3),), verbose=False)
    message = str(info.value)
    assert "torch.export(strict=False)" in message and "torch.export(strict=True)" in message
    assert "test_errors.py" in message
    assert len(info.value.failures) == 2


def test_capture_failure_without_a_user_line_says_to_check_the_inputs(capfd):
    # A wrong input shape fails in a torch kernel: there is no line of the user's to fix, and
    # torch logged a 40-line fake-tensor traceback at ERROR before the error was raised.
    with pytest.raises(torch_onnx_fx.CaptureError) as info:
        torch_onnx_fx.export(nn.Linear(3, 4).eval(), (torch.randn(2, 5),), verbose=False)
    message = str(info.value)
    assert "a and b must have same reduction dim" in message
    assert "Fix the reported line" not in message and "runs in eager with these inputs" in message
    assert "Traceback" not in capfd.readouterr().err


def test_torch_loggers_are_restored_after_a_quiet_capture():
    import logging

    logger = logging.getLogger("torch._subclasses.fake_tensor")
    before = logger.level
    with pytest.raises(torch_onnx_fx.CaptureError):
        torch_onnx_fx.export(nn.Linear(3, 4).eval(), (torch.randn(2, 5),), verbose=False)
    assert logger.level == before


def test_dynamic_shapes_that_do_not_mirror_the_inputs_are_named_once():
    class Cached(nn.Module):
        def forward(self, x, cache):
            return x + cache["k"]

    with pytest.raises(torch_onnx_fx.CaptureError) as info:
        torch_onnx_fx.export(
            Cached().eval(), (torch.randn(2, 3),), kwargs={"cache": {"k": torch.randn(2, 3)}},
            dynamic_shapes={"x": {0: "b"}, "cache": {"key": {0: "b"}}}, verbose=False,
        )
    message = str(info.value)
    assert "has keys ['key']" in message and "Make dynamic_shapes mirror the inputs" in message
    assert "[torch.export(strict=True)] the same error as torch.export(strict=False)" in message
    assert "Fix the reported line" not in message


def test_missing_translations_are_listed_together_with_an_example():
    class Model(nn.Module):
        def forward(self, x):
            return no_translation(x, 2.0) + no_translation(x + 1, 3.0)

    with pytest.raises(torch_onnx_fx.MissingTranslationError) as info:
        torch_onnx_fx.export(Model(), (torch.rand(3) + 1,), verbose=False)
    assert info.value.targets
    assert "custom_translation_table" in str(info.value)


def test_translation_failure_names_node_target_shapes_and_source_line():
    def broken(x):
        raise ValueError("deliberately broken translation")

    class Model(nn.Module):
        def forward(self, x):
            return torch.relu(x)

    with pytest.raises(torch_onnx_fx.TranslationError) as info:
        torch_onnx_fx.export(
            Model(), (torch.randn(2, 3),), custom_translation_table={torch.ops.aten.relu.default: broken}, verbose=False
        )
    message = str(info.value)
    assert "relu" in message and "float32[2, 3]" in message
    assert "test_errors.py" in message and "deliberately broken" in message


def test_custom_translation_table_is_used_first():
    from onnxscript import opset18 as op

    def relu_as_identity(x):
        return op.Identity(x)

    program = torch_onnx_fx.export(
        nn.ReLU(), (torch.randn(4),), custom_translation_table={torch.ops.aten.relu.default: relu_as_identity}, verbose=False
    )
    x = torch.randn(4)
    torch.testing.assert_close(program(x)[0], x)


def test_overload_packet_key_is_refused_with_the_overload_to_use():
    with pytest.raises(torch_onnx_fx.UnsupportedArgumentError, match="aten.relu.default"):
        torch_onnx_fx.export(nn.ReLU(), (torch.randn(2),), custom_translation_table={torch.ops.aten.relu: lambda x: x})


@pytest.mark.parametrize(
    "name, value",
    [("do_constant_folding", False), ("autograd_inlining", False), ("custom_opsets", {"my.domain": 2})],
)
def test_deprecated_arguments_warn(name, value):
    with pytest.warns(DeprecationWarning, match=name):
        program = torch_onnx_fx.export(nn.ReLU(), (torch.randn(2),), verbose=False, **{name: value})
    if name == "custom_opsets":
        assert program.model.opset_imports["my.domain"] == 2


def test_unhonourable_legacy_arguments_raise():
    with pytest.raises(torch_onnx_fx.UnsupportedArgumentError, match="training"):
        torch_onnx_fx.export(nn.ReLU(), (torch.randn(2),), training=torch.onnx.TrainingMode.TRAINING)
    with pytest.raises(torch_onnx_fx.UnsupportedArgumentError, match="operator_export_type"):
        torch_onnx_fx.export(
            nn.ReLU(), (torch.randn(2),), operator_export_type=torch.onnx.OperatorExportTypes.ONNX_ATEN_FALLBACK
        )


def test_export_params_without_f_warns():
    with pytest.warns(UserWarning, match="only apply when f is given"):
        torch_onnx_fx.export(nn.ReLU(), (torch.randn(2),), export_params=False, verbose=False)


def test_too_many_names_and_both_dynamic_forms_are_refused():
    with pytest.raises(torch_onnx_fx.UnsupportedArgumentError, match="output_names"):
        torch_onnx_fx.export(nn.ReLU(), (torch.randn(2),), output_names=["a", "b"], verbose=False)
    with pytest.raises(torch_onnx_fx.UnsupportedArgumentError, match="dynamic_shapes or the legacy dynamic_axes"):
        torch_onnx_fx.export(nn.ReLU(), (torch.randn(2),), dynamic_shapes=({0: "n"},), dynamic_axes={"x": [0]})


def test_bad_dynamic_shapes_entry_is_explained():
    with pytest.raises(torch_onnx_fx.UnsupportedArgumentError, match="out of range"):
        torch_onnx_fx.export(nn.ReLU(), (torch.randn(2),), dynamic_shapes=({3: "n"},), verbose=False)


def test_torchscript_models_get_a_clear_error():
    scripted = torch.jit.script(nn.ReLU())
    with pytest.raises(torch_onnx_fx.OnnxExporterError, match="TorchScript"):
        torch_onnx_fx.export(scripted, (torch.randn(2),), verbose=False)


def test_type_promotion_matches_eager():
    class Model(nn.Module):
        def forward(self, i, f):
            return i + 0.5, i / 2, i * f, (i > 1.5), torch.where(i > 1, i, f)

    with warnings.catch_warnings():
        warnings.simplefilter("error", UserWarning)
        assert_matches_eager(Model().eval(), (torch.tensor([1, 2, 3]), torch.tensor([0.5, 1.5, 2.5])))


# -- every public argument, one bad value each (issue 11) ----------------------------------------


class _Two(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(3, 2)

    def forward(self, x, y):
        return self.linear(x) + y


_X, _Y = torch.randn(4, 3), torch.randn(4, 2)


def _export(**options):
    options.setdefault("verbose", False)
    return torch_onnx_fx.export(_Two().eval(), (_X, _Y), **options)


# (argument, bad value, error type, words the message must contain)
EXPORT_CASES = [
    ("opset_version", 999, torch_onnx_fx.UnsupportedArgumentError, "13 to"),
    ("opset_version", "18", torch_onnx_fx.ArgumentTypeError, "opset_version"),
    ("kwargs", [1], torch_onnx_fx.ArgumentTypeError, "kwargs"),
    ("f", 5, torch_onnx_fx.ArgumentTypeError, "f=..."),
    ("verbose", "loud", torch_onnx_fx.ArgumentTypeError, "verbose"),
    ("input_names", "x", torch_onnx_fx.ArgumentTypeError, "input_names"),
    ("output_names", [1], torch_onnx_fx.ArgumentTypeError, "output_names"),
    ("dynamo", "yes", torch_onnx_fx.ArgumentTypeError, "dynamo"),
    ("dynamo", False, torch_onnx_fx.UnsupportedArgumentError, "dynamo=False"),
    ("external_data", "x", torch_onnx_fx.ArgumentTypeError, "external_data"),
    ("dynamic_shapes", 5, torch_onnx_fx.ArgumentTypeError, "dynamic_shapes"),
    ("dynamic_shapes", {"q": {0: "b"}}, torch_onnx_fx.UnsupportedArgumentError, "['q']"),
    ("custom_translation_table", 5, torch_onnx_fx.ArgumentTypeError, "custom_translation_table"),
    ("report", "x", torch_onnx_fx.ArgumentTypeError, "report"),
    ("optimize", "x", torch_onnx_fx.ArgumentTypeError, "optimize"),
    ("verify", "x", torch_onnx_fx.ArgumentTypeError, "verify"),
    ("profile", "x", torch_onnx_fx.ArgumentTypeError, "profile"),
    ("dump_exported_program", "x", torch_onnx_fx.ArgumentTypeError, "dump_exported_program"),
    ("artifacts_dir", 5, torch_onnx_fx.ArgumentTypeError, "artifacts_dir"),
    ("export_params", "x", torch_onnx_fx.ArgumentTypeError, "export_params"),
    ("keep_initializers_as_inputs", "x", torch_onnx_fx.ArgumentTypeError, "keep_initializers_as_inputs"),
    ("dynamic_axes", 5, torch_onnx_fx.ArgumentTypeError, "dynamic_axes"),
    ("dynamic_axes", {"x": ["a"]}, torch_onnx_fx.UnsupportedArgumentError, "dynamic_axes"),
    ("state_outputs", "x", torch_onnx_fx.ArgumentTypeError, "state_outputs"),
    ("training", 5, torch_onnx_fx.ArgumentTypeError, "training"),
    ("operator_export_type", "ATEN", torch_onnx_fx.ArgumentTypeError, "operator_export_type"),
    ("custom_opsets", {"d": "1"}, torch_onnx_fx.UnsupportedArgumentError, "custom_opsets"),
    ("export_modules_as_functions", [nn.Linear, "Linear"], torch_onnx_fx.ArgumentTypeError, "export_modules_as_functions"),
    ("export_modules_as_functions", "Linear", torch_onnx_fx.ArgumentTypeError, "export_modules_as_functions"),
    ("custom_opsets", 5, torch_onnx_fx.ArgumentTypeError, "custom_opsets"),
    ("do_constant_folding", "x", torch_onnx_fx.ArgumentTypeError, "do_constant_folding"),
    ("autograd_inlining", "x", torch_onnx_fx.ArgumentTypeError, "autograd_inlining"),
    ("custom_translation_table", {"relu": abs}, torch_onnx_fx.UnsupportedArgumentError, "qualified operator name"),
]


@pytest.mark.parametrize("name, value, error, words", EXPORT_CASES, ids=[f"{c[0]}={c[1]!r}" for c in EXPORT_CASES])
def test_every_export_argument_refuses_a_bad_value_naming_it(name, value, error, words):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DeprecationWarning)
        with pytest.raises(error) as raised:
            _export(**{name: value})
    assert words in str(raised.value)
    assert isinstance(raised.value, torch_onnx_fx.OnnxExporterError)


def test_an_artifacts_dir_that_cannot_be_created_is_named(tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("")
    with pytest.raises(torch_onnx_fx.UnsupportedArgumentError, match="artifacts_dir=.*cannot create the folder"):
        _export(report=True, artifacts_dir=blocker / "reports")


def test_export_model_and_args_are_checked_before_capture():
    with pytest.raises(torch_onnx_fx.UnsupportedArgumentError, match="model must be"):
        torch_onnx_fx.export(5, (_X,))
    with pytest.raises(torch_onnx_fx.UnsupportedArgumentError, match=r"forward\(x, y\) cannot be called .*missing a required argument: 'y'"):
        torch_onnx_fx.export(_Two(), _X, verbose=False)


def test_numpy_and_list_arguments_are_named_before_capture(monkeypatch):
    import numpy as np

    from torch_onnx_fx.capture import strategies

    def no_capture(*args, **kwargs):
        raise AssertionError("capture must not start")

    monkeypatch.setattr(strategies, "_capture_model", no_capture)
    linear = nn.Linear(3, 4).eval()
    with pytest.raises(torch_onnx_fx.UnsupportedArgumentError, match=r"argument input is a numpy array.*torch.from_numpy"):
        torch_onnx_fx.export(linear, (np.zeros((2, 3), np.float32),), verbose=False)
    with pytest.raises(torch_onnx_fx.UnsupportedArgumentError, match=r"argument y\['k'\] is a numpy array"):
        torch_onnx_fx.export(_Two(), (_X,), kwargs={"y": {"k": np.zeros(3)}}, verbose=False)
    with pytest.raises(torch_onnx_fx.UnsupportedArgumentError, match=r"a list is one argument.*takes a Tensor as 'input'.*as a tuple"):
        torch_onnx_fx.export(linear, [torch.randn(2, 3)], verbose=False)


def test_a_list_of_args_stays_one_argument_where_the_model_takes_a_list():
    class Summed(nn.Module):
        def forward(self, xs: list):
            return xs[0] + xs[1]

    assert_matches_eager(Summed(), ([_X, _X],))
    program = torch_onnx_fx.export(Summed(), [_X, _X], verbose=False)  # as torch.onnx: the list is the argument
    torch.testing.assert_close(program([_X, _X])[0], _X + _X)


@pytest.fixture(scope="module")
def two_program():
    return _export(dynamic_shapes=({0: "batch"}, {0: "batch"}))


CALL_CASES = [
    ("too many", (_X, _Y, _X), {}, "The program takes the graph input(s) ['x', 'y']; the call gave 3 value(s)"),
    ("too few", (_X,), {}, "the call gave 1 value(s) after flattening, 2 expected"),
    ("dtype", (_X.double(), _Y), {}, "input 0 ('x'): got a tensor of dtype torch.float64, expected a torch.float32"),
    ("rank", (_X[0], _Y), {}, "input 0 ('x'): got a tensor of shape [3] (rank 1)"),
    ("static size", (torch.randn(4, 5), _Y), {}, "input 0 ('x'): dimension 1 is 5, but the model was exported with a static size 3"),
    ("numpy", (_X.numpy(), _Y), {}, "input 0 ('x'): got a numpy array"),
    ("python number", (1.0, _Y), {}, "input 0 ('x'): got the Python float 1.0"),
    ("other object", ("x", _Y), {}, "input 0 ('x'): got str"),
    ("unknown keyword", (_X, _Y), {"z": 1}, "Unexpected keyword arguments ['z']"),
]


@pytest.mark.parametrize("case, args, kwargs, words", CALL_CASES, ids=[c[0] for c in CALL_CASES])
def test_program_call_names_the_input_that_does_not_fit(two_program, case, args, kwargs, words):
    with pytest.raises(torch_onnx_fx.InputMismatchError) as raised:
        two_program(*args, **kwargs)
    assert words in str(raised.value)


def test_baked_in_constant_arguments_cannot_be_changed_at_call_time():
    class Scaled(torch.nn.Module):
        def forward(self, x, scale: float):
            return x * scale

    program = torch_onnx_fx.export(Scaled(), (_X, 2.0), verbose=False)
    torch.testing.assert_close(program(_X, 2.0)[0], _X * 2.0)
    with pytest.raises(torch_onnx_fx.InputMismatchError, match="exported as the constant 2.0"):
        program(_X, 3.0)


def test_arguments_baked_in_as_constants_may_be_left_out_of_the_call():
    # The graph has two inputs; the program was asking for four ("4 input(s) expected, 2 given").
    _Z = torch.randn_like(_X)

    class Cached(torch.nn.Module):
        def forward(self, x, y, use_cache=False, mask=None, scale=(2.0, 3.0)):
            return x * scale[0] + y if not use_cache and mask is None else x

    program = torch_onnx_fx.export(Cached(), (_X, _Z), kwargs={"use_cache": False, "mask": None}, verbose=False)
    assert [value.name for value in program.model.graph.inputs] == ["x", "y"]
    for call in ({}, {"use_cache": False}, {"mask": None, "use_cache": False}):
        torch.testing.assert_close(program(_X, _Z, **call)[0], _X * 2.0 + _Z)
    with pytest.raises(torch_onnx_fx.InputMismatchError, match=r"takes the graph input\(s\) \['x', 'y'\] \(and the constant\(s\) \['use_cache', 'mask'\]"):
        program(_X, use_cache=False)
    with pytest.raises(torch_onnx_fx.InputMismatchError, match="exported as the constant False"):
        program(_X, _Z, use_cache=True)
    positional = torch_onnx_fx.export(Cached(), (_X, _Z, False, None), verbose=False)
    torch.testing.assert_close(positional(_X, _Z)[0], _X * 2.0 + _Z)


def test_method_arguments_of_the_program_are_checked(two_program):
    with pytest.raises(torch_onnx_fx.ArgumentTypeError, match="compute_values"):
        two_program.compute_values("x", (_X, _Y))
    with pytest.raises(torch_onnx_fx.ArgumentTypeError, match="args"):
        two_program.compute_values(["x"], _X)
    with pytest.raises(torch_onnx_fx.UnsupportedArgumentError, match="no values named"):
        two_program.compute_values(["nope"], (_X, _Y))
    with pytest.raises(torch_onnx_fx.ArgumentTypeError, match="initializer"):
        two_program.initialize_inference_session(5)
    with pytest.raises(torch_onnx_fx.OnnxRuntimeError, match="Creating the inference session failed: RuntimeError: no runtime"):
        two_program.initialize_inference_session(lambda model: (_ for _ in ()).throw(RuntimeError("no runtime")))
    with pytest.raises(torch_onnx_fx.ArgumentTypeError, match="destination"):
        two_program.save(5)
    with pytest.raises(torch_onnx_fx.ArgumentTypeError, match="kwargs"):
        two_program.compute_values(["x"], (_X, _Y), kwargs=5)
    with pytest.raises(torch_onnx_fx.ArgumentTypeError, match="include_initializers"):
        two_program.save("m.onnx", include_initializers="no")
    with pytest.raises(torch_onnx_fx.ArgumentTypeError, match="keep_initializers_as_inputs"):
        two_program.save("m.onnx", keep_initializers_as_inputs="no")
    with pytest.raises(torch_onnx_fx.ArgumentTypeError, match="external_data=..."):
        two_program.save("m.onnx", external_data="no")
    with pytest.raises(torch_onnx_fx.ArgumentTypeError, match="external_data_name"):
        two_program.save("m.onnx", external_data=True, external_data_name=5)
    with pytest.raises(torch_onnx_fx.UnsupportedArgumentError, match="needs external_data=True"):
        two_program.save("m.onnx", external_data=False, external_data_name="m.data")
    with pytest.raises(torch_onnx_fx.ArgumentTypeError, match="strict"):
        two_program.apply_weights({}, strict="no")


def test_apply_weights_lists_every_offending_key_and_replaces_nothing(two_program):
    state = _Two().state_dict()
    before = two_program(_X, _Y)[0]
    bad = {
        "linear.weight": torch.zeros(3, 3),  # wrong shape
        "linear.bias": torch.zeros(2, dtype=torch.float64),  # wrong dtype
        "other.weight": torch.zeros(1),  # not a weight of this model
    }
    with pytest.raises(torch_onnx_fx.StateDictMismatchError) as raised:
        two_program.apply_weights(bad)
    error = raised.value
    assert error.unexpected == ["other.weight"] and sorted(error.mismatched) == ["linear.bias", "linear.weight"]
    assert "nothing was replaced" in str(error) and "strict=False" in str(error)
    with pytest.raises(torch_onnx_fx.StateDictMismatchError, match=r"missing \(1\): linear.bias") as raised:
        two_program.apply_weights({"linear.weight": state["linear.weight"]})
    assert raised.value.missing == ["linear.bias"]
    with pytest.raises(torch_onnx_fx.ArgumentTypeError, match="not tensors"):
        two_program.apply_weights({**state, "linear.bias": [0.0, 0.0]})
    with pytest.raises(torch_onnx_fx.ArgumentTypeError, match="expected a dict"):
        two_program.apply_weights([state])
    torch.testing.assert_close(two_program(_X, _Y)[0], before)  # nothing was replaced


def test_weights_stay_replaceable_after_optimization():
    """Equal weights are not merged and weights are not folded into derived constants, except
    transposes, stored with the name of their weight: torch.onnx's optimizer merges two
    LayerNorms' equal initial weights and folds w.t() into an anonymous constant, and
    apply_weights then silently updates only one of them (measured: max error 6.3)."""

    class Norms(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a, self.b = torch.nn.LayerNorm(4), torch.nn.LayerNorm(4)
            self.w = torch.nn.Parameter(torch.randn(4, 4))

        def forward(self, x):
            return self.b(self.a(x)) @ self.w.t() * 2

    model = Norms().eval()
    program = torch_onnx_fx.export(model, (torch.randn(2, 4),), verbose=False)
    initializers = program.model.graph.initializers
    assert {"a.weight", "a.bias", "b.weight", "b.bias"} <= set(initializers)
    # w.t() is stored transposed (no Transpose at run time), marked as w.
    assert initializers["w.transposed"].metadata_props["pkg.torch_onnx_fx.weight"] == "w"
    assert "Transpose" not in [node.op_type for node in program.model.graph]
    trained = {name: torch.randn_like(value) for name, value in model.state_dict().items()}
    program.apply_weights(trained)
    model.load_state_dict(trained)
    assert_matches_eager(model, (torch.randn(2, 4),), program=program)


def test_a_dim_name_shared_by_sizes_torch_export_keeps_apart_is_not_an_equality():
    # PyTorch's own test_export_successful_when_dynamic_dimension_is_one names 3, 5 and 8 columns
    # "sequence": the names label the graph, the capture's symbols say which sizes are one.
    class Concat(torch.nn.Module):
        def forward(self, x, y):
            return torch.cat([x, y], dim=1)

    program = torch_onnx_fx.export(
        Concat(), (torch.randn(2, 3), torch.randn(2, 5)),
        dynamic_shapes=({0: "batch", 1: "sequence"}, {0: "batch", 1: "sequence"}), verbose=False,
    )
    assert_matches_eager(Concat(), (torch.randn(4, 6), torch.randn(4, 2)), program=program)


def test_apply_weights_reaches_weights_stored_transposed():
    """Linear on 3-d inputs is MatMul(x, W^T); the optimizer stores W^T, apply_weights transposes
    the new W the same way (shapes are reported in the state dict's own terms)."""
    model = nn.Sequential(nn.Linear(4, 6), nn.GELU(), nn.Linear(6, 3)).eval()
    x = torch.randn(2, 5, 4)
    program = torch_onnx_fx.export(model, (x,), verbose=False)
    assert "Transpose" not in [node.op_type for node in program.model.graph]
    other = nn.Sequential(nn.Linear(4, 6), nn.GELU(), nn.Linear(6, 3)).eval()
    program.apply_weights(other.state_dict())
    assert_matches_eager(other, (x,), program=program)
    with pytest.raises(torch_onnx_fx.StateDictMismatchError, match=r"0.weight: shape \(4, 6\), the model has \(6, 4\)"):
        program.apply_weights({**other.state_dict(), "0.weight": torch.zeros(4, 6)})
