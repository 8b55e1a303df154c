"""What ModelNew's forward reaches, scanned over a ``FileModel`` for where compute happens.

``Reach`` walks the call graph from ModelNew's entry points (module functions, methods, helpers
and layers held in ``self.<attr>``, lambdas, aliases, ``getattr`` with a constant name, the
forward of an autograd Function called through ``apply`` (not its backward), tables
of callables such as ``_OPS = {"mm": torch.mm}``: a read with a constant key gives its entry,
any other read all the table holds) and records where compute happens: kernel launches of the
file's own, PyTorch ops and layers, host reads, ``try``/``except`` fallbacks. Whether a value
is a tensor is inferred flow-insensitively by its base, ``TensorInference``
(``runner/static_tensors.py``), so that ``n + 1`` on a size is not PyTorch compute while
``x + y`` on tensors is. The other scan, of the whole file for what is hostile wherever it
appears, is ``scan_whole_file`` in ``runner/static_whole_file.py``.
"""

from __future__ import annotations

import ast

from runner import static_rules as R
from runner.static_model import FileModel, evidence
from runner.static_names import MODULE_SCOPE, Scope, matches
from runner.static_tables import held, lookup, lookup_site, read
from runner.static_tensors import TensorInference, _permuted
from runner.static_whole_file import _is_chain_inner

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


class Reach(TensorInference):
    """Breadth of ModelNew's forward: every function it can reach, scanned for where compute happens."""

    def __init__(self, model: FileModel) -> None:
        super().__init__(model)
        self.seen: dict[tuple[str, str | None], frozenset[str]] = {}

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

    def _scan(self, qual: str, cls: str | None, tensor_params: frozenset[str]) -> list:
        definition = self.m.defs[qual]
        nodes = self._body(definition)
        scope = self._scope(qual, cls, tensor_params, nodes)
        queue: list = self._setup_context(qual)
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
            if isinstance(node, (ast.Name, ast.Attribute)) and isinstance(node.ctx, ast.Load):
                queue += self._table_read(node, scope)
        return queue

    def _is_reference(self, node: ast.AST) -> bool:
        if isinstance(node, (ast.Name, ast.Attribute)):
            return isinstance(node.ctx, ast.Load) and not _is_chain_inner(self.m, node)
        # getattr(obj, "name") and X.__dict__["name"] denote a member just as X.name does; a table
        # lookup (T["name"]) is read where the table is named, by _table_read.
        return (
            self.m.resolve(node, MODULE_SCOPE) is not None
            and not isinstance(node, ast.Name)
            and lookup(self.m, node, MODULE_SCOPE) is None
        )

    def _reference(self, node: ast.AST, scope: Scope) -> list:
        qual = self.m.resolve(node, scope)
        if qual is None or qual in self.m.tables:
            return []
        parent = self.m.parents.get(node)
        called = isinstance(parent, ast.Call) and parent.func is node
        return self._denoted(qual, node, parent if called else None, scope)

    def _table_read(self, node: ast.AST, scope: Scope) -> list:
        """A table named in reach: what the read can give is reached or flagged, the finding naming the table."""
        if self.m.resolve(node, scope) not in self.m.tables:
            return []
        site = lookup_site(self.m.parents, node)
        found = read(self.m, site, scope)
        holder = self.m.parents.get(site)
        call = holder if isinstance(holder, ast.Call) and holder.func is site else None
        queue = []
        for qual in held(self.m, found.table, found.values):
            how = f"{found.name} {'is' if found.exact else 'holds'} {qual}"
            queue += self._denoted(qual, site, call, scope, how)
        return queue

    def _denoted(self, qual: str, node: ast.AST, call: ast.Call | None, scope: Scope, how: str | None = None) -> list:
        """What naming ``qual`` at ``node`` (called by ``call``, if it is) reaches in the file or computes.

        ``how`` says how ``node`` came to denote ``qual`` where its text does not show it (a table entry).
        """
        site = call or node
        parent = self.m.parents.get(node)
        text = f"{evidence(site)}, where {how}" if how else None
        if qual in self.m.defs:
            return [(qual, self._self_class(qual, scope), frozenset())]
        if qual.startswith("@") and qual[1:] in self.m.classes and call is None:
            return self._class_methods(qual[1:], None)
        if qual.startswith("@layer:") and call is None and not isinstance(parent, (ast.Assign, ast.For)):
            self.m.add("static_torch_layer", site, text)
        elif qual.startswith("torch."):
            if self._torch_computes(qual, call is not None):
                self.m.add("static_torch_compute", site, text)
        elif qual.startswith("numpy.") and call is not None:
            self.m.add("static_host_compute", site, text)
        elif qual in R.ARITH_BUILTINS and call is not None and self._tensor_argument(call, scope):
            self.m.add("static_torch_compute", site, text)
        elif qual.startswith("operator.") and qual.split(".", 1)[1] in R.OPERATOR_COMPUTE:
            if call is None or self._tensor_argument(call, scope):
                self.m.add("static_torch_compute", site, text)
        return []

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
        if isinstance(call.func, ast.Subscript) and self._names_kernel(call.func.value, scope):
            self.m.launches.add((call.lineno, call.col_offset))
            return []
        callees = self._callees(call.func, scope)
        if not callees:
            self._method_call(call, scope)
        return [item for qual in callees for item in self._called(qual, call, scope)]

    def _names_kernel(self, node: ast.AST, scope: Scope) -> bool:
        """``node`` of ``node[grid](...)`` is a kernel: by name, or as what a lookup in a table of kernels gives."""
        qual = self.m.resolve(node, scope)
        if qual is not None:
            return qual in self.m.kernels
        found = lookup(self.m, node, scope)
        return found is not None and any(q in self.m.kernels for q in held(self.m, found.table, found.values))

    def _callees(self, func: ast.AST, scope: Scope) -> list[str]:
        """What a call of ``func`` can run: the name it denotes, or what the table it reads can give."""
        qual = self.m.resolve(func, scope)
        if qual is not None and qual not in self.m.tables:
            return [qual]
        found = read(self.m, func, scope)
        return held(self.m, found.table, found.values) if found is not None else []

    def _called(self, qual: str, call: ast.Call, scope: Scope) -> list:
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

    def _setup_context(self, qual: str) -> list:
        """The ``setup_context(ctx, inputs, output)`` that an autograd Function's apply runs after forward."""
        found = self.m.lookup(self.m.owner[qual], "setup_context") if qual in self.m.applies else None
        if found is None or found not in self.m.defs:
            return []
        return [(found, self.m.owner[found], self.m.tensor_params(self.m.defs[found], skip_self=True))]

    def _class_methods(self, cls: str, call: ast.Call | None, scope: Scope | None = None) -> list:
        """A class built or called in reach: all its methods are reached (the entry ones with the call's tensors),
        but the backward of an autograd Function, which an evaluation under no_grad never runs."""
        autograd = self.m.derives_from(cls, R.AUTOGRAD_FUNCTION_NAMES)
        items = []
        for qual in [q for q, owner in self.m.owner.items() if owner in {cls} | self._ancestors(cls)]:
            if autograd and qual.rsplit(".", 1)[1] in R.AUTOGRAD_GRADIENT_METHODS:
                continue
            entry = qual.rsplit(".", 1)[1] in ("__init__", "__call__", "forward")
            passed = self._passed_tensors(call, qual, scope, offset=1) if call is not None and entry else frozenset()
            items.append((qual, cls, passed))
        return items
