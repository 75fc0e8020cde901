"""Translations for complex tensors, on their real view.

A complex tensor of shape ``S`` travels as a real tensor of shape ``S + [2]`` (real, imaginary;
``real_view``). The registry gives a node with a complex input or result only to translations
registered with ``complex=True``; these are they, for the element-wise functions, comparisons
(``elementwise``), conversions, factories and layout operators (``layout``), reductions and
products (``reductions``) torchlib has no complex form of, strided views, indices, masks and
products (``tensors``), and the spectral operators whose results are complex (``spectral``).
"""

from torch_onnx_fx.ops.complex import (  # noqa: F401 - importing registers them
    elementwise,
    layout,
    reductions,
    tensors,
    spectral,
)
