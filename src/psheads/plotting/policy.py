"""The attention-policy figures: accuracy against the share of KV heads streamed, the map among random
maps, and a policy's map of kept and streamed KV heads."""

from __future__ import annotations

import numpy as np
import pandas as pd
import plotly.graph_objects as go
from plotly.subplots import make_subplots

from psheads.plotting.checks import check_frame, require_columns
from psheads.plotting.style import PALETTE, SEQUENTIAL, rgba, styled
from psheads.results import schema

CONDITION_COLORS = {"full": "#222222", "map": "#d62728", "anti": "#1f77b4", "streaming": "#7f7f7f",
                    "retrieval": "#2ca02c", "razor": "#ff7f0e", "beyond-window": "#9467bd", "rope-windows": "#e377c2",
                    "map-mean": "#ff9896",
                    "designed": "#8c564b", "random": "#bbbbbb", "random-layers": "#bcbd22"}
"""One colour per condition of an attention-policy evaluation (psheads' map in red)."""
_LINES = ("map", "anti", "streaming", "retrieval", "razor", "beyond-window", "rope-windows", "map-mean")


def _accuracy(frame: pd.DataFrame, what: str) -> pd.DataFrame:
    check_frame(frame, schema.POLICY_EVALUATION, ["task", "length", "budget", "condition", "draw", "metric", "value"],
                what)
    rows = frame[frame["metric"] == "accuracy"]
    if rows.empty:
        raise ValueError(f"{what} needs accuracy rows (metric 'accuracy'); this frame has only "
                         f"{sorted(set(frame['metric']))}.")
    return rows


def policy_curves(frame: pd.DataFrame) -> go.Figure:
    """Accuracy against the share of KV heads streamed: one panel per task (and length), one line per condition.

    Full attention is the dashed line; the random maps are a grey band (5th to 95th percentile) around
    their median. Only tasks where full attention was measured are drawn.

    Args:
        frame: an ``evaluate_policies`` frame (``psheads.experiments.attention_policy``), one model.

    Raises:
        ValueError: a wrong frame, or several models (draw one at a time).
    """
    rows = _accuracy(frame, "policy_curves")
    if "model" in rows and rows["model"].nunique() > 1:
        raise ValueError(f"policy_curves draws one model; this frame has {sorted(set(rows['model']))}: select one.")
    cells: list[tuple[str, int]] = sorted({(str(task), int(length)) for task, length
                                           in zip(rows["task"], rows["length"], strict=True)})
    figure = make_subplots(rows=1, cols=len(cells), shared_yaxes=True,
                           subplot_titles=[f"{task}, {length} tokens" for task, length in cells])
    for col, (task, length) in enumerate(cells, start=1):
        here = rows[(rows["task"] == task) & (rows["length"] == length)]
        full = here[here["condition"] == "full"]["value"]
        random = here[here["condition"] == "random"].groupby("budget")["value"]
        if len(random):
            band = random.quantile([0.05, 0.5, 0.95]).unstack()
            x = band.index.to_numpy()
            figure.add_trace(go.Scatter(x=np.r_[x, x[::-1]], y=np.r_[band[0.95], band[0.05][::-1]], fill="toself",
                                        fillcolor=rgba(CONDITION_COLORS["random"], 0.45), line={"width": 0},
                                        hoverinfo="skip", name="random maps (5–95 %)", legendgroup="random",
                                        showlegend=col == 1), row=1, col=col)
            figure.add_trace(go.Scatter(x=x, y=band[0.5], mode="lines", line={"color": "#999999", "dash": "dot"},
                                        name="random maps (median)", legendgroup="random-median",
                                        showlegend=col == 1), row=1, col=col)
        for index, condition in enumerate(_LINES):
            line = here[here["condition"] == condition].groupby("budget")["value"].mean()
            if line.empty:
                continue
            color = CONDITION_COLORS.get(condition, PALETTE[index % len(PALETTE)])
            figure.add_trace(go.Scatter(x=line.index, y=line.to_numpy(), mode="lines+markers", name=condition,
                                        legendgroup=condition, showlegend=col == 1,
                                        line={"color": color, "width": 3 if condition == "map" else 1.5},
                                        hovertemplate="%{x:.0%} streamed: %{y:.3f}<extra>" + condition + "</extra>"),
                             row=1, col=col)
        if len(full):
            figure.add_hline(y=float(full.mean()), line={"color": CONDITION_COLORS["full"], "dash": "dash"},
                             annotation_text="full attention", annotation_position="bottom right", row=1, col=col)
    figure.update_xaxes(title_text="share of KV heads streamed", tickformat=".0%")
    figure.update_yaxes(range=[-0.02, 1.05])
    figure.update_yaxes(title_text="accuracy (teacher-forced)", row=1, col=1)
    return styled(figure, legend_title="heads chosen by")


