"""Capture-time replacements for library functions torch.export cannot trace as written.

torchvision's detection models branch in Python on data-dependent sizes (``if boxes.numel() == 0``,
``len(rois)`` of a filtered set): torch.export stops with ``GuardOnDataDependentSymNode``. Each
entry here is an equivalent of one such function written without the branch: the same results in
eager PyTorch for every input (an empty set of boxes included), in operations whose sizes may be
data-dependent. Recurrent models (Mamba, RWKV) loop over the sequence in Python, which unrolls at
capture and fixes the length; their replacement runs the same step as a ``torch.scan``. :func:`applied`
installs them only while a capture runs and restores the originals after, and only for libraries
the user has already imported: nothing is imported here.

Every replacement names the function it stands for; ``tests/capture/test_library_patches.py``,
``tests/capture/test_keypoint_heatmaps.py``, ``tests/ops/test_normalization.py`` and
``tests/models/`` (``test_longformer.py``, ``test_recurrent_models.py``,
``test_mixture_of_experts.py``, ``test_canine.py``, ``test_cogvideox.py``,
``test_video_autoencoders.py``, ``test_chroma.py``, ``test_lumina_next.py``, ``test_mochi_attention.py``,
``test_omnigen_rotary.py``) check each against the original in eager mode.
"""

from __future__ import annotations

import contextlib
import dataclasses
import inspect
import logging
import sys
from typing import Any, Callable, Iterator

import torch

from torch_onnx_fx.capture import aten_compositions, diffusers_layers

__all__ = ["Patch", "PATCHES", "applied"]

logger = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Patch:
    """``module.attribute`` is replaced by ``make(original)`` during capture."""

    module: str
    attribute: str
    make: Callable[[Any], Any]
    why: str


def _batched_nms(original: Any) -> Any:
    nms = sys.modules["torchvision.ops.boxes"].nms

    def batched_nms(boxes: torch.Tensor, scores: torch.Tensor, idxs: torch.Tensor, iou_threshold: float) -> torch.Tensor:
        # Boxes of different classes never overlap once each class is moved past the largest
        # coordinate: one NMS over all. The zero appended keeps the maximum defined for no boxes.
        largest = torch.cat([boxes.reshape(-1), boxes.new_zeros(1)]).max()
        shifted = boxes + (idxs.to(boxes) * (largest + 1))[:, None]
        return nms(shifted, scores, iou_threshold)

    return batched_nms


def _multiscale_roi_align(original: Any) -> Any:
    poolers = sys.modules["torchvision.ops.poolers"]

    def multiscale_roi_align(x_filtered, boxes, output_size, sampling_ratio, scales, mapper):  # type: ignore[no-untyped-def]
        if scales is None or mapper is None:
            return original(x_filtered, boxes, output_size, sampling_ratio, scales, mapper)
        rois = poolers._convert_to_roi_format(boxes)
        if len(x_filtered) == 1:
            return poolers.roi_align(x_filtered[0], rois, output_size=output_size, spatial_scale=scales[0], sampling_ratio=sampling_ratio)
        levels = mapper(boxes)
        first = x_filtered[0]
        # rois.shape[0], not len(rois): a symbolic count, where len() demands a number.
        pooled = first.new_zeros((rois.shape[0], first.shape[1], *output_size))
        for level, (features, scale) in enumerate(zip(x_filtered, scales)):
            chosen = torch.where(levels == level)[0]
            level_pooled = poolers.roi_align(
                features, rois[chosen], output_size=output_size, spatial_scale=scale, sampling_ratio=sampling_ratio
            )
            pooled = pooled.index_put((chosen,), level_pooled.to(pooled.dtype))
        return pooled

    return multiscale_roi_align


