"""Measuring the cost of a head map used as a KV-cache policy, against chance and against the anchors.

``evaluate_policies(model, tokenizer)`` scores every head of a model at each evaluation length,
makes psheads' policy and every comparison condition from it, and runs the long-context tasks of
``psheads.tasks.long_context`` (plus the perplexity of prose) under each, teacher-forced, at each
budget. All conditions stream the same number of KV heads (or, for StreamingLLM, keep the same
total KV), so they differ only in *which* heads they stream:

* ``full``: full attention (the reference of every cell);
* ``map``: psheads' default rule (a KV head kept by the largest symbolic score in its group), scored
  on prose at the evaluation length;
* ``random`` (``n_random`` draws) and ``random-layers`` (as many draws, each streaming as many KV
  heads per layer as the map does, at the primary budget): the permutation distribution;
* ``anti``: the map reversed (the most symbolic heads streamed);
* ``streaming``: StreamingLLM, every head streamed with the window that keeps the same total KV;
* ``retrieval``, ``razor``, ``beyond-window``: the anchors' criteria and the simple baseline,
  measured on the same model (``psheads.policy.criteria``);
* ``rope-windows``: the map with per-head windows from RoPE wavelengths at the same total KV;
* ``map-mean``: psheads' scores with a KV head's score the *mean* over its query heads instead of the
  largest (added after Gemma 3's result at 2,048 tokens, where the largest score saturates, and before
  any other measurement; reported beside the map, graded by no rule);
* ``designed``: where the model has its own local and global layers (Gemma 3), its local layers
  streamed, at its own share, beside the map at that share.

The rules that grade the result were fixed before any measurement (``policy_rules``). Long runs
resume: with ``resume=`` a JSON-lines file, every finished row is appended as it is measured and a
rerun skips what is there.
"""

from __future__ import annotations

import hashlib
import json
import logging
import math
from collections.abc import Iterator
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch

import psheads.data as data
from psheads.experiments import policy_rules as rules
from psheads.experiments.atlas import natural_prompts
from psheads.interface import validation
from psheads.interface.atomic import write_atomic
from psheads.interface.config import from_known_fields
from psheads.interface.progress import progress_bar
from psheads.policy import HeadPolicy, attention_shape, kept_tokens, kv_bytes, make_policy, streaming_everywhere
from psheads.policy.criteria import anchor_scores
from psheads.policy.forward import check_rope, windowed
from psheads.policy.head_policy import aggregate, tie_free_keep
from psheads.results import schema
from psheads.rope.backends.facts import logits_at, preserved_state
from psheads.tasks.long_context import TeacherForced, long_context_names, long_context_task

logger = logging.getLogger(__name__)

CONDITIONS = schema.POLICY_CONDITIONS
ANCHOR_CONDITIONS = {"retrieval": "retrieval_ranked", "razor": "razor", "beyond-window": "beyond_window"}
"""Condition name → the column of ``anchor_scores`` it ranks by."""


