"""The attention-policy evaluation, CI-sized: the shipped letter model at a long length, every
deterministic condition and a few random maps; the conditions' policies; resuming."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import psheads as ps
from psheads.experiments import attention_policy as ap
from psheads.policy import AttentionShape, HeadPolicy
from psheads.results import schema
from psheads.tasks.long_context import LONG_CONTEXT_TASKS, FromTask, register_long_context_task

LENGTH = 145


@pytest.fixture(scope="module")
def letter() -> ps.models.zoo.Pretrained:  # type: ignore[name-defined]
    loaded = ps.load_pretrained("letter", backend="transformers")  # SDPA: the fast path
    register_long_context_task(FromTask(loaded.task), replace=True)
    yield loaded
    LONG_CONTEXT_TASKS.pop("letter")


def config(**changes: object) -> ap.PolicyEvaluationConfig:
    values = dict(lengths=(LENGTH,), tasks=("letter",), budgets=(0.25, 0.5), sink=4, recent=16, n_random=3,
                  n_prompts=32, score_prompts=16, perplexity=False, score_on="letter",
                  conditions=("map", "random", "random-layers", "anti", "streaming", "rope-windows"))
    values.update(changes)
    return ap.PolicyEvaluationConfig(**values)  # type: ignore[arg-type]


@pytest.fixture(scope="module")
def evaluated(letter: ps.models.zoo.Pretrained, tmp_path_factory: pytest.TempPathFactory) -> dict:  # type: ignore[name-defined]
    resume = tmp_path_factory.mktemp("policy") / "rows.jsonl"
    result = ap.evaluate_policies(letter.model, letter.tokenizer, config(), resume=resume, progress=False)
    return {"result": result, "resume": resume}


def test_every_condition_runs_at_every_budget_on_the_same_prompts(evaluated: dict) -> None:
    frame = evaluated["result"].evaluation
    assert list(frame.columns) == schema.POLICY_EVALUATION.names
    counts = frame.groupby(["budget", "condition"]).size().to_dict()
    assert counts[(0.0, "full")] == 1
    for budget in (0.25, 0.5):
        for condition in ("map", "anti", "streaming", "rope-windows"):
            assert counts[(budget, condition)] == 1
        assert counts[(budget, "random")] == 3
    assert counts[(0.5, "random-layers")] == 3 and (0.25, "random-layers") not in counts
    assert frame["total"].eq(32).all()
    full = frame[frame["condition"] == "full"]["value"].item()
    assert full >= 0.8  # the letter model at 145 tokens: the cell counts
    # the same budget keeps the same KV; StreamingLLM keeps as much in total (within one token per head)
    for _, rows in frame[frame["budget"] > 0].groupby("budget"):
        same = rows[rows["condition"] != "streaming"]["kv_tokens"]
        assert same.nunique() == 1
        assert abs(int(rows[rows["condition"] == "streaming"]["kv_tokens"].item()) - same.iloc[0]) <= 12
    assert frame["streamed"][frame["condition"] == "map"].tolist() == [0.25, 0.5]


def test_the_letter_model_s_map_beats_its_anti_map(evaluated: dict) -> None:
    """A check that can fail: streaming the letter model's least symbolic layers costs less than its most symbolic."""
    frame = evaluated["result"].evaluation
    at = frame[frame["budget"] == 0.5].set_index("condition")["value"]
    assert at["map"] > at["anti"]


