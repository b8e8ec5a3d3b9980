"""The reproduction report (psheads.report): rules on hand-built tables, the whole report on the
shipped models and stored tables, and what it says when tables are missing."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest

import psheads
from psheads.reproduction import report
from psheads.reproduction.references import NOT_TESTED, PUBLISHED

# numerically sensitive: every test runs at 1 and 2 torch threads (see conftest.torch_threads)
pytestmark = pytest.mark.usefixtures("torch_threads")

SMALL = {"prompts": 32, "check_prompts": 32, "theory_prompts": 32, "check_lengths": (17, 65)}


def test_config_validates(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="prompts"):
        report.ReportConfig(prompts=0)
    with pytest.raises(TypeError, match="ReportConfig"):
        report.reproduce({"prompts": 3})
    assert report.ReportConfig(data=str(tmp_path)).data_folder == tmp_path


@pytest.fixture(scope="module")
def built(torch_threads) -> report.Report:
    return report.reproduce(**SMALL)


def test_report_measures_every_claim(built: report.Report) -> None:
    summary = built.summary()
    assert set(summary["verdict"]) <= set(report.VERDICT_COLORS)
    assert [s.key for s in built.sections] == ["learning", "frequency", "length", "recipe", "theory", "canonical",
                                               "llm", "seeds", "predictions", "not-tested"]
    quoted = [c.published.claim for s in built.sections if s.key not in ("recipe", "not-tested") for c in s.claims]
    assert sorted(quoted) == sorted(p.claim for p in PUBLISHED.values())  # every published result, once
    untested = next(s for s in built.sections if s.key == "not-tested").claims
    assert {c.verdict for c in untested} == {"not tested"} and len(untested) == len(NOT_TESTED)
    graded = summary[~summary["verdict"].isin(["not tested"])]
    assert (graded["rule fixed"] != "—").all() and graded["controls"].str.contains("negative").all()
    # the recipe section measures the length and placement claims again on psheads' own recipe
    again = [c for s in built.sections if s.key == "recipe" for c in s.claims]
    assert {c.published.claim for c in again} == {PUBLISHED[key].claim for key in (
        "letter_length", "number_length", "letter_beyond_number",
        "number_positional_l0_l3", "number_symbolic_l4_l11", "letter_symbolic_1_11")}
    assert all(c.measured.startswith("psheads' recipe") for c in again)
    assert len(summary) == len(PUBLISHED) + len(again) + len(NOT_TESTED)
    assert (summary["verdict"] != "not measured").all()  # the repository holds every stored table
    verdicts = summary.set_index("claim")["verdict"]
    for key in ("index_fast", "retrieval_slow", "induction_both", "llm_early_late", "llm_correlation"):
        assert verdicts[PUBLISHED[key].claim] == "unverified"  # paper A's source was not found


def test_report_numbers_come_from_the_shipped_tables(built: report.Report) -> None:
    """The learning claims quote the first step each hop count reaches 90%, straight from the shipped
    dynamics table; the frequency table matches frequency_profile on the same prompts."""
    dynamics = psheads.load_pretrained("number").dynamics.drop_duplicates("step").sort_values("step")
    steps = [int(dynamics.loc[dynamics[f"accuracy_{h}"] >= 0.9, "step"].min()) for h in (1, 2, 3, 4)]
    claim = next(c for s in built.sections for c in s.claims if c.published is PUBLISHED["number_hop_by_hop"])
    assert " / ".join(map(str, steps)) in claim.measured
    frequency = dict(next(s for s in built.sections if s.key == "frequency").tables)["Frequency ID per layer"]
    assert len(frequency) == 24 and frequency["paper B table 1"].tolist() == (
        PUBLISHED["frequency_id_number"].value + PUBLISHED["frequency_id_letter"].value)
    from psheads.tasks import checked_batch

    shipped = psheads.load_pretrained("letter")
    tokens = checked_batch(shipped.task, SMALL["prompts"], seed=0).tokens
    ids = psheads.frequency_profile(shipped.model, tokens, weighting="softmax", scale=False).heads
    mine = frequency[frequency["task"] == "letter"]["softmax ID (paper B's definition)"].to_numpy()
    assert mine == pytest.approx(ids["mean_frequency_id"].to_numpy())


def test_html_is_self_contained(built: report.Report, tmp_path: Path) -> None:
    path = built.write(tmp_path / "report.html")
    text = path.read_text()
    assert not re.search(r"<script[^>]+src=", text) and not re.search(r"<link[^>]+href=", text)
    figures = sum(len(s.figures) for s in built.sections)
    assert figures >= 8 and text.count("Plotly.newPlot") == figures
    assert psheads.__version__ in text and "torch" in text and "cpus" in text  # versions and machine
    assert text.count('class="verdict"') >= 2 * len(PUBLISHED)  # summary + sections
    assert "the rule's controls" in text and "positive (figure 7: number model" in text
    with pytest.raises(ValueError, match="does not exist"):
        built.write(tmp_path / "missing" / "report.html")


def test_missing_tables_are_not_measured(tmp_path: Path) -> None:
    empty = report.reproduce(data=tmp_path, **SMALL)
    summary = empty.summary().set_index("claim")
    for key in ("index_fast", "retrieval_slow", "induction_both", "llm_early_late", "llm_correlation", "margins"):
        assert summary.loc[PUBLISHED[key].claim, "verdict"] == "not measured"
    notes = " ".join(note for s in empty.sections for note in s.notes)
    assert "gating_sweep.csv not found" in notes and "Fewer than two seeds" in notes


def test_retrained_runs_replace_the_shipped_models(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """--full: the report reads freshly trained runs (a tiny recipe here; the default is paper B's)."""
    tiny = psheads.TrainConfig(steps=4, batch_size=8, warmup_steps=1, checkpoint_every=2, eval_prompts=16,
                               dynamics_prompts=8, model={"n_layer": 2, "n_embd": 32, "n_head": 1, "rotary_dim": 32})
    run = report.retrained(tmp_path, "number", False, recipe=tiny)
    assert run.info["step"] == 4 and list(run.evaluation.columns) == ["hops", "accuracy", "n"]
    assert sorted(run.dynamics["step"].unique()) == [2, 4] and run.length_generalization is None
    monkeypatch.setattr(report.inputs, "retrained", lambda folder, task, progress: run)
    runs = report.load_runs(report.ReportConfig(retrain=tmp_path, data=tmp_path))
    assert [r.shipped for r in runs] == [run, run]


def test_report_draws_in_chromium(built: report.Report, tmp_path: Path) -> None:
    """The page in a real browser: no JavaScript error, every figure drawn, a screenshot that is not blank."""
    from tests import browser

    browser.require_chromium()
    path = built.write(tmp_path / "reproduction_report.html")
    result = browser.render(path, screenshot=tmp_path / "reproduction_report.png", size=(1200, 3000), budget_ms=20000)
    assert result.errors == []
    figures = sum(len(s.figures) for s in built.sections)
    assert result.plots >= figures and result.traces >= figures
    assert browser.pixel_spread(result.screenshot) > 5
    browser.keep_artifact(result.screenshot)


def _recipe_cell(folder: Path, stem: str, curve: dict[int, float] | None) -> None:
    """A copy of a stored cell of scripts/train_paper_b.py with its length curve replaced (None: a
    cell still running, without its length table)."""
    stored = report.ReportConfig().data_folder / report.RECIPE_FOLDER
    for suffix in ("_run.json", "_dynamics.csv"):
        (folder / f"{stem}{suffix}").write_text((stored / f"{stem}{suffix}").read_text())
    if curve is not None:
        rows = [{"length": length, "hops": "all", "accuracy": accuracy, "n": 128, "checkpoint": checkpoint, "step": 1}
                for checkpoint in ("best", "final") for length, accuracy in curve.items()]
        pd.DataFrame(rows).to_csv(folder / f"{stem}_lengthgen.csv", index=False)


def test_the_recipe_section_reads_finished_cells_and_rates_psheads_recipe(tmp_path: Path) -> None:
    folder = tmp_path / report.RECIPE_FOLDER
    folder.mkdir()
    _recipe_cell(folder, "letter_paper-b_seed0", {17: 1.0, 200: 1.0, 850: 0.95, 1000: 0.5})
    _recipe_cell(folder, "letter_psheads-sampling_seed0", {17: 1.0, 200: 0.95, 850: 0.3, 1000: 0.2})
    _recipe_cell(folder, "number_paper-b_seed0", {17: 1.0, 200: 0.64, 1000: 0.2})
    _recipe_cell(folder, "letter_gelu-new_seed0", None)  # not finished: not read
    section = report.recipe_section([], report.ReportConfig(data=tmp_path))
    cells = dict(section.tables)[next(iter(dict(section.tables)))]
    assert sorted(cells["variant"]) == ["paper-b", "paper-b", "psheads-sampling"]
    assert cells.set_index("variant").loc["psheads-sampling", "≥ 90% up to (best)"] == 200
    notes = " ".join(section.notes)
    assert "-0.65 (psheads-sampling)" in notes and "Beyond the whole recipe's spread over its 1 seeds (0.00): " \
        "psheads-sampling" in notes
    # the claims rate psheads' own recipe (the -psheads models): its letter model stays ready to 145 tokens
    claims = {c.published.claim: c for c in section.claims}
    assert all(c.measured.startswith("psheads' recipe") for c in claims.values())
    assert "letter: ≥ 90% up to 145 tokens" in claims[PUBLISHED["letter_length"].claim].measured
    assert claims[PUBLISHED["letter_length"].claim].verdict == "does not reproduce"
    assert claims[PUBLISHED["letter_symbolic_1_11"].claim].verdict == "does not reproduce"  # layers 0–3/0–4 only
    empty = report.recipe_section([], report.ReportConfig(data=tmp_path / "none"))
    assert "No finished cell" in empty.notes[0] and len(empty.claims) == len(section.claims)


def test_the_tally_says_whose_claim_failed() -> None:
    """The summary counted every 'does not reproduce' together, though most re-graded psheads' own recipe
    or its prediction; the tally is per source, and a check that cannot fail is counted apart."""
    from dataclasses import replace

    paper_b = report.graded("letter_length", "m", pd.DataFrame({"length": [17, 145], "hops": "all",
                                                                "accuracy": [1.0, 0.3]}))
    ours = replace(paper_b, psheads_recipe=True)
    prediction = report.graded("margins", "m", (0.0, 1.0))
    paper_a = report.graded("llm_early_late", "m", (-0.5, -0.1))
    init = report.graded("entropy_at_init", "m", (1.0, [1.0, 1.0]))
    built = report.Report([report.Section("s", "S", "i", [paper_b, ours, prediction, paper_a, init])],
                          {"date (UTC)": "x", "timings (s)": {"total": 1.0}})
    assert [c.source for c in built.sections[0].claims] == ["paper B", "psheads' recipe", "psheads' prediction",
                                                           "paper A", "paper B"]
    tally = built.tally()
    assert list(tally.index) == ["paper B", "paper A", "psheads' recipe", "psheads' prediction"]
    assert tally.loc["paper B", "does not reproduce"] == 1 and tally.loc["paper B", "reproduces"] == 0
    assert tally.loc["paper B", "checks that cannot fail"] == 1 and init.cannot_fail and not paper_b.cannot_fail
    assert tally.loc["psheads' recipe", "does not reproduce"] == 1
    assert tally.loc["psheads' prediction", "does not reproduce"] == 1
    assert tally.loc["paper A", "unverified"] == 1
    assert "A check that cannot fail" in init.reason
    page = report.render_html(built)
    assert "checks that cannot fail" in page and "psheads&#x27; recipe" in page


def test_depends_on_the_seed_comes_from_the_per_seed_verdicts() -> None:
    """'Depends on the seed' was said of every 'partly', though it held identically in every seed."""
    from psheads.reproduction.report import seeds

    assert seeds.seed_agreement({"seed 0": "partly", "seed 1": "partly"}) == "the same in every seed (2): partly"
    assert seeds.seed_agreement({"seed 0": "partly", "seed 1": "reproduces"}).startswith("depends on the seed")
    assert seeds.seed_agreement({}) == "no seed measured"
