"""Files the library reads at run time, shipped inside the package.

``prose.txt``: English prose for the natural-text prompts of the LLM analyses (psheads' own
documentation pages with code, tables, maths and link targets removed; frozen, so that edits to
the docs do not move the published numbers). ``path(name)`` locates a file.
"""

from __future__ import annotations

from pathlib import Path

FOLDER = Path(__file__).resolve().parent
"""Where the files lie."""


def path(name: str) -> Path:
    """The shipped data file ``name`` (e.g. ``"prose.txt"``).

    Raises:
        FileNotFoundError: no such file in the package (the message lists what there is).
    """
    found = FOLDER / name
    if not found.is_file() or found.suffix == ".py":
        there = sorted(p.name for p in FOLDER.iterdir() if p.is_file() and p.suffix != ".py")
        raise FileNotFoundError(f"psheads ships no data file {name!r}; it has {there}.")
    return found
