"""The two static scans over a ``FileModel``: the whole file, and what ModelNew's forward reaches.

``scan_whole_file`` finds what is hostile wherever it appears (imports of the harness, threads,
patching torch or the timer, frame and gc introspection, dynamic code, files and environment,
side streams): code at import time runs as surely as forward does.

``Reach`` walks the call graph from ModelNew's entry points (module functions, methods, helpers
and layers held in ``self.<attr>``, lambdas, aliases, ``getattr`` with a constant name) and
records where compute happens: kernel launches of the file's own, PyTorch ops and layers, host
reads, ``try``/``except`` fallbacks. Whether a value is a tensor is inferred flow-insensitively
(forward's arguments, allocations, views, parameters, and what call sites pass on), so that
``n + 1`` on a size is not PyTorch compute while ``x + y`` on tensors is.
"""

from __future__ import annotations

import ast

from runner import static_rules as R
from runner.static_model import MODULE_SCOPE, FileModel, Scope, evidence, folded_string, matches

_ARITH = (
    ast.Add,
    ast.Sub,
    ast.Mult,
    ast.Div,
    ast.FloorDiv,
    ast.Mod,
    ast.Pow,
    ast.LShift,
    ast.RShift,
    ast.BitOr,
    ast.BitXor,
    ast.BitAnd,
)
_IDENTITY_COMPARE = (ast.Is, ast.IsNot, ast.In, ast.NotIn)


def _name_reason(qual: str) -> str | None:
    for prefix, reason in R.NAME_RULES:
        if prefix.endswith("*") and qual.startswith(prefix[:-1]):
            return reason
        if matches(qual, (prefix,)):
            return reason
    return None


def _is_chain_inner(model: FileModel, node: ast.AST) -> bool:
    parent = model.parents.get(node)
    return isinstance(parent, ast.Attribute) and parent.value is node