def _paste_masks_in_image(original: Any) -> Any:
    roi_heads = sys.modules["torchvision.models.detection.roi_heads"]

    def paste_masks_in_image(masks: torch.Tensor, boxes: torch.Tensor, img_shape: Any, padding: int = 1) -> torch.Tensor:
        # torchvision pastes one mask at a time (a loop over a data-dependent count): each mask
        # is resized to its box with bilinear interpolation (align_corners=False) and written
        # into an empty image. Here every image pixel reads its source position in its box's
        # mask directly, with ATen's source-index rule, for all masks at once.
        masks, scale = roi_heads.expand_masks(masks, padding=padding)
        boxes = roi_heads.expand_boxes(boxes, scale).to(dtype=torch.int64)
        im_h, im_w = int(img_shape[0]), int(img_shape[1])
        size = masks.shape[-1]
        left, top, right, bottom = boxes.unbind(1)

        def axis(start: torch.Tensor, end: torch.Tensor, limit: int) -> tuple[torch.Tensor, ...]:
            coords = torch.arange(limit, device=boxes.device)
            length = (end - start + 1).clamp(min=1)
            inside = (coords >= start.clamp(min=0)[:, None]) & (coords < (end + 1).clamp(max=limit)[:, None])
            ratio = size / length.to(masks.dtype)
            source = ((coords - start[:, None]).to(masks.dtype) + 0.5) * ratio[:, None] - 0.5
            source = source.clamp(min=0)
            low = source.to(torch.int64).clamp(max=size - 1)
            high = (low + 1).clamp(max=size - 1)
            return inside, low, high, source - low.to(masks.dtype)

        inside_y, low_y, high_y, frac_y = axis(top, bottom, im_h)
        inside_x, low_x, high_x, frac_x = axis(left, right, im_w)
        plane = masks[:, 0]
        index = torch.arange(plane.shape[0], device=boxes.device)[:, None, None]

        def at(rows: torch.Tensor, cols: torch.Tensor) -> torch.Tensor:
            return plane[index, rows[:, :, None], cols[:, None, :]]

        fy, fx = frac_y[:, :, None], frac_x[:, None, :]
        top_row = (1 - fx) * at(low_y, low_x) + fx * at(low_y, high_x)
        bottom_row = (1 - fx) * at(high_y, low_x) + fx * at(high_y, high_x)
        pasted = (1 - fy) * top_row + fy * bottom_row
        keep = inside_y[:, :, None] & inside_x[:, None, :]
        return torch.where(keep, pasted, torch.zeros((), dtype=pasted.dtype))[:, None]

    return paste_masks_in_image