def random_distribution(frame: pd.DataFrame, budget: float = 0.5) -> go.Figure:
    """At one budget, every random map's accuracy per task (and length), with full attention, psheads' map, the
    anti-map and the anchors marked: where the map falls in the permutation distribution.

    Args:
        frame: an ``evaluate_policies`` frame, one model.
        budget: the budget drawn (the pre-registered 0.5 by default).

    Raises:
        ValueError: a wrong frame, or no random map at ``budget``.
    """
    every = _accuracy(frame, "random_distribution")
    every = every.assign(cell=[f"{task}, {length}" for task, length in zip(every["task"], every["length"],
                                                                           strict=True)])
    rows = every[np.isclose(every["budget"], budget)]
    if rows[rows["condition"] == "random"].empty:
        measured = sorted(set(every[every["condition"] == "random"]["budget"]))
        raise ValueError(f"random_distribution needs random maps at budget {budget}; this frame has them at "
                         f"{measured}.")
    cells = set(rows["cell"])
    figure = go.Figure()
    for condition in ("random", "random-layers"):
        part = rows[rows["condition"] == condition]
        if len(part):
            figure.add_trace(go.Box(x=part["cell"], y=part["value"], name=f"{condition} maps", boxpoints="all",
                                    jitter=0.4, pointpos=0, marker={"color": CONDITION_COLORS[condition], "size": 6},
                                    line={"color": "#888888"}, fillcolor="rgba(0,0,0,0)"))
    marked = [("full", every[(every["condition"] == "full") & every["cell"].isin(cells)])]
    marked += [(condition, rows[rows["condition"] == condition])
               for condition in ("map", "anti", "retrieval", "razor", "beyond-window")]
    for condition, part in marked:
        if part.empty:
            continue
        figure.add_trace(go.Scatter(x=part["cell"], y=part["value"], mode="markers", name=condition,
                                    marker={"color": CONDITION_COLORS[condition],
                                            "size": 14 if condition == "map" else 10,
                                            "symbol": "line-ew-open" if condition == "full" else "diamond",
                                            "line": {"width": 2, "color": CONDITION_COLORS[condition]}}))
    figure.update_yaxes(title_text="accuracy (teacher-forced)", range=[-0.02, 1.05])
    return styled(figure, title=f"{budget:.0%} of KV heads streamed", boxmode="group", legend_title="heads chosen by")


def policy_map(policy_frame: pd.DataFrame) -> go.Figure:
    """A policy as a layers × KV heads heatmap of keep scores, the streamed heads marked with a cross.

    Args:
        policy_frame: ``HeadPolicy.frame(budget)`` (one row per query head; KV heads are read once).

    Raises:
        ValueError: missing columns or no rows.
    """
    require_columns(policy_frame, ["layer", "kv_head", "keep", "streamed"], "policy_map",
                    " (HeadPolicy.frame())")
    if policy_frame.attrs.get("level") == "query":
        raise ValueError("policy_map draws KV heads: pass HeadPolicy.frame(budget) at level 'kv' (a query-level "
                         "frame streams query heads one at a time).")
    kv = policy_frame.drop_duplicates(["layer", "kv_head"])
    grid = kv.pivot(index="layer", columns="kv_head", values="keep")
    streamed = kv[kv["streamed"]]
    figure = go.Figure(go.Heatmap(z=grid.to_numpy(), x=[str(c) for c in grid.columns], y=grid.index,
                                  colorscale=SEQUENTIAL, zmin=0, zmax=1, colorbar={"title": "keep score"},
                                  hovertemplate="layer %{y}, KV head %{x}: keep %{z:.3f}<extra></extra>"))
    figure.add_trace(go.Scatter(x=streamed["kv_head"].astype(str), y=streamed["layer"], mode="markers",
                                marker={"symbol": "x-thin-open", "size": 10, "color": "white", "line": {"width": 2}},
                                name="streamed", hoverinfo="skip"))
    budget = policy_frame.attrs.get("budget")
    title = "kept (full cache) and streamed KV heads" + (f" at {budget:.0%} streamed" if budget is not None else "")
    figure.update_xaxes(title_text="KV head", type="category")
    figure.update_yaxes(title_text="layer", autorange="reversed")
    return styled(figure, title=title)
