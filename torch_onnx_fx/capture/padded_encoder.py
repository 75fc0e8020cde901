"""``nn.TransformerEncoder`` with a padding mask, computing at padded positions what inference does.

In inference (eval mode, no grad) with ``src_key_padding_mask`` and ``enable_nested_tensor``
(the default), ``nn.TransformerEncoder`` packs the batch into a nested tensor: padded positions
are dropped, the layers run over the valid tokens, and the result is padded back with zeros
before the final norm (so a padded position comes out as ``norm(0)``). Under torch.export the
encoder takes its plain path (it sees the tracing), which runs every position through the
layers and returns other numbers there: 3.5 off for both exporters, which a sum over the
sequence or a check of all outputs against the model reads.

The replacement runs the layers as the plain path does, over the positions the nested tensor
would hold (a -inf key mask over the others: a float mask's finite nonzero entries drop their key
there, as the nested tensor drops it), then zeroes the other positions before the norm. Whether
the nested path is taken depends on the module (checked here as PyTorch checks it) and, with
``mask_check`` (the default), on the data: every row's valid positions must come first, else the
layers run unpacked (their own inference kernel reads a float mask the same way, nonzero as
dropped). That check becomes a condition in the graph. Without ``mask_check`` the nested tensor
holds each row's first positions, as many as it has valid ones, whatever the mask says about
which. Grad mode is the one condition left out: an exported model is an inference model, so it
matches the module under ``torch.no_grad()`` / ``torch.inference_mode()``.
"""

from __future__ import annotations

from typing import Any, Callable

import torch
import torch.nn.functional as F

__all__ = ["padded_encoder_forward"]


def _nested_in_inference(encoder: Any, src: torch.Tensor, mask: Any, padding: Any) -> bool:
    """Whether eager inference packs this call into a nested tensor, but for the data-dependent
    alignment check (PyTorch's list of reasons in ``TransformerEncoder.forward``)."""
    return (
        torch.backends.mha.get_fastpath_enabled()
        and getattr(encoder, "use_nested_tensor", False)
        and not encoder.layers[0].training
        and src.dim() == 3
        and padding is not None
        and mask is None
        and not src.is_nested
        and not torch.is_autocast_enabled()
        and src.device.type in ("cpu", "cuda")
    )


def _left_aligned(padded: torch.Tensor) -> torch.Tensor:
    """True when every row's valid positions all come before its padded ones (PyTorch's
    ``_nested_tensor_from_mask_left_aligned`` over the whole batch)."""
    valid = padded.logical_not()
    return torch.logical_not(torch.any(padded[:, :-1] & valid[:, 1:]))


def padded_encoder_forward(original: Callable[..., Any]) -> Callable[..., Any]:
    def forward(self: Any, src: torch.Tensor, mask: Any = None, src_key_padding_mask: Any = None, is_causal: Any = None) -> Any:
        padding = F._canonical_mask(
            mask=src_key_padding_mask, mask_name="src_key_padding_mask", other_type=F._none_or_dtype(mask),
            other_name="mask", target_type=src.dtype,
        )
        if not _nested_in_inference(self, src, mask, padding):
            return original(self, src, mask, src_key_padding_mask, is_causal)
        # The nested tensor holds, per row, as many positions as the mask has zero entries
        # (``logical_not`` of the canonical float mask: any other value, -inf or not, drops the
        # key), taken from the row's start; with ``mask_check`` only when those are exactly the
        # row's zero entries (valid positions first). Else the layers run unpacked, on their own
        # inference kernel, which reads a float mask the same way (nonzero: dropped).
        padded = padding != 0
        lengths = padded.logical_not().sum(-1, keepdim=True)
        dropped = torch.arange(padded.shape[-1], device=src.device) >= lengths
        attend_all = torch.zeros_like(padding)
        nested_mask = attend_all.masked_fill(dropped, float("-inf"))
        if getattr(self, "mask_check", True):
            aligned = _left_aligned(padded)
            layer_mask = torch.where(aligned, nested_mask, attend_all.masked_fill(padded, float("-inf")))
            zeroed = dropped & aligned
        else:
            layer_mask, zeroed = nested_mask, dropped
        transformer = torch.nn.modules.transformer
        is_causal = transformer._detect_is_causal_mask(None, is_causal, transformer._get_seq_len(src, True))
        output = src
        for layer in self.layers:
            output = layer(output, src_mask=None, is_causal=is_causal, src_key_padding_mask=layer_mask)
        output = output.masked_fill(zeroed.unsqueeze(-1), 0.0)
        if self.norm is not None:
            output = self.norm(output)
        return output

    return forward
