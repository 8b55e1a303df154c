"""The whole-file scan over a ``FileModel``: what is hostile wherever it appears in the candidate.

Owns: ``scan_whole_file``, which finds imports of the harness, threads, patching torch or the
timer, frame and gc introspection, dynamic code (a module's member picked by a name known only
at run time included), files and environment, and side streams
anywhere in the file (code at import time runs as surely as forward does), and
``_is_chain_inner``, which says what counts as one read of a name (``a.b`` inside ``a.b.c`` is
read as part of it), shared with ``Reach``. What ModelNew's forward reaches is
``runner/static_scan.py``'s; which findings are violations is ``runner/static_check.py``'s.
"""

from __future__ import annotations

import ast

from runner import static_rules as R
from runner.static_model import FileModel
from runner.static_names import MODULE_SCOPE, folded_string, matches
from runner.static_tables import LOOKUP_METHODS, WRITE_METHODS


def _is_chain_inner(model: FileModel, node: ast.AST) -> bool:
    parent = model.parents.get(node)
    return isinstance(parent, ast.Attribute) and parent.value is node


def _name_reason(qual: str) -> str | None:
    for prefix, reason in R.NAME_RULES:
        if prefix.endswith("*") and qual.startswith(prefix[:-1]):
            return reason
        if matches(qual, (prefix,)):
            return reason
    return None


def scan_whole_file(model: FileModel) -> None:
    for node in ast.walk(model.tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                _check_name(model, alias.name, node)
        elif isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                _check_name(model, f"{node.module}.{alias.name}", node)
        elif isinstance(node, (ast.Name, ast.Attribute, ast.Call, ast.Subscript)) and _loads(node):
            if not _is_chain_inner(model, node):
                qual = model.resolve(node, MODULE_SCOPE)
                if qual is not None:
                    _check_name(model, qual, node)
        if isinstance(node, ast.Attribute) and node.attr in R.INTROSPECTION_ATTRS:
            model.add("static_introspection", node)
        if isinstance(node, ast.Attribute) and node.attr in R.STREAM_METHODS:
            model.add("static_stream", node)
        if isinstance(node, ast.Name) and node.id == "__builtins__":
            model.add("static_introspection", node)
        if isinstance(node, (ast.Assign, ast.AugAssign, ast.AnnAssign, ast.Delete)):
            targets = node.targets if isinstance(node, (ast.Assign, ast.Delete)) else [node.target]
            for target in targets:
                _check_patch_target(model, target, node)
        if isinstance(node, ast.Call):
            _check_patch_call(model, node)
        if isinstance(node, (ast.Call, ast.Subscript, ast.Attribute)):
            _check_dynamic_member(model, node)


def _loads(node: ast.AST) -> bool:
    """A read of a name: ``x``, ``a.b``, and ``getattr(a, "b")``, ``a.__dict__["b"]``, ``T["k"]`` (resolved or not)."""
    return isinstance(node, ast.Call) or isinstance(node.ctx, ast.Load)


def _check_name(model: FileModel, qual: str, node: ast.AST) -> None:
    reason = _name_reason(qual)
    if reason is not None:
        parent = model.parents.get(node)
        model.add(reason, parent if isinstance(parent, ast.Call) and parent.func is node else node)


def _patched_root(model: FileModel, node: ast.AST) -> bool:
    """Whether ``node`` denotes a module (or a member of one) that must not be rebound."""
    if isinstance(node, ast.Name) and node.id == "__builtins__":
        return True
    qual = model.resolve(node, MODULE_SCOPE)
    return qual is not None and qual.split(".")[0] in R.PATCH_ROOTS


def _namespace_of(model: FileModel, node: ast.AST) -> ast.AST | None:
    """``X`` of ``X.__dict__``, ``vars(X)`` or ``__builtins__``: the object whose namespace is being written."""
    if isinstance(node, ast.Name) and node.id == "__builtins__":
        return node
    return model.namespace_of(node, MODULE_SCOPE)


def _check_patch_target(model: FileModel, target: ast.AST, statement: ast.AST) -> None:
    for part in target.elts if isinstance(target, (ast.Tuple, ast.List)) else [target]:
        if isinstance(part, ast.Attribute) and _patched_root(model, part.value):
            model.add("static_monkey_patch", statement)
        if isinstance(part, ast.Subscript):
            namespace = _namespace_of(model, part.value)
            if (namespace is not None and _patched_root(model, namespace)) or model.resolve(
                part.value, MODULE_SCOPE
            ) == "sys.modules":
                model.add("static_monkey_patch", statement)


def _check_patch_call(model: FileModel, call: ast.Call) -> None:
    qual = model.resolve(call.func, MODULE_SCOPE) or ""
    setter = qual in ("builtins.setattr", "builtins.delattr") or qual.endswith((".__setattr__", ".__delattr__"))
    if setter and call.args and _patched_root(model, call.args[0]):
        model.add("static_monkey_patch", call)
    if isinstance(call.func, ast.Attribute) and call.func.attr in ("update", "__setitem__", "setdefault", "pop"):
        namespace = _namespace_of(model, call.func.value)
        if namespace is not None and _patched_root(model, namespace):
            model.add("static_monkey_patch", call)


def _check_dynamic_member(model: FileModel, node: ast.AST) -> None:
    """A member of a module (or of one of its classes) picked by a name known only at run time:
    ``getattr(torch, name)``, ``vars(F)[name]``, ``torch.__dict__.get(name)``, or out of its
    namespace taken whole (``ns = vars(torch)``, ``vars(F).items()``). Which function that is
    cannot be read, so it cannot be screened. The file's own classes and objects (``self``, a
    tensor) resolve to no module and are left alone."""
    if isinstance(node, ast.Call) and model.resolve(node.func, MODULE_SCOPE) == "builtins.getattr":
        read = (node.args[0], folded_string(node.args[1])) if len(node.args) >= 2 else None
    else:
        read = model.namespace_read(node, MODULE_SCOPE)
        namespace = model.namespace_of(node, MODULE_SCOPE)
        if read is None and namespace is not None and _taken_whole(model, node):
            read = (namespace, None)
    if read is not None and read[1] is None:
        base = model.resolve(read[0], MODULE_SCOPE)
        if base is not None and not base.startswith("@"):
            model.add("static_dynamic_code", node)


def _taken_whole(model: FileModel, namespace: ast.AST) -> bool:
    """Whether a namespace (``vars(M)``, ``M.__dict__``) is used other than by one key where it is
    named (``ns[k]``, ``ns.get(k)``: a read, or a write that the patch rules judge)."""
    parent = model.parents.get(namespace)
    if isinstance(parent, ast.Subscript) and parent.value is namespace:
        return False
    if isinstance(parent, ast.Attribute) and parent.value is namespace:
        call = model.parents.get(parent)
        keyed = parent.attr in LOOKUP_METHODS | WRITE_METHODS
        return not (keyed and isinstance(call, ast.Call) and call.func is parent)
    return True
