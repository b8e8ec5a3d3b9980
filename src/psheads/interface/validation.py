"""Argument validation, in one place, for every public entry point.

Numbers may be Python, numpy or 0-d torch scalars; they come back as plain ``int``/``float``.
Booleans are never numbers, floats are never integers, and NaN or infinity is never a setting.
Every error is a ``TypeError`` (wrong kind of value) or a ``ValueError`` (right kind, wrong value)
whose message starts with the argument's name and says what to pass instead.
"""

from __future__ import annotations

import math
import numbers
import operator
from collections.abc import Iterable
from typing import Any

import numpy as np
import torch

SEED_LIMIT = 2**64
"""Seeds lie in ``[0, 2**64)``, torch's seed range: negative seeds are refused, because torch reads
−1 as 2**64 − 1 and two seeds would give the same stream."""


def _is_bool(value: Any) -> bool:
    if isinstance(value, (bool, np.bool_)):
        return True
    return isinstance(value, torch.Tensor) and value.dtype == torch.bool


def _scalar(value: Any) -> Any:
    """A 0-d torch tensor or numpy array as its Python value; anything else unchanged."""
    if isinstance(value, torch.Tensor):
        if value.ndim != 0:
            return value
        return value.item()
    if isinstance(value, np.ndarray) and value.ndim == 0:
        return value.item()
    return value


def integer(value: Any, name: str, minimum: int | None = None, maximum: int | None = None) -> int:
    """An ``int`` from a Python, numpy or 0-d torch integer (bools and floats refused).

    Raises:
        TypeError: not an integer.
        ValueError: outside ``[minimum, maximum]``.
    """
    if _is_bool(value):
        raise TypeError(f"{name} must be an int, got a bool ({value!r}).")
    if isinstance(value, torch.Tensor) and (value.ndim != 0 or value.is_floating_point() or value.is_complex()):
        raise TypeError(f"{name} must be an int, got a tensor of shape {tuple(value.shape)} and dtype {value.dtype}.")
    try:
        result = operator.index(value)
    except TypeError:
        raise TypeError(f"{name} must be an int, got {type(value).__name__} ({value!r}).") from None
    if minimum is not None and result < minimum:
        raise ValueError(f"{name} must be at least {minimum}, got {result}.")
    if maximum is not None and result > maximum:
        raise ValueError(f"{name} must be at most {maximum}, got {result}.")
    return result


def number(value: Any, name: str, minimum: float | None = None, maximum: float | None = None,
           above: float | None = None, below: float | None = None) -> float:
    """A finite ``float`` from a Python, numpy or 0-d torch real number (bools refused).

    Args:
        value: the argument.
        name: its name, for the message.
        minimum: inclusive lower bound.
        maximum: inclusive upper bound.
        above: exclusive lower bound.
        below: exclusive upper bound.

    Raises:
        TypeError: not a real number.
        ValueError: NaN, infinite, or out of bounds.
    """
    if _is_bool(value):
        raise TypeError(f"{name} must be a number, got a bool ({value!r}).")
    scalar = _scalar(value)
    if not isinstance(scalar, numbers.Real):
        raise TypeError(f"{name} must be a real number, got {type(value).__name__} ({value!r}).")
    try:
        result = float(scalar)
    except OverflowError:
        raise ValueError(f"{name} must be finite, got an integer too large for a float.") from None
    if not math.isfinite(result):
        raise ValueError(f"{name} must be finite, got {result}.")
    if minimum is not None and result < minimum:
        raise ValueError(f"{name} must be at least {minimum}, got {result}.")
    if maximum is not None and result > maximum:
        raise ValueError(f"{name} must be at most {maximum}, got {result}.")
    if above is not None and not result > above:
        raise ValueError(f"{name} must be greater than {above}, got {result}.")
    if below is not None and not result < below:
        raise ValueError(f"{name} must be less than {below}, got {result}.")
    return result


def boolean(value: Any, name: str) -> bool:
    """A ``bool`` (Python or numpy); 0/1 and other truthy values are refused."""
    if isinstance(value, (bool, np.bool_)):
        return bool(value)
    raise TypeError(f"{name} must be True or False, got {type(value).__name__} ({value!r}).")


def optional_boolean(value: Any, name: str) -> bool | None:
    """``boolean``, or None."""
    if value is None or isinstance(value, (bool, np.bool_)):
        return None if value is None else bool(value)
    raise TypeError(f"{name} must be True, False or None, got {type(value).__name__} ({value!r}).")


def integers(values: Any, name: str, minimum: int | None = None, maximum: int | None = None,
             unique: bool = False) -> tuple[int, ...]:
    """A tuple of ints from any iterable of integers (a list, tuple, range, array or 1-d tensor).

    Raises:
        TypeError: a single number or a string instead of a list, or a non-integer item.
        ValueError: an item out of bounds, or a repeated item when ``unique``.
    """
    if isinstance(values, (str, bytes)) or _scalar(values) is not values or isinstance(values, numbers.Number) \
            or _is_bool(values) or not isinstance(values, Iterable):
        raise TypeError(f"{name} must be a list of ints (e.g. [{values!r}]), got {type(values).__name__}.")
    result = tuple(integer(item, f"{name} item", minimum, maximum) for item in values)
    if unique and len(set(result)) != len(result):
        repeated = sorted({item for item in result if result.count(item) > 1})
        raise ValueError(f"{name} must not repeat items, got {repeated} more than once.")
    return result


def no_bools(values: Any, name: str) -> None:
    """Refuse Python or numpy bools anywhere in a (nested) list of token ids: torch would read
    them as 0 and 1."""
    stack = [values]
    while stack:
        item = stack.pop()
        if isinstance(item, (bool, np.bool_)):
            raise TypeError(f"{name} must hold integer token ids, got a bool ({item!r}).")
        if isinstance(item, (list, tuple)):
            stack.extend(item)


def seed(value: Any, name: str = "seed") -> int:
    """A seed in ``[0, 2**64)``."""
    return integer(value, name, minimum=0, maximum=SEED_LIMIT - 1)


def device(value: Any, name: str = "device") -> str:
    """A device that exists on this machine (``"cpu"``, ``"cuda:1"``, a ``torch.device``), as a string.

    Raises:
        TypeError: not a string or a ``torch.device``.
        ValueError: a string torch cannot read, or a device type this machine does not have.
    """
    if not isinstance(value, (str, torch.device)):
        raise TypeError(f"{name} must be a device name such as 'cpu' or 'cuda:0', got {type(value).__name__}.")
    try:
        parsed = torch.device(value)
    except RuntimeError as err:
        raise ValueError(f"{name} {value!r} is not a device torch knows ({err}); use 'cpu', 'cuda', 'cuda:1', "
                         "'mps', …") from None
    if parsed.type == "meta":
        raise ValueError(f"{name} 'meta' holds shapes, not numbers: use 'cpu' or an accelerator.")
    is_available = getattr(getattr(torch, parsed.type, None), "is_available", None)
    if parsed.type != "cpu" and callable(is_available) and not is_available():
        raise ValueError(f"{name} {value!r}: no {parsed.type} device is available here; use 'cpu'.")
    try:
        torch.empty(0, device=parsed)
    except (RuntimeError, AssertionError) as err:  # an absent GPU index, a backend torch was built without
        raise ValueError(f"{name} {value!r} is not available on this machine ({err}); use 'cpu'.") from None
    return str(parsed)
