"""Static integrity screening of a candidate's source, before anything runs (AST, not regex).

Owns: which code ``ModelNew``'s forward can reach (a call graph over the file: module-level
functions, methods of the file's classes, helpers and layers held in ``self.<attr>``, lambdas,
nested functions, aliases), where that code computes (its own kernels, or PyTorch), and the
hostile constructs anywhere in the file. Each finding has a reason code, a line and evidence;
a policy says which reasons are violations. It imports nothing of the candidate (and not
torch): a pure function of the source text. It does not judge correctness or speed, and it
does not replace the runtime checks in ``runner/worker/integrity.py``.

Policies (``IntegrityPolicy``), chosen per method by ``integrity_policy`` in
``MethodConfig`` (``conf/method/*.yaml``):
- ``allow_torch`` (``reference``, ``torch_compile``): PyTorch compute is the point; still
  forbids monkey-patching, harness imports, threads/processes, frame/gc introspection,
  dynamic code, file/env access and side streams;
- ``own_kernels`` (``directory`` and LLM methods; the schema's default): additionally, forward
  must reach a kernel launch of the candidate's own (``kernel[grid](...)`` of a ``@triton.jit``
  or ``numba.cuda.jit`` function, a function of a ``load_inline``/``load`` extension or a cupy
  kernel) and must reach no PyTorch or host compute beyond allocation, views and metadata;
- ``off``: findings are recorded in the result, none is a violation (the executor tests, whose
  candidates must reach the sandbox to show how it ends them; the result says so).

Wiring is one call: ``screen_candidate(candidate.source,
settings.methods[method]["integrity_policy"])``; a non-None ``report.violation`` ends the
evaluation as ``integrity_violation`` with ``violation.reason`` and ``violation.describe()``.
``static_syntax_error`` and ``static_no_model_new`` are never violations: the worker's
``compile_error`` is the right verdict for them.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from enum import Enum

from runner.static_model import FileModel, Finding
from runner.static_scan import Reach
from runner.static_whole_file import scan_whole_file


class IntegrityPolicy(str, Enum):
    allow_torch = "allow_torch"
    own_kernels = "own_kernels"
    off = "off"  # findings recorded, none forbidden: sandbox tests, or a run that states it screens nothing


_ALWAYS_FORBIDDEN = frozenset(
    {
        "static_monkey_patch",
        "static_harness_import",
        "static_thread_or_process",
        "static_introspection",
        "static_dynamic_code",
        "static_file_or_env",
        "static_stream",
    }
)
FORBIDDEN: dict[IntegrityPolicy, frozenset[str]] = {
    IntegrityPolicy.off: frozenset(),
    IntegrityPolicy.allow_torch: _ALWAYS_FORBIDDEN,
    IntegrityPolicy.own_kernels: _ALWAYS_FORBIDDEN
    | {
        "static_opaque_model_new",
        "static_no_kernel",
        "static_torch_compute",
        "static_torch_layer",
        "static_host_compute",
        "static_try_fallback",
    },
}
# Every reason a finding can carry; the two not in any FORBIDDEN set are left to the worker.
REASONS = FORBIDDEN[IntegrityPolicy.own_kernels] | {"static_syntax_error", "static_no_model_new"}


@dataclass(frozen=True)
class StaticReport:
    policy: str
    findings: tuple[Finding, ...]
    kernel_launches: int
    violation: Finding | None
    # The parsed file, for the worker's kernel census (what kernels the file defines): parsed once.
    model: FileModel | None = field(default=None, compare=False, repr=False)


def screen_candidate(source: str, policy: str) -> StaticReport:
    """Screen ``source`` under ``policy`` (``allow_torch`` | ``own_kernels`` | ``off``); ValueError for another name."""
    chosen = IntegrityPolicy(policy)
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        findings = (Finding("static_syntax_error", exc.lineno or 0, str(exc.msg)),)
        return StaticReport(chosen.value, findings, 0, None)
    model = FileModel(tree)
    scan_whole_file(model)
    roots = model.roots()
    if roots is not None:
        Reach(model).walk(roots)
        if not model.launches:
            model.add("static_no_kernel", model.classes["ModelNew"], "ModelNew's forward reaches no kernel launch")
    findings = tuple(sorted(model.findings, key=lambda f: (f.line, f.reason, f.evidence)))
    forbidden = [f for f in findings if f.reason in FORBIDDEN[chosen]]
    # The first forbidden finding in the file; a missing launch last, as what is reached instead explains it.
    violation = min(forbidden, key=lambda f: (f.reason == "static_no_kernel", f.line), default=None)
    return StaticReport(chosen.value, findings, len(model.launches), violation, model)
