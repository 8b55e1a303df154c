"""The static screen: honest candidates pass their policy, hidden PyTorch and hostile code do not.

Each cheat below is a small source whose expected reason is asserted exactly; the honest
candidates are written to look like the cheats (helpers, aliases, ``self.<attr>`` helpers,
allocations, views) so that a screen which flags too much fails here as surely as one that
flags too little.
"""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from runner.configure import ConfigError, compose_config, to_settings
from runner.methods.reference import _SUFFIX as REFERENCE_SUFFIX
from runner.methods.torch_compile import _SUFFIX as COMPILE_SUFFIX
from runner.static_check import FORBIDDEN, REASONS, IntegrityPolicy, screen_candidate
from tests.test_triton_interpreter import TRITON_CANDIDATE

TASK_FILES = sorted((Path(__file__).resolve().parent.parent / "tasks").glob("*/*.py"))

HEADER = """
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _scale_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) * 2.0, mask=mask)


def _launch(x):
    out = torch.empty_like(x)
    n = x.numel()
    _scale_kernel[(triton.cdiv(n, 256),)](x, out, n, BLOCK=256)
    return out
"""


def _screen(body: str, policy: str = "own_kernels"):
    return screen_candidate(HEADER + textwrap.dedent(body), policy)


def _reasons(report) -> set[str]:
    return {f.reason for f in report.findings}


# -- honest candidates ----------------------------------------------------------------------

HONEST = {
    "interpreter_test_candidate": None,
    "helper_with_empty_like": """
        class ModelNew(nn.Module):
            def forward(self, x):
                flat = x.contiguous().view(-1)
                return _launch(flat).view_as(x)
    """,
    "grid_lambda_and_sizes": """
        class ModelNew(nn.Module):
            def forward(self, x):
                out = torch.empty(x.shape, device=x.device, dtype=x.dtype)
                n = x.numel()
                block = min(1024, triton.next_power_of_2(n + 1))
                grid = lambda meta: (triton.cdiv(n, meta["BLOCK"]),)
                if x.dim() == 2 and x.shape[0] > 0 and x is not None:
                    pass
                _scale_kernel[grid](x.to(x.device), out, n, BLOCK=block)
                return out
    """,
    "helper_in_self_attr_and_method": """
        class ModelNew(nn.Module):
            def __init__(self):
                super().__init__()
                self.run = _launch
                self.linear = nn.Linear(4, 4)

            def _go(self, x):
                return self.run(x)

            def forward(self, x):
                w = self.linear.weight.view(-1)
                return self._go(x), _launch(w)
    """,
    "extension_module": """
        from torch.utils.cpp_extension import load_inline

        _ext = load_inline(name="scale", cpp_sources="", cuda_sources="", functions=["scale"])


        class ModelNew(nn.Module):
            def forward(self, x):
                return _ext.scale(x)
    """,
}


@pytest.mark.parametrize("name", HONEST)
def test_honest_candidate_passes_own_kernels(name):
    source = TRITON_CANDIDATE if HONEST[name] is None else HEADER + textwrap.dedent(HONEST[name])
    report = screen_candidate(source, "own_kernels")
    assert report.violation is None, report.findings
    assert report.kernel_launches >= 1 and report.findings == ()


@pytest.mark.parametrize("path", TASK_FILES, ids=[p.stem for p in TASK_FILES])
def test_reference_and_torch_compile_pass_allow_torch_but_not_own_kernels(path):
    source = path.read_text()
    for candidate in (source + REFERENCE_SUFFIX, source + COMPILE_SUFFIX.format(mode="default")):
        assert screen_candidate(candidate, "allow_torch").violation is None
        strict = screen_candidate(candidate, "own_kernels").violation
        assert strict is not None and strict.reason in ("static_torch_compute", "static_torch_layer"), strict


# -- custom autograd ops ----------------------------------------------------------------------

