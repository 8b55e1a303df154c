"""The tables behind the static screen: which names compute, which only allocate or describe.

Names are fully qualified as the file model resolves them (``torch.nn.functional.gelu``,
``builtins.open``). Tensor methods are classified by name alone, since types are unknown.
"""

from __future__ import annotations

# Builtins that the file model resolves to ``builtins.<name>`` (unless the file rebinds them).
BUILTINS = frozenset(
    """
    exec eval compile __import__ open getattr setattr delattr vars object type
    sum max min abs pow divmod round
    """.split()
)
# Builtins that compute on tensors handed to them (``sum([a, b])`` adds them with torch).
ARITH_BUILTINS = frozenset(
    {
        "builtins.sum",
        "builtins.max",
        "builtins.min",
        "builtins.abs",
        "builtins.pow",
        "builtins.divmod",
        "builtins.round",
    }
)
# The operator module's functions: ``operator.matmul(x, w)`` is ``x @ w``.
OPERATOR_COMPUTE = frozenset(
    """
    add sub mul matmul truediv floordiv mod pow neg pos abs lt le gt ge eq ne and_ or_ xor invert
    lshift rshift iadd isub imul imatmul itruediv ifloordiv imod ipow iand ior ixor ilshift irshift
    """.split()
)
# Arithmetic dunders: ``type(x).__matmul__(x, w)`` is ``x @ w`` whatever the receiver looks like.
ARITH_DUNDERS = frozenset(f"__{name.rstrip('_')}__" for name in OPERATOR_COMPUTE) | frozenset(
    {"__radd__", "__rsub__", "__rmul__", "__rmatmul__", "__rtruediv__", "__rpow__", "__getitem__", "__setitem__"}
)

KERNEL_DECORATORS = frozenset({"triton.jit", "triton.autotune", "triton.heuristics", "numba.cuda.jit"})
EXTENSION_BUILDERS = frozenset(
    {
        "torch.utils.cpp_extension.load_inline",
        "torch.utils.cpp_extension.load",
        "cupy.RawKernel",
        "cupy.RawModule",
        "cupy.ElementwiseKernel",
        "cupy.ReductionKernel",
    }
)
# torch.ops namespaces of PyTorch itself; any other is a custom op (a kernel where the file builds one).
TORCH_OP_NAMESPACES = frozenset({"aten", "prims", "quantized", "_quantized", "c10d", "_c10d_functional", "torchvision"})

NN_MODULE_NAMES = frozenset({"torch.nn.Module", "torch.nn.modules.module.Module"})
# Bases of a custom autograd op: ``Cls.apply(...)`` runs ``Cls.forward`` (and ``setup_context``).
AUTOGRAD_FUNCTION_NAMES = frozenset(
    {"torch.autograd.Function", "torch.autograd.function.Function", "torch.autograd.function.InplaceFunction"}
)
# Methods of an autograd Function that only a backward pass runs; the worker evaluates under
# ``torch.no_grad()``, and starting a backward pass from forward is PyTorch compute in itself.
AUTOGRAD_GRADIENT_METHODS = frozenset({"backward", "vjp", "jvp"})
NN_CONTAINERS = frozenset({"Sequential", "ModuleList", "ModuleDict"})
# torch.nn classes that hold state but compute nothing when called (or cannot be called).
NN_NOT_LAYERS = frozenset({"Module", "Parameter", "Buffer", "ParameterList", "ParameterDict"})
# Calls that return a callable running PyTorch (``self.fn = torch.compile(model)``).
TORCH_CALLABLE_MAKERS = frozenset({"torch.compile", "torch.jit", "torch._dynamo", "torch._inductor", "torch.fx"})

# torch.* functions that allocate, describe or configure without computing on data.
TORCH_ALLOWED = frozenset(
    """
    empty empty_like empty_strided zeros zeros_like ones ones_like full full_like tensor device Size
    finfo iinfo is_tensor is_floating_point numel no_grad inference_mode is_grad_enabled
    get_default_dtype promote_types result_type broadcast_shapes Tensor dtype
    """.split()
)
TORCH_NAMESPACES = frozenset(
    """
    torch torch.nn torch.nn.functional torch.linalg torch.fft torch.special torch.ops torch.nn.init
    torch.utils torch.utils.cpp_extension torch.library
    """.split()
)
# Configuration and device queries: neither compute nor hostile (streams are matched first).
TORCH_HARMLESS_PREFIXES = ("torch.cuda", "torch.backends", "torch.utils", "torch.library", "torch.version")
DTYPES = frozenset(
    """
    float float16 float32 float64 bfloat16 half double int int8 int16 int32 int64 uint8 long short
    bool complex64 complex128 float8_e4m3fn float8_e5m2 float8_e4m3fnuz float8_e5m2fnuz
    contiguous_format channels_last strided
    """.split()
)

