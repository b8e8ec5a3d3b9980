"""Gating, plane-hook edits and user hooks compose in any nesting order, as if applied one after
another: q and k are gated and hooked first, the planes are then formed from them and edited."""

from __future__ import annotations

import contextlib
import itertools

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import psheads
from psheads.rope import geometry
from tests.conftest import FAMILIES, HOOKED_FAMILIES, model_state

LAYER = 1
TOKENS = torch.randint(0, 64, (2, 9), generator=torch.Generator().manual_seed(11))


def interventions(lens: psheads.RopeLens, gate_plane: int, gate_head: int, user_head: int, user_scale: float,
                  edit_plane: int, edit_scale: float) -> dict:
    """Three interventions on layer ``LAYER``, each a context manager factory."""
    (site,) = lens.backend.qk_sites(LAYER, "q")

    def user_hook(tensor: torch.Tensor, hook) -> torch.Tensor:
        canonical = site.to_canonical(tensor).clone()
        canonical[:, :, user_head] *= user_scale
        return site.from_canonical(canonical, tensor)

    def edit(planes: torch.Tensor, hook) -> torch.Tensor:
        planes[:, :, edit_plane] *= edit_scale
        return planes

    @contextlib.contextmanager
    def plane_edit():
        with lens.plane_hooks([LAYER]) as names, lens.model.hooks(fwd_hooks=[(names[LAYER], edit)]):
            yield

    return {
        "gate": lambda: lens.gate([gate_plane], layers=[LAYER], heads=[gate_head]),
        "user": lambda: lens.model.hooks(fwd_hooks=[(site.name, user_hook)]),
        "edit": plane_edit,
    }


def run(lens: psheads.RopeLens, factories: dict, order: tuple[str, ...]) -> tuple[torch.Tensor, torch.Tensor]:
    """Final logits and layer ``LAYER``'s pattern with the interventions entered in ``order``."""
    with contextlib.ExitStack() as stack:
        for name in order:
            stack.enter_context(factories[name]())
        logits, cache = lens.model.run_with_cache(
            TOKENS, names_filter=lambda name: name == f"blocks.{LAYER}.attn.hook_pattern")
    return logits.double(), cache[f"blocks.{LAYER}.attn.hook_pattern"].double()


def expected_pattern(lens: psheads.RopeLens, factories: dict, edit_plane: int, edit_scale: float) -> torch.Tensor:
    """One after another: q under gate and user hook, then the planes, then the edit, softmax."""
    geo = lens.layers[LAYER]
    with factories["gate"](), factories["user"]():
        rows = []
        for query in range(TOKENS.shape[1]):
            planes = lens.frequency_logits(TOKENS, LAYER, query=query)  # [batch, head, plane, key]
            planes[:, :, edit_plane] *= edit_scale
            logits = geometry.soft_cap(planes.sum(2), geo.softcap)
            visible = geometry.visible_keys(torch.tensor([query]), query + 1, geo.window)[0]
            row = torch.softmax(logits.masked_fill(~visible, float("-inf")), dim=-1)
            rows.append(torch.nn.functional.pad(row, (0, TOKENS.shape[1] - query - 1)))
    return torch.stack(rows, dim=2)


CASES = [(family, "bridge") for family in FAMILIES] + [(family, "hooked") for family in HOOKED_FAMILIES]


@pytest.mark.parametrize(("family", "backend"), CASES)
@settings(max_examples=4, deadline=None, derandomize=True)
@given(data=st.data())
def test_every_nesting_order_equals_sequential_application(model_factory, family, backend, data) -> None:
    model = model_factory(family, backend)
    lens = psheads.RopeLens(model)
    geo = lens.layers[LAYER]
    draw = {
        "gate_plane": data.draw(st.integers(1, geo.n_planes)),
        "gate_head": data.draw(st.integers(0, geo.n_heads - 1)),
        "user_head": data.draw(st.integers(0, geo.n_heads - 1)),
        "user_scale": data.draw(st.sampled_from([0.0, 0.5, 2.0])),
        "edit_plane": data.draw(st.integers(0, geo.n_planes)),
        "edit_scale": data.draw(st.sampled_from([0.0, 3.0, -1.0])),
    }
    before = model_state(model)
    factories = interventions(lens, **draw)
    want = expected_pattern(lens, factories, draw["edit_plane"], draw["edit_scale"])
    outputs = [run(lens, factories, order) for order in itertools.permutations(["gate", "user", "edit"])]
    for logits, pattern in outputs:
        torch.testing.assert_close(pattern, want, atol=1e-5, rtol=0)
        torch.testing.assert_close(logits, outputs[0][0], atol=1e-4, rtol=0)
    assert model_state(model) == before


def test_a_plane_edit_of_the_wrong_shape_is_refused(model_factory) -> None:
    lens = psheads.RopeLens(model_factory("llama"))
    with (lens.plane_hooks([0]) as names,
          lens.model.hooks(fwd_hooks=[(names[0], lambda planes, hook: planes[:, :, :2])]),
          pytest.raises(ValueError, match=r"hook_plane_logits returned \(2, 4, 2, 9, 9\); it must return")):
        lens.model(TOKENS)