# A torch.autograd.Function whose forward launches the kernel: ``_Scale.apply(x, 2.0)`` runs
# forward with x and 2.0 after ctx. Its backward computes in PyTorch, as backwards usually do,
# and is never run: a screen that reached it would flag ``torch.mul``.
SCALE_FUNCTION = """
    class _Scale(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, scale):
            ctx.save_for_backward(x)
            out = torch.empty_like(x)
            n = x.numel()
            _scale_kernel[(triton.cdiv(n, 256),)](x, out, n, BLOCK=256)
            return out

        @staticmethod
        def backward(ctx, grad_out):
            return torch.mul(grad_out, 2.0), None
"""

AUTOGRAD_HONEST = {
    "apply_from_a_helper": SCALE_FUNCTION
    + """
    def _scale(x):
        return _Scale.apply(x, 2.0)

    class ModelNew(nn.Module):
        def forward(self, x):
            return _scale(x.contiguous())
    """,
    "apply_bound_to_a_name": """
    from torch.autograd import Function as Fn

    class _Scale(Fn):
        @staticmethod
        def forward(ctx, x):
            out = torch.empty_like(x)
            _scale_kernel[(triton.cdiv(x.numel(), 256),)](x, out, x.numel(), BLOCK=256)
            return out

        @staticmethod
        def backward(ctx, grad_out):
            return torch.mul(grad_out, 2.0)

    scale = _Scale.apply

    class ModelNew(nn.Module):
        def forward(self, x):
            return scale(x)
    """,
    "class_bound_to_a_local": SCALE_FUNCTION
    + """
    class ModelNew(nn.Module):
        def forward(self, x):
            op = _Scale
            return op.apply(x, 2.0)
    """,
    "setup_context_and_no_ctx_in_forward": """
    class _Scale(torch.autograd.Function):
        @staticmethod
        def forward(x, blocks):
            out = torch.empty_like(x)
            block = 256 * blocks
            _scale_kernel[(triton.cdiv(x.numel(), block),)](x, out, x.numel(), BLOCK=block)
            return out

        @staticmethod
        def setup_context(ctx, inputs, output):
            ctx.save_for_backward(inputs[0])

    class ModelNew(nn.Module):
        def forward(self, x):
            return _Scale.apply(x, 1)
    """,
}

AUTOGRAD_HIDDEN = {
    "torch_op_in_forward": """
    class _Linear(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, w):
            return torch.matmul(_launch(x), w)

    class ModelNew(nn.Module):
        def forward(self, x, w):
            return _Linear.apply(x, w)
    """,
    "torch_op_behind_an_apply_bound_to_a_name": """
    import torch.autograd

    _AutogradFunction = torch.autograd.Function

    class _Act(_AutogradFunction):
        @staticmethod
        def forward(ctx, x):
            return torch.nn.functional.gelu(_launch(x))

    act = _Act.apply

    class ModelNew(nn.Module):
        def forward(self, x):
            return act(x)
    """,
    "arithmetic_on_an_argument_after_ctx": """
    class _Scale(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x, bias):
            return _launch(x), _launch(bias * 0.5)

    class ModelNew(nn.Module):
        def forward(self, x, bias):
            return _Scale.apply(x, bias)
    """,
    "arithmetic_on_what_apply_returns": SCALE_FUNCTION
    + """
    class ModelNew(nn.Module):
        def forward(self, x):
            return _Scale.apply(x, 2.0) + 1.0
    """,
    "torch_op_in_setup_context": """
    class _Scale(torch.autograd.Function):
        @staticmethod
        def forward(x):
            return _launch(x)

        @staticmethod
        def setup_context(ctx, inputs, output):
            output.copy_(torch.relu(output))

    class ModelNew(nn.Module):
        def forward(self, x):
            return _Scale.apply(x)
    """,
}


@pytest.mark.parametrize("name", AUTOGRAD_HONEST)
def test_autograd_function_forward_is_reached_through_apply(name):
    report = _screen(AUTOGRAD_HONEST[name])
    assert report.violation is None and report.findings == (), report.findings
    assert report.kernel_launches == 1  # the launch inside forward: no other code launches one


