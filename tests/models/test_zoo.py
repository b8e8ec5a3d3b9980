"""Shipped models: they boot offline with their task, match their records and solve their task."""

from __future__ import annotations

import pytest
import torch

from psheads.models import training, zoo

SHIPPED = all((zoo.PRETRAINED_DIR / name / "config.json").exists() for name in zoo.PRETRAINED)
pytestmark = pytest.mark.skipif(not SHIPPED, reason="the trained models are not shipped in this checkout")


@pytest.mark.parametrize("name", zoo.PRETRAINED)
def test_shipped_model_solves_its_task(name) -> None:
    shipped = zoo.load_pretrained(name)
    assert shipped.task.name == name and shipped.info["task"] == name
    assert next(shipped.model.parameters()).dtype == torch.float32
    recorded = shipped.evaluation.set_index("hops")["accuracy"]
    assert recorded["all"] >= 0.99
    fresh = training.evaluate(shipped.model, shipped.task, 512, seed=123_456)
    assert fresh.set_index("hops").loc["all", "accuracy"] >= 0.98
    dynamics = shipped.dynamics
    assert set(dynamics["step"]) >= {500, shipped.info["step"]}
    assert {"positional", "symbolic", "label", "accuracy_all"} <= set(dynamics.columns)


def test_shipped_size_budget() -> None:
    size = sum(p.stat().st_size for p in zoo.PRETRAINED_DIR.rglob("*") if p.is_file())
    assert size <= 20e6


def test_unknown_name() -> None:
    with pytest.raises(ValueError, match="Unknown pretrained model"):
        zoo.load_pretrained("nope")


def test_boot_local_loads_only_safetensors(tmp_path) -> None:
    import pytest
    import torch
    import transformers

    from tests import helpers

    directory = tmp_path / "m"
    model = transformers.AutoModelForCausalLM.from_config(helpers.hf_config("llama"))
    model.save_pretrained(directory)
    for weights in directory.glob("*.safetensors"):  # the old pickled layout instead
        weights.unlink()
    torch.save(model.state_dict(), directory / "pytorch_model.bin")
    helpers.save_word_tokenizer(directory)
    with pytest.raises(ValueError, match="holds no .safetensors weights"):
        zoo.boot_local(directory)
