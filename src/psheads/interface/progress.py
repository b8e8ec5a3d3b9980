"""Progress bars that suit where the code runs: a terminal, a Jupyter notebook, or a log.

Every long loop in psheads takes ``progress: bool | None`` and draws its bar with
``progress_bar``. ``None`` shows the bar in a Jupyter (IPython) kernel or when stderr is a terminal,
and hides it otherwise (logs, CI, pipes); ``True`` and ``False`` force it on or off. In a
``torch.distributed`` job only rank 0 draws bars. In a notebook
the bar is a widget when ``ipywidgets`` is installed (``pip install "psheads[notebook]"``), else
the text bar, without tqdm's ``IProgress not found`` warning (``quiet_tqdm_auto`` also keeps
that warning out of the libraries psheads imports, and ``import psheads`` free of tqdm's
``TqdmExperimentalWarning`` where ipywidgets is installed).
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import warnings
from collections.abc import Iterable

from tqdm import TqdmExperimentalWarning, TqdmWarning, tqdm


def in_notebook() -> bool:
    """Whether this process is a Jupyter (IPython/ZMQ) kernel, e.g. a notebook, JupyterLab or Colab.

    Reads only modules that are already imported: a plain script never imports IPython here.
    """
    ipython = sys.modules.get("IPython")
    shell = ipython.get_ipython() if ipython is not None and hasattr(ipython, "get_ipython") else None
    if type(shell).__name__ == "ZMQInteractiveShell":
        return True
    kernelapp = sys.modules.get("ipykernel.kernelapp")
    return kernelapp is not None and kernelapp.IPKernelApp.initialized()


def quiet_tqdm_auto() -> None:
    """In a notebook, import ``tqdm.autonotebook`` now with its own warnings silenced.

    transformers and huggingface_hub draw their bars with ``tqdm.auto``, whose first import in a
    kernel without ipywidgets warns ``IProgress not found`` before falling back to the text bar.
    Imported here first, it falls back quietly and later imports reuse it. With ipywidgets,
    ``tqdm.autonotebook`` warns instead that it runs in notebook mode (a ``TqdmExperimentalWarning``,
    which ``tqdm.auto`` itself silences): that one is silenced too. Only those two warnings, only
    during this import (the user's warning filters are left as they were); outside a notebook, or
    once ``tqdm.autonotebook`` is imported, this does nothing.
    """
    if "tqdm.autonotebook" in sys.modules or not in_notebook():
        return
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="IProgress not found", category=TqdmWarning)
        warnings.filterwarnings("ignore", category=TqdmExperimentalWarning)
        importlib.import_module("tqdm.autonotebook")


def show_progress(progress: bool | None) -> bool:
    """Whether to draw a bar: never on a ``torch.distributed`` rank other than 0; else ``progress``
    itself when given, else in a notebook or on a terminal."""
    from psheads.interface.distributed import is_main  # here: importing psheads must not load torch

    if not is_main():
        return False
    if progress is not None:
        return bool(progress)
    return in_notebook() or (sys.stderr is not None and sys.stderr.isatty())


def bar_class(shown: bool) -> type[tqdm]:
    """The tqdm class for a bar: the notebook widget when shown in a notebook with ipywidgets, else text."""
    if shown and in_notebook() and importlib.util.find_spec("ipywidgets") is not None:
        from tqdm.notebook import tqdm as widget

        return widget
    return tqdm


def progress_bar(iterable: Iterable | None = None, *, desc: str, progress: bool | None, total: int | None = None,
                 initial: int = 0) -> tqdm:
    """A tqdm bar over ``iterable`` (or ``total`` manual ``update`` steps), shown as ``show_progress`` decides.

    Args:
        iterable: what to iterate over, or None for a bar advanced with ``bar.update(k)``.
        desc: the bar's label.
        progress: True or False forces the bar on or off; None shows it in a notebook or on a terminal.
        total: number of steps (default: ``len(iterable)`` where it has one).
        initial: steps already done (a resumed run).
    """
    shown = show_progress(progress)
    return bar_class(shown)(iterable, desc=desc, total=total, initial=initial, disable=not shown)
