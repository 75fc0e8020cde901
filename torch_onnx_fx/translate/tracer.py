"""Record ONNX Script calls straight into an onnx-ir graph.

torchlib's translations are written against onnxscript's evaluator protocol: calling ``op.Add``
or a scripted function asks the *default evaluator* to run it. :class:`GraphTracer` is such an
evaluator that, instead of computing, appends a node to an ``ir.Graph`` and returns its outputs as
``ir.Value`` objects. It also does what the translations expect from a builder:

* Python scalars and lists given to tensor inputs become ``Constant`` nodes whose dtype is taken
  from the other inputs sharing the same type constraint (``op.Add(x, 1)`` with ``x: float16``
  gives a float16 constant). Constants are cached, so ``1`` is one node however often it is used.
* Lists that mix symbolic ints (``ir.Value``) with ints become one 1-D INT64 tensor.
* Scripted (non trace-only) functions become calls to ONNX functions that are inlined later.
* Every node gets ONNX's own per-node type and shape inference, because trace-only translations
  branch on ``x.dtype`` and ``x.shape`` of the values they create.

The tracer knows nothing about FX: :mod:`torch_onnx_fx.translate.walk` drives it.
"""

from __future__ import annotations

import contextlib
import copy
from typing import Any, Iterator, Mapping, Sequence

import numpy as np
import onnx
import onnx_ir as ir
from onnxscript import evaluator as onnxscript_evaluator
from onnxscript import onnx_opset
from onnxscript import values as onnxscript_values

from torch_onnx_fx.translate import trace_folding
from torch_onnx_fx.translate.literals import TracingError, constant_literal, double_number, python_dtype
from torch_onnx_fx.translate.metadata import MODULE_STACK_KEY
from torch_onnx_fx.translate.node_inference import InferenceCache, infer_node
from torch_onnx_fx.translate.opset_adapters import OPSET_ADAPTERS

__all__ = ["GraphTracer", "TracingError"]

def _single_tensor_type(param: ir.schemas.Parameter) -> ir.DataType | None:
    dtypes = {getattr(t, "dtype", None) for t in param.type_constraint.allowed_types}
    dtypes.discard(None)
    return dtypes.pop() if len(dtypes) == 1 else None


def _accepts_sequence(param: ir.schemas.Parameter) -> bool:
    return any(isinstance(t, ir.SequenceType) for t in param.type_constraint.allowed_types)


def _one_element_vector(scalar: ir.Value) -> ir.Value | None:
    """The 1-element vector a scalar was squeezed from (``sym_size`` is ``Squeeze(Shape(x)[d])``),
    so rebuilding a shape from sizes reuses it instead of adding a Reshape."""
    producer = scalar.producer()
    if producer is None or producer.op_type != "Squeeze" or producer.domain not in ("", "ai.onnx"):
        return None
    source = producer.inputs[0]
    if source is None or source.shape is None or tuple(source.shape) != (1,):
        return None
    return source


def _python_typed(param: ir.schemas.Parameter) -> bool:
    """A parameter annotated with a plain Python type (``Optional[int]``) rather than a tensor
    type: onnxscript gives it a constraint admitting every kind of value."""
    kinds = {type(t) for t in param.type_constraint.allowed_types}
    return ir.SequenceType in kinds and ir.OptionalType in kinds


def _value_dtype(value: Any) -> ir.DataType | None:
    if isinstance(value, ir.Value):
        return value.dtype
    if isinstance(value, (list, tuple)):
        for item in value:
            if isinstance(item, ir.Value) and item.dtype is not None:
                return item.dtype
    return None


# onnxscript makes a new Op object, and so derives its signature from the ONNX schema again,
# every time a translation names an op (``op.Add``): a third of translation time on a Llama.
# Standard ONNX ops have one schema per (name, opset); other domains (users' custom opsets) are
# not cached.
_SIGNATURES: dict[tuple[str, int | None], ir.schemas.OpSignature | None] = {}


