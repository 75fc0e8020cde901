"""Tracing each distinct repeated block once (capture/repeated_blocks, capture/block_replay).

With ``export_modules_as_functions``, later instances of a traced block are copied from its trace
instead of traced. Each model here is exported that way and with the full trace (the replay
switched off); the ONNX models must hold the same nodes in the same order (the names of values
inside the graph aside), and both must match eager PyTorch. Blocks
whose trace another instance cannot stand in for must be traced in full, and still match.
"""

from __future__ import annotations

import functools

import pytest
import torch
from torch import nn

import torch_onnx_fx
from helpers import assert_matches_eager, onnx_structure
from torch_onnx_fx.capture import strategies


def _full_trace(module, args, kwargs, dynamic_shapes, blocks):
    program, fixes = strategies._export_refining(module, args, kwargs, dynamic_shapes, False)
    return program, fixes, 0


def _both(model, args, kwargs=None, monkeypatch=None, **options):
    """The functions export with replay and with the full trace; asserts they are the same model."""
    options.setdefault("verbose", False)
    replayed = assert_matches_eager(model, args, kwargs, export_modules_as_functions=True, **options)
    with monkeypatch.context() as patch:
        patch.setattr(strategies, "_export_blocks_once", _full_trace)
        full = torch_onnx_fx.export(model, args, kwargs=kwargs, export_modules_as_functions=True, **options)
    assert full.capture_blocks_replayed == 0
    assert onnx_structure(replayed.model_proto) == onnx_structure(full.model_proto)
    return replayed


class Block(nn.Module):
    def __init__(self, scale: float = 1.0, index: int = 0):
        super().__init__()
        self.linear = nn.Linear(8, 8)
        self.norm = nn.LayerNorm(8)
        self.scale = scale
        self.index = index  # never read by forward, like a decoder layer's layer_idx without a cache

    def forward(self, x, mask=None, flag=True):
        y = torch.relu(self.linear(self.norm(x))) * self.scale
        if mask is not None:
            y = y.masked_fill(mask, 0.0)
        return (x + y, y.sum(-1)) if flag else (x + y, None)


class Stack(nn.Module):
    def __init__(self, blocks):
        super().__init__()
        self.blocks = nn.ModuleList(blocks)
        self.head = nn.Linear(8, 3)

    def forward(self, x, mask=None):
        sums = []
        for block in self.blocks:
            x, s = block(x, mask=mask)
            sums.append(s)
        return self.head(x), torch.stack(sums)


def test_later_instances_are_copied_from_the_first_and_give_the_full_trace(monkeypatch):
    model = Stack([Block(index=i) for i in range(5)]).eval()
    x, mask = torch.randn(2, 6, 8), torch.rand(2, 6, 8) > 0.7
    program = _both(model, (x,), {"mask": mask}, monkeypatch, dynamic_shapes={"x": {0: "batch", 1: "seq"}, "mask": {0: "batch", 1: "seq"}})
    # The first block's input does not require grad, the others' do: two signatures, each traced once.
    assert program.capture_blocks_replayed == 3
    assert [f.name for f in program.model_proto.functions] == ["Block"]
    assert_matches_eager(model, (x,), {"mask": mask}, program=program, more_inputs=[((torch.randn(3, 4, 8),), {"mask": torch.rand(3, 4, 8) > 0.5})])


def test_an_instance_differing_in_what_its_code_reads_is_traced_itself(monkeypatch):
    # Block 3 scales by 2: copying block 1's trace (scale 1) would be silently wrong.
    model = Stack([Block(scale=2.0 if i == 3 else 1.0, index=i) for i in range(5)]).eval()
    program = _both(model, (torch.randn(2, 6, 8),), None, monkeypatch)
    assert program.capture_blocks_replayed == 2
    assert [f.name for f in program.model_proto.functions] == ["Block", "Block_2"]