def _heatmaps_to_keypoints(original: Any) -> Any:
    def heatmaps_to_keypoints(maps: torch.Tensor, rois: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        # torchvision loops over the detections, resizing each one's heatmaps to its box's size:
        # a count and sizes with no value at capture. One operator computes the same (and is a
        # Loop in ONNX); torchvision's results are float32 whatever the maps, so only float32
        # maps are routed through it.
        if maps.dtype != torch.float32:
            return original(maps, rois)
        from torch_onnx_fx.capture.keypoint_heatmaps import heatmap_keypoints

        return heatmap_keypoints(maps, rois)

    return heatmaps_to_keypoints


def _longformer_self_attention(original: Any) -> Any:
    import math

    def forward(self, hidden_states, attention_mask=None, is_index_masked=None, is_index_global_attn=None,  # type: ignore[no-untyped-def]
                is_global_attn=None, output_attentions=False):
        # Longformer gathers the global tokens into a compact, data-dependently sized set (their
        # count per row, nonzero indices) and skips that work when a batch has none (``.item()``).
        # Here every position is a global-key slot, those that are not global are masked out
        # (their softmax weight is exactly 0, as the padding slots of the compact set are), and
        # the global queries' full attention is computed for every position and kept where the
        # position is global. The same numbers, with sizes known at capture, at the cost of
        # quadratic time and memory in the sequence (the original is linear in it).
        if output_attentions:
            return original(self, hidden_states, attention_mask, is_index_masked, is_index_global_attn,
                            is_global_attn, output_attentions)
        heads, head_dim, window = self.num_heads, self.head_dim, self.one_sided_attn_window_size
        hidden = hidden_states.transpose(0, 1)  # [S, B, E]
        seq_len, batch, embed = hidden.shape
        query = (self.query(hidden) / math.sqrt(head_dim)).view(seq_len, batch, heads, head_dim).transpose(0, 1)
        key = self.key(hidden).view(seq_len, batch, heads, head_dim).transpose(0, 1)
        value = self.value(hidden).view(seq_len, batch, heads, head_dim).transpose(0, 1)  # [B, S, H, D]
        lowest = torch.finfo(query.dtype).min

        # The band: column j of row i is key i - w + j, -inf outside the sequence, as Longformer's
        # sliding chunks lay it out ([B, S, H, 2w+1]); here gathered from all query-key products
        # (its chunking divides sizes through tensors, which capture cannot size by).
        keys = torch.arange(seq_len, device=query.device)[:, None] + torch.arange(2 * window + 1, device=query.device) - window
        inside = (keys >= 0) & (keys < seq_len)
        keys = keys.clamp(0, seq_len - 1)
        band_keys = keys[None, :, None, :].expand(batch, seq_len, heads, -1)
        products = torch.einsum("blhd,bshd->blhs", query, key)  # [B, S, H, S]
        removed = torch.zeros_like(attention_mask, dtype=query.dtype).masked_fill(attention_mask != 0, lowest)  # [B, S]
        band = products.gather(-1, band_keys) + removed[:, keys][:, :, None, :]
        local = torch.where(inside[None, :, None, :], band, float("-inf"))
        to_global = torch.where(is_index_global_attn[:, None, None, :], products, lowest)
        scores = torch.cat((to_global, local), dim=-1)
        probs = torch.nn.functional.softmax(scores, dim=-1, dtype=torch.float32)
        probs = torch.masked_fill(probs, is_index_masked[:, :, None, None], 0.0).type_as(scores)
        probs = torch.nn.functional.dropout(probs, p=self.dropout, training=self.training)
        from_global = torch.matmul(probs[..., :seq_len].transpose(1, 2), value.transpose(1, 2)).transpose(1, 2)
        # The band's weights put back at their keys (0 outside it), times the values.
        band_weights = torch.where(inside[None, :, None, :], probs[..., seq_len:], 0.0)
        spread = torch.zeros_like(products, dtype=probs.dtype).scatter_add(-1, band_keys, band_weights)
        from_local = torch.matmul(spread.transpose(1, 2), value.transpose(1, 2)).transpose(1, 2)
        output = (from_global + from_local).transpose(0, 1).reshape(seq_len, batch, embed)

        global_query = (self.query_global(hidden) / math.sqrt(head_dim)).view(seq_len, batch * heads, head_dim).transpose(0, 1)
        global_key = self.key_global(hidden).view(seq_len, batch * heads, head_dim).transpose(0, 1)
        global_value = self.value_global(hidden).view(seq_len, batch * heads, head_dim).transpose(0, 1)
        global_scores = torch.bmm(global_query, global_key.transpose(1, 2)).view(batch, heads, seq_len, seq_len)
        global_scores = global_scores.masked_fill(is_index_masked[:, None, None, :], lowest)
        global_probs = torch.nn.functional.softmax(global_scores.view(batch * heads, seq_len, seq_len), dim=-1, dtype=torch.float32)
        global_probs = torch.nn.functional.dropout(global_probs.type_as(global_scores), p=self.dropout, training=self.training)
        global_output = torch.bmm(global_probs, global_value).view(batch, heads, seq_len, head_dim)
        global_output = global_output.permute(2, 0, 1, 3).reshape(seq_len, batch, embed)
        output = torch.where(is_index_global_attn.transpose(0, 1)[:, :, None], global_output, output)
        return (output.transpose(0, 1),)

    return forward


def _longformer_no_window_padding(original: Any) -> Any:
    def pad_to_window_size(self, *inputs, **keyword_inputs):  # type: ignore[no-untyped-def]
        # Longformer (and LED's encoder) pad the sequence to a multiple of the window for their
        # chunked attention; the replacement above needs no such multiple, and padding keys are
        # masked out (weight 0), so the real positions come out the same. Padding would make
        # capture guard on the length modulo the window, which an exported graph cannot check.
        # Returned as the original returns them: the padding length, then the tensors it padded.
        names = [n for n in inspect.signature(original).parameters if n not in ("self", "pad_token_id")]
        bound = dict(zip(names, inputs)) | {k: v for k, v in keyword_inputs.items() if k in names}
        return (0, *(bound.get(name) for name in names))

    return pad_to_window_size


def _scan(step: Callable[..., Any], init: Any, xs: Any) -> Any:
    # torch.scan traces its body once: the graph holds one step and an ONNX ``Scan`` runs it per
    # position, for any sequence length. Eager runs the same steps one by one.
    from torch._higher_order_ops.scan import scan

    return scan(step, init, xs)


def _selective_scan(original: Any) -> Any:
    def mamba_selective_scan(hidden_states, dt, A, B, C, D=None, z=None, delta_bias=None,  # type: ignore[no-untyped-def]
                             delta_softplus=False, return_last_state=False, **ignored):
        # Mamba's sequential path (the one its CPU forward takes) with the Python loop over the
        # sequence as one scan step: a loop over positions unrolls at capture and fixes the length.
        # Every step computes what the loop's iteration computes, in the same order and dtypes.
        dtype = hidden_states.dtype
        if delta_bias is not None:
            dt = dt + delta_bias.to(dt.dtype)[..., None]
        if delta_softplus:
            dt = torch.nn.functional.softplus(dt)
        decay = torch.exp(A[None, :, None, :] * dt[:, :, :, None])
        drive = dt[:, :, :, None] * B.transpose(1, 2)[:, None, :, :].float() * hidden_states[:, :, :, None].float()
        readout = C.transpose(1, 2)

        def step(state, position):  # type: ignore[no-untyped-def]
            decay_t, drive_t, readout_t = position
            state = decay_t * state + drive_t
            return state, torch.matmul(state.to(dtype), readout_t.unsqueeze(-1))[:, :, 0]

        state = hidden_states.new_zeros(decay.shape[0], decay.shape[1], decay.shape[3], dtype=torch.promote_types(dtype, decay.dtype))
        state, outputs = _scan(step, state, (decay.movedim(2, 0), drive.movedim(2, 0), readout.movedim(1, 0)))
        output = outputs.movedim(0, -1)
        if D is not None:
            output = output + hidden_states * D[None, :, None]
        if z is not None:
            output = output * torch.nn.functional.silu(z)
        return (output, state) if return_last_state else output

    return mamba_selective_scan


def _rwkv_linear_attention_cpu(original: Any) -> Any:
    def rwkv_linear_attention_cpu(time_decay, time_first, key, value, state=None, return_state=False):  # type: ignore[no-untyped-def]
        # RWKV's CPU recurrence, the loop over positions as one scan step (see mamba above).
        if state is None:
            zeros = torch.zeros_like(key[:, 0], dtype=torch.float32)
            state = [zeros, zeros.clone(), zeros - 1e38]
            given = False
        else:
            given = True
        decay = -torch.exp(time_decay)

        def step(carry, position):  # type: ignore[no-untyped-def]
            numerator_state, denominator_state, max_state = carry
            key_t, value_t = position
            key_t = key_t.float()
            top = torch.maximum(max_state, key_t + time_first)
            e1, e2 = torch.exp(max_state - top), torch.exp(key_t + time_first - top)
            out = ((e1 * numerator_state + e2 * value_t) / (e1 * denominator_state + e2)).to(key.dtype)
            top = torch.maximum(max_state + decay, key_t)
            e1, e2 = torch.exp(max_state + decay - top), torch.exp(key_t - top)
            return [e1 * numerator_state + e2 * value_t, e1 * denominator_state + e2, top], out

        state, outputs = _scan(step, list(state), (key.movedim(1, 0), value.movedim(1, 0)))
        return outputs.movedim(0, 1), (state if return_state or given else None)

    return rwkv_linear_attention_cpu


def _every_expert_routed(
    final: torch.Tensor,
    experts: int,
    slots: int,
    run: Callable[[int], torch.Tensor],
    chosen: Callable[[int, int], torch.Tensor],
    weight: Callable[[int], torch.Tensor],
) -> torch.Tensor:
    """Mixture-of-experts layers that loop over the experts some token chose (``for e in
    mask.nonzero()``): a loop of data-dependent length, which capture cannot unroll. Here every
    expert runs on every token and each token adds its routed products, expert by expert and slot
    by slot as the originals do, in ``final``'s dtype; a token's other experts add exact zeros
    (``where`` rather than a 0/1 product, so an expert's inf or nan on a token it was not given
    stays out)."""
    for expert in range(experts):
        output = run(expert)
        for slot in range(slots):
            routed = (output * weight(slot)).to(final.dtype)
            final = final + torch.where(chosen(slot, expert), routed, torch.zeros_like(routed))
    return final


def _switch_experts(original: Any) -> Any:
    def forward(self, hidden_states, selected_experts, routing_weights):  # type: ignore[no-untyped-def]
        return _every_expert_routed(
            torch.zeros_like(hidden_states), self.num_experts, selected_experts.shape[1],
            run=lambda expert: self[f"expert_{expert}"](hidden_states),
            chosen=lambda slot, expert: selected_experts[:, slot, expert, None].bool(),
            weight=lambda slot: routing_weights[:, slot, None],
        )

    return forward


def _gated_experts(original: Any) -> Any:
    def forward(self, hidden_states, router_indices=None, routing_weights=None):  # type: ignore[no-untyped-def]
        # OpenAI Privacy Filter's experts (gpt-oss's) compute and add in float32, as the
        # original's index_add_ into a float32 buffer does.
        states = hidden_states.float()

        def run(expert: int) -> torch.Tensor:
            gate_up = states @ self.gate_up_proj[expert].float() + self.gate_up_proj_bias[expert].float()
            return self._apply_gate(gate_up).float() @ self.down_proj[expert].float() + self.down_proj_bias[expert].float()

        final = _every_expert_routed(
            torch.zeros_like(hidden_states, dtype=torch.float32), self.num_experts, router_indices.shape[-1],
            run=run,
            chosen=lambda slot, expert: (router_indices[:, slot] == expert)[:, None],
            weight=lambda slot: routing_weights[:, slot, None].float(),
        )
        return final.to(hidden_states.dtype)

    return forward


def _rglru_scan(original: Any) -> Any:
    def _rnn_scan(self, hidden_states, recurrent_gate, reset, recurrent_states, acc_dtype=torch.float32):  # type: ignore[no-untyped-def]
        # RecurrentGemma's linear recurrence over a prompt loops over positions in Python (see
        # Mamba's above): one scan step instead, the same multiply then add per position, in
        # the same dtypes. One position (decoding) takes the original, which has no loop.
        if hidden_states.shape[1] == 1:
            return original(self, hidden_states, recurrent_gate, reset, recurrent_states, acc_dtype)
        gate = recurrent_gate * ~reset
        if recurrent_states is None:
            recurrent_states = torch.zeros(hidden_states[:, 0].shape, dtype=acc_dtype, device=hidden_states.device)

        def step(state, position):  # type: ignore[no-untyped-def]
            gate_t, input_t = position
            state = gate_t.type(acc_dtype) * state
            state = state + input_t.type(acc_dtype)
            # A copy even in the same dtype: scan's outputs may not alias its carry.
            return state, state.to(hidden_states.dtype, copy=True)

        state, outputs = _scan(step, recurrent_states, (gate.movedim(1, 0), hidden_states.movedim(1, 0)))
        return outputs.movedim(0, 1), state

    return _rnn_scan


def _fsmt_padding_mask(original: Any) -> Any:
    def make_padding_mask(input_ids, padding_idx=1):  # type: ignore[no-untyped-def]
        # FSMT returns no mask when no token is padding: a branch on the data. Its only reader,
        # the attention's masked_fill, leaves the scores as they are for an all-False mask, so
        # the mask is returned always.
        return input_ids.eq(padding_idx)

    return make_padding_mask


def _canine_local_attention(original: Any) -> Any:
    def forward(self, hidden_states, attention_mask=None, output_attentions=False):  # type: ignore[no-untyped-def]
        # CANINE's character encoder attends within blocks of the sequence, one Python loop
        # iteration per block: the block count becomes a constant at capture. With equal blocks
        # of queries and keys (the layout CanineModel builds), one attention over the whole
        # sequence with every other block's keys at -inf computes the same: a row's softmax and
        # weighted sum see its block's keys only, also where all of them are masked (the
        # original then spreads evenly over its block). Quadratic in the length where the
        # original is linear, in one shallow layer beside the deep stack's full attention.
        width = self.attend_from_chunk_stride
        blocked = (
            self.local and not self.always_attend_to_first_position and not self.first_position_attends_to_all
            and width == self.attend_from_chunk_width == self.attend_to_chunk_width == self.attend_to_chunk_stride
            and attention_mask is not None and attention_mask.ndim == 3 and not output_attentions
        )
        if not blocked:
            return original(self, hidden_states, attention_mask, output_attentions)
        block = torch.arange(hidden_states.shape[1], device=hidden_states.device) // width
        additive = (1.0 - attention_mask.float()) * torch.finfo(hidden_states.dtype).min
        outside = torch.tensor(float("-inf"), device=additive.device)
        additive = torch.where(block[:, None] == block[None, :], additive, outside)[:, None]
        context = self.self(hidden_states, hidden_states, additive, False)[0]
        return (self.output(context, hidden_states),)

    return forward


def _canine_downsample_mask(original: Any) -> Any:
    def downsample(self, char_attention_mask, downsampling_rate):  # type: ignore[no-untyped-def]
        # MaxPool1d over the mask, built inside forward: its kernel fixes the sequence length at
        # capture. The maximum of each whole window, as the pool takes (a partial last window is
        # dropped by both).
        batch, length = char_attention_mask.shape
        windows = length // downsampling_rate
        whole = char_attention_mask[:, : windows * downsampling_rate].float()
        return whole.reshape(batch, windows, downsampling_rate).amax(dim=-1)

    return downsample


def _cpmant_attention_mask(original: Any) -> Any:
    def prepare_attention_mask(self, input_ids, span, context, length):  # type: ignore[no-untyped-def]
        # CPM-Ant counts the positions after its prompt down to 0 as a Python list,
        # ``torch.tensor(list(range(n))[::-1])``: a list of the sequence's length fixes that length
        # at capture. The same countdown as an ``arange`` keeps it symbolic; the mask is otherwise
        # the original's (causal or bidirectional per ``context``, within a span, left padding).
        batch, total = input_ids.shape[0], input_ids.shape[1]
        positions = torch.arange(total, device=input_ids.device)
        causal = (positions <= positions.view(-1, 1)).view(1, total, total)
        mask = context[:, None, :] | (context[:, :, None].logical_not() & causal)
        mask = mask & (span[:, None, :] == span[:, :, None])
        countdown = torch.arange(total - self.prompt_length - 1, -1, -1, device=input_ids.device)
        kept = countdown[None, :] < length[:, None]
        kept = torch.cat((torch.ones(batch, self.prompt_length, dtype=torch.bool, device=input_ids.device), kept), dim=1)
        return kept.view(batch, total, 1) & kept.view(batch, 1, total) & mask

    return prepare_attention_mask


def _causal_mask_hint(original: Any) -> Any:
    def detect_is_causal_mask(mask: torch.Tensor | None, is_causal: bool | None = None, size: int | None = None) -> bool:
        # torch compares the mask with a causal one to pick SDPA's causal path: a decision on the
        # data, where torch.export stopped (nn.Transformer with a tgt_mask). Not causal is right
        # for every mask (torch: "may lead to reduced performance" when the mask is causal):
        # the mask is then applied as given. A hint the caller gave is kept.
        return is_causal is True

    return detect_is_causal_mask


def _unique_consecutive_dim(original: Any) -> Any:
    def unique_consecutive_impl(input: torch.Tensor, return_inverse: bool = False, return_counts: bool = False, dim: int | None = None) -> Any:
        # torch's fake kernel mis-sizes a negative dim (values of [1, u0, 1, 5] for a [1, 5]
        # input and dim=-1), and the exported graph then declares that shape: counted from 0
        # the dim is the same one, and the kernel sizes it right.
        if dim is not None and dim < 0:
            dim += input.dim()
        return original(input, return_inverse, return_counts, dim)

    return unique_consecutive_impl


def _padded_encoder(original: Any) -> Any:
    from torch_onnx_fx.capture import padded_encoder

    return padded_encoder.padded_encoder_forward(original)


def _padded_vf(original: Any) -> Any:
    from torch_onnx_fx.capture import packed_sequences

    return packed_sequences.padded_vf(original)


def _padded_forward(original: Any) -> Any:
    from torch_onnx_fx.capture import packed_sequences

    return packed_sequences.padded_forward(original)


PATCHES: tuple[Patch, ...] = (
    Patch("torch.nn.utils.rnn", "_VF", _padded_vf,
          "packs a padded batch into a sequence of data-dependent size whose batch sizes the recurrent layer reads as sizes"),
    *(Patch("torch.nn.modules.rnn", f"{layer}.forward", _padded_forward,
            "reads a packed sequence's batch_sizes[0] as a size (see torch.nn.utils.rnn._VF)")
      for layer in ("LSTM", "GRU", "RNN")),
    Patch("torch.nn.modules.transformer", "TransformerEncoder.forward", _padded_encoder,
          "packs a padded batch into a nested tensor in inference (zeros at padded positions), which tracing skips"),
    Patch("torch.functional", "_unique_consecutive_impl", _unique_consecutive_dim,
          "a negative dim reaches a fake kernel that sizes the result wrongly (the model then fails to load)"),
    Patch("torch.nn.modules.transformer", "_detect_is_causal_mask", _causal_mask_hint,
          "compares the attention mask with a causal one to choose a kernel: a decision on the data"),
    Patch("torch.nn.functional", "instance_norm", aten_compositions.instance_norm,
          "updates its running statistics through an undeclared alias, which torch.export drops"),
    Patch("torch.nn.functional", "one_hot", aten_compositions.one_hot,
          "without num_classes, makes the largest class id a plain integer (int() of an item())"),
    Patch("torch", "cov", aten_compositions.cov, "checks its degrees of freedom on the data (an item() of a tensor)"),
    Patch("torch", "Tensor.cov", aten_compositions.cov, "as torch.cov"),
    Patch("torch", "corrcoef", aten_compositions.corrcoef, "calls ATen's cov, as torch.cov"),
    Patch("torch", "Tensor.corrcoef", aten_compositions.corrcoef, "as torch.corrcoef"),
    Patch("torchvision.ops.boxes", "batched_nms", _batched_nms,
          "branches on boxes.numel() == 0 and on > 4000 boxes (a data-dependent count)"),
    Patch("torchvision.ops.poolers", "_multiscale_roi_align", _multiscale_roi_align,
          "takes len() of the filtered proposals, which has no value during capture"),
    Patch("torchvision.models.detection.roi_heads", "paste_masks_in_image", _paste_masks_in_image,
          "pastes masks one by one in a Python loop over the detections"),
    Patch("torchvision.models.detection.roi_heads", "heatmaps_to_keypoints", _heatmaps_to_keypoints,
          "resizes each detection's keypoint heatmaps to its box's size in a Python loop over the detections"),
    Patch("transformers.models.longformer.modeling_longformer", "LongformerSelfAttention.forward",
          _longformer_self_attention,
          "gathers global tokens into a set of data-dependent size and branches on whether there are any"),
    Patch("transformers.models.longformer.modeling_longformer", "LongformerModel._pad_to_window_size",
          _longformer_no_window_padding, "pads to a multiple of the window: a guard on the length modulo the window"),
    # LED's encoder is Longformer's, under other names.
    Patch("transformers.models.led.modeling_led", "LEDEncoderSelfAttention.forward", _longformer_self_attention,
          "as LongformerSelfAttention.forward"),
    Patch("transformers.models.led.modeling_led", "LEDEncoder._pad_to_window_size", _longformer_no_window_padding,
          "as LongformerModel._pad_to_window_size"),
    Patch("diffusers.models.embeddings", "CogVideoXPatchEmbed._get_positional_embeddings", diffusers_layers.cogvideox_positions,
          "writes the positional table into a tensor through .data, which tracing does not follow"),
    Patch("diffusers.models.autoencoders.autoencoder_kl_cogvideox", "CogVideoXSafeConv3d.forward", diffusers_layers.whole_convolution,
          "convolves inputs above 2 GB in parts: a branch on the size"),
    Patch("diffusers.models.autoencoders.autoencoder_kl_mochi", "MochiChunkedGroupNorm3D.forward", diffusers_layers.unchunked_group_norm,
          "normalizes the frames in chunks of 8: a loop whose count is the batch's"),
    Patch("diffusers.models.transformers.transformer_chroma", "ChromaCombinedTimestepTextProjEmbeddings.forward",
          diffusers_layers.chroma_timestep_embeddings, "embeds zeros from a Python list as long as the batch"),
    Patch("diffusers.models.embeddings", "LuminaPatchEmbed.forward", diffusers_layers.lumina_patch_sizes,
          "returns the image size in a Python list as long as the batch"),
    Patch("diffusers.models.attention_processor", "MochiAttnProcessor2_0.__call__", diffusers_layers.mochi_joint_attention,
          "attends sample by sample in a Python loop over the batch, gathering prompt tokens with nonzero()"),
    Patch("diffusers.models.transformers.transformer_omnigen", "OmniGenSuScaledRotaryEmbedding.forward",
          diffusers_layers.omnigen_rotary_factors, "picks its scaling factors by an if on the largest position id"),
    Patch("transformers.models.mamba.modeling_mamba", "mamba_selective_scan", _selective_scan,
          "loops over the sequence in Python: the loop unrolls and the length becomes a constant"),
    # Mamba's selective scan, copied into other families' modules.
    *(Patch(f"transformers.models.{family}.modeling_{family}", "mamba_selective_scan", _selective_scan, "as Mamba's")
      for family in ("falcon_mamba", "jamba", "zamba")),
    Patch("transformers.models.switch_transformers.modeling_switch_transformers", "SwitchTransformersExperts.forward",
          _switch_experts, "loops over the experts that some token chose: a loop of data-dependent length"),
    Patch("transformers.models.openai_privacy_filter.modeling_openai_privacy_filter", "OpenAIPrivacyFilterExperts.forward",
          _gated_experts, "as SwitchTransformersExperts.forward"),
    Patch("transformers.models.rwkv.modeling_rwkv", "rwkv_linear_attention_cpu", _rwkv_linear_attention_cpu,
          "loops over the sequence in Python, as Mamba's selective scan"),
    Patch("transformers.models.recurrent_gemma.modeling_recurrent_gemma", "RecurrentGemmaRglru._rnn_scan", _rglru_scan,
          "loops over the sequence in Python, as Mamba's selective scan"),
    Patch("transformers.models.fsmt.modeling_fsmt", "make_padding_mask", _fsmt_padding_mask,
          "returns None when no token is padding: a branch on the data"),
    Patch("transformers.models.canine.modeling_canine", "CanineAttention.forward", _canine_local_attention,
          "attends block by block in a Python loop over the sequence's blocks: the length becomes a constant"),
    Patch("transformers.models.canine.modeling_canine", "CanineModel._downsample_attention_mask", _canine_downsample_mask,
          "max-pools the mask with a pooling module built in forward, which fixes the length"),
    Patch("transformers.models.cpmant.modeling_cpmant", "CpmAntModel._prepare_attention_mask", _cpmant_attention_mask,
          "builds a Python list of the sequence's length: the length becomes a constant"),
)

# Modules that imported a patched function by name and call it through their own globals.
_IMPORTERS = {
    ("torchvision.ops.boxes", "batched_nms"): ("torchvision.ops", "torchvision.models.detection.rpn",
                                               "torchvision.models.detection.roi_heads",
                                               "torchvision.models.detection.retinanet",
                                               "torchvision.models.detection.fcos",
                                               "torchvision.models.detection.ssd"),
    ("torchvision.models.detection.roi_heads", "paste_masks_in_image"): ("torchvision.models.detection.transform",),
}


@contextlib.contextmanager
def applied() -> Iterator[list[str]]:
    """Install the patches for the libraries already imported; yield their names; undo them."""
    undo: list[tuple[Any, str, Any]] = []
    names: list[str] = []
    try:
        for patch in PATCHES:
            module = sys.modules.get(patch.module)
            owner_name, _, attribute = patch.attribute.rpartition(".")
            owner = getattr(module, owner_name, None) if owner_name else module
            if owner is None or not hasattr(owner, attribute):
                continue
            original = getattr(owner, attribute)
            replacement = patch.make(original)
            if owner is module:
                # A function: replaced wherever a module holds it, the importers' own names included
                # (modules that call it as ``box_ops.batched_nms`` reach it through patch.module).
                holders = [sys.modules.get(name) for name in (patch.module, *_IMPORTERS.get((patch.module, patch.attribute), ()))]
                places = [(h, name) for h in holders if h is not None for name in dir(h) if getattr(h, name, None) is original]
            else:
                # A method: replaced on its class, which every instance reads it through.
                places = [(owner, attribute)]
            for holder, name in places:
                undo.append((holder, name, original))
                setattr(holder, name, replacement)
            names.append(f"{patch.module}.{patch.attribute}")
        if names:
            logger.debug("capture-time patches: %s", names)
        yield names
    finally:
        for holder, attribute, original in reversed(undo):
            setattr(holder, attribute, original)
