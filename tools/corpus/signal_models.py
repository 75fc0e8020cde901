"""Models outside transformers, by family: audio front ends, spectral filters, half precision,
complex arithmetic, graph networks, pixel shuffles and RWKV's recurrences.

Where graph size against torch.onnx's is measured (``tools/sweeps/node_parity.py``): the
families issue 28 found our graphs larger on. Each case is a small module written the way such
code is written in the wild (torchaudio-style front ends, PyG-style message passing with
``index_add``/``scatter_reduce``, Llama's original complex rotary embedding, ESPCN's upsampler,
RWKV-4's time mixing), with random weights and inputs that keep every output finite.
"""

from __future__ import annotations

import dataclasses
import math
from typing import Any, Callable

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["SignalCase", "SIGNAL_CASES"]


@dataclasses.dataclass(frozen=True)
class SignalCase:
    name: str
    family: str
    make: Callable[[], nn.Module]
    inputs: Callable[[], tuple[torch.Tensor, ...]]
    dynamic_shapes: Any = None


# -- audio ---------------------------------------------------------------------------------------


class LogMel(nn.Module):
    """STFT power (or magnitude) through a mel filter bank, then log or decibels."""

    def __init__(self, n_fft: int, hop: int, mels: int, power: float = 2.0, decibels: bool = False):
        super().__init__()
        self.n_fft, self.hop, self.power, self.decibels = n_fft, hop, power, decibels
        self.register_buffer("window", torch.hann_window(n_fft))
        self.register_buffer("filters", torch.rand(n_fft // 2 + 1, mels))

    def forward(self, wav: torch.Tensor) -> torch.Tensor:
        spec = torch.stft(wav, self.n_fft, hop_length=self.hop, window=self.window, return_complex=True)
        magnitude = spec.abs() if self.power == 1.0 else spec.abs() ** self.power
        mel = magnitude.transpose(-1, -2) @ self.filters
        if self.decibels:
            return 10.0 * torch.log10(mel.clamp(min=1e-10))
        return torch.log(mel + 1e-6)


class MFCC(nn.Module):
    """Log-mel, then a DCT-II as a product with its table."""

    def __init__(self, n_fft: int = 128, mels: int = 20, coefficients: int = 13):
        super().__init__()
        self.log_mel = LogMel(n_fft, n_fft // 4, mels)
        k = torch.arange(coefficients)[:, None]
        n = torch.arange(mels)[None, :]
        self.register_buffer("dct", torch.cos(math.pi / mels * (n + 0.5) * k).T.contiguous())

    def forward(self, wav: torch.Tensor) -> torch.Tensor:
        return self.log_mel(wav) @ self.dct


class PreEmphasisFrames(nn.Module):
    """Pre-emphasis, framing by ``unfold``, a window and the per-frame energy."""

    def forward(self, wav: torch.Tensor) -> torch.Tensor:
        emphasized = torch.cat([wav[:, :1], wav[:, 1:] - 0.97 * wav[:, :-1]], dim=1)
        frames = emphasized.unfold(1, 64, 32) * torch.hamming_window(64)
        return torch.log((frames**2).sum(-1) + 1e-6)


class SpectralGate(nn.Module):
    """Denoising by a soft mask on the STFT magnitude, back through the inverse STFT."""

    def __init__(self, n_fft: int = 64):
        super().__init__()
        self.n_fft = n_fft
        self.register_buffer("window", torch.hann_window(n_fft))

    def forward(self, wav: torch.Tensor) -> torch.Tensor:
        spec = torch.stft(wav, self.n_fft, hop_length=self.n_fft // 4, window=self.window, return_complex=True)
        magnitude = spec.abs()
        mask = torch.sigmoid(magnitude - magnitude.mean(-1, keepdim=True))
        return torch.istft(spec * mask, self.n_fft, hop_length=self.n_fft // 4, window=self.window, length=wav.shape[-1])


# -- spectral ------------------------------------------------------------------------------------


class RfftFilter(nn.Module):
    """A learned frequency response: rfft, complex gain, irfft."""

    def __init__(self, length: int):
        super().__init__()
        self.length = length
        self.gain = nn.Parameter(torch.randn(length // 2 + 1, 2))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.fft.irfft(torch.fft.rfft(x) * torch.view_as_complex(self.gain), n=self.length)


class FFTDamping(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        f = torch.fft.rfft(x, dim=-1)
        return torch.fft.irfft(f * torch.exp(-f.abs()), n=x.shape[-1], dim=-1)


class FFT2Magnitude(nn.Module):
    """An image's centred log spectrum."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.log1p(torch.fft.fftshift(torch.fft.fft2(x), dim=(-2, -1)).abs())


class HilbertEnvelope(nn.Module):
    """The analytic signal's magnitude: fft, zero the negative frequencies, ifft, abs."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n = x.shape[-1]
        h = torch.zeros(n)
        h[0] = 1.0
        h[1 : n // 2] = 2.0
        h[n // 2] = 1.0
        return torch.fft.ifft(torch.fft.fft(x) * h).abs()


class FNetMixing(nn.Module):
    """FNet's token mixing: the real part of a 2-d FFT over sequence and hidden."""

    def __init__(self, hidden: int = 32):
        super().__init__()
        self.norm = nn.LayerNorm(hidden)
        self.ff = nn.Linear(hidden, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x = self.norm(x + torch.fft.fft2(x).real)
        return self.ff(x)


# -- half precision ------------------------------------------------------------------------------


class HalfMLP(nn.Module):
    def __init__(self, width: int = 64):
        super().__init__()
        self.up, self.down, self.norm = nn.Linear(width, 2 * width), nn.Linear(2 * width, width), nn.LayerNorm(width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(self.down(F.gelu(self.up(x))) + x)


class HalfConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv1, self.bn1 = nn.Conv2d(3, 16, 3, padding=1), nn.BatchNorm2d(16)
        self.conv2 = nn.Conv2d(16, 16, 3, padding=1, groups=4)
        self.head = nn.Linear(16, 10)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = F.relu(self.bn1(self.conv1(x)))
        y = F.silu(self.conv2(y)) + y
        return self.head(y.mean((-2, -1)))


class HalfAttention(nn.Module):
    def __init__(self, width: int = 64, heads: int = 4):
        super().__init__()
        self.heads = heads
        self.qkv, self.out = nn.Linear(width, 3 * width), nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        b, s, d = x.shape
        q, k, v = self.qkv(x).view(b, s, 3, self.heads, d // self.heads).permute(2, 0, 3, 1, 4)
        y = F.scaled_dot_product_attention(q, k, v, is_causal=True)
        return self.out(y.transpose(1, 2).reshape(b, s, d))


class HalfEmbeddingHead(nn.Module):
    def __init__(self, vocab: int = 100, width: int = 32):
        super().__init__()
        self.embed, self.norm = nn.Embedding(vocab, width), nn.RMSNorm(width)
        self.head = nn.Linear(width, vocab, bias=False)

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        return self.head(self.norm(self.embed(ids))).softmax(-1)


class MixedPrecisionBranch(nn.Module):
    """float32 model with one float16 branch, cast back (autocast-style hand conversion)."""

    def __init__(self, width: int = 32):
        super().__init__()
        self.proj = nn.Linear(width, width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        half = F.linear(x.half(), self.proj.weight.half(), self.proj.bias.half()).relu()
        return x + half.float()


# -- complex -------------------------------------------------------------------------------------


class ComplexRotary(nn.Module):
    """Llama's original rotary embedding: frequencies as ``torch.polar``, applied as a complex product."""

    def __init__(self, heads: int = 4, head_dim: int = 16, length: int = 8):
        super().__init__()
        inverse = 1.0 / (10000 ** (torch.arange(0, head_dim, 2).float() / head_dim))
        angles = torch.outer(torch.arange(length).float(), inverse)
        self.register_buffer("freqs", torch.view_as_real(torch.polar(torch.ones_like(angles), angles)))
        self.heads = heads

    def forward(self, q: torch.Tensor) -> torch.Tensor:
        b, s, h, d = q.shape
        qc = torch.view_as_complex(q.float().reshape(b, s, h, d // 2, 2))
        freqs = torch.view_as_complex(self.freqs)[:s].view(1, s, 1, d // 2)
        return torch.view_as_real(qc * freqs).flatten(3)


class ComplexArithmetic(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        c = torch.view_as_complex(x)
        y = c * c.conj() + torch.polar(c.abs(), c.angle() * 2)
        return torch.view_as_real(y * 1j)


class ComplexLinear(nn.Module):
    """A complex-valued layer as complex matrices (radar, MRI reconstruction nets)."""

    def __init__(self, width: int = 16):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(width, width, 2) / width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        z = torch.view_as_complex(x) @ torch.view_as_complex(self.weight)
        return torch.view_as_real(z / (1 + z.abs()))


# -- graph networks ------------------------------------------------------------------------------


def _graph(nodes: int = 12, edges: int = 40) -> tuple[torch.Tensor, torch.Tensor]:
    generator = torch.Generator().manual_seed(0)
    return torch.randn(nodes, 16, generator=generator), torch.randint(0, nodes, (2, edges), generator=generator)


class GCNLayer(nn.Module):
    """Sum aggregation by ``index_add`` with symmetric degree normalisation."""

    def __init__(self, width: int = 16):
        super().__init__()
        self.linear = nn.Linear(width, width)

    def forward(self, x: torch.Tensor, edges: torch.Tensor) -> torch.Tensor:
        source, target = edges[0], edges[1]
        degree = torch.zeros(x.shape[0]).index_add(0, target, torch.ones(target.shape[0])) + 1.0
        norm = (degree[source] * degree[target]).rsqrt().unsqueeze(-1)
        h = self.linear(x)
        return F.relu(torch.zeros_like(h).index_add(0, target, h[source] * norm) + h / degree.unsqueeze(-1))


class GATLayer(nn.Module):
    """Attention over neighbours: edge scores, a softmax per target by ``scatter_reduce``."""

    def __init__(self, width: int = 16):
        super().__init__()
        self.linear = nn.Linear(width, width, bias=False)
        self.attention = nn.Parameter(torch.randn(2 * width))

    def forward(self, x: torch.Tensor, edges: torch.Tensor) -> torch.Tensor:
        source, target = edges[0], edges[1]
        h = self.linear(x)
        score = F.leaky_relu(torch.cat([h[source], h[target]], -1) @ self.attention, 0.2)
        best = torch.full((x.shape[0],), -1e9).scatter_reduce(0, target, score, reduce="amax", include_self=True)
        weight = torch.exp(score - best[target])
        total = torch.zeros(x.shape[0]).scatter_add(0, target, weight)
        alpha = (weight / total[target]).unsqueeze(-1)
        return torch.zeros_like(h).index_add(0, target, alpha * h[source])


class MeanAggregation(nn.Module):
    """GraphSAGE's mean of neighbours by ``scatter_reduce(mean)``, concatenated with the node."""

    def __init__(self, width: int = 16):
        super().__init__()
        self.linear = nn.Linear(2 * width, width)

    def forward(self, x: torch.Tensor, edges: torch.Tensor) -> torch.Tensor:
        index = edges[1].unsqueeze(-1).expand(-1, x.shape[1])
        mean = torch.zeros_like(x).scatter_reduce(0, index, x[edges[0]], reduce="mean", include_self=False)
        return self.linear(torch.cat([x, mean], -1))


class SegmentPooling(nn.Module):
    """Per-graph sum and max of node features in a batch of graphs (a ``batch`` vector)."""

    def forward(self, x: torch.Tensor, batch: torch.Tensor) -> torch.Tensor:
        index = batch.unsqueeze(-1).expand_as(x)
        total = torch.zeros(3, x.shape[1]).scatter_add(0, index, x)
        peak = torch.full((3, x.shape[1]), -1e9).scatter_reduce(0, index, x, reduce="amax")
        return torch.cat([total, peak], -1)


# -- pixel shuffles ------------------------------------------------------------------------------


class ESPCN(nn.Module):
    """Sub-pixel super-resolution: convolutions, then pixel_shuffle."""

    def __init__(self, scale: int = 2):
        super().__init__()
        self.conv1, self.conv2 = nn.Conv2d(1, 16, 5, padding=2), nn.Conv2d(16, scale * scale, 3, padding=1)
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.pixel_shuffle(self.conv2(torch.tanh(self.conv1(x))), self.scale)


class PixelRoundTrip(nn.Module):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.pixel_unshuffle(F.pixel_shuffle(x, 2), 2) + F.pixel_shuffle(x, 2).mean()


class SpaceToDepthStem(nn.Module):
    """A pixel_unshuffle stem in front of a convolution (space-to-depth backbones)."""

    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(12, 8, 3, padding=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.conv(F.pixel_unshuffle(x, 2))


# -- RWKV ----------------------------------------------------------------------------------------


class TimeMix(nn.Module):
    """RWKV-4's time mixing, its WKV recurrence unrolled over a static sequence."""

    def __init__(self, width: int = 32):
        super().__init__()
        self.time_decay, self.time_first = nn.Parameter(torch.randn(width)), nn.Parameter(torch.randn(width))
        self.mix_k, self.mix_v, self.mix_r = (nn.Parameter(torch.rand(1, 1, width)) for _ in range(3))
        self.key, self.value, self.receptance, self.output = (nn.Linear(width, width, bias=False) for _ in range(4))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shifted = F.pad(x, (0, 0, 1, -1))
        k = self.key(x * self.mix_k + shifted * (1 - self.mix_k))
        v = self.value(x * self.mix_v + shifted * (1 - self.mix_v))
        r = torch.sigmoid(self.receptance(x * self.mix_r + shifted * (1 - self.mix_r)))
        w, u = -torch.exp(self.time_decay), self.time_first
        num, den = torch.zeros_like(k[:, 0]), torch.zeros_like(k[:, 0])
        largest = torch.full_like(k[:, 0], -1e38)
        outputs = []
        for t in range(x.shape[1]):
            kt, vt = k[:, t], v[:, t]
            ww = u + kt
            top = torch.maximum(largest, ww)
            e1, e2 = torch.exp(largest - top), torch.exp(ww - top)
            outputs.append((e1 * num + e2 * vt) / (e1 * den + e2))
            ww = largest + w
            top = torch.maximum(ww, kt)
            e1, e2 = torch.exp(ww - top), torch.exp(kt - top)
            num, den, largest = e1 * num + e2 * vt, e1 * den + e2, top
        return self.output(r * torch.stack(outputs, 1))


class ChannelMix(nn.Module):
    def __init__(self, width: int = 32):
        super().__init__()
        self.mix_k, self.mix_r = nn.Parameter(torch.rand(1, 1, width)), nn.Parameter(torch.rand(1, 1, width))
        self.key, self.receptance = nn.Linear(width, 4 * width, bias=False), nn.Linear(width, width, bias=False)
        self.value = nn.Linear(4 * width, width, bias=False)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        shifted = F.pad(x, (0, 0, 1, -1))
        k = torch.square(torch.relu(self.key(x * self.mix_k + shifted * (1 - self.mix_k))))
        return torch.sigmoid(self.receptance(x * self.mix_r + shifted * (1 - self.mix_r))) * self.value(k)


# -- the cases -----------------------------------------------------------------------------------


def _randn(*shape: int, dtype: torch.dtype = torch.float32) -> Callable[[], tuple[torch.Tensor, ...]]:
    def make() -> tuple[torch.Tensor, ...]:
        return (torch.randn(*shape, generator=torch.Generator().manual_seed(0)).to(dtype),)

    return make


def _half(module: Callable[[], nn.Module], dtype: torch.dtype = torch.float16) -> Callable[[], nn.Module]:
    return lambda: module().to(dtype)


_BATCH = {0: "batch"}

SIGNAL_CASES: list[SignalCase] = [
    SignalCase("log_mel_64", "audio", lambda: LogMel(64, 16, 16), _randn(2, 400)),
    SignalCase("log_mel_400", "audio", lambda: LogMel(400, 160, 40), _randn(1, 4000)),
    SignalCase("log_mel_db_256", "audio", lambda: LogMel(256, 64, 32, decibels=True), _randn(2, 2048), ({0: "batch"},)),
    SignalCase("mel_magnitude_128", "audio", lambda: LogMel(128, 32, 20, power=1.0), _randn(2, 1024)),
    SignalCase("mfcc", "audio", MFCC, _randn(2, 1024)),
    SignalCase("pre_emphasis_frames", "audio", PreEmphasisFrames, _randn(2, 1024), ({0: "batch"},)),
    SignalCase("spectral_gate", "audio", SpectralGate, _randn(2, 512)),
    SignalCase("rfft_filter_64", "spectral", lambda: RfftFilter(64), _randn(4, 64), ({0: "batch"},)),
    SignalCase("rfft_filter_100", "spectral", lambda: RfftFilter(100), _randn(4, 100)),
    SignalCase("fft_damping", "spectral", FFTDamping, _randn(2, 3, 32)),
    SignalCase("fft2_magnitude", "spectral", FFT2Magnitude, _randn(2, 16, 16)),
    SignalCase("hilbert_envelope", "spectral", HilbertEnvelope, _randn(3, 64)),
    SignalCase("fnet_mixing", "spectral", FNetMixing, _randn(2, 8, 32)),
    SignalCase("half_mlp", "half", _half(HalfMLP), _randn(2, 5, 64, dtype=torch.float16)),
    SignalCase("half_conv", "half", _half(HalfConvNet), _randn(2, 3, 16, 16, dtype=torch.float16)),
    SignalCase("half_attention", "half", _half(HalfAttention), _randn(2, 8, 64, dtype=torch.float16)),
    SignalCase("half_embedding_head", "half", _half(HalfEmbeddingHead), lambda: (torch.randint(0, 100, (2, 8), generator=torch.Generator().manual_seed(0)),)),
    SignalCase("bfloat16_mlp", "half", _half(HalfMLP, torch.bfloat16), _randn(2, 5, 64, dtype=torch.bfloat16)),
    SignalCase("mixed_precision_branch", "half", MixedPrecisionBranch, _randn(2, 6, 32), (_BATCH,)),
    SignalCase("complex_rotary", "complex", ComplexRotary, _randn(2, 8, 4, 16)),
    SignalCase("complex_arithmetic", "complex", ComplexArithmetic, _randn(3, 4, 2)),
    SignalCase("complex_linear", "complex", ComplexLinear, _randn(4, 16, 2)),
    SignalCase("gcn", "graph", GCNLayer, _graph),
    SignalCase("gat", "graph", GATLayer, _graph),
    SignalCase("mean_aggregation", "graph", MeanAggregation, _graph),
    SignalCase("segment_pooling", "graph", SegmentPooling, lambda: (torch.randn(10, 8, generator=torch.Generator().manual_seed(0)), torch.tensor([0, 0, 0, 1, 1, 2, 2, 2, 2, 1]))),
    SignalCase("espcn", "pixel", ESPCN, _randn(1, 1, 12, 12)),
    SignalCase("espcn_dynamic", "pixel", ESPCN, _randn(1, 1, 12, 12), ({0: "batch", 2: "height", 3: "width"},)),
    SignalCase("pixel_round_trip", "pixel", PixelRoundTrip, _randn(1, 8, 5, 6)),
    SignalCase("space_to_depth_stem", "pixel", SpaceToDepthStem, _randn(2, 3, 16, 16)),
    SignalCase("rwkv_time_mix", "rwkv", TimeMix, _randn(2, 4, 32)),
    SignalCase("rwkv_time_mix_8", "rwkv", TimeMix, _randn(1, 8, 32)),
    SignalCase("rwkv_channel_mix", "rwkv", ChannelMix, _randn(2, 6, 32), (_BATCH,)),
]
