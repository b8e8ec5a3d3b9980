"""Frames that travel: the optional ``model`` column and the ordered ``label`` categorical."""

from __future__ import annotations

import io

import pandas as pd
import pytest
import torch

import psheads
from psheads.measure import methods
from psheads.results import schema

MODEL_FRAMES = [schema.SCORES, schema.PROFILE_PLANES, schema.PROFILE_HEADS, schema.DISCREPANCY,
                schema.LENGTH_GENERALIZATION]


def test_model_name_is_checked() -> None:
    assert schema.model_name(None) is None and schema.model_name("gpt-j") == "gpt-j"
    with pytest.raises(TypeError, match="model_name must be a string"):
        schema.model_name(3)
    with pytest.raises(ValueError, match="pass None to leave the column out"):
        schema.model_name("  ")


def test_tag_model_adds_a_leading_column_once() -> None:
    frame = pd.DataFrame({"layer": [0, 1]}, index=[5, 7])
    frame.attrs["config"] = {"a": 1}
    assert schema.tag_model(frame, None) is frame and list(frame.columns) == ["layer"]
    tagged = schema.tag_model(frame, "m")
    assert list(tagged.columns) == ["model", "layer"] and tagged["model"].tolist() == ["m", "m"]
    assert tagged.attrs == {"config": {"a": 1}, "model_name": "m"}
    with pytest.raises(ValueError, match="already has a 'model' column"):
        schema.tag_model(tagged, "other")


def test_per_model_schemas_describe_the_model_column_first() -> None:
    for frame_schema in MODEL_FRAMES:
        assert frame_schema.per_model and frame_schema.describe()["name"].iloc[0] == "model"
        assert "model" not in frame_schema.names
    assert not schema.SWAPS.per_model and schema.SWAPS.describe()["name"].iloc[0] == "block_i"


def test_label_order_covers_every_label_of_the_rule() -> None:
    scores = (0.0, 0.5, 1.0, float("nan"))
    assert {methods.label(p, s) for p in scores for s in scores} == set(schema.LABEL_ORDER) - {schema.NOT_ATTENTION}
    assert schema.LABEL_ORDER[-1] == schema.NOT_ATTENTION  # blocks without attention come last
    assert list(schema.LABEL_DTYPE.categories) == list(schema.LABEL_ORDER) and schema.LABEL_DTYPE.ordered


def test_ordered_labels_round_trip_through_csv_and_refuse_strangers() -> None:
    labels = pd.Categorical(["symbolic", "positional", "uniform", "mixed"], dtype=schema.LABEL_DTYPE)
    frame = pd.DataFrame({"head": [0, 1, 2, 3], "label": labels})
    text = io.StringIO()
    frame.to_csv(text, index=False)
    read = pd.read_csv(io.StringIO(text.getvalue()))
    assert read["label"].dtype != schema.LABEL_DTYPE
    pd.testing.assert_frame_equal(schema.ordered_labels(read), frame)
    assert read.sort_values("label")["label"].tolist() == ["positional", "mixed", "symbolic", "uniform"]
    assert (read["label"] < "symbolic").tolist() == [False, True, False, True]
    assert schema.ordered_labels(pd.DataFrame({"head": [0]})).columns.tolist() == ["head"]
    strange = pd.DataFrame({"label": ["positional", "sideways"]})
    with pytest.raises(ValueError, match=r"label values \['sideways'\] are not head labels"):
        schema.ordered_labels(strange)
    assert strange["label"].tolist() == ["positional", "sideways"]  # left unchanged


def test_score_frames_of_two_models_concatenate(model_factory) -> None:
    tokens = torch.randint(0, 64, (3, 9))
    frames = [psheads.score_heads(model_factory(family), tokens, model_name=family) for family in ("gptj", "llama")]
    for family, frame in zip(("gptj", "llama"), frames, strict=True):
        assert frame.columns[0] == "model" and set(frame["model"]) == {family}
        assert frame.attrs["model_name"] == family and frame["label"].dtype == schema.LABEL_DTYPE
    both = pd.concat(frames, ignore_index=True)
    assert both["label"].dtype == schema.LABEL_DTYPE
    assert both.groupby("model").size().to_dict() == {"gptj": 2 * 4, "llama": 2 * 4}
    codes = both.sort_values("label", kind="stable")["label"].cat.codes.tolist()
    assert codes == sorted(codes)
    untagged = psheads.score_heads(model_factory("gptj"), tokens)
    assert "model" not in untagged.columns and "model_name" not in untagged.attrs
    per_prompt = psheads.score_heads(model_factory("gptj"), tokens, reduce=False, model_name="gptj")
    assert list(per_prompt.columns[:2]) == ["model", "prompt"]


def test_bad_model_name_fails_before_any_work(model_factory, monkeypatch) -> None:
    def no_lens(model):
        raise AssertionError("the model was analysed")

    monkeypatch.setattr(psheads.scoring, "as_lens", no_lens)
    with pytest.raises(TypeError, match="model_name must be a string"):
        psheads.score_heads(model_factory("llama"), torch.randint(0, 64, (2, 6)), model_name=1)


def test_profile_and_per_length_frames_take_the_model_column(model_factory) -> None:
    model = model_factory("gptj", vocab_size=136, n_positions=200)
    tokens = torch.randint(0, 64, (2, 9))
    profile = psheads.frequency_profile(model, tokens, model_name="a")
    for frame in (profile.planes, profile.heads):
        assert frame.columns[0] == "model" and set(frame["model"]) == {"a"} and frame.attrs["model_name"] == "a"
    curve = psheads.length_generalization(model, "number", [17], n=4, progress=False, model_name="a")
    assert list(curve.columns) == ["model", *schema.LENGTH_GENERALIZATION.names]
    margins = psheads.discrepancy(model, "number", n=2, progress=False, model_name="a")
    assert list(margins.columns) == ["model", *schema.DISCREPANCY.names] and margins.attrs["model_name"] == "a"
    accuracy = psheads.evaluate(model, "number", n=4, progress=False, model_name="a")
    assert accuracy.columns[0] == "model" and set(accuracy["model"]) == {"a"}
