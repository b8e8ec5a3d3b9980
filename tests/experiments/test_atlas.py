"""The cross-family atlas on a tiny model: tables by schema, paper B's ID, and resumable writing."""

from __future__ import annotations

import json

import pandas as pd
import pytest
import torch

import psheads
from psheads.experiments import atlas as module
from psheads.experiments.atlas import AtlasConfig, atlas, read_atlas, write_atlas
from psheads.results import schema

TINY = AtlasConfig(lengths=(8, 12), n_prompts=(2, 3), plane_swap_lengths=(8,), tasks=(), n_task_prompts=1,
                   batch_size=2)


@pytest.fixture(scope="module")
def tables(model_factory):
    return atlas(model_factory("llama"), TINY, model_name="tiny", progress=False)


def test_every_table_follows_its_schema(tables, model_factory) -> None:
    assert set(tables) == set(module.TABLES)
    for name, frame in tables.items():
        assert list(frame.columns) == [c for c in module.TABLES[name].names if c in frame.columns], name
        assert set(frame["model"]) == {"tiny"} and set(frame["prompts"]) == {"natural", "random"}
        assert frame.attrs["config"] == TINY.to_dict()
    heads = tables["heads"]
    assert len(heads) == 2 * 2 * 2 * 2 * 4  # sets × lengths × methods × layers × heads
    assert heads["label"].dtype == schema.LABEL_DTYPE and set(heads["layer_kind"]) == {"full"}
    planes = tables["planes"]
    assert set(planes.loc[planes["method"] == "swap", "length"]) == {8}  # the swap per plane only where asked
    assert set(planes.loc[planes["method"] == "anova", "length"]) == {8, 12}


def test_paper_b_ids_are_those_of_frequency_profile(tables, model_factory) -> None:
    lens = psheads.RopeLens(model_factory("llama"))
    tokens = module.prompt_sets(lens.model.tokenizer, TINY)["natural", 12]
    reference = psheads.frequency_profile(lens, tokens, weighting="softmax", scale=False, batch_size=2,
                                          progress=False).heads
    rows = tables["frequency_id"].query("prompts == 'natural' and length == 12")
    torch.testing.assert_close(torch.tensor(rows["paper_b_id"].to_numpy()),
                               torch.tensor(reference["mean_frequency_id"].to_numpy()), atol=1e-12, rtol=0)


def test_config_validates() -> None:
    with pytest.raises(ValueError, match="one count per length"):
        AtlasConfig(lengths=(8, 12), n_prompts=(2,))
    with pytest.raises(ValueError, match="must be among lengths"):
        AtlasConfig(plane_swap_lengths=(100,))
    with pytest.raises(ValueError, match="Unknown tasks"):
        AtlasConfig(tasks=("no-such-task",))
    assert AtlasConfig.from_dict(TINY.to_dict()) == TINY


def test_write_atlas_resumes_model_by_model(tmp_path, monkeypatch, tables) -> None:
    calls = []

    def fake(name, config, progress=None):
        calls.append(name)
        if name == "qwen2.5-coder-0.5b":
            raise KeyboardInterrupt  # interrupted in the middle of the second model
        return {table: frame.assign(model=name) for table, frame in tables.items()}

    monkeypatch.setattr(module, "atlas", fake)
    with pytest.raises(KeyboardInterrupt):
        write_atlas(["smollm2-135m", "qwen2.5-coder-0.5b"], tmp_path, TINY)
    assert (tmp_path / "smollm2-135m" / module.RECORD).is_file()
    assert not (tmp_path / "qwen2.5-coder-0.5b").exists() and not list(tmp_path.glob(".qwen*"))  # nothing half-written
    again = []
    monkeypatch.setattr(module, "atlas", lambda name, config, progress=None: again.append(name) or {
        table: frame.assign(model=name) for table, frame in tables.items()})
    written = write_atlas(["smollm2-135m", "qwen2.5-coder-0.5b"], tmp_path, TINY)
    assert calls == ["smollm2-135m", "qwen2.5-coder-0.5b"]
    assert again == ["qwen2.5-coder-0.5b"]  # the complete one skipped
    assert set(written) == {"smollm2-135m", "qwen2.5-coder-0.5b"}
    write_atlas(["smollm2-135m"], tmp_path, AtlasConfig(**{**TINY.__dict__, "seed": 1}))  # other settings: redone
    assert again == ["qwen2.5-coder-0.5b", "smollm2-135m"]
    record = json.loads((tmp_path / "qwen2.5-coder-0.5b" / module.RECORD).read_text())
    assert record["config"] == TINY.to_dict() and record["rows"]["heads"] == len(tables["heads"])
    back = read_atlas(tmp_path)
    assert set(back["heads"]["model"]) == {"smollm2-135m", "qwen2.5-coder-0.5b"}
    pd.testing.assert_frame_equal(back["heads"].query("model == 'smollm2-135m'").reset_index(drop=True),
                                  tables["heads"].assign(model="smollm2-135m"), check_dtype=False)
    write_atlas(["qwen2.5-coder-0.5b"], tmp_path / "again", TINY)  # the same numbers give the same bytes
    for name in module.FILES.values():
        assert (tmp_path / "again" / "qwen2.5-coder-0.5b" / name).read_bytes() == \
            (tmp_path / "qwen2.5-coder-0.5b" / name).read_bytes(), name
    with pytest.raises(ValueError, match="must name zoo LLMs"):
        write_atlas(["tiny"], tmp_path, TINY)


def test_the_atlas_script_summarises_and_draws(tmp_path, monkeypatch, tables) -> None:
    """scripts/atlas.py on a tiny atlas: every summary table and figure, by the rules it states."""
    import runpy
    import shutil
    from pathlib import Path

    monkeypatch.setattr(module, "atlas", lambda name, config, progress=None: {
        table: frame.assign(model=name) for table, frame in tables.items()})
    write_atlas(["smollm2-135m"], tmp_path / "atlas", TINY)
    root = Path(__file__).resolve().parents[2]
    (tmp_path / "figures").mkdir()
    shutil.copy(root / "docs" / "data" / "plotly.min.js", tmp_path / "figures")
    script = runpy.run_path(str(root / "scripts" / "atlas.py"))
    monkeypatch.setitem(script["main"].__globals__, "AtlasConfig", lambda: TINY)
    script["main"](["smollm2-135m", "--out", str(tmp_path / "atlas"), "--summaries-only",
                    "--figures", str(tmp_path / "figures")])
    written = {path.name for path in (tmp_path / "atlas").glob("summary_*.csv")}
    assert written == {f"summary_{name}.csv" for name in ("early_late", "correlation", "labels", "kv_groups", "bands",
                                                           "barbero")}
    barbero = pd.read_csv(tmp_path / "atlas" / "summary_barbero.csv")
    assert set(barbero["verdict"]) <= {"holds", "does not hold", "inconclusive", "not measured"}
    assert len(barbero) == 2 * 2 * 2  # two rules × two prompt sets × two lengths
    figures = sorted(path.name for path in (tmp_path / "figures").glob("atlas_*.html"))
    assert figures == ["atlas_correlation_smollm2-135m.html", "atlas_frequency.html",
                       "atlas_frequency_id_smollm2-135m.html", "atlas_layers_smollm2-135m.html"]
