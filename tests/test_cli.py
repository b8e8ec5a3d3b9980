"""The command line, in-process."""

from __future__ import annotations

import dataclasses
import importlib
import json
import os
import re
import shutil
import subprocess
import sys
from typing import get_args

import pandas as pd
import pytest
import torch

import psheads
from psheads import cli
from psheads.cli import common, lengthgen
from psheads.models import zoo
from psheads.results import files
from psheads.results.files import sidecar
from tests import helpers

# numerically sensitive: every test runs at 1 and 2 torch threads (see conftest.torch_threads)
pytestmark = pytest.mark.usefixtures("torch_threads")

SHIPPED = all((zoo.PRETRAINED_DIR / name / "config.json").exists() for name in zoo.PRETRAINED)


@pytest.fixture(scope="module")
def directory(tmp_path_factory: pytest.TempPathFactory):
    """A tiny Llama (2 layers, 4 heads) with the word tokenizer t0 … tN (t0 is also its unknown token)."""
    return helpers.save_tiny("llama", tmp_path_factory.mktemp("m"))


@pytest.fixture()
def prompts(tmp_path):
    path = tmp_path / "prompts.txt"
    path.write_text("t1 t2 t3 t4 t5 t6\nt9 t8 t7 t6 t5\n\n")
    return path


@pytest.fixture()
def loads(monkeypatch):
    """Counts model loads (and refuses them): checks must fail before any."""
    calls = []

    def refuse(*args, **kwargs):
        calls.append(args)
        raise AssertionError("a model was loaded")

    monkeypatch.setattr(common, "load_model", refuse)
    return calls


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
    assert out.count("B_style_id paper_B_id") == 2
    number = out.split("== letter task")[0].splitlines()
    layer_1 = next(line.split() for line in number if line.split()[:1] == ["1"])
    assert float(layer_1[7]) < 3 and layer_1[8] == "2"  # a fast positional head, paper B's definition and value


def test_score_and_profile_a_local_directory(capsys, directory, prompts, tmp_path) -> None:
    out_csv = tmp_path / "scores.csv"
    assert cli.main(["score", str(directory), "--prompts-file", str(prompts), "--out", str(out_csv), "--quiet"]) == 0
    frame = pd.read_csv(out_csv)
    assert len(frame) == 2 * 4 and set(frame["n_prompts"]) == {2}
    printed = capsys.readouterr().out
    assert "positional" in printed and f"settings in {out_csv}.attrs.json" in printed
    assert psheads.load_frame(out_csv).attrs["config"]["method"] == "swap"
    profile_csv = tmp_path / "profile.csv"
    assert cli.main(["profile", str(directory), "--prompts-file", str(prompts), "--out", str(profile_csv),
                     "--quiet"]) == 0
    assert abs(pd.read_csv(profile_csv).groupby(["layer", "head"])["usage"].sum() - 1).max() < 1e-9


@pytest.mark.parametrize("suffix", [".csv", ".json", ".parquet"])
def test_out_keeps_the_provenance_and_the_new_options_reach_the_library(directory, prompts, tmp_path, suffix) -> None:
    out = tmp_path / f"scores{suffix}"
    assert cli.main(["score", str(directory), "--prompts-file", str(prompts), "--layers", "-1", "--batch-size", "1",
                     "--method", "anova", "--dtype", "float32", "--device", "cpu", "--out", str(out), "--quiet"]) == 0
    frame = psheads.load_frame(out)
    assert frame["layer"].tolist() == [1] * 4 and "interaction" in frame.columns
    config = frame.attrs["config"]
    assert config["layers"] == [-1] and config["batch_size"] == 1 and config["method"] == "anova"
    assert frame.attrs["dtype"] == "torch.float32" and frame.attrs["versions"]["psheads"] == psheads.__version__
    # like with like: the same batch size (and threads) give the same frame bit for bit, and every format
    # round-trips exactly; fp32 matrix products are not batch-invariant, so another batch size could
    # differ in the last bits (see docs/reliability.md, "Determinism")
    expected = psheads.score_heads(zoo.boot_local(directory), prompts.read_text().split("\n")[:2], layers=[-1],
                                   method="anova", batch_size=1, progress=False)
    pd.testing.assert_frame_equal(frame, expected, check_exact=True)
    profile_out = tmp_path / f"profile{suffix}"
    assert cli.main(["profile", str(directory), "--prompts-file", str(prompts), "--layers", "0", "--batch-size", "3",
                     "--out", str(profile_out), "--quiet"]) == 0
    planes = psheads.load_frame(profile_out)
    assert set(planes["layer"]) == {0} and planes.attrs["config"]["batch_size"] == 3