def test_weights_of_another_shape_are_traced_themselves(monkeypatch):
    class Wide(nn.Module):
        def __init__(self, inner):
            super().__init__()
            self.inner = nn.Sequential(nn.Linear(8, inner), nn.ReLU(), nn.Linear(inner, 8))

        def forward(self, x):
            return x + self.inner(x)

    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = nn.ModuleList([Wide(16), Wide(16), Wide(32), Wide(16)])

        def forward(self, x):
            for block in self.blocks:
                x = block(x)
            return x

    program = _both(Net().eval(), (torch.randn(3, 8),), None, monkeypatch)
    assert program.capture_blocks_replayed == 1  # block 3, from block 1 (block 0's input needs no grad)


class Counting(nn.Module):
    """Writes an attribute while traced: its trace says nothing about the next call."""

    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(8, 8)
        self.calls = 0

    def forward(self, x):
        self.calls += 1
        return self.linear(x) * self.calls


class InPlace(nn.Module):
    """Changes its input in place, which the caller sees: a stand-in would not."""

    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(8, 8)

    def forward(self, x):
        y = self.linear(x)
        x.mul_(2)
        return y


class ReturnsInput(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(8, 8)

    def forward(self, x):
        return x, self.linear(x)


class Cache:
    def __init__(self):
        self.items = []


class TakesObject(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(8, 8)

    def forward(self, x, cache):
        cache.items.append(x)
        return self.linear(x) + len(cache.items)


class DataDependent(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(8, 8)

    def forward(self, x):
        y = self.linear(x)
        return y + y[y > 0].sum()


@pytest.mark.parametrize("block", [Counting, InPlace, ReturnsInput, TakesObject, DataDependent])
def test_blocks_no_other_instance_may_stand_in_for_are_traced_in_full(block):
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.blocks = nn.ModuleList([block() for _ in range(4)])

        def forward(self, x):
            cache = Cache()
            for layer in self.blocks:
                out = layer(x, cache) if block is TakesObject else layer(x)
                x = out[1] if block is ReturnsInput else out
            return x

    # A fresh model per run: Counting's counter moves with every call.
    def run(x):
        return Net().eval()(x)

    torch.manual_seed(0)
    model = Net().eval()
    x = torch.randn(2, 8)
    program = torch_onnx_fx.export(model, (x.clone(),), export_modules_as_functions=True, verbose=False)
    assert program.capture_blocks_replayed == 0
    if block is Counting:
        model = Net().eval()
        model.load_state_dict(dict(program.exported_program.state_dict))
    with torch.no_grad():
        expected = model(x.clone())
    torch.testing.assert_close(program(x.clone())[0], expected)


def test_a_decoder_layers_unread_layer_index_does_not_stop_copies(monkeypatch):
    transformers = pytest.importorskip("transformers", reason="builds a transformers Llama")
    torch.manual_seed(0)
    config = transformers.LlamaConfig(
        hidden_size=64, intermediate_size=128, num_hidden_layers=4, num_attention_heads=4,
        num_key_value_heads=2, vocab_size=100, use_cache=False,
    )
    model = transformers.LlamaForCausalLM(config).eval()
    ids = torch.randint(0, 100, (2, 7))
    program = _both(model, (ids,), {"use_cache": False}, monkeypatch, dynamic_shapes={"input_ids": {0: "batch", 1: "seq"}, "use_cache": None})
    assert program.capture_blocks_replayed == 3
    assert_matches_eager(model, (ids,), {"use_cache": False}, program=program, more_inputs=[((torch.randint(0, 100, (1, 11)),), {"use_cache": False})])


def test_exports_without_functions_trace_every_block():
    model = Stack([Block() for _ in range(4)]).eval()
    program = torch_onnx_fx.export(model, (torch.randn(2, 6, 8),), verbose=False)
    assert program.capture_blocks_replayed == 0
    assert not program.model_proto.functions


class Gated(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(8, 8)
        # One partial object per instance, as transformers' activation modules hold them.
        self.act = functools.partial(torch.nn.functional.gelu, approximate="tanh")

    def forward(self, x, mask):
        return x + self.act(self.linear(x)).masked_fill(mask, 0.0)


class Embedded(nn.Module):
    def __init__(self, count: int = 5):
        super().__init__()
        self.embed = nn.Linear(8, 8)  # the first block's input needs grad, as after an embedding
        self.blocks = nn.ModuleList([Gated() for _ in range(count)])

    def forward(self, x, mask):
        x = self.embed(x)
        for block in self.blocks:
            x = block(x, mask)
        return x


def test_sizes_found_equal_while_tracing_and_per_instance_partials_still_match(monkeypatch):
    # The mask's dims are named apart from x's; tracing the first block finds them equal, after
    # which its signature reads in the other symbols. Every later block is copied.
    x, mask = torch.randn(2, 6, 8), torch.rand(2, 6, 8) > 0.5
    shapes = {"x": {0: "batch", 1: "seq"}, "mask": {0: "mask_batch", 1: "mask_seq"}}
    program = _both(Embedded().eval(), (x, mask), None, monkeypatch, dynamic_shapes=shapes)
    assert program.capture_blocks_replayed == 4


class ReadsOwner(nn.Module):
    def __init__(self, owner: list):
        super().__init__()
        self.linear = nn.Linear(8, 8)
        self.owner = owner  # a back-reference the module tree does not hold

    def forward(self, x):
        return self.linear(x) * self.owner[0].step


class SetsStep(nn.Module):
    def __init__(self, vary: bool):
        super().__init__()
        self.embed = nn.Linear(8, 8)
        self.blocks = nn.ModuleList([ReadsOwner([self]) for _ in range(4)])
        self.vary = vary
        self.step = 1

    def forward(self, x):
        x = self.embed(x)
        for i, block in enumerate(self.blocks):
            if self.vary:
                self.step = i + 1
            x = block(x)
        return x


@pytest.mark.parametrize("vary", [True, False])
def test_state_of_other_modules_a_block_reads_must_not_change_between_copies(vary, monkeypatch):
    program = _both(SetsStep(vary).eval(), (torch.randn(2, 8),), None, monkeypatch)
    assert program.capture_blocks_replayed == (0 if vary else 3)


class Flattens(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(8, 8)

    def forward(self, x):
        batch, length, width = x.shape
        return x + self.linear(x.reshape(batch * length, width)).reshape(batch, length, width)


class FlattensAfter(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(8, 8)
        self.blocks = nn.ModuleList([Flattens() for _ in range(4)])

    def forward(self, x):
        x = self.embed(x)
        for block in self.blocks:
            x = block(x)
        # batch * length again: tracing reuses the node the first block computed it with.
        return x.reshape(x.shape[0] * x.shape[1], 8)


def test_a_size_a_block_computed_may_be_read_after_it(monkeypatch):
    program = _both(FlattensAfter().eval(), (torch.randn(2, 5, 8),), None, monkeypatch, dynamic_shapes=({0: "batch", 1: "length"},))
    assert program.capture_blocks_replayed == 3


class NoGradInside(nn.Module):
    def __init__(self):
        super().__init__()
        self.embed = nn.Linear(8, 8)
        self.blocks = nn.ModuleList([Flattens() for _ in range(3)])

    def forward(self, x):
        x = self.embed(x)
        with torch.no_grad():  # traced into a subgraph of its own, blocks included
            for block in self.blocks:
                x = block(x)
        return x


def test_blocks_inside_a_grad_mode_region_are_traced_in_full():
    model, x = NoGradInside().eval(), torch.randn(2, 5, 8)
    program = assert_matches_eager(model, (x,), export_modules_as_functions=True)
    assert program.capture_blocks_replayed == 0


class NoGradPart(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(8, 8)
        self.gate = nn.Linear(8, 8)

    def forward(self, x):
        with torch.no_grad():  # a subgraph of the block's own
            gate = torch.sigmoid(self.gate(x))
        return x + self.linear(x) * gate


def test_blocks_holding_a_subgraph_are_traced_in_full(monkeypatch):
    class Net(nn.Module):
        def __init__(self):
            super().__init__()
            self.embed = nn.Linear(8, 8)
            self.blocks = nn.ModuleList([NoGradPart() for _ in range(4)])

        def forward(self, x):
            x = self.embed(x)
            for block in self.blocks:
                x = block(x)
            return x

    program = _both(Net().eval(), (torch.randn(3, 8),), None, monkeypatch)
    assert program.capture_blocks_replayed == 0