@dataclass(frozen=True)
class PolicyEvaluationConfig:
    """What ``evaluate_policies`` measures (recorded in the frame's ``attrs``; defaults: the pre-registered plan).

    Attributes:
        lengths: prompt lengths in tokens.
        tasks: long-context tasks (``psheads.tasks.long_context``).
        budgets: shares of KV heads streamed.
        sink: sink tokens of every streamed head.
        recent: recent tokens of every streamed head.
        n_random: random maps per budget (and as many within the map's layers, at the primary budget).
        n_prompts: prompts per task and length.
        score_prompts: prose prompts psheads' map is scored on, per length.
        criteria_prompts: needle prompts the anchors' criteria are measured on, per length.
        perplexity: also measure the perplexity of a prose window (the no-harm check).
        score_on: the prompts psheads' map is scored on: ``"prose"`` (windows of the shipped prose at
            each length) or the name of one of ``tasks`` (its prompts, drawn with ``seed + 2000``).
        conditions: the conditions to run (``full`` always runs).
        seed: seed of the evaluation prompts and the random maps (the criteria's prompts use ``seed + 1000``).
    """

    lengths: tuple[int, ...] = (2048,)
    tasks: tuple[str, ...] = rules.RETRIEVAL_TASKS
    budgets: tuple[float, ...] = rules.BUDGETS
    sink: int = rules.SINK
    recent: int = rules.RECENT
    n_random: int = rules.N_RANDOM
    n_prompts: int = 2
    score_prompts: int = 4
    criteria_prompts: int = 2
    perplexity: bool = True
    score_on: str = "prose"
    conditions: tuple[str, ...] = CONDITIONS
    seed: int = 0

    def __post_init__(self) -> None:
        def put(name: str, value: Any) -> None:
            object.__setattr__(self, name, value)

        put("lengths", validation.integers(self.lengths, "lengths", minimum=16, unique=True))
        if isinstance(self.tasks, str):
            raise TypeError(f"tasks must be a list of task names, got the string {self.tasks!r}.")
        unknown = sorted(set(self.tasks) - set(long_context_names()))
        if unknown:
            raise ValueError(f"Unknown long-context tasks {unknown}; registered: {list(long_context_names())}.")
        put("tasks", tuple(self.tasks))
        put("budgets", tuple(validation.number(b, "budgets item", minimum=0.0, maximum=1.0) for b in self.budgets))
        put("sink", validation.integer(self.sink, "sink", minimum=0))
        put("recent", validation.integer(self.recent, "recent", minimum=1))
        put("n_random", validation.integer(self.n_random, "n_random", minimum=0))
        for name in ("n_prompts", "score_prompts", "criteria_prompts"):
            put(name, validation.integer(getattr(self, name), name, minimum=1))
        put("perplexity", validation.boolean(self.perplexity, "perplexity"))
        if self.score_on != "prose" and self.score_on not in self.tasks:
            raise ValueError(f"score_on must be 'prose' or one of the tasks {list(self.tasks)}, got {self.score_on!r}.")
        unknown = sorted(set(self.conditions) - set(CONDITIONS))
        if unknown:
            raise ValueError(f"Unknown conditions {unknown}; choose from {list(CONDITIONS)}.")
        put("conditions", tuple(c for c in CONDITIONS if c in self.conditions or c == "full"))
        put("seed", validation.seed(self.seed))

    @property
    def primary_budget(self) -> float:
        """The budget of the layered random maps and the pooled tests (the pre-registered one when measured)."""
        return rules.PRIMARY_BUDGET if rules.PRIMARY_BUDGET in self.budgets else self.budgets[0]

    def to_dict(self) -> dict[str, Any]:
        return {key: list(value) if isinstance(value, tuple) else value for key, value in asdict(self).items()}

    @classmethod
    def from_dict(cls, values: dict[str, Any]) -> PolicyEvaluationConfig:
        return from_known_fields(cls, values)


@dataclass
class PolicyEvaluation:
    """What ``evaluate_policies`` measured.

    Attributes:
        evaluation: one row per model, task, length, budget, condition and draw (``schema.POLICY_EVALUATION``).
        maps: one row per length, condition, layer and KV head: ``keep`` (the tie-free keep score) and
            ``kv_score`` of every deterministic condition's policy.
        scores: psheads' head scores at each length (a ``score_heads`` frame with a ``length`` column).
        criteria: the anchors' criteria at each length (``anchor_scores`` with a ``length`` column).
        extras: G4–G6's measurements (agreement with the retrieval map, AUC, KV ratios), per length.
    """

    evaluation: pd.DataFrame
    maps: pd.DataFrame
    scores: pd.DataFrame
    criteria: pd.DataFrame
    extras: dict[str, Any] = field(default_factory=dict)

    def grades(self, forward_cost: float | None = None) -> pd.DataFrame:
        """The pre-registered goals' verdicts (``policy_rules.grade``), the worst length's extras."""
        agreement = self.extras.get("agreement") or {}
        auc = self.extras.get("auc") or {}
        ratios = self.extras.get("kv_ratios") or {}
        worst_agreement = min(agreement.values(), key=lambda a: a["spearman"]) if agreement else None
        worst_ratios = ({b: min(r[b] for r in ratios.values()) for b in next(iter(ratios.values()))}
                        if ratios else None)
        return rules.grade(self.evaluation, agreement=worst_agreement,
                           auc=min(auc.values()) if auc else None, kv_ratios=worst_ratios, forward_cost=forward_cost)