def test_outputs_that_exist_are_kept_unless_forced(directory, prompts, tmp_path, monkeypatch, capsys) -> None:
    """--out existing.csv used to overwrite the file and its settings without a word."""
    out = tmp_path / "scores.csv"
    base = ["score", str(directory), "--prompts-file", str(prompts), "--layers", "0", "--quiet"]
    assert cli.main([*base, "--out", str(out)]) == 0
    first = out.read_bytes()
    capsys.readouterr()
    assert cli.main([*base, "--out", str(out), "--layers", "1"]) == 1
    err = capsys.readouterr().err
    assert f"{out} and {sidecar(out)} already exist; pass --force to overwrite" in err and len(err.splitlines()) == 1
    assert out.read_bytes() == first
    out.rename(tmp_path / "kept.csv")  # only the settings file left: still refused, it would be overwritten
    assert cli.main([*base, "--out", str(out), "--layers", "1"]) == 1
    assert f"{sidecar(out)} already exists" in capsys.readouterr().err and not out.exists()
    (tmp_path / "kept.csv").rename(out)
    assert cli.main([*base, "--out", str(out), "--layers", "1", "--force"]) == 0
    assert set(psheads.load_frame(out)["layer"]) == {1}
    report_out = tmp_path / "r.html"
    report_out.write_text("mine")
    assert cli.main(["reproduce", "--out", str(report_out), "--quiet"]) == 1 and report_out.read_text() == "mine"
    assert "already exists" in capsys.readouterr().err
    # a sidecar that cannot be written takes the CSV with it: no table without its settings; and a failed
    # --force write keeps the files it would have replaced (they used to be deleted)
    real = files.Path.write_text

    def full_disk(self, *args, **kwargs):
        if ".attrs.json" in self.name:
            raise OSError(28, "No space left on device")
        return real(self, *args, **kwargs)

    monkeypatch.setattr(files.Path, "write_text", full_disk)
    half = tmp_path / "half.csv"
    assert cli.main([*base, "--out", str(half)]) == 1
    assert "No space left on device" in capsys.readouterr().err
    assert not half.exists() and not sidecar(half).exists()
    kept = {p.name: p.read_bytes() for p in (out, sidecar(out))}
    assert cli.main([*base, "--out", str(out), "--layers", "0", "--force"]) == 1
    assert {p.name: p.read_bytes() for p in (out, sidecar(out))} == kept
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []


@pytest.mark.parametrize("command", [["train", "letter", "--steps", "1"], ["atlas", "gemma-3-270m"],
                                     ["score", "number"], ["reproduce"]])
def test_an_empty_out_is_refused(command, capsys, loads, monkeypatch) -> None:
    """train --out "" used to train into the current directory."""
    monkeypatch.setattr(zoo, "load_pretrained", lambda *args, **kwargs: pytest.fail("a model was loaded"))
    with pytest.raises(SystemExit) as exit_info:
        cli.main([*command, "--out", "", "--quiet"])
    assert exit_info.value.code == 2 and "--out is empty: name the" in capsys.readouterr().err
    assert loads == []


