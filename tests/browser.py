"""Load HTML in headless Chromium: JavaScript errors, the dumped DOM and a screenshot.

``render(path)`` loads any HTML file and returns what the browser saw. ``write_page`` puts plotly
figures on one offline page (plotly.js inline once) and ``check_page`` renders it in one Chromium
run and asserts every figure drew; ``check_figure`` does both for one figure. Without
Chromium the tests that need it skip, except when the ``CI`` environment variable is set: then
they fail. ``PSHEADS_ARTIFACTS=folder`` keeps a copy of every screenshot there.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
import subprocess
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

CANDIDATES = ("chromium", "chromium-browser", "google-chrome", "google-chrome-stable")
"""Executable names tried, in order, on ``PATH`` (``PSHEADS_CHROMIUM`` overrides them)."""

FLAGS = ("--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars", "--mute-audio",
         "--no-first-run", "--disable-extensions")
ERRORS_ATTRIBUTE = "data-psheads-errors"
SECTION = "psheads-figure"
_HOOK = f"""<script>
(function () {{
  var errors = [];
  function record(message) {{
    errors.push(String(message));
    document.documentElement.setAttribute("{ERRORS_ATTRIBUTE}", JSON.stringify(errors));
  }}
  window.addEventListener("error", function (event) {{ record(event.message || event.type); }}, true);
  window.addEventListener("unhandledrejection", function (event) {{ record("unhandled rejection: " + event.reason); }});
  var consoleError = console.error;
  console.error = function () {{
    record(Array.prototype.join.call(arguments, " ")); consoleError.apply(console, arguments);
  }};
}})();
</script>"""
_TRACES = re.compile(r'class="(?:trace|hm|cbfills)\b')
_PLOTS = re.compile(r'class="main-svg"')


@dataclass(frozen=True)
class RenderResult:
    """What headless Chromium made of one page.

    Attributes:
        dom: the DOM after scripts ran (``--dump-dom``).
        errors: JavaScript errors, unhandled rejections and ``console.error`` messages, in order.
        screenshot: the PNG screenshot, or None when none was asked for.
    """

    dom: str
    errors: list[str]
    screenshot: Path | None

    @property
    def plots(self) -> int:
        """Plotly SVG layers in the page (each drawn figure has at least one)."""
        return len(_PLOTS.findall(self.dom))

    @property
    def traces(self) -> int:
        """Drawn plotly traces (scatter, bar and box groups, heatmap images)."""
        return len(_TRACES.findall(self.dom))


def chromium() -> str | None:
    """The Chromium executable, or None when there is none."""
    override = os.environ.get("PSHEADS_CHROMIUM")
    if override:
        return override if Path(override).is_file() else None
    return next((found for found in map(shutil.which, CANDIDATES) if found), None)


def require_chromium() -> str:
    """The Chromium executable; skip the calling test without one, or fail when ``CI`` is set."""
    import pytest

    found = chromium()
    if found is None:
        reason = f"headless Chromium is not installed (tried {', '.join(CANDIDATES)}; set PSHEADS_CHROMIUM)"
        if os.environ.get("CI"):
            pytest.fail(f"{reason}, and CI is set: the browser checks must run in CI.")
        pytest.skip(reason)
    return found


def render(html_path: str | Path, screenshot: str | Path | None = None, size: tuple[int, int] = (900, 600),
           budget_ms: int = 5000, timeout: float = 120.0) -> RenderResult:
    """Load ``html_path`` in headless Chromium and report what it saw.

    A copy of the page, with an error recorder injected before its first script, is loaded from
    the page's own folder (so relative links still resolve) and deleted afterwards.

    Args:
        html_path: the page.
        screenshot: where to write a PNG screenshot of the page (None: no screenshot).
        size: window width and height in CSS pixels.
        budget_ms: virtual time the page gets to run its scripts before the DOM is read.
        timeout: wall-clock seconds each Chromium run may take.
    """
    executable = chromium()
    if executable is None:
        raise FileNotFoundError("headless Chromium is not installed; install the chromium package or set "
                                "PSHEADS_CHROMIUM to its executable.")
    path = Path(html_path).resolve()
    html = path.read_text(encoding="utf-8")
    head = re.search(r"<head[^>]*>", html, flags=re.IGNORECASE)
    at = head.end() if head else 0
    probe = path.with_name(f".{path.stem}.render.html")
    probe.write_text(html[:at] + _HOOK + html[at:], encoding="utf-8")
    common = [executable, *FLAGS, f"--virtual-time-budget={budget_ms}", f"--window-size={size[0]},{size[1]}"]
    if screenshot is not None:
        screenshot = Path(screenshot).resolve()
        screenshot.parent.mkdir(parents=True, exist_ok=True)
        screenshot.unlink(missing_ok=True)
        common.append(f"--screenshot={screenshot}")
    try:
        dom = _run([*common, "--dump-dom", probe.as_uri()], timeout).stdout
    finally:
        probe.unlink(missing_ok=True)
    if screenshot is not None and not screenshot.is_file():
        raise RuntimeError(f"Chromium wrote no screenshot of {path}.")
    found = re.search(ERRORS_ATTRIBUTE + r"=\"([^\"]*)\"", dom)
    errors = json.loads(_unescape(found.group(1))) if found else []
    return RenderResult(dom=dom, errors=errors, screenshot=screenshot)


def _run(command: list[str], timeout: float) -> subprocess.CompletedProcess:
    result = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
    if result.returncode != 0:
        raise RuntimeError(f"Chromium failed ({result.returncode}): {result.stderr[-2000:]}")
    return result


def _unescape(text: str) -> str:
    return text.replace("&quot;", '"').replace("&lt;", "<").replace("&gt;", ">").replace("&amp;", "&")


def png_pixels(path: str | Path) -> np.ndarray:
    """Decode an 8-bit RGB or RGBA PNG (what Chromium writes) into ``[height, width, channels]`` uint8."""
    data = Path(path).read_bytes()
    if data[:8] != b"\x89PNG\r\n\x1a\n":
        raise ValueError(f"{path} is not a PNG file.")
    at, chunks, header = 8, [], None
    while at < len(data):
        (length,), kind = struct.unpack(">I", data[at:at + 4]), data[at + 4:at + 8]
        body = data[at + 8:at + 8 + length]
        if kind == b"IHDR":
            header = struct.unpack(">IIBBBBB", body)
        elif kind == b"IDAT":
            chunks.append(body)
        at += 12 + length
    width, height, depth, color, _, _, interlace = header
    channels = {2: 3, 6: 4}.get(color)
    if depth != 8 or channels is None or interlace:
        raise ValueError(f"{path}: only 8-bit, non-interlaced RGB/RGBA PNGs are supported.")
    raw = np.frombuffer(zlib.decompress(b"".join(chunks)), dtype=np.uint8).reshape(height, 1 + width * channels)
    rows = np.zeros((height, width * channels), dtype=np.int32)
    previous = np.zeros(width * channels, dtype=np.int32)
    for y in range(height):
        kind, line = raw[y, 0], raw[y, 1:].astype(np.int32)
        if kind == 1:  # Sub: a running sum per channel
            line = np.cumsum(line.reshape(width, channels), axis=0).reshape(-1) % 256
        elif kind == 2:  # Up
            line = (line + previous) % 256
        elif kind in (3, 4):  # Average, Paeth: sequential within the row
            line = _unfilter_sequential(int(kind), line, previous, channels)
        rows[y] = line
        previous = line
    return rows.astype(np.uint8).reshape(height, width, channels)


def _unfilter_sequential(kind: int, line: np.ndarray, previous: np.ndarray, channels: int) -> np.ndarray:
    out, above = line.tolist(), previous.tolist()  # plain lists: this loop runs once per byte
    for x in range(len(out)):
        left = out[x - channels] if x >= channels else 0
        up = above[x]
        if kind == 3:
            out[x] = (out[x] + (left + up) // 2) & 255
            continue
        corner = above[x - channels] if x >= channels else 0
        estimate = left + up - corner
        far_left, far_up, far_corner = abs(estimate - left), abs(estimate - up), abs(estimate - corner)
        best = left if far_left <= far_up and far_left <= far_corner else up if far_up <= far_corner else corner
        out[x] = (out[x] + best) & 255
    return np.asarray(out, dtype=np.int32)


def pixel_spread(path: str | Path) -> float:
    """Standard deviation of the RGB values over the image (0 for a blank one)."""
    return float(png_pixels(path)[..., :3].std())


def write_page(figures: Mapping[str, Any], path: str | Path, size: tuple[int, int] = (860, 480)) -> Path:
    """One offline page holding every figure (plotly.js inline once), each in a box of ``size`` pixels."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    width, height = size
    boxes = []
    for index, (name, figure) in enumerate(figures.items()):
        if not re.fullmatch(r"[\w-]+", name):
            raise ValueError(f"figure names must be letters, digits, _ or -, got {name!r}.")
        div = figure.to_html(full_html=False, include_plotlyjs=index == 0, div_id=name, default_width=f"{width}px",
                             default_height=f"{height}px", config={"displayModeBar": False})
        boxes.append(f'<div class="{SECTION}" id="{SECTION}-{name}" style="width:{width}px;height:{height}px;'
                     f'overflow:hidden">{div}</div>')
    path.write_text('<!DOCTYPE html><html><head><meta charset="utf-8"></head>'
                    f'<body style="margin:0">{"".join(boxes)}</body></html>', encoding="utf-8")
    return path


