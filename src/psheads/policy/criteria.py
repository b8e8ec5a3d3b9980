"""The anchors' criteria for choosing full-cache heads, re-implemented on any RoPE model.

None of the projects that ship head maps reads RoPE planes; each measures what a head's attention
does. To compare psheads' map with them on the same model, ``anchor_scores`` measures their criteria
from the model's own attention pattern, one forward per prompt, layer by layer (no pattern is kept):

* **retrieval** (Wu et al. 2024, "Retrieval Head Mechanistically Explains Long-Context
  Factuality", arXiv 2404.15574): while the model writes an answer it can only copy from a needle,
  the share of answer tokens at which the head's most attended key lies in the needle and holds the
  token being written, over the answers the model gets right (as their code keeps only the tests
  the model passes). Teacher-forced here: the needle prompts of ``psheads.tasks.long_context``
  already hold the answers, and a value's needle is its last earlier occurrence in the prompt. Most
  heads score 0, so ``retrieval_ranked`` breaks the ties by the attention mass on the needle
  (``needle_attention``, weighted 1/1000: it never reorders two different retrieval scores), and the
  retrieval condition ranks by it.
* **echo** and **induction** (RazorAttention, Tang et al. 2024, arXiv 2407.15891): on random tokens
  repeated four times, the mean attention from each token of repeats 2–4 to the same token one
  repeat back (echo) and to the token after it (induction). RazorAttention protects the top 1 % of
  heads by echo and the top 14 % by induction; ``razor`` ranks heads in that order (the top-1 % echo
  heads first, then every head by induction), so its top 15 % is their protected set.
* **beyond_window**: the share of attention a head gives to keys outside sink ∪ recent, averaged over
  the query rows that have such keys, on the needle prompts: the simple baseline a RoPE-based map has
  to beat to justify itself.

Every score is higher for a head that needs the full cache; ``HeadPolicy.from_scores(frame,
score=name)`` makes a policy of any of them (a KV head takes the largest score in its group, as the
anchors reduce query heads to KV heads).
"""

from __future__ import annotations

import logging
import math
from typing import Any

import numpy as np
import pandas as pd
import torch
from torch import Tensor

from psheads.interface import validation
from psheads.interface.progress import progress_bar
from psheads.rope.backends.facts import logits_at
from psheads.rope.lens import as_lens
from psheads.tasks.long_context import TeacherForced, long_context_task, word_pool

logger = logging.getLogger(__name__)

CRITERIA = ("retrieval", "needle_attention", "retrieval_ranked", "echo", "induction", "razor", "beyond_window")
"""The columns of ``anchor_scores``' frame beside ``layer`` and ``head``."""
ECHO_SHARE = 0.01
"""RazorAttention's share of heads protected by echo score."""
REPEATS = 4
"""RazorAttention's repeats of the random tokens."""


def copy_positions(tokens: Tensor, start: int, stop: int) -> list[int] | None:
    """Positions of the last occurrence of ``tokens[start:stop]`` before ``start`` (None when there is none)."""
    span = tokens[start:stop]
    width = int(span.numel())
    for first in range(start - width, -1, -1):
        if torch.equal(tokens[first:first + width], span):
            return list(range(first, first + width))
    return None


