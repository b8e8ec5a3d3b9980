"""score_heads against the brute-force swap-and-rerun oracle, plus frames, options and errors."""

from __future__ import annotations

import pandas as pd
import pytest
import torch

import psheads
from psheads.measure import engine
from psheads.measure.prompts import PromptOptions, prepare_prompts
from psheads.results import schema
from tests import oracle

# numerically sensitive: every test runs at 1 and 2 torch threads (see conftest.torch_threads)
pytestmark = pytest.mark.usefixtures("torch_threads")

ORACLE_CASES = [
    # family, layer, block size, prompt length
    ("gptj", 1, 1, 10),
    ("gptj", 0, 2, 11),
    ("llama", 1, 1, 10),  # GQA
    ("llama", 0, 3, 12),
    ("gemma2", 0, 1, 12),  # sliding window 5 + soft-cap
    ("gemma2", 0, 2, 12),
    ("gemma2", 1, 2, 9),  # global layer, soft-cap
]


@pytest.mark.parametrize(("family", "layer", "block_size", "length"), ORACLE_CASES)
def test_matches_the_brute_force_oracle(model_factory, family, layer, block_size, length) -> None:
    model = model_factory(family)
    lens = psheads.RopeLens(model)
    tokens = torch.randint(0, 64, (3, length))
    query = length - 1
    frame = psheads.score_heads(lens, tokens, layers=[layer], block_size=block_size, reduce=False)
    geo = lens.layers[layer]
    swappable = [p for p in range(query) if geo.window is None or query - p < geo.window]
    blocks = oracle.make_blocks(swappable, block_size)
    for prompt in range(3):
        truth = oracle.brute_force_swap_attention(model, tokens[prompt], layer, query, blocks)
        s_pos, s_sym = oracle.swap_scores_from_attention(truth["d_base"], truth["d_swapped"], truth["pairs"])
        for head in range(geo.n_heads):
            per_swap = psheads.swap_attention(lens, tokens[prompt], layer, head, block_size=block_size)
            assert per_swap["block_i"].tolist() == truth["pairs"][:, 0].tolist()
            ours = torch.tensor(per_swap[["d_i_swapped", "d_j_swapped"]].to_numpy())
            torch.testing.assert_close(ours, truth["d_swapped"][:, head], atol=1e-6, rtol=0)
            ours_base = torch.tensor(per_swap[["d_i", "d_j"]].to_numpy())
            expected_base = truth["d_base"][head][truth["pairs"]]
            torch.testing.assert_close(ours_base, expected_base, atol=1e-6, rtol=0)
            row = frame[(frame["prompt"] == prompt) & (frame["head"] == head)].iloc[0]
            assert row["positional"] == pytest.approx(float(s_pos[head]), abs=1e-5)
            assert row["symbolic"] == pytest.approx(float(s_sym[head]), abs=1e-5)
            # one prompt vs a batch of three: the model's fp32 forward differs slightly
            assert per_swap.attrs["positional"] == pytest.approx(row["positional"], abs=1e-5)


def test_reduced_frame_schema_and_attrs(model_factory, tmp_path) -> None:
    lens = psheads.RopeLens(model_factory("llama"))
    tokens = torch.randint(0, 64, (5, 9))
    frame = psheads.score_heads(lens, tokens, batch_size=2)
    assert list(frame.columns) == ["layer", "head", "kv_head", "positional", "symbolic", "positional_std",
                                   "symbolic_std", "entropy", "n_prompts", "label"]
    assert len(frame) == 2 * 4 and (frame["n_prompts"] == 5).all()
    assert frame["kv_head"].tolist() == [0, 0, 1, 1] * 2
    assert set(frame["label"]) <= set(schema.LABEL_ORDER)
    assert ((frame["entropy"] >= 0) & (frame["entropy"] <= 1 + 1e-12)).all()
    per_prompt = psheads.score_heads(lens, tokens, batch_size=3, reduce=False)
    grouped = per_prompt.groupby(["layer", "head"])
    for column in ("positional", "symbolic", "entropy"):
        torch.testing.assert_close(torch.tensor(frame[column].to_numpy()),
                                   torch.tensor(grouped[column].mean().to_numpy()), atol=1e-6, rtol=0)
    torch.testing.assert_close(torch.tensor(frame["symbolic_std"].to_numpy()),
                               torch.tensor(grouped["symbolic"].std(ddof=0).to_numpy()), atol=1e-6, rtol=0)
    assert frame.attrs["config"]["tau"] == 1e-4 and frame.attrs["n_prompts"] == 5
    assert {"psheads", "torch", "transformer-lens"} <= set(frame.attrs["versions"])
    path = tmp_path / "scores.parquet"
    frame.to_parquet(path)
    loaded = pd.read_parquet(path)
    assert loaded.attrs == frame.attrs
    pd.testing.assert_frame_equal(loaded, frame)
    config = psheads.ScoreConfig.from_dict(frame.attrs["config"])
    assert config == psheads.ScoreConfig(batch_size=2)


