"""The documentation builds, renders offline, and its Python examples run.

Convention for Python examples in ``docs/*.md`` and ``README.md``:

- every ```` ```python ```` block is **run**: the blocks of one page run in order in one fresh
  subprocess (they share state, like notebook cells), offline (``HF_HUB_OFFLINE=1``), with a
  timeout, in a temporary working directory where ``docs/`` is the repository's (so
  ``docs/...`` reads as from a clone and written files land elsewhere); a failure names the
  page, the block number and its first line, with the traceback;
- a block that must not run (pseudo-code, a path on the reader's machine, hours of training) has
  ``<!-- not run: reason -->`` on the line right before its fence; the reason is required;
- a ```` ```text ```` block with ``<!-- printed by the block above -->`` on the line before its
  fence is what the Python block before it prints: the test compares them word by word, numbers
  to a relative 1e-4;
- with ``PSHEADS_SKIP_REAL_LLM=1``, a page's blocks from the first one that loads the real LLM
  (``"gemma-3-270m"``) on are skipped, with a reason;
- the examples target TransformerLens 4 (``TransformerBridge``); on 3.x they are skipped.

Pseudo-code that is not Python at all belongs in a ```` ```text ```` fence instead.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from dataclasses import dataclass, replace
from itertools import zip_longest
from pathlib import Path

import pytest

from tests import regenerate

ROOT = Path(__file__).resolve().parents[1]
PAGES = sorted(ROOT.glob("docs/*.md")) + [ROOT / "README.md"]
NOT_RUN = re.compile(r"^<!-- not run: (?P<reason>\S.*?) -->$")
PRINTED = "<!-- printed by the block above -->"
FENCE = re.compile(r"^(?P<indent> *)```(?P<lang>[\w+-]*)")
REAL_LLM = '"gemma-3-270m"'
SKIP_REAL_LLM = os.environ.get("PSHEADS_SKIP_REAL_LLM") == "1"
PAGE_TIMEOUT_S = 240
CDN = re.compile(r"<(?:script|link)\b[^>]*\b(?:src|href)=\"(?:https?:)?//[^\"]*\"")

# runs the blocks given as JSON on stdin in one namespace and prints what each printed, as JSON;
# a traceback names the page, the block and the line
DRIVER = """
import contextlib, io, json, linecache, sys, traceback
namespace, printed = {"__name__": "__main__"}, []
for block in json.load(sys.stdin):
    name = block["name"]
    linecache.cache[name] = (len(block["code"]), None, block["code"].splitlines(True), name)
    sys.stderr.write(f"running: {name}\\n")
    with contextlib.redirect_stdout(io.StringIO()) as out:
        try:
            exec(compile(block["code"], name, "exec"), namespace)
        except BaseException:
            traceback.print_exc()
            sys.stderr.write(f"FAILED: {name}\\n")
            sys.exit(1)
    printed.append(out.getvalue())
