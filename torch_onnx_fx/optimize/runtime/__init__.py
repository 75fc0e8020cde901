"""ONNX Runtime's CPU kernels: nodes the provider has no kernel for, or whose types are outside
the operator's schema, computed in a wider type exactly (``kernel_gaps``); float64 operators it
has only for float32 rewritten in float64 operators (``float64_kernels``); the provider's kernel
list, kept on disk per installed build (``kernel_table``)."""
