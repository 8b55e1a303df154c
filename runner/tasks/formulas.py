"""Safe evaluation of a task's FLOPs and minimal-bytes formulas.

A formula is a Python arithmetic expression over the shape's dimension names, e.g.
``"2 * m * n * k"``. Only numbers, names, + - * / // % ** and parentheses (plus ``min``,
``max``, ``ceil``, ``log2``) are allowed, so a task's metadata never runs code.
"""

from __future__ import annotations

import ast
import math
import operator

_BINARY = {
    ast.Add: operator.add,
    ast.Sub: operator.sub,
    ast.Mult: operator.mul,
    ast.Div: operator.truediv,
    ast.FloorDiv: operator.floordiv,
    ast.Mod: operator.mod,
    ast.Pow: operator.pow,
}
_FUNCTIONS = {"min": min, "max": max, "ceil": math.ceil, "log2": math.log2}


class FormulaError(ValueError):
    """A formula that is not plain arithmetic over known names."""


def check_formula(expression: str, names: set[str]) -> None:
    """Raise FormulaError unless ``expression`` parses and uses only ``names``."""
    evaluate(expression, {name: 1 for name in names})


def evaluate(expression: str, values: dict[str, float]) -> float:
    """Evaluate ``expression`` with the dimension ``values``."""
    try:
        tree = ast.parse(expression, mode="eval")
    except SyntaxError as exc:
        raise FormulaError(f"formula {expression!r} is not an expression: {exc.msg}") from None
    return float(_eval(tree.body, values, expression))


def _eval(node: ast.AST, values: dict[str, float], expression: str) -> float:
    if isinstance(node, ast.Constant) and isinstance(node.value, (int, float)):
        return node.value
    if isinstance(node, ast.Name):
        if node.id not in values:
            raise FormulaError(f"formula {expression!r} uses unknown name {node.id!r}")
        return values[node.id]
    if isinstance(node, ast.BinOp) and type(node.op) in _BINARY:
        left = _eval(node.left, values, expression)
        right = _eval(node.right, values, expression)
        return _BINARY[type(node.op)](left, right)
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        return -_eval(node.operand, values, expression)
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in _FUNCTIONS
        and not node.keywords
    ):
        args = [_eval(arg, values, expression) for arg in node.args]
        return _FUNCTIONS[node.func.id](*args)
    raise FormulaError(f"formula {expression!r} contains {ast.dump(node)[:40]}…, not arithmetic")
