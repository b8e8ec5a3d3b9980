"""Run-time checks of psheads' jaxtyping shapes in the test session (``install``, from ``tests/__init__.py``).

Every function, method and dataclass of psheads whose annotations name a shape
(``Float[Tensor, "batch head"]``) runs under ``jaxtyping.jaxtyped`` with beartype: a tensor of the
wrong rank, or dims named alike that disagree across one call's arguments and result, raise
``jaxtyping.TypeCheckError``. Only the shapes are checked: psheads validates its other arguments
itself, with the messages its tests expect (a float where an int belongs is a TypeError that says
what to pass), and a function without shapes is left as it is (no extra stack frame moves the line
a warning points at). Inside ``torch.compile``'s tracing the shapes are symbolic: the function runs
unchecked there.
"""

from __future__ import annotations

import functools
import importlib.abc
import importlib.machinery
import importlib.util
import inspect
import sys
import typing
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType
from typing import Any

import jaxtyping
import torch
from beartype import beartype


def shaped_modules() -> list[str]:
    """The psheads modules that declare jaxtyping shapes (they import jaxtyping), found without
    importing psheads."""
    spec = importlib.util.find_spec("psheads")
    if spec is None or not spec.submodule_search_locations:
        raise ImportError("psheads is not installed: pip install -e '.[test]'")
    root = Path(next(iter(spec.submodule_search_locations)))
    return sorted(".".join(("psheads", *path.relative_to(root).with_suffix("").parts))
                  for path in root.rglob("*.py") if "from jaxtyping import" in path.read_text(encoding="utf-8"))


def has_shape(hint: Any) -> bool:
    """Whether ``hint`` is a jaxtyping array type or holds one (``X | None``, ``tuple[X, Y]``, …)."""
    if isinstance(hint, type) and issubclass(hint, jaxtyping.AbstractArray):
        return True
    return any(has_shape(arg) for arg in typing.get_args(hint))


def shapes_only(fn: Callable[..., Any]) -> Callable[..., Any]:
    """The type checker ``jaxtyped`` applies: beartype over the annotations that carry a shape.

    ``fn`` is the stand-in that ``jaxtyped`` builds from the real function's signature, its
    annotations evaluated; the others become ``Any``.
    """
    fn.__annotations__ = {name: hint if has_shape(hint) else Any for name, hint in fn.__annotations__.items()}
    return beartype(fn)


def declares_shapes(fn: Callable[..., Any]) -> bool:
    """Whether one of ``fn``'s annotations (strings, under ``from __future__ import annotations``) is a shape."""
    for hint in getattr(fn, "__annotations__", {}).values():
        try:
            value = eval(hint, fn.__globals__) if isinstance(hint, str) else hint  # psheads' own annotations
        except Exception:  # a name imported for type checkers only: not a shape psheads could check
            continue
        if has_shape(value):
            return True
    return False


def checked(fn: Callable[..., Any]) -> Callable[..., Any]:
    """``fn`` with its shapes checked on every call, outside ``torch.compile``'s tracing."""
    typed = jaxtyping.jaxtyped(fn, typechecker=shapes_only)

    @functools.wraps(fn)
    def call(*args: Any, **kwargs: Any) -> Any:
        if torch.compiler.is_compiling():
            return fn(*args, **kwargs)
        return typed(*args, **kwargs)

    return call


VALIDATED_BY_PSHEADS = frozenset({"TaskBatch"})
"""Dataclasses (by name) whose fields are not checked when built: users' tasks build them, and
psheads validates them itself (``psheads.tasks.checked_batch``), naming what to fix."""


def _check_members(cls: type) -> None:
    """Check the shapes of ``cls``'s own methods, properties and (dataclass) ``__init__``."""
    for name, member in list(vars(cls).items()):
        if name == "__init__" and cls.__qualname__ in VALIDATED_BY_PSHEADS:
            continue
        if isinstance(member, (staticmethod, classmethod)) and declares_shapes(member.__func__):
            setattr(cls, name, type(member)(checked(member.__func__)))
        elif isinstance(member, property) and member.fget is not None and declares_shapes(member.fget):
            setattr(cls, name, property(checked(member.fget), member.fset, member.fdel, member.__doc__))
        elif inspect.isfunction(member) and declares_shapes(member):
            setattr(cls, name, checked(member))


def check_module(module: ModuleType) -> None:
    """Check the shapes of the functions and classes ``module`` defines (not those it imports)."""
    for name, value in list(vars(module).items()):
        if getattr(value, "__module__", None) != module.__name__:
            continue
        if inspect.isclass(value):
            _check_members(value)
        elif inspect.isfunction(value) and declares_shapes(value):
            setattr(module, name, checked(value))


class _Finder(importlib.abc.MetaPathFinder):
    """Loads the ``modules`` as usual, then checks their shapes before any other module imports them."""

    def __init__(self, modules: Sequence[str]):
        self.modules = frozenset(modules)

    def find_spec(self, fullname: str, path: Sequence[str] | None = None,
                  target: ModuleType | None = None) -> importlib.machinery.ModuleSpec | None:
        if fullname not in self.modules:
            return None
        spec = importlib.machinery.PathFinder.find_spec(fullname, path)
        if spec is None or spec.loader is None:
            return None
        run = spec.loader.exec_module

        def exec_module(module: ModuleType) -> None:
            run(module)
            check_module(module)

        spec.loader.exec_module = exec_module
        return spec


def install(modules: Sequence[str]) -> None:
    """Check the shapes of ``modules`` from their first import on; they must not be imported yet."""
    imported = sorted(set(modules) & set(sys.modules))
    if imported:
        raise RuntimeError(f"{imported} were imported before the shape checks were installed: import tests first.")
    sys.meta_path.insert(0, _Finder(modules))
