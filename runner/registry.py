"""A small lazy registry with a "did you mean" error, shared by methods and executors."""

from __future__ import annotations

import difflib
from collections.abc import Callable
from typing import Generic, TypeVar

T = TypeVar("T")


class UnknownName(KeyError):
    def __str__(self) -> str:
        return str(self.args[0])


class Registry(Generic[T]):
    """Maps names to factories that import their module only when first asked for."""

    def __init__(self, what: str) -> None:
        self.what = what
        self._factories: dict[str, Callable[[], T]] = {}
        self._loaded: dict[str, T] = {}

    def register(self, name: str, factory: Callable[[], T]) -> None:
        self._factories[name] = factory

    def names(self) -> list[str]:
        return sorted(self._factories)

    def get(self, name: str) -> T:
        if name not in self._factories:
            close = difflib.get_close_matches(name, self._factories, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise UnknownName(f"unknown {self.what} {name!r} (known: {', '.join(self.names())}){hint}")
        if name not in self._loaded:
            self._loaded[name] = self._factories[name]()
        return self._loaded[name]
