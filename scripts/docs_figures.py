"""Draw the documentation's figures from the shipped models and tables (no training).

Two kinds of output:

- ``docs/figures/<name>.svg``, every figure of the Figures page (``docs/figures.md``). The page's
  own Python blocks run in order in one namespace (from the repository root); a block that
  assigns ``figure`` is followed by an image ``![…](figures/<name>.svg)``, and that file is
  written: the SVG that plotly.js exports in headless Chromium (``tests/browser.py``), so the
  code on the page is the code that drew its pictures.
- Interactive figures in ``docs/data`` for the Length generalization and Frequencies and
  causality pages, drawn from the tables shipped in ``psheads.data``, which all load one shared
  ``docs/data/plotly.min.js`` (no CDN, works offline):
  ``lengthgen_curves.html`` (accuracy against length per hop count, one panel per model),
  ``lengthgen_discrepancy.html`` (the normalised worst-case margin of the answer's key against
  length, number model layers 1–4 and letter model layer 0), ``causal_tests.html`` (accuracy
  per hop count under each intervention) and ``gating_sweep.html`` (gated models, task × band).

    python scripts/docs_figures.py            # both
    python scripts/docs_figures.py --no-svg   # the HTML figures only (no Chromium needed)
"""

from __future__ import annotations

import argparse
import html
import os
import re
import sys
import tempfile
from pathlib import Path
from typing import Any
from urllib.parse import unquote

import pandas as pd

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
# Before psheads: transformer_lens imports pytest, and the test package turns its shape checks on when pytest
# is imported, which works only before psheads is.
from tests.browser import render  # isort: split

import psheads
from psheads import data as stored
from psheads.models.zoo import PRETRAINED_DIR

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "docs" / "figures.md"
HEADS = {"number": [1, 2, 3, 4], "letter": [0]}
"""Layers drawn in the discrepancy figure: the number model's positional layers, the letter model's 1-hop layer."""
SIZE = (760, 480)
"""Width and height (pixels) of an exported SVG unless the figure's layout sets them."""
_BLOCKS = re.compile(r"```python\n(?P<code>.*?)```|!\[[^\]]*\]\(figures/(?P<name>[\w-]+)\.svg\)", re.DOTALL)
_EXPORT = """Plotly.toImage(document.getElementById('{plot_id}'), {format: 'svg', width: WIDTH, height: HEIGHT})
  .then(function (url) { var out = document.createElement('pre'); out.id = 'psheads-svg'; out.textContent = url;
                         document.body.appendChild(out); });"""


def page_figures(page: Path = PAGE) -> dict[str, Any]:
    """Run the page's Python blocks in order (from the repository root); return ``{image name: figure}``."""
    namespace: dict[str, Any] = {"__name__": "docs_figures_page"}
    figures: dict[str, Any] = {}
    pending = None
    here = Path.cwd()
    os.chdir(ROOT)
    try:
        for match in _BLOCKS.finditer(page.read_text(encoding="utf-8")):
            if match["code"] is not None:
                before = namespace.get("figure")
                exec(compile(match["code"], f"{page.name} block", "exec"), namespace)  # our own page's code
                pending = namespace.get("figure") if namespace.get("figure") is not before else pending
                continue
            if pending is None:
                raise ValueError(f"{page.name}: the image figures/{match['name']}.svg follows no block that "
                                 "assigns a new `figure`.")
            figures[match["name"]], pending = pending, None
    finally:
        os.chdir(here)
    return figures


def export_svg(figure: Any, path: Path) -> Path:
    """Write ``figure`` as the SVG plotly.js exports in headless Chromium."""

    width, height = figure.layout.width or SIZE[0], figure.layout.height or SIZE[1]
    script = _EXPORT.replace("WIDTH", str(width)).replace("HEIGHT", str(height))
    with tempfile.TemporaryDirectory() as folder:
        page = Path(folder) / "figure.html"
        figure.write_html(page, include_plotlyjs=True, post_script=script)
        result = render(page, size=(width, height))
    found = re.search(r'<pre id="psheads-svg">(.*?)</pre>', result.dom, re.DOTALL)
    if result.errors or not found:
        raise RuntimeError(f"plotly.js could not export {path.name}: {result.errors or 'no SVG came back'}.")
    url = html.unescape(found.group(1))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(unquote(url.split(",", 1)[1]), encoding="utf-8")
    return path


def interactive(data: Path) -> None:
    """The HTML figures of the other pages, with plotly.js from ``data/plotly.min.js``."""
    curves = pd.concat([pd.read_csv(PRETRAINED_DIR / name / "length_generalization.csv", dtype={"hops": str})
                        .assign(model=name) for name in ("number", "letter")], ignore_index=True)
    figure = psheads.plotting.accuracy_vs_length(curves)
    figure.update_layout(title="Shipped models on lengthened prompts (argmax over the answer vocabulary)")
    figure.write_html(data / "lengthgen_curves.html", include_plotlyjs="directory")

    margins = stored.table("lengthgen_discrepancy")
    chosen = pd.concat([margins[(margins["model"] == name) & margins["layer"].isin(layers)]
                        for name, layers in HEADS.items()])
    figure = psheads.plotting.discrepancy_vs_length(chosen)
    figure.update_xaxes(type="log")
    figure.update_layout(title="Worst-case margin of the answer's key, 1-hop prompts (64 per length)",
                         legend_title="model, head")
    figure.write_html(data / "lengthgen_discrepancy.html", include_plotlyjs="directory")

    causal = stored.table("causal_tests", dtype={"hops": str})
    psheads.plotting.accuracy_under_ablation(causal).write_html(data / "causal_tests.html",
                                                                include_plotlyjs="directory")
    sweep = stored.table("gating_sweep")
    psheads.plotting.accuracy_by_band(sweep).write_html(data / "gating_sweep.html", include_plotlyjs="directory")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", type=Path, default=ROOT / "docs" / "data",
                        help="where the interactive figures go (it must hold plotly.min.js)")
    parser.add_argument("--figures", type=Path, default=ROOT / "docs" / "figures",
                        help="where the Figures page's SVGs go")
    parser.add_argument("--no-svg", action="store_true", help="skip the Figures page (needs headless Chromium)")
    args = parser.parse_args(argv)
    interactive(args.data)
    if not args.no_svg:
        for name, figure in page_figures().items():
            export_svg(figure, args.figures / f"{name}.svg")


if __name__ == "__main__":
    main()