@pytest.mark.parametrize("name", AUTOGRAD_HIDDEN)
def test_torch_compute_in_an_autograd_function_is_caught(name):
    report = _screen(AUTOGRAD_HIDDEN[name])
    assert report.violation is not None and report.violation.reason == "static_torch_compute", report.findings
    assert report.kernel_launches >= 1


# -- PyTorch compute hidden from a reader -----------------------------------------------------

HIDDEN_COMPUTE = {
    "two_calls_deep": """
        def _inner(a, b):
            return torch.matmul(a, b)

        def _outer(a, b):
            return _inner(a, b)

        class ModelNew(nn.Module):
            def forward(self, x, y):
                _launch(x)
                return _outer(x, y)
    """,
    "getattr_folded_name": """
        class ModelNew(nn.Module):
            def forward(self, x, y):
                _launch(x)
                return getattr(torch, "mat" + "mul")(x, y)
    """,
    "functional_alias": """
        import torch.nn.functional as Fn

        class ModelNew(nn.Module):
            def forward(self, x):
                return Fn.gelu(_launch(x))
    """,
    "from_import_alias": """
        from torch import matmul as mm

        class ModelNew(nn.Module):
            def forward(self, x, y):
                _launch(x)
                return mm(x, y)
    """,
    "module_dict_lookup": """
        class ModelNew(nn.Module):
            def forward(self, x):
                _launch(x)
                return torch.__dict__["softmax"](x, -1)
    """,
    "vars_with_a_constant_key": """
        class ModelNew(nn.Module):
            def forward(self, a, b):
                return vars(torch)["matmul"](_launch(a), b)
    """,
    "namespace_get_with_a_constant_key": """
        import torch.nn.functional as Fn

        class ModelNew(nn.Module):
            def forward(self, x):
                return Fn.__dict__.get("gelu")(_launch(x))
    """,
    "local_alias_of_function": """
        class ModelNew(nn.Module):
            def forward(self, x):
                op = torch.nn.functional.silu
                _launch(x)
                return op(x)
    """,
    "matmul_operator": """
        class ModelNew(nn.Module):
            def forward(self, x, w):
                _launch(x)
                return x @ w
    """,
    "arithmetic_on_kernel_output": """
        class ModelNew(nn.Module):
            def forward(self, x, y):
                out = _launch(x)
                return out + y
    """,
    "arithmetic_in_helper_on_passed_tensor": """
        def _finish(t, scale):
            return t * scale

        class ModelNew(nn.Module):
            def forward(self, x):
                return _finish(_launch(x), 0.5)
    """,
    "tensor_method": """
        class ModelNew(nn.Module):
            def forward(self, x):
                return _launch(x).sum(dim=-1)
    """,
    "cast_with_to": """
        class ModelNew(nn.Module):
            def forward(self, x):
                return _launch(x.to(torch.bfloat16))
    """,
    "lambda_in_self_attr": """
        class ModelNew(nn.Module):
            def __init__(self):
                super().__init__()
                self.op = lambda a, b: torch.addmm(b, a, a)

            def forward(self, x, y):
                _launch(x)
                return self.op(x, y)
    """,
    "helper_class_instance": """
        class _Impl:
            def __call__(self, t):
                return torch.softmax(t, dim=-1)

        class ModelNew(nn.Module):
            def __init__(self):
                super().__init__()
                self.impl = _Impl()

            def forward(self, x):
                _launch(x)
                return self.impl(x)
    """,
    "inherited_forward": """
        class _Base(nn.Module):
            def forward(self, x):
                return torch.relu(x)

        class ModelNew(_Base):
            def __init__(self):
                super().__init__()
                _launch(torch.zeros(4))
    """,
    "super_forward": """
        class _Base(nn.Module):
            def forward(self, x):
                return torch.tanh(x)

        class ModelNew(_Base):
            def forward(self, x):
                _launch(x)
                return super().forward(x)
    """,
    "nested_function": """
        class ModelNew(nn.Module):
            def forward(self, x):
                def finish(t):
                    return torch.exp(t)
                return finish(_launch(x))
    """,
    "torch_compile_in_forward": """
        class ModelNew(nn.Module):
            def forward(self, x):
                _launch(x)
                return torch.compile(torch.sin)(x)
    """,
    "compiled_in_init": """
        class ModelNew(nn.Module):
            def __init__(self):
                super().__init__()
                self.fast = torch.compile(torch.cos)

            def forward(self, x):
                _launch(x)
                return self.fast(x)
    """,
    "aten_op": """
        class ModelNew(nn.Module):
            def forward(self, x):
                _launch(x)
                return torch.ops.aten.mul.Tensor(x, x)
    """,
    "forward_hook": """
        def _hook(module, inputs, output):
            return torch.neg(output)

        class ModelNew(nn.Module):
            def __init__(self):
                super().__init__()
                self.register_forward_hook(_hook)

            def forward(self, x):
                return _launch(x)
    """,
    "class_attribute_alias": """
        class ModelNew(nn.Module):
            op = torch.mm

            def forward(self, x, y):
                _launch(x)
                return self.op(x, y)
    """,
    "tuple_unpacked_aliases": """
        MM, ACT = torch.mm, torch.relu

        class ModelNew(nn.Module):
            def forward(self, x, y):
                _launch(x)
                return ACT(MM(x, y))
    """,
}

