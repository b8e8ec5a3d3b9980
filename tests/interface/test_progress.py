"""Progress bars: when they show, which bar a notebook gets, and no ipywidgets warning."""

from __future__ import annotations

import importlib
import sys
import types
import warnings

import pytest
import tqdm
import tqdm.notebook
from tqdm import TqdmExperimentalWarning, TqdmWarning

from psheads.interface import progress


class _Stderr:
    def __init__(self, tty: bool) -> None:
        self.tty = tty

    def isatty(self) -> bool:
        return self.tty


def _shell(name: str) -> types.SimpleNamespace:
    """A stand-in ``IPython`` module whose ``get_ipython()`` is an instance of a class called ``name``."""
    shell = type(name, (), {})()
    return types.SimpleNamespace(get_ipython=lambda: shell)


@pytest.fixture
def no_kernel(monkeypatch: pytest.MonkeyPatch) -> pytest.MonkeyPatch:
    monkeypatch.delitem(sys.modules, "IPython", raising=False)
    monkeypatch.delitem(sys.modules, "ipykernel.kernelapp", raising=False)
    return monkeypatch


def test_in_notebook_detects_a_zmq_kernel(no_kernel: pytest.MonkeyPatch) -> None:
    assert not progress.in_notebook()
    no_kernel.setitem(sys.modules, "IPython", _shell("TerminalInteractiveShell"))
    assert not progress.in_notebook()  # IPython in a terminal: stderr decides
    no_kernel.setitem(sys.modules, "IPython", _shell("ZMQInteractiveShell"))
    assert progress.in_notebook()


def test_in_notebook_detects_a_running_kernel_app(no_kernel: pytest.MonkeyPatch) -> None:
    """A kernel whose shell class has another name (Colab's) still counts when its kernel app runs."""
    app = types.SimpleNamespace(initialized=lambda: False)
    no_kernel.setitem(sys.modules, "ipykernel.kernelapp", types.SimpleNamespace(IPKernelApp=app))
    assert not progress.in_notebook()  # ipykernel imported, but no kernel running
    app.initialized = lambda: True
    assert progress.in_notebook()


@pytest.mark.parametrize(("notebook", "tty", "shown"), [
    (False, False, False),  # a log, a pipe, CI
    (False, True, True),  # a terminal
    (True, False, True),  # a notebook: stderr is no TTY there
    (True, True, True),
])
def test_default_shows_in_a_notebook_or_on_a_terminal(monkeypatch: pytest.MonkeyPatch, notebook: bool, tty: bool,
                                                     shown: bool) -> None:
    monkeypatch.setattr(progress, "in_notebook", lambda: notebook)
    monkeypatch.setattr(sys, "stderr", _Stderr(tty))
    assert progress.show_progress(None) is shown
    assert progress.show_progress(True) is True and progress.show_progress(False) is False


