"""What a candidate file defines and what its names denote: the model the static scans work on.

Owns: definitions (functions, methods, lambdas, classes, Triton/numba kernels), aliases
(imports and name-to-name assignments), what each class stores in ``self.<attr>``, name
resolution (``F.gelu`` -> ``torch.nn.functional.gelu``, ``self.helper`` -> ``@Cls.helper``),
and ModelNew's entry points. Findings are collected here; deciding what is a violation is
``runner/static_check.py``'s job.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from runner import static_rules as R


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


def matches(qual: str, prefixes) -> bool:
    return any(qual == p or qual.startswith(p + ".") for p in prefixes)


def folded_string(node: ast.AST) -> str | None:
    """A string built from constants only ("mat" + "mul", f"{'mat'}mul", "".join([...]))."""
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Add):
        left, right = folded_string(node.left), folded_string(node.right)
        return left + right if left is not None and right is not None else None
    if isinstance(node, ast.JoinedStr):
        parts = [folded_string(v.value if isinstance(v, ast.FormattedValue) else v) for v in node.values]
        return "".join(parts) if all(p is not None for p in parts) else None
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "join":
        sep = folded_string(node.func.value)
        items = node.args[0].elts if node.args and isinstance(node.args[0], (ast.List, ast.Tuple)) else None
        parts = [folded_string(e) for e in items] if items is not None and sep is not None else [None]
        return sep.join(parts) if all(p is not None for p in parts) else None
    return None


@dataclass
class Scope:
    """Names seen inside one function: its class (for ``self``), local aliases, tensor-valued names."""

    cls: str | None = None
    self_name: str | None = None
    locals: dict[str, str] | None = None
    tensors: frozenset[str] = frozenset()
    permuted: frozenset[str] = frozenset()  # names bound to a transposed/permuted/strided view


MODULE_SCOPE = Scope()


class FileModel:
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
        self.builds_extension = False
        self._register_definitions()
        self._register_aliases()
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

    @staticmethod
    def _lambda_qual(node: ast.Lambda) -> str:
        return f"@lambda:{node.lineno}:{node.col_offset}"

    def _is_kernel(self, node: ast.AST) -> bool:
        for decorator in getattr(node, "decorator_list", []):
            target = decorator.func if isinstance(decorator, ast.Call) else decorator
            if self.resolve(target, MODULE_SCOPE) in R.KERNEL_DECORATORS:
                return True
        return False

    def _register_aliases(self) -> None:
        """Imports and name-to-name assignments anywhere in the file (flow-insensitive)."""
        for node in ast.walk(self.tree):
            if isinstance(node, ast.Import):
                for alias in node.names:
                    if alias.asname:
                        self.aliases[alias.asname] = alias.name
                    else:
                        first = alias.name.split(".")[0]
                        self.aliases[first] = first
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                for alias in node.names:
                    self.aliases[alias.asname or alias.name] = f"{node.module}.{alias.name}"
        for _ in range(2):  # twice, for chains (a = torch; b = a.nn)
            for node in ast.walk(self.tree):
                if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                    name = node.targets[0].id
                    if isinstance(node.value, ast.Call) and self.call_qual(node.value) in R.EXTENSION_BUILDERS:
                        self.aliases[name] = f"@ext:{name}"
                        continue
                    qual = self.resolve(node.value, MODULE_SCOPE)
                    if qual is not None and (not qual.startswith("@") or qual in self.defs or qual[1:] in self.classes):
                        self.aliases[name] = qual
        self.builds_extension = any(
            isinstance(n, ast.Call) and self.call_qual(n) in R.EXTENSION_BUILDERS for n in ast.walk(self.tree)
        )

    def _register_attrs(self) -> None:
        """What each class stores in ``self.<attr>``: a layer, a tensor, an extension, or a reference."""
        for name, cls in self.classes.items():
            attrs = self.attrs.setdefault(name, {})
            for item in cls.body:
                if not isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) or not item.args.args:
                    continue
                self_name = item.args.args[0].arg
                for node in ast.walk(item):
                    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
                        if node.func.attr in ("register_buffer", "register_parameter") and node.args:
                            key = folded_string(node.args[0])
                            if key:
                                attrs[key] = f"@tensor:{name}.{key}"
                    if not isinstance(node, (ast.Assign, ast.AnnAssign)) or node.value is None:
                        continue
                    targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                    for target in targets:
                        if (
                            isinstance(target, ast.Attribute)
                            and isinstance(target.value, ast.Name)
                            and target.value.id == self_name
                        ):
                            kind = self._attr_kind(node.value, f"{name}.{target.attr}")
                            if kind is not None:
                                attrs[target.attr] = kind

    def _attr_kind(self, value: ast.AST, key: str) -> str | None:
        if isinstance(value, ast.Call):
            qual = self.call_qual(value)
            if qual is None:
                return None
            if qual in R.EXTENSION_BUILDERS:
                return f"@ext:{key}"
            if qual.startswith("@") and qual[1:] in self.classes:
                return qual
            if matches(qual, R.TORCH_CALLABLE_MAKERS):
                return qual
            if qual.startswith("torch.nn.") and qual.rsplit(".", 1)[1] in R.NN_CONTAINERS:
                inner = [self.call_qual(n) for n in ast.walk(value) if isinstance(n, ast.Call) and n is not value]
                return f"@layer:{key}" if any(self.is_layer_class(q) for q in inner) else None
            if self.is_layer_class(qual):
                return f"@layer:{key}"
            if qual.startswith("torch."):
                return f"@tensor:{key}"
            return None
        return self.resolve(value, MODULE_SCOPE)

    @staticmethod
    def is_layer_class(qual: str | None) -> bool:
        if not qual or not qual.startswith("torch.nn."):
            return False
        last = qual.rsplit(".", 1)[1]
        return last[:1].isupper() and last not in R.NN_NOT_LAYERS

    def call_qual(self, call: ast.Call, scope: Scope = MODULE_SCOPE) -> str | None:
        return self.resolve(call.func, scope)

    # -- name resolution --------------------------------------------------------------------

    def resolve(self, node: ast.AST, scope: Scope) -> str | None:
        """The qualified name an expression denotes (``torch.matmul``, ``@helper``, ``@Cls.method``), or None."""
        if isinstance(node, ast.Name):
            if node.id in scope.tensors:
                return None
            if scope.locals and node.id in scope.locals:
                return scope.locals[node.id]
            if scope.cls and node.id == scope.self_name:
                return f"@{scope.cls}"
            if node.id in self.aliases:
                return self.aliases[node.id]
            if f"@{node.id}" in self.defs or node.id in self.classes:
                return f"@{node.id}"
            return f"builtins.{node.id}" if node.id in R.BUILTINS else None
        if isinstance(node, ast.Attribute):
            if (
                isinstance(node.value, ast.Call)
                and isinstance(node.value.func, ast.Name)
                and node.value.func.id == "super"
                and scope.cls
            ):
                return self._lookup_in_bases(scope.cls, node.attr)
            return self._member(self.resolve(node.value, scope), node.attr)
        if isinstance(node, ast.Lambda):
            return self._lambda_qual(node)
        if isinstance(node, ast.Call) and self.resolve(node.func, scope) == "builtins.getattr" and len(node.args) >= 2:
            name = folded_string(node.args[1])
            return self._member(self.resolve(node.args[0], scope), name) if name else None
        if isinstance(node, ast.Subscript):
            base = self.resolve(node.value, scope)
            if base and base.startswith("@layer:"):
                return base
            key = folded_string(node.slice)
            if key and isinstance(node.value, ast.Attribute) and node.value.attr == "__dict__":
                return self._member(self.resolve(node.value.value, scope), key)
            if key and isinstance(node.value, ast.Call) and self.resolve(node.value.func, scope) == "builtins.vars":
                return self._member(self.resolve(node.value.args[0], scope), key) if node.value.args else None
        return None

    def _member(self, base: str | None, attr: str) -> str | None:
        if base is None:
            return None
        if base.startswith("@ext:"):
            return base
        if base.startswith("@layer:"):
            return base if attr in ("forward", "__call__") else f"@tensor:{base[7:]}.{attr}"
        if base.startswith("@") and base[1:] in self.classes:
            return self.lookup(base[1:], attr)
        if base.startswith("@"):
            return None
        return f"{base}.{attr}"

    def bases(self, cls: str) -> list[str]:
        names = [self.resolve(b, MODULE_SCOPE) for b in self.classes[cls].bases]
        return [n[1:] for n in names if n and n.startswith("@") and n[1:] in self.classes and n[1:] != cls]

    def lookup(self, cls: str, attr: str, seen: frozenset = frozenset()) -> str | None:
        if cls in seen:
            return None
        if f"@{cls}.{attr}" in self.defs:
            return f"@{cls}.{attr}"
        if attr in self.attrs.get(cls, {}):
            return self.attrs[cls][attr]
        for base in self.bases(cls):
            found = self.lookup(base, attr, seen | {cls})
            if found is not None:
                return found
        return None

    def _lookup_in_bases(self, cls: str, attr: str) -> str | None:
        for base in self.bases(cls):
            found = self.lookup(base, attr)
            if found is not None:
                return found
        external = [self.resolve(b, MODULE_SCOPE) for b in self.classes[cls].bases]
        return next((f"{q}.{attr}" for q in external if q and not q.startswith("@")), None)

    def _is_module_class(self, cls: str, seen: frozenset = frozenset()) -> bool:
        for base in self.classes[cls].bases:
            qual = self.resolve(base, MODULE_SCOPE)
            if qual in R.NN_MODULE_NAMES:
                return True
            if qual and qual.startswith("@") and qual[1:] in self.classes and qual[1:] not in seen:
                if self._is_module_class(qual[1:], seen | {cls}):
                    return True
        return False

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
        if not self._is_module_class("ModelNew"):
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
