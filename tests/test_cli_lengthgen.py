"""``psheads lengthgen``, in-process."""

from __future__ import annotations

import re
import sys

import pandas as pd
import pytest

import psheads
from psheads import cli
from psheads.cli import common
from psheads.experiments.lengthgen import length_generalization
from psheads.models import zoo
from psheads.results import files
from tests import helpers

# numerically sensitive: every test runs at 1 and 2 torch threads (see conftest.torch_threads)
pytestmark = pytest.mark.usefixtures("torch_threads")

SHIPPED = all((zoo.PRETRAINED_DIR / name / "config.json").exists() for name in zoo.PRETRAINED)


@pytest.fixture(scope="module")
def directory(tmp_path_factory: pytest.TempPathFactory):
    """A tiny GPT-J with room for the number task's 136 tokens and a context of 200."""
    return helpers.save_tiny("gptj", tmp_path_factory.mktemp("m"), vocab_size=136, n_positions=200)


def test_csv_and_offline_figure_match_the_library(directory, tmp_path, capsys) -> None:
    out, figure = tmp_path / "curve.csv", tmp_path / "curve.html"
    args = ["lengthgen", str(directory), "--task", "number", "--lengths", "17", "30", "--n", "8", "--seed", "2",
            "--token-budget", "64", "--out", str(out), "--figure", str(figure), "--quiet"]
    assert cli.main(args) == 0
    frame = pd.read_csv(out, dtype={"hops": str}, **files._exact_floats())  # the parser load_frame uses
    # like with like: the CLI's token budget, so the same batches (fp32 is not batch-invariant)
    expected = length_generalization(zoo.boot_local(directory), "number", [17, 30], n=8, seed=2, token_budget=64,
                                     progress=False)
    pd.testing.assert_frame_equal(frame, expected, check_exact=True)
    assert frame["hops"].tolist() == ["1", "2", "3", "4", "all"] * 2 and frame["n"].tolist()[-1] == 8
    html = figure.read_text()
    assert 'src="https://cdn.plot.ly' not in html and len(html) > 1_000_000  # plotly.js inline: opens offline
    assert '"name":"all"' in html.replace(" ", "")
    printed = capsys.readouterr().out
    assert f"wrote 10 rows to {out}" in printed and "argmax over the answer vocabulary" in printed


@pytest.mark.parametrize("suffix", [".parquet", ".json"])
def test_parquet_and_json_keep_the_settings(directory, tmp_path, suffix) -> None:
    out = tmp_path / f"curve{suffix}"
    assert cli.main(["lengthgen", str(directory), "--task", "letter", "--lengths", "20", "--n", "4",
                     "--answers", "vocabulary", "--dtype", "float32", "--device", "cpu", "--out", str(out),
                     "--quiet"]) == 0
    frame = psheads.load_frame(out)
    assert frame["length"].tolist() == [20] * 5 and frame["hops"].tolist() == ["1", "2", "3", "4", "all"]
    assert frame.attrs["task"] == "letter" and frame.attrs["n"] == 4 and frame.attrs["answers"] == "vocabulary"
    assert frame.attrs["n_candidates"] is None and frame.attrs["context"] == 200
    if suffix == ".parquet":  # pandas alone reads the settings too
        assert pd.read_parquet(out).attrs["task"] == "letter"


def test_outputs_are_checked_before_any_work(directory, tmp_path, monkeypatch, capsys) -> None:
    calls = []
    monkeypatch.setattr(common, "load_model", lambda *args, **kwargs: calls.append(args))
    base = ["lengthgen", str(directory), "--task", "number", "--lengths", "17", "--quiet"]
    assert cli.main([*base, "--out", str(tmp_path / "nope" / "curve.csv")]) == 1
    assert re.search(r"cannot write --out .*nope does not exist", capsys.readouterr().err)
    assert cli.main([*base, "--figure", str(tmp_path / "nope" / "curve.html")]) == 1
    assert re.search(r"cannot write --figure .*nope does not exist", capsys.readouterr().err)
    for flag, path, message in (("--out", "curve.txt", r"\.csv, \.json, \.parquet"),
                                ("--figure", "curve.png", "as HTML"),
                                ("--task", "nope", "Unknown task 'nope'")):
        with pytest.raises(SystemExit) as exit_info:
            cli.main([*base, flag, str(tmp_path / path) if flag != "--task" else path])
        assert exit_info.value.code == 2 and re.search(message, capsys.readouterr().err)
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # as if pyarrow were not installed
    assert cli.main([*base, "--out", str(tmp_path / "curve.parquet")]) == 1
    assert "parquet needs pyarrow" in capsys.readouterr().err
    assert calls == []


def test_bad_lengths_and_missing_task_exit_cleanly(directory, capsys) -> None:
    assert cli.main(["lengthgen", str(directory), "--task", "number", "--lengths", "12", "--quiet"]) == 1
    assert "below its shortest prompt of 17 tokens" in (err := capsys.readouterr().err) and "context is 200" in err
    assert cli.main(["lengthgen", str(directory), "--task", "number", "--lengths", "300", "--quiet"]) == 1
    assert "context of 200 tokens" in capsys.readouterr().err
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["lengthgen", str(directory), "--lengths", "17", "--quiet"])
    assert exit_info.value.code == 2 and "has no task of its own: pass --task\n" in capsys.readouterr().err
    for argv in ([], ["--lengths", "0"]):  # --lengths is required, and positive
        with pytest.raises(SystemExit) as exit_info:
            cli.main(["lengthgen", str(directory), *argv])
        assert exit_info.value.code == 2


def test_a_task_the_model_was_not_trained_on_is_refused_unless_asked(number_model_dir, capsys) -> None:
    argv = ["lengthgen", str(number_model_dir), "--task", "letter", "--lengths", "17", "--n", "4", "--quiet"]
    assert cli.main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith("psheads lengthgen: Task 'letter' does not match this model's tokenizer") \
        and "--allow-task-mismatch" in err and len(err.strip().splitlines()) == 1
    assert cli.main([*argv, "--allow-task-mismatch"]) == 0


@pytest.mark.skipif(not SHIPPED, reason="the trained models are not shipped in this checkout")
def test_a_shipped_model_uses_its_own_task(capsys) -> None:
    assert cli.main(["lengthgen", "letter", "--lengths", "17", "33", "--n", "8", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "on the letter task (8 prompts per length" in out
    assert out.splitlines()[-2].split() == ["17", "1.000", "1.000", "1.000", "1.000", "1.000"]