# --- the policies of every condition -----------------------------------------------------------------
def reversed_policy(policy: HeadPolicy) -> HeadPolicy:
    """The anti-map: the same scores, the ranking reversed (the heads the map keeps are streamed first)."""
    return policy.with_changes(keep=1.0 - np.asarray(policy.keep), query_keep=1.0 - np.asarray(policy.query_keep),
                               provenance={**policy.provenance, "condition": "anti"})


def random_policy(policy: HeadPolicy, seed: int) -> HeadPolicy:
    """A map of the same model with keep scores drawn uniformly (seeded): ``policy``'s structure, random ranks."""
    generator = np.random.default_rng(seed)
    kv = tie_free_keep(generator.random(np.shape(policy.keep)))
    query = tie_free_keep(generator.random(np.shape(policy.query_keep)))
    return policy.with_changes(keep=kv, query_keep=query, kv_scores=kv, query_scores=query, wavelengths=None,
                               provenance={"condition": "random", "draw": seed})


def layered_random_policy(policy: HeadPolicy, budget: float, seed: int) -> HeadPolicy:
    """A random map that streams, in every layer, as many KV heads as ``policy`` does at ``budget``."""
    generator = np.random.default_rng(seed)
    streamed = policy.streamed(budget)
    noise = generator.random(streamed.shape)
    chosen = np.zeros(streamed.shape, dtype=bool)
    for i, count in enumerate(streamed.sum(1)):
        chosen[i, np.argsort(noise[i], kind="stable")[:count]] = True
    # chosen heads rank below every other: at this budget the count rule streams exactly them
    kv = tie_free_keep(np.where(chosen, noise, 1.0 + noise))
    query = tie_free_keep(generator.random(np.shape(policy.query_keep)))
    return policy.with_changes(keep=kv, query_keep=query, kv_scores=kv, query_scores=query, wavelengths=None,
                               provenance={"condition": "random-layers", "draw": seed, "budget": budget})


def mean_policy(policy: HeadPolicy) -> HeadPolicy:
    """The map with a KV head's score the mean of its query heads' instead of the largest."""
    kv = aggregate(np.asarray(policy.query_scores), policy.kv_head_of, policy.n_kv_heads, "mean")
    return policy.with_changes(kv_scores=kv, keep=tie_free_keep(kv), wavelengths=None,
                               provenance={**policy.provenance, "aggregation": "mean", "condition": "map-mean"})


def designed_policy(policy: HeadPolicy) -> HeadPolicy | None:
    """The model's own design as a map: its sliding-window layers streamed, its global layers kept
    (None for a model without both kinds)."""
    windows = policy.model_windows
    if windows is None or all(w is None for w in windows) or all(w is not None for w in windows):
        return None
    grid = np.array([[0.0 if w is not None else 1.0] * policy.n_kv_heads for w in windows])
    local = float(np.mean([w is not None for w in windows]))
    return policy.with_changes(keep=tie_free_keep(grid), kv_scores=grid, budget=local, wavelengths=None,
                               provenance={"condition": "designed"})


def auc(positives: np.ndarray, negatives: np.ndarray) -> float:
    """P(a positive scores above a negative), ties counted half (the Mann–Whitney AUC)."""
    positives, negatives = np.asarray(positives, float), np.asarray(negatives, float)
    if not positives.size or not negatives.size:
        return math.nan
    above = (positives[:, None] > negatives[None, :]).sum() + 0.5 * (positives[:, None] == negatives[None, :]).sum()
    return float(above / (positives.size * negatives.size))


def agreement(policy: HeadPolicy, other: HeadPolicy, budget: float = rules.PRIMARY_BUDGET) -> dict[str, float]:
    """Spearman ρ of two maps' KV scores (ties share their average rank; unscored heads left out) and the
    share of the heads ``policy`` streams at ``budget`` that ``other`` streams too."""
    both = pd.DataFrame({"first": np.asarray(policy.kv_scores).ravel(),
                         "second": np.asarray(other.kv_scores).ravel()}).dropna()
    rho = float(both["first"].rank().corr(both["second"].rank()))  # Pearson on average ranks: Spearman's ρ
    mine, theirs = policy.streamed(budget), other.streamed(budget)
    overlap = float((mine & theirs).sum() / max(1, mine.sum()))
    return {"spearman": rho, "overlap": overlap}


