"""psheads on a real pretrained LLM: Gemma 3 270M, from its registry package (``psheads[gemma]``).

These tests run by default (CI installs the extra; a fresh machine converts the GGUF once into
the cache, later runs reuse it). Skipping them must be asked for: ``PSHEADS_SKIP_REAL_LLM=1``;
without the extra and without that variable they fail and say what to install.
"""

from __future__ import annotations

import os

import pytest
import torch
import transformers

import psheads
from psheads.rope import geometry
from psheads.rope.layer import check_pattern

SKIP = os.environ.get("PSHEADS_SKIP_REAL_LLM") == "1"
LOCAL, GLOBAL = 4, 5  # Gemma 3: five sliding-window (base 1e4) layers, then one global (base 1e6)
LONG = 720


@pytest.fixture(scope="module")
def gemma():
    if SKIP:
        pytest.skip("real-LLM tests skipped on request (PSHEADS_SKIP_REAL_LLM=1)")
    try:
        return psheads.load_pretrained("gemma-3-270m")
    except ValueError as err:
        pytest.fail(f"{err} Or set PSHEADS_SKIP_REAL_LLM=1 to skip the real-LLM tests explicitly.")


@pytest.fixture(scope="module")
def lens(gemma):
    return psheads.RopeLens(gemma.model)


@pytest.fixture(scope="module")
def text_tokens(gemma) -> torch.Tensor:
    """About 720 tokens of natural English (this repository's own docs), as one prompt."""
    from pathlib import Path

    text = "\n".join((Path(__file__).resolve().parents[1] / "docs" / name).read_text()
                     for name in ("index.md", "scoring.md", "architecture.md"))
    tokens = gemma.model.to_tokens(text)[:, :LONG]
    assert tokens.shape[1] == LONG
    return tokens


@pytest.fixture(scope="module")
def hf_eager(gemma):
    """The same weights in Hugging Face's own eager attention, for an independent reference."""
    return transformers.AutoModelForCausalLM.from_pretrained(gemma.info["directory"], dtype=torch.float32,
                                                             attn_implementation="eager").eval()


def test_the_model_is_what_the_package_ships(gemma, lens) -> None:
    assert gemma.info["sha256"] == "a5fd3b62230aa5ec60212297dc9d20eaa70578ac519e00d93a17e44c087a6818"
    assert lens.n_layers == 18 and lens.layers[0].n_heads == 4 and lens.layers[0].n_kv_heads == 1
    assert [geo.window for geo in lens.layers] == [None if (layer + 1) % 6 == 0 else 512 for layer in range(18)]
    assert lens.backend.family.name == "gemma3" and lens.layers[0].d_head == 256
    again = psheads.load_pretrained("gemma-3-270m")  # the cached conversion: no second dequantisation
    assert again.info["directory"] == gemma.info["directory"]


def test_planes_rebuild_hf_eager_attention_beyond_the_window(gemma, lens, text_tokens, hf_eager) -> None:
    with torch.no_grad():
        attentions = hf_eager(text_tokens, output_attentions=True).attentions  # [1, head, query, key] per layer
    for layer in (LOCAL, GLOBAL):
        geo = lens.layers[layer]
        for query in (300, 511, 600, LONG - 1):  # inside the 512-token window, at its edge, beyond it
            planes = lens.frequency_logits(text_tokens, layer, query=query)
            logits = geometry.soft_cap(planes.sum(2), geo.softcap)
            visible = geometry.visible_keys(torch.tensor([query]), query + 1, geo.window)[0]
            rebuilt = torch.softmax(logits.masked_fill(~visible, float("-inf")), dim=-1)
            expected = attentions[layer][:, :, query, : query + 1].double()
            assert float((rebuilt - expected).abs().max()) <= 1e-5, (layer, query)
            if query >= 512 and geo.window is not None:
                assert float(expected[..., : query - 511].abs().max()) == 0.0  # the window really masks


