"""The suite checks psheads' shapes at run time (``tests/shapes.py``): a wrong shape raises."""

from __future__ import annotations

import jaxtyping
import pytest
import torch

from psheads import tasks
from psheads.measure.engine import KeyLogits
from psheads.rope import geometry
from tests.shapes import shaped_modules


def test_the_shaped_modules_are_found() -> None:
    """The modules that import jaxtyping are the ones whose shapes are checked."""
    names = shaped_modules()
    assert {"psheads.rope.geometry", "psheads.measure.engine", "psheads.tasks.base"} <= set(names)
    assert "psheads.results.files" not in names  # no shapes: pandas stays a lazy import there


def test_only_functions_with_shapes_are_wrapped() -> None:
    """No extra stack frame where no shape is declared: a warning's stacklevel still points at the caller."""
    assert hasattr(geometry.rotate, "__wrapped__") and not hasattr(tasks.check_settings, "__wrapped__")


def test_a_wrong_rank_is_refused() -> None:
    theta = torch.tensor([0.5, 0.1, 0.2])
    assert geometry.frequency_order(theta).tolist() == [0, 2, 1]
    with pytest.raises(jaxtyping.TypeCheckError, match="theta"):
        geometry.frequency_order(theta[None])  # [1, plane], not [plane]


def test_dimensions_must_agree_across_arguments() -> None:
    layout = geometry.plane_layout(8, 8, "halves")
    x, table = torch.randn(2, 5, 8), torch.ones(5, 8)
    assert geometry.rotate(x, table, table * 0, layout).shape == x.shape
    with pytest.raises(jaxtyping.TypeCheckError, match="cos"):
        geometry.rotate(x, table[:4], table[:4] * 0, layout)  # 4 positions of tables for 5 of x


def test_dataclass_fields_are_checked() -> None:
    positions, tokens, other = torch.randn(5, 4), torch.randn(2, 3, 5, 4), torch.randn(2, 3, 1)
    assert KeyLogits(positions, tokens, other, None).n == 5  # positions are shared: they broadcast
    with pytest.raises(jaxtyping.TypeCheckError, match="tokens"):
        KeyLogits(positions, tokens[:, :, :4], other, None)  # 4 token rows for 5 positions
