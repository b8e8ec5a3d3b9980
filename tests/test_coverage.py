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
    version_ = coverage.transformer_lens_version()
    recorded = coverage.stored().get(version_, {}).get(architecture)
    rewrite = f"run `python -m tests.coverage --write --only {architecture}` with TransformerLens {version_}"
    assert recorded is not None, f"docs/coverage.json has no {architecture} for TransformerLens {version_}: {rewrite}"
    assert coverage.still_holds(recorded, outcome), (
        f"{architecture} is now {outcome.state} ({', '.join(outcome.features)}; {outcome.detail}); the docs say "
        f"{recorded}: {rewrite}")


def test_the_stored_outcomes_cover_every_architecture_and_meet_the_goal() -> None:
    measured = coverage.stored().get(coverage.transformer_lens_version(), {})
    assert sorted(measured) == ARCHITECTURES, "run `python -m tests.coverage --write`"
    exact = sum(outcome["state"] == "exact" for outcome in measured.values())
    if TL4:  # the goal: 90% of TransformerLens 4's RoPE decoders exact (3.9's own bridges fail on some)
        assert exact >= 0.9 * len(measured), f"{exact} of {len(measured)} exact"
    for architecture, outcome in measured.items():
        if outcome["state"] == "refused":
            assert architecture in outcome["reason"]


def test_the_coverage_page_is_the_stored_outcomes() -> None:
    page = coverage.PAGE.read_text()
    begin, end = coverage.TABLE_MARKERS
    assert begin in page and end in page, "docs/coverage.md lost its generated table"
    assert page.split(begin)[1].split(end)[0].strip() == coverage.table(coverage.stored()).strip(), (
        "docs/coverage.md is stale: run `python -m tests.regenerate`")
    begin, end = coverage.FAMILY_MARKERS
    assert page.split(begin)[1].split(end)[0].strip() == coverage.family_table().strip(), (
        "docs/coverage.md's family table is stale: run `python -m tests.regenerate`")


# --- the record: bounds, not last digits --------------------------------------------------------------
def _exact(name: str, error: float, features: tuple[str, ...] = ("GQA",)) -> coverage.Outcome:
    return coverage.Outcome(name, "exact", "generic", features, f"{error:.1e}")


def test_error_bounds_lie_on_a_coarse_grid_above_the_measurement() -> None:
    assert [coverage.error_bound(e) for e in (1.2e-7, 1.4e-7, 3e-7, 6e-7, 9e-6, 0.0)] == [
        5e-7, 1e-6, 2e-6, 5e-6, 5e-5, 0.0]
    for error in (8.2e-8, 1e-7, 1.9e-7, 4.8e-7, 6.6e-7, 3.3e-3):
        bound = coverage.error_bound(error)
        assert bound >= coverage.HEADROOM * error and f"{bound:.0e}"[0] in "125" and float(f"{bound:.0e}") == bound
    with pytest.raises(ValueError, match="finite non-negative"):
        coverage.error_bound(float("nan"))


def test_a_rerun_with_other_rounding_leaves_the_record_byte_identical() -> None:
    first = {"Aarch": _exact("Aarch", 1.2e-7), "Barch": _exact("Barch", 4.8e-7),
             "Carch": coverage.Outcome("Carch", "refused", "generic", (), "Carch: refused because …")}
    record = coverage.merge({}, first, complete=True)
    text = coverage.dumps({"4.3": record})
    noisy = {**first, "Aarch": _exact("Aarch", 1.3e-7), "Barch": _exact("Barch", 4.1e-7)}
    assert coverage.dumps({"4.3": coverage.merge(record, noisy, complete=True)}) == text
    changed = coverage.merge(record, {**noisy, "Aarch": _exact("Aarch", 1.3e-7, ("GQA", "MoE"))}, complete=True)
    assert changed["Aarch"]["features"] == ["GQA", "MoE"] and changed["Barch"] is record["Barch"]
    worse = coverage.merge(record, {**noisy, "Barch": _exact("Barch", 1.1e-6)}, complete=True)
    assert worse["Barch"]["error_below"] == 2e-6 and worse["Aarch"] is record["Aarch"]
    assert list(coverage.merge(record, {"Aarch": first["Aarch"]}, complete=True)) == ["Aarch"]  # gone: dropped


def test_only_rewrites_the_named_rows(tmp_path, monkeypatch) -> None:
    """``--only`` measures the architectures named and leaves every other row, and the other version's
    record, as they are."""
    data, page = tmp_path / "coverage.json", tmp_path / "coverage.md"
    records = {"3.9": {"Aarch": coverage.row(_exact("Aarch", 3e-7))},
               "4.3": {name: coverage.row(_exact(name, 3e-7)) for name in ("Aarch", "Barch")}}
    data.write_text(coverage.dumps(records))
    page.write_text("\n\n".join([coverage.TABLE_MARKERS[0], coverage.TABLE_MARKERS[1], coverage.FAMILY_MARKERS[0],
                                  coverage.FAMILY_MARKERS[1]]))
    monkeypatch.setattr(coverage, "DATA", data)
    monkeypatch.setattr(coverage, "PAGE", page)
    monkeypatch.setattr(coverage, "transformer_lens_version", lambda: "4.3")
    monkeypatch.setattr(lookalikes, "rope_architectures", lambda: ["Aarch", "Barch"])
    measured = []
    monkeypatch.setattr(coverage, "classify_in_temporary",
                        lambda name: measured.append(name) or coverage.Outcome(name, "refused", "generic", (), name))
    coverage.main(["--write", "--only", "Barch"])
    after = coverage.stored()
    assert measured == ["Barch"] and after["3.9"] == records["3.9"] and after["4.3"]["Aarch"] == records["4.3"]["Aarch"]
    assert after["4.3"]["Barch"] == {"state": "refused", "features": [], "reason": "Barch"}
    assert "| Barch | generic | — | refused | not in this version |" in page.read_text()
    with pytest.raises(SystemExit, match="not a RoPE architecture of TransformerLens 4.3: Zarch"):
        coverage.main(["--write", "--only", "Zarch"])


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
