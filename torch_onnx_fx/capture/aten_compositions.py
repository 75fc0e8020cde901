"""ATen's composite functions written out in torch operations, for capture only.

Some of ATen's C++ compositions cannot be captured as they are: ``cov`` checks its degrees of
freedom with ``item()`` of a tensor, ``one_hot`` without ``num_classes`` reads its class count
with ``int()`` of one, and ``instance_norm`` updates running statistics through an alias its
schema does not declare, which torch.export then drops. Each function here is the same sequence
of ATen operators in Python, so eager results are unchanged bit for bit (checked in
``tests/ops/test_normalization.py`` and ``tests/capture/test_aten_compositions.py``); only the
checks that raise on invalid data are left out. :mod:`torch_onnx_fx.capture.library_patches`
installs them while a capture runs. Each takes the original and returns its replacement.
"""

from __future__ import annotations

from typing import Any

import torch

__all__ = ["instance_norm", "cov", "corrcoef", "one_hot"]


def instance_norm(original: Any) -> Any:
    def instance_norm(
        input: torch.Tensor,
        running_mean: torch.Tensor | None = None,
        running_var: torch.Tensor | None = None,
        weight: torch.Tensor | None = None,
        bias: torch.Tensor | None = None,
        use_input_stats: bool = True,
        momentum: float = 0.1,
        eps: float = 1e-5,
    ) -> torch.Tensor:
        # aten::instance_norm updates the running statistics through an alias its schema does
        # not declare, and torch.export keeps the operator whole: the updates vanished (a read of
        # the buffer after the call saw the old values, state_outputs left them out). ATen's own
        # composition, written out, shows them to the capture as the batch norm's and a copy.
        # A half-precision input takes it too: ATen normalizes it as that batch norm, whose
        # rounded statistics the half batch norm translation reproduces (an instance norm
        # operator computed it in float32 throughout, up to 12 ulps from eager).
        updating = running_mean is not None or running_var is not None
        if not use_input_stats or not (updating or input.dtype in (torch.float16, torch.bfloat16)):
            return original(input, running_mean, running_var, weight, bias, use_input_stats, momentum, eps)
        batch, channels = input.shape[0], input.shape[1]

        def repeated(value: torch.Tensor | None) -> torch.Tensor | None:
            return None if value is None else value.repeat(batch)

        stacked_mean, stacked_var = repeated(running_mean), repeated(running_var)
        output = torch.batch_norm(
            input.contiguous().view(1, batch * channels, *input.shape[2:]), repeated(weight), repeated(bias),
            stacked_mean, stacked_var, True, momentum, eps, torch.backends.cudnn.enabled,
        )
        with torch.no_grad():
            for statistic, stacked in ((running_mean, stacked_mean), (running_var, stacked_var)):
                if statistic is not None:
                    statistic.copy_(stacked.view(batch, channels).mean(0))
        return output.view(input.shape)

    return instance_norm


def cov(original: Any) -> Any:
    def cov(input: torch.Tensor, *, correction: int = 1, fweights: torch.Tensor | None = None, aweights: torch.Tensor | None = None) -> torch.Tensor:
        # ATen's order of operations; its checks that weights are not negative and do not sum to
        # zero read the data and are left out (valid inputs give eager's bits).
        observations = input if input.dim() == 2 else input.view(1, -1)
        count = observations.shape[1]
        weights = fweights
        if aweights is not None:
            weights = aweights if weights is None else weights * aweights
        if weights is None:
            total = torch.scalar_tensor(count, dtype=torch.long)
            average = observations.sum(1) / total
            factor = torch.scalar_tensor(count - correction, dtype=torch.long)
        else:
            total = weights.sum()
            average = (observations * weights).sum(1) / total
            if correction == 0:
                factor = total
            elif aweights is None:
                factor = total - correction
            elif fweights is None and count == 1 and correction == 1:
                factor = torch.scalar_tensor(0, dtype=torch.long)
            else:
                factor = total - correction * (weights * aweights).sum() / total
        # ATen warns and divides by zero where the degrees of freedom are not positive.
        factor = torch.where(factor <= 0, torch.zeros_like(factor), factor)
        if count == 1 and (fweights is None) != (aweights is None):
            centered = torch.zeros_like(observations)
            if not centered.is_floating_point() and not centered.is_complex():
                centered = centered.to(torch.float32)
        else:
            centered = observations - average.unsqueeze(1)
        products = torch.mm(centered, (centered if weights is None else centered * weights).t().conj())
        if products.is_complex() and (centered.shape[0] == 1 or centered.shape[1] == 1):
            products = torch.complex(products.real, torch.zeros_like(products.real))
        return torch.true_divide(products, factor).squeeze()

    return cov


def corrcoef(original: Any) -> Any:
    def corrcoef(input: torch.Tensor) -> torch.Tensor:
        covariance = torch.cov(input)
        if covariance.dim() == 0:
            return covariance / covariance
        diagonal = covariance.diagonal()
        deviation = torch.sqrt(diagonal.real if diagonal.is_complex() else diagonal)
        covariance = covariance / deviation.view(-1, 1)
        covariance = covariance / deviation.view(1, -1)
        if covariance.is_complex():
            return torch.complex(covariance.real.clip(-1, 1), covariance.imag.clip(-1, 1))
        return covariance.clip(-1, 1)

    return corrcoef


def one_hot(original: Any) -> Any:
    def one_hot(tensor: torch.Tensor, num_classes: int = -1) -> torch.Tensor:
        if num_classes != -1:
            return original(tensor, num_classes)
        # ATen's composition reads the class count as int(max + 1), which torch.export cannot
        # give a value; kept as the symbol item() returns, it becomes a size the graph computes
        # (ReduceMax + 1), so a batch with a larger class id widens the output as in eager. The
        # comparison with an arange is ATen's own; its checks of negative or empty inputs are left
        # out, as eager raises on those.
        classes = tensor.max().item() + 1
        torch._check(classes >= 1)
        return (tensor.unsqueeze(-1) == torch.arange(classes, dtype=tensor.dtype, device=tensor.device)).to(torch.int64)

    return one_hot