print(json.dumps(printed))
"""


@dataclass(frozen=True)
class Block:
    """One ```python block of a page."""

    page: str
    number: int
    line: int
    code: str
    not_run: str | None
    printed: str | None = None

    @property
    def name(self) -> str:
        first = next((text for text in self.code.splitlines() if text.strip()), "")
        return f"{self.page} block {self.number} (line {self.line}: {first.strip()[:60]})"


def python_blocks(page: Path) -> list[Block]:
    """Every ```python block of ``page`` in order, with its ``not run`` reason if marked."""
    lines = page.read_text().splitlines()
    blocks: list[Block] = []
    index = 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        if not opening or not opening["lang"]:
            index += 1
            continue
        indent, start = opening["indent"], index
        index += 1
        while index < len(lines) and lines[index].strip() != "```":
            index += 1
        body = "\n".join(text[len(indent):] for text in lines[start + 1:index]) + "\n"
        if opening["lang"] == "python":
            marker = NOT_RUN.match(lines[start - 1].strip()) if start else None
            blocks.append(Block(str(page.relative_to(ROOT)), len(blocks) + 1, start + 1, body,
                                marker["reason"] if marker else None))
        elif opening["lang"] == "text" and lines[start - 1].strip() == PRINTED:
            if not blocks or blocks[-1].not_run is not None:
                raise ValueError(f"{page.name}:{start + 1}: {PRINTED} follows no run Python block")
            blocks[-1] = replace(blocks[-1], printed=body)
        index += 1
    return blocks


def _transformer_lens_major() -> int:
    from importlib.metadata import version

    return int(version("transformer-lens").split(".")[0])


def test_markers_stand_before_their_fences() -> None:
    """A marker anywhere else (stale, or on the wrong fence) would silently mean nothing."""
    stray = []
    for page in PAGES:
        lines = page.read_text().splitlines()
        for number, text in enumerate(lines[:-1], start=1):
            marker, fence = text.strip(), lines[number].lstrip()  # a marker is a line of its own
            if (marker.startswith("<!-- not run") and not (NOT_RUN.match(marker) and fence.startswith("```python"))
                    or marker == PRINTED and not fence.startswith("```text")):
                stray.append(f"{page.relative_to(ROOT)}:{number}")
    assert not stray, (f"'<!-- not run: reason -->' must stand right before a ```python fence, {PRINTED} before "
                       f"```text: {stray}")


def test_blocks_are_parsed_as_marked() -> None:
    gating = python_blocks(ROOT / "docs" / "gating.md")
    assert gating[0].not_run and gating[0].code.startswith("with lens.gate(") and gating[1].not_run is None
    scoring = python_blocks(ROOT / "docs" / "scoring.md")[0]
    assert scoring.not_run is None and scoring.printed.startswith("   layer  head  positional")
    assert same_words("0.98622 uniform\n", "0.986220  uniform") and not same_words("0.9863 uniform", "0.9862 uniform")
    assert not same_words("a b", "a b c")


@pytest.mark.parametrize("page", [page for page in PAGES if python_blocks(page)], ids=lambda page: page.name)
def test_python_blocks_run(page: Path, tmp_path: Path) -> None:
    if _transformer_lens_major() < 4:
        pytest.skip("the docs' examples target TransformerLens 4 (TransformerBridge); run them in .venv")
    blocks = [block for block in python_blocks(page) if block.not_run is None]
    if not blocks:
        pytest.skip(f"{page.name}: every Python block is marked not run")
    if SKIP_REAL_LLM:
        blocks = blocks[:next((i for i, block in enumerate(blocks) if REAL_LLM in block.code), len(blocks))]
        if not blocks:
            pytest.skip(f"{page.name} loads the real LLM; skipped on request (PSHEADS_SKIP_REAL_LLM=1)")
    (tmp_path / "docs").symlink_to(ROOT / "docs")
    env = {**os.environ, "HF_HUB_OFFLINE": "1", "TRANSFORMERS_VERBOSITY": "error", "PYTHONPATH": str(ROOT)}
    try:
        result = subprocess.run(
            [sys.executable, "-c", DRIVER], cwd=tmp_path, env=env, capture_output=True, text=True,
            input=json.dumps([{"name": block.name, "code": block.code} for block in blocks]),
            timeout=PAGE_TIMEOUT_S,
        )
    except subprocess.TimeoutExpired as timeout:
        running = re.findall(r"running: (.*)", timeout.stderr.decode() if timeout.stderr else "")
        pytest.fail(f"{page.name} ran past {PAGE_TIMEOUT_S} s, in {running[-1] if running else 'start-up'}")
    assert result.returncode == 0, f"{page.name}:\n{result.stderr[-6000:]}"
    printed = json.loads(result.stdout.splitlines()[-1])
    for block, out in zip(blocks, printed, strict=True):
        if block.printed is not None:
            assert same_words(out, block.printed), f"{block.name} printed\n{out}\nthe page shows\n{block.printed}"


def same_words(printed: str, shown: str) -> bool:
    """Equal word by word, numbers to a relative 1e-4 (float formatting differs across machines)."""
    def close(a: str | None, b: str | None) -> bool:
        if a == b:
            return True
        try:
            return a is not None and b is not None and abs(float(a) - float(b)) <= 1e-4 * max(abs(float(b)), 1e-12)
        except ValueError:
            return False

    return all(close(a, b) for a, b in zip_longest(printed.split(), shown.split()))


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The site, built once in strict mode (broken links and docstrings fail the build)."""
    pytest.importorskip("mkdocs")
    pytest.importorskip("mkdocstrings")
    site_dir = tmp_path_factory.mktemp("site")
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site_dir)],
        cwd=ROOT, capture_output=True, text=True, timeout=300,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    return site_dir


def site_pages(site: Path) -> list[Path]:
    """The pages built from Markdown (not the figure files under ``data/``)."""
    return [html for html in site.rglob("*.html") if html.parent.name != "data"]


def test_mkdocs_build_strict(site: Path) -> None:
    assert (site / "api" / "index.html").is_file()


def test_site_loads_nothing_from_the_network(site: Path) -> None:
    pages = list(site.rglob("*.html"))  # the figure files under data/ too
    assert len(site_pages(site)) > 15 and len(pages) > len(site_pages(site))
    remote = {str(html.relative_to(site)): CDN.findall(html.read_text()) for html in pages}
    assert not {page: found for page, found in remote.items() if found}


