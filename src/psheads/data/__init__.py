"""Files the library reads at run time, shipped inside the package.

``prose.txt``: English prose for the natural-text prompts of the LLM analyses (psheads' own
documentation pages with code, tables, maths and link targets removed; frozen, so that edits to
the docs do not move the published numbers). ``path(name)`` locates a file, and only inside the
package (an absolute path or one through ``..`` is refused).

``tables/``: the stored experiment tables that the reproduction report and the documentation's
tables and figures read, written there by the scripts that measure them (``scripts/*.py``):

- ``tables/*.csv``: one experiment each (``gating_sweep``, ``causal_tests``, ``gemma_scores``,
  ``<model>_llm_tasks``, ``lengthgen_discrepancy``, ``theory_accuracy``, ...), with a ``.json``
  beside some of them recording how the run was made;
- ``tables/atlas/<model>/``: the atlas of one LLM (``heads``, ``frequency_id``, ``planes``,
  ``usage``; the larger ones gzipped) and ``atlas.json``; ``tables/atlas/summary_*.csv`` across
  models;
- ``tables/paper_b/`` (``cpu/``: the cells trained on a CPU): ``<task>_<variant>_seed<N>_*.csv``
  and ``_run.json`` of each cell of paper B's recipe; ``tables/seeds/``: the training dynamics
  and evaluation of every seed.

``tables()`` lists them by name (the path under ``tables/`` without ``.csv`` or ``.csv.gz``) and
``table(name)`` reads one as a DataFrame (an unknown name is answered with the close ones). The
rendered figures stay out of the package.
"""

from __future__ import annotations

import difflib
from importlib import resources
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

FOLDER = Path(str(resources.files(__name__)))
"""Where the files lie (psheads installs as plain files, never zipped: the zoo reads its weights by path)."""
TABLES = FOLDER / "tables"
"""The stored experiment tables' folder (the report's default ``--data``)."""
TABLE_SUFFIXES = (".csv.gz", ".csv")


def path(name: str) -> Path:
    """The shipped data file ``name`` (e.g. ``"prose.txt"``, ``"tables/gemma_run.json"``), inside the data folder.

    Raises:
        TypeError: ``name`` is not a string.
        ValueError: ``name`` leads outside the data folder (an absolute path, ``..``).
        FileNotFoundError: no such file in the package (the message lists what there is).
    """
    if not isinstance(name, str):
        raise TypeError(f"name must be a data file's path (a str such as 'prose.txt'), got {type(name).__name__}.")
    found = FOLDER / name
    if not found.resolve().is_relative_to(FOLDER.resolve()):
        raise ValueError(f"psheads.data.path reads only inside psheads' data folder, and {name!r} leads outside it: "
                         "pass a path relative to it, such as 'prose.txt' or 'tables/gemma_run.json'.")
    if not found.is_file() or found.suffix == ".py":
        there = sorted(p.name for p in FOLDER.iterdir() if p.is_file() and p.suffix != ".py")
        raise FileNotFoundError(f"psheads ships no data file {name!r}; it has {there} and the tables of tables().")
    return found


def tables() -> list[str]:
    """The names of every stored table, sorted: ``"gating_sweep"``, ``"atlas/gemma-3-270m/heads"``, ..."""
    return sorted(_name(file) for file in TABLES.rglob("*") if file.name.endswith(TABLE_SUFFIXES))


def table_path(name: str) -> Path:
    """The file of the stored table ``name`` (one of ``tables()``).

    Raises:
        TypeError: ``name`` is not a string.
        ValueError: no such table (the message names the close ones, or what to drop).
    """
    if not isinstance(name, str):
        raise TypeError(f"name must be a table name (a str such as 'gating_sweep'), got {type(name).__name__}.")
    for suffix in TABLE_SUFFIXES:
        found = TABLES / f"{name}{suffix}"
        if found.is_file() and found.resolve().is_relative_to(TABLES.resolve()):
            return found
    raise ValueError(f"psheads stores no table {name!r}; {_hint(name)}.")


def table(name: str, **read_csv: Any) -> pd.DataFrame:
    """The stored table ``name`` (one of ``tables()``) as a DataFrame; ``read_csv`` goes to ``pandas.read_csv``.

    Raises:
        TypeError: ``name`` is not a string.
        ValueError: no such table (the message lists the names there are).
    """
    import pandas as pd

    return pd.read_csv(table_path(name), **read_csv)


def _hint(name: str) -> str:
    """What to pass instead of the unknown table ``name``."""
    names = tables()
    suffix = next((suffix for suffix in TABLE_SUFFIXES if name.endswith(suffix)), None)
    if suffix and name.removesuffix(suffix) in names:
        return f"drop the {suffix}: psheads.data.table({name.removesuffix(suffix)!r})"
    record = TABLES / f"{name}.json"
    if record.is_file() and record.resolve().is_relative_to(TABLES.resolve()):
        return (f"it is a run record, not a table: read it with "
                f"psheads.data.path({record.relative_to(FOLDER).as_posix()!r})")
    close = difflib.get_close_matches(name, names, n=5, cutoff=0.6)
    if close:
        return f"did you mean {', '.join(map(repr, close))}? psheads.data.tables() lists all {len(names)}"
    return f"psheads.data.tables() lists all {len(names)}"


def _name(file: Path) -> str:
    relative = file.relative_to(TABLES).as_posix()
    return next(relative.removesuffix(s) for s in TABLE_SUFFIXES if relative.endswith(s))
