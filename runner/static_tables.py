"""Tables: names that hold callables without being one (``_OPS = {"mm": torch.mm}``), read syntactically.

Owns: what a table holds (the value expressions stored in it: the elements of a dict, list or
tuple literal, the arguments of ``dict(mm=torch.mm)`` or ``functools.partial(torch.mm)``, and
whatever is written into it later with ``T[k] = v``, ``T.update(...)``, ``T.append(...)``),
its literal entries by constant key while nothing else is written into it, and which of its
values a lookup (``T["mm"]``, ``T[0]``, ``T.get("mm")``) can return. It judges nothing and
names nothing itself: ``FileModel`` says what a stored expression denotes (``stored_qual``) and
keeps the tables, ``Reach`` decides what reading them from forward reaches or computes.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # static_model and static_names use this module: type-only imports, no cycle at run time
    from runner.static_model import FileModel
    from runner.static_names import Scope

# Methods that return an entry of a mapping or a sequence: ``T.get("mm")`` reads as ``T["mm"]``.
LOOKUP_METHODS = frozenset({"get", "__getitem__", "pop", "setdefault"})
# Methods that store their arguments into a container.
WRITE_METHODS = frozenset({"update", "append", "appendleft", "extend", "insert", "setdefault", "add", "__setitem__"})
NO_KEY = object()


@dataclass
class Table:
    """One table: how findings name it, where its values are resolved, what it can hold."""

    label: str  # "_OPS" for a module-level name, "ModelNew.ops" for a class attribute or ``self.ops``
    scope: Scope  # where its value expressions are resolved
    values: list[ast.expr] = field(default_factory=list)
    entries: dict | None = None  # constant key -> the literal's entry; None once the keys cannot be read

    def write(self, values: list[ast.expr]) -> None:
        """Values stored after the binding: every lookup may now return any of them."""
        self.values += values
        self.entries = None

    def lookup(self, key: object) -> list[ast.expr] | None:
        """The entry a constant ``key`` selects ([] where there is none); None where that cannot be known."""
        if key is NO_KEY or self.entries is None:
            return None
        return [self.entries[key]] if key in self.entries else []


def stored_values(node: ast.AST) -> list[ast.expr]:
    """What storing ``node`` keeps: names, attributes, lambdas and call results, containers opened up.

    A called function is not kept (``torch.randn(4)`` keeps the tensor, not ``torch.randn``);
    its arguments are (``functools.partial(torch.mm)`` keeps ``torch.mm``). Dict keys are not.
    """
    if isinstance(node, (ast.Name, ast.Attribute, ast.Lambda, ast.Subscript)):
        return [node]
    if isinstance(node, ast.Dict):
        return [v for value in node.values for v in stored_values(value)]
    if isinstance(node, ast.Call):
        arguments = [*node.args, *(k.value for k in node.keywords)]
        return [node] + [v for arg in arguments for v in stored_values(arg)]
    return [v for child in ast.iter_child_nodes(node) for v in stored_values(child)]


def literal_entries(node: ast.AST) -> dict | None:
    """A literal container's entries by constant key (``{"mm": f}``, ``(f, g)``, ``dict(mm=f)``); None otherwise."""
    if isinstance(node, ast.Dict):
        keys = [constant_key(k) if k is not None else NO_KEY for k in node.keys]
        return None if any(k is NO_KEY for k in keys) else dict(zip(keys, node.values))
    if isinstance(node, (ast.List, ast.Tuple)):
        if any(isinstance(e, ast.Starred) for e in node.elts):
            return None
        count = len(node.elts)
        return {i: e for i, e in enumerate(node.elts)} | {i - count: e for i, e in enumerate(node.elts)}
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id == "dict" and not node.args:
        if any(k.arg is None for k in node.keywords):
            return None
        return {k.arg: k.value for k in node.keywords}
    return None


def constant_key(node: ast.AST) -> object:
    """The value of a constant subscript (``"mm"``, ``0``, ``-1``), or NO_KEY.

    A key built at run time (or folded from pieces) leaves the lookup open: it may return any value.
    """
    if isinstance(node, ast.Constant):
        return node.value
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub) and isinstance(node.operand, ast.Constant):
        value = node.operand.value
        return -value if isinstance(value, (int, float)) and not isinstance(value, bool) else NO_KEY
    return NO_KEY


def lookup_parts(node: ast.AST) -> tuple[ast.expr, ast.expr] | None:
    """(container, key) of ``C[key]`` or ``C.get(key)``; None for anything else."""
    if isinstance(node, ast.Subscript) and isinstance(node.ctx, ast.Load):
        return node.value, node.slice
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Attribute)
        and node.func.attr in LOOKUP_METHODS
        and node.args
    ):
        return node.func.value, node.args[0]
    return None


