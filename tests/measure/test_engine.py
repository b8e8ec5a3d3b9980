"""The engine's factored logits against the lens's explicit decompositions, long prompts, and
the per-plane views."""

from __future__ import annotations

import dataclasses

import pytest
import torch

import psheads
from psheads.measure import engine, methods
from psheads.measure.prompts import PromptOptions, prepare_prompts
from psheads.rope import geometry
from tests import oracle

# numerically sensitive: every test runs at 1 and 2 torch threads (see conftest.torch_threads)
pytestmark = pytest.mark.usefixtures("torch_threads")


def group_views(lens: psheads.RopeLens, tokens: torch.Tensor, layer: int, by_frequency: bool,
                options: PromptOptions | None = None):
    """The engine's views of ``layer`` for one batch of prompts (one key group expected)."""
    prompts = prepare_prompts(lens.backend, tokens, options)
    ((indices, batch, query),) = prompts.batches(len(prompts))
    capture = lens.backend.capture(batch, [layer], query_index=query)[layer]
    geo = lens.layers[layer]
    (group,) = prompts.key_groups(indices, geo, 1, "")
    return group, engine.key_logits(geo, capture, group, torch.arange(geo.n_heads), by_frequency)


@pytest.mark.parametrize(("family", "layer"), [("llama", 1), ("gemma2", 0), ("neox", 1), ("gptj", 0), ("gemma3", 0)])
def test_factored_logits_equal_the_explicit_matrix(model_factory, family, layer) -> None:
    lens = psheads.RopeLens(model_factory(family))
    tokens = torch.randint(0, 64, (3, 12))
    group, (view,) = group_views(lens, tokens, layer, by_frequency=False)
    geo = lens.layers[layer]
    M = lens.position_token_logits(tokens, layer)  # [prompt, head, position, token] over keys 0…11
    S, others = list(group.swappable), list(group.others)
    expected = geometry.soft_cap(M[:, :, S][:, :, :, S], geo.softcap)
    torch.testing.assert_close(view.matrix(), expected, atol=1e-12, rtol=0)
    torch.testing.assert_close(view.diagonal, expected.diagonal(dim1=-2, dim2=-1), atol=1e-12, rtol=0)
    planes = lens.frequency_logits(tokens, layer)  # [prompt, head, plane, key]
    torch.testing.assert_close(view.other_logits, geometry.soft_cap(planes.sum(2)[..., others], geo.softcap),
                               atol=1e-12, rtol=0)
    rotated, unrotated = group_views(lens, tokens, layer, by_frequency=True)[1]
    per_plane = torch.cat([rotated.matrix(), unrotated.matrix()], dim=2)  # [prompt, head, plane, n, n]
    M_planes = lens.position_token_logits(tokens, layer, by_frequency=True)[:, :, :, S][..., S]
    torch.testing.assert_close(per_plane, geometry.soft_cap(M_planes, geo.softcap), atol=1e-12, rtol=0)
    other_planes = torch.cat([rotated.other, unrotated.other], dim=2)
    torch.testing.assert_close(other_planes, planes[..., others], atol=1e-12, rtol=0)


def test_by_frequency_scores_each_plane_as_its_own_head(model_factory) -> None:
    lens = psheads.RopeLens(model_factory("neox"))  # partial rotary: plane 0 is real
    tokens = torch.randint(0, 64, (2, 10))
    frame = psheads.score_heads(lens, tokens, layers=[1], by_frequency=True, reduce=False)
    M_planes = lens.position_token_logits(tokens, 1, by_frequency=True)[..., :9, :9]  # S = keys 0…8
    other = lens.frequency_logits(tokens, 1)[..., 9:]  # the query's own key
    geo = lens.layers[1]
    for prompt in range(2):
        for head in (0, 3):
            for slot, plane in enumerate(geo.plane_ids):
                logits = engine.KeyLogits(M_planes[prompt, head, slot],
                                          torch.eye(9, dtype=torch.float64), other[prompt, head, slot], None)
                detail = methods.swap_attention_detail(logits, 1, 1e-4)
                row = frame.query(f"prompt == {prompt} and head == {head} and plane == {plane}").iloc[0]
                assert row["positional"] == pytest.approx(float((detail.weights * detail.cos_positional).sum()),
                                                          abs=1e-9)
                assert row["symbolic"] == pytest.approx(float((detail.weights * detail.cos_symbolic).sum()), abs=1e-9)


