"""Translate: the normalized FX graph as an ONNX graph.

The third stage of an export. :func:`check_translatable` names every operator without a
translation up front; :func:`translate_program` builds the model (``model``), whose graph the walk
makes, visiting the FX nodes in order (``walk``): look up
each node's translation in the table, choose among the candidates, adapt the call
(``call_adapters``: Python numbers, complex scalars, 0-d inputs given a dim; ``zero_dim``), call
it, bind its result. Translations record their ONNX Script calls into onnx-ir through the
``tracer`` (typed node by node by ``node_inference``, data movement on small constants computed
while recording by ``trace_folding``, calls written for opset 18 adapted by ``opset_adapters``);
those that need more than their arguments get an ``op_context.OpContext``. ``metadata`` puts
PyTorch's metadata keys on the nodes, values and graph.
"""

from torch_onnx_fx.translate.model import check_translatable, translate_program

__all__ = ["check_translatable", "translate_program"]
