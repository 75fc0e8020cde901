"""Doors from other libraries' export entry points into torch_onnx_fx.

Each module here is optional: it imports its library when imported itself, and nothing in the
package imports it. ``torch_onnx_fx.integrations.transformers`` is a backend for transformers'
exporters (``transformers.exporters``); ``torch_onnx_fx.integrations.genai`` writes a folder
ONNX Runtime GenAI loads.
"""
