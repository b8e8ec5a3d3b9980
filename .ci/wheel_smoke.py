"""Helpers of ``.ci/wheel_smoke.sh``, run by the tools' or the smoke environment's Python.

``python wheel_smoke.py same-wheels A.whl B.whl``: the two wheels hold the same files with the same
bytes (the one built from the sdist and the one built from the tree).
``python wheel_smoke.py guard DIR CLONE``: writes ``DIR/sitecustomize.py``, which makes every
Python started with ``DIR`` on ``PYTHONPATH`` exit with status 97 the moment it opens or lists a
path inside ``CLONE`` (imports included: they open their files too).
``python - section < wheel_smoke.py``: prints a digest of report sections built from the stored
tables alone (the editable and the wheel install must print the same). Read from stdin so that
running it opens no file of the clone.
"""

from __future__ import annotations

import hashlib
import json
import sys
import zipfile
from pathlib import Path

GUARD = '''
import os, sys

_CLONE = {clone!r}


def _inside(path):
    if isinstance(path, int):
        return False
    try:
        real = os.path.realpath(os.fsdecode(path))
    except (TypeError, ValueError):
        return False
    return real == _CLONE or real.startswith(_CLONE + os.sep)


def _guard(event, args):
    if event in ("open", "os.listdir", "os.scandir") and args and _inside(args[0]):
        sys.stderr.write(f"wheel smoke: {{event}} {{args[0]!r}} reaches into the clone {{_CLONE}}\\n")
        sys.stderr.flush()
        os._exit(97)


sys.addaudithook(_guard)
'''


def same_wheels(first: str, second: str) -> None:
    def contents(wheel: str) -> dict[str, str]:
        with zipfile.ZipFile(wheel) as archive:
            return {name: hashlib.sha256(archive.read(name)).hexdigest() for name in archive.namelist()}

    a, b = contents(first), contents(second)
    differ = sorted(name for name in a.keys() | b.keys() if a.get(name) != b.get(name))
    if differ:
        sys.exit(f"the wheel built from the sdist differs from the one built from the tree: {differ}")
    print(f"the sdist's wheel and the tree's wheel hold the same {len(a)} files")


def guard(folder: str, clone: str) -> None:
    Path(folder).mkdir(parents=True, exist_ok=True)
    (Path(folder) / "sitecustomize.py").write_text(GUARD.format(clone=str(Path(clone).resolve())))


def section() -> None:
    from psheads.reproduction import report

    config = report.ReportConfig()
    digest = {}
    for build in (report.canonical_section, report.llm_section, report.recipe_section):
        built = build([], config)
        digest[built.key] = {
            "claims": [[c.published.claim, c.measured, c.verdict, c.reason] for c in built.claims],
            "notes": built.notes,
            "tables": [[caption, frame.to_csv(index=False)] for caption, frame in built.tables],
            "figures": [[caption, figure.to_json()] for caption, figure in built.figures],
        }
    text = json.dumps(digest, sort_keys=True)
    print(hashlib.sha256(text.encode()).hexdigest(), len(text),
          sum(len(s["claims"]) for s in digest.values()), "claims")


if __name__ == "__main__":
    command, *arguments = sys.argv[1:]
    {"same-wheels": same_wheels, "guard": guard, "section": section}[command](*arguments)