def test_train_command(capsys, tmp_path) -> None:
    args = ["train", "letter", "--out", str(tmp_path / "run"), "--steps", "2", "--warmup", "1",
            "--checkpoint-every", "1", "--eval-prompts", "16", "--dynamics-prompts", "0", "--quiet"]
    assert cli.main(args) == 0
    assert "final checkpoint" in capsys.readouterr().out
    checkpoint = tmp_path / "run" / "checkpoint-000002"
    assert (checkpoint / "model.safetensors").exists()
    # a checkpoint knows its task: no --task needed
    assert cli.main(["score", str(checkpoint), "--n", "8", "--quiet"]) == 0


def test_quiet_means_quiet(capsys, tmp_path) -> None:
    """``psheads train … --quiet 2>log`` wrote transformers' progress bars (saving and loading checkpoints)."""
    args = ["train", "letter", "--out", str(tmp_path / "run"), "--steps", "2", "--warmup", "1",
            "--checkpoint-every", "1", "--eval-prompts", "16", "--dynamics-prompts", "4", "--quiet"]
    assert cli.main(args) == 0
    assert capsys.readouterr().err == ""
    assert cli.main(["score", str(tmp_path / "run" / "checkpoint-000002"), "--n", "8", "--quiet"]) == 0
    assert capsys.readouterr().err == ""


@pytest.mark.skipif(not SHIPPED, reason="needs the shipped models")
def test_a_prompts_file_that_starts_with_a_bom_reads_as_without(capsys, tmp_path, recwarn) -> None:
    """Notepad's UTF-8 starts with a BOM, which made the first prompt's first word unknown."""
    plain, marked = tmp_path / "plain.txt", tmp_path / "bom.txt"
    plain.write_text("\n".join(psheads.tasks.get_task("number").generate(3, seed=0).text) + "\n", encoding="utf-8")
    marked.write_bytes(b"\xef\xbb\xbf" + plain.read_bytes())
    assert cli.main(["score", "number", "--prompts-file", str(plain), "--quiet"]) == 0
    expected = capsys.readouterr().out
    assert cli.main(["score", "number", "--prompts-file", str(marked), "--quiet"]) == 0
    assert capsys.readouterr().out == expected
    assert not [w for w in recwarn if "outside the model's vocabulary" in str(w.message)]


def test_a_huge_n_is_refused_before_any_allocation(capsys, directory) -> None:
    for command in (["score", str(directory), "--task", "number"], ["profile", str(directory), "--task", "number"],
                    ["lengthgen", str(directory), "--task", "number", "--lengths", "17"]):
        assert cli.main([*command, "--n", "100000000000", "--quiet", "--allow-task-mismatch"]) == 1
        err = capsys.readouterr().err
        assert re.search(r"--n 100000000000: the prompts alone would take [\d.]+ TB, more than this machine's "
                         r"[\d.]+ GB of memory: pass a smaller --n", err), err
        assert "Traceback" not in err


def test_train_command_with_paper_b_recipe(capsys, tmp_path) -> None:
    args = ["train", "letter", "--recipe", "paper-b", "--out", str(tmp_path / "run"), "--steps", "2", "--warmup", "1",
            "--checkpoint-every", "1", "--eval-prompts", "16", "--dynamics-prompts", "0", "--train-set", "96",
            "--quiet"]
    assert cli.main(args) == 0
    assert "best checkpoint" in capsys.readouterr().out
    record = json.loads((tmp_path / "run" / "checkpoint-000002" / "training_config.json").read_text())
    assert record["task_options"]["sampling"] == "paper-b"
    assert record["training"]["train_set"] == 96 and record["training"]["max_grad_norm"] == 1.0
    assert record["training"]["model"] == {"activation_function": "gelu"} and record["validation"]["n"] == 2400


