"""Kernel census: which kernels ran in one checked call, whose they are, and what the library ones did.

Owns the runtime answers to "did the candidate's own kernels actually run?" (reason code
``no_own_kernel_ran``) and "did a library compute in the candidate's call?" (``library_compute_ran``).
One call per evaluation is watched (the first checked shape, a trial drawn at random after the
first, so that compiling and autotuning on the first call are not inside and the candidate cannot
know which call it is; trial 0 when only one trial runs), with the first instrument available:
- ``cuda_profiler`` (CUDA): ``torch.profiler`` with CUDA activity lists the kernels the call
  ran on the GPU, each with its GPU time;
- ``triton_interpreter`` (CPU with ``TRITON_INTERPRET=1``): the launch path of Triton's
  interpreter is wrapped before the candidate is imported and counts launches per kernel
  function; PyTorch's CPU ops are not kernels here and are not seen;
- otherwise ``not available``, with why.
A kernel is the candidate's own when it is one the candidate's source defines: a Triton kernel
of a ``@triton.jit`` function of the file (by name on the GPU, by the file its code lives in
under the interpreter), a ``__global__`` function in the file's strings (``load_inline`` CUDA
sources, cupy raw kernels), a ``numba.cuda.jit`` function, or, for the ``torch_compile``
method, an Inductor-generated ``triton_*`` kernel. Everything else (aten, cuBLAS, cuDNN,
cutlass, ...) is a library kernel, and either moves data (fills and copies, which honest
candidates trigger with ``torch.zeros``, ``.contiguous()``, ``.to()``, ``torch.cat``: the
allow-list ``moves_data``) or computes (everything else, unknown names included). Names, counts
and GPU-time shares are recorded in ``result.integrity["kernel_census"]`` under every policy; only
``own_kernels`` turns them into violations, and only when the instrument could have seen the
candidate's kernels and knows their names (not for cupy kernels named by an argument or extension
sources assembled at run time: then the record says why it did not judge):
- ``no_own_kernel_ran`` when none of the candidate's own kernels ran (it wins over the next);
- ``library_compute_ran`` when a library kernel that computes ran: the static screen forbids
  reachable PyTorch compute under ``own_kernels``, so this is compute that evaded it (a decoy
  kernel of its own launched beside it, say). Only the CUDA profiler sees library kernels; under
  the interpreter PyTorch's ops are not kernels and the record says that this was not judged.
  The ``torch_compile`` method's library kernels (Inductor calls cuBLAS for matmuls) are its own
  business and are never judged.
This module judges nothing else: the static screen (``runner/static_check.py``) decides what the
source may do, ``integrity.py`` the other runtime checks.
"""

from __future__ import annotations

import ast
import os
import random
import re
import time
from collections import Counter
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import torch

from runner.static_model import FileModel
from runner.static_names import MODULE_SCOPE, folded_string

_BOUNDS = r"(?:__launch_bounds__\s*\([^)]*\)\s*)?"
_GLOBAL_FUNCTION = re.compile(rf"__global__\s+{_BOUNDS}void\s+{_BOUNDS}(\w+)")
# cupy kernels named by an argument rather than by ``__global__`` in their source.
_NAMED_BY_ARGUMENT = frozenset({"cupy.ElementwiseKernel", "cupy.ReductionKernel"})
# Old Triton versions suffixed kernel names with their argument specialisation (``add_kernel_0d1d2d``).
_TRITON_SUFFIX = re.compile(r"_\d[0-9cde]*")
_COPY_ACTIVITIES = frozenset({"gpu_memcpy", "gpu_memset"})
# Library kernels that only fill or copy memory, by what honest candidates use to make them:
# torch.zeros/ones/full, fill_, zero_ -> an aten elementwise loop over ``FillFunctor``;
# .contiguous(), .to(), .clone(), copy_ -> an elementwise loop over a lambda of
# ``direct_copy_kernel_cuda`` (``bfloat16_``/``float8_copy_kernel_cuda`` for those casts,
# ``copy_device_to_device`` in older PyTorch); torch.cat/stack -> ``CatArrayBatchedCopy*``;
# memset kernels. (Plain memcpy/memset are activities, not kernels: counted in ``copies``.)
# Anything else, an unknown name included, computes: a false positive names its kernel.
_ELEMENTWISE_LOOP = re.compile(r"\w*elementwise_kernel\w*")
_MOVING_FUNCTOR = re.compile(
    r"\bFillFunctor<|\b(?:direct|bfloat16|float8)_copy_kernel_cuda\b|\bcopy_device_to_device\b"
)
_MOVING_KERNEL = re.compile(r"CatArrayBatchedCopy\w*|\w*memset\w*", re.IGNORECASE)
_MAX_EVIDENCE_NAMES = 3
_MAX_NAMES = 40  # per list in the record: a result stays small even for a candidate of many kernels
_MAX_NAME_CHARS = 160