# PyTorch callables kept in a table (a dict, list, tuple, namespace or partial bound to a name)
# and read from forward: with a constant key, by index, with a key known only at run time.
TABLES_OF_TORCH = {
    "dict_at_module_scope": """
        _OPS = {"mm": torch.matmul, "act": torch.relu}

        class ModelNew(nn.Module):
            def forward(self, a, b):
                _launch(a)
                return _OPS["act"](_OPS["mm"](a, b))
    """,
    "tuple_by_index": """
        OPS = (torch.mm,)

        class ModelNew(nn.Module):
            def forward(self, a, b):
                _launch(a)
                return OPS[0](a, b)
    """,
    "list_by_negative_index": """
        _OPS = [torch.mm]

        class ModelNew(nn.Module):
            def forward(self, a, b):
                _launch(a)
                return _OPS[-1](a, b)
    """,
    "dict_call": """
        _OPS = dict(mm=torch.mm)

        class ModelNew(nn.Module):
            def forward(self, a, b):
                _launch(a)
                return _OPS["mm"](a, b)
    """,
    "functional_and_tensor_methods": """
        import torch.nn.functional as Fn

        _OPS = {"act": Fn.gelu, "mm": torch.Tensor.matmul}

        class ModelNew(nn.Module):
            def forward(self, a, b):
                return _OPS["act"](_OPS["mm"](_launch(a), b))
    """,
    "key_known_at_run_time": """
        _OPS = {"relu": torch.relu, "tanh": torch.tanh}

        class ModelNew(nn.Module):
            def __init__(self, act="relu"):
                super().__init__()
                self.act = act

            def forward(self, x):
                op = _OPS[self.act]
                return op(_launch(x))
    """,
    "filled_after_binding": """
        _OPS = {}
        _OPS["mm"] = torch.mm

        class ModelNew(nn.Module):
            def forward(self, a, b):
                _launch(a)
                return _OPS.get("mm")(a, b)
    """,
    "iterated_from_self": """
        class ModelNew(nn.Module):
            def __init__(self):
                super().__init__()
                self.steps = [torch.relu, torch.tanh]

            def forward(self, x):
                out = _launch(x)
                for step in self.steps:
                    out = step(out)
                return out
    """,
    "class_attribute": """
        class ModelNew(nn.Module):
            OPS = {"mm": torch.mm}

            def forward(self, a, b):
                _launch(a)
                return self.OPS["mm"](a, b)
    """,
    "helper_in_table": """
        def _scale(t, u):
            return t * u

        _OPS = {"scale": _scale}

        class ModelNew(nn.Module):
            def forward(self, x, y):
                return _OPS["scale"](_launch(x), y)
    """,
    "partial": """
        import functools

        _MM = functools.partial(torch.mm)

        class ModelNew(nn.Module):
            def forward(self, a, b):
                _launch(a)
                return _MM(a, b)
    """,
}