def test_by_frequency_and_anova(model_factory) -> None:
    lens = psheads.RopeLens(model_factory("neox"))  # partial rotary: plane 0 is real
    tokens = torch.randint(0, 64, (4, 8))
    planes = psheads.score_heads(lens, tokens, by_frequency=True, layers=[1])
    geo = lens.layers[1]
    assert len(planes) == geo.n_heads * (geo.n_planes + 1)
    assert set(planes["plane"]) == {0, 1, 2}
    assert planes.loc[planes["plane"] == 1, "theta"].iloc[0] == pytest.approx(float(geo.theta[0]))
    anova = psheads.score_heads(lens, tokens, method="anova")
    assert "interaction" in anova.columns
    # the three shares of every head and prompt sum to one
    per_prompt = psheads.score_heads(lens, tokens, method="anova", reduce=False)
    total = per_prompt["positional"] + per_prompt["symbolic"] + per_prompt["interaction"]
    torch.testing.assert_close(torch.tensor(total.to_numpy()), torch.ones(len(total), dtype=torch.float64))


def test_prompt_forms_and_lengths(model_factory) -> None:
    lens = psheads.RopeLens(model_factory("gptj"))
    short, long = [3, 5, 7, 9, 11], [1, 2, 3, 4, 5, 6, 7, 8, 9]
    mixed = psheads.score_heads(lens, [short, long], reduce=False, batch_size=2)
    alone = pd.concat([psheads.score_heads(lens, [p], reduce=False) for p in (short, long)])
    torch.testing.assert_close(torch.tensor(mixed["positional"].to_numpy()),
                               torch.tensor(alone["positional"].to_numpy()), atol=1e-6, rtol=0)
    as_tensor = psheads.score_heads(lens, torch.tensor([long]), reduce=False)
    torch.testing.assert_close(torch.tensor(as_tensor["symbolic"].to_numpy()),
                               torch.tensor(mixed[mixed["prompt"] == 1]["symbolic"].to_numpy()), atol=1e-6, rtol=0)
    strings = psheads.score_heads(lens, ["t1 t2 t3 t4 t5", "t9 t8 t7 t6"], reduce=False)
    assert set(strings["prompt"]) == {0, 1}
    # a query per prompt and an explicit swappable window
    window = psheads.score_heads(lens, [long, long], query=[7, 8], swappable=[2, 3, 4, 5], reduce=False)
    assert len(window) == 2 * 2 * 4


def test_bos_is_not_swapped(model_factory, monkeypatch) -> None:
    model = model_factory("llama")
    lens = psheads.RopeLens(model)
    monkeypatch.setattr(psheads.prompts, "bos_token_id", lambda backend: 5)  # pretend token 5 is BOS
    prepared = prepare_prompts(lens.backend, [[5, 1, 2, 3], [4, 1, 2, 3]])
    assert prepared[0].candidates == (1, 2) and prepared[0].bos
    assert prepared[1].candidates == (0, 1, 2) and not prepared[1].bos
    forced = prepare_prompts(lens.backend, [[4, 1, 2, 3]], PromptOptions(exclude_bos=True))
    assert forced[0].candidates == (1, 2)