def lookup_site(parents: dict, node: ast.AST) -> ast.AST:
    """The lookup that reads ``node`` (``node[k]``, ``node.get(k)``), or ``node`` itself where none does."""
    parent = parents.get(node)
    if isinstance(parent, ast.Subscript) and parent.value is node and isinstance(parent.ctx, ast.Load):
        return parent
    if isinstance(parent, ast.Attribute) and parent.value is node and parent.attr in LOOKUP_METHODS:
        call = parents.get(parent)
        if isinstance(call, ast.Call) and call.func is parent and call.args:
            return call
    return node


def bindings(node: ast.AST) -> list[tuple[str, ast.expr]]:
    """(name, value) pairs an assignment binds: ``a = v``, ``a: T = v``, ``a, b = v, w``."""
    if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
        return [(node.target.id, node.value)]
    if not isinstance(node, ast.Assign) or len(node.targets) != 1:
        return []
    target, value = node.targets[0], node.value
    if isinstance(target, ast.Name):
        return [(target.id, value)]
    if (
        isinstance(target, (ast.Tuple, ast.List))
        and isinstance(value, (ast.Tuple, ast.List))
        and len(target.elts) == len(value.elts)
        and not any(isinstance(e, ast.Starred) for e in [*target.elts, *value.elts])
    ):
        return [(t.id, v) for t, v in zip(target.elts, value.elts) if isinstance(t, ast.Name)]
    return []


def module_statements(tree: ast.Module) -> list[ast.stmt]:
    """Statements that run at import time: the module body and its blocks, not function or class bodies."""
    found, stack = [], list(tree.body)
    while stack:
        statement = stack.pop()
        found.append(statement)
        if not isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            stack += [c for c in ast.iter_child_nodes(statement) if isinstance(c, ast.stmt)]
            stack += [s for h in getattr(statement, "handlers", []) for s in h.body]
    return found


def writes(node: ast.AST) -> list[tuple[ast.expr, list[ast.expr]]]:
    """(container, stored values) for a statement or call that writes into a container."""
    if isinstance(node, ast.Assign):
        return [(t.value, stored_values(node.value)) for t in node.targets if isinstance(t, ast.Subscript)]
    if isinstance(node, ast.AugAssign):
        target = node.target.value if isinstance(node.target, ast.Subscript) else node.target
        return [(target, stored_values(node.value))]
    if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr in WRITE_METHODS:
        arguments = [*node.args, *(k.value for k in node.keywords)]
        return [(node.func.value, [v for arg in arguments for v in stored_values(arg)])]
    return []


@dataclass(frozen=True)
class Lookup:
    """One read of a table: the table, how a finding names what was read, the values it can give."""

    table: Table
    name: str
    values: list[ast.expr]
    exact: bool  # a constant key selected one entry that is a single value, not a nested container


def lookup(model: FileModel, node: ast.AST, scope: Scope) -> Lookup | None:
    """``T[k]`` or ``T.get(k)`` on a table of ``model``; None for anything else."""
    parts = lookup_parts(node)
    table = model.tables.get(model.resolve(parts[0], scope)) if parts is not None else None
    if table is None:
        return None
    key = constant_key(parts[1])
    entry = table.lookup(key)
    if entry is None:
        return Lookup(table, table.label, table.values, False)
    values = [v for e in entry for v in stored_values(e)]
    return Lookup(table, f"{table.label}[{key!r}]", values, len(entry) == 1 and values == entry)


def read(model: FileModel, node: ast.AST, scope: Scope) -> Lookup | None:
    """What reading ``node`` gives where it is a table (all it holds) or a lookup in one; None otherwise."""
    if isinstance(node, (ast.Name, ast.Attribute)):
        table = model.tables.get(model.resolve(node, scope))
        return Lookup(table, table.label, table.values, False) if table is not None else None
    return lookup(model, node, scope)


def held(model: FileModel, table: Table, values: list[ast.expr], seen: frozenset[str] = frozenset()) -> list[str]:
    """The names ``values`` (stored in ``table``) denote, tables among them opened up."""
    quals = []
    for value in values:
        qual = model.stored_qual(value, table)
        inner = model.tables.get(qual)
        if inner is not None and inner.label not in seen | {table.label}:
            quals += held(model, inner, inner.values, seen | {table.label})
        elif inner is None and qual is not None:
            quals.append(qual)
    return quals
