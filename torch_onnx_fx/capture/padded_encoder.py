"""``nn.TransformerEncoder`` with a padding mask, computing at padded positions what inference does.

In inference (eval mode, no grad) with ``src_key_padding_mask`` and ``enable_nested_tensor``
(the default), ``nn.TransformerEncoder`` packs the batch into a nested tensor: padded positions
are dropped, the layers run over the valid tokens, and the result is padded back with zeros
before the final norm (so a padded position comes out as ``norm(0)``). Under torch.export the
encoder takes its plain path (it sees the tracing), which runs every position through the
layers and returns other numbers there: 3.5 off for both exporters, which a sum over the
sequence or a check of all outputs against the model reads.

The replacement runs the layers as the plain path does (valid positions are the same numbers,
as the padding mask keeps padded keys out of the attention), then zeroes the padded positions
before the norm where the nested path would have been taken. Whether it is taken depends on
the module (checked here as PyTorch checks it) and, with ``mask_check`` (the default), on the
data: every row's valid positions must come first. That check becomes a condition in the graph.
Grad mode is the one condition left out: an exported model is an inference model, so it matches
the module under ``torch.no_grad()`` / ``torch.inference_mode()``.
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
        # The nested tensor keeps the positions whose mask entry is 0 (``logical_not`` of the
        # canonical float mask), whatever other value a float mask holds.
        padded = padding != 0
        transformer = torch.nn.modules.transformer
        is_causal = transformer._detect_is_causal_mask(None, is_causal, transformer._get_seq_len(src, True))
        output = src
        for layer in self.layers:
            output = layer(output, src_mask=None, is_causal=is_causal, src_key_padding_mask=padding)
        zeroed = padded
        if getattr(self, "mask_check", True):
            zeroed = padded & _left_aligned(padded)
        output = output.masked_fill(zeroed.unsqueeze(-1), 0.0)
        if self.norm is not None:
            output = self.norm(output)
        return output

    return forward