def test_bad_inputs(model_factory) -> None:
    lens = psheads.RopeLens(model_factory("llama"))
    with pytest.raises(ValueError, match="No prompts"):
        psheads.score_heads(lens, [])
    with pytest.raises(ValueError, match="fewer than the 4 that method .swap. needs"):
        psheads.score_heads(lens, [[1, 2, 3]], block_size=2)
    with pytest.raises(ValueError, match="query 9 is out of range"):
        psheads.score_heads(lens, [[1, 2, 3, 4]], query=9)
    with pytest.raises(ValueError, match="not keys before its query"):
        psheads.score_heads(lens, [[1, 2, 3, 4]], swappable=[1, 3])
    with pytest.raises(ValueError, match="exceeds the model's context"):
        psheads.score_heads(psheads.RopeLens(model_factory("gptj")), torch.zeros(1, 1100, dtype=torch.long))
    with pytest.raises(ValueError, match="does not use rotary"):
        psheads.score_heads(model_factory("gpt2"), [[1, 2, 3]])
    with pytest.raises(ValueError, match="method"):
        psheads.score_heads(lens, [[1, 2, 3, 4]], method="exact")
    with pytest.raises(ValueError, match="heads"):
        psheads.score_heads(lens, [[1, 2, 3, 4]], heads=[7])
    with pytest.raises(TypeError, match="not one string"):
        psheads.score_heads(lens, "t1 t2 t3")
    with pytest.raises(ValueError, match="one per prompt"):
        psheads.score_heads(lens, [[1, 2, 3, 4]], query=[1, 2])


def test_same_input_same_frame(model_factory) -> None:
    lens = psheads.RopeLens(model_factory("qwen2"))
    tokens = torch.randint(0, 64, (6, 10))
    first = psheads.score_heads(lens, tokens, batch_size=4)
    second = psheads.score_heads(lens, tokens, batch_size=4)
    pd.testing.assert_frame_equal(first, second, check_exact=True)
    shuffled = psheads.score_heads(lens, tokens[torch.tensor([3, 0, 5, 1, 4, 2])], batch_size=4)
    pd.testing.assert_frame_equal(first.drop(columns=["positional_std", "symbolic_std"]),
                                  shuffled.drop(columns=["positional_std", "symbolic_std"]), atol=1e-6, rtol=0,
                                  check_exact=False)


def test_chunking_does_not_change_scores(model_factory, monkeypatch) -> None:
    lens = psheads.RopeLens(model_factory("gemma"))
    tokens = torch.randint(0, 64, (5, 10))
    whole = psheads.score_heads(lens, tokens, by_frequency=True, reduce=False)
    monkeypatch.setattr(engine, "CHUNK_BYTES", 4096)  # one prompt and a few swaps at a time
    chunked = psheads.score_heads(lens, tokens, by_frequency=True, reduce=False)
    # the same forward and capture; chunks only regroup the fp64 score arithmetic (sums of a few hundred
    # terms in [0, 1]), whose order may change the last bits: 1e-12 is ~10⁴ ulps of fp64
    pd.testing.assert_frame_equal(whole, chunked, check_exact=False, atol=1e-12, rtol=0)


def test_string_prompts_get_bos_and_never_swap_it() -> None:
    from psheads.models import zoo

    model = zoo.random_gptj(seed=0)
    lens = psheads.RopeLens(model)
    (prepared,) = prepare_prompts(lens.backend, ["w3 w7 w9 w1 w2"])
    assert prepared.tokens.tolist() == [127, 3, 7, 9, 1, 2] and prepared.bos
    assert prepared.candidates == (1, 2, 3, 4)
    (plain,) = prepare_prompts(lens.backend, ["w3 w7 w9 w1 w2"], PromptOptions(prepend_bos=False))
    assert plain.tokens.tolist() == [3, 7, 9, 1, 2] and plain.candidates == (0, 1, 2, 3)
    frame = psheads.score_heads(lens, ["w3 w7 w9 w1 w2", "w5 w4 w3 w2 w1 w0"], layers=[0], reduce=False)
    swaps = psheads.swap_attention(lens, "w3 w7 w9 w1 w2", layer=0, head=0)
    assert len(swaps) == 6 and swaps["positions_i"].iloc[0] == (1,)  # 4 swappable keys, BOS left out
    assert frame.loc[0, "positional"] == pytest.approx(swaps.attrs["positional"], abs=1e-5)


