"""MkDocs hook: tables of measured results, written at build time from the CSV files the scripts produce.

A line ``<!-- table: NAME -->`` becomes the table ``VIEWS[NAME]`` builds from the stored tables
shipped in the package (``psheads.data.TABLES``, ``src/psheads/data/tables/`` in a clone), so a page
never types a measured number: rerunning the script (``scripts/atlas.py``, ``scripts/llm_tasks.py``)
and rebuilding the site updates it.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import pandas as pd

from psheads.data import TABLES as DATA
from psheads.reproduction.report import LLM_TASK_TABLES as LLM_TASK_FILES

ATLAS = DATA / "atlas"
MARKER = re.compile(r"^<!-- table: (?P<name>[a-z_]+) -->$", re.MULTILINE)
MODELS = ("gemma-3-270m", "smollm2-135m", "qwen2.5-coder-0.5b")


def _number(value: float, digits: int = 2) -> str:
    return "—" if pd.isna(value) else f"{value:.{digits}f}"


def _interval(low: float, high: float, digits: int = 2) -> str:
    return "—" if pd.isna(low) or pd.isna(high) else f"[{low:.{digits}f}, {high:.{digits}f}]"


def _side(low: float, high: float) -> str:
    """Where a 95% interval of a difference lies: above 0, below 0, or across it (inconclusive)."""
    if pd.isna(low) or pd.isna(high):
        return "not measured"
    return "above 0" if low > 0 else "below 0" if high < 0 else "inconclusive"


def _markdown(rows: list[list[str]], header: list[str]) -> str:
    lines = ["| " + " | ".join(header) + " |", "|" + "---|" * len(header)]
    return "\n".join(lines + ["| " + " | ".join(row) + " |" for row in rows])


def _ordered(frame: pd.DataFrame) -> pd.DataFrame:
    order = {model: i for i, model in enumerate(MODELS)}
    return frame.assign(_order=frame["model"].map(order)).sort_values(["_order", "prompts", "length"], kind="stable")


def _summary(name: str) -> pd.DataFrame:
    return _ordered(pd.read_csv(ATLAS / f"summary_{name}.csv"))


def early_late() -> str:
    frame = _summary("early_late")
    frame = frame[(frame["group"] == "late - early") & frame["prompts"].isin(["natural", "random"])]
    rows = [[r.model, r.prompts, str(r.length), f"s_{'POS' if r.score == 'positional' else 'SYM'}",
             _number(r.median), _interval(r.median_ci_low, r.median_ci_high), _side(r.median_ci_low, r.median_ci_high)]
            for r in frame.itertuples()]
    return _markdown(rows, ["model", "prompts", "tokens", "score", "late − early (median)", "95% CI", "verdict"])


def correlation() -> str:
    rows = [[r.model, r.prompts, str(r.length), _number(r.r), _interval(r.ci_low, r.ci_high), str(r.n)]
            for r in _summary("correlation").itertuples()]
    return _markdown(rows, ["model", "prompts", "tokens", "r(s_POS, s_SYM)", "95% CI", "heads"])


def bands() -> str:
    frame = _summary("bands")
    frame = frame[frame["prompts"] == "natural"]
    wide = frame.pivot_table(index=["model", "length", "band_index", "band", "n"], columns="score",
                             values="median").reset_index()
    wide = _ordered(wide.assign(prompts="natural")).sort_values(["_order", "length", "band_index"], kind="stable")
    rows = [[r.model, str(r.length), r.band, str(r.n), _number(r.positional), _number(r.symbolic)]
            for r in wide.itertuples()]
    return _markdown(rows, ["model", "tokens", "plane period", "planes × heads", "median s_POS", "median s_SYM"])


def local_global() -> str:
    frame = _summary("local_global")
    frame = frame[frame["group"] == "global - local"]
    rows = [[r.prompts, str(r.length), f"s_{'POS' if r.score == 'positional' else 'SYM'}", _number(r.median),
             _interval(r.median_ci_low, r.median_ci_high), _side(r.median_ci_low, r.median_ci_high)]
            for r in frame.itertuples()]
    return _markdown(rows, ["prompts", "tokens or window", "score", "global − local (median)", "95% CI", "verdict"])


def kv_groups() -> str:
    rows = [[r.model, r.prompts, str(r.length), str(r.pairs), _number(r.agreement, 3), _number(r.baseline_q95, 3),
             r.verdict] for r in _summary("kv_groups").itertuples()]
    return _markdown(rows, ["model", "prompts", "tokens", "pairs", "label agreement", "shuffle 95th pct", "verdict"])


def barbero() -> str:
    frame = _summary("barbero")
    rows = []
    for r in frame.itertuples():
        estimate = r.r if r.rule.startswith("a") else r.difference
        rows.append([r.model, r.prompts, str(r.length), r.rule.split(":")[0], _number(estimate),
                     _interval(r.ci_low, r.ci_high, 3), r.verdict])
    return _markdown(rows, ["model", "prompts", "tokens", "rule", "estimate", "95% CI", "verdict"])


def labels() -> str:
    frame = _summary("labels")
    frame = frame[frame["method"] == "swap"]
    wide = frame.pivot_table(index=["model", "prompts", "length"], columns="label", values="share",
                             fill_value=0.0).reset_index()
    columns = [label for label in ("positional", "symbolic", "mixed", "uniform") if label in wide.columns]
    rows = [[r["model"], r["prompts"], str(r["length"]), *(_number(r[c]) for c in columns)]
            for _, r in _ordered(wide).iterrows()]
    return _markdown(rows, ["model", "prompts", "tokens or window", *columns])


def llm_tasks() -> str:
    frames = [pd.read_csv(DATA / name) for model, name in LLM_TASK_FILES.items() if (DATA / name).is_file()]
    frame = pd.concat(frames, ignore_index=True)
    order = {model: i for i, model in enumerate(MODELS)}
    frame = frame.assign(_order=frame["model"].map(order)).sort_values(["_order", "task", "window"], kind="stable")
    rows = [[r.model, r.task, str(r.window), f"{r.accuracy:.2f} {_interval(r.ci_low, r.ci_high)}", _number(r.chance),
             str(r.n)] for r in frame.itertuples()]
    return _markdown(rows, ["model", "task", "window", "accuracy [95% CI]", "chance", "prompts"])


VIEWS: dict[str, Callable[[], str]] = {
    "early_late": early_late, "correlation": correlation, "bands": bands, "local_global": local_global,
    "kv_groups": kv_groups, "barbero": barbero, "labels": labels, "llm_tasks": llm_tasks,
}


def on_page_markdown(markdown: str, **_: object) -> str:
    """Every table marker of the page replaced by its table."""
    return MARKER.sub(lambda match: VIEWS[match["name"]](), markdown)
