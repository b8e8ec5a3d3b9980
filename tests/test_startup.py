"""Fast start: ``import psheads`` and the command line's help load nothing heavy."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import psheads

HEAVY = ("torch", "transformers", "transformer_lens", "pandas", "plotly")

PROBE = """
import json, sys
import psheads
after_import = sorted(m for m in {heavy} if m in sys.modules)
from psheads import cli
for argv in (["--help"], ["score", "--help"], ["lengthgen", "--help"], ["--version"], ["score"], ["nope"]):
    try:
        cli.main(argv)
    except SystemExit:
        pass
after_cli = sorted(m for m in {heavy} if m in sys.modules)
psheads.score_heads
print(json.dumps([after_import, after_cli, "torch" in sys.modules]))
"""


def test_import_and_help_load_no_heavy_module() -> None:
    result = subprocess.run([sys.executable, "-c", PROBE.format(heavy=HEAVY)], capture_output=True, text=True,
                            timeout=300, check=True)
    after_import, after_cli, torch_after_use = json.loads(result.stdout.splitlines()[-1])
    assert after_import == [] and after_cli == []
    assert torch_after_use  # the first public name used imports its submodule


def test_every_public_name_resolves_and_is_listed() -> None:
    for name in psheads.__all__:
        assert getattr(psheads, name) is not None, name
    assert set(psheads.__all__) <= set(dir(psheads))
    assert psheads.plotting.__name__ == "psheads.plotting" and psheads.zoo.__name__ == "psheads.models.zoo"
    from psheads import score_heads
    from psheads.measure.scoring import score_heads as defined

    assert score_heads is defined
    with pytest.raises(AttributeError, match="no attribute 'no_such_name'"):
        psheads.no_such_name  # noqa: B018


def test_the_folder_above_a_clone_imports_the_installed_package(tmp_path) -> None:
    """src layout: from the folder that holds a clone named ``psheads``, ``import psheads`` is the real
    package, not the clone's folder as an empty namespace package."""
    (tmp_path / "psheads").symlink_to(Path(__file__).resolve().parents[1], target_is_directory=True)
    result = subprocess.run([sys.executable, "-c", "import psheads; print(psheads.__file__, psheads.__version__)"],
                            cwd=tmp_path, capture_output=True, text=True, timeout=120)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip().endswith(psheads.__version__) and "__init__.py" in result.stdout