# --- measuring ---------------------------------------------------------------------------------------
def teacher_forced(model: Any, batch: TeacherForced, batch_size: int = 64) -> tuple[int, int]:
    """``(correct, total)`` measurements of ``batch`` on ``model``, ``batch_size`` prompts per forward."""
    positions = batch.logit_positions()
    predictions = torch.cat([logits_at(model, batch.tokens[start:start + batch_size],
                                       positions[start:start + batch_size]).argmax(-1).cpu()
                             for start in range(0, len(batch), batch_size)])
    return batch.score(predictions)


def perplexity(model: Any, tokens: torch.Tensor) -> tuple[float, int]:
    """The perplexity of the second half of ``tokens`` (``[1, pos]``) and how many tokens it predicts."""
    length = int(tokens.shape[1])
    positions = torch.arange(length // 2, length - 1)[None]
    logits = logits_at(model, tokens, positions).double().cpu()
    targets = tokens[0, length // 2 + 1:]
    nll = torch.nn.functional.cross_entropy(logits[0], targets, reduction="mean")
    return float(torch.exp(nll)), int(targets.numel())


def _key(row: dict) -> tuple:
    return (row["model"], row["task"], int(row["length"]), round(float(row["budget"]), 6), row["condition"],
            int(row["draw"]))


MEASUREMENT_VERSION = 2
"""Bumped whenever what a condition measures changes (2: Wu et al.'s retrieval score as their code has it,
StreamingLLM's equal-KV window and per-head RoPE windows from the kept tokens): rows of another version are
not resumed."""


def measurement_fingerprint(config: PolicyEvaluationConfig) -> str:
    """What a resumed row must share with this run to be reused: every setting a row's value depends on
    (the tasks as built, sink, recent, seed, prompts) and ``MEASUREMENT_VERSION``; not the lengths,
    budgets, conditions or draws, which are part of each row's key."""
    settings = {"version": MEASUREMENT_VERSION, "tasks": {task: repr(long_context_task(task)) for task in config.tasks},
                **{name: getattr(config, name) for name in ("sink", "recent", "seed", "n_prompts", "score_prompts",
                                                              "criteria_prompts", "score_on")}}
    return hashlib.sha256(json.dumps(settings, sort_keys=True).encode()).hexdigest()[:16]


class _Store:
    """The rows measured so far, appended to a JSON-lines file when resuming (one line per row); rows of
    another ``measurement_fingerprint`` in the file are left there and ignored. A last line cut short (the
    process died writing it) is dropped from the file, and its row measured again."""

    def __init__(self, path: Path | None, fingerprint: str) -> None:
        self.path = path
        self.fingerprint = fingerprint
        self.rows: dict[tuple, dict] = {}
        other = 0
        for row in _read_rows(path) if path is not None and path.is_file() else []:
            if row.get("run") == fingerprint:
                self.rows[_key(row)] = row
            else:
                other += 1
        if other:
            logger.warning("%s: %d rows measured with other settings are not resumed (settings %s)", path, other,
                           fingerprint)

    def __contains__(self, key: tuple) -> bool:
        return key in self.rows

    def add(self, row: dict) -> None:
        row = {**row, "run": self.fingerprint}
        self.rows[_key(row)] = row
        if self.path is not None:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            with self.path.open("a", encoding="utf-8") as stream:
                stream.write(json.dumps(row, allow_nan=True) + "\n")
                stream.flush()


def _read_rows(path: Path) -> list[dict]:
    """The rows of a JSON-lines file ``_Store`` appended to; a last line cut short is removed from the file.

    Raises:
        ValueError: a line before the last that is not a JSON object (the message names the file and line).
    """
    lines = path.read_text(encoding="utf-8").splitlines()
    rows = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as err:
            if number < len(lines):
                raise ValueError(f"{path}, line {number}, is not a measured row ({err}): the file was edited or "
                                 "damaged; delete that line (its row is measured again), or the file.") from None
            logger.warning("%s: the last row was cut short (%s); it is measured again", path, err)
            write_atomic(path, "".join(kept + "\n" for kept in lines[:-1]))  # appends start on a new line
            break
        if not isinstance(row, dict):
            raise ValueError(f"{path}, line {number}, is not a measured row (a JSON object): the file was edited or "
                             "damaged; delete that line (its row is measured again), or the file.")
        rows.append(row)
    return rows


Run = tuple[str, float, int, HeadPolicy, float]
"""(condition, the row's budget, draw, policy, the budget the policy runs at)."""


def _conditions(config: PolicyEvaluationConfig, policy: HeadPolicy, anchors: dict[str, HeadPolicy],
                rope: HeadPolicy | None, length: int) -> Iterator[Run]:
    """Every run at one length, ``full`` excluded."""
    wanted = set(config.conditions)
    averaged = mean_policy(policy) if "map-mean" in wanted else None
    designed = designed_policy(policy) if "designed" in wanted else None
    budgets = list(config.budgets)
    for budget in budgets:
        if "map" in wanted:
            yield "map", budget, 0, policy, budget
        if "anti" in wanted:
            yield "anti", budget, 0, reversed_policy(policy), budget
        if "streaming" in wanted:  # every head streamed, with the window that keeps the same total KV
            yield "streaming", budget, 0, streaming_everywhere(policy, length, budget), 1.0
        for condition, anchor in anchors.items():
            yield condition, budget, 0, anchor, budget
        if rope is not None:
            yield "rope-windows", budget, 0, rope, budget
        if averaged is not None:
            yield "map-mean", budget, 0, averaged, budget
        if "random" in wanted:
            for draw in range(config.n_random):
                yield "random", budget, draw, random_policy(policy, config.seed + draw), budget
        if "random-layers" in wanted and budget == config.primary_budget:
            for draw in range(config.n_random):
                yield "random-layers", budget, draw, layered_random_policy(policy, budget, config.seed + draw), budget
    if designed is not None:
        yield "designed", designed.budget, 0, designed, designed.budget
        if "map" in wanted and designed.budget not in budgets:
            yield "map", designed.budget, 0, policy, designed.budget


def evaluate_policies(model: Any, tokenizer: Any = None, config: PolicyEvaluationConfig | None = None, *,
                      model_name: str | None = None, resume: str | Path | None = None,
                      progress: bool | None = None) -> PolicyEvaluation:
    """psheads' map and every comparison condition as KV-cache policies of ``model`` (see the module docstring).

    Args:
        model: a Hugging Face ``PreTrainedModel`` with SDPA attention (the fast path; it is scored
            through a bridged copy) or a TransformerLens RoPE model.
        tokenizer: its Hugging Face tokenizer (default: the TransformerLens model's own).
        config: what to measure (default: ``PolicyEvaluationConfig()``).
        model_name: the ``model`` column (default: the model's name).
        resume: a JSON-lines file: rows already there are not measured again, new rows are appended.
        progress: progress bars (default: in a notebook or on a terminal).

    Raises:
        ValueError: bad settings, a model psheads cannot score or window, or a length the tasks or the
            prose cannot fill (before any forward pass).
    """
    config = PolicyEvaluationConfig() if config is None else config
    if not isinstance(config, PolicyEvaluationConfig):
        raise TypeError(f"config must be a PolicyEvaluationConfig, got {type(config).__name__}.")
    tokenizer = tokenizer if tokenizer is not None else getattr(model, "tokenizer", None)
    if tokenizer is None:
        raise ValueError("evaluate_policies builds its prompts with the model's tokenizer: pass tokenizer=.")
    check_rope(model)
    shape = attention_shape(model)
    name = schema.model_name(model_name) or shape.name
    text = data.path("prose.txt").read_text(encoding="utf-8")
    prepared = {}
    for length in config.lengths:  # every prompt first: a length the tasks cannot fill fails before any work
        tasks = {task: long_context_task(task).generate(tokenizer, length, config.n_prompts, seed=config.seed)
                 for task in config.tasks}
        prose = natural_prompts(tokenizer, text, length, 1) if config.perplexity else None
        scoring = natural_prompts(tokenizer, text, length, config.score_prompts + 1)[1:] \
            if config.score_on == "prose" else long_context_task(config.score_on).generate(
                tokenizer, length, config.score_prompts, seed=config.seed + 2000).tokens
        prepared[length] = (scoring, prose, tasks)
    store = _Store(None if resume is None else Path(resume), measurement_fingerprint(config))
    wanted: list[tuple] = []  # the rows of this run, resumed or measured
    maps, scores, criteria = [], [], []
    extras: dict[str, dict] = {"agreement": {}, "auc": {}, "kv_ratios": {}}
    with preserved_state(model), torch.no_grad():
        for length, (scoring, prose, tasks) in prepared.items():
            want_rope = "rope-windows" in config.conditions
            rope = make_policy(model, scoring, sink=config.sink, recent=config.recent, budget=config.primary_budget,
                               windows="rope" if want_rope else "uniform", progress=progress,
                               provenance={"prompts": config.score_on, "length": length})
            # per-head windows share what uniform windows keep at this length, none longer than the input
            rope = rope.with_changes(max_window=max(1, length - config.sink))
            policy = rope.with_changes(wavelengths=None) if want_rope else rope
            frame = _scores_of(policy, length)
            scores.append(frame)
            anchors: dict[str, HeadPolicy] = {}
            if any(condition in config.conditions for condition in ANCHOR_CONDITIONS):
                measured = anchor_scores(model, tokenizer, length, n_prompts=config.criteria_prompts,
                                         seed=config.seed + 1000, sink=config.sink, recent=config.recent,
                                         progress=progress)
                criteria.append(measured.assign(length=length))
                anchors = {condition: HeadPolicy.from_scores(measured, sink=config.sink, recent=config.recent,
                                                             budget=config.primary_budget, score=column,
                                                             shape=shape, provenance={"condition": condition})
                           for condition, column in ANCHOR_CONDITIONS.items() if condition in config.conditions
                           and measured[column].notna().any()}
                unmeasured = sorted(set(ANCHOR_CONDITIONS) & set(config.conditions) - set(anchors))
                if unmeasured:
                    logger.warning("at %d tokens the criteria %s could not be measured (%s): not run", length,
                                   unmeasured, measured.attrs.get("answered"))
                if "retrieval" in anchors:
                    extras["agreement"][str(length)] = agreement(policy, anchors["retrieval"])
            extras["auc"].update(_design_auc(policy, length))
            full_kv = kv_bytes(policy, rules.KV_LENGTH, budget=0.0)
            extras["kv_ratios"][str(length)] = {b: full_kv / kv_bytes(policy, rules.KV_LENGTH, budget=b)
                                                for b in rules.KV_RATIOS}
            extra = [("rope-windows", rope)] if want_rope else []
            extra += [("map-mean", mean_policy(policy))] if "map-mean" in config.conditions else []
            for condition, deterministic in [("map", policy), *anchors.items(), *extra]:
                maps.append(_map_rows(deterministic, condition, length))
            runs = list(_conditions(config, policy, anchors, rope if want_rope else None, length))
            wanted += _measure(model, name, length, tasks, prose, policy, runs, store, progress)
    evaluation = pd.DataFrame([store.rows[key] for key in wanted], columns=schema.POLICY_EVALUATION.names)
    order = {condition: i for i, condition in enumerate(CONDITIONS)}
    evaluation = evaluation.sort_values(["length", "task", "budget", "condition", "draw"],
                                        key=lambda c: c.map(order) if c.name == "condition" else c,
                                        kind="stable").reset_index(drop=True)
    evaluation.attrs = {"config": config.to_dict(), "model": name, "architecture": shape.architecture,
                        "rules": "psheads.experiments.policy_rules", "versions": schema.versions()}
    return PolicyEvaluation(evaluation, pd.concat(maps, ignore_index=True),
                            pd.concat(scores, ignore_index=True),
                            pd.concat(criteria, ignore_index=True) if criteria else pd.DataFrame(), extras)


def _scores_of(policy: HeadPolicy, length: int) -> pd.DataFrame:
    frame = policy.frame()[["layer", "head", "kv_head", "positional", "symbolic", "label"]]
    return frame.assign(length=length)


def _map_rows(policy: HeadPolicy, condition: str, length: int) -> pd.DataFrame:
    rows = [{"length": length, "condition": condition, "layer": layer, "kv_head": kv,
             "kv_score": policy.kv_scores[i][kv], "keep": policy.keep[i][kv]}
            for i, layer in enumerate(policy.layers) for kv in range(policy.n_kv_heads)]
    return pd.DataFrame(rows)


def _design_auc(policy: HeadPolicy, length: int) -> dict[str, float]:
    """G5: the positional score's AUC between the model's windowed and global layers (models with both)."""
    windows = policy.model_windows
    if windows is None or all(w is None for w in windows) or all(w is not None for w in windows):
        return {}
    positional = np.asarray(policy.positional)
    local = np.array([w is not None for w in windows])
    return {str(length): auc(positional[local].ravel(), positional[~local].ravel())}


def _measure(model: Any, name: str, length: int, tasks: dict[str, TeacherForced], prose: torch.Tensor | None,
             reference: HeadPolicy, runs: list[Run], store: _Store, progress: bool | None) -> list[tuple]:
    """Full attention on every task, then every run on the tasks where full attention counts; returns the
    keys of the rows (measured, or resumed with their derived columns recomputed from this run's policy)."""
    keys: list[tuple] = []

    def visit(key: tuple, task: str, run: Run, batch: Any) -> None:
        if key in store:
            store.rows[key].update(_derived(run, length))
        else:
            store.add(_row(model, name, task, length, run, batch))
        keys.append(key)

    forwards_per_run = sum(len(batch) for batch in tasks.values()) + (0 if prose is None else 1)
    with progress_bar(total=(1 + len(runs)) * forwards_per_run, desc=f"policies at {length} tokens",
                      progress=progress) as bar:
        counted = set()
        for condition, budget, draw, policy, run_budget in [("full", 0.0, 0, reference, 0.0), *runs]:
            for task, batch in tasks.items():
                key = (name, task, length, round(budget, 6), condition, draw)
                if condition != "full" and task not in counted:
                    bar.update(len(batch))
                    continue
                visit(key, task, (condition, budget, draw, policy, run_budget), batch)
                if condition == "full" and store.rows[key]["value"] >= rules.FULL_ATTENTION_MIN:
                    counted.add(task)
                bar.update(len(batch))
            if prose is not None:
                key = (name, "perplexity", length, round(budget, 6), condition, draw)
                if condition in ("full", "map", "streaming", "designed"):
                    visit(key, "perplexity", (condition, budget, draw, policy, run_budget), prose)
                bar.update(1)
        skipped = sorted(set(tasks) - counted)
        if skipped:
            logger.info("at %d tokens, full attention scores below %.2f on %s: those cells are not run further",
                        length, rules.FULL_ATTENTION_MIN, skipped)
    return keys


def _derived(run: Run, length: int) -> dict[str, float]:
    """The columns of a row that follow from its policy, not from a forward: the share streamed, the KV kept."""
    _, _, _, policy, run_budget = run
    return {"streamed": float(policy.streamed(run_budget).mean()),
            "kv_tokens": int(kept_tokens(policy, length, run_budget)["tokens"].sum())}


def _row(model: Any, name: str, task: str, length: int, run: Run, batch: Any) -> dict:
    condition, budget, draw, policy, run_budget = run
    with windowed(model, policy, budget=run_budget):  # budget 0: the plain forward, bit for bit
        if task == "perplexity":
            value, total = perplexity(model, batch[:1])
            correct = math.nan
        else:
            hits, total = teacher_forced(model, batch)
            value, correct = (hits / total if total else math.nan), float(hits)
    return {"model": name, "task": task, "length": length, "budget": float(budget), "condition": condition,
            "draw": int(draw), "metric": "perplexity" if task == "perplexity" else "accuracy", "value": float(value),
            "correct": correct, "total": int(total), **_derived(run, length)}


TABLES = ("evaluation", "maps", "scores", "criteria")
"""The frames ``write_tables`` writes, one CSV each, beside ``run.json``."""


def write_tables(result: PolicyEvaluation, folder: str | Path, record: dict[str, Any] | None = None) -> Path:
    """Write one model's evaluation as ``<table>.csv`` files and ``run.json`` (settings, extras, the
    grades, ``record``), each through a temporary file renamed into place; returns the folder. A table
    with no columns (``criteria`` when no anchor condition ran) is not written, and a stale one removed."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    for name in TABLES:
        frame = getattr(result, name)
        if len(frame.columns):
            write_atomic(folder / f"{name}.csv", frame.to_csv(index=False))
        else:
            (folder / f"{name}.csv").unlink(missing_ok=True)
    run = {"config": result.evaluation.attrs.get("config"), "model": result.evaluation.attrs.get("model"),
           "architecture": result.evaluation.attrs.get("architecture"), "extras": result.extras,
           "grades": result.grades().to_dict(orient="records"), "versions": schema.versions(), **(record or {})}
    write_atomic(folder / "run.json", json.dumps(run, indent=1, default=str, allow_nan=True) + "\n")
    return folder
