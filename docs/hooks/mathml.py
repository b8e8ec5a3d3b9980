"""MkDocs hook: render the maths to MathML at build time, so the site needs no script or network.

``pymdownx.arithmatex`` (generic mode) keeps each formula's TeX intact through Markdown as
``<span class="arithmatex">\\(...\\)</span>`` or ``<div class="arithmatex">\\[...\\]</div>``; this
hook replaces each with the MathML that ``latex2mathml`` writes. Browsers render MathML natively.
"""

from __future__ import annotations

import html
import re

from latex2mathml.converter import convert

ARITHMATEX = re.compile(
    r'<(?P<tag>span|div) class="arithmatex">\\(?P<open>[(\[])(?P<tex>.*?)\\[)\]]</(?P=tag)>', re.DOTALL
)
TEXT = re.compile(r"\\text\{([^{}]*)\}")


def _mathml(match: re.Match) -> str:
    # \text{...} is literal text: latex2mathml would keep the backslash of an escaped \_
    tex = TEXT.sub(lambda text: r"\text{" + text[1].replace(r"\_", "_") + "}", html.unescape(match["tex"]))
    return convert(tex.strip(), display="block" if match["open"] == "[" else "inline")


def on_page_content(content: str, **_: object) -> str:
    """Every arithmatex formula of the page as MathML."""
    return ARITHMATEX.sub(_mathml, content)
