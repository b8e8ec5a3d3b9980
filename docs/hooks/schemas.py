"""MkDocs hook: the frame-schema tables of the API page, written from ``psheads.results.schema`` at build time.

A line ``<!-- schema: NAME -->`` in a page becomes the table of ``psheads.results.schema.NAME`` (column,
dtype, meaning), so the docs never drift from the code. ``SCORES`` is drawn with the registered score
methods' own columns in place of its placeholder, as each method describes them
(``psheads.measure.methods.frame_schema``).
"""

from __future__ import annotations

import re

from psheads.measure import methods
from psheads.results import schema

MARKER = re.compile(r"^<!-- schema: (?P<name>[A-Z_]+) -->$", re.MULTILINE)


def table(name: str) -> str:
    """``psheads.results.schema.<name>`` as a Markdown table."""
    frame = methods.frame_schema() if name == "SCORES" else getattr(schema, name)
    if not isinstance(frame, schema.FrameSchema):
        raise ValueError(f"psheads.results.schema.{name} is not a FrameSchema")
    rows = [f"| `{c.name}` | {c.dtype} | {c.meaning} |" for c in frame.describe().itertuples()]
    return "\n".join(["| column | dtype | meaning |", "|---|---|---|", *rows])


def on_page_markdown(markdown: str, **_: object) -> str:
    """Every schema marker of the page replaced by its table."""
    return MARKER.sub(lambda match: table(match["name"]), markdown)
