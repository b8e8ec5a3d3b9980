"""The command line, in-process."""

from __future__ import annotations

import pandas as pd
import pytest

import psheads
from psheads import cli, zoo
from tests import helpers

SHIPPED = all((zoo.PRETRAINED_DIR / name / "config.json").exists() for name in zoo.PRETRAINED)


def test_demo_without_shipped_models_uses_a_random_gptj(capsys, monkeypatch, tmp_path) -> None:
    monkeypatch.setattr(zoo, "PRETRAINED_DIR", tmp_path)
    assert cli.main(["demo", "--prompts", "4", "--quiet", "--no-llm"]) == 0
    out = capsys.readouterr().out
    assert "Self-check passed" in out
    geometry_rows = [line for line in out.splitlines() if line.strip().endswith("0.0884")]
    assert len(geometry_rows) == 12  # 12 layers, scale 1/sqrt(128)
    assert "adjacent" in geometry_rows[0] and " 64 " in geometry_rows[0]


@pytest.mark.skipif(not SHIPPED, reason="the trained models are not shipped in this checkout")
def test_demo_on_the_shipped_models(capsys) -> None:
    assert cli.main(["demo", "--prompts", "16", "--quiet", "--no-llm"]) == 0
    out = capsys.readouterr().out
    assert "== number task" in out and "== letter task" in out
    assert out.count("paper_B_id") == 2


def test_score_and_profile_a_local_directory(capsys, tmp_path) -> None:
    directory = helpers.save_tiny("llama", tmp_path / "m")
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("t1 t2 t3 t4 t5 t6\nt9 t8 t7 t6 t5\n\n")
    out_csv = tmp_path / "scores.csv"
    assert cli.main(["score", str(directory), "--prompts-file", str(prompts), "--out", str(out_csv), "--quiet"]) == 0
    frame = pd.read_csv(out_csv)
    assert len(frame) == 2 * 4 and set(frame["n_prompts"]) == {2}
    assert "positional" in capsys.readouterr().out
    profile_csv = tmp_path / "profile.csv"
    assert cli.main(["profile", str(directory), "--prompts-file", str(prompts), "--out", str(profile_csv),
                     "--quiet"]) == 0
    assert abs(pd.read_csv(profile_csv).groupby(["layer", "head"])["usage"].sum() - 1).max() < 1e-9


def test_train_command(capsys, tmp_path) -> None:
    args = ["train", "letter", "--out", str(tmp_path / "run"), "--steps", "2", "--warmup", "1",
            "--checkpoint-every", "1", "--eval-prompts", "16", "--dynamics-prompts", "0", "--quiet"]
    assert cli.main(args) == 0
    assert "final checkpoint" in capsys.readouterr().out
    checkpoint = tmp_path / "run" / "checkpoint-000002"
    assert (checkpoint / "model.safetensors").exists()
    # a checkpoint knows its task: no --task needed
    assert cli.main(["score", str(checkpoint), "--n", "8", "--quiet"]) == 0


def test_errors_exit_cleanly(capsys, tmp_path) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["nope"])
    assert exit_info.value.code == 2
    with pytest.raises(SystemExit, match="neither a known model"):
        cli.main(["score", str(tmp_path / "missing")])
    directory = helpers.save_tiny("gptj", tmp_path / "m")
    assert cli.main(["score", str(directory), "--task", "number", "--n", "4", "--quiet"]) == 2
    assert "Token ids must lie" in capsys.readouterr().err


def test_out_into_a_missing_folder_fails_before_any_work(monkeypatch, tmp_path) -> None:
    calls = {"load": 0}
    real_load = cli._load

    def counting_load(model):
        calls["load"] += 1
        return real_load(model)

    monkeypatch.setattr(cli, "_load", counting_load)
    missing = tmp_path / "nope" / "scores.csv"
    for command in ("score", "profile"):
        with pytest.raises(SystemExit, match=r"cannot write --out .*the folder .*nope does not exist"):
            cli.main([command, "number", "--n", "4", "--out", str(missing), "--quiet"])
    assert calls["load"] == 0


@pytest.mark.skipif(not SHIPPED, reason="the trained models are not shipped in this checkout")
def test_text_outside_a_task_vocabulary_warns(tmp_path) -> None:
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("The cat sat on the mat\n")
    with pytest.warns(UserWarning, match="outside the model's vocabulary.*task's own words"):
        assert cli.main(["score", "number", "--prompts-file", str(prompts), "--quiet"]) == 0


def test_version_prints_the_package_version(capsys) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == f"psheads {psheads.__version__}"