@pytest.mark.parametrize("name", HIDDEN_COMPUTE)
def test_hidden_torch_compute_is_caught(name):
    report = _screen(HIDDEN_COMPUTE[name])
    assert report.violation is not None and report.violation.reason == "static_torch_compute", report.findings
    assert screen_candidate(HEADER + textwrap.dedent(HIDDEN_COMPUTE[name]), "allow_torch").violation is None


@pytest.mark.parametrize("name", TABLES_OF_TORCH)
def test_torch_functions_in_a_table_are_compute(name):
    report = _screen(TABLES_OF_TORCH[name])
    assert report.violation is not None and report.violation.reason == "static_torch_compute", report.findings
    assert screen_candidate(HEADER + textwrap.dedent(TABLES_OF_TORCH[name]), "allow_torch").violation is None


def test_table_finding_names_the_table_and_the_function():
    exact = _screen(TABLES_OF_TORCH["dict_at_module_scope"])
    assert {f.evidence for f in exact.findings} == {
        "_OPS['act'](_OPS['mm'](a, b)), where _OPS['act'] is torch.relu",
        "_OPS['mm'](a, b), where _OPS['mm'] is torch.matmul",
    }
    any_entry = _screen(TABLES_OF_TORCH["key_known_at_run_time"])
    assert {f.evidence for f in any_entry.findings} == {
        "_OPS[self.act], where _OPS holds torch.relu",
        "_OPS[self.act], where _OPS holds torch.tanh",
    }


def test_tables_of_dtypes_kernels_and_helpers_are_not_compute():
    report = _screen(
        """
        @triton.jit
        def _copy_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
            offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
            tl.store(out_ptr + offsets, tl.load(x_ptr + offsets, mask=offsets < n), mask=offsets < n)

        _DTYPES = {"fp16": torch.float16, "fp32": torch.float32}
        _KERNELS = {"scale": _scale_kernel, "copy": _copy_kernel}
        _BY_DTYPE = {torch.float16: _copy_kernel, torch.float32: _scale_kernel}
        _HELPERS = {"scale": _launch}

        class ModelNew(nn.Module):
            def __init__(self, kind="fp32", mode="scale"):
                super().__init__()
                self.kind, self.mode = kind, mode

            def forward(self, x):
                out = torch.empty(x.shape, device=x.device, dtype=_DTYPES[self.kind])
                n, grid = x.numel(), (triton.cdiv(x.numel(), 256),)
                _KERNELS["scale"][grid](x, out, n, BLOCK=256)
                _BY_DTYPE[x.dtype][grid](x, out, n, BLOCK=256)
                copy = _KERNELS.get("copy")
                copy[grid](out, out, n, BLOCK=256)
                return _HELPERS[self.mode](out), _DTYPES["fp16"]
        """
    )
    assert report.findings == () and report.kernel_launches == 4, report.findings


def test_tables_that_hold_each_other_are_read_to_an_end():
    report = _screen(
        """
        _A = {"x": _B["x"], "all": [_A]}
        _B = {"x": _A["x"]}

        class ModelNew(nn.Module):
            def forward(self, x):
                return _launch(x), _A["x"], _B, _A["all"]
        """
    )
    assert report.violation is None and report.findings == (), report.findings