def scan_whole_file(model: FileModel) -> None:
    for node in ast.walk(model.tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                _check_name(model, alias.name, node)
        elif isinstance(node, ast.ImportFrom) and node.module:
            for alias in node.names:
                _check_name(model, f"{node.module}.{alias.name}", node)
        elif isinstance(node, (ast.Name, ast.Attribute)) and isinstance(node.ctx, ast.Load):
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
    """``X`` of ``X.__dict__`` or ``vars(X)``: the object whose namespace is being written."""
    if isinstance(node, ast.Attribute) and node.attr == "__dict__":
        return node.value
    if isinstance(node, ast.Call) and model.resolve(node.func, MODULE_SCOPE) == "builtins.vars" and node.args:
        return node.args[0]
    if isinstance(node, ast.Name) and node.id == "__builtins__":
        return node
    return None


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
    if qual == "builtins.getattr" and len(call.args) >= 2 and folded_string(call.args[1]) is None:
        base = model.resolve(call.args[0], MODULE_SCOPE)
        if base is not None and not base.startswith("@"):
            model.add("static_dynamic_code", call)


def _permuted(node: ast.AST, names: frozenset[str]) -> bool:
    """Whether an expression chain reorders elements (``x.t()``, ``x.permute(...)``, ``x[:, ::2]``, ``x.mT``)."""
    while isinstance(node, (ast.Call, ast.Attribute, ast.Subscript, ast.Name)):
        if isinstance(node, ast.Name):
            return node.id in names
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in R.PERMUTING_VIEWS:
            return True
        if isinstance(node, ast.Attribute) and node.attr in ("T", "mT", "H", "mH"):
            return True
        if isinstance(node, ast.Subscript) and any(
            isinstance(s, ast.Slice) and s.step is not None for s in ast.walk(node.slice)
        ):
            return True
        node = node.func if isinstance(node, ast.Call) else node.value
    return False


class Reach:
    """Breadth of ModelNew's forward: every function it can reach, scanned for where compute happens."""

    def __init__(self, model: FileModel) -> None:
        self.m = model
        self.seen: dict[tuple[str, str | None], frozenset[str]] = {}
        self.kernel_nodes = {id(model.defs[q]) for q in model.kernels}
        self.returns: dict[tuple[str, frozenset[str]], bool] = {}

    def walk(self, roots: list[tuple[str, str | None, frozenset[str]]]) -> None:
        queue = list(roots)
        while queue:
            qual, cls, tensor_params = queue.pop()
            old = self.seen.get((qual, cls))
            if qual in self.m.kernels or (old is not None and tensor_params <= old):
                continue
            self.seen[(qual, cls)] = tensor_params | (old or frozenset())
            queue += self._scan(qual, cls, self.seen[(qual, cls)])

    # -- one function -----------------------------------------------------------------------

    def _body(self, definition: ast.AST) -> list[ast.AST]:
        """Every node of a function, nested functions and lambdas included, nested kernels excluded."""
        stack = list(definition.body) if isinstance(definition.body, list) else [definition.body]
        nodes = []
        while stack:
            node = stack.pop()
            nodes.append(node)
            if id(node) not in self.kernel_nodes:
                stack.extend(ast.iter_child_nodes(node))
        return nodes

    def _scope(self, qual: str, cls: str | None, tensor_params: frozenset[str], nodes: list[ast.AST]) -> Scope:
        base = self.m.method_scope(qual, cls) if qual in self.m.owner else Scope()
        scope = Scope(cls=base.cls, self_name=base.self_name, locals={}, tensors=frozenset())
        for node in nodes:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                found = next((q for q, d in self.m.defs.items() if d is node), None)
                if found is not None:
                    scope.locals[node.name] = found
        for _ in range(2):
            for node in nodes:
                if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                    value = self.m.resolve(node.value, scope)
                    if value is not None:
                        scope.locals[node.targets[0].id] = value
                elif isinstance(node, ast.For) and isinstance(node.target, ast.Name):
                    value = self.m.resolve(node.iter, scope)
                    if value is not None and value.startswith("@layer:"):
                        scope.locals[node.target.id] = value
        tensors = set(tensor_params)
        for _ in range(4):
            scope.tensors = frozenset(tensors)
            for node in nodes:
                tensors |= self._assigned_tensors(node, scope)
        scope.tensors = frozenset(tensors)
        for _ in range(2):
            scope.permuted |= {
                t.id
                for node in nodes
                if isinstance(node, ast.Assign) and _permuted(node.value, scope.permuted)
                for t in node.targets
                if isinstance(t, ast.Name)
            }
        return scope

    def _assigned_tensors(self, node: ast.AST, scope: Scope) -> set[str]:
        pairs: list[tuple[ast.AST, ast.AST]] = []
        if isinstance(node, ast.Assign):
            pairs = [(t, node.value) for t in node.targets]
        elif isinstance(node, (ast.AnnAssign, ast.NamedExpr)) and node.value is not None:
            pairs = [(node.target, node.value)]
        elif isinstance(node, ast.For):
            pairs = [(node.target, node.iter)]
        names: set[str] = set()
        for target, value in pairs:
            if isinstance(target, ast.Tuple) and isinstance(value, ast.Tuple) and len(target.elts) == len(value.elts):
                for t, v in zip(target.elts, value.elts):
                    if isinstance(t, ast.Name) and self.is_tensor(v, scope):
                        names.add(t.id)
            elif self.is_tensor(value, scope):
                names |= {n.id for n in ast.walk(target) if isinstance(n, ast.Name)}
        return names

    def is_tensor(self, node: ast.AST, scope: Scope) -> bool:
        if isinstance(node, ast.Name):
            return node.id in scope.tensors
        if isinstance(node, ast.Attribute):
            qual = self.m.resolve(node, scope)
            if qual is not None:
                return qual.startswith("@tensor:")
            return node.attr in R.TENSOR_ATTRS and self.is_tensor(node.value, scope)
        if isinstance(node, (ast.Subscript, ast.Starred)):
            return self.is_tensor(node.value, scope)
        if isinstance(node, ast.BinOp):
            return self.is_tensor(node.left, scope) or self.is_tensor(node.right, scope)
        if isinstance(node, ast.UnaryOp):
            return self.is_tensor(node.operand, scope)
        if isinstance(node, ast.IfExp):
            return self.is_tensor(node.body, scope) or self.is_tensor(node.orelse, scope)
        if isinstance(node, ast.Call):
            qual = self.m.resolve(node.func, scope)
            if qual in self.m.defs:
                return qual not in self.m.kernels and self._returns_tensor(
                    qual, self._passed_tensors(node, qual, scope)
                )
            if qual is not None:
                last = qual.rsplit(".", 1)[-1]
                return (
                    qual.startswith("torch.")
                    and not qual.startswith(R.TORCH_HARMLESS_PREFIXES)
                    and last not in R.TORCH_NON_TENSOR
                    and not last[:1].isupper()
                )
            if isinstance(node.func, ast.Attribute) and self.is_tensor(node.func.value, scope):
                return node.func.attr not in R.TENSOR_METADATA_METHODS | R.TENSOR_HOST_METHODS
        return False

    def _returns_tensor(self, qual: str, passed: frozenset[str]) -> bool:
        """Whether a file function returns a tensor when called with tensors for ``passed``."""
        key = (qual, passed)
        if key not in self.returns:
            self.returns[key] = False  # a recursive call decides nothing
            nodes = self._body(self.m.defs[qual])
            scope = self._scope(qual, self.m.owner.get(qual), passed, nodes)
            values = [n.value for n in nodes if isinstance(n, ast.Return) and n.value is not None]
            if isinstance(self.m.defs[qual], ast.Lambda):
                values = [self.m.defs[qual].body]
            flat = [e for v in values for e in (v.elts if isinstance(v, ast.Tuple) else [v])]
            self.returns[key] = any(self.is_tensor(e, scope) for e in flat)
        return self.returns[key]

    def _scan(self, qual: str, cls: str | None, tensor_params: frozenset[str]) -> list:
        definition = self.m.defs[qual]
        nodes = self._body(definition)
        scope = self._scope(qual, cls, tensor_params, nodes)
        queue: list = []
        for node in nodes:
            if isinstance(node, (ast.Try, ast.TryStar)) and node.handlers:
                self.m.add("static_try_fallback", node, f"try/except: {evidence(node.body[0])}")
            elif isinstance(node, ast.Call):
                queue += self._call(node, scope)
            elif isinstance(node, ast.BinOp):
                if isinstance(node.op, ast.MatMult) or (isinstance(node.op, _ARITH) and self.is_tensor(node, scope)):
                    self.m.add("static_torch_compute", node)
            elif isinstance(node, ast.UnaryOp) and not isinstance(node.op, ast.Not):
                if self.is_tensor(node.operand, scope):
                    self.m.add("static_torch_compute", node)
            elif isinstance(node, ast.Compare) and not all(isinstance(op, _IDENTITY_COMPARE) for op in node.ops):
                if any(self.is_tensor(x, scope) for x in [node.left, *node.comparators]):
                    self.m.add("static_torch_compute", node)
            elif isinstance(node, ast.AugAssign):
                if self.is_tensor(node.target, scope) or self.is_tensor(node.value, scope):
                    self.m.add("static_torch_compute", node)
            elif isinstance(node, ast.Subscript) and self.is_tensor(node.value, scope):
                writes = isinstance(node.ctx, ast.Store)
                if writes or any(self.is_tensor(x, scope) for x in ast.walk(node.slice) if isinstance(x, ast.expr)):
                    self.m.add("static_torch_compute", node)
            if isinstance(node, (ast.Name, ast.Attribute, ast.Call, ast.Subscript)) and self._is_reference(node):
                queue += self._reference(node, scope)
        return queue

    def _is_reference(self, node: ast.AST) -> bool:
        if isinstance(node, (ast.Name, ast.Attribute)):
            return isinstance(node.ctx, ast.Load) and not _is_chain_inner(self.m, node)
        # getattr(obj, "name") and X.__dict__["name"] denote a member just as X.name does.
        return self.m.resolve(node, MODULE_SCOPE) is not None and not isinstance(node, ast.Name)

    def _reference(self, node: ast.AST, scope: Scope) -> list:
        qual = self.m.resolve(node, scope)
        if qual is None:
            return []
        parent = self.m.parents.get(node)
        called = isinstance(parent, ast.Call) and parent.func is node
        if qual in self.m.defs:
            return [(qual, self._self_class(qual, scope), frozenset())]
        if qual.startswith("@") and qual[1:] in self.m.classes and not called:
            return self._class_methods(qual[1:], None)
        if qual.startswith("@layer:") and not called and not isinstance(parent, (ast.Assign, ast.For)):
            self.m.add("static_torch_layer", node)
        elif qual.startswith("torch."):
            if self._torch_computes(qual, called):
                self.m.add("static_torch_compute", parent if called else node)
        elif qual.startswith("numpy.") and called:
            self.m.add("static_host_compute", parent)
        elif qual in R.ARITH_BUILTINS and called and self._tensor_argument(parent, scope):
            self.m.add("static_torch_compute", parent)
        elif qual.startswith("operator.") and qual.split(".", 1)[1] in R.OPERATOR_COMPUTE:
            if not called or self._tensor_argument(parent, scope):
                self.m.add("static_torch_compute", parent if called else node)
        return []

    def _tensor_argument(self, call: ast.Call, scope: Scope) -> bool:
        """A tensor among the call's arguments, directly or in a list or tuple literal."""
        for arg in [*call.args, *(k.value for k in call.keywords)]:
            items = arg.elts if isinstance(arg, (ast.List, ast.Tuple, ast.Set)) else [arg]
            if any(self.is_tensor(item, scope) for item in items):
                return True
        return False

    def _torch_computes(self, qual: str, called: bool) -> bool:
        if matches(qual, R.TORCH_CALLABLE_MAKERS):
            return True
        if qual.startswith("torch.ops."):
            parts = qual.split(".")
            return len(parts) >= 3 and parts[2] in R.TORCH_OP_NAMESPACES
        if qual in R.TORCH_NAMESPACES or qual.startswith(R.TORCH_HARMLESS_PREFIXES):
            return False
        last = qual.rsplit(".", 1)[1]
        if last in R.DTYPES or last in R.TORCH_ALLOWED:
            return False
        if qual.startswith("torch.Tensor."):
            return last not in R.TENSOR_ALLOWED_METHODS
        if last[:1].isupper():
            return called and self.m.is_layer_class(qual)
        return True

    def _call(self, call: ast.Call, scope: Scope) -> list:
        if isinstance(call.func, ast.Subscript) and self.m.resolve(call.func.value, scope) in self.m.kernels:
            self.m.launches.add((call.lineno, call.col_offset))
            return []
        qual = self.m.resolve(call.func, scope)
        if qual is None:
            self._method_call(call, scope)
            return []
        custom_op = qual.startswith("torch.ops.") and qual.split(".")[2:3] != [] and self.m.builds_extension
        if qual.startswith("@ext:") or (custom_op and qual.split(".")[2] not in R.TORCH_OP_NAMESPACES):
            self.m.launches.add((call.lineno, call.col_offset))
        elif qual.startswith("@layer:"):
            self.m.add("static_torch_layer", call)
        elif qual in self.m.defs and qual not in self.m.kernels:
            return [(qual, self._self_class(qual, scope), self._passed_tensors(call, qual, scope))]
        elif qual.startswith("@") and qual[1:] in self.m.classes:
            return self._class_methods(qual[1:], call, scope)
        return []

    def _method_call(self, call: ast.Call, scope: Scope) -> None:
        if not isinstance(call.func, ast.Attribute):
            return
        name, receiver = call.func.attr, call.func.value
        tensor = self.is_tensor(receiver, scope)
        if name in R.ARITH_DUNDERS and (tensor or self._tensor_argument(call, scope)):
            self.m.add("static_torch_compute", call)
        elif name in R.TENSOR_HOST_METHODS and (tensor or name != "cpu"):
            self.m.add("static_host_compute", call)
        elif name == "to":
            if tensor and self._casts(call, scope):
                self.m.add("static_torch_compute", call)
        elif (tensor and name not in R.TENSOR_ALLOWED_METHODS) or (not tensor and name in R.TENSOR_COMPUTE_METHODS):
            self.m.add("static_torch_compute", call)
        elif name in R.MATERIALIZING_METHODS and _permuted(receiver, scope.permuted):
            self.m.add("static_torch_compute", call)

    def _casts(self, call: ast.Call, scope: Scope) -> bool:
        """``x.to(torch.float16)``, ``x.to(dtype=...)``, ``x.to(y.dtype)``: a cast, unlike ``x.to(device)``."""
        if any(k.arg == "dtype" for k in call.keywords):
            return True
        for arg in call.args:
            qual = self.m.resolve(arg, scope) or ""
            if (qual.startswith("torch.") and qual.rsplit(".", 1)[1] in R.DTYPES) or (
                isinstance(arg, ast.Attribute) and arg.attr == "dtype"
            ):
                return True
        return False

    # -- call sites -------------------------------------------------------------------------

    def _self_class(self, qual: str, scope: Scope) -> str | None:
        if qual not in self.m.owner:
            return None
        owner = self.m.owner[qual]
        if scope.cls and (scope.cls == owner or owner in self._ancestors(scope.cls)):
            return scope.cls
        return owner

    def _ancestors(self, cls: str, seen: frozenset = frozenset()) -> set[str]:
        found = set()
        for base in self.m.bases(cls):
            if base not in seen:
                found |= {base} | self._ancestors(base, seen | {cls})
        return found

    def _passed_tensors(self, call: ast.Call, qual: str, scope: Scope, offset: int | None = None) -> frozenset[str]:
        definition = self.m.defs[qual]
        params = definition.args.posonlyargs + definition.args.args
        if offset is None:
            offset = 1 if qual in self.m.owner and self.m.method_scope(qual).self_name else 0
        names = set()
        for index, arg in enumerate(call.args):
            if isinstance(arg, ast.Starred):
                break
            if self.is_tensor(arg, scope):
                if index + offset < len(params):
                    names.add(params[index + offset].arg)
                elif definition.args.vararg is not None:
                    names.add(definition.args.vararg.arg)
        names |= {k.arg for k in call.keywords if k.arg and self.is_tensor(k.value, scope)}
        return frozenset(names)

    def _class_methods(self, cls: str, call: ast.Call | None, scope: Scope | None = None) -> list:
        """A class built or called in reach: all its methods are reached (the entry ones with the call's tensors)."""
        items = []
        for qual in [q for q, owner in self.m.owner.items() if owner in {cls} | self._ancestors(cls)]:
            entry = qual.rsplit(".", 1)[1] in ("__init__", "__call__", "forward")
            passed = self._passed_tensors(call, qual, scope, offset=1) if call is not None and entry else frozenset()
            items.append((qual, cls, passed))
        return items
