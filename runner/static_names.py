"""What a candidate file's names denote: aliases, what classes hold, and name resolution.

Owns: ``Scope`` (the names seen inside one function) and ``MODULE_SCOPE``, helpers on names
and constant strings (``matches``, ``folded_string``), and ``NameResolution``, the base of
``FileModel`` (``runner/static_model.py``) that registers aliases (imports and name-to-name
assignments), records what each class stores in ``self.<attr>`` and in its class body, and
resolves expressions to qualified names (``F.gelu`` -> ``torch.nn.functional.gelu``,
``self.helper`` -> ``@Cls.helper``, ``_OPS["mm"]`` -> ``torch.mm``, ``vars(torch)["mm"]`` -> ``torch.mm``). It reads the definitions
and tables that ``FileModel`` keeps; it records no findings and judges nothing.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from runner import static_rules as R
from runner.static_tables import bindings, lookup, lookup_parts


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


class NameResolution:
    """What the names of one file denote; the base of ``FileModel``, whose definitions and tables it reads."""

    # -- aliases ------------------------------------------------------------------------------

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
        self._alias_pass()
        self._alias_pass()  # twice, for chains (a = torch; b = a.nn)
        self._register_module_tables()
        self._alias_pass()  # names bound to a table or to one of its entries (ops = _OPS; mm = _OPS["mm"])
        self.builds_extension = any(
            isinstance(n, ast.Call) and self.call_qual(n) in R.EXTENSION_BUILDERS for n in ast.walk(self.tree)
        )

    def _alias_pass(self) -> None:
        for node in ast.walk(self.tree):
            for name, value in bindings(node):
                if isinstance(value, ast.Call) and self.call_qual(value) in R.EXTENSION_BUILDERS:
                    self.aliases[name] = f"@ext:{name}"
                    continue
                qual = self.resolve(value, MODULE_SCOPE)
                if qual is not None and (
                    not qual.startswith("@") or qual in self.defs or qual[1:] in self.classes or qual in self.tables
                ):
                    self.aliases[name] = qual

    # -- what classes hold ----------------------------------------------------------------------

    def _register_attrs(self) -> None:
        """What each class stores in ``self.<attr>``: a layer, a tensor, an extension, or a reference."""
        for name, cls in self.classes.items():
            attrs = self.attrs.setdefault(name, {})
            for item in cls.body:
                for attr, value in bindings(item):
                    kind = self._attr_kind(value, f"{name}.{attr}", MODULE_SCOPE)
                    if _replaces(kind, attrs.get(attr)):
                        attrs[attr] = kind
            for item in cls.body:
                if not isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) or not item.args.args:
                    continue
                self_name = item.args.args[0].arg
                scope = Scope(cls=name, self_name=self_name)
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
                            kind = self._attr_kind(node.value, f"{name}.{target.attr}", scope)
                            if _replaces(kind, attrs.get(target.attr)):
                                attrs[target.attr] = kind

    def _attr_kind(self, value: ast.AST, key: str, scope: Scope) -> str | None:
        """What ``self.<attr>`` (``key`` is ``Cls.attr``) holds once bound to ``value``: a name, a layer, a table."""
        kind = self._value_kind(value, key, scope)
        return kind if kind is not None else self._table(key, value, scope)

    def _value_kind(self, value: ast.AST, key: str, scope: Scope) -> str | None:
        """What a stored value is: the layer, tensor, extension, instance or compiled callable a call builds, or a name."""
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
        return self.resolve(value, scope)

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
        found = lookup(self, node, scope)
        if found is not None:
            return self.stored_qual(found.values[0], found.table) if found.exact else None
        if isinstance(node, ast.Call) and self.resolve(node.func, scope) == "builtins.getattr" and len(node.args) >= 2:
            name = folded_string(node.args[1])
            return self._member(self.resolve(node.args[0], scope), name) if name else None
        if isinstance(node, ast.Subscript):
            base = self.resolve(node.value, scope)
            if base and base.startswith("@layer:"):
                return base
        read = self.namespace_read(node, scope)
        if read is not None and read[1] is not None:  # vars(torch)["matmul"] is torch.matmul, as getattr is
            return self._member(self.resolve(read[0], scope), read[1])
        return None

    def namespace_read(self, node: ast.AST, scope: Scope) -> tuple[ast.expr, str | None] | None:
        """(``X``, the key folded, or None where it is known only at run time) of a read of an object's
        namespace by key: ``vars(X)[k]``, ``X.__dict__[k]``, ``vars(X).get(k)``; None for anything else."""
        parts = lookup_parts(node)
        namespace = self.namespace_of(parts[0], scope) if parts is not None else None
        return (namespace, folded_string(parts[1])) if namespace is not None else None

    def namespace_of(self, node: ast.AST, scope: Scope) -> ast.expr | None:
        """``X`` of ``X.__dict__`` or ``vars(X)``: the object whose namespace is read or written."""
        if isinstance(node, ast.Attribute) and node.attr == "__dict__":
            return node.value
        if isinstance(node, ast.Call) and self.resolve(node.func, scope) == "builtins.vars" and node.args:
            return node.args[0]
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

    def derives_from(self, cls: str, externals: frozenset[str], seen: frozenset = frozenset()) -> bool:
        """Whether a class of the file derives from one of ``externals`` (``torch.nn.Module``), through the file's classes."""
        for base in self.classes[cls].bases:
            qual = self.resolve(base, MODULE_SCOPE)
            if qual in externals:
                return True
            if qual and qual.startswith("@") and qual[1:] in self.classes and qual[1:] not in seen:
                if self.derives_from(qual[1:], externals, seen | {cls}):
                    return True
        return False


def _replaces(kind: str | None, known: str | None) -> bool:
    """Whether a binding of an attribute replaces what it was known to hold: a table (a value that
    holds others) never replaces a layer, a tensor or a name found in another binding."""
    if kind is None:
        return False
    return known is None or known.startswith("@table:") or not kind.startswith("@table:")
