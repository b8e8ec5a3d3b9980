"""Write the table of the reproduction report's rules and their controls into docs/reproduce.md.

Run after changing a rule (tests/reproduction/rules/test_registry.py fails until the docs match):

    python scripts/docs_rules.py
"""

from __future__ import annotations

from pathlib import Path

from psheads.reproduction.rules import rules_markdown

DOCS = Path(__file__).resolve().parents[1] / "docs" / "reproduce.md"
BEGIN, END = "<!-- rules: begin (scripts/docs_rules.py) -->", "<!-- rules: end -->"


def with_rules(text: str) -> str:
    """``text`` with the block between the markers replaced by the current rules."""
    head, rest = text.split(BEGIN, 1)
    _, tail = rest.split(END, 1)
    return f"{head}{BEGIN}\n{rules_markdown()}{END}{tail}"


if __name__ == "__main__":
    DOCS.write_text(with_rules(DOCS.read_text(encoding="utf-8")), encoding="utf-8")
    print(f"wrote the rules into {DOCS}")
