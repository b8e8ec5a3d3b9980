"""Text and notebook views of FrequencyProfile, RopeLens and Pretrained: the key facts, escaped."""

from __future__ import annotations

import dataclasses

import pandas as pd
import pytest
import torch

import psheads
from psheads.interface import reprs
from psheads.models.zoo import Pretrained
from psheads.rope.lens import as_lens

HOSTILE = "<script>alert('x')</script>"


def test_layer_text() -> None:
    assert reprs.layer_text([5, 0, 1, 2, 7, 8]) == "0–2, 5, 7, 8"  # runs of three or more
    assert reprs.layer_text([3]) == "3"
    assert reprs.layer_text([]) == "none"


def test_text_and_html_escape_everything() -> None:
    facts = [("model", HOSTILE), ("heads per layer", 4)]
    assert reprs.text("Thing", facts) == f"Thing(model={HOSTILE!r}, heads_per_layer=4)"
    page = reprs.html(HOSTILE, facts, [(HOSTILE, pd.DataFrame({"name": [HOSTILE], "x": [0.123456]}))])
    assert "<script>" not in page and page.count("&lt;script&gt;") == 4  # title, fact, caption, table cell
    assert "0.1235" in page and "heads per layer" in page


@pytest.fixture(scope="module")
def gemma3_lens(model_factory) -> psheads.RopeLens:
    """Two layers: layer 0 local (window 5, base 1e4), layer 1 global (base 1e6)."""
    return psheads.RopeLens(model_factory("gemma3"))


def test_rope_lens_view(gemma3_lens: psheads.RopeLens) -> None:
    facts = dict(gemma3_lens._facts())
    assert facts["family"] == "gemma3" and facts["layers"] == 2
    assert (facts["heads"], facts["KV heads"], facts["d_head"], facts["planes"]) == ("4", "2", "8", "4")
    assert facts["RoPE base"] == "10,000 (layers 0); 1,000,000 (layers 1)"
    assert facts["local layers"] == "0 (window 5)" and facts["global layers"] == "1"
    page = gemma3_lens._repr_html_()
    assert "<strong>RopeLens</strong>" in page and "1,000,000 (layers 1)" in page and "gemma3" in page


def test_rope_lens_view_shows_open_gates_and_hooks(gemma3_lens: psheads.RopeLens) -> None:
    assert "<td style='text-align:left'>none</td></tr></table>" in gemma3_lens._repr_html_()
    with gemma3_lens.gate([1, 2], layers=[1], heads=[0]):
        with gemma3_lens.plane_hooks([0, 1]):
            assert dict(gemma3_lens._facts())["active"] == (
                "gate planes 1, 2 of q on layers 1, heads 0; plane hooks on layers 0, 1")
        assert dict(gemma3_lens._facts())["active"] == "gate planes 1, 2 of q on layers 1, heads 0"
    with pytest.raises(RuntimeError), gemma3_lens.gate([3], keys=True):
        raise RuntimeError("boom")
    assert dict(gemma3_lens._facts())["active"] == "none"  # closed, also on error


@pytest.mark.parametrize(("overrides", "base"), [
    ({"rope_theta": 500000.0}, "500,000"),
    ({"rope_parameters": {"rope_type": "linear", "factor": 4.0, "rope_theta": 10000.0}}, "10,000"),
])
def test_rope_base_is_read_from_the_tables(model_factory, overrides: dict, base: str) -> None:
    assert dict(psheads.RopeLens(model_factory("llama", **overrides))._facts())["RoPE base"] == base


def test_cached_lens_has_a_view(model_factory) -> None:
    """``as_lens`` rebuilds a lens from the cache without ``__init__``; its view still works."""
    model = model_factory("gemma3")
    psheads.RopeLens(model)
    assert dict(as_lens(model)._facts())["active"] == "none"


def test_frequency_profile_view(gemma3_lens: psheads.RopeLens) -> None:
    profile = psheads.frequency_profile(gemma3_lens, torch.arange(3, 15).reshape(2, 6), progress=False)
    text = repr(profile)
    assert text.startswith("FrequencyProfile(model=") and "prompts=2" in text and "layers=2" in text
    assert "heads_per_layer=4" in text and "rotated_planes=4" in text and "DataFrame" not in text
    page = profile._repr_html_()
    assert "top planes per layer" in page and "heads (8 of 8 rows)" in page and "dominant_plane" in page
    usage = profile.planes.groupby(["layer", "plane"])["usage"].mean()
    best = int(usage.loc[1].idxmax())
    assert f"<td>{best} ({usage.loc[(1, best)]:.2f})" in page  # layer 1's most used plane comes first
    hostile = dataclasses.replace(profile, heads=profile.heads.copy())
    hostile.heads.attrs["model"] = HOSTILE
    assert "<script>" not in hostile._repr_html_() and "&lt;script&gt;" in hostile._repr_html_()


@pytest.fixture(scope="module")
def number() -> Pretrained:
    return psheads.load_pretrained("number")


def test_pretrained_view(number) -> None:
    text = repr(number)
    assert text.startswith("Pretrained(name='number', task='number', accuracy='0.9996 on 8192 prompts'")
    assert "lr 0.0001" in text and "14 checkpoints" in text and "TransformerBridge" not in text
    page = number._repr_html_()
    assert "accuracy by hop count" in page and "model.safetensors" in page and "4.8 MB" in page
    assert "warmup_steps 750" in page


def test_pretrained_view_without_records_and_escaped() -> None:
    """An LLM has no task, evaluation or dynamics; text from its record is escaped."""
    llm = Pretrained(model=None, task=None, evaluation=None, dynamics=None,
                                 info={"name": "llm", "source": HOSTILE})
    assert repr(llm) == f"Pretrained(name='llm', task='none (an LLM)', source={HOSTILE!r})"
    page = llm._repr_html_()
    assert "<script>" not in page and "&lt;script&gt;" in page and "accuracy" not in page
