"""Every figure draws in a real browser: the Figures page's own code, loaded in headless Chromium."""

from __future__ import annotations

import inspect
import runpy
import struct
import zlib
from pathlib import Path

import numpy as np
import plotly.graph_objects as go
import pytest

from psheads import plotting
from tests import browser

ROOT = Path(__file__).resolve().parents[2]
PAGE = ROOT / "docs" / "figures.md"
FUNCTIONS = [name for name in plotting.__all__
             if callable(getattr(plotting, name))
             and inspect.signature(getattr(plotting, name)).return_annotation == "go.Figure"]


@pytest.fixture(scope="module")
def page_figures() -> dict[str, go.Figure]:
    """The figures of docs/figures.md, made by running its Python blocks (shipped models and tables)."""
    return runpy.run_path(str(ROOT / "scripts" / "docs_figures.py"))["page_figures"](PAGE)


def test_the_figures_page_runs_every_figure_function_with_the_template(page_figures) -> None:
    assert len(FUNCTIONS) == 22
    text = PAGE.read_text(encoding="utf-8")
    assert [name for name in FUNCTIONS if f"plotting.{name}(" not in text] == []
    assert len(page_figures) >= len(FUNCTIONS)
    for name, figure in page_figures.items():
        assert figure.layout.template.layout.font == plotting.TEMPLATE.layout.font, name
        assert (PAGE.parent / "figures" / f"{name}.svg").is_file(), f"run scripts/docs_figures.py for {name}"


def test_every_figure_draws_in_chromium(page_figures, tmp_path: Path) -> None:
    browser.require_chromium()
    names = list(page_figures)
    page = browser.write_page(page_figures, tmp_path / "figures.html")
    result = browser.check_page(page, names)
    assert result.plots >= len(names) and result.traces >= len(names)


def test_the_browser_check_catches_errors_and_undrawn_figures(tmp_path: Path) -> None:
    browser.require_chromium()
    page = tmp_path / "broken.html"
    page.write_text("<html><head></head><body><script>undefinedFunction();</script></body></html>")
    result = browser.render(page, screenshot=tmp_path / "broken.png")
    assert len(result.errors) == 1 and "undefinedFunction" in result.errors[0]
    assert result.plots == 0 and browser.pixel_spread(result.screenshot) == 0.0  # a white page
    assert not page.with_name(".broken.render.html").exists()  # the probe copy is gone
    with pytest.raises(AssertionError, match="plotly drew no trace"):
        browser.check_figure(go.Figure(), tmp_path, "empty")
    drawn = browser.check_figure(go.Figure(go.Scatter(x=[0, 1], y=[1, 0])), tmp_path, "line")
    assert drawn.errors == [] and drawn.traces == 1 and browser.pixel_spread(drawn.screenshot) > 5


def _png(pixels: np.ndarray, filters: list[int]) -> bytes:
    """Encode ``pixels`` [h, w, c] as a PNG, row y with filter ``filters[y % len(filters)]``."""
    height, width, channels = pixels.shape
    image = pixels.astype(np.int64).reshape(height, width * channels)
    zero = np.zeros(channels, dtype=np.int64)
    rows = []
    for y in range(height):
        kind, line = filters[y % len(filters)], image[y]
        up = image[y - 1] if y else np.zeros_like(line)
        left, corner = np.concatenate([zero, line[:-channels]]), np.concatenate([zero, up[:-channels]])
        estimate = left + up - corner
        far_left, far_up, far_corner = abs(estimate - left), abs(estimate - up), abs(estimate - corner)
        paeth = np.where((far_left <= far_up) & (far_left <= far_corner), left, np.where(far_up <= far_corner, up,
                                                                                          corner))
        predictor = [0 * line, left, up, (left + up) // 2, paeth][kind]
        rows.append(bytes([kind]) + ((line - predictor) % 256).astype(np.uint8).tobytes())

    def chunk(kind: bytes, body: bytes) -> bytes:
        return struct.pack(">I", len(body)) + kind + body + struct.pack(">I", zlib.crc32(kind + body))

    header = struct.pack(">IIBBBBB", width, height, 8, {3: 2, 4: 6}[channels], 0, 0, 0)
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + chunk(b"IDAT", zlib.compress(b"".join(rows)))
            + chunk(b"IEND", b""))


@pytest.mark.parametrize("channels", [3, 4])
def test_the_png_decoder_undoes_every_filter(tmp_path: Path, channels: int) -> None:
    pixels = np.random.default_rng(0).integers(0, 256, size=(10, 7, channels), dtype=np.uint8)
    path = tmp_path / "image.png"
    path.write_bytes(_png(pixels, [0, 1, 2, 3, 4]))
    np.testing.assert_array_equal(browser.png_pixels(path), pixels)
    path.write_bytes(_png(np.full((6, 5, channels), 200, dtype=np.uint8), [4, 1]))
    assert browser.pixel_spread(path) == 0.0


def test_no_chromium_skips_unless_ci(monkeypatch) -> None:
    monkeypatch.setenv("PSHEADS_CHROMIUM", "/nonexistent/chromium")
    monkeypatch.delenv("CI", raising=False)
    assert browser.chromium() is None
    with pytest.raises(pytest.skip.Exception, match="not installed"):
        browser.require_chromium()
    monkeypatch.setenv("CI", "1")
    with pytest.raises(pytest.fail.Exception, match="CI is set"):
        browser.require_chromium()