def test_evidence_points_at_the_hidden_call():
    report = _screen(HIDDEN_COMPUTE["two_calls_deep"])
    assert report.violation.evidence == "torch.matmul(a, b)"
    assert report.violation.line == HEADER.count("\n") + 3


# -- other reasons --------------------------------------------------------------------------

CHEATS = {
    "linear_layer": (
        "static_torch_layer",
        """
        class ModelNew(nn.Module):
            def __init__(self, n):
                super().__init__()
                self.proj = nn.Linear(n, n)

            def forward(self, x):
                return _launch(self.proj(x))
        """,
    ),
    "layers_in_a_list": (
        "static_torch_layer",
        """
        class ModelNew(nn.Module):
            def __init__(self, n):
                super().__init__()
                self.blocks = nn.ModuleList([nn.Conv2d(n, n, 3) for _ in range(2)])

            def forward(self, x):
                for block in self.blocks:
                    x = block(x)
                return _launch(x)
        """,
    ),
    "try_fallback": (
        "static_try_fallback",
        """
        class ModelNew(nn.Module):
            def forward(self, x):
                try:
                    return _launch(x)
                except RuntimeError:
                    return x
        """,
    ),
    "kernel_never_launched": (
        "static_no_kernel",
        """
        class ModelNew(nn.Module):
            def forward(self, x):
                return x.view(-1).view_as(x)
        """,
    ),
    "item_to_host": (
        "static_host_compute",
        """
        class ModelNew(nn.Module):
            def forward(self, x):
                _launch(x)
                return x.new_full((1,), x.max().item())
        """,
    ),
    "model_new_is_an_alias": ("static_opaque_model_new", "\nclass Model(nn.Module):\n    pass\n\nModelNew = Model\n"),
    "model_new_not_a_module": (
        "static_opaque_model_new",
        """
        class ModelNew:
            def forward(self, x):
                return _launch(x)
        """,
    ),
    "side_stream": (
        "static_stream",
        """
        class ModelNew(nn.Module):
            def forward(self, x):
                with torch.cuda.stream(torch.cuda.Stream()):
                    return _launch(x)
        """,
    ),
}

# Hostile in any method, reference and torch_compile included.
HOSTILE = {
    "thread": ("static_thread_or_process", "import threading\nthreading.Thread(target=print).start()\n"),
    "os_system": ("static_thread_or_process", "import os\nos.system('nvidia-smi')\n"),
    "os_system_by_folded_name": ("static_thread_or_process", "import os\ngetattr(os, 'sys' + 'tem')('ls')\n"),
    "queue_listener": (
        "static_thread_or_process",
        "import logging.handlers, queue\nlogging.handlers.QueueListener(queue.Queue()).start()\n",
    ),
    "threading_server": ("static_thread_or_process", "import socketserver as ss\nSERVER = ss.ThreadingTCPServer\n"),
    "patch_torch": ("static_monkey_patch", "torch.allclose = lambda *a, **k: True\n"),
    "patch_timer": ("static_monkey_patch", "import time as _t\nsetattr(_t, 'perf_counter', lambda: 0.0)\n"),
    "patch_via_dict": ("static_monkey_patch", "torch.testing.__dict__['assert_close'] = print\n"),
    "patch_builtins": ("static_monkey_patch", "import builtins\nbuiltins.print = None\n"),
    "harness_import": ("static_harness_import", "from runner.worker import timing\n"),
    "reference_module": ("static_harness_import", "import kbench_task\n"),
    "frame": ("static_introspection", "import sys\nFRAME = sys._getframe(1).f_locals\n"),
    "gc_objects": ("static_introspection", "import gc\nALL = gc.get_objects()\n"),
    "inspect_stack": ("static_introspection", "import inspect\nSTACK = inspect.stack()\n"),
    "exec": ("static_dynamic_code", "exec('import os')\n"),
    "eval": ("static_dynamic_code", "OP = eval('torch.mat' + 'mul')\n"),
    "compile": ("static_dynamic_code", "CODE = compile('1', 'f', 'eval')\n"),
    "dunder_import": ("static_dynamic_code", "T = __import__('torch')\n"),
    "getattr_unknown_name": ("static_dynamic_code", "NAME = 'sum'\nOP = getattr(torch, NAME)\n"),
    "vars_unknown_key": ("static_dynamic_code", "import torch.nn.functional as Fn\nOP = vars(Fn)[input()]\n"),
    "dict_get_unknown_key": ("static_dynamic_code", "NAME = 'sum'\nOP = torch.__dict__.get(NAME)\n"),
    "namespace_taken_whole": ("static_dynamic_code", "NS = vars(torch)\nOP = NS['mat' + 'mul']\n"),
    "open_file": ("static_file_or_env", "DATA = open('/tmp/expected.pt', 'rb').read()\n"),
    "environment": ("static_file_or_env", "import os\nMODE = os.environ.get('KBENCH_MODE')\n"),
}