def test_tables_match_hf_for_both_bases(gemma, lens, text_tokens) -> None:
    hf = gemma.model.original_model.model
    captures = lens.backend.capture(text_tokens[:, :64], [LOCAL, GLOBAL], with_pattern=True)
    positions = torch.arange(64)[None]
    for layer, kind, base in ((LOCAL, "sliding_attention", 1e4), (GLOBAL, "full_attention", 1e6)):
        cos, sin = hf.rotary_emb(torch.zeros(1, 64, 256), positions, kind)
        torch.testing.assert_close(captures[layer].cos, cos[0].float(), atol=1e-6, rtol=0)
        torch.testing.assert_close(captures[layer].sin, sin[0].float(), atol=1e-6, rtol=0)
        theta = 1.0 / base ** (torch.arange(0, 256, 2, dtype=torch.float64) / 256)
        torch.testing.assert_close(lens.layers[layer].theta, theta, atol=1e-6, rtol=1e-6)
        check = check_pattern(lens.layers[layer], captures[layer], torch.float32)
        assert check.error <= 1e-5 and check.worst <= 1


def test_scores_profiles_gating_and_plane_hooks_work(gemma, lens, text_tokens) -> None:
    prompts = text_tokens[:, :96].repeat(2, 1)
    prompts[1, 1:] = prompts[1, 1:].flip(0)  # a second, different prompt of the same length
    frame = psheads.score_heads(lens, prompts)
    assert len(frame) == 18 * 4 and frame[["positional", "symbolic"]].notna().all().all()
    anova = psheads.score_heads(lens, prompts, method="anova", layers=[LOCAL, GLOBAL])
    torch.testing.assert_close(torch.tensor((anova.positional + anova.symbolic + anova.interaction).to_numpy()),
                               torch.ones(len(anova), dtype=torch.float64), atol=1e-9, rtol=0)
    planes = psheads.score_heads(lens, prompts, layers=[GLOBAL], heads=[0], by_frequency=True)
    assert len(planes) == 129 and planes["positional"].between(0, 1).all()
    profile = psheads.frequency_profile(lens, prompts, layers=[LOCAL, GLOBAL])
    sums = profile.planes.groupby(["layer", "head"])["usage"].sum()
    torch.testing.assert_close(torch.tensor(sums.to_numpy()), torch.ones(8, dtype=torch.float64))
    tokens = prompts[:1, :48]
    with torch.no_grad():
        with lens.gate([1, 2, 3], layers=[GLOBAL], heads=[1]):
            gated = gemma.model(tokens)
        with lens.plane_hooks([GLOBAL]) as names:
            def zero(planes, hook):
                planes[:, 1, :3] = 0.0
                return planes

            with gemma.model.hooks(fwd_hooks=[(names[GLOBAL], zero)]):
                edited = gemma.model(tokens)
        plain = gemma.model(tokens)
    assert float((gated - plain).abs().max()) > 1e-3  # the gate changes the output
    torch.testing.assert_close(edited, gated, atol=2e-4, rtol=0)  # and the plane edit is the same edit


def test_the_demo_scores_the_llm(gemma, capsys) -> None:
    from psheads import cli

    assert cli.main(["demo", "--prompts", "4", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert "== Gemma 3 270M" in out
    rows = [line.split() for line in out.splitlines() if line.split()[1:2] in (["local"], ["global"])]
    assert [int(row[0]) for row in rows] == list(range(18))
    assert [row[1] for row in rows].count("global") == 3


def test_the_analysis_example_runs(gemma, tmp_path) -> None:
    """examples/gemma_3_270m.py end to end in its quick mode (the documented numbers come from
    its full run)."""
    import runpy
    from pathlib import Path

    namespace = runpy.run_path(str(Path(__file__).resolve().parents[1] / "examples" / "gemma_3_270m.py"))
    namespace["main"](tmp_path, quick=True)
    written = {path.name for path in tmp_path.iterdir()}
    assert {"gemma_scores.csv", "gemma_summary.csv", "gemma_correlation.csv"} <= written


def test_the_command_line_scores_the_llm_on_an_llm_task(gemma, capsys) -> None:
    from psheads import cli

    assert cli.main(["score", "gemma-3-270m", "--task", "llm-letter", "--n", "2", "--quiet"]) == 0
    out = capsys.readouterr().out
    assert out.count("\n") >= 18 * 4 and "positional" in out


def test_llm_tasks_evaluate_on_the_real_model(gemma) -> None:
    frame = psheads.evaluate(gemma.model, "llm-letter", n=8, seed=0, windows=[12])
    row = frame[frame["hops"] == "all"].iloc[0]
    assert row["n"] == 8 and 0 <= row["accuracy"] <= 1 and row["chance"] == pytest.approx(1 / 24)