class KernelCensus:
    """Built before the candidate is imported; ``watch`` wraps each checked call, ``record`` is the result entry."""

    def __init__(
        self,
        source: str,
        candidate_file: Path,
        device: torch.device,
        policy: str,
        method: str,
        model: FileModel | None = None,
    ) -> None:
        self.candidate_file = str(candidate_file)
        self.judge = policy == "own_kernels"
        self.inductor_is_own = method == "torch_compile"
        self.defined = defined_kernels(source, model)
        self.target: tuple[str, int] | None = None
        self._window: Counter | None = None
        self._pending: tuple[str, str] | None = None
        self.record: dict = {
            "instrument": "not available",
            "sees": "nothing",
            "why": "",
            "call": None,  # {"shape", "trial"} once the watched call has run
            "defined": sorted(self.defined.triton | self.defined.cuda),
            "own": {},
            "library": {},
            "copies": None,
            "own_gpu_us": None,
            "library_gpu_us": None,
            "own_gpu_share": None,
            "own_kernel_ran": None,
            "judged": False,
            # The library kernels split by what they did, and the ``library_compute_ran`` judgement.
            "library_kinds": {"data_movement": None, "compute": None, "compute_ran": None, "judged": False, "why": ""},
        }
        if device.type == "cuda":
            self.record.update(instrument="cuda_profiler", sees="every GPU kernel and copy of the call")
        elif os.environ.get("TRITON_INTERPRET") != "1":
            self.record["why"] = "no CUDA profiler on the CPU, and TRITON_INTERPRET is not set"
        else:
            why = _install_interpreter_hook(self)
            if why:
                self.record["why"] = why
            else:
                self.record.update(instrument="triton_interpreter", sees="Triton launches only (not PyTorch's CPU ops)")
                self.record["library_kinds"]["why"] = (
                    "the Triton interpreter does not see PyTorch's ops: library compute is not visible to it"
                )

    def plan(self, first_shape: str, trials: int) -> None:
        """Watch one trial of the first checked shape, drawn from the system's entropy after the first
        (compile and autotune come before), so a candidate cannot know which of its calls is profiled."""
        self.target = (first_shape, random.SystemRandom().randint(1, trials - 1) if trials > 1 else 0)

    @contextmanager
    def watch(self, shape: str, trial: int):
        if (shape, trial) != self.target or self.record["instrument"] == "not available":
            yield
            return
        self.record["call"] = {"shape": shape, "trial": trial}
        if self.record["instrument"] == "cuda_profiler":
            from torch.profiler import ProfilerActivity, profile

            # A profiler that fails is the runner's problem, not the candidate's: recorded, not raised.
            prof = profile(activities=[ProfilerActivity.CUDA])
            # The profiler's own cost, host seconds (what the watched call's stage pays for the census).
            cost = self.record.setdefault("profiler_s", {})
            started = time.perf_counter()
            try:
                prof.start()
            except (RuntimeError, AssertionError) as exc:  # torch asserts when it has no CUDA activity to offer
                self._unavailable(f"the CUDA profiler did not start: {exc}")
                yield
                return
            cost["start"] = round(time.perf_counter() - started, 6)
            try:
                yield
            finally:
                started = time.perf_counter()
                try:
                    prof.stop()
                    events = prof.events()
                except RuntimeError as exc:
                    events = None
                    self._unavailable(f"the CUDA profiler failed: {exc}")
                cost["stop"] = round(time.perf_counter() - started, 6)
            if events is not None:
                started = time.perf_counter()
                self._judge_profile(events)
                cost["judge"] = round(time.perf_counter() - started, 6)
        else:
            self._window = Counter()
            try:
                yield
            finally:
                launches, self._window = self._window, None
            self._judge_launches(launches)

    def _unavailable(self, why: str) -> None:
        self.record.update(instrument="not available", sees="nothing", why=why[:500])

    def violation(self) -> tuple[str, str] | None:
        """``(reason, evidence)`` once, right after the watched call, when under ``own_kernels`` no own
        kernel ran or a library kernel computed."""
        found, self._pending = self._pending, None
        return found

    # -- classifying what ran ---------------------------------------------------------------

    def _judge_profile(self, events) -> None:
        own: Counter = Counter()
        library: Counter = Counter()
        own_us = library_us = 0.0
        copies = 0
        for event in events:
            if event.device_type != torch.autograd.DeviceType.CUDA:
                continue
            kind = _device_activity(event)
            if kind == "copy":
                copies += 1
            elif kind == "kernel":
                us = float(event.time_range.elapsed_us())
                if self.is_own(event.name):
                    own[event.name] += 1
                    own_us += us
                else:
                    library[event.name] += 1
                    library_us += us
        total = own_us + library_us
        self.record.update(
            own=_capped(own),
            library=_capped(library),
            copies=copies,
            own_gpu_us=round(own_us, 3),
            library_gpu_us=round(library_us, 3),
            own_gpu_share=round(own_us / total, 4) if total > 0 else None,
        )
        # Without any device activity the profiler may simply not have worked (CUPTI unavailable):
        # no evidence either way. A call that produced a CUDA output without any is caught elsewhere.
        if not own and not library and not copies:
            self.record["why"] = self.record["library_kinds"]["why"] = "the profiler saw no GPU activity in the call"
            self._conclude(None, conclusive=False)
            return
        if not own and self.defined.unreadable:
            self.record["why"] = "the candidate builds kernels whose names its source does not spell out"
        self._conclude(bool(own), conclusive=bool(own) or not self.defined.unreadable)
        self._judge_library(library)

    def _judge_library(self, library: Counter) -> None:
        """Split the library kernels into data movement and compute; under ``own_kernels`` compute is a
        violation, unless ``no_own_kernel_ran`` already is one."""
        moving = Counter({name: n for name, n in library.items() if moves_data(name)})
        computing = library - moving
        kinds = self.record["library_kinds"]
        kinds.update(data_movement=_capped(moving), compute=_capped(computing))
        if self.defined.unreadable:
            kinds["why"] = (
                "the candidate builds kernels whose names its source does not spell out: they count as library"
            )
            return
        kinds["compute_ran"] = bool(computing)
        if self.inductor_is_own:
            kinds["why"] = "torch_compile's compiled code calls library kernels (cuBLAS matmuls) by design"
            return
        kinds["judged"] = self.judge
        if self.judge and computing and self._pending is None:
            self._pending = ("library_compute_ran", self._library_evidence(computing))

    def _library_evidence(self, computing: Counter) -> str:
        names = [
            name if len(name) <= _MAX_NAME_CHARS else name[:_MAX_NAME_CHARS] + "..."
            for name, _ in computing.most_common(_MAX_EVIDENCE_NAMES)
        ]
        more = f" and {len(computing) - len(names)} more" if len(computing) > len(names) else ""
        return (
            f"besides the candidate's own kernel(s) ({', '.join(self.record['own'])}), "
            f"{sum(computing.values())} launch(es) of library kernels that compute ran in this call: "
            f"{'; '.join(names)}{more}. A library kernel counts as compute unless it is a fill, copy, cat "
            f"or memset (kernel_census.moves_data); own_kernels allows no PyTorch compute on the data path"
        )

    def _judge_launches(self, launches: Counter) -> None:
        own = Counter({name: n for (name, mine), n in launches.items() if mine})
        library = Counter({name: n for (name, mine), n in launches.items() if not mine})
        self.record.update(own=_capped(own), library=_capped(library))
        # The interpreter sees Triton launches only; a candidate whose kernels are of another kind
        # (a load_inline extension, numba, cupy) cannot be judged by it.
        conclusive = bool(own) or not self.defined.non_triton
        if not conclusive:
            self.record["why"] = (
                "the interpreter sees Triton launches only; the candidate's kernels are of another kind"
            )
        self._conclude(bool(own), conclusive)

    def _conclude(self, ran: bool | None, conclusive: bool) -> None:
        self.record["own_kernel_ran"] = ran if conclusive else None
        self.record["judged"] = self.judge and conclusive
        if self.judge and conclusive and not ran:
            self._pending = ("no_own_kernel_ran", self._evidence())

    def _evidence(self) -> str:
        defined = ", ".join(self.record["defined"]) or "none found in its source"
        if self.record["instrument"] == "cuda_profiler":
            library = self.record["library"]
            ran = ", ".join(list(library)[:5]) + (", ..." if len(library) > 5 else "")
            return (
                f"the CUDA profiler saw no kernel of the candidate's own in this call (its kernels: {defined}); "
                f"{sum(library.values())} library kernel launch(es) ran: {ran or 'none'}"
            )
        return (
            f"the Triton interpreter saw no launch of a kernel defined in the candidate in this call "
            f"(its kernels: {defined}); the output was computed by something else"
        )

    def is_own(self, kernel_name: str) -> bool:
        """Whether a GPU kernel name (as the profiler reports it) is one of the candidate's own."""
        if kernel_name in self.defined.triton:
            return True
        head, _, rest = kernel_name.partition("_")
        if self.inductor_is_own and head == "triton" and rest:
            return True
        for name in self.defined.triton:
            if kernel_name.startswith(name) and _TRITON_SUFFIX.fullmatch(kernel_name[len(name) :]):
                return True
        return _cxx_base_name(kernel_name) in self.defined.cuda

    def note_launch(self, fn) -> None:
        """Called by the interpreter hook for every launch while a window is open."""
        if self._window is not None:
            code = getattr(fn, "__code__", None)
            mine = code is not None and code.co_filename == self.candidate_file
            self._window[(getattr(fn, "__qualname__", repr(fn)), mine)] += 1