def test_usage_errors_exit_2_before_any_model_loads(capsys, directory, prompts, tmp_path, loads) -> None:
    cases = {
        ("nope",): "invalid choice",
        ("score", str(directory), "--task", "number", "--prompts-file", str(prompts)): "not allowed with",
        ("score", str(directory), "--n", "0"): "must be a positive integer",
        ("score", str(directory), "--task", "number", "--method", "nope"): "method must be one of",
        ("score", str(directory), "--task", "nope"): "Unknown task 'nope'",
        ("score", str(directory)): "has no task of its own: pass --task or --prompts-file",
        ("profile", str(directory), "--task", "number", "--out", str(tmp_path / "planes.txt")): r"\.csv, \.json",
        ("score", str(directory), "--task", "number", "--device", "nowhere"): "--device nowhere",
        ("score", str(directory), "--task", "number", "--dtype", "int8"): "invalid choice",
        ("train", "nope", "--out", str(tmp_path / "run")): "Unknown task 'nope'",
        ("train", "letter", "--out", str(tmp_path / "run"), "--dynamics-prompts", "-1"): "dynamics_prompts",
    }
    for argv, message in cases.items():
        with pytest.raises(SystemExit) as exit_info:
            cli.main([*argv, "--quiet"])
        assert exit_info.value.code == 2, argv
        err = capsys.readouterr().err
        assert err.startswith("usage: psheads") and re.search(message, err), (argv, err)
    assert loads == []


def test_an_abbreviated_option_is_refused_not_guessed(capsys, directory, loads) -> None:
    """``score --prompts 32`` was read as ``--prompts-file 32`` and failed with "32 does not exist"."""
    cases = {("score", str(directory), "--prompts", "32"): "--prompts 32",
             ("score", str(directory), "--met", "anova"): "--met anova", ("--vers", "demo"): "--vers"}
    for argv, unrecognized in cases.items():
        with pytest.raises(SystemExit) as exit_info:
            cli.main(list(argv))
        err = capsys.readouterr().err
        assert exit_info.value.code == 2 and f"unrecognized arguments: {unrecognized}" in err, (argv, err)
    assert loads == []


def test_conflicting_options_are_refused_before_any_model_loads(capsys, directory, loads) -> None:
    """``--option block_size=2 --block-size 3`` ran with 3 and said nothing."""
    score = ("score", str(directory), "--task", "number")
    cases = {
        ("--option", "block_size=2", "--block-size", "3"): r"--option block_size=2 and --block-size 3 both set "
                                                           r"block_size: give it once",
        ("--option", "tau=1e-3", "--option", "tau=1e-2"): r"--option tau is given twice \(1e-3, then 1e-2\)",
        ("--option", "batch_size=4"): r"--option batch_size=4 sets what --batch-size sets: use --batch-size",
        ("--option", "method=anova"): r"--option method=anova sets what --method sets: use --method",
        ("--option", "precision=float32"): r"use --precision",
    }
    for flags, message in cases.items():
        with pytest.raises(SystemExit) as exit_info:
            cli.main([*score, *flags, "--quiet"])
        err = capsys.readouterr().err
        assert exit_info.value.code == 2 and re.search(message, err), (flags, err)
    assert loads == []


def test_layers_the_model_lacks_fail_before_it_loads(capsys, directory, prompts, loads, tmp_path) -> None:
    """``--layers 99`` used to fail only once the model had loaded (4-11 s): the layer count in the
    model's config.json refuses it first (a Llama's num_hidden_layers, a GPT-J's n_layer)."""
    gptj = helpers.save_tiny("gptj", tmp_path / "gptj")
    n_layers = json.loads((gptj / "config.json").read_text())["n_layer"]
    capsys.readouterr()  # the save's progress bars
    assert (common.configured_layers(str(directory)), common.configured_layers(str(gptj))) == (2, n_layers)
    for model, bad in ((directory, "2"), (directory, "-3"), (gptj, str(n_layers))):
        for command in ("score", "profile"):
            argv = [command, str(model), "--prompts-file", str(prompts), "--layers", "0", bad, "--quiet"]
            assert cli.main(argv) == 1, argv
            err = capsys.readouterr().err
            assert len(err.strip().splitlines()) == 1 and re.search(
                rf"--layers 0 {bad}: layer {bad} is out of range for a model with \d+ layers", err), err
    assert loads == []
    assert common.configured_layers("gemma-3-270m") is None  # a zoo LLM: checked once it has loaded