def _op_signature(op: onnxscript_values.Op) -> ir.schemas.OpSignature | None:
    if op.domain not in ("", "ai.onnx"):
        return op.op_signature
    key = (op.name, op.opset.version)
    if key not in _SIGNATURES:
        _SIGNATURES[key] = op.op_signature
    return _SIGNATURES[key]


class GraphTracer:
    """An onnxscript evaluator that appends nodes to ``graph`` instead of computing."""

    def __init__(self, graph: ir.Graph, opset_version: int, *, parent: GraphTracer | None = None):
        self.graph = graph
        self.opset_version = opset_version
        self.parent = parent
        if parent is None:
            self.opset_imports: dict[str, int] = {"": opset_version}
            # Scripted functions called by translations; inlined after translation.
            self.functions: dict[ir.OperatorIdentifier, ir.Function] = {}
            self._counter = [0]
            self._function_cache: dict[int, ir.Function] = {}
            self._inferred: InferenceCache = {}
        else:
            # Subgraphs share the model-wide state: one name space, one set of imports.
            self.opset_imports = parent.opset_imports
            self.functions = parent.functions
            self._counter = parent._counter
            self._function_cache = parent._function_cache
            self._inferred = parent._inferred
        # Stamped on every node created while it is set (the FX node being translated).
        self.node_metadata: dict[str, str] = {}
        # Kept in ``node.meta`` (see translate/metadata.MODULE_STACK_KEY) beside the saved metadata.
        self.module_stack: tuple[tuple[str, str], ...] = ()
        self.name_prefix = "val"
        self._constants: dict[tuple[Any, ...], ir.Value] = {}

    def child(self, graph: ir.Graph) -> GraphTracer:
        """A tracer for a subgraph (If branch, Loop body) that can see this graph's values."""
        return GraphTracer(graph, self.opset_version, parent=self)

    # -- naming and node creation ---------------------------------------------------------

    def fresh_name(self, hint: str | None = None) -> str:
        self._counter[0] += 1
        return f"{hint or self.name_prefix}_{self._counter[0]}"

    def _cached_constant(self, key: tuple[Any, ...]) -> ir.Value | None:
        tracer: GraphTracer | None = self
        while tracer is not None:
            found = tracer._constants.get(key)
            if found is not None:
                return found
            tracer = tracer.parent
        return None

    def append(self, node: ir.Node) -> None:
        for output in node.outputs:
            if output.name is None:
                output.name = self.fresh_name()
        if node.name is None:
            node.name = f"node_{node.op_type}_{self._counter[0]}"
        node.metadata_props.update(self.node_metadata)
        node.meta[MODULE_STACK_KEY] = self.module_stack
        self.graph.append(node)

    @contextlib.contextmanager
    def active(self) -> Iterator[GraphTracer]:
        """Make this tracer onnxscript's default evaluator for the duration."""
        # Trace-only translations also write ``a + b`` on ir.Values; route those through the
        # standard opset so they are recorded like any other op call.
        previous = ir.set_value_magic_handler(onnx_opset.opset18)
        try:
            with onnxscript_evaluator.default_as(self):
                yield self
        finally:
            ir.set_value_magic_handler(previous)

    # -- constants ------------------------------------------------------------------------

    def constant(self, value: Any, dtype: ir.DataType | None = None) -> ir.Value:
        """A ``Constant`` node for a Python scalar, list, numpy array or tensor (cached)."""
        if isinstance(value, ir.Value):
            return value
        key: tuple[Any, ...] | None = None
        if isinstance(value, (bool, int, float, str)) or (
            isinstance(value, (list, tuple)) and all(isinstance(v, (bool, int, float)) for v in value)
        ):
            dtype = dtype or python_dtype(value)
            canonical = tuple(value) if isinstance(value, (list, tuple)) else value
            key = (type(value) is list or type(value) is tuple, repr(canonical), dtype)
            cached = self._cached_constant(key)
            if cached is not None:
                return cached
            if dtype == ir.DataType.STRING:
                tensor = ir.StringTensor(np.array(value, dtype=object).reshape(-1 if isinstance(value, (list, tuple)) else ()))
            else:
                # ir.Tensor, not ir.tensor(): the latter's runtime Protocol checks cost more than
                # the rest of making a constant (Python 3.11 re-derives a Protocol's members
                # on every isinstance).
                tensor = ir.Tensor(np.array(value, dtype=dtype.numpy()))
        elif isinstance(value, np.ndarray) or isinstance(value, np.generic):
            array = np.asarray(value)
            if dtype is not None:
                array = array.astype(dtype.numpy())
            tensor = ir.Tensor(array)
        elif isinstance(value, ir.TensorProtocol):
            tensor = value
        else:
            raise TracingError(f"Cannot make an ONNX constant from {value!r} ({type(value).__name__}).")
        output = ir.Value(name=self.fresh_name("const"))
        node = ir.Node("", "Constant", [], [ir.AttrTensor("value", tensor)], outputs=[output])
        output.const_value = tensor
        output.type = ir.TensorType(tensor.dtype)
        output.shape = ir.Shape(tensor.shape)
        self.append(node)
        if key is not None:
            self._constants[key] = output
        return output

    def int_vector(self, items: Sequence[Any]) -> ir.Value:
        """One 1-D INT64 tensor from ints and scalar/1-element ``ir.Value`` items (symbolic ints)."""
        if all(not isinstance(i, ir.Value) for i in items):
            return self.constant([int(i) for i in items], ir.DataType.INT64)
        shape_1d = self.constant([1], ir.DataType.INT64)
        pieces = []
        for item in items:
            if isinstance(item, ir.Value):
                if item.dtype not in (None, ir.DataType.INT64):
                    item = self.op("Cast", [item], {"to": ir.DataType.INT64})
                pieces.append(_one_element_vector(item) or self.op("Reshape", [item, shape_1d]))
            else:
                pieces.append(self.constant([int(item)], ir.DataType.INT64))
        return self.op("Concat", pieces, {"axis": 0})

    # -- recording ops ----------------------------------------------------------------------

    def op(
        self,
        op_type: str,
        inputs: Sequence[ir.Value | None],
        attributes: Mapping[str, Any] | None = None,
        *,
        domain: str = "",
        num_outputs: int = 1,
        version: int | None = None,
        infer: bool = True,
    ) -> Any:
        """Append one node; return its output (or a tuple when ``num_outputs > 1``).

        Data movement on small constants is computed instead (:mod:`torch_onnx_fx.translate.trace_folding`);
        ``infer=False`` always records the node (an Identity that must be a value of its own).
        """
        if infer and num_outputs == 1 and version is None and domain in ("", "ai.onnx"):
            if op_type == "Constant" and not inputs:
                literal = constant_literal(attributes or {})
                if literal is not None:
                    return self.constant(*literal)
            folded = trace_folding.fold(op_type, inputs, attributes or {})
            if folded is not None:
                return self.constant(folded)
        attrs = [
            a if isinstance(a, ir.Attr) else ir.convenience.convert_attribute(k, a)
            for k, a in (attributes or {}).items()
            if a is not None
        ]
        node = ir.Node(domain, op_type, list(inputs), attrs, num_outputs=num_outputs, version=version)
        self.append(node)
        if infer and domain in ("", "ai.onnx"):
            self.infer(node)
        return node.outputs[0] if num_outputs == 1 else tuple(node.outputs)

    def identity(self, value: ir.Value) -> ir.Value:
        """An Identity of ``value``: a value of its own (to name, or to type as its FX node says)
        with the type and shape of ``value`` (copies: onnx-ir retypes a type object in place)."""
        copied = self.op("Identity", [value], infer=False)
        if value.type is not None:
            copied.type = copy.copy(value.type)
        if value.shape is not None:
            copied.shape = ir.Shape(value.shape)
        return copied

    def infer(self, node: ir.Node) -> None:
        """ONNX type and shape inference for one node; best effort, never fatal."""
        infer_node(node, self.opset_version, self._inferred)

    # -- binding arguments --------------------------------------------------------------------

    @staticmethod
    def bind(
        signature: ir.schemas.OpSignature,
        args: Sequence[Any],
        kwargs: Mapping[str, Any],
        *,
        positional_inputs_only: bool,
    ) -> tuple[list[tuple[ir.schemas.Parameter, Any]], dict[str, tuple[ir.schemas.AttributeParameter, Any]]]:
        """Pair arguments with parameters.

        ONNX ops take inputs positionally and attributes by keyword; onnxscript functions take
        both in declaration order. Unknown keywords are dropped for functions (ATen schemas carry
        arguments such as ``layout`` that the translations do not declare) and rejected for ops.
        """
        params = list(signature.inputs if positional_inputs_only else signature.params)
        inputs: list[tuple[ir.schemas.Parameter, Any]] = []
        attrs: dict[str, tuple[ir.schemas.AttributeParameter, Any]] = {}
        position = 0
        for param in params:
            if position >= len(args):
                break
            if isinstance(param, ir.schemas.Parameter) and param.variadic:
                for arg in args[position:]:
                    inputs.append((param, arg))
                position = len(args)
                break
            if isinstance(param, ir.schemas.Parameter):
                inputs.append((param, args[position]))
            else:
                attrs[param.name] = (param, args[position])
            position += 1
        if position < len(args):
            raise TracingError(
                f"{signature.name} takes {len(params)} positional arguments, got {len(args)}."
            )
        for name, value in kwargs.items():
            param = signature.get(name)
            if param is None:
                if positional_inputs_only:
                    raise TracingError(f"{signature.name} has no attribute or input {name!r}.")
                continue
            if isinstance(param, ir.schemas.Parameter):
                inputs.append((param, value))
            else:
                attrs[name] = (param, value)
        # Keep declaration order so the node's inputs line up with the schema.
        order = {p.name: i for i, p in enumerate(signature.params)}
        inputs.sort(key=lambda pair: order[pair[0].name])
        return inputs, attrs

    def _type_binding(self, inputs: Sequence[tuple[ir.schemas.Parameter, Any]]) -> dict[str, ir.DataType]:
        binding: dict[str, ir.DataType] = {}
        for param, value in inputs:
            dtype = _value_dtype(value)
            if dtype is not None:
                binding.setdefault(param.type_constraint.name, dtype)
        return binding

    def to_input(self, param: ir.schemas.Parameter, value: Any, binding: Mapping[str, ir.DataType], *, keep_sequences: bool) -> Any:
        """Make ``value`` acceptable as the ONNX input ``param``."""
        if value is None or isinstance(value, ir.Value):
            return value
        dtype = binding.get(param.type_constraint.name) or _single_tensor_type(param)
        if isinstance(value, (list, tuple)):
            if any(isinstance(v, ir.Value) for v in value):
                if _accepts_sequence(param):
                    items = [self.to_input(param, v, binding, keep_sequences=True) for v in value]
                    if keep_sequences:
                        return items
                    return self.op("SequenceConstruct", items)
                vector = self.int_vector(value)
                if dtype is not None and dtype != ir.DataType.INT64:
                    vector = self.op("Cast", [vector], {"to": dtype})
                return vector
            if _accepts_sequence(param) and not keep_sequences:
                items = [self.constant(v, dtype) for v in value]
                return self.op("SequenceConstruct", items)
            return self.constant(list(value), dtype or python_dtype(list(value)))
        if isinstance(value, (bool, int, float)):
            if dtype is None:
                dtype = python_dtype(value)
            return self.constant(value, dtype)
        if isinstance(value, (np.ndarray, np.generic, ir.TensorProtocol, str)):
            return self.constant(value, dtype if not isinstance(value, ir.TensorProtocol) else None)
        raise TracingError(f"Cannot pass {value!r} ({type(value).__name__}) as input {param.name!r}.")

    @staticmethod
    def to_attribute(param: ir.schemas.AttributeParameter, value: Any) -> ir.Attr | None:
        if value is None:
            return None
        if isinstance(value, ir.Attr):
            return value
        if isinstance(value, onnxscript_values.OnnxClosure):
            raise TracingError(f"Graph attribute {param.name!r} from a closure is not supported.")
        attr_type = param.type
        if attr_type == ir.AttributeType.FLOAT and isinstance(value, (int, bool)):
            value = float(value)
        elif attr_type == ir.AttributeType.INT and isinstance(value, (float, bool)) and float(value).is_integer():
            value = int(value)
        elif attr_type == ir.AttributeType.INTS and isinstance(value, (list, tuple)):
            value = [int(v) for v in value]
        elif attr_type == ir.AttributeType.FLOATS and isinstance(value, (list, tuple)):
            value = [float(v) for v in value]
        elif attr_type == ir.AttributeType.TENSOR and isinstance(value, onnx.TensorProto):
            # onnx.helper.make_tensor(...), as translations written for torch.onnx pass it.
            value = ir.serde.deserialize_tensor(value)
        elif attr_type == ir.AttributeType.TENSOR and not isinstance(value, ir.TensorProtocol):
            value = ir.tensor(np.asarray(value))
        if attr_type == ir.AttributeType.UNDEFINED:
            return ir.convenience.convert_attribute(param.name, value)
        return ir.convenience.convert_attribute(param.name, value, attr_type)

    # -- the onnxscript evaluator protocol -----------------------------------------------------

    def eval_op(self, op: onnxscript_values.Op, args: Sequence[Any], kwargs: Mapping[str, Any]) -> Any:
        number = double_number(op, args, kwargs)
        if number is not None:
            return self.constant(number, ir.DataType.DOUBLE)
        signature = _op_signature(op)
        if signature is None:
            raise TracingError(f"ONNX op {op.name!r} has no schema in domain {op.domain!r}.")
        kwargs = dict(kwargs)
        inputs, attrs = self.bind(signature, args, kwargs, positional_inputs_only=True)
        binding = self._type_binding(inputs)
        values = [self.to_input(p, v, binding, keep_sequences=False) for p, v in inputs]
        # Variadic inputs pass through as individual values.
        flat: list[ir.Value | None] = []
        for value in values:
            if isinstance(value, list):
                flat.extend(value)
            else:
                flat.append(value)
        # onnxscript's eager convention fills every attribute with its default; an ONNX node
        # carries only those that differ (smaller graphs, and what back ends key fusions on).
        attributes = {
            name: attr
            for name, (param, value) in attrs.items()
            if (attr := self.to_attribute(param, value)) is not None and not _is_default(param, attr)
        }
        num_outputs = self._num_outputs(op, signature, flat, attributes)
        flat, attributes = self._adapt_to_opset(op, flat, attributes)
        domain = op.domain
        if domain:
            self.opset_imports.setdefault(domain, op.opset.version or 1)
        return self.op(op.name, flat, attributes, domain=domain, num_outputs=num_outputs)

    def _adapt_to_opset(
        self, op: onnxscript_values.Op, inputs: list[ir.Value | None], attributes: dict[str, ir.Attr]
    ) -> tuple[list[ir.Value | None], dict[str, ir.Attr]]:
        """Rewrite a call written for an older opset whose operator later changed incompatibly.

        torchlib writes against opset 18; graphs are built at the requested opset. Only these
        operators changed meaning since 18, each fixed by an entry in ``opset_adapters.OPSET_ADAPTERS``.
        """
        if op.domain not in ("", "ai.onnx"):
            return inputs, attributes
        written_for = op.opset.version or self.opset_version
        for changed_in, adapter in OPSET_ADAPTERS.get(op.name, ()):
            if written_for < changed_in <= self.opset_version:
                inputs, attributes = adapter(self, inputs, attributes)
        return inputs, attributes

    @staticmethod
    def _num_outputs(
        op: onnxscript_values.Op,
        signature: ir.schemas.OpSignature,
        inputs: Sequence[ir.Value | None],
        attributes: Mapping[str, ir.Attr],
    ) -> int:
        outputs = signature.outputs
        if op.domain == "":
            # Output counts onnxscript's eager convention gives these ops, which translations
            # are written against: inference BatchNormalization has one output, not three.
            if op.name == "BatchNormalization" and not (
                "training_mode" in attributes and attributes["training_mode"].as_int()
            ):
                return 1
            if op.name in ("Loop", "Scan") and "body" in attributes:
                body = attributes["body"].as_graph()
                return len(body.outputs) - (1 if op.name == "Loop" else 0)
        if not outputs or not outputs[-1].variadic:
            return len(outputs)
        if "num_outputs" in attributes:
            return attributes["num_outputs"].as_int()
        if op.name == "Split" and len(inputs) > 1 and inputs[1] is not None:
            split = inputs[1]
            if split.const_value is not None:
                return int(split.const_value.size)
            if split.shape is not None and split.shape.is_static():
                return int(split.shape[0])
        raise TracingError(f"Cannot tell how many outputs {op.name} produces.")

    def eval_function(
        self, function: onnxscript_values.OnnxFunction, args: Sequence[Any], kwargs: Mapping[str, Any]
    ) -> Any:
        """A scripted function becomes a call to an ONNX function, inlined after translation."""
        signature = function.op_signature
        inputs, attrs = self.bind(signature, args, kwargs, positional_inputs_only=False)
        binding = self._type_binding(inputs)
        values = [self.to_input(p, v, binding, keep_sequences=False) for p, v in inputs]
        attributes = {
            name: attr
            for name, (param, value) in attrs.items()
            if (attr := self.to_attribute(param, value)) is not None
        }
        ir_function = self._function_of(function)
        for domain, version in ir_function.opset_imports.items():
            if domain != "":
                self.opset_imports.setdefault(domain, version)
        self.opset_imports.setdefault(ir_function.domain, 1)
        result = self.op(
            ir_function.name,
            values,
            attributes,
            domain=ir_function.domain,
            num_outputs=len(ir_function.outputs),
            infer=False,
        )
        # The outputs have the dtype of the first typed input in most torchlib functions; the
        # caller (translate) sets the exact type from FX metadata where it knows it.
        return result

    def _function_of(self, function: onnxscript_values.OnnxFunction) -> ir.Function:
        cached = self._function_cache.get(id(function))
        if cached is None:
            cached = ir.serde.deserialize_function(function.to_function_proto())
            # torchlib scripts its functions at opset 18; their ops keep that meaning at the
            # model's opset (as for trace-only translations), and inlining needs one version.
            if "" in cached.opset_imports:
                cached.opset_imports[""] = self.opset_version
            self._function_cache[id(function)] = cached
            self.functions[cached.identifier()] = cached
        return cached

    def call(self, function: Any, args: Sequence[Any], kwargs: Mapping[str, Any]) -> Any:
        """Call a translation with Python constants converted as its signature asks."""
        signature = getattr(function, "op_signature", None)
        if isinstance(function, onnxscript_values.OnnxFunction):
            return self.eval_function(function, args, kwargs)
        if signature is None or any(p.variadic for p in signature.inputs):
            return function(*args, **kwargs)
        inputs, attrs = self.bind(signature, args, kwargs, positional_inputs_only=False)
        binding = self._type_binding(inputs)
        # Trace-only translations read Python lists (``len(normalized_shape)``) and mix ints with
        # symbolic values themselves, so only scalars become constants here.
        call_kwargs: dict[str, Any] = {}
        for param, value in inputs:
            if isinstance(value, (bool, int, float)) and not _python_typed(param):
                value = self.to_input(param, value, binding, keep_sequences=True)
            call_kwargs[param.name] = value
        for name, (_, value) in attrs.items():
            call_kwargs[name] = value.value if isinstance(value, ir.Attr) else value
        # A TracedOnnxFunction's own __call__ takes ``self``, which clashes with ATen's ``self``.
        target = function.func if isinstance(function, onnxscript_values.TracedOnnxFunction) else function
        return target(**call_kwargs)


def _is_default(param: ir.schemas.AttributeParameter, attr: ir.Attr) -> bool:
    default = param.default
    if default is None or default.type != attr.type:
        return False
    if attr.type in (ir.AttributeType.GRAPH, ir.AttributeType.GRAPHS, ir.AttributeType.TENSOR, ir.AttributeType.TENSORS):
        return False
    return default.value == attr.value
