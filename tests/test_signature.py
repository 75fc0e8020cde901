"""The graph's inputs and outputs are the user's, as torch.onnx's are."""

from __future__ import annotations

import pytest
import torch
from torch import nn

import torch_onnx_fx
from helpers import assert_matches_eager
from torch_onnx_fx.signature import ProgramSignature


class Stateful(nn.Module):
    """Mutates a buffer (a counter), running statistics and an input; returns an input as-is,
    a None and a computed value."""

    def __init__(self):
        super().__init__()
        self.register_buffer("count", torch.zeros(1))
        self.register_buffer("cache", torch.zeros(4, 3))
        self.norm = nn.BatchNorm1d(3)

    def forward(self, x, y, positions):
        self.count.add_(1)
        self.cache.index_put_((positions,), y)
        y.mul_(2)
        return x, None, self.norm(y) + self.count, self.cache.sum(0)


def _inputs():
    return torch.randn(2, 3), torch.randn(2, 3), torch.tensor([1, 3])


def test_outputs_are_the_users_only_in_order_without_none():
    model = Stateful().train()
    program = torch_onnx_fx.export(Stateful().train(), _inputs(), verbose=False)
    outputs = program.model.graph.outputs
    assert len(outputs) == 3
    assert outputs[0].name == "x"  # returned as-is: keeps the input's name
    assert [v.name for v in program.model.graph.inputs] == ["x", "y", "positions"]
    x, y, positions = _inputs()
    actual = program(x.clone(), y.clone(), positions)
    expected = model(x.clone(), y.clone(), positions)
    assert len(actual) == 3
    torch.testing.assert_close(actual[0], expected[0])
    torch.testing.assert_close(actual[1], expected[2], rtol=1e-4, atol=1e-5)
    torch.testing.assert_close(actual[2], expected[3])


def test_state_outputs_appends_every_update_after_the_user_outputs():
    program = torch_onnx_fx.export(Stateful().train(), _inputs(), verbose=False, state_outputs=True)
    kinds = [v.metadata_props.get("pkg.torch.export.graph_signature.OutputSpec.kind") for v in program.model.graph.outputs]
    # The first output is the input x itself, which carries no output kind.
    assert kinds[1:3] == ["USER_OUTPUT", "USER_OUTPUT"]
    assert set(kinds[3:]) == {"BUFFER_MUTATION", "USER_INPUT_MUTATION"}
    signature = ProgramSignature.of(program.exported_program)
    assert len(program.model.graph.outputs) == 3 + len(signature.state_updates)
    model = Stateful().train()
    x, y, positions = _inputs()
    actual = program(x.clone(), y.clone(), positions)
    y_eager = y.clone()
    model(x.clone(), y_eager, positions)
    updates = {entry.target: value for entry, value in zip(signature.state_updates, actual[3:])}
    torch.testing.assert_close(updates["count"], model.count)
    torch.testing.assert_close(updates["cache"], model.cache)
    torch.testing.assert_close(updates["norm.running_mean"], model.norm.running_mean)


def test_an_input_returned_twice_gets_a_copy_for_the_second_output():
    class Twice(nn.Module):
        def forward(self, x):
            return x, x, x + 1

    program = assert_matches_eager(Twice(), (torch.randn(3),))
    names = [v.name for v in program.model.graph.outputs]
    assert names[0] == "x" and len(set(names)) == 3


def test_output_names_do_not_rename_a_passed_through_input():
    class Same(nn.Module):
        def forward(self, x):
            return x

    program = torch_onnx_fx.export(Same(), (torch.randn(3),), output_names=["out"], verbose=False)
    assert [v.name for v in program.model.graph.inputs] == ["x"]
    assert [v.name for v in program.model.graph.outputs] == ["out"]
    value = torch.randn(3)
    torch.testing.assert_close(program(value)[0], value)


def test_program_outputs_do_not_alias_the_arguments():
    class Same(nn.Module):
        def forward(self, x):
            return x

    program = torch_onnx_fx.export(Same(), (torch.randn(3),), verbose=False)
    value = torch.randn(3)
    (out,) = program(value)
    value.fill_(0.0)
    assert out.abs().sum() > 0


def test_calling_with_graph_input_names_as_keywords():
    class Add(nn.Module):
        def forward(self, x, y):
            return x + y

    program = torch_onnx_fx.export(Add(), (torch.randn(2), torch.randn(2)), input_names=["a", "b"], verbose=False)
    a, b = torch.randn(2), torch.randn(2)
    torch.testing.assert_close(program(a=a, b=b)[0], a + b)
    with pytest.raises(torch_onnx_fx.UnsupportedArgumentError):
        program(a=a)


