"""ONNXProgram: saving, weights, running with every input kind."""

from __future__ import annotations

import copy

import io
import os

import onnx
import onnxruntime
import pytest
import torch
from torch import nn

import torch_onnx_fx
from helpers import assert_matches_eager


def _model() -> nn.Module:
    return nn.Sequential(nn.Linear(4, 8), nn.ReLU(), nn.Linear(8, 3)).eval()


@pytest.fixture
def program() -> torch_onnx_fx.ONNXProgram:
    return torch_onnx_fx.export(_model(), (torch.randn(2, 4),), dynamic_shapes=({0: "batch"},), verbose=False)


def test_model_proto_and_repr(program):
    proto = program.model_proto
    onnx.checker.check_model(proto)
    text = repr(program)
    assert "ONNXProgram(" in text and "batch" in text


@pytest.mark.parametrize("include_initializers", [True, False])
@pytest.mark.parametrize("keep_initializers_as_inputs", [True, False])
def test_save_initializer_behaviours(tmp_path, program, include_initializers, keep_initializers_as_inputs):
    path = tmp_path / "m.onnx"
    program.save(
        path,
        include_initializers=include_initializers,
        keep_initializers_as_inputs=keep_initializers_as_inputs,
        external_data=False,
    )
    model = onnx.load(str(path))
    names = {i.name for i in model.graph.input}
    initializer_names = {i.name for i in model.graph.initializer}
    weights = set(program.model.graph.initializers)
    assert (initializer_names == weights) == include_initializers
    assert weights.issubset(names) == keep_initializers_as_inputs
    # The in-memory model is left as it was.
    assert [v.name for v in program.model.graph.inputs] == ["input"] or len(program.model.graph.inputs) == 1
    assert set(program.model.graph.initializers) == weights


def test_save_external_data_and_run(tmp_path, program):
    path = tmp_path / "ext.onnx"
    program.save(path, external_data=True)
    assert os.path.exists(str(path) + ".data")
    session = onnxruntime.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    x = torch.randn(5, 4)
    (out,) = session.run(None, {session.get_inputs()[0].name: x.numpy()})
    (expected,) = program(x)
    torch.testing.assert_close(torch.from_numpy(out), expected)


def test_save_reports_progress_on_slow_saves(tmp_path, monkeypatch, capsys):
    """A save slower than the progress interval prints lines; verbose=False silences them."""
    from torch_onnx_fx import progress

    # Weights above onnx-ir's 256-byte threshold, so they go to the external data file.
    model = nn.Sequential(nn.Linear(32, 32), nn.ReLU(), nn.Linear(32, 32)).eval()
    program = torch_onnx_fx.export(model, (torch.randn(2, 32),), verbose=False)
    program.verbose = True

    program.save(tmp_path / "quick.onnx", external_data=True)
    assert "saving weights" not in capsys.readouterr().err  # faster than the interval
    monkeypatch.setattr(progress, "SAVE_INTERVAL", 0.0)
    program.save(tmp_path / "slow.onnx", external_data=True)
    lines = [line for line in capsys.readouterr().err.splitlines() if "saving weights" in line]
    # Both 32x32 weights are written externally (the biases stay inline), the last line says so.
    assert lines and lines[-1].startswith("[torch_onnx_fx]   saving weights: 2/2 tensors")
    program.verbose = False
    program.save(tmp_path / "silent.onnx", external_data=True)
    assert "saving weights" not in capsys.readouterr().err


def test_save_to_file_object_and_external_data_needs_path(program):
    buffer = io.BytesIO()
    program.save(buffer)
    assert onnx.load_from_string(buffer.getvalue()).graph.node
    with pytest.raises(TypeError):
        program.save(io.BytesIO(), external_data=True)


def test_apply_weights_changes_results(program):
    x = torch.randn(3, 4)
    before = program(x)[0]
    new_model = _model()
    program.apply_weights(new_model.state_dict())
    after = program(x)[0]
    with torch.no_grad():
        torch.testing.assert_close(after, new_model(x), rtol=1e-4, atol=1e-5)
    assert not torch.allclose(before, after)
    with pytest.raises(torch_onnx_fx.StateDictMismatchError, match=r"mismatched \(1\): 0.weight: shape \(2, 2\)"):
        program.apply_weights({"0.weight": torch.zeros(2, 2)}, strict=False)
    with pytest.raises(torch_onnx_fx.StateDictMismatchError, match=r"unexpected \(1\): no.such.weight") as raised:
        program.apply_weights({**new_model.state_dict(), "no.such.weight": torch.zeros(1)})
    assert raised.value.unexpected == ["no.such.weight"] and not raised.value.missing
    # strict=False: a partial update changes what it names and keeps the rest.
    program.apply_weights({"0.bias": torch.zeros_like(new_model[0].bias)}, strict=False)
    with torch.no_grad():
        new_model[0].bias.zero_()
        torch.testing.assert_close(program(x)[0], new_model(x), rtol=1e-4, atol=1e-5)


