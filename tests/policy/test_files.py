"""Policy files: round trips, the masks the serving stacks compute from them, anchors' files, refusals."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from psheads.policy import (
    AttentionShape,
    HeadPolicy,
    read_duo_folder,
    read_head_scores,
    read_mask,
    write_duo_folder,
    write_head_scores,
    write_mask,
)

SHAPE = AttentionShape("tiny-model", "LlamaForCausalLM", (0, 1, 2), 4, 2, 8, (None, None, None))


@pytest.fixture
def policy() -> HeadPolicy:
    rng = np.random.default_rng(0)
    rows = [{"layer": layer, "head": head, "kv_head": head // 2, "positional": rng.random(), "symbolic": rng.random(),
             "label": "mixed"} for layer in range(3) for head in range(4)]
    frame = pd.DataFrame(rows)
    frame.attrs = {"model": "/x/tiny-model"}
    return HeadPolicy.from_scores(frame, sink=16, recent=32, budget=0.5, shape=SHAPE)


def duo_attention_mask(folder: Path, sparsity: float) -> np.ndarray:
    """duo-attention's loader (load_attn_pattern + sparsify_attention_heads), without its tie-breaking noise:
    a head is full when its clipped score is at least np.quantile(scores, sparsity)."""
    scores = np.clip(np.loadtxt(folder / "full_attention_heads.tsv", dtype=float, delimiter="\t"), 0, 1)
    threshold = 2.0 if sparsity >= 1 else -1.0 if sparsity <= 0 else np.quantile(scores, sparsity)
    return scores >= threshold


def kvpress_streaming_mask(folder: Path, ratio: float) -> np.ndarray:
    """kvpress's DuoAttentionPress: the lowest round(N · ratio) scores stream."""
    scores = np.loadtxt(folder / "full_attention_heads.tsv", dtype=float, delimiter="\t")
    mask = np.zeros(scores.shape, dtype=bool)
    mask[np.unravel_index(np.argsort(scores, axis=None)[:round(scores.size * ratio)], scores.shape)] = True
    return mask


@pytest.mark.parametrize("budget", [0.0, 0.25, 0.5, 0.75, 1.0])
def test_the_duo_folder_gives_each_reader_the_mask_the_policy_means(policy: HeadPolicy, tmp_path: Path,
                                                                    budget: float) -> None:
    write_duo_folder(policy, tmp_path, budget=budget)
    config = json.loads((tmp_path / "config.json").read_text())
    assert (config["sink_size"], config["recent_size"], config["sparsity"]) == (16, 32, budget)
    np.testing.assert_array_equal(~duo_attention_mask(tmp_path, budget), policy.streamed(budget, rule="quantile"))
    np.testing.assert_array_equal(kvpress_streaming_mask(tmp_path, budget), policy.streamed(budget, rule="count"))
    back = read_duo_folder(tmp_path, SHAPE)
    for rule in ("count", "quantile"):
        np.testing.assert_array_equal(back.streamed(budget, rule=rule), policy.streamed(budget, rule=rule))
    assert (back.sink, back.recent, back.budget, back.model) == (16, 32, budget, "tiny-model")
    np.testing.assert_allclose(back.keep, policy.keep, rtol=1e-8)
    np.testing.assert_allclose(back.symbolic, policy.symbolic)
    assert back.labels == policy.labels and back.provenance == policy.provenance


def test_an_anchors_folder_reads_with_its_deploy_sizes_first(tmp_path: Path) -> None:
    gates = np.array([[1.0, 0.0], [0.3, 1.2], [0.0, 0.7]])  # trained gates: ties and a value above 1
    np.savetxt(tmp_path / "full_attention_heads.tsv", gates, delimiter="\t")
    (tmp_path / "config.json").write_text(json.dumps({"sink_size": 128, "recent_size": 1024,
                                                      "deploy_sink_size": 64, "deploy_recent_size": 256}))
    policy = read_duo_folder(tmp_path, SHAPE)
    assert (policy.sink, policy.recent, policy.n_heads) == (64, 256, 4)
    np.testing.assert_array_equal(policy.kv_scores, np.clip(gates, 0, 1))
    # the tied zeros stream first, the earlier head first; the three 1s are kept last
    np.testing.assert_array_equal(policy.streamed(1 / 3), [[False, True], [False, False], [True, False]])


