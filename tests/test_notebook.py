"""examples/quickstart.ipynb runs top to bottom in a real Jupyter kernel and shows what it claims."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import nbclient  # nbclient, nbformat and ipykernel come with the test extra: pip install -e ".[test]"
import nbformat
import pytest
from jupyter_client.kernelspec import KernelSpecManager
from jupyter_client.manager import KernelManager

from tests import browser

NOTEBOOK = Path(__file__).resolve().parents[1] / "examples" / "quickstart.ipynb"
KERNEL = "psheads-test"
PLOTLY = "application/vnd.plotly.v1+json"
WIDGET = "application/vnd.jupyter.widget-view+json"


def _kernel_manager(directory: Path) -> KernelManager:
    """A kernel that runs this interpreter (its venv and editable psheads), declared in ``directory`` only."""
    spec = directory / KERNEL
    spec.mkdir(parents=True)
    (spec / "kernel.json").write_text(json.dumps({
        "argv": [sys.executable, "-m", "ipykernel_launcher", "-f", "{connection_file}"],
        "display_name": "psheads test", "language": "python",
    }))
    return KernelManager(kernel_name=KERNEL, kernel_spec_manager=KernelSpecManager(kernel_dirs=[str(directory)]))


@pytest.fixture(scope="module")
def run_notebook(tmp_path_factory: pytest.TempPathFactory) -> nbformat.NotebookNode:
    """The notebook after a run, with its outputs."""
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    work = tmp_path_factory.mktemp("notebook")
    client = nbclient.NotebookClient(notebook, km=_kernel_manager(work / "kernels"), timeout=300,
                                     resources={"metadata": {"path": str(work)}})
    client.execute()
    return notebook


@pytest.fixture(scope="module")
def executed(run_notebook: nbformat.NotebookNode) -> dict[str, list[dict]]:
    """The notebook's code cells after a run, by their last source line."""
    return {cell.source.splitlines()[-1]: cell.outputs for cell in run_notebook.cells if cell.cell_type == "code"}


def _result(outputs: list[dict]) -> dict:
    """The rich output of a cell: its result, or what it displayed last (plotly displays its figures,
    after plotly.js itself in the first figure's cell)."""
    *_, result = [output for output in outputs if output["output_type"] in ("execute_result", "display_data")]
    return result["data"]


def _stderr(outputs: list[dict]) -> str:
    return "".join(output["text"] for output in outputs if output["output_type"] == "stream"
                   and output["name"] == "stderr")


def test_stored_without_outputs() -> None:
    notebook = nbformat.read(NOTEBOOK, as_version=4)
    nbformat.validate(notebook)
    code = [cell for cell in notebook.cells if cell.cell_type == "code"]
    assert code and all(not cell.outputs and cell.execution_count is None for cell in code)


def test_cells_show_what_they_claim(executed: dict[str, list[dict]]) -> None:
    assert all(output["output_type"] != "error" for outputs in executed.values() for output in outputs)
    shipped = _result(executed["shipped"])
    assert "<strong>Pretrained</strong>" in shipped["text/html"] and "accuracy" in shipped["text/html"]
    assert shipped["text/plain"].startswith("Pretrained(name='number'")
    frame = _result(executed["frame"])
    assert frame["text/html"].count("<tr>") == 12  # one body row per layer × head (12 × 1)
    for figure in ("ps.plotting.score_plane(frame)", "ps.plotting.learning_dynamics(shipped.dynamics)"):
        assert PLOTLY in _result(executed[figure])
    lens = _result(executed["lens"])["text/html"]
    assert "<strong>RopeLens</strong>" in lens and "gptj" in lens and "10,000" in lens
    profile = _result(executed["profile"])["text/html"]
    assert "<strong>FrequencyProfile</strong>" in profile and "top planes per layer" in profile
    accuracy = _result(executed["accuracy"])["text/html"]
    assert "all" in accuracy and "accuracy" in accuracy


def test_progress_bars_show_in_the_kernel(executed: dict[str, list[dict]]) -> None:
    """In a kernel the bars are on by default (stderr is no TTY there): widgets with ipywidgets, else text."""
    for cell, desc in (("frame", "score_heads"), ("frame", "RopeLens self-check"), ("profile", "frequency profile"),
                       ("accuracy", "evaluate")):
        if importlib.util.find_spec("ipywidgets") is None:
            assert f"{desc}: 100%" in _stderr(executed[cell])
        else:
            assert any(WIDGET in output.get("data", {}) for output in executed[cell])


def test_the_lens_reuses_the_self_check_of_score_heads(executed: dict[str, list[dict]]) -> None:
    """``ps.RopeLens(shipped.model)`` after ``score_heads`` on the same model checks nothing again: no bar."""
    assert not any(output["output_type"] == "stream" or WIDGET in output.get("data", {})
                   for output in executed["lens"])


def test_no_ipywidgets_warning(executed: dict[str, list[dict]]) -> None:
    """No ``IProgress not found`` warning, from psheads' bars or from the libraries it imports (``tqdm.auto``)."""
    assert not any("IProgress" in _stderr(outputs) for outputs in executed.values())


def test_figures_survive_an_html_export(run_notebook: nbformat.NotebookNode, tmp_path: Path) -> None:
    """``jupyter nbconvert --to html`` drops plotly's own mimetype: the notebook's renderer also gives
    each figure as HTML, with plotly.js inside the page, so the export keeps both figures and they
    draw offline (headless Chromium; the page's links to a CDN, nbconvert's own, fail there)."""
    exporter = pytest.importorskip("nbconvert", reason="nbconvert comes with the test extra").HTMLExporter()
    page, _ = exporter.from_notebook_node(run_notebook)
    assert page.count('class="plotly-graph-div"') == 2  # the score plane and the learning dynamics
    assert "cdn.plot.ly/plotly" not in page and len(page) > 3_000_000  # plotly.js itself (megabytes), not a link
    browser.require_chromium()
    (tmp_path / "quickstart.html").write_text(page, encoding="utf-8")
    drawn = browser.render(tmp_path / "quickstart.html").dom
    assert drawn.count('class="main-svg"') >= 4  # plotly draws each figure on at least two stacked SVGs
