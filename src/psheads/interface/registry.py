"""One registry shape for every extension point: tasks, score methods and RoPE families.

A ``Registry`` maps names to entries of one kind. ``register(name, entry, replace=False)`` adds one
(re-running a notebook cell that registers the same name needs ``replace=True``), ``lookup(name)``
returns it or raises a ``ValueError`` naming every registered entry, and ``names()`` lists them as a
sorted tuple. It is a read-only mapping otherwise (``name in registry``, iteration, ``len``), and
``pop(name)`` removes an entry (tests that register a throw-away entry clean up with it).
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Generic, TypeVar

T = TypeVar("T")


class Registry(Mapping[str, T], Generic[T]):
    """Named entries of one kind.

    Args:
        kind: what an entry is, for messages (``"task"``, ``"score method"``).
        register_with: the public function that adds one, for messages (``"psheads.tasks.register_task"``).
    """

    def __init__(self, kind: str, register_with: str) -> None:
        self.kind = kind
        self.register_with = register_with
        self._entries: dict[str, T] = {}

    def register(self, name: str, entry: T, *, replace: bool = False) -> T:
        """Add ``entry`` under ``name`` and return it.

        Raises:
            ValueError: ``name`` is empty or not a string, or already registered and ``replace`` is False.
        """
        if not isinstance(name, str) or not name:
            raise ValueError(f"A {self.kind} name must be a non-empty string, got {name!r}.")
        if not isinstance(replace, bool):
            raise TypeError(f"replace must be True or False, got {type(replace).__name__}.")
        if name in self._entries and not replace:
            raise ValueError(f"A {self.kind} named {name!r} is already registered; pass replace=True to replace it "
                             "(for example when re-running a notebook cell).")
        self._entries[name] = entry
        return entry

    def lookup(self, name: str) -> T:
        """The entry registered as ``name``.

        Raises:
            TypeError: ``name`` is not a string.
            ValueError: nothing is registered under ``name`` (the message lists what is).
        """
        if not isinstance(name, str):
            raise TypeError(f"name must be a {self.kind} name (a string: one of {', '.join(self.names())}), got "
                            f"{type(name).__name__}.")
        if name not in self._entries:
            raise ValueError(f"Unknown {self.kind} {name!r}; registered: {', '.join(self.names())} (add one with "
                             f"{self.register_with}).")
        return self._entries[name]

    def names(self) -> tuple[str, ...]:
        """The registered names, sorted."""
        return tuple(sorted(self._entries))

    def pop(self, name: str) -> T:
        """Remove ``name`` and return its entry (``KeyError`` when absent)."""
        return self._entries.pop(name)

    def __getitem__(self, name: str) -> T:
        return self._entries[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._entries)

    def __len__(self) -> int:
        return len(self._entries)
