"""Summaries of score frames (psheads.analysis): synthetic frames with known answers, input
checks, and one pass on a tiny Gemma-3 model with local and global layers."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
import torch

import psheads
from psheads.results import analysis


def head_frame(n_layers: int = 4, n_heads: int = 3, seed: int = 0) -> pd.DataFrame:
    """Per-head scores: s_POS falls with depth, s_SYM ≈ 1 − s_POS."""
    rng = np.random.default_rng(seed)
    rows = []
    for layer in range(n_layers):
        for head in range(n_heads):
            positional = float(np.clip(1 - layer / n_layers - 0.05 * head + rng.normal(0, 0.01), 0, 1))
            rows.append({"layer": layer, "head": head, "kv_head": 0, "positional": positional,
                         "symbolic": float(np.clip(1 - positional + rng.normal(0, 0.02), 0, 1)),
                         "entropy": 0.5, "n_prompts": 4, "label": "mixed"})
    return pd.DataFrame(rows)


def plane_frame(n_planes: int = 8) -> pd.DataFrame:
    """Per-plane scores: s_POS = ID / n_planes (slow planes positional here, on purpose)."""
    rows = []
    for layer, base in ((0, 1e4), (1, 1e6)):
        for head in range(2):
            for plane in range(n_planes + 1):
                theta = 0.0 if plane == 0 else base ** (-(plane - 1) / n_planes)
                rows.append({"layer": layer, "head": head, "kv_head": 0, "plane": plane, "theta": theta,
                             "positional": plane / n_planes + 0.01 * head, "symbolic": 1 - plane / n_planes,
                             "label": "mixed"})
    return pd.DataFrame(rows)


# ------------------------------------------------------------------------------------------------
# per layer


def test_layer_summary_known_values() -> None:
    frame = pd.DataFrame({"layer": [0, 0, 0, 1, 1, 1], "head": [0, 1, 2] * 2, "positional": [0.1, 0.2, 0.9, 0.5,
                                                                                            np.nan, 0.7],
                          "symbolic": [1.0, 0.5, 0.0, 0.2, 0.4, 0.6], "label": ["mixed"] * 6})
    out = analysis.layer_summary(frame, quantiles=(0.0, 1.0))
    assert list(out.columns) == ["layer", "score", "n", "mean", "median", "q0", "q100", "min", "max"]
    row = out[(out["layer"] == 0) & (out["score"] == "positional")].iloc[0]
    assert row["n"] == 3 and row["median"] == pytest.approx(0.2) and row["mean"] == pytest.approx(0.4)
    assert row["q0"] == row["min"] == pytest.approx(0.1) and row["q100"] == pytest.approx(0.9)
    row = out[(out["layer"] == 1) & (out["score"] == "positional")].iloc[0]
    assert row["n"] == 2 and row["median"] == pytest.approx(0.6)  # NaN skipped, counted out
    assert out.attrs["quantiles"] == (0.0, 1.0)
    default = analysis.layer_summary(frame)
    assert {"q25", "q75"} <= set(default.columns)


def test_by_groups_concatenated_frames() -> None:
    both = pd.concat([head_frame().assign(prompts="a"), head_frame(seed=1).assign(prompts="b")], ignore_index=True)
    out = analysis.layer_summary(both, by="prompts")
    assert len(out) == 2 * 4 * 2 and list(out.columns[:3]) == ["prompts", "layer", "score"]
    with pytest.raises(ValueError, match="repeat a key"):
        analysis.layer_summary(both)
    with pytest.raises(ValueError, match=r"by names the columns \['nope'\]"):
        analysis.layer_summary(both, by="nope")
    with pytest.raises(ValueError, match="extra grouping columns"):
        analysis.layer_summary(both, by="layer")


def test_label_counts() -> None:
    frame = head_frame()
    frame.loc[[0, 1], "label"] = "positional"
    out = analysis.label_counts(frame, by="layer")
    layer_0 = out[out["layer"] == 0].set_index("label")
    assert layer_0.loc["positional", "n"] == 2 and layer_0.loc["mixed", "share"] == pytest.approx(1 / 3)
    total = analysis.label_counts(frame)
    assert total["n"].sum() == len(frame) and total["share"].sum() == pytest.approx(1.0)


# ------------------------------------------------------------------------------------------------
# groups of layers


def test_early_late_default_split_and_difference() -> None:
    frame = head_frame(n_layers=4)
    out = analysis.early_late(frame, n_boot=500)
    assert out.attrs["split"] == 2
    rows = out[out["score"] == "positional"].set_index("group")
    assert list(rows.index) == ["early", "late", "late - early"]
    assert rows.loc["early", "layers"] == "0, 1" and rows.loc["late", "layers"] == "2, 3"
    early = frame[frame["layer"] < 2]["positional"].median()
    late = frame[frame["layer"] >= 2]["positional"].median()
    assert rows.loc["early", "median"] == pytest.approx(early) and rows.loc["late", "median"] == pytest.approx(late)
    assert rows.loc["late - early", "median"] == pytest.approx(late - early)
    low, high = rows.loc["late - early", ["median_ci_low", "median_ci_high"]]
    assert low <= late - early <= high < 0  # clearly lower late
    assert rows.loc["early", "median_ci_low"] <= early <= rows.loc["early", "median_ci_high"]
    again = analysis.early_late(frame, n_boot=500)
    pd.testing.assert_frame_equal(out, again)  # seeded


def test_early_late_split_choices() -> None:
    frame = head_frame(n_layers=5)
    assert analysis.early_late(frame, n_boot=10).attrs["split"] == 2  # 0–1 vs 2–4
    out = analysis.early_late(frame, split=4, n_boot=10)
    assert out.loc[out["group"] == "early", "layers"].iloc[0] == "0–3"
    for split in (0, 5, 9):
        with pytest.raises(ValueError, match="layers on both sides"):
            analysis.early_late(frame, split=split)
    with pytest.raises(TypeError, match="split must be an int"):
        analysis.early_late(frame, split=2.0)
    with pytest.raises(ValueError, match="at least 2 layers"):
        analysis.early_late(head_frame(n_layers=1))


def layered_frame(layer_values: list[float], n_heads: int, split: int, shift: float = 0.0,
                  noise: float = 0.0, seed: int = 0) -> pd.DataFrame:
    """Per-head scores: every head of layer ``i`` at ``layer_values[i]`` (+ ``shift`` from layer
    ``split`` on, + independent head noise), s_SYM = 1 − s_POS."""
    rng = np.random.default_rng(seed)
    rows = [{"layer": layer, "head": head, "label": "mixed",
             "positional": value + (shift if layer >= split else 0.0) + rng.normal(0, noise) * (noise > 0)}
            for layer, value in enumerate(layer_values) for head in range(n_heads)]
    frame = pd.DataFrame(rows)
    return frame.assign(symbolic=1 - frame["positional"])


def test_layer_bootstrap_matches_pooling_the_drawn_layers() -> None:
    """Oracle: the weighted median equals np.median of the heads of the drawn layers, pooled."""
    rng = np.random.default_rng(3)
    layers = np.repeat(np.arange(7), 5)
    values = rng.normal(size=layers.size)
    values[[2, 9]] = np.nan
    values[layers == 4] = np.nan  # a layer with no finite score is not a unit
    fast = analysis.layer_bootstrap_medians(values, layers, 300, np.random.default_rng(11))
    units = np.array([0, 1, 2, 3, 5, 6])
    draws = np.random.default_rng(11).integers(0, units.size, size=(300, units.size))
    pooled = [np.concatenate([values[(layers == units[d]) & np.isfinite(values)] for d in row]) for row in draws]
    np.testing.assert_array_equal(fast, [np.median(pool) for pool in pooled])
    one = analysis.layer_bootstrap_medians([0.1, 0.2, 0.3], [4, 4, 4], 50, np.random.default_rng(0))
    assert np.isnan(one).all()  # one layer: no interval
    with pytest.raises(ValueError, match="of one length"):
        analysis.layer_bootstrap_medians([0.1, 0.2], [0], 10, np.random.default_rng(0))


def test_identical_heads_within_a_layer_count_once() -> None:
    """Heads of a layer all alike: 20 identical heads are one measurement, not twenty. Resampling
    heads gives a falsely narrow interval that excludes 0; resampling layers contains 0."""
    frame = layered_frame([0.2, 0.5, 0.8, 0.3, 0.6, 0.9], n_heads=20, split=3)
    out = analysis.early_late(frame, split=3)
    assert out.attrs["resample"] == "layer" and out.attrs["min_layers"] == 2
    row = out[(out["group"] == "late - early") & (out["score"] == "positional")].iloc[0]
    assert row["median"] == pytest.approx(0.1)  # the middle layers, 0.6 − 0.5
    assert row["median_ci_low"] < 0 < row["median_ci_high"]
    assert row["median_ci_high"] - row["median_ci_low"] > 0.5
    early, late = (frame.loc[frame["layer"].isin(layers), "positional"] for layers in ([0, 1, 2], [3, 4, 5]))
    by_head = analysis.difference_of_medians(early, late)  # the old, head-level bootstrap
    assert by_head["verdict"] == "above 0" and by_head["ci_high"] - by_head["ci_low"] < 0.01
    kinds = analysis.local_global(frame, [0, 1, 2])
    row = kinds[(kinds["group"] == "global - local") & (kinds["score"] == "symbolic")].iloc[0]
    assert row["median_ci_low"] < 0 < row["median_ci_high"]


def test_a_consistent_layer_level_shift_keeps_its_interval() -> None:
    """Many layers, each late layer 0.3 below the early ones (layer-to-layer and head noise)."""
    rng = np.random.default_rng(1)
    layer_values = list(0.7 + rng.normal(0, 0.05, 24))
    frame = layered_frame(layer_values, n_heads=6, split=12, shift=-0.3, noise=0.05, seed=2)
    out = analysis.early_late(frame, n_boot=1000)
    rows = out[out["score"] == "positional"].set_index("group")
    low, high = rows.loc["late - early", ["median_ci_low", "median_ci_high"]]
    assert low <= rows.loc["late - early", "median"] <= high < -0.2
    symbolic = out[(out["group"] == "late - early") & (out["score"] == "symbolic")].iloc[0]
    assert symbolic["median_ci_low"] > 0.2
    for group in ("early", "late"):
        assert rows.loc[group, "median_ci_low"] <= rows.loc[group, "median"] <= rows.loc[group, "median_ci_high"]


def test_layer_bootstrap_is_seeded() -> None:
    layer_values = list(np.random.default_rng(4).uniform(0, 1, 16))
    frame = layered_frame(layer_values, n_heads=3, split=8, noise=0.1)
    first, again = analysis.early_late(frame, n_boot=200, seed=5), analysis.early_late(frame, n_boot=200, seed=5)
    pd.testing.assert_frame_equal(first, again)
    other = analysis.early_late(frame, n_boot=200, seed=6)
    intervals = ["median_ci_low", "median_ci_high"]
    assert not np.allclose(first[intervals], other[intervals])
    pd.testing.assert_frame_equal(first.drop(columns=intervals), other.drop(columns=intervals))  # estimates fixed
    by_model = analysis.early_late(pd.concat([frame.assign(model="a"), frame.iloc[:18].assign(model="b")]),
                                   by="model", n_boot=200, seed=5)
    assert by_model.attrs["resample"] == "layer" and by_model.attrs["split"] == {("a",): 8, ("b",): 3}


def test_a_group_of_one_layer_has_no_interval() -> None:
    frame = head_frame(n_layers=5)
    out = analysis.early_late(frame, split=4, n_boot=100)  # 0–3 against layer 4 alone
    rows = out[out["score"] == "positional"].set_index("group")
    assert rows.loc["late", "n_layers"] == 1 and math.isfinite(rows.loc["late", "median"])
    assert rows.loc[["late", "late - early"], ["median_ci_low", "median_ci_high"]].isna().all().all()
    assert rows.loc["early", ["median_ci_low", "median_ci_high"]].notna().all()
    assert math.isfinite(rows.loc["late - early", "median"])  # the estimate stays; only its interval is missing


def test_layer_kinds_and_local_global() -> None:
    class Geo:
        def __init__(self, layer: int, window: int | None) -> None:
            self.layer, self.window = layer, window

    class Lens:
        layers = [Geo(0, 5), Geo(1, None), Geo(2, 5), Geo(3, None)]

    kinds = analysis.layer_kinds(Lens())
    assert kinds == {0: "local", 1: "global", 2: "local", 3: "global"}
    frame = head_frame(n_layers=4)
    from_lens = analysis.local_global(frame, Lens(), n_boot=100)
    from_list = analysis.local_global(frame, [0, 2], n_boot=100)
    from_map = analysis.local_global(frame, kinds, n_boot=100)
    pd.testing.assert_frame_equal(from_lens, from_list)
    pd.testing.assert_frame_equal(from_lens, from_map)
    rows = from_lens[from_lens["score"] == "symbolic"].set_index("group")
    assert list(rows.index) == ["local", "global", "global - local"]
    assert rows.loc["local", "layers"] == "0, 2" and rows.loc["global", "n"] == 6
    added = analysis.add_layer_kind(frame, [0, 2])
    assert added["layer_kind"].tolist() == [kinds[layer] for layer in frame["layer"]]
    assert "layer_kind" not in frame.columns  # a copy


def test_layer_kind_errors() -> None:
    frame = head_frame(n_layers=4)
    with pytest.raises(TypeError, match=r"wrap a model first: psheads.RopeLens\(model\)"):
        analysis.layer_kinds(object())
    with pytest.raises(ValueError, match=r"local names layers \[7\]"):
        analysis.local_global(frame, [0, 7])
    with pytest.raises(ValueError, match="both local and global"):
        analysis.local_global(frame, [0, 1, 2, 3])
    with pytest.raises(ValueError, match=r"kind of layers \[3\] is unknown"):
        analysis.add_layer_kind(frame, {0: "local", 1: "global", 2: "local"})
    with pytest.raises(ValueError, match="must be 'local' or 'global'"):
        analysis.add_layer_kind(frame, {0: "sliding"})
    with pytest.raises(TypeError, match="local must be a list of ints"):
        analysis.add_layer_kind(frame, 3)


# ------------------------------------------------------------------------------------------------
# correlation


def test_correlation_matches_numpy_and_fisher() -> None:
    frame = head_frame(n_layers=6, n_heads=4)
    out = analysis.correlation(frame).iloc[0]
    r = np.corrcoef(frame["positional"], frame["symbolic"])[0, 1]
    assert out["r"] == pytest.approx(r) and out["n"] == 24 and out["r"] < -0.9
    half = 1.959963984540054 / math.sqrt(24 - 3)
    assert out["ci_low"] == pytest.approx(math.tanh(math.atanh(r) - half))
    assert out["ci_high"] == pytest.approx(math.tanh(math.atanh(r) + half))
    ranks = frame[["positional", "symbolic"]].rank()
    assert out["spearman"] == pytest.approx(np.corrcoef(ranks["positional"], ranks["symbolic"])[0, 1])
    boot = analysis.correlation(frame, method="bootstrap", n_boot=500).iloc[0]
    assert boot["r"] == pytest.approx(r) and boot["ci_low"] <= r <= boot["ci_high"]
    assert boot["ci_method"] == "bootstrap"


def test_correlation_edge_cases() -> None:
    frame = head_frame(n_layers=2, n_heads=2)
    frame.loc[0, "symbolic"] = np.nan
    out = analysis.correlation(frame).iloc[0]
    assert out["n"] == 3 and math.isfinite(out["r"]) and math.isnan(out["ci_low"])  # Fisher needs n > 3
    constant = frame.assign(symbolic=0.5)
    assert math.isnan(analysis.correlation(constant).iloc[0]["r"])
    exact = pd.DataFrame({"layer": range(5), "head": 0, "positional": np.linspace(0, 1, 5),
                          "symbolic": np.linspace(1, 0, 5)})
    row = analysis.correlation(exact).iloc[0]
    assert row["r"] == pytest.approx(-1.0) and row["ci_low"] == row["ci_high"] == row["r"]
    per_layer = analysis.correlation(head_frame(n_layers=3, n_heads=4), by="layer")
    assert per_layer["layer"].tolist() == [0, 1, 2]
    with pytest.raises(ValueError, match="method must be 'fisher' or 'bootstrap'"):
        analysis.correlation(frame, method="spearman")
    with pytest.raises(ValueError, match=r"correlation needs the columns \['entropy'\]"):
        analysis.correlation(frame.drop(columns="entropy"), y="entropy")
    with pytest.raises(ValueError, match="confidence must be less than 1"):
        analysis.correlation(frame, confidence=1.0)


# ------------------------------------------------------------------------------------------------
# per frequency


def test_frequency_summary_per_plane() -> None:
    frame = plane_frame()
    out = analysis.frequency_summary(frame, by=())
    assert sorted(out["plane"].unique()) == list(range(1, 9))  # plane 0 left out by default
    row = out[(out["plane"] == 4) & (out["score"] == "positional")].iloc[0]
    assert row["n"] == 4 and row["median"] == pytest.approx(0.5 + 0.005)
    assert row["theta_min"] < row["theta_max"]  # two RoPE bases mixed
    assert row["band"] == "IDs 3–4"
    by_layer = analysis.frequency_summary(frame, by="layer", unrotated=True)
    row = by_layer[(by_layer["layer"] == 1) & (by_layer["plane"] == 3) & (by_layer["score"] == "symbolic")].iloc[0]
    assert row["theta"] == pytest.approx(1e6 ** (-2 / 8)) and row["period"] == pytest.approx(2 * math.pi / row["theta"])
    plane_0 = by_layer[by_layer["plane"] == 0].iloc[0]
    assert plane_0["band"] == "unrotated" and math.isinf(plane_0["period"])


def test_band_summary_id_and_period_bands() -> None:
    frame = plane_frame()
    out = analysis.band_summary(frame, bands=2)
    positional = out[out["score"] == "positional"].set_index("band")
    assert list(positional.index) == ["IDs 1–4", "IDs 5–8"] and positional["band_index"].tolist() == [1, 2]
    assert positional.loc["IDs 1–4", "n"] == 16 and positional.loc["IDs 1–4", "planes"] == "1–4"
    named = analysis.band_summary(frame, bands={"fast": (1, 2), "slow": (7, 8)}, unrotated=True)
    assert named.loc[named["score"] == "symbolic", "band"].tolist() == ["fast", "slow", "unrotated"]
    assert named.loc[named["band"] == "fast", "median"].iloc[1] == pytest.approx(1 - 1.5 / 8)
    by_period = analysis.band_summary(frame, period_edges=[10, 1000])
    rows = by_period[by_period["score"] == "positional"]
    assert rows["band"].tolist() == ["period < 10", "period 10–1000", "period ≥ 1000"]
    banded = analysis.add_frequency_band(frame, period_edges=[10, 1000])
    period = 2 * np.pi / banded["theta"].where(banded["theta"] > 0)
    assert (banded.loc[period < 10, "band_index"] == 1).all()
    assert (banded.loc[period >= 1000, "band_index"] == 3).all()
    assert (banded.loc[banded["plane"] == 0, "band"] == "unrotated").all()


def test_band_errors() -> None:
    frame = plane_frame()
    with pytest.raises(ValueError, match="overlap"):
        analysis.band_summary(frame, bands={"a": (1, 4), "b": (4, 8)})
    with pytest.raises(ValueError, match="only 8 rotated planes"):
        analysis.band_summary(frame, bands=9)
    with pytest.raises(ValueError, match="increasing"):
        analysis.band_summary(frame, period_edges=[100, 10])
    with pytest.raises(ValueError, match="first_id <= last_id"):
        analysis.band_summary(frame, bands={"a": (4, 1)})


# ------------------------------------------------------------------------------------------------
# input checks


def test_inputs_are_checked_by_name() -> None:
    heads, planes = head_frame(), plane_frame()
    with pytest.raises(TypeError, match="needs a pandas DataFrame"):
        analysis.layer_summary([1, 2])
    with pytest.raises(ValueError, match=r"layer_summary needs the columns \['symbolic'\]"):
        analysis.layer_summary(heads.drop(columns="symbolic"))
    with pytest.raises(ValueError, match=r"frequency_summary needs the columns \['plane', 'theta'\]"):
        analysis.frequency_summary(heads)
    with pytest.raises(ValueError, match="per plane .by_frequency=True.; use frequency_summary|Use frequency_summary"):
        analysis.layer_summary(planes)
    with pytest.raises(ValueError, match="reduce=True"):
        analysis.early_late(heads.assign(prompt=0))
    with pytest.raises(ValueError, match="empty frame"):
        analysis.layer_summary(heads.iloc[:0])
    with pytest.raises(TypeError, match="column 'positional' must be numeric"):
        analysis.layer_summary(heads.assign(positional="high"))
    with pytest.raises(ValueError, match="quantiles must be increasing"):
        analysis.layer_summary(heads, quantiles=(0.75, 0.25))
    with pytest.raises(ValueError, match="quantiles item must be at most 1"):
        analysis.layer_summary(heads, quantiles=(0.5, 2))
    with pytest.raises(TypeError, match="quantiles must be a pair"):
        analysis.layer_summary(heads, quantiles=0.5)
    with pytest.raises(TypeError, match="n_boot must be an int"):
        analysis.early_late(heads, n_boot=1.5)
    with pytest.raises(ValueError, match="seed must be at least 0"):
        analysis.local_global(heads, [0], seed=-1)
    before = heads.copy()
    analysis.layer_summary(heads)
    analysis.early_late(heads, n_boot=10)
    pd.testing.assert_frame_equal(heads, before)  # inputs are never changed


# ------------------------------------------------------------------------------------------------
# on a real (tiny) model


def test_on_a_tiny_gemma3(model_factory) -> None:
    model = model_factory("gemma3", num_hidden_layers=4)  # sliding_window_pattern 2: layers 1, 3 global
    lens = psheads.RopeLens(model)
    kinds = analysis.layer_kinds(lens)
    assert kinds == {layer: "local" if geo.window is not None else "global" for layer, geo in enumerate(lens.layers)}
    assert set(kinds.values()) == {"local", "global"}
    tokens = torch.randint(0, int(model.cfg.d_vocab) - 2, (6, 6), generator=torch.Generator().manual_seed(0))
    scores = psheads.score_heads(lens, tokens)  # 6 tokens: every key inside the window of 5
    layers = analysis.layer_summary(scores)
    assert len(layers) == 2 * lens.n_layers and (layers["n"] == lens.layers[0].n_heads).all()
    groups = analysis.local_global(scores, lens, n_boot=50)
    assert groups.loc[groups["group"] == "global", "layers"].iloc[0] == ", ".join(
        str(layer) for layer, kind in kinds.items() if kind == "global")
    assert len(analysis.early_late(scores, n_boot=50)) == 6
    assert analysis.correlation(scores).iloc[0]["n"] == len(scores)
    per_plane = psheads.score_heads(lens, tokens, layers=[0, 1], by_frequency=True)
    frequency = analysis.frequency_summary(analysis.add_layer_kind(per_plane, lens), by="layer_kind", bands=2)
    n_planes = lens.layers[0].n_planes
    assert set(frequency["plane"]) == set(range(1, n_planes + 1))
    bands = analysis.band_summary(per_plane, bands=2)
    assert bands["n"].sum() == 2 * len(per_plane[per_plane["plane"] > 0])  # two score columns


def _dynamics(labels: dict[int, list[str]], accuracy: dict[int, list[float]]) -> pd.DataFrame:
    """A dynamics table: ``labels[step]`` per layer, ``accuracy[step]`` per hop count."""
    rows = []
    for step, layer_labels in labels.items():
        for layer, label in enumerate(layer_labels):
            row = {"step": step, "layer": layer, "head": 0, "label": label}
            row.update({f"accuracy_{h + 1}": a for h, a in enumerate(accuracy[step])})
            rows.append(row)
    return pd.DataFrame(rows)


def test_dynamics_rules_on_a_hand_built_table() -> None:
    table = _dynamics(
        {500: ["uniform", "positional", "mixed"], 1000: ["positional", "mixed", "symbolic"],
         1500: ["positional", "positional", "symbolic"]},
        {500: [0.5, 0.1], 1000: [0.95, 0.5], 1500: [1.0, 0.92]},
    )
    assert analysis.learned_at(table) == {"1": 1000, "2": 1500}
    assert analysis.learned_at(table, threshold=0.99) == {"1": 1500, "2": None}
    assert analysis.pure_layers(table, "positional") == [0, 1]
    assert analysis.first_pure(table, "positional") == {0: 1000, 1: 1500}  # layer 1 lost the label at 1000
    assert analysis.first_pure(table, "symbolic") == {2: 1000}
    long = analysis.hop_accuracy(table)
    assert set(long.columns) == {"step", "hops", "accuracy"} and len(long) == 6
    curve = pd.DataFrame({"length": [17, 33, 65, 129], "hops": "all", "accuracy": [1.0, 0.95, 0.7, 0.92]})
    assert analysis.longest_ready(curve) == 33  # stops at the first drop, even if it recovers later


def _gqa_heads(labels_per_layer: list[list[str]], group: int) -> pd.DataFrame:
    rows = [{"layer": layer, "head": head, "kv_head": head // group, "positional": 0.5, "symbolic": 0.5, "label": label}
            for layer, labels in enumerate(labels_per_layer) for head, label in enumerate(labels)]
    return pd.DataFrame(rows)


def test_kv_group_agreement_against_the_shuffle() -> None:
    grouped = _gqa_heads([["positional", "positional", "symbolic", "symbolic"]] * 6, group=2)
    out = analysis.kv_group_agreement(grouped, n_shuffles=500)
    row = out.iloc[0]
    assert row["pairs"] == 12 and row["agreement"] == 1.0 and row["shares_role"] and row["verdict"] == "shares a role"
    assert row["baseline_mean"] == pytest.approx(1 / 3, abs=0.05) and row["p_value"] < 0.01
    crossed = _gqa_heads([["positional", "symbolic", "positional", "symbolic"]] * 6, group=2)  # never together
    assert not analysis.kv_group_agreement(crossed, n_shuffles=500).iloc[0]["shares_role"]
    no_gqa = analysis.kv_group_agreement(_gqa_heads([["mixed"] * 4] * 2, group=1), n_shuffles=10)
    assert no_gqa.iloc[0]["pairs"] == 0 and no_gqa.iloc[0]["verdict"] == "not testable"
    assert no_gqa.iloc[0]["shares_role"] is None
    # MQA (Gemma 3 270M: one KV head for a layer's 4 heads): a within-layer shuffle cannot differ, so the
    # rule is not testable, not "no more than chance"
    mqa = analysis.kv_group_agreement(_gqa_heads([["positional", "symbolic", "mixed", "mixed"]] * 3, group=4),
                                      n_shuffles=50)
    assert mqa.iloc[0]["pairs"] == 18 and mqa.iloc[0]["verdict"] == "not testable"
    assert mqa.iloc[0]["agreement"] == mqa.iloc[0]["baseline_q95"]
    by_model = analysis.kv_group_agreement(pd.concat([grouped.assign(model="a"), crossed.assign(model="b")]),
                                           by="model", n_shuffles=200)
    assert by_model["shares_role"].tolist() == [True, False]


def test_difference_of_medians_verdicts() -> None:
    rng = np.random.default_rng(0)
    low, high = rng.normal(0, 1, 200), rng.normal(2, 1, 200)
    assert analysis.difference_of_medians(low, high)["verdict"] == "above 0"
    assert analysis.difference_of_medians(high, low)["verdict"] == "below 0"
    assert analysis.difference_of_medians(low, rng.normal(0, 1, 200))["verdict"] == "inconclusive"
    assert analysis.difference_of_medians([1.0, 2.0], high)["verdict"] == "not measured"


def test_early_late_splits_each_group_at_its_own_middle() -> None:
    """With by="model", an 18-layer and a 30-layer model were both split at layer 15 (the middle of the
    union of their layers), so the 18-layer model compared 0–14 with 15–17."""
    rows = [{"model": model, "layer": layer, "head": 0, "positional": float(layer < depth // 2),
             "symbolic": float(layer >= depth // 2), "label": "mixed"}
            for model, depth in (("short", 18), ("deep", 30)) for layer in range(depth)]
    out = analysis.early_late(pd.DataFrame(rows), by="model", n_boot=50)
    layers = out[out["group"] != "late - early"].drop_duplicates(["model", "group"]).set_index(["model", "group"])
    assert layers.loc[("short", "early"), "layers"] == "0–8" and layers.loc[("short", "late"), "layers"] == "9–17"
    assert layers.loc[("deep", "early"), "layers"] == "0–14" and layers.loc[("deep", "late"), "layers"] == "15–29"
    assert out.attrs["split"] == {("deep",): 15, ("short",): 9}
    short = pd.DataFrame(rows).query("model == 'short'")
    same = analysis.early_late(pd.concat([short.assign(prompts="a"), short.assign(prompts="b")]), by=["prompts"],
                               n_boot=10)
    assert same.attrs["split"] == 9  # one split for every group: an int, reusable as split=…
    difference = out[(out["group"] == "late - early") & (out["score"] == "positional")].set_index("model")["median"]
    assert difference.to_dict() == {"deep": -1.0, "short": -1.0}
