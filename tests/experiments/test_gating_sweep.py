"""The gated training sweep: band → plane mapping, config checks, a smoke sweep, determinism, and
proof that gating restricts the trained heads to their band."""

from __future__ import annotations

import os

import pandas as pd
import pytest
import torch
import transformers

from psheads.experiments.gating_sweep import (
    SWEEP_MODEL,
    SweepConfig,
    band_geometry,
    band_planes,
    gating_sweep,
    planes_text,
    run_cell,
)
from psheads.models import checkpoints, training
from psheads.results import schema

os.environ.setdefault("HF_HUB_OFFLINE", "1")

# d_head 16: 6 rotated planes (dims 0-11) and 4 unrotated dims (plane 0); bands of 2 planes
TINY = dict(SWEEP_MODEL, n_embd=16, rotary_dim=12, n_positions=16)
SMOKE = dict(tasks=("index", "retrieval", "partial-induction"), bands=("all", "fast+zero"), seeds=(0,), steps=3,
             warmup_steps=1, length=6, n_letters=3, width=2, eval_prompts=16, score_prompts=4, model=TINY)


@pytest.fixture(scope="module")
def smoke() -> pd.DataFrame:
    return gating_sweep(SweepConfig(**SMOKE), progress=False)


def test_bands_map_to_the_planes_of_the_shipped_model() -> None:
    assert band_planes("fast", SWEEP_MODEL) == (1, 2, 3, 4)
    assert band_planes("middle", SWEEP_MODEL) == (13, 14, 15, 16)
    assert band_planes("slow", SWEEP_MODEL) == (25, 26, 27, 28)
    assert band_planes("zero", SWEEP_MODEL) == (0,)
    assert band_planes("fast+zero", SWEEP_MODEL) == (0, 1, 2, 3, 4)
    assert band_planes("slow+fast", SWEEP_MODEL) == (1, 2, 3, 4, 25, 26, 27, 28)
    assert band_planes("all", SWEEP_MODEL) is None
    assert band_planes("middle", TINY, width=2) == (3, 4) and band_planes("slow", TINY, width=1) == (6,)
    config = transformers.GPTJConfig(n_embd=32, n_head=2, rotary_dim=16)  # 8 planes, every dim rotated
    assert band_planes("slow", config, width=3) == (6, 7, 8)
    assert planes_text(None) == "all" and planes_text((0, 1, 2)) == "0 1 2"


