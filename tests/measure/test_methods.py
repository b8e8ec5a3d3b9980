"""Score methods against plain references: the fast swap score, its pair skipping, the O(1)
per-swap normaliser, the Gram-matrix ANOVA, and the registry."""

from __future__ import annotations

import math

import pandas as pd
import pytest
import torch

import psheads
from psheads.measure import engine, kernels, methods
from psheads.measure.engine import KeyLogits
from psheads.results import schema


def from_matrix(M: torch.Tensor, other: torch.Tensor, softcap: float | None = None) -> KeyLogits:
    """A head whose position × token matrix is ``M`` (factors: ``M`` and the identity)."""
    return KeyLogits(M, torch.eye(M.shape[-1], dtype=torch.float64).expand_as(M), other, softcap)


def naive_swaps(M: torch.Tensor, other: torch.Tensor, block_size: int, tau: float):
    """Every swap executed literally: permute, fresh fp64 softmax, block sums; then the scores."""
    n = M.shape[-1]
    n_blocks = n // block_size
    d = torch.softmax(torch.cat([torch.diagonal(M), other]), 0)[:n]
    d_blocks = d[: n_blocks * block_size].reshape(n_blocks, block_size).sum(-1)
    pairs = torch.combinations(torch.arange(n_blocks), 2)
    swapped = []
    for i, j in pairs.tolist():
        perm = torch.arange(n)
        block_i = torch.arange(i * block_size, (i + 1) * block_size)
        block_j = torch.arange(j * block_size, (j + 1) * block_size)
        perm[block_i], perm[block_j] = block_j, block_i
        attention = torch.softmax(torch.cat([M[torch.arange(n), perm], other]), 0)[:n]
        swapped.append([attention[block_i].sum(), attention[block_j].sum()])
    swapped = torch.tensor(swapped, dtype=torch.float64).reshape(-1, 2)
    d_i, d_j = d_blocks[pairs[:, 0]], d_blocks[pairs[:, 1]]
    weights = torch.softmax((d_i - d_j).abs() / tau, 0)
    base = torch.stack([d_i, d_j], -1)

    def cosine(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return (a * b).sum(-1) / (a.norm(dim=-1) * b.norm(dim=-1)).clamp_min(1e-300)

    return d_blocks, swapped, float((weights * cosine(swapped, base)).sum()), float(
        (weights * cosine(swapped, base.flip(-1))).sum())


CASES = [(n, b, scale, tau) for n, b in [(2, 1), (5, 1), (9, 2), (12, 3), (13, 1)]
         for scale in (0.01, 1.0, 8.0, 40.0) for tau in (1e-4, 1e-2, 1.0)]


@pytest.mark.parametrize(("n", "block_size", "scale", "tau"), CASES)
def test_per_swap_attention_and_scores_match_the_literal_definition(n, block_size, scale, tau) -> None:
    generator = torch.Generator().manual_seed(n * 1000 + block_size)
    M = torch.randn(n, n, generator=generator, dtype=torch.float64) * scale
    other = torch.randn(2, generator=generator, dtype=torch.float64) * scale
    d_blocks, swapped, s_pos, s_sym = naive_swaps(M, other, block_size, tau)
    detail = methods.swap_attention_detail(from_matrix(M, other), block_size, tau)
    torch.testing.assert_close(detail.d_base, d_blocks, atol=1e-13, rtol=0)
    torch.testing.assert_close(detail.d_swapped, swapped, atol=1e-13, rtol=1e-10)
    fast_pos, fast_sym = methods.swap_scores(from_matrix(M[None], other[None]), block_size, tau)
    assert float(fast_pos[0]) == pytest.approx(s_pos, abs=1e-12)
    assert float(fast_sym[0]) == pytest.approx(s_sym, abs=1e-12)


def test_the_normaliser_does_not_cancel_when_two_keys_hold_all_the_mass() -> None:
    """Keys 0 and 1 hold all but e⁻⁸⁰ of the attention; swapping them moves it elsewhere."""
    M = torch.zeros(6, 6, dtype=torch.float64)
    M[0, 0] = M[1, 1] = 40.0
    M[0, 1] = M[1, 0] = -40.0
    other = torch.zeros(1, dtype=torch.float64)
    _, swapped, _, _ = naive_swaps(M, other, 1, 1e-4)
    e = torch.exp(torch.cat([torch.diagonal(M), other]) - 40.0)
    shortcut = e.sum() - e[0] - e[1]  # what Z − e_i − e_j gives in fp64: the rest is lost
    truth = e[2:].sum()
    assert abs(float(shortcut - truth)) > 0.5 * float(truth)  # the naive closed form fails here
    detail = methods.swap_attention_detail(from_matrix(M, other), 1, 1e-4)
    relative = (detail.d_swapped[0] - swapped[0]).abs() / swapped[0]
    assert float(relative.max()) < 1e-12


@pytest.mark.parametrize(("compile", "tiles"), [("0", (16, 512)), ("0", (4, 8)), ("1", (4, 8))])
@pytest.mark.parametrize("chunk", [2**28, 3000])
@pytest.mark.parametrize(("n", "k", "block_size"), [(40, 3, 1), (41, 2, 2), (30, 5, 3), (64, 4, 1)])
def test_long_prompt_rows_agree_with_the_literal_definition(monkeypatch, n, k, block_size, chunk, compile,
                                                            tiles) -> None:
    """``n > k``: scores come from tiles of heavy blocks' rows (several tiles and column chunks with
    small tiles, entries split when the budget is small), eager and compiled."""
    monkeypatch.setattr(engine, "CHUNK_BYTES", chunk)
    monkeypatch.setenv(kernels.COMPILE_ENV, compile)
    if compile == "1":
        torch._dynamo.reset()  # compile afresh, whatever other tests compiled before (Dynamo's recompile limit)
    monkeypatch.setitem(methods.TILES, "cpu", tiles)
    generator = torch.Generator().manual_seed(n + k)
    for scale in (0.3, 3.0, 30.0):
        positions = torch.randn(n, k, generator=generator, dtype=torch.float64)
        tokens = torch.randn(2, n, k, generator=generator, dtype=torch.float64) * scale
        other = torch.randn(2, 1, generator=generator, dtype=torch.float64) * scale
        logits = KeyLogits(positions, tokens, other, None)
        assert logits.small_matrix is None
        fast_pos, fast_sym = methods.swap_scores(logits, block_size, 1e-4)
        for lead in range(2):
            _, _, s_pos, s_sym = naive_swaps(positions @ tokens[lead].T, other[lead], block_size, 1e-4)
            assert float(fast_pos[lead]) == pytest.approx(s_pos, abs=1e-12)
            assert float(fast_sym[lead]) == pytest.approx(s_sym, abs=1e-12)


def test_non_finite_logits_give_nan_scores_on_long_prompts() -> None:
    """An entry whose logits are NaN scores NaN (``nonfinite="nan"``); its neighbours are unaffected."""
    generator = torch.Generator().manual_seed(3)
    positions = torch.randn(40, 3, generator=generator, dtype=torch.float64)
    tokens = torch.randn(2, 40, 3, generator=generator, dtype=torch.float64)
    other = torch.zeros(2, 1, dtype=torch.float64)
    fine = methods.swap_scores(KeyLogits(positions, tokens, other, None), 1, 1e-4)
    tokens[0] = float("nan")
    broken = methods.swap_scores(KeyLogits(positions, tokens, other, None), 1, 1e-4)
    for before, after in zip(fine, broken, strict=True):
        assert torch.isnan(after[0]) and float(after[1]) == pytest.approx(float(before[1]), abs=1e-15)
    for single in methods.swap_scores(KeyLogits(positions, tokens[:1], other[:1], None), 1, 1e-4):
        assert torch.isnan(single).all()


def test_skipped_pairs_carry_less_than_fp64_resolution() -> None:
    """A peaked head: most pairs are skipped, their α sums below 2⁻⁵³, the score is unchanged."""
    generator = torch.Generator().manual_seed(7)
    n = 300
    M = torch.randn(n, n, generator=generator, dtype=torch.float64)
    M[:, 17] += 12.0  # the token at 17 draws the attention wherever it stands
    M[17, :] += 4.0
    other = torch.zeros(1, dtype=torch.float64)
    detail = methods.swap_attention_detail(from_matrix(M, other), 1, 1e-4)
    d_blocks = detail.d_base
    threshold = float(methods.skip_threshold(d_blocks[None], 1e-4)[0])
    gaps = (d_blocks[detail.pairs[:, 0]] - d_blocks[detail.pairs[:, 1]]).abs()
    skipped = gaps < threshold
    assert skipped.float().mean() > 0.9  # the point of skipping
    assert float(detail.weights[skipped].sum()) < 2.0**-53
    full_pos = float((detail.weights * detail.cos_positional).sum())
    fast_pos, _ = methods.swap_scores(from_matrix(M[None], other[None]), 1, 1e-4)
    assert float(fast_pos[0]) == pytest.approx(full_pos, abs=1e-13)
    low_rank = KeyLogits(M, torch.eye(n, dtype=torch.float64)[None], other[None], None)  # n <= k: all of M
    assert float(methods.swap_scores(low_rank, 1, 1e-4)[0][0]) == pytest.approx(full_pos, abs=1e-13)


@pytest.mark.parametrize(("n", "k"), [(6, 9), (9, 4), (40, 3), (5, 1)])
def test_gram_anova_equals_the_explicit_decomposition(n, k) -> None:
    generator = torch.Generator().manual_seed(n * k)
    positions = torch.randn(n, k, generator=generator, dtype=torch.float64)
    tokens = torch.randn(3, n, k, generator=generator, dtype=torch.float64)
    logits = KeyLogits(positions, tokens, torch.zeros(3, 1, dtype=torch.float64), None)
    explicit = methods.anova_shares(positions @ tokens.transpose(-1, -2))
    for got, want in zip(methods.anova_shares_factored(logits), explicit, strict=True):
        torch.testing.assert_close(got, want, atol=1e-12, rtol=0)
    flat = KeyLogits(positions, torch.zeros_like(tokens), torch.zeros(3, 1, dtype=torch.float64), None)
    assert [float(x[0]) for x in methods.anova_shares_factored(flat)] == [1.0, 1.0, 0.0]  # uniform


def test_anova_under_a_soft_cap_uses_the_capped_matrix() -> None:
    generator = torch.Generator().manual_seed(3)
    positions = torch.randn(20, 3, generator=generator, dtype=torch.float64)
    tokens = torch.randn(2, 20, 3, generator=generator, dtype=torch.float64) * 4
    capped = KeyLogits(positions, tokens, torch.zeros(2, 1, dtype=torch.float64), softcap=2.0)
    scores = methods.get_score_method("anova").score(capped, psheads.ScoreConfig(method="anova"))
    want = methods.anova_shares(2.0 * torch.tanh(positions @ tokens.transpose(-1, -2) / 2.0))
    for column, expected in zip(("positional", "symbolic", "interaction"), want, strict=True):
        torch.testing.assert_close(scores[column], expected, atol=1e-12, rtol=0)


class RowColumnShare:
    """A third score method, registered the documented way (variance of row vs column means)."""

    name = "rowcol-test"
    columns = ("positional", "symbolic", "row_variance")

    def min_swappable(self, config: psheads.ScoreConfig) -> int:
        return 3

    def score(self, logits: KeyLogits, config: psheads.ScoreConfig) -> dict[str, torch.Tensor]:
        M = logits.matrix()
        rows = M.mean(-1).var(-1, correction=0)
        cols = M.mean(-2).var(-1, correction=0)
        total = (rows + cols).clamp_min(1e-300)
        return {"positional": rows / total, "symbolic": cols / total, "row_variance": rows}


@pytest.fixture
def registered():
    method = psheads.register_score_method(RowColumnShare())
    try:
        yield method
    finally:
        methods.base._METHODS.pop(method.name)


def test_a_registered_method_runs_through_score_heads(model_factory, registered) -> None:
    lens = psheads.RopeLens(model_factory("llama"))
    tokens = torch.randint(0, 64, (4, 9))
    assert "rowcol-test" in psheads.score_methods()
    frame = psheads.score_heads(lens, tokens, method="rowcol-test")
    assert list(frame.columns) == ["layer", "head", "kv_head", "positional", "symbolic", "positional_std",
                                   "symbolic_std", "row_variance", "entropy", "n_prompts", "label"]
    per_prompt = psheads.score_heads(lens, tokens, method="rowcol-test", reduce=False)
    M = lens.position_token_logits(tokens, layer=1)[:, :, :8, :8]  # S = keys 0…7 before the query
    rows = M.mean(-1).var(-1, correction=0)
    expected = rows / (rows + M.mean(-2).var(-1, correction=0))
    got = per_prompt[per_prompt["layer"] == 1].sort_values(["prompt", "head"])["positional"].to_numpy()
    torch.testing.assert_close(torch.tensor(got), expected.reshape(-1), atol=1e-5, rtol=0)
    with pytest.raises(ValueError, match="fewer than the 3 that method 'rowcol-test' needs"):
        psheads.score_heads(lens, [[1, 2, 3]], method="rowcol-test")


def test_registry_refuses_duplicates_and_incomplete_methods(registered) -> None:
    with pytest.raises(ValueError, match="already registered"):
        psheads.register_score_method(RowColumnShare())

    class NoScore:
        name = "broken"
        columns = ("positional", "symbolic")

    with pytest.raises(TypeError, match="score"):
        psheads.register_score_method(NoScore())

    class NoSymbolic(RowColumnShare):
        name = "no-symbolic"
        columns = ("positional",)

    with pytest.raises(ValueError, match="'positional' and 'symbolic'"):
        psheads.register_score_method(NoSymbolic())
    with pytest.raises(ValueError, match="method must be one of"):
        psheads.ScoreConfig(method="nope")


def test_entropy_is_normalised() -> None:
    M = torch.zeros(1, 4, 4, dtype=torch.float64)
    _, entropy = methods.base_attention(from_matrix(M, torch.zeros(1, 1, dtype=torch.float64)))
    assert float(entropy[0]) == pytest.approx(1.0)
    peaked = M.clone()
    peaked[0, 2, 2] = 800.0
    _, entropy = methods.base_attention(from_matrix(peaked, torch.zeros(1, 1, dtype=torch.float64)))
    assert float(entropy[0]) == pytest.approx(0.0, abs=1e-12) and math.isfinite(float(entropy[0]))


def test_labels_are_ordered_by_the_rule() -> None:
    frame = pd.DataFrame({"positional": [0.95, 0.5, 0.05, 0.95, float("nan")],
                          "symbolic": [0.05, 0.5, 0.95, 0.95, 0.5]})
    labels = [methods.label(p, s) for p, s in zip(frame.positional, frame.symbolic, strict=True)]
    assert labels == list(schema.LABEL_ORDER[:-1])


@pytest.mark.parametrize(("n", "k"), [(6, 8), (40, 3)])  # all of M, then heavy-block tiles
def test_the_swap_score_makes_its_tensors_where_the_logits_are(n, k) -> None:
    """Every tensor the swap score creates lives on the logits' device: with "meta" as the default
    device, a tensor made without one lands there and mixing it with the CPU logits fails (as a
    CPU-made index failed on a CUDA model before)."""
    generator = torch.Generator().manual_seed(n)
    logits = KeyLogits(torch.randn(n, k, generator=generator, dtype=torch.float64),
                       torch.randn(2, n, k, generator=generator, dtype=torch.float64),
                       torch.randn(2, 1, generator=generator, dtype=torch.float64), None)
    expected = methods.swap_scores(logits, 2, 1e-4)
    with torch.device("meta"):
        scores = methods.swap_scores(logits, 2, 1e-4)
        detail = methods.swap_attention_detail(logits.select(0), 2, 1e-4)
    assert all(score.device.type == "cpu" for score in scores) and detail.pairs.device.type == "cpu"
    assert all(torch.equal(a, b) for a, b in zip(scores, expected, strict=True))
