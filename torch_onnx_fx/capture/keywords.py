"""Keyword arguments a ``**kwargs`` parameter collects, spelled out for torch.export.

Many library models take their inputs through ``forward(self, input_ids, **kwargs)`` (transformers'
FNet, AudioFlamingo3, Granite Speech…). torch.export binds such a call as ``{"input_ids": …,
"kwargs": {"attention_mask": …}}`` and then fails on any ``dynamic_shapes`` at all — keyed by the
keyword (``{"attention_mask": …}``: "top-level keys must be the arg names") or nested as it asks
(``{"kwargs": {"attention_mask": …}}``: an internal ``AssertionError: Must provide a tree_name``).
torch.onnx fails the same way.

While capturing, the module's ``forward`` is shadowed by one whose signature names each keyword
the call passes as a keyword-only parameter; the body calls the real ``forward`` unchanged, and the
module (so every parameter's name) stays the same. Dynamic shapes may then be keyed by the keyword,
as a user writes them, or nested under the ``**kwargs`` name, as torch.export documents them.
"""

from __future__ import annotations

import contextlib
import inspect
import keyword
import logging
from typing import Any, Iterator, Mapping, Sequence

import torch

from torch_onnx_fx.errors import UnsupportedArgumentError

__all__ = ["forward_signature", "collected_keywords", "spelled_out", "flatten_shapes", "capture_signature"]

logger = logging.getLogger(__name__)


def forward_signature(model: Any) -> inspect.Signature | None:
    """The signature of what export calls (a module's ``forward``, or the callable itself); None
    for builtins and C extensions, which have none to inspect."""
    forward = model.forward if isinstance(model, torch.nn.Module) else model
    try:
        return inspect.signature(forward)
    except (TypeError, ValueError):
        return None


def _var_keyword(signature: inspect.Signature) -> inspect.Parameter | None:
    return next((p for p in signature.parameters.values() if p.kind is inspect.Parameter.VAR_KEYWORD), None)


def collected_keywords(signature: inspect.Signature | None, kwargs: Mapping[str, Any]) -> tuple[str | None, list[str]]:
    """The ``**kwargs`` parameter's name and the call's keywords that only it would take."""
    if signature is None:
        return None, []
    var_keyword = _var_keyword(signature)
    if var_keyword is None:
        return None, []
    named = {
        name
        for name, p in signature.parameters.items()
        if p.kind in (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
    }
    collected = [key for key in kwargs if key not in named]
    # A keyword that cannot be a parameter ("attention-mask", "class", the name of a positional-only
    # or *args parameter) cannot be spelled out: the call is then left as it is.
    if any(not key.isidentifier() or keyword.iskeyword(key) or key in signature.parameters for key in collected):
        return var_keyword.name, []
    return var_keyword.name, collected


def spelled_out_signature(signature: inspect.Signature, keywords: Sequence[str]) -> inspect.Signature:
    """``signature`` without its ``**kwargs`` and with ``keywords`` as keyword-only parameters."""
    kept = [p for p in signature.parameters.values() if p.kind is not inspect.Parameter.VAR_KEYWORD]
    added = [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY) for name in keywords]
    return signature.replace(parameters=kept + added)


@contextlib.contextmanager
def spelled_out(module: torch.nn.Module, kwargs: Mapping[str, Any]) -> Iterator[None]:
    """While active, ``module.forward`` names every keyword of this call that ``**kwargs`` would
    collect; the module is left as it was afterwards, whatever happens."""
    real_forward = module.forward
    signature = forward_signature(module)
    spelled = capture_signature(signature, kwargs)
    if spelled is signature:
        yield
        return

    def forward(*args: Any, **kw: Any) -> Any:
        return real_forward(*args, **kw)

    forward.__signature__ = spelled  # type: ignore[attr-defined]
    logger.debug("capturing %s as forward%s", type(module).__name__, spelled)
    shadowed = module.__dict__.get("forward")
    module.forward = forward  # type: ignore[method-assign]
    try:
        yield
    finally:
        if shadowed is None:
            del module.forward
        else:
            module.forward = shadowed  # type: ignore[method-assign]


def flatten_shapes(signature: inspect.Signature | None, args: Sequence[Any], kwargs: Mapping[str, Any], dynamic_shapes: Any) -> Any:
    """``dynamic_shapes`` for the spelled-out signature: a dict's entry under the ``**kwargs`` name
    (``{"kwargs": {"mask": …}}``) and a sequence's item for it become one entry per keyword."""
    name, keywords = collected_keywords(signature, kwargs)
    if not keywords:
        return dynamic_shapes
    if isinstance(dynamic_shapes, Mapping) and isinstance(dynamic_shapes.get(name), Mapping):
        nested = dynamic_shapes[name]
        _no_unknown(nested, keywords)
        twice = sorted(set(nested) & set(dynamic_shapes))
        if twice:
            raise UnsupportedArgumentError(
                f"dynamic_shapes gives {twice} both at the top level and under {name!r}: give each once."
            )
        return {**{k: v for k, v in dynamic_shapes.items() if k != name}, **nested}
    if isinstance(dynamic_shapes, (list, tuple)):
        try:
            bound = list(signature.bind(*args, **kwargs).arguments)
        except TypeError:
            return dynamic_shapes
        # torch.export's sequence form has one item per bound argument, ``**kwargs`` (last) a dict.
        if len(dynamic_shapes) == len(bound) and bound[-1] == name and isinstance(dynamic_shapes[-1], Mapping):
            nested = dynamic_shapes[-1]
            _no_unknown(nested, keywords)
            return type(dynamic_shapes)([*dynamic_shapes[:-1], *(nested.get(k) for k in keywords)])
    return dynamic_shapes


def _no_unknown(nested: Mapping[str, Any], keywords: Sequence[str]) -> None:
    unknown = sorted(set(nested) - set(keywords))
    if unknown:
        raise UnsupportedArgumentError(
            f"dynamic_shapes names {unknown} under **kwargs, but the call passes no such keyword "
            f"(keywords: {list(keywords)})."
        )


def capture_signature(signature: inspect.Signature | None, kwargs: Mapping[str, Any]) -> inspect.Signature | None:
    """The signature torch.export will see for this call (see :func:`spelled_out`)."""
    _, keywords = collected_keywords(signature, kwargs)
    return spelled_out_signature(signature, keywords) if keywords else signature