# Tensor methods that return metadata, not a tensor.
TENSOR_METADATA_METHODS = frozenset(
    """
    size stride numel nelement dim ndimension data_ptr element_size is_contiguous get_device
    storage_offset untyped_storage is_floating_point is_complex
    """.split()
)
# Tensor methods that allocate, view or move a tensor: always allowed on the data path.
TENSOR_ALLOWED_METHODS = TENSOR_METADATA_METHODS | frozenset(
    """
    view view_as reshape reshape_as contiguous t transpose permute unsqueeze squeeze expand
    expand_as flatten unflatten narrow select split chunk unbind movedim as_strided detach to cuda
    new_empty new_zeros new_ones new_full zero_ fill_ requires_grad_
    """.split()
)
# Views that reorder or repeat elements; ``.contiguous()``/``.reshape()`` on one of them is a copy
# that does the work of a layout task.
PERMUTING_VIEWS = frozenset({"t", "transpose", "permute", "movedim", "swapaxes", "swapdims", "expand", "expand_as"})
MATERIALIZING_METHODS = frozenset({"contiguous", "reshape", "reshape_as", "flatten"})
# Host reads of tensor data: the computation then happens in Python or numpy.
TENSOR_HOST_METHODS = frozenset({"item", "tolist", "numpy", "cpu"})
# Method names that compute on a tensor: flagged even where the receiver's type is unknown.
TENSOR_COMPUTE_METHODS = frozenset(
    """
    abs abs_ acos add add_ addcdiv addcmul addmm addmv all amax amin any argmax argmin argsort
    baddbmm bernoulli_ bfloat16 bmm ceil clamp clamp_ clamp_min clamp_max clip clone copy_ cos cosh
    cummax cummin cumprod cumsum deg2rad div div_ dot double eq erf erfinv exp exp_ expm1 exponential_
    float floor fmod frac gather ge gelu gt half index_add index_add_ index_copy index_fill index_put
    index_put_ index_select int isfinite isinf isnan kthvalue le lerp lerp_ log log10 log1p log2 log_softmax
    logcumsumexp logical_and logical_not logical_or logsumexp long lt masked_fill masked_fill_
    masked_scatter masked_select matmul max maximum mean median min minimum mm mul mul_ mv nan_to_num ne
    neg nonzero norm normal_ outer pow pow_ prod rad2deg reciprocal relu relu_ remainder repeat
    repeat_interleave roll round rsqrt scatter scatter_ scatter_add scatter_add_ scatter_reduce sigmoid
    sign sin sinh softmax sort sqrt square std sub sub_ sum tan tanh topk tril triu trunc type uniform_
    unique var where flip fliplr flipud cross einsum tensordot kron diag diagonal trace addbmm
    """.split()
)