def test_export_params_false_writes_no_weights(tmp_path):
    path = tmp_path / "noweights.onnx"
    torch_onnx_fx.export(_model(), (torch.randn(2, 4),), str(path), export_params=False, verbose=False)
    assert not onnx.load(str(path), load_external_data=False).graph.initializer


def test_keep_initializers_as_inputs_with_f(tmp_path):
    path = tmp_path / "asinputs.onnx"
    torch_onnx_fx.export(_model(), (torch.randn(2, 4),), str(path), keep_initializers_as_inputs=True, verbose=False)
    model = onnx.load(str(path))
    assert len(model.graph.input) == 1 + len(model.graph.initializer)


def test_compute_values_and_call_reference(program):
    x = torch.randn(2, 4)
    inner = [n.outputs[0].name for n in program.model.graph if n.op_type == "Relu"]
    assert inner
    (relu,) = program.compute_values(inner, (x,))
    model = _model()
    model.load_state_dict({k: torch.from_numpy(v.const_value.numpy()) for k, v in program.model.graph.initializers.items()})
    with torch.no_grad():
        torch.testing.assert_close(relu, torch.relu(model[0](x)), rtol=1e-4, atol=1e-5)
        (reference,) = program.call_reference(x)
        torch.testing.assert_close(reference, model(x), rtol=1e-4, atol=1e-5)
    with pytest.raises(torch_onnx_fx.UnsupportedArgumentError):
        program.compute_values(["no_such_value"], (x,))


def test_release_and_custom_session_initializer(program):
    created = []

    def initializer(model_bytes):
        created.append(1)
        return onnxruntime.InferenceSession(model_bytes, providers=["CPUExecutionProvider"])

    program.initialize_inference_session(initializer)
    program(torch.randn(2, 4))
    program.release()
    assert created == [1]
    program(torch.randn(2, 4))  # a new default session is created lazily


class MixedInputs(nn.Module):
    def forward(self, x, mask, index, scale: float, maybe=None):
        y = x.masked_fill(mask, 0.0) * scale
        picked = y[:, index]
        return picked, index + 1


def test_call_with_bool_int_scalars_and_none():
    model = MixedInputs()
    args = (torch.randn(3, 4), torch.rand(3, 4) > 0.5, torch.tensor([0, 2]), 2.0, None)
    assert_matches_eager(model, args)


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float64, torch.int32, torch.int64, torch.uint8, torch.int8])
def test_dtypes_round_trip(dtype):
    class Model(nn.Module):
        def forward(self, x):
            # ONNX Runtime's CPU provider has no bfloat16 Mul: bfloat16 goes through data movement only.
            doubled = x.reshape(-1).flip(0) if x.dtype == torch.bfloat16 else x * 2
            return doubled, x.to(torch.float32)

    x = (torch.rand(3, 4) * 10).to(dtype)
    assert_matches_eager(Model(), (x,))


@pytest.mark.parametrize("dtype", [torch.uint16, torch.uint32, torch.uint64])
def test_unsigned_dtypes_round_trip(dtype):
    """torch has few kernels for these (no arithmetic on CPU); data movement and casts must work,
    and outputs must come back from ONNX Runtime (torch.from_numpy rejects them)."""

    class Model(nn.Module):
        def forward(self, x):
            return x.reshape(-1), x.t(), x.to(torch.float32)

    x = torch.tensor([[1, 2**15 + 3], [0, 7]], dtype=torch.int64).to(dtype)
    assert_matches_eager(Model(), (x,))


def test_kwargs_are_flattened_in_export_order():
    class Model(nn.Module):
        def forward(self, a, *, b, c):
            return a + 2 * b - c

    tensors = {"c": torch.randn(2), "b": torch.randn(2)}
    assert_matches_eager(Model(), (torch.randn(2),), tensors)