def check_page(path: str | Path, names: Sequence[str], size: tuple[int, int] = (860, 480)) -> RenderResult:
    """Render a ``write_page`` page and assert every figure drew, without errors and not blank.

    Fails on any JavaScript error, on a figure with no plotly SVG or no drawn trace, and on a
    figure whose part of the screenshot is blank. The screenshot stays beside the page (and is
    copied to ``$PSHEADS_ARTIFACTS`` when that names a folder).
    """
    path = Path(path)
    width, height = size
    result = render(path, screenshot=path.with_suffix(".png"), size=(width, height * len(names)))
    assert not result.errors, f"{path.name}: JavaScript errors {result.errors}"
    starts = [result.dom.find(f'id="{SECTION}-{name}"') for name in names]
    missing = [name for name, start in zip(names, starts, strict=True) if start < 0]
    assert not missing, f"{path.name}: figures missing from the DOM: {missing}"
    pixels = png_pixels(result.screenshot)[..., :3]
    for index, name in enumerate(names):
        part = RenderResult(result.dom[starts[index]:starts[index + 1] if index + 1 < len(names) else None], [], None)
        assert part.plots >= 1, f"{name}: plotly drew no SVG"
        assert part.traces >= 1, f"{name}: plotly drew no trace"
        spread = float(pixels[index * height:(index + 1) * height].std())
        assert spread > 5.0, f"{name}: its part of the screenshot is blank (pixel spread {spread:.2f})"
    keep_artifact(result.screenshot)
    return result


def keep_artifact(path: Path) -> None:
    """Copy ``path`` into ``$PSHEADS_ARTIFACTS`` when that names a folder (CI keeps them)."""
    keep = os.environ.get("PSHEADS_ARTIFACTS")
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        shutil.copy(path, Path(keep) / path.name)


def check_figure(figure: Any, folder: str | Path, name: str, size: tuple[int, int] = (860, 480)) -> RenderResult:
    """Write one figure to ``folder/name.html`` (plotly.js inline) and ``check_page`` it."""
    return check_page(write_page({name: figure}, Path(folder) / f"{name}.html", size), [name], size)
