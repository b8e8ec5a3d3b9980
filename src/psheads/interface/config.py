"""Shared behaviour of psheads' frozen config dataclasses."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import fields
from typing import Any, TypeVar

logger = logging.getLogger(__name__)

C = TypeVar("C")


def config_dict(cls: type, data: Any) -> dict[str, Any]:
    """``data`` as a dict for ``cls.from_dict``: a mapping with string keys, as ``to_dict`` writes.

    Raises:
        TypeError: ``data`` is not a mapping, or has a key that is not a string.
    """
    if not isinstance(data, Mapping) or not all(isinstance(key, str) for key in data):
        raise TypeError(f"{cls.__name__}.from_dict needs a dict of field names to values (as to_dict writes), got "
                        f"{type(data).__name__} ({data!r})."[:300])
    return dict(data)


def from_known_fields(cls: type[C], data: Any) -> C:
    """Build the dataclass ``cls`` from ``data`` (``config_dict``); unknown keys are logged and ignored."""
    data = config_dict(cls, data)
    known = {f.name for f in fields(cls)}  # type: ignore[arg-type]
    unknown = set(data) - known
    if unknown:
        logger.warning("Ignoring unknown %s keys: %s", cls.__name__, sorted(unknown))
    return cls(**{k: v for k, v in data.items() if k in known})
