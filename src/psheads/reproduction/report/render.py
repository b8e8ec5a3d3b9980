"""The report as a page: the ``Report`` (its sections and the context it ran in), its summary table
and its one self-contained HTML file (plotly.js inline, no network)."""

from __future__ import annotations

import html
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from psheads.interface.atomic import write_atomic
from psheads.interface.version import __version__
from psheads.reproduction.references import PAPER_A, PAPER_B
from psheads.reproduction.report.claims import SOURCES, Claim, Section
from psheads.reproduction.rules import VERDICT_COLORS


@dataclass
class Report:
    """The whole report: sections in order and the context it ran in."""

    sections: list[Section]
    context: dict[str, Any]

    def summary(self) -> pd.DataFrame:
        """One row per claim: ``section, paper, source, whose claim, claim, measured, verdict, cannot fail,
        rule fixed, controls`` (``whose claim``: one of ``claims.SOURCES``; ``cannot fail``: the check
        cannot fail on what it is given)."""
        columns = ["section", "paper", "source", "whose claim", "claim", "measured", "verdict", "cannot fail",
                   "rule fixed", "controls"]
        rows = [{"section": s.title, "paper": c.published.paper.key, "source": c.published.locator,
                 "whose claim": c.source, "claim": c.published.claim, "measured": c.measured, "verdict": c.verdict,
                 "cannot fail": c.cannot_fail, "rule fixed": c.rule.fixed if c.rule is not None else "—",
                 "controls": c.controls}
                for s in self.sections for c in s.claims]
        return pd.DataFrame(rows, columns=columns)

    def tally(self) -> pd.DataFrame:
        """The verdicts counted per source (rows: ``claims.SOURCES``; columns: every verdict), checks
        that cannot fail left out of the counts and counted in a column of their own."""
        summary = self.summary()
        can_fail = summary[~summary["cannot fail"]]
        counts = pd.crosstab(can_fail["whose claim"], can_fail["verdict"])
        counts = counts.reindex(index=list(SOURCES), columns=list(VERDICT_COLORS), fill_value=0)
        counts["checks that cannot fail"] = summary[summary["cannot fail"]]["whose claim"].value_counts() \
            .reindex(list(SOURCES), fill_value=0)
        return counts.rename_axis(index="whose claim", columns=None).astype(int)

    def to_html(self) -> str:
        """The report as one self-contained HTML page (plotly.js inline; opens offline)."""
        return render_html(self)

    def write(self, path: str | Path) -> Path:
        """Write ``to_html()`` to ``path`` whole (its folder must exist); returns the path."""
        path = Path(path)
        if not path.parent.is_dir():
            raise ValueError(f"Cannot write {path}: the folder {path.parent} does not exist; create it first.")
        return write_atomic(path, self.to_html())


_CSS = """
body{font-family:system-ui,-apple-system,Segoe UI,Helvetica,Arial,sans-serif;max-width:1100px;margin:2em auto;
padding:0 1em;color:#1f2328;line-height:1.5}
h1{font-size:1.8em}h2{border-bottom:1px solid #d0d7de;padding-bottom:.2em;margin-top:2em}
table{border-collapse:collapse;margin:1em 0;font-size:.88em;display:block;overflow-x:auto}
th,td{border:1px solid #d0d7de;padding:.3em .6em;text-align:left;vertical-align:top}
th{background:#f6f8fa}.verdict{color:#fff;border-radius:1em;padding:.1em .6em;white-space:nowrap;font-weight:600}
.note{color:#57606a}.figure{margin:1em 0}pre{background:#f6f8fa;padding:1em;overflow-x:auto}
"""


def _badge(verdict: str) -> str:
    return f'<span class="verdict" style="background:{VERDICT_COLORS[verdict]}">{html.escape(verdict)}</span>'


def _table(frame: pd.DataFrame) -> str:
    return frame.to_html(index=False, float_format=lambda v: f"{v:.3f}", na_rep="—", border=0, escape=True)


def _claims_html(claims: list[Claim]) -> str:
    head = ("<tr><th>source</th><th>whose claim</th><th>claim</th><th>psheads measured</th><th>verdict</th>"
            "<th>why</th><th>the rule's controls</th></tr>")
    body = "".join(
        f"<tr><td>{html.escape(c.published.locator)}</td><td>{html.escape(c.source)}</td>"
        f"<td>{html.escape(c.published.claim)}</td><td>{html.escape(c.measured)}</td><td>{_badge(c.verdict)}</td>"
        f"<td>{html.escape(c.reason)}</td><td>{html.escape(c.controls)}</td></tr>" for c in claims)
    return f"<table>{head}{body}</table>"


def render_html(report: Report) -> str:
    """The report as one HTML page with plotly.js inline."""
    from plotly.offline import get_plotlyjs

    parts = [f"<h1>psheads {html.escape(__version__)}: reproduction report</h1>",
             f"<p>Generated {html.escape(report.context['date (UTC)'])} UTC in "
             f"{report.context['timings (s)']['total']:.0f} s. Papers: A — {html.escape(PAPER_A.citation())}; "
             f"B — {html.escape(PAPER_B.citation())}.</p>",
             "<h2 id='summary'>Summary</h2>"]
    if "rules" in report.context:
        parts.append(f"<p>Rules of commit {html.escape(report.context['rules']['commit'])}. "
                     f"{html.escape(report.context['rules']['pre-registration'])}</p>")
    summary = report.summary()
    tally = report.tally()
    head = "".join(f"<th>{_badge(v)}</th>" for v in VERDICT_COLORS) + "<th>checks that cannot fail</th>"
    body = "".join(f"<tr><td>{html.escape(str(source))}</td>" + "".join(f"<td>{int(n)}</td>" for n in row) + "</tr>"
                   for source, row in tally.iterrows())
    flagged = summary[summary["cannot fail"]]
    parts.append("<p>The verdicts per source: paper B's and paper A's claims on the recipe each paper used, paper "
                 "B's claims re-graded on psheads' own training recipe, and psheads' own prediction. A check that "
                 "cannot fail on what it is given is counted apart"
                 + (": " + "; ".join(html.escape(f"{row['source']} ({row['verdict']})")
                                     for _, row in flagged.iterrows()) if len(flagged) else "")
                 + f".</p><table><tr><th>whose claim</th>{head}</tr>{body}</table>")
    parts.append(_claims_html([c for s in report.sections for c in s.claims]))
    figure_index = 0
    for section in report.sections:
        parts.append(f"<h2 id='{section.key}'>{html.escape(section.title)}</h2><p>{html.escape(section.intro)}</p>")
        if section.claims:
            parts.append(_claims_html(section.claims))
        parts += [f"<p class='note'>{html.escape(note)}</p>" for note in section.notes]
        for caption, frame in section.tables:
            parts.append(f"<h3>{html.escape(caption)}</h3>{_table(frame)}")
        for caption, figure in section.figures:
            figure_index += 1
            div = figure.to_html(full_html=False, include_plotlyjs=False, div_id=f"figure-{figure_index}",
                                 config={"displaylogo": False, "responsive": True})
            parts.append(f"<div class='figure'><h3>{html.escape(caption)}</h3>{div}</div>")
    parts.append("<h2 id='context'>Configuration, versions and machine</h2>"
                 f"<pre>{html.escape(json.dumps(report.context, indent=2, default=str))}</pre>")
    return ("<!DOCTYPE html><html lang='en'><head><meta charset='utf-8'><title>psheads reproduction report</title>"
            f"<style>{_CSS}</style><script>{get_plotlyjs()}</script></head><body>{''.join(parts)}</body></html>")
