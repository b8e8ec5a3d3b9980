"""What a package index shows: the README is the long description, so its links must work off the repository."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
LINK = re.compile(r"!?\[[^\]]*\]\((?P<target>[^)\s]+)\)")


def test_readme_links_work_off_the_repository() -> None:
    """Every link is absolute (PyPI has no repository to resolve ``docs/...`` against); those into the
    repository start with the project's Repository URL and name a file that exists."""
    repository = re.search(r'^Repository = "(.+)"$', (ROOT / "pyproject.toml").read_text(), re.M)[1]
    own = re.compile(rf"^{re.escape(repository)}/(?:blob|raw)/main/(?P<path>[^#]+)")
    targets = LINK.findall((ROOT / "README.md").read_text(encoding="utf-8"))
    assert targets
    relative = [t for t in targets if not t.startswith(("https://", "http://", "#"))]
    assert not relative, f"make these README links absolute ({repository}/blob/main/...): {relative}"
    missing = [t for t in targets if (m := own.match(t)) and not (ROOT / m["path"]).is_file()]
    assert not missing, f"README links to files the repository does not hold: {missing}"