def test_config_is_the_api_and_attrs_rerun_exactly(model_factory, tmp_path) -> None:
    lens = psheads.RopeLens(model_factory("llama"))
    tokens = torch.randint(0, 64, (4, 11))
    config = psheads.ScoreConfig(block_size=2, tau=1e-3, layers=(1,),
                                 prompt_options=PromptOptions(query=-2, swappable=slice(1, -2)))
    from_config = psheads.score_heads(lens, tokens, config)
    as_kwargs = psheads.score_heads(lens, tokens, block_size=2, tau=1e-3, layers=[1], query=-2,
                                    swappable=slice(1, -2))
    pd.testing.assert_frame_equal(from_config, as_kwargs)
    overridden = psheads.score_heads(lens, tokens, config, query=-1, swappable=None)  # keyword arguments win
    assert overridden.attrs["config"]["prompt_options"]["query"] == -1
    assert overridden.attrs["config"]["block_size"] == 2
    path = tmp_path / "scores.parquet"
    from_config.to_parquet(path)
    saved = pd.read_parquet(path)
    rerun = psheads.score_heads(lens, tokens, psheads.ScoreConfig.from_dict(saved.attrs["config"]))
    pd.testing.assert_frame_equal(rerun, saved)
    with pytest.raises(TypeError, match=r"Unknown ScoreConfig option\(s\) \['tua'\]; valid: .*'tau'"):
        psheads.score_heads(lens, tokens, tua=1e-3)
    with pytest.raises(TypeError, match="prompt_options must be a PromptOptions"):
        psheads.ScoreConfig(prompt_options={"query": 3})


def test_profile_config(model_factory) -> None:
    lens = psheads.RopeLens(model_factory("llama"))
    tokens = torch.randint(0, 64, (3, 8))
    config = psheads.ProfileConfig(layers=(0,), prompt_options=PromptOptions(exclude_bos=True))
    profile = psheads.frequency_profile(lens, tokens, config)
    assert set(profile.planes["layer"]) == {0}
    assert psheads.ProfileConfig.from_dict(profile.planes.attrs["config"]) == config
    same = psheads.frequency_profile(lens, tokens, layers=[0], exclude_bos=True)
    pd.testing.assert_frame_equal(profile.planes, same.planes)
    with pytest.raises(TypeError, match="Unknown ProfileConfig option"):
        psheads.frequency_profile(lens, tokens, method="swap")


def test_non_finite_activations_are_never_labelled_silently(model_factory) -> None:
    """An overflow (here: inf written into layer 1's keys at one position) must raise or be flagged."""
    import warnings

    model = model_factory("llama")
    lens = psheads.RopeLens(model)
    tokens = torch.randint(0, 64, (3, 9))
    (site,) = lens.backend.qk_sites(1, "k")

    def overflow(tensor, hook):
        canonical = site.to_canonical(tensor).clone()
        canonical[0, 4, 1] = float("inf")  # prompt 0, key 4, KV head 1
        return site.from_canonical(canonical, tensor)

    with model.hooks(fwd_hooks=[(site.name, overflow)]):
        with pytest.raises(ValueError, match=r"Scores are not finite for 2 head\(s\): L1H2, L1H3"):
            psheads.score_heads(lens, tokens)
        with pytest.warns(UserWarning, match="kept as NaN and labelled 'non-finite'"):
            frame = psheads.score_heads(lens, tokens, nonfinite="nan")
        with pytest.raises(ValueError, match="Frequency usage is not finite for L1H2, L1H3"):
            psheads.frequency_profile(lens, tokens)
        with pytest.raises(psheads.SelfCheckError, match="Layer 1: .* not finite"):
            psheads.RopeLens(model, probe_length=8)
    flagged = frame[frame["label"] == "non-finite"]
    assert sorted(zip(flagged["layer"], flagged["head"], strict=True)) == [(1, 2), (1, 3)]
    assert flagged["positional"].isna().all() and not frame.loc[frame["layer"] == 0, "positional"].isna().any()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        clean = psheads.score_heads(lens, tokens)  # without the overflow: no warning, nothing flagged
    assert "non-finite" not in set(clean["label"])