def test_long_prompts_per_swap_against_the_oracle_and_fast_scores(model_factory) -> None:
    """600 tokens on a model with d_head 8: every score comes from heavy rows, with pairs skipped."""
    model = model_factory("llama")
    lens = psheads.RopeLens(model)
    tokens = torch.randint(0, 64, (1, 600), generator=torch.Generator().manual_seed(5))
    layer, query = 1, 599
    chosen = [3, 150, 151, 420, 598]  # a few keys: the oracle re-runs the model once per swap
    truth = oracle.brute_force_swap_attention(model, tokens[0], layer, query, oracle.make_blocks(chosen, 1))
    frame = psheads.score_heads(lens, tokens, layers=[layer], reduce=False)
    for head in range(4):
        swaps = psheads.swap_attention(lens, tokens[0], layer, head)
        indexed = swaps.set_index(["block_i", "block_j"])
        for (i, j), pair in zip(truth["pairs"].tolist(), truth["d_swapped"][:, head], strict=True):
            row = indexed.loc[(chosen[i], chosen[j])]  # S is every key 0…598, so block = position
            assert abs(row["d_i_swapped"] - float(pair[0])) <= 1e-6
            assert abs(row["d_j_swapped"] - float(pair[1])) <= 1e-6
        n_pairs = len(swaps)
        assert (swaps["weight"] < 2.0**-53 / n_pairs).any()  # skipping is exercised
        fast = frame[frame["head"] == head].iloc[0]
        assert fast["positional"] == pytest.approx(swaps.attrs["positional"], abs=1e-10)
        assert fast["symbolic"] == pytest.approx(swaps.attrs["symbolic"], abs=1e-10)


def test_chunk_budget_bounds_the_groups_not_the_numbers(model_factory, monkeypatch) -> None:
    lens = psheads.RopeLens(model_factory("gemma2"))
    tokens = torch.randint(0, 64, (6, 40))
    whole = psheads.score_heads(lens, tokens, reduce=False)
    anova = psheads.score_heads(lens, tokens, reduce=False, method="anova")
    monkeypatch.setattr(engine, "CHUNK_BYTES", 2048)  # one prompt, a few rows at a time
    torch.testing.assert_close(torch.tensor(psheads.score_heads(lens, tokens, reduce=False)["positional"].to_numpy()),
                               torch.tensor(whole["positional"].to_numpy()), atol=1e-12, rtol=0)
    chunked = psheads.score_heads(lens, tokens, reduce=False, method="anova")
    torch.testing.assert_close(torch.tensor(chunked["interaction"].to_numpy()),
                               torch.tensor(anova["interaction"].to_numpy()), atol=1e-12, rtol=0)


