"""One registry shape for every extension point: tasks, score methods and RoPE families.

A ``Registry`` maps names to entries of one kind. ``register(name, entry, replace=False)`` adds one
(re-running a notebook cell that registers the same name needs ``replace=True``), ``lookup(name)``
returns it or raises a ``ValueError`` naming every registered entry, and ``names()`` lists them as a
sorted tuple. It is a read-only mapping otherwise (``name in registry``, iteration, ``len``), and
``pop(name)`` removes an entry (tests that register a throw-away entry clean up with it).

Installed packages extend a registry through an entry-point group (``psheads.tasks``,
``psheads.score_methods``, ``psheads.families``), the way pytest finds its plugins. An entry point's
name is the name its entry is registered under, and it points to the entry itself: what the
registry's ``register_*`` function takes (a task factory, a score method instance, a ``Family``).
The group is read once, the first time the registry is listed or looked up (not at ``import
psheads``). A plugin that fails to import, is of the wrong kind or takes a name already registered
is skipped with a ``PluginWarning`` naming it and its package; the others still load. Plugins never
replace an entry.
"""

from __future__ import annotations

import logging
import warnings
from collections.abc import Callable, Iterator, Mapping
from typing import Any, Generic, TypeVar

T = TypeVar("T")

logger = logging.getLogger(__name__)


class PluginWarning(UserWarning):
    """An installed plugin (an entry point of a psheads group) could not be loaded and was skipped."""


def named(name: str, entry: Any, kind: str) -> Any:
    """``entry``, when a ``name`` attribute it has is ``name`` (a plugin's entry point and its object agree;
    an object without one is left to the registry's own check of its kind).

    Raises:
        ValueError: the names differ.
    """
    if isinstance(getattr(entry, "name", None), str) and entry.name != name:
        raise ValueError(f"the entry point {name!r} points to a {kind} named {entry.name!r}; "
                         "name the entry point as the object is named")
    return entry


class Registry(Mapping[str, T], Generic[T]):
    """Named entries of one kind.

    Args:
        kind: what an entry is, for messages (``"task"``, ``"score method"``).
        register_with: the public function that adds one, for messages (``"psheads.tasks.register_task"``).
        group: the entry-point group installed packages declare entries in (None: no plugins).
        add: registers one plugin, ``add(entry_point_name, loaded_object)``, checking it as the public
            function does (it raises for a wrong kind or a name clash); needed with ``group``.
    """

    def __init__(self, kind: str, register_with: str, *, group: str | None = None,
                 add: Callable[[str, Any], object] | None = None) -> None:
        if (group is None) != (add is None):
            raise ValueError("group and add go together: give both or neither.")
        self.kind = kind
        self.register_with = register_with
        self.group = group
        self._add = add
        self._plugins_loaded = group is None
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
        if name not in self.entries:
            raise ValueError(f"Unknown {self.kind} {name!r}; registered: {', '.join(self.names())} (add one with "
                             f"{self.register_with}).")
        return self.entries[name]

    def names(self) -> tuple[str, ...]:
        """The registered names, sorted."""
        return tuple(sorted(self.entries))

    def pop(self, name: str) -> T:
        """Remove ``name`` and return its entry (``KeyError`` when absent)."""
        return self.entries.pop(name)

    @property
    def entries(self) -> dict[str, T]:
        """Every entry by name, the installed plugins loaded first (once)."""
        if not self._plugins_loaded:
            self._plugins_loaded = True  # first: a plugin that lists this registry while it loads does not recurse
            self._load_plugins()
        return self._entries

    def _load_plugins(self) -> None:
        from importlib.metadata import entry_points  # here: reading the installed packages costs startup time

        assert self.group is not None and self._add is not None
        for point in sorted(entry_points(group=self.group), key=lambda point: point.name):
            package = f" of package {point.dist.name!r}" if point.dist is not None else ""
            try:
                self._add(point.name, point.load())
            except Exception as err:  # any failure of a third party's code: skip it, keep the rest
                warnings.warn(f"psheads skipped the {self.kind} plugin {point.name!r}{package} ({point.value}, "
                              f"entry-point group {self.group}): {type(err).__name__}: {err}", PluginWarning,
                              stacklevel=4)
            else:
                logger.debug("loaded the %s plugin %r%s", self.kind, point.name, package)

    def __getitem__(self, name: str) -> T:
        return self.entries[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self.entries)

    def __len__(self) -> int:
        return len(self.entries)
