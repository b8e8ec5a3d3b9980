"""Shared behaviour of psheads' frozen config dataclasses."""

from __future__ import annotations

import logging
from dataclasses import fields
from typing import Any, TypeVar

logger = logging.getLogger(__name__)

C = TypeVar("C")


def from_known_fields(cls: type[C], data: dict[str, Any]) -> C:
    """Build the dataclass ``cls`` from ``data``; unknown keys are logged and ignored."""
    known = {f.name for f in fields(cls)}  # type: ignore[arg-type]
    unknown = set(data) - known
    if unknown:
        logger.warning("Ignoring unknown %s keys: %s", cls.__name__, sorted(unknown))
    return cls(**{k: v for k, v in data.items() if k in known})