HONEST_MODEL = """
class ModelNew(nn.Module):
    def forward(self, x):
        return _launch(x)
"""


@pytest.mark.parametrize("name", CHEATS)
def test_cheat_gets_its_reason_under_own_kernels(name):
    reason, body = CHEATS[name]
    report = _screen(body)
    assert report.violation is not None and report.violation.reason == reason, report.findings


@pytest.mark.parametrize("name", HOSTILE)
@pytest.mark.parametrize("policy", [IntegrityPolicy.allow_torch, IntegrityPolicy.own_kernels])
def test_hostile_code_is_a_violation_under_every_screening_policy(name, policy):
    reason, snippet = HOSTILE[name]
    report = _screen(snippet + HONEST_MODEL, policy.value)
    assert report.violation is not None and report.violation.reason == reason, report.findings
    clean = _screen(HONEST_MODEL, policy.value)
    assert clean.violation is None and clean.findings == ()


@pytest.mark.parametrize("name", HOSTILE)
def test_policy_off_records_findings_and_forbids_nothing(name):
    reason, snippet = HOSTILE[name]
    report = _screen(snippet + HONEST_MODEL, "off")
    assert report.violation is None and reason in {f.reason for f in report.findings}


def test_sizes_and_python_arithmetic_are_not_compute():
    report = _screen(
        """
        class ModelNew(nn.Module):
            def forward(self, x, y):
                rows, cols = x.shape
                n = x.numel() + y.numel() * 2
                scale = cols ** -0.5 if n > 0 else 1.0
                sizes = [s * 2 for s in x.size()]
                return _launch(x.reshape(rows * cols)), scale, sizes
        """
    )
    assert report.findings == (), report.findings


def test_structural_findings_are_left_to_the_worker():
    broken = screen_candidate("def forward(:\n", "own_kernels")
    assert broken.violation is None and [f.reason for f in broken.findings] == ["static_syntax_error"]
    missing = screen_candidate("import torch\n", "own_kernels")
    assert missing.violation is None and [f.reason for f in missing.findings] == ["static_no_model_new"]


def test_unknown_policy_is_refused():
    with pytest.raises(ValueError):
        screen_candidate(HONEST_MODEL, "allow_everything")


def test_policies_forbid_only_known_reasons():
    assert FORBIDDEN[IntegrityPolicy.allow_torch] < FORBIDDEN[IntegrityPolicy.own_kernels] <= REASONS
    assert all(r.startswith("static_") for r in REASONS)


def test_methods_carry_their_policy():
    cfg = compose_config(["method=[reference,torch_compile,directory]", "method.directory.path=/tmp"])
    policies = {name: options["integrity_policy"] for name, options in to_settings(cfg).methods.items()}
    assert policies == {"reference": "allow_torch", "torch_compile": "allow_torch", "directory": "own_kernels"}
    with pytest.raises(ConfigError, match="integrity_policy"):
        compose_config(["method=directory", "method.directory.path=/tmp", "method.directory.integrity_policy=lax"])
