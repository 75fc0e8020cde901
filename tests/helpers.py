"""The one helper tests use to compare an exported model with eager PyTorch."""

from __future__ import annotations

from typing import Any, Callable, Iterable, Mapping, Sequence

import torch
import torch.utils._pytree as pytree

import torch_onnx_fx

# One module name only. Imported a second time (as ``tests.helpers``), this module would define
# the custom operator ``no_translation`` below again, and torch frees the first definition's C++
# entry while the first module's operator object still points at it: a later capture through it
# read freed memory (a segfault, ``vector::reserve`` or a UnicodeDecodeError), at random, as the
# allocations made while collecting decided whether the freed block was reused in time.
if __name__ != "helpers":
    raise ImportError(f"import the tests' helpers as `helpers` (from helpers import ...), not as `{__name__}`: "
                      "a second copy redefines their custom operator and leaves the first one dangling")


def flat_tensors(value: Any) -> list[torch.Tensor]:
    """Eager outputs as the ONNX program returns them: flattened, None left out."""
    leaves = pytree.tree_leaves(value)
    unexpected = [type(x).__name__ for x in leaves if x is not None and not isinstance(x, (torch.Tensor, int, float, bool))]
    assert not unexpected, f"eager outputs of types {unexpected} cannot be compared"
    return [torch.as_tensor(x) for x in leaves if x is not None]


def assert_close_outputs(expected: Any, actual: Sequence[torch.Tensor], rtol: float, atol: float) -> None:
    """Every output compared, one to one: the counts must match exactly."""
    flat_expected = flat_tensors(expected)
    actual = list(actual)
    assert len(actual) == len(flat_expected), (
        f"the ONNX program returned {len(actual)} outputs, eager PyTorch {len(flat_expected)}"
    )
    for i, (exp, act) in enumerate(zip(flat_expected, actual)):
        exp = exp.detach()
        assert act.dtype == exp.dtype, f"output {i}: dtype {act.dtype} != eager {exp.dtype}"
        assert tuple(act.shape) == tuple(exp.shape), f"output {i}: shape {tuple(act.shape)} != eager {tuple(exp.shape)}"
        if exp.dtype.itemsize == 1 and exp.dtype.is_floating_point:
            # torch cannot subtract float8 tensors; compare their values in float32.
            act, exp = act.float(), exp.float()
        torch.testing.assert_close(act, exp, rtol=rtol, atol=atol, equal_nan=True, msg=lambda m: f"output {i}: {m}")


def assert_matches_eager(
    model: Any,
    args: tuple[Any, ...],
    kwargs: Mapping[str, Any] | None = None,
    *,
    program: torch_onnx_fx.ONNXProgram | None = None,
    more_inputs: Iterable[tuple[tuple[Any, ...], Mapping[str, Any]]] = (),
    rtol: float = 1e-4,
    atol: float = 1e-5,
    **export_options: Any,
) -> torch_onnx_fx.ONNXProgram:
    """Export (unless ``program`` is given), run in ONNX Runtime and compare with eager.

    ``more_inputs`` are further ``(args, kwargs)`` pairs, e.g. other sizes for dynamic shapes.
    """
    kwargs = dict(kwargs or {})
    if program is None:
        export_options.setdefault("verbose", False)
        program = torch_onnx_fx.export(model, args, kwargs=kwargs, **export_options)
    for call_args, call_kwargs in [(args, kwargs), *more_inputs]:
        with torch.no_grad():
            expected = model(*call_args, **call_kwargs)
        actual = program(*call_args, **call_kwargs)
        assert_close_outputs(expected, actual, rtol, atol)
    return program


def runtime_op_types(program: Any, folder: Any) -> list[str]:
    """The operators ONNX Runtime runs ``program``'s model with under its default session options
    (the graph it optimized, saved in ``folder``)."""
    import onnx
    import onnxruntime

    path = f"{folder}/model.onnx"
    program.save(path)
    options = onnxruntime.SessionOptions()
    options.optimized_model_filepath = f"{folder}/optimized.onnx"
    onnxruntime.InferenceSession(path, options, providers=["CPUExecutionProvider"])
    return [node.op_type for node in onnx.load(options.optimized_model_filepath).graph.node]


def onnx_structure(proto: Any) -> list[Any]:
    """A model's nodes, in order, with the values inside its graphs named by position and its
    initializers by their contents (the graph's inputs and outputs keep their names): two exports
    that compute the same way compare equal whatever torch.export numbered their FX nodes, and
    whether a constant two layers create alike is one initializer or two."""
    import hashlib

    import onnx

    def tensor_key(tensor: Any) -> str:
        return f"tensor {tensor.data_type} {list(tensor.dims)} {hashlib.sha1(onnx.numpy_helper.to_array(tensor).tobytes()).hexdigest()}"

    def attribute(a: Any) -> Any:
        if a.type == onnx.AttributeProto.TENSOR:
            return tensor_key(a.t)
        return onnx.helper.get_attribute_value(a)

    def rows(nodes: Any, names: dict[str, str]) -> list[Any]:
        result = []
        for i, node in enumerate(nodes):
            for j, out in enumerate(node.output):
                names.setdefault(out, f"{i}:{j}")
            attributes = repr([attribute(a) for a in node.attribute])
            result.append((node.domain, node.op_type, [names.get(x, x) for x in node.input], [names[x] for x in node.output], attributes))
        return result

    graph = proto.graph
    names = {v.name: v.name for v in [*graph.input, *graph.output]}
    names.update({t.name: tensor_key(t) for t in graph.initializer})
    structure: list[Any] = [rows(graph.node, names)]
    for function in proto.functions:
        positions = {name: f"input {i}" for i, name in enumerate(function.input)}
        structure.append((function.domain, function.name, len(function.input), rows(function.node, positions)))
    return structure


# An operator no translation table covers, for tests of the missing-translation paths (real
# operators stop being missing as translations are added).
@torch.library.custom_op("tofx_test::no_translation", mutates_args=())
def no_translation(x: torch.Tensor, scale: float) -> torch.Tensor:
    return x * scale


@no_translation.register_fake
def _(x: torch.Tensor, scale: float) -> torch.Tensor:
    return torch.empty_like(x)


class Fn(torch.nn.Module):
    """A module calling ``fn``: export takes modules, tests are easiest written as functions."""

    def __init__(self, fn: Any):
        super().__init__()
        self.fn = fn

    def forward(self, *args: Any) -> Any:
        return self.fn(*args)


def assert_patch_keeps_eager(run: Callable[..., Any], inputs: Mapping[str, Any], patched_name: str | tuple[str, ...], *, rtol: float = 1e-5, atol: float = 1e-6) -> None:
    """``run(**inputs)`` gives the same with torch_onnx_fx's capture-time library patches
    installed (one of them ending in ``patched_name``) as without: the replacement is exact in
    eager mode, not only once exported."""
    from torch_onnx_fx.capture import library_patches

    with torch.no_grad():
        expected = run(**inputs)
        with library_patches.applied() as names:
            assert any(name.endswith(patched_name) for name in names), names
            patched = run(**inputs)
    torch.testing.assert_close(patched, expected, rtol=rtol, atol=atol)