@pytest.mark.parametrize("module, name", [
    ("psheads.models.training.config", "TrainConfig"), ("psheads.measure.methods.base", "ScoreConfig"),
    ("psheads.measure.frequency_profile", "ProfileConfig"), ("psheads.experiments.atlas", "AtlasConfig"),
    ("psheads.experiments.attention_policy", "PolicyEvaluationConfig"),
    ("psheads.reproduction.report.inputs", "ReportConfig")])
def test_options_read_from_a_config_are_its_fields(module, name) -> None:
    """The command line reads a config's fields from its source (importing it would import torch
    for --help): what it reads is what the dataclass holds, with a line of help for each."""
    from psheads.cli import fields

    declared = dataclasses.fields(getattr(importlib.import_module(module), name))
    read = fields.config_fields(module, name)
    assert list(read) == [field.name for field in declared]
    for field in declared:
        assert read[field.name].default == field.default, field.name  # MISSING for a default_factory
        assert read[field.name].help and "``" not in read[field.name].help, field.name


def test_the_commands_defaults_are_their_configs_defaults() -> None:
    from psheads.cli import atlas, fields, policy, reproduce, train
    from psheads.experiments.atlas import AtlasConfig
    from psheads.experiments.attention_policy import PolicyEvaluationConfig
    from psheads.models.training import TrainConfig
    from psheads.reproduction.report import ReportConfig

    parser = cli.build_parser()
    cases = ((train, ["train", "number", "--out", "run"], TrainConfig(), set(train.OPTIONS) - {"steps"}),
             (atlas, ["atlas", "--out", "atlas"], AtlasConfig(), set(atlas.OPTIONS)),
             (policy, ["policy", "number", "--out", "policy"], PolicyEvaluationConfig(),
              {"sink", "recent", "budgets", "n_random", "n_prompts", "score_prompts", "seed"}),
             (reproduce, ["reproduce"], ReportConfig(), {"data", "prompts", "seed"}))
    for command, argv, config, names in cases:
        values = fields.config_values(parser.parse_args(argv), command.CONFIG, *names)
        assert values == {name: getattr(config, name) for name in names}, argv
    assert parser.parse_args(["train", "number", "--out", "run"]).steps is None  # the recipe's


