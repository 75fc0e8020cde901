"""Normalize: the captured program made ready for translation, still as an FX graph.

The second stage of an export. :func:`decompose` decomposes only the operators the translation
table lacks or declines (``decomposition``; ``inplace`` says which in-place nodes need no
re-trace); :func:`normalize` then runs the FX passes, one per module, in the order ``sequence``
gives, each making one of ATen's implicit rules explicit (``promotion`` holds the type promotion
rules that the graph walk applies to Python numbers too).
"""

from torch_onnx_fx.normalize.decomposition import decompose
from torch_onnx_fx.normalize.sequence import normalize

__all__ = ["decompose", "normalize"]
