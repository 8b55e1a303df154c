"""What a candidate file defines: the model the static scans work on.

Owns: ``FileModel`` and its ``Finding``s: definitions (functions, methods, lambdas, classes,
Triton/numba kernels, the ``apply`` of its autograd Functions), the file's tables (names holding callables: ``_OPS = {"mm": torch.mm}``,
read by ``runner/static_tables.py``), and ModelNew's entry points. What names denote (aliases,
what each class stores in ``self.<attr>`` and in its class body, name resolution such as
``F.gelu`` -> ``torch.nn.functional.gelu``) is its base ``NameResolution``, in
``runner/static_names.py``. Findings are collected here; deciding what is a violation is
``runner/static_check.py``'s job.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from runner import static_rules as R
from runner.static_names import MODULE_SCOPE, NameResolution, Scope
from runner.static_tables import Table, bindings, literal_entries, module_statements, stored_values, writes


@dataclass(frozen=True)
class Finding:
    reason: str
    line: int
    evidence: str

    def describe(self) -> str:
        return f"line {self.line}: {self.evidence}"


def evidence(node: ast.AST) -> str:
    text = " ".join(ast.unparse(node).split())
    return text if len(text) <= 80 else text[:77] + "..."


class FileModel(NameResolution):
    """One file: definitions, aliases, what classes keep in ``self``; the findings the scans add."""

    def __init__(self, tree: ast.Module) -> None:
        self.tree = tree
        self.parents = {child: node for node in ast.walk(tree) for child in ast.iter_child_nodes(node)}
        self.findings: set[Finding] = set()
        self.launches: set[tuple[int, int]] = set()
        self.defs: dict[str, ast.AST] = {}  # qual -> FunctionDef | Lambda
        self.owner: dict[str, str] = {}  # method qual -> class name
        self.classes: dict[str, ast.ClassDef] = {}
        self.kernels: set[str] = set()
        self.aliases: dict[str, str] = {}
        self.attrs: dict[str, dict[str, str]] = {}
        self.tables: dict[str, Table] = {}  # "@table:<label>" -> Table
        self.builds_extension = False
        # "@Cls.apply" of the file's autograd Functions -> the leading parameters of forward apply supplies itself.
        self.applies: dict[str, int] = {}
        self._resolving: set[int] = set()  # table entries being resolved: a table that holds itself ends there
        self._register_definitions()
        self.writes = self._table_writes()
        self._register_aliases()
        self._register_applies()  # once the bases resolve; then names bound to an apply (op = _Fn.apply)
        self._alias_pass()
        self.kernels = {q for q, node in self.defs.items() if self._is_kernel(node)}
        self._register_attrs()

    def add(self, reason: str, node: ast.AST, text: str | None = None) -> None:
        self.findings.add(Finding(reason, getattr(node, "lineno", 0), text or evidence(node)))

    # -- what the file defines ------------------------------------------------------------

    def _register_definitions(self) -> None:
        for node in self.tree.body:
            if isinstance(node, ast.ClassDef):
                self.classes[node.name] = node
                for item in node.body:
                    if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        self.defs[f"@{node.name}.{item.name}"] = item
                        self.owner[f"@{node.name}.{item.name}"] = node.name
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                self.defs[f"@{node.name}"] = node
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Lambda):
                self.defs[self._lambda_qual(node)] = node
            elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)) and node not in self.defs.values():
                self.defs[f"@fn:{node.lineno}:{node.col_offset}"] = node

    def _register_applies(self) -> None:
        """``Cls.apply`` of each ``torch.autograd.Function`` of the file that defines forward: a call of it
        runs forward with the call's arguments after ``ctx``, which apply passes itself (none where the
        class defines ``setup_context``, whose forward takes no ``ctx``; apply runs it too, ``Reach``
        reaches it). ``backward`` is not reached: only forward runs in an evaluation (under no_grad)."""
        for name in self.classes:
            forward = self.defs.get(f"@{name}.forward")
            qual = f"@{name}.apply"
            if forward is not None and qual not in self.defs and self.derives_from(name, R.AUTOGRAD_FUNCTION_NAMES):
                self.defs[qual], self.owner[qual] = forward, name
                self.applies[qual] = 0 if self.lookup(name, "setup_context") in self.defs else 1

    def implicit_params(self, qual: str) -> int:
        """How many leading parameters of ``qual`` a call does not pass: ``self``, or the ``ctx`` of an apply."""
        if qual in self.applies:
            return self.applies[qual]
        return 1 if qual in self.owner and self.method_scope(qual).self_name else 0

    @staticmethod
    def _lambda_qual(node: ast.Lambda) -> str:
        return f"@lambda:{node.lineno}:{node.col_offset}"

    def _is_kernel(self, node: ast.AST) -> bool:
        for decorator in getattr(node, "decorator_list", []):
            target = decorator.func if isinstance(decorator, ast.Call) else decorator
            if self.resolve(target, MODULE_SCOPE) in R.KERNEL_DECORATORS:
                return True
        return False

    # -- tables -------------------------------------------------------------------------------

    def _table_writes(self) -> dict[str, list[ast.expr]]:
        """Values stored into a module-level name or a ``self.<attr>`` after it is bound, by table label."""
        found: dict[str, list[ast.expr]] = {}
        for node in ast.walk(self.tree):
            for container, values in writes(node):
                if isinstance(container, ast.Name):
                    found.setdefault(container.id, []).extend(values)
        for qual, method in self.defs.items():
            self_name = self.method_scope(qual).self_name if qual in self.owner else None
            if self_name is None:
                continue
            for node in ast.walk(method):
                for container, values in writes(node):
                    if isinstance(container, ast.Attribute) and getattr(container.value, "id", None) == self_name:
                        found.setdefault(f"{self.owner[qual]}.{container.attr}", []).extend(values)
        return found

    def _register_module_tables(self) -> None:
        """Module-level names bound to something that is not a name but holds values (``_OPS = {...}``)."""
        for statement in module_statements(self.tree):
            for name, value in bindings(statement):
                if name not in self.aliases:
                    qual = self._table(name, value, MODULE_SCOPE)
                    if qual is not None:
                        self.aliases[name] = qual

    def _table(self, label: str, value: ast.expr, scope: Scope) -> str | None:
        """Register what ``label`` holds when bound to ``value``; its qual, or None where it holds nothing."""
        qual = f"@table:{label}"
        if qual in self.tables:  # bound again: any of its bindings may be the one read
            self.tables[qual].write(stored_values(value))
            return qual
        table = Table(label, scope, stored_values(value), literal_entries(value))
        if label in self.writes:
            table.write(self.writes[label])
        if not table.values:
            return None
        self.tables[qual] = table
        return qual

    def stored_qual(self, value: ast.expr, table: Table) -> str | None:
        """What a value stored in ``table`` denotes (a table holding itself denotes nothing more)."""
        if id(value) in self._resolving:
            return None
        self._resolving.add(id(value))
        try:
            return self._value_kind(value, table.label, table.scope)
        finally:
            self._resolving.discard(id(value))

    # -- entry points ------------------------------------------------------------------------

    def roots(self) -> list[tuple[str, str, frozenset[str]]] | None:
        """ModelNew's entry points as (qual, self class, tensor parameters); None where there are none."""
        model_new = self.classes.get("ModelNew")
        if model_new is None:
            bound = [n for n in self.tree.body if "ModelNew" in {getattr(t, "id", None) for t in _bound_names(n)}]
            if bound:
                self.add("static_opaque_model_new", bound[0], "ModelNew is bound but not defined as a class")
            else:
                self.findings.add(Finding("static_no_model_new", 0, "the candidate defines no ModelNew"))
            return None
        if not self.derives_from("ModelNew", R.NN_MODULE_NAMES):
            self.add("static_opaque_model_new", model_new, "ModelNew does not derive from torch.nn.Module")
        roots = []
        for entry in ("forward", "__call__"):
            qual = self.lookup("ModelNew", entry)
            if qual is not None and qual in self.defs:
                roots.append((qual, "ModelNew", self.tensor_params(self.defs[qual], skip_self=True)))
        roots += [(q, "ModelNew", frozenset()) for q in self._patched_entries()]
        if not roots:
            self.add("static_opaque_model_new", model_new, "ModelNew has no forward defined in the file")
            return None
        return roots

    def _patched_entries(self) -> list[str]:
        """``ModelNew.forward = f`` and forward hooks: code that runs on a call besides forward itself."""
        quals = []
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Assign):
                for target in node.targets:
                    if (
                        isinstance(target, ast.Attribute)
                        and target.attr in ("forward", "__call__")
                        and self.resolve(target.value, MODULE_SCOPE) == "@ModelNew"
                    ):
                        quals.append(self.resolve(node.value, MODULE_SCOPE))
            if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.args:
                if node.func.attr in R.HOOK_REGISTRARS:
                    method = self._enclosing_method(node)
                    scope = self.method_scope(method) if method else MODULE_SCOPE
                    quals.append(self.resolve(node.args[0], scope))
        return [q for q in quals if q and q in self.defs]

    def _enclosing_method(self, node: ast.AST) -> str | None:
        while node in self.parents:
            node = self.parents[node]
            for qual, definition in self.defs.items():
                if definition is node and qual in self.owner:
                    return qual
        return None

    def method_scope(self, qual: str, self_cls: str | None = None) -> Scope:
        node = self.defs[qual]
        args = node.args.posonlyargs + node.args.args
        cls = self_cls or self.owner.get(qual)
        if cls and args and not self._is_static(node):
            return Scope(cls=cls, self_name=args[0].arg)
        return Scope()

    def _is_static(self, node: ast.AST) -> bool:
        decorators = getattr(node, "decorator_list", [])
        return any(isinstance(d, ast.Name) and d.id == "staticmethod" for d in decorators)

    def tensor_params(self, node: ast.AST, skip_self: bool) -> frozenset[str]:
        args = node.args.posonlyargs + node.args.args
        if skip_self:
            args = args[1:]
        names = {a.arg for a in args if not _scalar_annotation(a)}
        if node.args.vararg is not None:
            names.add(node.args.vararg.arg)
        return frozenset(names)


def _scalar_annotation(arg: ast.arg) -> bool:
    return isinstance(arg.annotation, ast.Name) and arg.annotation.id in ("int", "float", "bool", "str")


def _bound_names(node: ast.AST) -> list[ast.AST]:
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        return [ast.Name(id=node.name)]
    if isinstance(node, ast.Assign):
        return [t for target in node.targets for t in ast.walk(target) if isinstance(t, ast.Name)]
    if isinstance(node, (ast.Import, ast.ImportFrom)):
        return [ast.Name(id=(a.asname or a.name).split(".")[0]) for a in node.names]
    return []