def test_layers_sharing_geometry_are_stacked_only_with_equal_tables(model_factory,
                                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    lens = psheads.RopeLens(model_factory("gemma3"))  # local layer 0 (base 1e4, window), global layer 1
    tokens = torch.randint(0, 64, (2, 9))
    captures = lens.backend.capture(tokens, [0, 1], query_index=torch.tensor([8, 8]))
    assert engine.stacked_layers(lens, [0, 1], captures) == [[0], [1]]
    gptj = psheads.RopeLens(model_factory("gptj"))
    captures = gptj.backend.capture(tokens, [0, 1], query_index=torch.tensor([8, 8]))
    assert engine.stacked_layers(gptj, [0, 1], captures) == [[0, 1]]
    # a model spread over devices: layer 1's capture on another device is never stacked with layer 0's
    elsewhere = dict(captures)
    elsewhere[1] = dataclasses.replace(captures[1], q=captures[1].q.to("meta"))
    assert engine.stacked_layers(gptj, [0, 1], elsewhere) == [[0], [1]]
    # long prompts: a stack is cut so that one prompt's factors fit CHUNK_BYTES (a layer never is)
    geo = gptj.layers[0]
    one_layer = 8 * geo.n_heads * 9 * (geo.d_head + 1) * 5
    assert engine._bounded(gptj, [[0, 1]], None, 9) == [[0, 1]]
    monkeypatch.setattr(engine, "CHUNK_BYTES", one_layer)
    assert engine._bounded(gptj, [[0, 1]], None, 9) == [[0], [1]]
    assert engine._bounded(gptj, [[0, 1]], (0,), 9) == [[0, 1]]  # one head of each layer fits
    monkeypatch.setattr(engine, "CHUNK_BYTES", 1)
    assert engine._bounded(gptj, [[0, 1]], None, 9) == [[0], [1]]
    monkeypatch.undo()
    stacked = psheads.score_heads(gptj, tokens, reduce=False)
    alone = [psheads.score_heads(gptj, tokens, layers=[layer], reduce=False) for layer in (0, 1)]
    for layer, frame in enumerate(alone):
        torch.testing.assert_close(torch.tensor(stacked[stacked["layer"] == layer]["symbolic"].to_numpy()),
                                   torch.tensor(frame["symbolic"].to_numpy()), atol=1e-12, rtol=0)


@pytest.mark.parametrize(("family", "backend"), [("gptj", "bridge"), ("neox", "bridge"), ("llama", "bridge"),
                                                 ("gemma2", "bridge"), ("gemma3", "bridge"), ("llama", "hooked"),
                                                 ("gemma2", "hooked")])
def test_long_inputs_stream_layers_with_the_scores_of_the_whole_capture(model_factory, family, backend,
                                                                        monkeypatch) -> None:
    """Above SCORES_BYTES every layer is measured during the forward; the frames equal those of one
    capture of all layers (the same capture path: SDPA where the family allows, eager otherwise)."""
    from psheads.rope import backends

    lens = psheads.RopeLens(model_factory(family, backend))
    tokens = torch.randint(0, 64, (3, 20))
    monkeypatch.setattr(backends.base, "SCORES_BYTES", -1)
    calls = [dict(method="swap"), dict(method="anova"), dict(method="swap", by_frequency=True)]
    streamed_layers = []
    capture = lens.backend.capture

    def counting(*args, **kwargs):
        streamed_layers.append(kwargs.get("on_layer") is not None)
        return capture(*args, **kwargs)

    monkeypatch.setattr(lens.backend, "capture", counting)
    streamed = [psheads.score_heads(lens, tokens, progress=False, **call) for call in calls]
    streamed.append(psheads.frequency_profile(lens, tokens, progress=False).planes)
    assert streamed_layers and all(streamed_layers)
    n_streamed = len(streamed_layers)
    monkeypatch.setattr(engine, "_streams", lambda lens, tokens: False)
    whole = [psheads.score_heads(lens, tokens, progress=False, **call) for call in calls]
    whole.append(psheads.frequency_profile(lens, tokens, progress=False).planes)
    assert not any(streamed_layers[n_streamed:])
    for a, b in zip(streamed, whole, strict=True):
        assert list(a.columns) == list(b.columns) and len(a) == len(b)
        numbers = a.select_dtypes("number").columns
        # a spread is sqrt(E[x²] − mean²): rounding of 1e-16 in the sums moves a spread near 0 by
        # 1e-8, so spreads compare as variances
        spreads = [name for name in numbers if name.endswith("_std")]
        a = a.assign(**{name: a[name] ** 2 for name in spreads})
        b = b.assign(**{name: b[name] ** 2 for name in spreads})
        assert (a[numbers] - b[numbers]).abs().max().max() <= 1e-12


def test_running_mean_adds_every_entry_in_batch_order_however_layers_were_stacked(model_factory) -> None:
    """Sums are kept per stack; parts stacked otherwise (one layer alone, a later new stack) still
    add to each (layer, head) in part order: the frame equals a per-entry running sum bit for bit,
    sorted by layer, also where the layers of one stack counted different prompts."""
    geos = psheads.RopeLens(model_factory("gptj")).layers
    heads = (0, 1)
    generator = torch.Generator().manual_seed(0)
    stacks = [[0, 1], [0], [1], [0, 1], [1, 0], [0]]  # the last leaves layer 0 with more prompts than 1
    reducer = engine.RunningMean(spread=("x",))
    totals: dict[tuple[int, int], dict[str, torch.Tensor]] = {}
    counts: dict[int, int] = {}
    for n, stack in enumerate(stacks, start=2):
        values = {"x": torch.randn(n, len(stack) * len(heads), generator=generator, dtype=torch.float64)}
        values["y"] = values["x"].exp()
        sums = reducer.partial(engine.Measured([geos[layer] for layer in stack], list(range(n)), torch.tensor(heads),
                                               values))
        reducer.merge(sums)
        for i, layer in enumerate(stack):
            counts[layer] = counts.get(layer, 0) + n
            for j, head in enumerate(heads):
                entry = totals.setdefault((layer, head), {})
                for name, value in sums.sums.items():
                    add = value[i * len(heads) + j]
                    entry[name] = entry[name] + add if name in entry else add.clone()
    frame = reducer.frame(["x", "x_std", "y", "n_prompts"])
    assert frame[["layer", "head"]].values.tolist() == [[0, 0], [0, 1], [1, 0], [1, 1]]
    assert frame["n_prompts"].tolist() == [counts[0], counts[0], counts[1], counts[1]] and counts[0] != counts[1]
    for row in frame.itertuples():
        entry, n = totals[(row.layer, row.head)], counts[row.layer]
        mean = entry["x"] / n
        assert row.x == float(mean) and row.y == float(entry["y"] / n)
        assert row.x_std == float((entry["x_sq"] / n - mean.square()).clamp_min(0).sqrt())