# Whole-file rules: (name prefix, reason). ``name*`` matches any name starting with ``name``.
NAME_RULES: tuple[tuple[str, str], ...] = (
    ("threading", "static_thread_or_process"),
    ("_thread", "static_thread_or_process"),
    ("multiprocessing", "static_thread_or_process"),
    ("torch.multiprocessing", "static_thread_or_process"),
    ("concurrent", "static_thread_or_process"),
    ("subprocess", "static_thread_or_process"),
    ("asyncio", "static_thread_or_process"),
    ("os.fork*", "static_thread_or_process"),
    ("os.system", "static_thread_or_process"),
    ("os.popen", "static_thread_or_process"),
    ("os.spawn*", "static_thread_or_process"),
    ("os.posix_spawn*", "static_thread_or_process"),
    ("os.exec*", "static_thread_or_process"),
    ("pty.spawn", "static_thread_or_process"),
    ("pty.fork", "static_thread_or_process"),
    # Standard-library classes that run their work on a thread of their own once started.
    ("logging.handlers.QueueListener", "static_thread_or_process"),
    ("socketserver.Threading*", "static_thread_or_process"),
    ("http.server.ThreadingHTTPServer", "static_thread_or_process"),
    ("runner", "static_harness_import"),
    ("kbench", "static_harness_import"),
    ("kbench_task", "static_harness_import"),
    ("kbench_candidate", "static_harness_import"),
    ("tests", "static_harness_import"),
    ("__main__", "static_harness_import"),
    ("gc.get_objects", "static_introspection"),
    ("gc.get_referrers", "static_introspection"),
    ("gc.get_referents", "static_introspection"),
    ("sys._getframe", "static_introspection"),
    ("sys._current_frames", "static_introspection"),
    ("sys.modules", "static_introspection"),
    ("sys.settrace", "static_introspection"),
    ("sys.setprofile", "static_introspection"),
    # Asking whether a profiler or tracer watches: the kernel census profiles one checked call, and a
    # candidate that behaves only while watched has no other use for the answer.
    ("sys.gettrace", "static_introspection"),
    ("sys.getprofile", "static_introspection"),
    ("sys.monitoring", "static_introspection"),
    ("torch.profiler", "static_introspection"),
    ("torch.autograd.profiler", "static_introspection"),
    ("torch.autograd.profiler_util", "static_introspection"),
    ("torch.autograd._profiler_enabled", "static_introspection"),
    ("torch._C._autograd", "static_introspection"),
    ("torch._C._profiler", "static_introspection"),
    ("torch.cuda.profiler", "static_introspection"),
    ("torch._C._kineto_step", "static_introspection"),
    ("inspect.stack", "static_introspection"),
    ("inspect.currentframe", "static_introspection"),
    ("inspect.getouterframes", "static_introspection"),
    ("inspect.trace", "static_introspection"),
    ("ctypes", "static_introspection"),
    ("builtins.exec", "static_dynamic_code"),
    ("builtins.eval", "static_dynamic_code"),
    ("builtins.compile", "static_dynamic_code"),
    ("builtins.__import__", "static_dynamic_code"),
    ("importlib.import_module", "static_dynamic_code"),
    ("importlib.__import__", "static_dynamic_code"),
    ("importlib.reload", "static_dynamic_code"),
    ("importlib.util", "static_dynamic_code"),
    ("runpy", "static_dynamic_code"),
    ("marshal.loads", "static_dynamic_code"),
    ("pickle.loads", "static_dynamic_code"),
    ("types.FunctionType", "static_dynamic_code"),
    ("types.CodeType", "static_dynamic_code"),
    ("builtins.open", "static_file_or_env"),
    ("io.open", "static_file_or_env"),
    ("os.environ", "static_file_or_env"),
    ("os.getenv", "static_file_or_env"),
    ("os.putenv", "static_file_or_env"),
    ("os.listdir", "static_file_or_env"),
    ("os.scandir", "static_file_or_env"),
    ("os.walk", "static_file_or_env"),
    ("os.open", "static_file_or_env"),
    ("os.path", "static_file_or_env"),
    ("pathlib", "static_file_or_env"),
    ("glob", "static_file_or_env"),
    ("shutil", "static_file_or_env"),
    ("torch.cuda.Stream", "static_stream"),
    ("torch.cuda.stream", "static_stream"),
    ("torch.cuda.streams", "static_stream"),
    ("torch.cuda.ExternalStream", "static_stream"),
    ("torch.cuda.set_stream", "static_stream"),
    ("torch.cuda.Event", "static_stream"),
    ("torch.cuda.graph", "static_stream"),
    ("torch.cuda.graphs", "static_stream"),
    ("torch.cuda.CUDAGraph", "static_stream"),
    ("torch.cuda.make_graphed_callables", "static_stream"),
    ("torch.Stream", "static_stream"),
    ("torch.Event", "static_stream"),
    ("unittest.mock", "static_monkey_patch"),
    ("mock", "static_monkey_patch"),
)
# Attribute names that reach frames, globals or the class tree, whatever the object.
INTROSPECTION_ATTRS = frozenset(
    """
    f_back f_globals f_locals f_builtins tb_frame gi_frame cr_frame __globals__ __subclasses__
    """.split()
)
STREAM_METHODS = frozenset({"record_stream", "wait_stream", "wait_event", "record_event"})
HOOK_REGISTRARS = frozenset({"register_forward_hook", "register_forward_pre_hook", "register_module_forward_hook"})
# Modules whose attributes a candidate must never rebind (the harness, the timer, torch, triton).
PATCH_ROOTS = frozenset(
    """
    torch triton time builtins sys gc os math numpy random inspect importlib runner kbench
    kbench_task kbench_candidate
    """.split()
)
# Attributes of a tensor that are tensors themselves.
TENSOR_ATTRS = frozenset({"T", "mT", "H", "mH", "data", "real", "imag", "grad"})
# torch.* callables that return something other than a tensor.
TORCH_NON_TENSOR = frozenset(
    """
    finfo iinfo Size device is_tensor is_floating_point numel no_grad inference_mode is_grad_enabled
    get_default_dtype promote_types result_type broadcast_shapes
    """.split()
)