@pytest.mark.parametrize(("band", "model", "width", "error", "match"), [
    ("fastest", SWEEP_MODEL, 4, ValueError, "unknown parts"),
    ("all+zero", SWEEP_MODEL, 4, ValueError, "cannot be joined"),
    ("fast+fast", SWEEP_MODEL, 4, ValueError, "repeats"),
    ("zero", dict(SWEEP_MODEL, rotary_dim=64), 4, ValueError, "no zero-frequency plane"),
    ("fast", SWEEP_MODEL, 29, ValueError, "width"),
    ("fast", SWEEP_MODEL, 0, ValueError, "width"),
    ("", SWEEP_MODEL, 4, TypeError, "non-empty string"),
    (None, SWEEP_MODEL, 4, TypeError, "non-empty string"),
])
def test_bad_bands_are_refused_clearly(band: object, model: dict, width: int, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        band_planes(band, model, width)  # type: ignore[arg-type]


@pytest.mark.parametrize(("options", "error", "match"), [
    (dict(tasks=("index", "nope")), ValueError, "not registered"),
    (dict(tasks="index"), TypeError, "list of names"),
    (dict(bands=("fast", "fast")), ValueError, "repeat"),
    (dict(bands=("zero",), model=dict(SWEEP_MODEL, rotary_dim=64)), ValueError, "zero-frequency"),
    (dict(seeds=(0, 0)), ValueError, "repeat"),
    (dict(seeds=()), ValueError, "at least one"),
    (dict(steps=0), ValueError, "steps"),
    (dict(steps=10, warmup_steps=10), ValueError, "warmup_steps"),
    (dict(lr=0.0), ValueError, "lr"),
    (dict(model={"n_layers": 2}), ValueError, "unknown GPTJConfig"),
    (dict(length=2, tasks=("partial-induction",)), ValueError, "length"),
])
def test_config_is_validated(options: dict, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        SweepConfig(**options)


def test_config_round_trips_and_is_frozen() -> None:
    config = SweepConfig(**SMOKE)
    assert SweepConfig.from_dict(config.to_dict()) == config
    with pytest.raises(AttributeError):
        config.steps = 5  # type: ignore[misc]
    training_config = config.train_config("fast+zero", 0)
    assert training_config.keep_planes == (0, 1, 2) and training_config.checkpoint_every == 3
    assert config.train_config("all", 0).keep_planes is None


def test_smoke_sweep_is_a_valid_tidy_frame(smoke: pd.DataFrame) -> None:
    assert list(smoke.columns) == schema.GATING_SWEEP.names
    assert len(smoke) == 3 * 2 * 1 * 2  # tasks × bands × seeds × layers (one head each)
    assert not smoke.duplicated(["task", "band", "seed", "layer", "head"]).any()
    assert list(dict.fromkeys(smoke["task"])) == list(SMOKE["tasks"])
    assert set(smoke["planes"]) == {"all", "0 1 2"} and set(smoke["steps"]) == {3}
    assert smoke["accuracy"].between(0, 1).all() and smoke["positional"].between(0, 1).all()
    assert smoke["symbolic"].between(0, 1).all()
    assert set(smoke["label"]) <= {"positional", "symbolic", "uniform", "mixed"}
    assert smoke.groupby(["task", "band", "seed"])["accuracy"].nunique().eq(1).all()
    assert smoke.attrs["bands"] == {"all": "all", "fast+zero": "0 1 2"}
    assert len(smoke.attrs["cells"]) == 6 and all(cell["train_seconds"] > 0 for cell in smoke.attrs["cells"])


def test_same_seed_same_frame_in_any_number_of_workers(smoke: pd.DataFrame) -> None:
    config = SweepConfig(**{**SMOKE, "tasks": ("retrieval", "partial-induction")})
    expected = smoke[smoke["task"] != "index"].reset_index(drop=True)
    pd.testing.assert_frame_equal(gating_sweep(config, progress=False), expected)
    pd.testing.assert_frame_equal(gating_sweep(config, progress=False, workers=2), expected)


def test_another_seed_gives_another_model() -> None:
    config = SweepConfig(**{**SMOKE, "tasks": ("index",), "bands": ("all",), "seeds": (0, 1), "steps": 5})
    frame = gating_sweep(config, progress=False)
    first, second = (frame[frame["seed"] == seed][["positional", "symbolic"]].to_numpy() for seed in (0, 1))
    assert not (first == second).all()


def test_gating_restricts_the_trained_queries_to_the_band(tmp_path) -> None:
    config = SweepConfig(**{**SMOKE, "bands": ("fast+zero",), "steps": 4})
    run_cell(config, "partial-induction", "fast+zero", 0, tmp_path / "run")
    model = transformers.GPTJForCausalLM.from_pretrained(checkpoints.latest_checkpoint(tmp_path / "run"))
    model.eval()
    start = transformers.GPTJForCausalLM(transformers.GPTJConfig(**model.config.to_dict()))
    kept = training.query_keep_mask(model, config.planes("fast+zero")).bool()  # dims 0-3 (planes 1, 2), 12-15
    assert kept.tolist() == [True] * 4 + [False] * 8 + [True] * 4
    tokens = config.task("partial-induction").generate(8, seed=3).tokens
    with torch.no_grad():
        before = model(tokens).logits
        for block, fresh in zip(model.transformer.h, start.transformer.h, strict=True):
            assert (block.attn.q_proj.weight[~kept] == 0).all()  # the excluded planes of q are exactly 0
            assert (block.attn.q_proj.weight[kept] != 0).any()
            # so the excluded planes of k cannot matter: replace them and nothing changes
            block.attn.k_proj.weight[~kept] = fresh.attn.k_proj.weight[~kept] * 7
        after = model(tokens).logits
    torch.testing.assert_close(after, before, rtol=0, atol=1e-6)


def test_band_geometry_reads_the_models_own_tables() -> None:
    geometry = band_geometry(SweepConfig(**SMOKE))
    fast_zero = geometry[geometry["band"] == "fast+zero"].set_index("plane")
    assert list(fast_zero.index) == [0, 1, 2]
    assert fast_zero.loc[0, "theta"] == 0 and fast_zero.loc[0, "period"] == float("inf")
    assert fast_zero.loc[1, "theta"] == pytest.approx(1.0)  # GPT-J: θ_f = 10000^(−2(f−1)/rotary_dim)
    assert fast_zero.loc[2, "theta"] == pytest.approx(10000 ** (-2 / 12))
    assert len(geometry[geometry["band"] == "all"]) == 7