def test_the_mask_file_round_trips_at_its_budget(policy: HeadPolicy, tmp_path: Path) -> None:
    path = write_mask(policy, tmp_path / "mask.tsv", budget=0.5)
    grid = np.loadtxt(path, delimiter="\t")
    np.testing.assert_array_equal(grid == 0, policy.streamed(0.5))
    back = read_mask(path, SHAPE, sink=16, recent=32)
    assert back.budget == 0.5
    np.testing.assert_array_equal(back.streamed(), policy.streamed(0.5))
    path.write_text("1\t2\n0\t1\n1\t1\n")
    with pytest.raises(ValueError, match="only 0"):
        read_mask(path)


def test_head_scores_json_round_trips_and_groups_take_their_best_head(policy: HeadPolicy, tmp_path: Path) -> None:
    path = write_head_scores(policy, tmp_path / "scores.json")
    data = json.loads(path.read_text())
    assert set(data) == {f"{layer}-{head}" for layer in range(3) for head in range(4)}
    back = read_head_scores(path, SHAPE)
    np.testing.assert_allclose(back.query_scores, policy.query_scores)
    np.testing.assert_array_equal(back.streamed(0.5), policy.streamed(0.5))
    # HeadKV's lists are averaged
    path.write_text(json.dumps({"0-0": [0.2, 0.4], "0-1": [0.9]}))
    two = read_head_scores(path, n_kv_heads=1)
    np.testing.assert_allclose(two.query_scores, [[0.3, 0.9]])
    np.testing.assert_allclose(two.kv_scores, [[0.9]])


@pytest.mark.parametrize("writer", ["duo", "mask", "json"])
def test_a_file_for_another_model_is_refused_with_both_shapes_named(policy: HeadPolicy, tmp_path: Path,
                                                                   writer: str) -> None:
    other = AttentionShape("other", "LlamaForCausalLM", (0, 1), 4, 2, 8, (None, None))
    if writer == "duo":
        write_duo_folder(policy, tmp_path)
        read = lambda: read_duo_folder(tmp_path, other)  # noqa: E731
    elif writer == "mask":
        write_mask(policy, tmp_path / "m.tsv")
        read = lambda: read_mask(tmp_path / "m.tsv", other)  # noqa: E731
    else:
        write_head_scores(policy, tmp_path / "s.json")
        read = lambda: read_head_scores(tmp_path / "s.json", other)  # noqa: E731
    with pytest.raises(ValueError, match=r"3 layers .* 2 layers"):
        read()


def test_malformed_files_are_refused_and_writes_leave_no_temporary_files(policy: HeadPolicy, tmp_path: Path) -> None:
    write_duo_folder(policy, tmp_path)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.json", "full_attention_heads.tsv"]
    (tmp_path / "config.json").write_text("{not json")
    with pytest.raises(ValueError, match="JSON"):
        read_duo_folder(tmp_path)
    (tmp_path / "config.json").unlink()
    with pytest.raises(FileNotFoundError, match="config.json"):
        read_duo_folder(tmp_path)
    (tmp_path / "s.json").write_text(json.dumps({"0-0": [1.0], "x": [2.0]}))
    with pytest.raises(ValueError, match="layer-head"):
        read_head_scores(tmp_path / "s.json")
    (tmp_path / "s.json").write_text(json.dumps({"0-0": [1.0], "1-1": [2.0]}))
    with pytest.raises(ValueError, match="lacks the heads"):
        read_head_scores(tmp_path / "s.json")