def test_keyword_exports_and_calls_warn_nothing_from_our_code():
    # The keyword spec was read through torch's deprecated ``children_specs``: every export and
    # call with keyword arguments warned from signature.py.
    import warnings

    class Keywords(nn.Module):
        def forward(self, x, *, scale, bias=None):
            return x * scale + (0 if bias is None else bias)

    x, scale, bias = torch.randn(2, 3), torch.randn(3), torch.randn(3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        program = torch_onnx_fx.export(Keywords(), (x,), kwargs={"bias": bias, "scale": scale}, verbose=False)
        (actual,) = program(x, scale=scale, bias=bias)
    ours = [w for w in caught if "torch_onnx_fx" in w.filename]
    assert not ours, [f"{w.filename}:{w.lineno}: {w.message}" for w in ours]
    torch.testing.assert_close(actual, x * scale + bias)


class _Cache:
    """An object carrying tensors in attributes, registered as a pytree that numbers its leaves
    (as transformers registers its caches for export)."""

    def __init__(self, keys, values):
        self.layers = [{"keys": k, "values": v} for k, v in zip(keys, values)]


def _cache_leaves(cache):
    return [t for layer in cache.layers for t in (layer["keys"], layer["values"])]


torch.utils._pytree.register_pytree_node(
    _Cache,
    lambda c: (_cache_leaves(c), len(c.layers)),
    lambda leaves, n: _Cache(leaves[0::2], leaves[1::2]),
    flatten_with_keys_fn=lambda c: ([(torch.utils._pytree.SequenceKey(i), t) for i, t in enumerate(_cache_leaves(c))], len(c.layers)),
)


class _Structured(nn.Module):
    def forward(self, x, pairs, cache):
        grown = _Cache([layer["keys"] + x for layer in cache.layers], [layer["values"] * 2 for layer in cache.layers])
        return {"sum": x + pairs[0], "pair": (x * 2, pairs[1] - 1), "cache": grown}


def _structured_inputs():
    x, pairs = torch.randn(3), (torch.randn(3), torch.randn(3))
    return x, pairs, _Cache([torch.randn(3), torch.randn(3)], [torch.randn(3), torch.randn(3)])


def test_nested_inputs_and_structured_outputs_are_named_by_their_paths():
    # torch.export's names were pairs_0 ... cache_3 in, add, mul, sub, add_1 ... out.
    x, pairs, cache = _structured_inputs()
    program = torch_onnx_fx.export(_Structured(), (x, pairs), kwargs={"cache": cache}, verbose=False)
    assert [v.name for v in program.model.graph.inputs] == [
        "x", "pairs.0", "pairs.1", "cache.layers.0.keys", "cache.layers.0.values", "cache.layers.1.keys", "cache.layers.1.values",
    ]
    assert [v.name for v in program.model.graph.outputs] == [
        "sum", "pair.0", "pair.1",
        "output.cache.layers.0.keys", "output.cache.layers.0.values", "output.cache.layers.1.keys", "output.cache.layers.1.values",
    ]
    actual = program(x, pairs, cache=cache)
    expected = [x + pairs[0], x * 2, pairs[1] - 1, cache.layers[0]["keys"] + x, cache.layers[0]["values"] * 2]
    for a, e in zip(actual, expected):
        torch.testing.assert_close(a, e)


def test_given_names_win_over_paths_and_tuple_outputs_keep_node_names():
    x, pairs, cache = _structured_inputs()
    names = [f"in{i}" for i in range(7)]
    program = torch_onnx_fx.export(_Structured(), (x, pairs), kwargs={"cache": cache}, input_names=names, output_names=["s"], verbose=False)
    assert [v.name for v in program.model.graph.inputs] == names
    assert [v.name for v in program.model.graph.outputs][:2] == ["s", "pair.0"]
    tupled = torch_onnx_fx.export(lambda x: (x + 1, x * 2), (x,), verbose=False)
    assert [v.name for v in tupled.model.graph.outputs] == ["add", "mul"]  # as torch.onnx names them


class _WindowCache:
    """A cache whose pytree leaves include a tensor kept in a private attribute (as transformers'
    sliding-window cache layers keep their window)."""

    def __init__(self, keys, window):
        self.keys, self._window = keys, window


torch.utils._pytree.register_pytree_node(
    _WindowCache,
    lambda c: ([c.keys, c._window], None),
    lambda leaves, _: _WindowCache(*leaves),
    flatten_with_keys_fn=lambda c: ([(torch.utils._pytree.SequenceKey(i), t) for i, t in enumerate([c.keys, c._window])], None),
)


def test_a_tensor_in_a_private_attribute_is_named_by_it():
    class Windowed(nn.Module):
        def forward(self, x, cache):
            return _WindowCache(cache.keys + x, cache._window * 2)

    x, cache = torch.randn(3), _WindowCache(torch.randn(3), torch.tensor(4))
    program = torch_onnx_fx.export(Windowed(), (x, cache), verbose=False)
    # The pytree's positions (cache.1, output.1) before.
    assert [v.name for v in program.model.graph.inputs] == ["x", "cache.keys", "cache._window"]
    assert [v.name for v in program.model.graph.outputs] == ["keys", "_window"]
    actual = program(x, cache)
    torch.testing.assert_close(actual[0], cache.keys + x)
    torch.testing.assert_close(actual[1], cache._window * 2)


class _Counted:
    """A container whose flattening keeps an int beside its tensor (as a sliding-window cache keeps
    its count of tokens seen): the export bakes the int into the graph."""

    def __init__(self, keys, seen):
        self.keys, self.seen = keys, seen


torch.utils._pytree.register_pytree_node(
    _Counted,
    lambda c: ([c.keys], c.seen),
    lambda leaves, seen: _Counted(leaves[0], seen),
    flatten_with_keys_fn=lambda c: ([(torch.utils._pytree.GetAttrKey("keys"), c.keys)], c.seen),
)


def test_a_container_whose_baked_values_differ_is_refused():
    class Positions(nn.Module):
        def forward(self, x, cache):
            return x + cache.keys * cache.seen

    x = torch.randn(3)
    program = torch_onnx_fx.export(Positions(), (x, _Counted(torch.randn(3), 6)), verbose=False)
    keys = torch.randn(3)
    torch.testing.assert_close(program(x, _Counted(keys, 6))[0], x + keys * 6)
    # Computed with seen = 6, silently, before.
    with pytest.raises(torch_onnx_fx.InputMismatchError, match="differs in structure"):
        program(x, _Counted(keys, 9))
