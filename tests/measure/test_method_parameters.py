"""Score methods declare their own options: validated, recorded in attrs, re-run from them, and
reachable from score_heads' keyword arguments and the CLI."""

from __future__ import annotations

import dataclasses
import logging

import pytest
import torch

import psheads
from psheads import cli
from psheads.interface import validation
from psheads.measure import methods
from tests import helpers


@dataclasses.dataclass(frozen=True)
class TopRowsParameters:
    k: int = 2

    def __post_init__(self) -> None:
        object.__setattr__(self, "k", validation.integer(self.k, "k", minimum=1))


class TopRows:
    """Scores from the k largest row means: a method whose output depends on its option."""

    name = "toprows-test"
    columns = ("positional", "symbolic", "top_rows")
    Parameters = TopRowsParameters

    def min_swappable(self, config):
        return config.parameters.k

    def score(self, logits, config):
        rows = logits.matrix().mean(-1)
        top = rows.topk(config.parameters.k, dim=-1).values.mean(-1)
        half = torch.full_like(top, 0.5)
        return {"positional": half, "symbolic": half, "top_rows": top}


@pytest.fixture
def registered():
    method = psheads.register_score_method(TopRows(), replace=True)
    try:
        yield method
    finally:
        methods.base._METHODS.pop(method.name)


def test_a_methods_options_are_validated_recorded_and_rerun(model_factory, registered) -> None:
    lens = psheads.RopeLens(model_factory("llama"))
    tokens = torch.randint(0, 64, (3, 9))
    frame = psheads.score_heads(lens, tokens, method="toprows-test", k=3)
    assert frame.attrs["config"]["k"] == 3 and "tau" not in frame.attrs["config"]
    config = psheads.ScoreConfig.from_dict(frame.attrs["config"])
    assert config.parameters == TopRowsParameters(3) and config.k == 3
    rerun = psheads.score_heads(lens, tokens, config)
    assert rerun["top_rows"].tolist() == frame["top_rows"].tolist()
    other = psheads.score_heads(lens, tokens, method="toprows-test", k=1)
    assert other["top_rows"].tolist() != frame["top_rows"].tolist()  # the option reaches the method
    with pytest.raises(ValueError, match="k must be"):
        psheads.score_heads(lens, tokens, method="toprows-test", k=0)
    with pytest.raises(TypeError, match=r"Unknown ScoreConfig option\(s\) \['tau'\].*'toprows-test' takes k"):
        psheads.score_heads(lens, tokens, method="toprows-test", tau=1e-3)


def test_the_shared_config_keeps_only_shared_options(registered) -> None:
    swap = psheads.ScoreConfig(tau=1e-3, block_size=2)
    assert list(swap.to_dict())[:4] == ["method", "tau", "block_size", "gamma"]  # as before methods had options
    assert swap.tau == 1e-3 and swap.parameters == methods.SwapParameters(1e-3, 2)
    anova = swap.replace(method="anova")
    assert anova.parameters is None and "tau" not in anova.to_dict()
    with pytest.raises(AttributeError, match="no attribute or option 'tau'"):
        _ = anova.tau
    assert anova.replace(method="swap").parameters == methods.SwapParameters()  # another method: its defaults
    assert swap.replace(tau=0.5).parameters == methods.SwapParameters(0.5, 2)
    assert psheads.ScoreConfig(method="toprows-test", k=4).replace(gamma=0.2).k == 4
    with pytest.raises(TypeError, match="parameters of method 'swap' must be a SwapParameters"):
        psheads.ScoreConfig(parameters=TopRowsParameters())


def test_an_old_anova_record_loads_without_complaint(caplog) -> None:
    old = {"method": "anova", "tau": 1e-4, "block_size": 1, "gamma": 0.1, "batch_size": 8}
    with caplog.at_level(logging.WARNING):
        config = psheads.ScoreConfig.from_dict(old)
    assert config == psheads.ScoreConfig(method="anova", batch_size=8) and not caplog.records
    with caplog.at_level(logging.WARNING):
        psheads.ScoreConfig.from_dict({**old, "colour": "red"})
    assert "colour" in caplog.text


def test_method_parameters_must_be_a_dataclass_with_defaults_and_their_own_names() -> None:
    @dataclasses.dataclass(frozen=True)
    class NoDefault:
        k: int

    @dataclasses.dataclass(frozen=True)
    class Clash:
        gamma: float = 0.1

    class Bad(TopRows):
        name = "bad-parameters-test"

    for parameters, error, match in [(NoDefault, TypeError, "fields all have defaults"),
                                     (dict, TypeError, "must be a \\(frozen\\) dataclass"),
                                     (Clash, ValueError, r"options \['gamma'\] are ScoreConfig's own")]:
        Bad.Parameters = parameters
        with pytest.raises(error, match=match):
            psheads.register_score_method(Bad())
    assert "bad-parameters-test" not in psheads.score_methods()


def test_the_cli_takes_method_options_and_shows_method_columns(registered, tmp_path, capsys) -> None:
    directory = helpers.save_tiny("llama", tmp_path / "model")
    prompts = tmp_path / "prompts.txt"
    prompts.write_text("t1 t2 t3 t4 t5 t6\nt9 t8 t7 t6 t5\n")
    out = tmp_path / "scores.json"
    code = cli.main(["score", str(directory), "--prompts-file", str(prompts), "--method", "toprows-test",
                     "--option", "k=3", "--out", str(out), "--quiet"])
    assert code == 0
    printed = capsys.readouterr().out
    assert "top_rows" in printed.splitlines()[1]  # the header of the printed table
    assert psheads.load_frame(out).attrs["config"]["k"] == 3
    with pytest.raises(SystemExit):
        cli.main(["score", str(directory), "--prompts-file", str(prompts), "--method", "anova", "--block-size", "2",
                  "--quiet"])
    assert "Unknown ScoreConfig option(s) ['block_size']" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        cli.main(["score", str(directory), "--prompts-file", str(prompts), "--option", "k", "--quiet"])
    assert "--option takes NAME=VALUE" in capsys.readouterr().err