class Counter(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("count", torch.zeros(1))

    def forward(self, x):
        self.count.add_(1)
        return x + self.count


def test_buffer_mutation_is_not_an_output_by_default():
    program = torch_onnx_fx.export(Counter(), (torch.randn(2),), verbose=False)
    outputs = program(torch.zeros(2))
    assert len(outputs) == 1
    torch.testing.assert_close(outputs[0], torch.ones(2))


def test_buffer_mutation_is_appended_with_state_outputs():
    program = torch_onnx_fx.export(Counter(), (torch.randn(2),), verbose=False, state_outputs=True)
    outputs = program(torch.zeros(2))
    assert len(outputs) == 2
    torch.testing.assert_close(outputs[0], torch.ones(2))
    torch.testing.assert_close(outputs[1], torch.ones(1))


def test_a_parameter_the_model_changes_is_a_state_output_not_a_first_output():
    # nn.Embedding(max_norm=...) renormalizes the rows it reads in its weight, in place. The new
    # weight was the graph's first output, ahead of the model's own (torch.onnx: the embedding only).
    torch.manual_seed(0)
    model = nn.Embedding(10, 4, max_norm=1.0).eval()
    with torch.no_grad():
        model.weight.mul_(3)
    ids = torch.tensor([[1, 2, 2, 9], [0, 1, 5, 5]])
    program = torch_onnx_fx.export(copy.deepcopy(model), (ids,), verbose=False)
    with_state = torch_onnx_fx.export(copy.deepcopy(model), (ids,), verbose=False, state_outputs=True)
    expected = model(ids)
    outputs = program(ids)
    assert len(outputs) == 1
    torch.testing.assert_close(outputs[0], expected)
    outputs = with_state(ids)
    assert len(outputs) == 2
    torch.testing.assert_close(outputs[0], expected)
    torch.testing.assert_close(outputs[1], model.weight.detach())


def test_a_model_built_on_meta_exports_with_the_default_optimizer_then_takes_its_weights():
    """The large-model recipe: build on the meta device, export (optimize=True: data-less tensors
    are kept out of folding), then apply_weights; every data-less tensor must be given, the
    non-persistent rotary buffer included."""
    transformers = pytest.importorskip("transformers", reason="the recipe is shown on a transformers Llama")
    config = transformers.LlamaConfig(
        vocab_size=100, hidden_size=32, intermediate_size=64, num_hidden_layers=2, num_attention_heads=4,
        num_key_value_heads=2, use_cache=False,
    )
    with torch.device("meta"):
        skeleton = transformers.LlamaForCausalLM(config).eval()
    program = torch_onnx_fx.export(skeleton, (torch.randint(0, 100, (1, 8), device="meta"),), verbose=False)
    torch.manual_seed(0)
    real = transformers.LlamaForCausalLM(config).eval()
    with pytest.raises(torch_onnx_fx.StateDictMismatchError, match=r"missing \(1\): model.rotary_emb.inv_freq"):
        program.apply_weights(real.state_dict())
    program.apply_weights({**real.state_dict(), "model.rotary_emb.inv_freq": real.model.rotary_emb.inv_freq})
    tokens = torch.randint(0, 100, (1, 8))
    with torch.no_grad():
        expected = real(tokens).logits
    torch.testing.assert_close(program(tokens)[0], expected, rtol=1e-4, atol=1e-5)


def test_meta_weights_used_transposed_are_stored_transposed():
    # A Linear on a 3-d input reads its weight through a Transpose; with real weights the
    # optimizer stores the weight transposed, and it must for meta weights too, or the Transpose
    # runs at every inference once apply_weights fills them in.
    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Linear(8, 16)
            self.b = torch.nn.Linear(16, 4)

        def forward(self, x):
            return self.b(torch.relu(self.a(x)))

    with torch.device("meta"):
        meta = Net()
    program = torch_onnx_fx.export(meta, (torch.randn(2, 3, 8, device="meta"),), verbose=False)
    assert "Transpose" not in [node.op_type for node in program.model.graph]
    real = Net()
    program.apply_weights(real.state_dict())
    assert_matches_eager(real, (torch.randn(2, 3, 8),), program=program)


def test_weights_used_transposed_are_views_of_the_weights_not_copies():
    # A copy of every weight a Linear reads transposed was held from export on: 20 % of the peak
    # memory of a 64-layer Llama. The bytes are made when the model is serialised.
    class Net(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Linear(8, 16)

        def forward(self, x):
            return self.a(x)

    net = Net().eval()
    program = assert_matches_eager(net, (torch.randn(2, 3, 8),))
    stored = [v for v in program.model.graph.initializers.values() if v.name.startswith("a.weight")]
    assert [v.name for v in stored] == ["a.weight.transposed"]
    raw = stored[0].const_value.raw
    assert raw.untyped_storage().data_ptr() == net.a.weight.untyped_storage().data_ptr()
    assert tuple(raw.shape) == (8, 16)


class _ClippedLinear(torch.nn.Module):
    """timm's Gemma 4 ViT: 0-d buffers as clamp bounds, equal in every module."""

    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(8, 8, bias=False)
        self.register_buffer("low", torch.tensor(-float("inf")))
        self.register_buffer("high", torch.tensor(float("inf")))

    def forward(self, x):
        return torch.clamp(self.linear(torch.clamp(x, self.low, self.high)), self.low, self.high)


def test_weights_used_as_clamp_bounds_stay_weights():
    """The optimizer may not turn a weight into a constant of its own (a Min/Max-to-Clip rewrite
    did, merging equal bounds across modules: an invalid graph in Gemma 4, and apply_weights
    could no longer change the bound)."""

    model = torch.nn.Sequential(_ClippedLinear(), _ClippedLinear()).eval()
    x = torch.randn(2, 8)
    program = torch_onnx_fx.export(model, (x,), dynamic_shapes=({0: "batch"},), verbose=False)
    onnx.checker.check_model(program.model_proto, full_check=True)
    torch.testing.assert_close(program(x)[0], model(x))
    state = {name: value.clone() for name, value in model.state_dict().items()}
    state["1.high"] = torch.tensor(0.25)
    model.load_state_dict(state)
    program.apply_weights(state)
    torch.testing.assert_close(program(x)[0], model(x))
    assert float(program(x)[0].max()) <= 0.25
