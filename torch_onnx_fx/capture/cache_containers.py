"""transformers' caches made pytree containers before a capture that meets one.

A transformers decoder called the plain way (``model(input_ids)``, ``use_cache`` left at its
default) returns its keys and values in a ``DynamicCache``, and a decode step takes one in.
torch.export flattens only registered containers: the capture stopped with "Found <class
'transformers.cache_utils.DynamicCache'> in output, which is not a known type" (torch.onnx too),
and the user had to find transformers' registration function and call it first.

:func:`register_caches` registers, with transformers' own function (the one its exporters call),
the cache classes of every transformers model inside the exported module and of every cache
among the inputs. The registration is global and lasts, as when transformers' exporters make it;
transformers' exporter module is imported only when the exported module holds a transformers
model or an input is a transformers object, and a release without ``transformers.exporters`` is
left as it was.
"""

from __future__ import annotations

import logging
import sys
from typing import Any, Mapping, Sequence

import torch
import torch.utils._pytree as pytree

__all__ = ["register_caches"]

logger = logging.getLogger(__name__)


def _registration() -> Any:
    """transformers' ``exporter_dynamo`` module when transformers is loaded and has it; else None."""
    if "transformers" not in sys.modules:
        return None
    try:
        from transformers.exporters import exporter_dynamo
    except ImportError:
        return None
    if not all(hasattr(exporter_dynamo, name) for name in ("register_cache_pytrees_for_model", "is_cache_object", "register_pytree_node")):
        return None
    return exporter_dynamo


def _from_transformers(value: Any) -> bool:
    return type(value).__module__.split(".", 1)[0] == "transformers"


def register_caches(model: Any, args: Sequence[Any], kwargs: Mapping[str, Any] | None) -> list[str]:
    """Register the caches ``model`` and its inputs may carry; the classes newly registered."""
    transformers = sys.modules.get("transformers")
    if transformers is None:
        return []
    pretrained = getattr(transformers, "PreTrainedModel", None)
    # One registration per modeling file: it registers the file's own cache classes too.
    models = {type(m).__module__: m for m in (model.modules() if isinstance(model, torch.nn.Module) else ())
              if pretrained is not None and isinstance(m, pretrained)}
    # pytree's leaves: an unregistered cache is one (a registered one needs nothing more).
    inputs = [value for value in pytree.tree_leaves((tuple(args), dict(kwargs or {}))) if _from_transformers(value)]
    # transformers' exporter module (and what it imports) is loaded only for a model or input of
    # transformers': a plain model exported beside an imported transformers loads nothing more.
    if not models and not inputs:
        return []
    registration = _registration()
    if registration is None:
        return []
    before = set(pytree.SUPPORTED_NODES)
    for module in models.values():
        registration.register_cache_pytrees_for_model(module)
    for value in inputs:
        if registration.is_cache_object(value):
            registration.register_pytree_node(type(value))
    added = sorted(f"{cls.__module__}.{cls.__qualname__}" for cls in set(pytree.SUPPORTED_NODES) - before)
    if added:
        logger.debug("registered as pytree containers for capture: %s", added)
    return added