def test_no_stderr_means_no_bar(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(progress, "in_notebook", lambda: False)
    monkeypatch.setattr(sys, "stderr", None)
    assert progress.show_progress(None) is False


def test_bars_forced_on_and_off(monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture) -> None:
    monkeypatch.setattr(progress, "in_notebook", lambda: False)  # pytest's stderr is no TTY
    on, off = (progress.progress_bar(range(3), desc=desc, progress=desc == "on") for desc in ("on", "off"))
    assert not on.disable and off.disable
    assert list(on) == [0, 1, 2] and list(off) == [0, 1, 2]
    with progress.progress_bar(total=4, initial=1, desc="manual", progress=True) as bar:
        bar.update(3)
    assert list(progress.progress_bar(range(3), desc="default", progress=None)) == [0, 1, 2]
    err = capsys.readouterr().err
    assert "on: 100%" in err and "3/3" in err and "manual: 100%" in err and "4/4" in err
    assert "off" not in err and "default" not in err


def test_notebook_bar_is_the_widget_only_with_ipywidgets(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(progress, "in_notebook", lambda: True)
    monkeypatch.setitem(sys.modules, "ipywidgets", None)  # not installed
    assert progress.bar_class(True) is tqdm.tqdm
    monkeypatch.setattr(progress.importlib.util, "find_spec", lambda name: object())  # installed
    assert progress.bar_class(True) is tqdm.notebook.tqdm
    assert progress.bar_class(False) is tqdm.tqdm  # a hidden bar never builds a widget
    monkeypatch.setattr(progress, "in_notebook", lambda: False)
    assert progress.bar_class(True) is tqdm.tqdm


def test_no_ipywidgets_warning_from_psheads_bars(monkeypatch: pytest.MonkeyPatch,
                                                 capsys: pytest.CaptureFixture) -> None:
    monkeypatch.setattr(progress, "in_notebook", lambda: True)
    monkeypatch.setitem(sys.modules, "ipywidgets", None)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        assert list(progress.progress_bar(range(2), desc="notebook", progress=None)) == [0, 1]
    assert not [w for w in caught if issubclass(w.category, TqdmWarning)]
    assert "notebook: 100%" in capsys.readouterr().err  # the text bar, shown by default in a notebook


def test_quiet_tqdm_auto_keeps_the_warning_out_of_other_libraries(monkeypatch: pytest.MonkeyPatch) -> None:
    """``tqdm.auto`` (as transformers imports it) warns in a kernel without ipywidgets, unless quieted first."""
    monkeypatch.setitem(sys.modules, "IPython", _shell("ZMQInteractiveShell"))
    monkeypatch.setitem(sys.modules, "ipykernel.zmqshell", types.ModuleType("ipykernel.zmqshell"))  # tqdm's test
    monkeypatch.setitem(sys.modules, "ipywidgets", None)
    for name in ("tqdm.autonotebook", "tqdm.auto", "tqdm.notebook"):  # fresh imports, all restored afterwards
        monkeypatch.setitem(sys.modules, name, None)
        del sys.modules[name]
    with pytest.warns(TqdmWarning, match="IProgress not found"):
        importlib.import_module("tqdm.auto")
    for name in ("tqdm.autonotebook", "tqdm.auto"):
        del sys.modules[name]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        progress.quiet_tqdm_auto()
        auto = importlib.import_module("tqdm.auto")
    assert not [w for w in caught if issubclass(w.category, TqdmWarning)]
    assert issubclass(auto.tqdm, tqdm.tqdm) and not issubclass(auto.tqdm, tqdm.notebook.tqdm)  # the text bar
    assert not any("IProgress" in str(f) for f in warnings.filters)  # the silencing did not outlive the import


def test_quiet_tqdm_auto_keeps_the_experimental_warning_out_of_import_psheads(monkeypatch: pytest.MonkeyPatch) -> None:
    """With ipywidgets, ``tqdm.autonotebook`` takes the notebook bar and warns ``TqdmExperimentalWarning``
    (what ``import psheads`` printed in a notebook's first cell): silenced, and only during the import."""
    monkeypatch.setattr(progress, "in_notebook", lambda: True)
    monkeypatch.setitem(sys.modules, "IPython", _shell("ZMQInteractiveShell"))
    monkeypatch.setitem(sys.modules, "ipykernel.zmqshell", types.ModuleType("ipykernel.zmqshell"))  # tqdm's test
    notebook = importlib.import_module("tqdm.notebook")
    monkeypatch.setattr(notebook, "IProgress", type("IProgress", (), {}))  # as if ipywidgets were installed
    for name in ("tqdm.autonotebook", "tqdm.auto"):  # fresh imports, restored afterwards
        monkeypatch.setitem(sys.modules, name, None)
        del sys.modules[name]
    with pytest.warns(TqdmExperimentalWarning, match="notebook mode"):  # tqdm's own import warns
        importlib.import_module("tqdm.autonotebook")
    del sys.modules["tqdm.autonotebook"]
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        before = list(warnings.filters)
        progress.quiet_tqdm_auto()
        assert warnings.filters == before  # the user's filters as they were
    assert "tqdm.autonotebook" in sys.modules  # the import ran, down the path that warns
    assert sys.modules["tqdm.autonotebook"].tqdm is notebook.tqdm
    assert not [w for w in caught if issubclass(w.category, TqdmWarning)], [str(w.message) for w in caught]


def test_quiet_tqdm_auto_does_nothing_outside_a_notebook(no_kernel: pytest.MonkeyPatch) -> None:
    no_kernel.delitem(sys.modules, "tqdm.autonotebook", raising=False)
    progress.quiet_tqdm_auto()
    assert "tqdm.autonotebook" not in sys.modules