def test_a_rerun_resumes_without_measuring_again(evaluated: dict, letter: ps.models.zoo.Pretrained,  # type: ignore[name-defined]
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    lines = evaluated["resume"].read_text().splitlines()
    assert len(lines) == len(evaluated["result"].evaluation)
    calls = []
    monkeypatch.setattr(ap, "teacher_forced", lambda *args: calls.append(args) or (0, 1))
    again = ap.evaluate_policies(letter.model, letter.tokenizer, config(), resume=evaluated["resume"], progress=False)
    assert not calls
    pd.testing.assert_frame_equal(again.evaluation, evaluated["result"].evaluation)


def test_a_resume_file_cut_short_drops_only_its_last_row(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    """A row cut short by a killed process ended the next resume in a bare JSONDecodeError naming no file,
    and the next row appended to the cut line."""
    rows = [{"model": "m", "task": "t", "length": 8, "budget": 0.5, "condition": "map", "draw": draw, "run": "f"}
            for draw in range(3)]
    path = tmp_path / "rows.jsonl"
    text = "".join(json.dumps(row) + "\n" for row in rows)
    path.write_text(text[:-9])
    with caplog.at_level("WARNING", logger=ap.__name__):
        store = ap._Store(path, "f")
    assert len(store.rows) == 2 and "the last row was cut short" in caplog.text
    store.add(rows[2])
    assert path.read_text() == text  # the cut line is gone, the row appended whole
    path.write_text(text.replace('"draw": 1', '"draw": 1,,'))
    with pytest.raises(ValueError, match=r"rows\.jsonl, line 2, is not a measured row"):
        ap._Store(path, "f")


def test_the_tables_are_written_with_the_grades(evaluated: dict, tmp_path: Path) -> None:
    with_criteria = dataclasses.replace(evaluated["result"], criteria=pd.DataFrame({"layer": [0], "length": [65]}))
    folder = ap.write_tables(with_criteria, tmp_path / "letter", {"rules_commit": "abc"})
    assert sorted(p.name for p in folder.iterdir()) == ["criteria.csv", "evaluation.csv", "maps.csv", "run.json",
                                                         "scores.csv"]
    run = json.loads((folder / "run.json").read_text())
    assert run["rules_commit"] == "abc" and {g["goal"] for g in run["grades"]} == {f"G{i}" for i in range(1, 9)}
    back = pd.read_csv(folder / "evaluation.csv")
    assert len(back) == len(evaluated["result"].evaluation)
    ap.write_tables(dataclasses.replace(evaluated["result"], criteria=pd.DataFrame()), folder)  # no anchor ran
    assert not (folder / "criteria.csv").exists()  # an empty file would not read back; the stale one is gone
    assert all(len(pd.read_csv(path).columns) for path in folder.glob("*.csv"))


SHAPE = AttentionShape("m", "Gemma3ForCausalLM", (0, 1, 2, 3), 4, 2, 8, (16, 16, 16, None))


def synthetic() -> HeadPolicy:
    rng = np.random.default_rng(3)
    return HeadPolicy.from_kv_scores(rng.random((4, 2)), n_heads=4).for_shape(SHAPE).with_changes(model="m")


def test_random_maps_are_seeded_and_layered_ones_keep_the_map_s_count_per_layer() -> None:
    policy = synthetic()
    assert ap.random_policy(policy, 1).keep == ap.random_policy(policy, 1).keep
    assert ap.random_policy(policy, 1).keep != ap.random_policy(policy, 2).keep
    for seed in range(5):
        layered = ap.layered_random_policy(policy, 0.5, seed)
        np.testing.assert_array_equal(layered.streamed(0.5).sum(1), policy.streamed(0.5).sum(1))


def test_the_anti_map_reverses_the_ranking_and_the_design_streams_the_local_layers() -> None:
    policy = synthetic()
    np.testing.assert_array_equal(ap.reversed_policy(policy).streamed(0.5), ~policy.streamed(0.5))
    designed = ap.designed_policy(policy)
    assert designed is not None and designed.budget == 0.75
    np.testing.assert_array_equal(designed.streamed(), [[True, True], [True, True], [True, True], [False, False]])
    assert ap.designed_policy(policy.with_changes(model_windows=(None,) * 4)) is None


def test_auc_and_agreement() -> None:
    assert ap.auc(np.array([0.9, 0.8]), np.array([0.1, 0.2])) == 1.0
    assert ap.auc(np.array([0.5]), np.array([0.5])) == 0.5
    policy = synthetic()
    same = ap.agreement(policy, policy)
    assert same == {"spearman": pytest.approx(1.0), "overlap": 1.0}
    assert ap.agreement(policy, ap.reversed_policy(policy))["overlap"] == 0.0


def test_bad_settings_are_refused_before_any_work() -> None:
    with pytest.raises(ValueError, match="Unknown long-context tasks"):
        ap.PolicyEvaluationConfig(tasks=("haystack",))
    with pytest.raises(ValueError, match="score_on"):
        ap.PolicyEvaluationConfig(score_on="needle", tasks=("copy",))
    with pytest.raises(ValueError, match="conditions"):
        ap.PolicyEvaluationConfig(conditions=("oracle",))
    with pytest.raises(ValueError, match="budgets"):
        ap.PolicyEvaluationConfig(budgets=(1.5,))


def test_rows_measured_with_other_settings_are_not_resumed(evaluated: dict, letter: ps.models.zoo.Pretrained,  # type: ignore[name-defined]
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    """A rerun on the same file with another window measures again, and returns only its own rows."""
    calls = []
    measure = ap.teacher_forced
    monkeypatch.setattr(ap, "teacher_forced", lambda *args: calls.append(1) or measure(*args))
    changed = config(recent=12, budgets=(0.5,), n_random=1, conditions=("map", "random"))
    again = ap.evaluate_policies(letter.model, letter.tokenizer, changed, resume=evaluated["resume"], progress=False)
    assert len(calls) == 3  # full attention, the map, one random map: nothing resumed
    assert set(again.evaluation["condition"]) == {"full", "map", "random"}
    assert set(again.evaluation["budget"]) == {0.0, 0.5} and set(again.evaluation["draw"]) == {0}
    first = ap.evaluate_policies(letter.model, letter.tokenizer, config(), resume=evaluated["resume"], progress=False)
    pd.testing.assert_frame_equal(first.evaluation, evaluated["result"].evaluation)  # the first run's rows are kept


def test_the_mean_map_averages_a_group_where_the_map_takes_its_largest_score() -> None:
    rows = [{"layer": 0, "head": head, "kv_head": head // 2, "positional": 0.0, "symbolic": value}
            for head, value in enumerate((1.0, 0.0, 0.6, 0.6))]
    policy = HeadPolicy.from_scores(pd.DataFrame(rows))
    averaged = ap.mean_policy(policy)
    assert policy.kv_scores == ((1.0, 0.6),) and averaged.kv_scores == ((0.5, 0.6),)
    assert policy.streamed(0.5).tolist() == [[False, True]] and averaged.streamed(0.5).tolist() == [[True, False]]
