"""The rules as a whole (psheads.reproduction.rules): every rule against its positive and negative
control, one rule per claim, and the docs' table of the rules as they stand."""

from __future__ import annotations

import pytest

from psheads.reproduction import report, rules
from psheads.reproduction.references import NOT_TESTED, PUBLISHED, Published
from psheads.reproduction.rules import learning


@pytest.mark.parametrize("key", sorted(rules.RULES))
def test_every_rule_passes_its_positive_control_and_fails_its_negative(key: str) -> None:
    rule = rules.RULES[key]
    positive, negative = rule.controls()
    if rule.positive is None:
        assert positive is None and rule.no_positive
    else:
        assert positive.verdict == "reproduces", (key, positive)
    assert negative.verdict != "reproduces", (key, negative)
    assert rule.fixed and rule.tolerance and rule.text.endswith(".")


def test_every_claim_has_one_rule_and_the_untested_ones_say_why() -> None:
    assert set(rules.RULES) == set(PUBLISHED)
    assert not set(NOT_TESTED) & set(PUBLISHED)
    assert all(len(why) > 40 for _, why in NOT_TESTED.values())
    with pytest.raises(ValueError, match="unknown claim"):
        rules.Rule("nope", "t.", "t", "t", learning.entropy_grade, None, rules.Control("c", (1.0, [1.0])), "why")
    with pytest.raises(ValueError, match="say why"):
        rules.Rule("entropy_at_init", "t.", "t", "t", learning.entropy_grade, None, rules.Control("c", (1.0, [1.0])))


def test_a_claim_whose_source_was_not_found_gets_no_verdict() -> None:
    """Paper A's gemma-2-2b-it values are only quoted by a secondary summary: the rule still runs, its
    outcome is context, and the claim is 'unverified'."""
    claim = report.graded("llm_early_late", "m", (-0.5, -0.1))
    assert claim.verdict == "unverified" and "the rule gives reproduces" in claim.reason
    assert "unverified: source not found" in claim.published.locator
    other = report.graded("figure_5a", "m", {"number": 2.0, "letter": 42.0}, comparable="a different model")
    assert other.verdict == "not comparable" and "a different model" in other.reason
    assert "positive (table 1's layer 2): reproduces" in other.controls
    assert PUBLISHED["margins"].locator.startswith("psheads' prediction")


def test_published_sources_name_a_place() -> None:
    assert all(isinstance(p, Published) and p.source for p in PUBLISHED.values())
    assert {key for key, p in PUBLISHED.items() if not p.found} == {
        "index_fast", "retrieval_slow", "induction_both", "llm_early_late", "llm_correlation"}


def test_the_docs_list_every_rule_as_it_stands() -> None:
    import runpy
    from pathlib import Path

    root = Path(__file__).resolve().parents[3]
    writer = runpy.run_path(str(root / "scripts" / "docs_rules.py"))
    text = (root / "docs" / "reproduce.md").read_text(encoding="utf-8")
    assert writer["with_rules"](text) == text, "docs/reproduce.md lists stale rules: run python scripts/docs_rules.py"
    assert text.count("**reproduces**") >= len([r for r in rules.RULES.values() if r.positive is not None])


def test_every_rule_names_the_commits_that_fixed_it() -> None:
    """'Before the first report (2026-07)' predated the repository: a rule's history names commits, each
    in the repository's history, and no internal issue number or date."""
    import re
    import subprocess
    from pathlib import Path

    entry = re.compile(r"(commit [0-9a-f]{7}|this change)(: .+)?")  # 'this change' until the next commit names it
    commits = set()
    for key, rule in rules.RULES.items():
        assert "issue" not in rule.fixed.lower() and not re.search(r"20\d\d-\d\d", rule.fixed), key
        for part in re.split(r"; (?=commit |this change)", rule.fixed):
            assert entry.fullmatch(part), (key, part)
            if part.startswith("commit "):
                commits.add(part.split()[1].rstrip(":"))
    assert "do not pre-register" not in rules.PRE_REGISTRATION and "No threshold was pre-registered" in \
        rules.PRE_REGISTRATION
    root = Path(__file__).resolve().parents[3]
    try:
        known = subprocess.run(["git", "cat-file", "--batch-check"], input="\n".join(sorted(commits)), cwd=root,
                               capture_output=True, text=True, timeout=30, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        pytest.skip("not a git checkout")
    assert "missing" not in known, known


def test_the_report_records_the_rules_commit() -> None:
    info = report.context(report.ReportConfig())
    assert info["rules"]["pre-registration"] == rules.PRE_REGISTRATION
    assert info["rules"]["commit"]