def test_runtime_errors_exit_1_with_one_line(capsys, directory, prompts, tmp_path, monkeypatch) -> None:
    calls = {"load": 0}
    real_load = common.load_model

    def counting_load(*args, **kwargs):
        calls["load"] += 1
        return real_load(*args, **kwargs)

    monkeypatch.setattr(common, "load_model", counting_load)
    before_load = {
        ("score", str(tmp_path / "missing")): "is neither a known model",
        ("score", str(directory), "--prompts-file", str(tmp_path / "none.txt")): "none.txt does not exist",
        ("score", "number", "--out", str(tmp_path / "nope" / "scores.csv")): "the folder .*nope does not exist",
        ("profile", "number", "--out", str(tmp_path / "nope" / "p.json")): "the folder .*nope does not exist",
    }
    for argv, message in before_load.items():
        assert cli.main([*argv, "--quiet"]) == 1, argv
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and re.search(message, err), (argv, err)
    assert calls["load"] == 0
    # a layer the model does not have (refused from its config.json, before loading), token ids outside its vocabulary
    assert cli.main(["score", str(directory), "--prompts-file", str(prompts), "--layers", "5", "--quiet"]) == 1
    assert "layer 5 is out of range for a model with 2 layers" in capsys.readouterr().err
    gptj = helpers.save_tiny("gptj", tmp_path / "gptj")
    capsys.readouterr()  # saving draws a bar
    assert cli.main(["score", str(gptj), "--task", "number", "--n", "4", "--quiet"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("psheads score: ") and "outside the model's vocabulary" in err and "Traceback" not in err


def test_a_task_the_model_was_not_trained_on_is_refused_unless_asked(number_model_dir, capsys) -> None:
    """The model records the number task (its tokenizer): letter-task ids would be read as other words."""
    argv = ["score", str(number_model_dir), "--task", "letter", "--n", "4", "--layers", "0", "--quiet"]
    assert cli.main(argv) == 1
    err = capsys.readouterr().err
    assert err.startswith("psheads score: Task 'letter' does not match this model's tokenizer") \
        and "--allow-task-mismatch" in err and len(err.strip().splitlines()) == 1
    assert cli.main([*argv, "--allow-task-mismatch"]) == 0
    assert cli.main(["score", str(number_model_dir), "--task", "number", "--n", "4", "--layers", "0", "--quiet"]) == 0


def test_task_naming_the_model_s_own_task_keeps_its_recorded_options(tmp_path, capsys) -> None:
    """``--task letter`` on a model trained with paper B's letter sampling used to draw with psheads'
    (``LetterTask()``'s default): the command line cannot pass options, so the name means the model's own."""
    from psheads.tasks import LetterTask

    trained = LetterTask(n_target=4, n_pre=4, n_letters=5, n_ints=2, sampling="paper-b")
    folder = helpers.save_task_model(trained, tmp_path / "letter", record=True, n_positions=64)
    capsys.readouterr()
    for argv in (["--task", "letter"], []):
        out = tmp_path / f"curve{len(argv)}.json"
        command = ["lengthgen", str(folder), "--lengths", "11", "--n", "4", "--out", str(out), "--quiet", *argv]
        assert cli.main(command) == 0
        assert psheads.load_frame(out).attrs["task_options"]["sampling"] == "paper-b"
        assert "WARNING" not in capsys.readouterr().err


def test_text_outside_a_task_vocabulary_warns_on_stderr(capsys, directory, tmp_path) -> None:
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("The cat sat on the mat\nt1 t2 t3 t4\n")
    assert cli.main(["score", str(directory), "--prompts-file", str(prompts), "--quiet"]) == 0
    err = capsys.readouterr().err
    assert "psheads score: WARNING: Prompts [0] contain words outside the model's vocabulary" in err


def test_loader_output_is_hidden_and_restored(capsys, directory, prompts) -> None:
    from huggingface_hub import utils as hub
    from transformers.utils import logging as hf_logging

    before = (hf_logging.is_progress_bar_enabled(), hub.are_progress_bars_disabled(), hf_logging.get_verbosity())
    for quiet in ([], ["--quiet"]):  # stderr is not a terminal here: no bars either way
        assert cli.main(["profile", str(directory), "--prompts-file", str(prompts), *quiet]) == 0
        err = capsys.readouterr().err
        assert "Loading weights" not in err and "%|" not in err
        assert (hf_logging.is_progress_bar_enabled(), hub.are_progress_bars_disabled(),
                hf_logging.get_verbosity()) == before


def test_a_registered_score_method_is_accepted(directory, prompts, tmp_path) -> None:
    class Halves:
        name = "cli-halves"
        columns = ("positional", "symbolic")

        def min_swappable(self, config):
            return 1

        def score(self, logits, config):
            half = torch.full(logits.matrix().shape[:-2], 0.5, dtype=torch.float64)
            return {"positional": half, "symbolic": half}

    psheads.register_score_method(Halves(), replace=True)
    out = tmp_path / "halves.json"
    assert cli.main(["score", str(directory), "--prompts-file", str(prompts), "--method", "cli-halves",
                     "--out", str(out), "--quiet"]) == 0
    assert set(psheads.load_frame(out)["positional"]) == {0.5}


def test_help_shows_defaults_exit_statuses_and_the_library_constants(capsys) -> None:
    from psheads.experiments.lengthgen import DEFAULT_TOKEN_BUDGET, Answers
    from psheads.measure.frequency_profile import ProfileConfig
    from psheads.measure.scoring import ScoreConfig

    assert get_args(Answers) == lengthgen.ANSWERS and lengthgen.TOKEN_BUDGET == DEFAULT_TOKEN_BUDGET
    parser = cli.build_parser()
    defaults = {command: vars(parser.parse_args([command, "number"])) for command in ("score", "profile")}
    assert (ScoreConfig().batch_size, ProfileConfig().batch_size) == (defaults["score"]["batch_size"],
                                                                      defaults["profile"]["batch_size"])
    assert {"swap", "anova"} <= set(psheads.score_methods())
    for argv in (["--help"], ["score", "--help"], ["lengthgen", "--help"]):
        with pytest.raises(SystemExit) as exit_info:
            cli.main(argv)
        assert exit_info.value.code == 0
        out = capsys.readouterr().out
        assert "exit status:" in out and "2  the command line is wrong" in out
    assert "(default: 8192)" in " ".join(out.split()) and "(default: task)" in out


def test_version_prints_the_package_version(capsys) -> None:
    with pytest.raises(SystemExit) as exit_info:
        cli.main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == f"psheads {psheads.__version__}"


def test_reproduce_writes_the_report_and_checks_its_options_first(capsys, tmp_path, monkeypatch) -> None:
    from psheads.reproduction import report

    with pytest.raises(SystemExit) as exit_info:
        cli.main(["reproduce", "--out", str(tmp_path / "report.txt")])
    assert exit_info.value.code == 2 and "HTML" in capsys.readouterr().err
    assert cli.main(["reproduce", "--out", str(tmp_path / "missing" / "r.html")]) == 1
    assert cli.main(["reproduce", "--data", str(tmp_path / "nothing"), "--out", str(tmp_path / "r.html")]) == 1
    capsys.readouterr()
    reproduce = report.reproduce  # the live checks made small; the command's own options still reach the config
    monkeypatch.setattr(report, "reproduce", lambda config, **options: reproduce(
        dataclasses.replace(config, check_prompts=16, theory_prompts=16, check_lengths=(17,)), **options))
    assert cli.main(["reproduce", "--out", str(tmp_path / "r.html"), "--prompts", "16", "--quiet"]) == 0
    out, err = capsys.readouterr()
    assert "Loading weights" not in err  # --quiet silences the loaders of the models the report boots
    assert f"wrote the report to {tmp_path / 'r.html'}" in out and "reproduces" in out
    assert "Plotly.newPlot" in (tmp_path / "r.html").read_text()


def test_obscure_failures_are_one_line(directory, prompts, tmp_path, monkeypatch, capsys) -> None:
    """A broken training record, a binary prompts file and Ctrl-C used to end in tracebacks."""
    broken = tmp_path / "broken"
    shutil.copytree(directory, broken)
    for record in ('{"steps": 3}', "[1, 2]", '{"task": 5}'):
        (broken / "training_config.json").write_text(record)
        assert cli.main(["score", str(broken), "--n", "2", "--quiet"]) == 1
        err = capsys.readouterr().err
        assert "is not a psheads training record" in err and "pass --task" in err and len(err.splitlines()) == 1
    assert cli.main(["score", str(broken), "--task", "number", "--n", "2", "--layers", "0", "--quiet"]) in (0, 1)
    assert "training record" not in capsys.readouterr().err  # --task names the task: the record is not needed
    binary = tmp_path / "prompts.bin"
    binary.write_bytes(bytes(range(256)))
    assert cli.main(["score", str(directory), "--prompts-file", str(binary), "--quiet"]) == 1
    err = capsys.readouterr().err
    assert f"--prompts-file {binary} is not UTF-8 text" in err and len(err.splitlines()) == 1

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(common, "load_model", interrupted)
    assert cli.main(["lengthgen", str(directory), "--task", "number", "--lengths", "17", "--quiet"]) == 130
    assert capsys.readouterr().err == "psheads lengthgen: interrupted\n"


def test_a_folder_an_environment_or_a_closed_pipe_is_not_a_traceback(tmp_path, monkeypatch, capsys) -> None:
    """Issue 37's CLI cases: a folder without a model, WORLD_SIZE without a launcher, a reader that
    went away (`psheads score number | head -1`)."""
    empty = tmp_path / "empty"
    empty.mkdir()
    assert cli.main(["score", str(empty), "--quiet"]) == 1
    err = capsys.readouterr().err
    assert f"no model in {empty}: the folder has no config.json" in err and len(err.splitlines()) == 1
    with monkeypatch.context() as patched:
        patched.setenv("WORLD_SIZE", "2")
        for name in ("RANK", "MASTER_ADDR", "MASTER_PORT"):
            patched.delenv(name, raising=False)
        assert cli.main(["score", "number", "--n", "2", "--layers", "0", "--quiet"]) == 1
        err = capsys.readouterr().err
        assert "WORLD_SIZE is 2 but" in err and "launch with torchrun" in err and "Traceback" not in err
        assert len(err.splitlines()) == 1
    read, write = os.pipe()
    os.close(read)  # the reader is gone: every write to the pipe fails with EPIPE
    with os.fdopen(write, "w") as closed, monkeypatch.context() as patched:
        patched.setattr(sys, "stdout", closed)
        assert cli.main(["score", "number", "--n", "2", "--layers", "0", "--quiet"]) == 0
        closed.flush()  # its descriptor now leads nowhere: nothing fails at exit either
    assert "Broken pipe" not in capsys.readouterr().err


PLUGIN = '''
import torch

from psheads.rope.families import Family
from psheads.tasks import NumberTask


def counting(**options):
    """The number task under another name."""
    return NumberTask(**options)


class Halves:
    name = "plugin-halves"
    columns = ("positional", "symbolic")

    def min_swappable(self, config):
        return 1

    def score(self, logits, config):
        half = torch.full(logits.matrix().shape[:-2], 0.5, dtype=torch.float64)
        return {"positional": half, "symbolic": half}


halves = Halves()
family = Family("plugin-family", ("PluginFamilyForCausalLM",), "Plugin family")
'''

PLUGIN_RUN = '''
import json, sys
import psheads
from psheads import cli
from psheads.rope import families

model, out = sys.argv[1:]
try:
    cli.main(["score", model, "--task", "nope", "--quiet"])
except SystemExit as exit:
    unknown = exit.code
status = cli.main(["score", model, "--task", "plugin-counting", "--method", "plugin-halves", "--n", "4",
                   "--layers", "0", "--out", out, "--quiet"])
print(json.dumps([unknown, status, psheads.tasks.available_tasks(), psheads.score_methods(), families.families()]))
'''


def test_a_pip_installed_plugin_reaches_the_command_line_and_a_broken_one_is_named(number_model_dir, tmp_path) -> None:
    """Entry points of an installed package, read in a fresh process as after ``pip install``."""
    site = helpers.install_plugin(tmp_path / "site", "psheads_plugin", {
        "psheads.tasks": {"plugin-counting": "psheads_plugin:counting", "broken-task": "psheads_plugin_gone:make",
                          "number": "psheads_plugin:counting"},
        "psheads.score_methods": {"plugin-halves": "psheads_plugin:halves", "misnamed": "psheads_plugin:halves"},
        "psheads.families": {"plugin-family": "psheads_plugin:family"},
    }, PLUGIN)
    env = {**os.environ, "PYTHONPATH": os.pathsep.join(filter(None, [str(site), os.environ.get("PYTHONPATH")]))}
    out = tmp_path / "halves.json"
    result = subprocess.run([sys.executable, "-c", PLUGIN_RUN, str(number_model_dir), str(out)], env=env,
                            capture_output=True, text=True, timeout=600)
    assert result.returncode == 0, result.stderr
    unknown, status, tasks, methods, family_names = json.loads(result.stdout.splitlines()[-1])
    assert unknown == 2 and re.search(r"Unknown task 'nope'; registered: .*plugin-counting", result.stderr)
    assert status == 0 and set(psheads.load_frame(out)["positional"]) == {0.5}
    assert "plugin-counting" in tasks and "broken-task" not in tasks and "number" in tasks
    assert "plugin-halves" in methods and "misnamed" not in methods and "plugin-family" in family_names
    skipped = re.findall(r"skipped the (.*?) plugin '(.*?)' of package 'psheads_plugin'", result.stderr)
    assert sorted(skipped) == [("score method", "misnamed"), ("task", "broken-task"), ("task", "number")], \
        result.stderr