def repeated_random(tokenizer: Any, length: int, seed: int, bos: int) -> Tensor:
    """``[1, length]``: BOS, then random word tokens repeated ``REPEATS`` times (cut at ``length``)."""
    pool = word_pool(tokenizer)
    period = max(1, (length - 1) // REPEATS)
    generator = torch.Generator().manual_seed(seed)
    sequence = pool[torch.randint(len(pool), (period,), generator=generator)]
    body = sequence.repeat(REPEATS + 1)[: length - 1]
    return torch.cat([torch.tensor([bos]), body])[None]


class _Sums:
    """Per (layer, head) running sums of each criterion and their counts."""

    def __init__(self) -> None:
        self.total: dict[tuple[str, int], Tensor] = {}
        self.count: dict[tuple[str, int], float] = {}

    def add(self, name: str, layer: int, values: Tensor, count: float) -> None:
        key = (name, layer)
        values = values.double().cpu()
        self.total[key] = values if key not in self.total else self.total[key] + values
        self.count[key] = self.count.get(key, 0.0) + count

    def mean(self, name: str, layer: int, n_heads: int) -> np.ndarray:
        key = (name, layer)
        if key not in self.total or self.count[key] == 0:
            return np.full(n_heads, math.nan)
        return (self.total[key] / self.count[key]).numpy()


def _needle_statistics(sums: _Sums, batch: TeacherForced, row: int, answered: list[bool], sink: int,
                       recent: int) -> Any:
    """The hook's reader for one needle prompt: retrieval hits (the answers the model got right only),
    attention on the needle, and attention beyond the window."""
    tokens = batch.tokens[row]
    length = int(tokens.numel())
    answer_rows, needles, written = [], [], []
    for (start, stop), right in zip(batch.spans[row], answered, strict=True):
        needle = copy_positions(tokens, start, stop)
        if needle is None or not right:
            continue
        for position in range(start, stop):
            answer_rows.append(position - 1)
            needles.append(needle)
            written.append(int(tokens[position]))
    rows = torch.tensor(answer_rows, dtype=torch.long)
    in_needle = torch.zeros(len(answer_rows), length, dtype=torch.bool)  # [answer token, key]
    for index, needle in enumerate(needles):
        in_needle[index, needle] = True
    same_token = in_needle & (tokens[None, :] == torch.tensor(written, dtype=torch.long)[:, None])
    positions = torch.arange(length)
    beyond = (positions[None, :] >= sink) & (positions[:, None] - positions[None, :] >= recent)
    beyond_rows = beyond.any(1)

    def read(layer: int, pattern: Tensor) -> None:  # pattern [1, head, query, key]
        attention = pattern[0]
        if len(rows):
            at_answers = attention[:, rows.to(attention.device)].cpu()  # [head, answer token, key]
            picked = at_answers.argmax(-1)  # the head's most attended key at each answer token
            hits = same_token.gather(1, picked.T).T  # [head, answer token]: a needle copy of the token written
            sums.add("retrieval", layer, hits.sum(1).double(), len(rows))
            sums.add("needle_attention", layer, (at_answers * in_needle[None]).sum(-1).sum(1), len(rows))
        mask = beyond.to(attention.device)
        outside = (attention * mask).sum(-1)[:, beyond_rows.to(attention.device)]  # [head, rows]
        sums.add("beyond_window", layer, outside.sum(1), int(beyond_rows.sum()))

    return read


def _repeat_statistics(sums: _Sums, length: int) -> Any:
    period = max(1, (length - 1) // REPEATS)
    rows = torch.arange(1 + period, length)  # every token of repeats 2…: position p holds the token at p - period

    def read(layer: int, pattern: Tensor) -> None:
        attention = pattern[0]
        index = rows.to(attention.device)
        echo = attention[:, index, index - period]  # the same token, one repeat back
        induction = attention[:, index, index - period + 1]  # the token that followed it
        sums.add("echo", layer, echo.sum(1), len(rows))
        sums.add("induction", layer, induction.sum(1), len(rows))

    return read


def _razor(echo: np.ndarray, induction: np.ndarray) -> np.ndarray:
    """RazorAttention's order as one score: the top ``ECHO_SHARE`` of heads by echo above all others,
    the rest by induction (scores in [0, 1] for the rest, 1 + echo for the echo heads)."""
    flat_echo = np.nan_to_num(echo.ravel(), nan=-np.inf)
    top = max(1, math.ceil(ECHO_SHARE * flat_echo.size))
    protected = np.zeros(flat_echo.size, dtype=bool)
    protected[np.argsort(-flat_echo, kind="stable")[:top]] = True
    score = np.where(protected, 1.0 + np.nan_to_num(echo.ravel(), nan=0.0), induction.ravel())
    return score.reshape(echo.shape)


def anchor_scores(model: Any, tokenizer: Any, length: int, *, n_prompts: int = 2, seed: int = 1000,
                  sink: int = 64, recent: int = 256, progress: bool | None = None) -> pd.DataFrame:
    """The anchors' criteria for every head, measured at ``length`` tokens (see the module docstring).

    Args:
        model: a TransformerLens RoPE model or a Hugging Face ``PreTrainedModel`` (read through a bridge
            of a copy: ``psheads.rope.backends.as_bridge``).
        tokenizer: its tokenizer (Hugging Face).
        length: prompt length in tokens (the length the policy serves).
        n_prompts: needle prompts (retrieval and beyond-window scores); the echo and induction scores
            take one prompt of repeated random tokens.
        seed: seed of the prompts (keep it apart from the evaluation's).
        sink: sink tokens of the window ``beyond_window`` measures beyond.
        recent: recent tokens of that window.
        progress: a bar over the forward passes (default: in a notebook or on a terminal).

    Returns:
        One row per (layer, head): ``layer, head, kv_head`` and the ``CRITERIA``; ``attrs`` records the settings.
    """
    length = validation.integer(length, "length", minimum=8)
    n_prompts = validation.integer(n_prompts, "n_prompts", minimum=1)
    seed = validation.seed(seed)
    sink = validation.integer(sink, "sink", minimum=0)
    recent = validation.integer(recent, "recent", minimum=1)
    lens = as_lens(model, progress=progress)
    backend = lens.backend
    needles = long_context_task("needle").generate(tokenizer, length, n_prompts, seed=seed)
    bos = int(needles.tokens[0, 0])
    repeated = repeated_random(tokenizer, length, seed, bos)
    with torch.no_grad():  # which answers the model gets right (Wu et al. score those only)
        predicted = torch.cat([logits_at(model, needles.tokens[row:row + 1],
                                         needles.logit_positions()[row:row + 1]).argmax(-1).cpu()
                               for row in range(n_prompts)])
    answered = needles.correct_by_answer(predicted)
    sums = _Sums()
    readers = [(needles.tokens[row:row + 1], _needle_statistics(sums, needles, row, answered[row], sink, recent))
               for row in range(n_prompts)]
    readers.append((repeated, _repeat_statistics(sums, length)))
    layers = [geo.layer for geo in lens.layers]
    with progress_bar(total=len(readers), desc="anchor criteria", progress=progress) as bar, backend.analysis():
        for tokens, read in readers:
            hooks = [(backend.pattern_hook(layer), _reader(read, layer)) for layer in layers]
            with lens.model.hooks(fwd_hooks=hooks):
                backend.forward(tokens.to(backend.device))
            bar.update(1)
    rows = []
    for geo in lens.layers:
        values = {name: sums.mean(name, geo.layer, geo.n_heads)
                  for name in ("retrieval", "needle_attention", "echo", "induction", "beyond_window")}
        for head in range(geo.n_heads):
            rows.append({"layer": geo.layer, "head": head, "kv_head": int(geo.kv_head_of[head]),
                         **{name: float(values[name][head]) for name in values}})
    frame = pd.DataFrame(rows)
    grid = (len(layers), -1)
    frame["razor"] = _razor(frame["echo"].to_numpy().reshape(grid), frame["induction"].to_numpy().reshape(grid)).ravel()
    frame["retrieval_ranked"] = frame["retrieval"] + frame["needle_attention"] / 1000
    if not any(map(any, answered)):
        logger.warning("The model answered none of the %d needle questions at %d tokens: the retrieval score is "
                       "not measured (NaN).", sum(len(row) for row in answered), length)
    frame = frame[["layer", "head", "kv_head", *CRITERIA]]
    frame.attrs = {"model": backend.model_name, "length": length, "n_prompts": n_prompts, "seed": seed, "sink": sink,
                   "recent": recent, "echo_share": ECHO_SHARE, "repeats": REPEATS,
                   "answered": f"{sum(map(sum, answered))} of {sum(len(row) for row in answered)} needle questions"}
    return frame


def _reader(read: Any, layer: int) -> Any:
    def hook(pattern: Tensor, hook: Any) -> None:
        read(layer, pattern.detach())

    return hook
