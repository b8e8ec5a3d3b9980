"""Builds the reproduction report: the sections in order, each from the runs and the config, and
the context they ran in."""

from __future__ import annotations

import datetime
import logging
import os
import platform
import subprocess
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Any

import torch

from psheads.interface import validation
from psheads.interface.progress import progress_bar
from psheads.interface.version import __version__
from psheads.reproduction import rules
from psheads.reproduction.references import PAPER_A, PAPER_B
from psheads.reproduction.report.canonical import canonical_section
from psheads.reproduction.report.claims import Section
from psheads.reproduction.report.frequencies import frequency_section
from psheads.reproduction.report.inputs import ReportConfig, Run, load_runs
from psheads.reproduction.report.learning import learning_section
from psheads.reproduction.report.length_generalization import length_section
from psheads.reproduction.report.llms import llm_section
from psheads.reproduction.report.not_tested import not_tested_section
from psheads.reproduction.report.predictions import prediction_section
from psheads.reproduction.report.recipe import recipe_section
from psheads.reproduction.report.render import Report
from psheads.reproduction.report.seeds import seeds_section
from psheads.reproduction.report.theorems import theory_section
from psheads.results import schema

logger = logging.getLogger(__name__)

SECTIONS: tuple[Callable[[list[Run], ReportConfig], Section], ...] = (
    learning_section, frequency_section, length_section, recipe_section, theory_section, canonical_section, llm_section,
    seeds_section, prediction_section, not_tested_section,
)
"""The report's sections, in order: each builds one ``Section`` from the runs and the config."""


def rules_commit() -> str:
    """The commit that last changed the rules (``psheads.reproduction.rules``), with "+ local changes"
    when the working tree changes them; where psheads is not a git checkout, says so and gives the
    version."""
    folder = Path(rules.__file__).parent
    try:
        last = subprocess.run(["git", "log", "-1", "--format=%h %s", "--", "."], cwd=folder, capture_output=True,
                              text=True, timeout=20, check=True).stdout.strip()
        local = subprocess.run(["git", "status", "--porcelain", "--", "."], cwd=folder, capture_output=True,
                               text=True, timeout=20, check=True).stdout.strip()
    except (OSError, subprocess.SubprocessError):
        return f"unknown: psheads {__version__} is not a git checkout"
    if not last:
        return f"unknown: psheads {__version__}'s rules are not in its git history"
    return last + (" + local changes" if local else "")


def context(config: ReportConfig) -> dict[str, Any]:
    """Configuration, versions and machine the report ran on, and the rules' commit."""
    return {
        "rules": {"commit": rules_commit(), "pre-registration": rules.PRE_REGISTRATION},
        "config": {k: str(v) if isinstance(v, Path) else v for k, v in asdict(config).items()},
        "data folder": str(config.data_folder),
        "date (UTC)": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M"),
        "versions": {"python": platform.python_version(), **schema.versions()},
        "machine": {"platform": platform.platform(), "processor": platform.processor() or platform.machine(),
                    "cpus": os.cpu_count(), "torch threads": torch.get_num_threads(),
                    "cuda": torch.cuda.is_available()},
        "papers": {"A": PAPER_A.citation(), "B": PAPER_B.citation()},
    }


def reproduce(config: ReportConfig | None = None, *, progress: bool | None = None, **options: Any) -> Report:
    """Build the reproduction report (about a minute on a 2-core CPU with the defaults).

    Args:
        config: a ``ReportConfig``.
        progress: a progress bar over the sections (and over training with ``retrain``; default:
            in a notebook or on a terminal).
        **options: ``ReportConfig`` fields overriding ``config``.

    Returns:
        The ``Report``; ``report.write("report.html")`` saves it.
    """
    if config is not None and not isinstance(config, ReportConfig):
        raise TypeError(f"config must be a psheads.reproduction.report.ReportConfig, got {type(config).__name__}.")
    config = ReportConfig(**{**asdict(config or ReportConfig()), **options})
    progress = validation.optional_boolean(progress, "progress")
    start = time.perf_counter()
    runs = load_runs(config, progress)
    sections, timings = [], {}
    for build in progress_bar(SECTIONS, desc="report", progress=progress):
        began = time.perf_counter()
        sections.append(build(runs, config))
        timings[sections[-1].key] = round(time.perf_counter() - began, 1)
        logger.info("report: %s done in %.1f s", sections[-1].title, timings[sections[-1].key])
    info = context(config)
    info["timings (s)"] = {**timings, "total": round(time.perf_counter() - start, 1)}
    return Report(sections, info)
