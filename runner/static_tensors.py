"""Which values in a function of the candidate are tensors: the inference ``Reach`` scans with.

Owns: ``TensorInference``, the base of ``Reach`` in ``runner/static_scan.py``: the nodes of one
function (nested kernels left out), its ``Scope`` (local aliases, tensor-valued names, names
bound to permuted views), whether an expression is a tensor, whether a file function returns
one, and which parameters a call site passes tensors to. The inference is flow-insensitive
(forward's arguments, allocations, views, parameters, and what call sites pass on), so that
``n + 1`` on a size is not PyTorch compute while ``x + y`` on tensors is. It records no
findings: what is compute is ``Reach``'s to decide.
"""

from __future__ import annotations

import ast

from runner import static_rules as R
from runner.static_model import FileModel
from runner.static_names import Scope


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


class TensorInference:
    """Tensor-valued names of the file's functions, as ``Reach`` walks them."""

    def __init__(self, model: FileModel) -> None:
        self.m = model
        self.kernel_nodes = {id(model.defs[q]) for q in model.kernels}
        self.returns: dict[tuple[str, frozenset[str]], bool] = {}

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

    def _tensor_argument(self, call: ast.Call, scope: Scope) -> bool:
        """A tensor among the call's arguments, directly or in a list or tuple literal."""
        for arg in [*call.args, *(k.value for k in call.keywords)]:
            items = arg.elts if isinstance(arg, (ast.List, ast.Tuple, ast.Set)) else [arg]
            if any(self.is_tensor(item, scope) for item in items):
                return True
        return False

    def _passed_tensors(self, call: ast.Call, qual: str, scope: Scope, offset: int | None = None) -> frozenset[str]:
        definition = self.m.defs[qual]
        params = definition.args.posonlyargs + definition.args.args
        if offset is None:
            offset = self.m.implicit_params(qual)
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