@dataclass(frozen=True)
class DefinedKernels:
    """The kernels a candidate's source defines, by the names a profiler will show."""

    triton: frozenset[str] = frozenset()  # @triton.jit functions
    cuda: frozenset[str] = frozenset()  # __global__ functions in the file's strings, numba.cuda.jit functions
    unreadable: bool = False  # kernels built whose names the source does not spell out
    non_triton: bool = False  # any kernel the Triton interpreter cannot see


def defined_kernels(source: str, model: FileModel | None = None) -> DefinedKernels:
    """The kernels ``source`` defines; ``model``: the static screen's model of the same source, if made."""
    if model is None:
        try:
            model = FileModel(ast.parse(source))
        except SyntaxError:
            return DefinedKernels()
    tree = model.tree
    triton_names, numba_names = set(), set()
    for qual in model.kernels:
        node = model.defs[qual]
        roots = {
            (model.resolve(d.func if isinstance(d, ast.Call) else d, MODULE_SCOPE) or "").split(".")[0]
            for d in node.decorator_list
        }
        (triton_names if "triton" in roots else numba_names).add(node.name)
    strings = (folded_string(node) for node in ast.walk(tree) if isinstance(node, (ast.Constant, ast.JoinedStr)))
    global_names = {name for text in strings if text for name in _GLOBAL_FUNCTION.findall(text)}
    named_by_argument = any(
        isinstance(node, ast.Call) and model.call_qual(node) in _NAMED_BY_ARGUMENT for node in ast.walk(tree)
    )
    return DefinedKernels(
        triton=frozenset(triton_names),
        cuda=frozenset(global_names | numba_names),
        unreadable=named_by_argument or (model.builds_extension and not global_names),
        non_triton=bool(global_names or numba_names) or model.builds_extension,
    )