def test_maths_is_rendered_at_build_time(site: Path) -> None:
    """Formulas are MathML in the HTML: no script typesets them, offline browsers show them."""
    html = (site / "decomposition" / "index.html").read_text()
    display = re.findall(r'<math[^>]*display="block"[^>]*>.*?</math>', html, re.DOTALL)
    assert len(display) == 3
    assert "<munderover><mo>&#x02211;</mo>" in display[1]  # L(t, j) = Σ_{f=1}^{F} L_f(t, j) + ...
    assert "<mtext>rotary_dim</mtext>" in display[1]  # \text{rotary\_dim}, without the backslash
    pages = [html.read_text() for html in site_pages(site)]
    assert not [page for page in pages if 'class="arithmatex"' in page]  # nothing left as raw TeX
    assert not [page for page in pages if "mathjax" in page.lower()]


def test_wide_tables_fit_the_page(site: Path) -> None:
    """The table stylesheet is linked from every page and wraps cells instead of hiding columns."""
    stylesheet = site / "stylesheets" / "extra.css"
    assert "overflow-wrap: anywhere" in stylesheet.read_text()
    assert 'href="../stylesheets/extra.css"' in (site / "loading" / "index.html").read_text()


def test_pages_that_cite_the_papers_give_the_references(site: Path) -> None:
    """Each page stands alone: "paper A" or "paper B" in its text comes with both full references."""
    missing = [str(html.relative_to(site)) for html in site_pages(site)
               if re.search(r"\bpaper [AB]\b", html.read_text(), re.IGNORECASE)
               and not all(arxiv in html.read_text() for arxiv in ("arXiv:2511.11579", "arXiv:2605.31558"))]
    assert not missing, f"add --8<-- \"docs/snippets/references.md\" at the end of {missing}"


def test_the_api_page_lists_every_frame_schema() -> None:
    """The API page's schema tables are written from psheads.results.schema at build time: every schema has its
    marker."""
    from psheads.results import schema

    text = (ROOT / "docs" / "api.md").read_text(encoding="utf-8")
    names = sorted(name for name, value in vars(schema).items() if isinstance(value, schema.FrameSchema))
    assert sorted(re.findall(r"<!-- schema: ([A-Z_]+) -->", text)) == names


def test_every_test_the_docs_name_exists() -> None:
    """``tests/…py::test_name`` references in the docs point at a file and a function that exist."""
    missing = []
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
        for path, name in re.findall(r"(tests/[\w/]+\.py)(?:::(\w+))?", page.read_text()):
            target = ROOT / path
            if not target.is_file() or (name and not re.search(rf"^def {name}\(", target.read_text(), re.M)):
                missing.append(f"{page.name}: {path}{'::' + name if name else ''}")
    assert not missing, "\n".join(missing)


@pytest.mark.parametrize("piece", regenerate.PIECES, ids=lambda piece: piece.name)
def test_generated_pieces_agree_with_the_code(piece: regenerate.Generated) -> None:
    """Every list of a registry, and every table drawn from the code, is what the code says now."""
    assert piece.shown() == piece.draw().strip(), f"{piece.name} is stale: run `{regenerate.COMMAND}`"


def test_a_stale_piece_is_found_and_rewritten(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    markers = ("<!-- x: generated -->", "<!-- end of x -->")
    page.write_text(f"before\n{markers[0]}\n\n| old |\n\n{markers[1]}\nafter\n")
    piece = regenerate.Generated(page, markers, lambda: "| new |")
    assert piece.shown() == "| old |" and piece.write() and not piece.write()
    assert page.read_text() == f"before\n{markers[0]}\n\n| new |\n\n{markers[1]}\nafter\n"
    page.write_text("no markers")
    with pytest.raises(ValueError, match="must hold each of"):
        piece.shown()


def test_the_tables_of_the_registries_list_every_built_in() -> None:
    """A method's own columns reach the tables with their meanings; every built-in task has its row."""
    from psheads.measure import methods
    from psheads.tasks import available_tasks, get_task

    shown = regenerate.methods_table()
    for name in methods.score_methods():
        for column, meaning in methods.column_meanings(methods.get_score_method(name)).items():
            assert f"`{column}`: {meaning}" in shown
    built_in = [name for name in available_tasks() if regenerate.built_in(type(get_task(name)))]
    assert [line.split("`")[1] for line in regenerate.tasks_table().splitlines()[2:]] == built_in
