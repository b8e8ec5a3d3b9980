"""The gating-sweep figure: accuracy per task and frequency band, as an annotated heatmap."""

from __future__ import annotations

import pandas as pd
import plotly.graph_objects as go

from psheads.plotting.checks import check_frame
from psheads.plotting.style import SEQUENTIAL, styled
from psheads.results import schema


def accuracy_by_band(frame: pd.DataFrame) -> go.Figure:
    """Test accuracy per task and frequency band of a gated training sweep: an annotated heatmap.

    Each cell is the mean over seeds of the runs' accuracy (each run counted once, however many
    heads it has), annotated ``mean ± spread`` where the spread is half the range over seeds;
    hovering shows the band's planes and the number of seeds. Tasks (rows) and bands (columns)
    keep their order in the frame.

    Args:
        frame: a ``psheads.experiments.gating_sweep.gating_sweep`` frame (``task, band, seed, accuracy``; ``planes``
            shows on hover), such as ``psheads.data.table("gating_sweep")``.

    Raises:
        ValueError: missing columns, no rows, or one run with two different accuracies.
    """
    check_frame(frame, schema.GATING_SWEEP, ["task", "band", "seed", "accuracy"], "accuracy_by_band")
    runs = frame.drop_duplicates(["task", "band", "seed", "accuracy"])
    if runs.duplicated(["task", "band", "seed"]).any():
        raise ValueError("accuracy_by_band: a (task, band, seed) run has several different accuracies.")
    summary = runs.groupby(["task", "band"], sort=False)["accuracy"].agg(["mean", "min", "max", "count"])
    tasks = list(dict.fromkeys(runs["task"]))
    bands = list(dict.fromkeys(runs["band"]))
    mean = summary["mean"].unstack("band").reindex(index=tasks, columns=bands)
    spread = ((summary["max"] - summary["min"]) / 2).unstack("band").reindex(index=tasks, columns=bands)
    count = summary["count"].unstack("band").reindex(index=tasks, columns=bands)
    planes = (runs.drop_duplicates("band").set_index("band")["planes"].reindex(bands).astype(str).tolist()
              if "planes" in runs else [""] * len(bands))
    text = [["" if pd.isna(m) else f"{m:.2f} ± {s:.2f}" for m, s in zip(mean.loc[t], spread.loc[t], strict=True)]
            for t in tasks]
    custom = [[[planes[j], "" if pd.isna(count.loc[t].iloc[j]) else int(count.loc[t].iloc[j])]
               for j in range(len(bands))] for t in tasks]
    figure = go.Figure(go.Heatmap(
        z=mean.to_numpy(), x=bands, y=tasks, zmin=0, zmax=1, colorscale=SEQUENTIAL, text=text,
        texttemplate="%{text}", customdata=custom, colorbar={"title": {"text": "accuracy"}},
        hovertemplate="%{y}, band %{x} (planes %{customdata[0]}): %{z:.3f} over %{customdata[1]} seeds<extra></extra>"))
    figure.update_xaxes(showline=False, ticks="")
    figure.update_yaxes(showline=False, ticks="")
    return styled(figure, xaxis_title="frequency band the heads may use", yaxis_title="task",
                  yaxis_autorange="reversed")