def _device_activity(event) -> str:
    """``kernel``, ``copy`` (memcpy/memset) or ``other`` (annotations, synchronisation) for a device event."""
    activity = getattr(event, "activity_type", None) or ""
    if activity == "kernel":
        return "kernel"
    if activity in _COPY_ACTIVITIES or event.name.startswith(("Memcpy", "Memset")):
        return "copy"
    if activity or event.name in ("Context Sync", "Stream Sync"):
        return "other"
    return "kernel"


def moves_data(kernel_name: str) -> bool:
    """Whether a library kernel (as the profiler names it) only fills or copies memory; False for
    anything the allow-list above does not name."""
    base = _cxx_base_name(kernel_name)
    if _MOVING_KERNEL.fullmatch(base):
        return True
    return bool(_ELEMENTWISE_LOOP.fullmatch(base) and _MOVING_FUNCTOR.search(kernel_name))


def _cxx_base_name(kernel_name: str) -> str:
    """``void ns::my_kernel<float>(float const*, int)`` -> ``my_kernel``; numba's names likewise."""
    name = kernel_name.replace("(anonymous namespace)", "").removeprefix("void ").strip()
    name = re.split(r"[(<\[$]", name, maxsplit=1)[0]  # numba: ``cudapy::mod::fn[abi:...](...)``
    return name.rsplit("::", 1)[-1].strip()


def _capped(counts: Counter) -> dict:
    return {name[:_MAX_NAME_CHARS]: n for name, n in counts.most_common(_MAX_NAMES)}


# The census the interpreter hook reports to: the worker evaluates one candidate per process.
_interpreter_census: list[KernelCensus] = []


def _install_interpreter_hook(census: KernelCensus) -> str:
    """Wrap ``InterpretedFunction.run`` (every interpreted launch goes through it) once; "" or why not."""
    try:
        from triton.runtime.interpreter import InterpretedFunction
    except ImportError as exc:
        return f"TRITON_INTERPRET=1 but Triton's interpreter cannot be imported: {exc}"
    _interpreter_census[:] = [census]
    original = InterpretedFunction.run
    if getattr(original, "_kbench_census", False):
        return ""

    def run(self, *args, **kwargs):
        if not kwargs.get("warmup") and _interpreter_census:
            _interpreter_census[0].note_launch(self.fn)
        return original(self, *args, **kwargs)

    run._kbench_census = True
    InterpretedFunction.run = run
    return ""
