"""Every RoPE decoder architecture the installed TransformerLens supports ends exact or clearly refused
(``tests/coverage.py``), and ``docs/coverage.md`` says what is measured here."""

from __future__ import annotations

import dataclasses
from importlib.metadata import version

import pytest
import torch

import psheads
from psheads.rope.backends import BridgeBackend
from tests import coverage, helpers, lookalikes

ARCHITECTURES = lookalikes.rope_architectures()
TL4 = int(version("transformer-lens").split(".")[0]) >= 4


@pytest.mark.parametrize("architecture", ARCHITECTURES)
def test_each_architecture_is_exact_or_refused(architecture: str) -> None:
    outcome = coverage.classify_in_temporary(architecture)  # a third outcome raises CoverageFailure
    recorded = coverage.stored().get(coverage.transformer_lens_version(), {}).get(architecture)
    assert recorded is not None, (f"docs/coverage.json has no {architecture} for TransformerLens "
                                  f"{coverage.transformer_lens_version()}: run `python -m tests.coverage --write`")
    assert (outcome.state, outcome.family, list(outcome.features)) == (
        recorded["state"], recorded["family"], list(recorded["features"])), (
        f"{architecture} is now {outcome.state}; the docs say {recorded['state']}: "
        "run `python -m tests.coverage --write`")


def test_the_stored_outcomes_cover_every_architecture_and_meet_the_goal() -> None:
    measured = coverage.stored().get(coverage.transformer_lens_version(), {})
    assert sorted(measured) == ARCHITECTURES, "run `python -m tests.coverage --write`"
    exact = sum(outcome["state"] == "exact" for outcome in measured.values())
    if TL4:  # the goal: 90% of TransformerLens 4's RoPE decoders exact (3.9's own bridges fail on some)
        assert exact >= 0.9 * len(measured), f"{exact} of {len(measured)} exact"
    for outcome in measured.values():
        if outcome["state"] == "refused":
            assert outcome["architecture"] in outcome["detail"]


def test_the_coverage_page_is_the_stored_outcomes() -> None:
    page = coverage.PAGE.read_text()
    begin, end = coverage.TABLE_MARKERS
    assert begin in page and end in page, "docs/coverage.md lost its generated table"
    assert page.split(begin)[1].split(end)[0].strip() == coverage.table(coverage.stored()).strip(), (
        "docs/coverage.md is stale: run `python -m tests.coverage --write`")
    begin, end = coverage.FAMILY_MARKERS
    assert page.split(begin)[1].split(end)[0].strip() == coverage.family_table().strip(), (
        "docs/coverage.md's family table is stale: run `python -m tests.coverage --write`")


# --- the classification can fail ------------------------------------------------------------------
def test_a_wrong_window_is_caught(monkeypatch) -> None:
    """psheads reading no window where the model slides one (the self-check, which catches it too, off):
    the logits still match, the facts do not."""
    monkeypatch.setattr(BridgeBackend, "_window", lambda self, layer: None)
    monkeypatch.setattr(psheads.RopeLens, "_self_check", lambda self, captures, **_: None)
    with pytest.raises(coverage.CoverageFailure, match="psheads reads window None, the model applies 5"):
        coverage.classify_in_temporary("MistralForCausalLM")


def test_wrong_logits_are_caught(monkeypatch) -> None:
    """A decomposition that misses the model's attention (a scale off by 10%, the self-check off)."""
    real = BridgeBackend.layer_spec
    monkeypatch.setattr(BridgeBackend, "layer_spec",
                        lambda self, layer: dataclasses.replace(real(self, layer), scale=real(self, layer).scale * 1.1))
    monkeypatch.setattr(psheads.RopeLens, "_self_check", lambda self, captures, **_: None)
    with pytest.raises(coverage.CoverageFailure, match="rebuild the model's attention only to"):
        coverage.classify_in_temporary("Qwen2ForCausalLM")


def test_a_raw_error_is_no_refusal(monkeypatch) -> None:
    def broken(self, layer):
        raise IndexError("index 1 is out of bounds for dimension 0 with size 1")

    monkeypatch.setattr(BridgeBackend, "layer_spec", broken)
    with pytest.raises(coverage.CoverageFailure, match="neither exact nor refused: IndexError"):
        coverage.classify_in_temporary("LlamaForCausalLM")


def test_a_false_alarm_is_no_refusal(monkeypatch) -> None:
    """A self-check that cries wolf on a finite model is a failure, not a refusal."""
    def alarm(self, captures, **_):
        raise psheads.SelfCheckError("Layer 0: the model's attention on the self-check probe is not finite")

    monkeypatch.setattr(psheads.RopeLens, "_self_check", alarm)
    with pytest.raises(coverage.CoverageFailure, match="SelfCheckError"):
        coverage.classify_in_temporary("Qwen2MoeForCausalLM")


def test_a_sparse_attention_indexer_caps_the_input(tmp_path) -> None:
    """GLM-MoE-DSA keeps, for queries from ``index_topk`` on, only the keys its indexer selects by
    content: psheads decomposes shorter inputs exactly and refuses longer ones, saying why."""
    directory = lookalikes.save_lookalike("GlmMoeDsaForCausalLM", tmp_path / "model", index_topk=8)
    lens = psheads.RopeLens(helpers.boot_bridge(directory))  # its probe stops at 8 tokens
    assert lens.backend.max_positions == 8
    tokens = torch.randint(3, helpers.VOCAB, (2, 12), generator=torch.Generator().manual_seed(0))
    assert coverage.max_error("GlmMoeDsaForCausalLM", lens, directory, tokens[:, :8]) <= coverage.TOLERANCE
    with pytest.raises(ValueError, match="Sequence length 12 exceeds 8 tokens: .* indexer selects by content"):
        psheads.score_heads(lens, tokens, progress=False)


def test_a_bridge_that_computes_another_attention_is_refused(tmp_path) -> None:
    """Falcon's new decoder layout with several key heads: TransformerLens splits the fused q/k/v
    projection otherwise than Hugging Face does, so the bridge's attention is not the model's. The
    planes rebuild the bridge's pattern, so only the comparison with the Hugging Face attention run
    on the same inputs can tell, and psheads refuses rather than decompose the wrong attention."""
    directory = lookalikes.save_lookalike("FalconForCausalLM", tmp_path / "model", new_decoder_architecture=True,
                                          num_kv_heads=2, multi_query=False)
    with pytest.raises(psheads.UnsupportedModelError,
                       match="Layer 0 of FalconForCausalLM: the TransformerBridge computes this attention differently"):
        psheads.RopeLens(helpers.boot_bridge(directory))
