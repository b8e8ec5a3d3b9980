"""HeadPolicy: the default rule, tie-free keep scores, the budget rules of the serving stacks, validation."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from psheads.policy import HeadPolicy, streamed_by_rule, tie_free_keep
from psheads.policy.head_policy import QUERY_SCORES, streamed_count


def scores(positional: np.ndarray, symbolic: np.ndarray, n_kv: int | None = None) -> pd.DataFrame:
    """A reduced score_heads-like frame from [layer, head] grids."""
    layers, heads = positional.shape
    rows = [{"layer": layer, "head": head, "positional": positional[layer, head], "symbolic": symbolic[layer, head],
             "label": "mixed"} for layer in range(layers) for head in range(heads)]
    frame = pd.DataFrame(rows)
    if n_kv is not None:
        frame.insert(2, "kv_head", frame["head"] // (heads // n_kv))
    frame.attrs = {"model": "/some/folder/tiny-model", "config": {"method": "swap"}, "n_prompts": 4}
    return frame


def test_the_default_rule_keeps_the_kv_group_of_its_most_symbolic_query_head() -> None:
    symbolic = np.array([[0.1, 0.9, 0.2, 0.3], [0.4, 0.5, 0.05, 0.06]])
    policy = HeadPolicy.from_scores(scores(1 - symbolic, symbolic, n_kv=2))
    assert policy.model == "tiny-model" and policy.kv_head_of == (0, 0, 1, 1)
    np.testing.assert_array_equal(policy.kv_scores, [[0.9, 0.3], [0.5, 0.06]])
    # at half the KV heads streamed, the two groups whose best query head is least symbolic go
    np.testing.assert_array_equal(policy.streamed(0.5), [[False, True], [False, True]])
    assert policy.provenance["score"] == "symbolic" and policy.provenance["aggregation"] == "max"
    assert policy.provenance["method"] == "swap" and policy.provenance["n_prompts"] == 4


def test_keep_scores_are_tie_free_in_the_open_unit_interval_and_ties_stream_the_earlier_head_first() -> None:
    grid = np.array([[0.5, 0.5, 0.5], [0.2, 0.5, np.nan]])
    keep = tie_free_keep(grid)
    assert len(np.unique(keep)) == keep.size and (keep > 0).all() and (keep < 1).all()
    order = np.argsort(keep, axis=None)
    assert list(order) == [3, 0, 1, 2, 4, 5]  # 0.2 first, then the tied 0.5 in flat order, the NaN last (kept)


def test_a_head_without_a_finite_score_is_kept_full() -> None:
    symbolic = np.array([[np.nan, 0.1, 0.2, 0.3]])
    policy = HeadPolicy.from_scores(scores(1 - symbolic, symbolic))
    assert not policy.streamed(0.75)[0, 0]
    assert policy.streamed(0.75)[0, 1:].all()


@pytest.mark.parametrize("n", [1, 4, 18, 48, 90])
@pytest.mark.parametrize("budget", [0.0, 0.25, 0.5, 0.75, 1.0])
def test_the_budget_rules_are_the_readers_own(n: int, budget: float) -> None:
    """kvpress streams the lowest round(r·N); duo-attention every score below np.quantile(scores, r)."""
    keep = tie_free_keep(np.random.default_rng(n).random((1, n)))
    lowest = np.zeros(n, dtype=bool)
    lowest[np.argsort(keep, axis=None)[:round(budget * n)]] = True
    np.testing.assert_array_equal(streamed_by_rule(keep, budget, "count").ravel(), lowest)
    if budget >= 1:
        threshold = 2.0
    elif budget <= 0:
        threshold = -1.0
    else:
        threshold = float(np.quantile(keep, budget))
    np.testing.assert_array_equal(streamed_by_rule(keep, budget, "quantile").ravel(), (keep < threshold).ravel())
    assert streamed_by_rule(keep, budget, "count").sum() == streamed_count(budget, n)


def test_query_level_ranks_query_heads_on_their_own() -> None:
    symbolic = np.array([[0.1, 0.9, 0.2, 0.3]])
    policy = HeadPolicy.from_scores(scores(1 - symbolic, symbolic, n_kv=2))
    np.testing.assert_array_equal(policy.streamed_query_heads(0.5, level="query"), [[True, False, True, False]])
    np.testing.assert_array_equal(policy.streamed_query_heads(0.5, level="kv"), [[False, False, True, True]])


@pytest.mark.parametrize("name", sorted(QUERY_SCORES))
def test_every_named_score_orders_a_positional_head_below_a_symbolic_one(name: str) -> None:
    positional, symbolic = np.array([[0.95, 0.05]]), np.array([[0.05, 0.95]])
    policy = HeadPolicy.from_scores(scores(positional, symbolic), score=name)
    assert policy.keep[0][0] < policy.keep[0][1]


def test_any_numeric_column_can_rank_and_the_frame_view_reads_back() -> None:
    frame = scores(np.full((2, 2), 0.5), np.full((2, 2), 0.5))
    frame["retrieval"] = [0.3, 0.0, 0.9, 0.1]
    policy = HeadPolicy.from_scores(frame, score="retrieval", sink=4, recent=8, budget=0.25)
    view = policy.frame()
    assert list(view.columns) == ["layer", "head", "kv_head", "positional", "symbolic", "label", "query_score",
                                  "kv_score", "keep", "streamed", "window"]
    assert view["streamed"].sum() == 1 and view.loc[view["streamed"], "window"].tolist() == [8]
    assert view.loc[view["streamed"], ["layer", "head"]].values.tolist() == [[0, 1]]
    assert view.attrs["sink"] == 4 and view.attrs["budget"] == 0.25


@pytest.mark.parametrize(("change", "message"), [
    ({"budget": 1.5}, "budget"), ({"budget": -0.1}, "budget"), ({"recent": 0}, "recent"), ({"sink": -1}, "sink")])
def test_bad_settings_are_refused_with_the_setting_named(change: dict, message: str) -> None:
    frame = scores(np.full((1, 2), 0.5), np.array([[0.1, 0.2]]))
    with pytest.raises(ValueError, match=message):
        HeadPolicy.from_scores(frame, **change)
    with pytest.raises(ValueError, match=message):
        HeadPolicy.from_scores(frame).with_changes(**change)


def test_frames_that_are_not_one_row_per_head_are_refused() -> None:
    frame = scores(np.full((2, 2), 0.5), np.full((2, 2), 0.5))
    with pytest.raises(ValueError, match="plane"):
        HeadPolicy.from_scores(frame.assign(plane=1))
    with pytest.raises(ValueError, match="exactly once"):
        HeadPolicy.from_scores(frame.iloc[:-1])
    two_lengths = pd.concat([frame.assign(length=2048), frame.assign(length=4096)])  # as the shipped policy tables
    with pytest.raises(ValueError, match=r"lengths \[2048, 4096\]: select one"):
        HeadPolicy.from_scores(two_lengths)
    HeadPolicy.from_scores(two_lengths[two_lengths["length"] == 4096])  # one length is accepted
    with pytest.raises(ValueError, match="columns"):
        HeadPolicy.from_scores(frame.drop(columns="symbolic"))
    with pytest.raises(ValueError, match="aggregation"):
        HeadPolicy.from_scores(frame, aggregation="median")
    with pytest.raises(TypeError, match="DataFrame"):
        HeadPolicy.from_scores(frame.to_dict())


def test_scores_with_ties_or_outside_the_unit_interval_are_refused_as_keep_scores() -> None:
    policy = HeadPolicy.from_kv_scores([[0.2, 0.8]])
    with pytest.raises(ValueError, match="tie-free"):
        policy.with_changes(keep=((0.5, 0.5),))
    with pytest.raises(ValueError, match=r"\(0, 1\)"):
        policy.with_changes(keep=((0.0, 0.5),))
    assert math.isnan(policy.positional[0][0])
