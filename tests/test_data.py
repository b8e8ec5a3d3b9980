"""``psheads.data``: the stored experiment tables ship inside the package and load by name."""

from __future__ import annotations

import pandas as pd
import pytest

from psheads import data
from psheads.reproduction import report


def test_tables_are_listed_by_name_and_read() -> None:
    names = data.tables()
    assert names == sorted(names)
    assert {"gating_sweep", "causal_tests", "gemma_scores", "gemma_frequency_heads", "atlas/gemma-3-270m/heads",
            "atlas/gemma-3-270m/planes", "atlas/summary_bands", "seeds/number_seed1_dynamics"} <= set(names)
    sweep = data.table("gating_sweep")
    assert isinstance(sweep, pd.DataFrame) and len(sweep) > 0
    planes = data.table("atlas/smollm2-135m/planes")  # gzipped
    assert {"layer", "head", "plane"} <= set(planes.columns)
    assert data.table("causal_tests", dtype={"hops": str})["hops"].map(type).eq(str).all()


def test_the_package_holds_tables_only() -> None:
    """The rendered figures stay in docs/data: only CSV and the JSON run records ship."""
    files = [path for path in data.TABLES.rglob("*") if path.is_file()]
    assert files and all(path.name.endswith((".csv", ".csv.gz", ".json")) for path in files)


def test_the_report_reads_the_shipped_tables_by_default() -> None:
    folder = report.ReportConfig().data_folder
    assert folder == data.TABLES
    for name in ["gating_sweep.csv", "causal_tests.csv", "gemma_summary.csv", "gemma_correlation.csv",
                 "gemma_scores.csv", "lengthgen_discrepancy.csv", *report.LLM_TASK_TABLES.values()]:
        assert (folder / name).is_file(), name
    assert report.recipe_cells(folder / report.RECIPE_FOLDER).shape[0] > 0


@pytest.mark.parametrize(("name", "error", "match"), [
    ("gating_swep", ValueError, r"stores no table 'gating_swep'.*'gating_sweep'"),
    ("gating_sweep.csv", ValueError, r"stores no table 'gating_sweep\.csv'; drop the \.csv: .*table\('gating_sweep'\)"),
    ("atlas/smollm2-135m/planes.csv.gz", ValueError, r"drop the \.csv\.gz: .*table\('atlas/smollm2-135m/planes'\)"),
    ("gemma_run", ValueError, r"stores no table.*run record.*path\('tables/gemma_run\.json'\)"),
    ("../prose", ValueError, "stores no table"),
    (3, TypeError, "name must be a table name"),
])
def test_unknown_tables_are_refused(name: object, error: type, match: str) -> None:
    with pytest.raises(error, match=match):
        data.table(name)  # type: ignore[arg-type]


def test_an_unknown_table_lists_only_close_names() -> None:
    """A wrong name used to answer with every one of the ~90 table names (3.3 KB)."""
    with pytest.raises(ValueError) as caught:
        data.table("gating_swep")
    message = str(caught.value)
    assert "'gating_sweep'" in message and "gemma_scores" not in message and len(message) < 300
    with pytest.raises(ValueError, match=r"no table 'zzz'; psheads\.data\.tables\(\) lists all \d+"):
        data.table("zzz")


def test_other_files_by_path() -> None:
    assert data.path("tables/gemma_run.json").is_file()
    with pytest.raises(FileNotFoundError, match="prose.txt"):
        data.path("nope.txt")


@pytest.mark.parametrize("name", ["/etc/passwd", "../models/pretrained/letter/config.json",
                                  "tables/../../models/pretrained/letter/config.json"])
def test_path_reads_only_inside_the_package(name: str) -> None:
    """path('/etc/passwd') and path('../models/...') used to return files outside the data folder."""
    with pytest.raises(ValueError, match=r"reads only inside psheads' data folder.*'prose\.txt'"):
        data.path(name)
    with pytest.raises(TypeError, match="name must be"):
        data.path(3)  # type: ignore[arg-type]
