"""``psheads policy``, in-process: the files it writes, its refusals, and --evaluate on a shipped model."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd
import pytest

from psheads import cli
from psheads.policy import read_duo_folder, read_mask
from psheads.tasks.long_context import LONG_CONTEXT_TASKS

ARGS = ["policy", "letter", "--length", "65", "--sink", "2", "--recent", "8", "--score-prompts", "16", "--quiet"]


@pytest.fixture(autouse=True)
def _forget_the_task():
    """The command registers the shipped model's task as a long-context task; a test leaves none behind."""
    yield
    if "letter" in LONG_CONTEXT_TASKS:
        LONG_CONTEXT_TASKS.pop("letter")


def test_the_policy_files_are_written_and_read_back(tmp_path, capsys) -> None:
    assert cli.main([*ARGS, "--out", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "streamed at 50%: 6 of 12 KV heads" in out
    assert sorted(p.name for p in tmp_path.iterdir()) == ["config.json", "full_attention_heads.tsv",
                                                          "head_scores.json", "mask.tsv", "policy.csv"]
    config = json.loads((tmp_path / "config.json").read_text())
    assert (config["sink_size"], config["recent_size"], config["sparsity"]) == (2, 8, 0.5)
    assert config["psheads"]["provenance"]["length"] == 65 and config["psheads"]["model"] == "letter"
    policy = read_duo_folder(tmp_path)
    np.testing.assert_array_equal(read_mask(tmp_path / "mask.tsv").streamed(), policy.streamed())
    frame = pd.read_csv(tmp_path / "policy.csv")
    assert len(frame) == 12 and frame["streamed"].sum() == 6
    # a second run does not overwrite them unless told to
    assert cli.main([*ARGS, "--out", str(tmp_path)]) == 1
    assert "already holds" in capsys.readouterr().err
    assert cli.main([*ARGS, "--out", str(tmp_path), "--force"]) == 0


@pytest.mark.parametrize(("option", "value"), [("--budget", "1.5"), ("--recent", "0"), ("--sink", "-1")])
def test_bad_settings_are_usage_errors_before_any_model_loads(tmp_path, option: str, value: str) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main([*ARGS, "--out", str(tmp_path), option, value])
    assert exit_info.value.code == 2
    assert not any(tmp_path.iterdir())


def test_evaluate_runs_the_conditions_and_prints_the_verdicts(tmp_path, capsys) -> None:
    assert cli.main([*ARGS, "--out", str(tmp_path), "--evaluate", "--budgets", "0.5", "--n-random", "2",
                     "--n-prompts", "16"]) == 0
    out = capsys.readouterr().out
    assert "G1" in out and "G8" in out
    evaluation = pd.read_csv(tmp_path / "evaluation" / "evaluation.csv")
    assert set(evaluation["condition"]) == {"full", "map", "map-mean", "anti", "streaming", "rope-windows",
                                            "random", "random-layers"}
    assert (tmp_path / "evaluation" / "run.json").is_file()
