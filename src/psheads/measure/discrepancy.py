"""Discrepancy: how far each head's attention logit for the answer's key stays ahead of every other key.

Paper B (section 3.5) measures how robustly a head attends the key that holds the answer by the
*discrepancy* Δ(n): the worst case, over valid inputs of length n, of the margin

    target logit − the largest logit of any other visible key

at the query (the last position). A positive Δ means that the head's argmax is the answer's key
on every input; Theorem 3.2 bounds Δ for one-plane heads (see ``psheads.theory``).
``discrepancy`` estimates Δ per layer and head as the minimum over sampled prompts, for any
RoPE model and any task whose batches carry ``answer_positions``:

- tasks with a ``length`` option (``IndexTask``, ``RetrievalTask``) are generated at each length;
- the multi-hop tasks (``NumberTask``, ``LetterTask``) run as 1-hop prompts
  (``min_hops = max_hops = 1``), so the answer's key is the one a single hop attends, and reach
  each length with its ``at_length`` (for the multi-hop tasks, ``extra_target``).

Two columns measure the margin:

- ``discrepancy``: in logit units, on the logits the model's softmax sees (soft-capped where the
  model caps; keys outside a sliding window are not candidates, and a target outside it gives −inf);
- ``normalised``: per prompt, the margin of the pre-soft-cap logits divided by
  ``scale · ‖q‖ · max_j ‖k_j‖`` over the visible keys (RoPE rotations keep norms, so this is the
  margin in units of a cosine between the rotated query and the longest key). For the
  constructions of ``psheads.theory`` it is exactly the cosine difference Theorem 3.2 bounds; for
  trained heads it makes heads of different norms comparable with those bounds.

Both are minima over the prompts (not necessarily the same prompt); ``mean_margin`` and
``mean_normalised`` are the means. Logits are computed in fp64 from one capture per batch, as the
model computes them (its own rotation tables at absolute positions), without gradients and
without changing the model; key positions are processed in chunks of ``engine.CHUNK_BYTES``.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import pandas as pd
import torch
from jaxtyping import Float, Int
from torch import Tensor

from psheads.interface import validation
from psheads.interface.distributed import fingerprint, ordered_map
from psheads.interface.progress import progress_bar
from psheads.measure.engine import CHUNK_BYTES
from psheads.results import schema
from psheads.rope import geometry, precision
from psheads.rope.backends.facts import tokenizer_of
from psheads.rope.inputs import check_tokens
from psheads.rope.layer import LayerCapture, LayerGeometry, rotated_keys, rotated_query
from psheads.rope.lens import as_lens
from psheads.tasks import Task, check_fits, checked_batch, task_for_model, with_hops
from psheads.tasks import at_length as tasks_at_length

COLUMNS = tuple(schema.DISCREPANCY.names)
"""The columns of ``discrepancy``'s frame."""

def at_length(task: Task, length: int | None) -> Task:
    """``task`` as ``discrepancy`` runs it at ``length`` tokens (None: the task's own length).

    A multi-hop task (one with ``with_hops``) becomes 1-hop; a ``length`` reaches the task's
    ``at_length``.

    Raises:
        TypeError: ``length`` is given and the task has no ``at_length`` method.
        ValueError: the task cannot make prompts of ``length`` tokens.
    """
    if callable(getattr(task, "with_hops", None)):
        task = with_hops(task, 1)
    return task if length is None else tasks_at_length(task, length, otherwise="pass lengths=None")


def head_margins(
    geo: LayerGeometry, capture: LayerCapture, targets: Int[Tensor, " batch"], query: int, heads: Int[Tensor, " head"]
) -> tuple[Float[Tensor, "batch head"], Float[Tensor, "batch head"]]:
    """Margins of the target key at ``query`` for one layer's captured batch (fp64).

    Args:
        geo: the layer's geometry.
        capture: the layer's capture with q at ``query`` only.
        targets: ``[batch]`` target key position per prompt (``< query``).
        query: the query position (the same for every prompt).
        heads: query heads to measure.

    Returns:
        ``(margin, normalised)``, each ``[batch, head]``: the soft-capped logit margin, and the
        pre-cap margin over ``scale · ‖q‖ · max_j ‖k_j‖`` (see the module docstring).
    """
    q = rotated_query(geo, capture, query)[:, heads]  # [b, h, d]
    batch, n_heads, d_head = q.shape
    n_keys = query + 1
    visible = geo.visible(torch.tensor([query]), n_keys)[0].to(q.device)
    logits = torch.empty(batch, n_heads, n_keys, dtype=torch.float64, device=q.device)
    longest = torch.zeros(batch, n_heads, dtype=torch.float64, device=q.device)
    step = max(1, CHUNK_BYTES // (8 * 3 * batch * geo.n_heads * d_head))
    for start in range(0, n_keys, step):
        stop = min(start + step, n_keys)
        k = rotated_keys(geo, capture, torch.arange(start, stop, device=capture.k.device))[:, :, heads]  # [b, c, h, d]
        logits[..., start:stop] = geo.scale * torch.einsum("bhd,bkhd->bhk", q, k)
        norms = k.norm(dim=-1).transpose(1, 2).masked_fill(~visible[start:stop], 0.0)
        longest = torch.maximum(longest, norms.amax(-1))
    index = targets.to(q.device)[:, None, None].expand(batch, n_heads, 1)

    def margin(values: Tensor) -> Tensor:
        values = values.masked_fill(~visible, -math.inf)
        others = values.scatter(-1, index, -math.inf).amax(-1)
        return values.gather(-1, index)[..., 0] - others

    normalised = margin(logits) / (geo.scale * q.norm(dim=-1) * longest)
    return margin(geometry.soft_cap(logits, geo.softcap)), normalised


def discrepancy(model: Any, task: Task | str, lengths: Iterable[int] | None = None, layers: Any = None,
                heads: Any = None, n: int = 256, seed: int = 0, batch_size: int = 32,
                progress: bool | None = None, model_name: str | None = None,
                allow_task_mismatch: bool = False) -> pd.DataFrame:
    """The worst-case margin of every head's target logit at the query, per prompt length.

    See the module docstring for the definition and the normalisation.

    Args:
        model: a TransformerLens RoPE model, a Hugging Face ``PreTrainedModel`` (see
            ``psheads.rope.backends.as_bridge``), or a ``RopeLens``.
        task: a task whose batches carry ``answer_positions`` (the target key), or a registered
            name (``psheads.tasks.task_for_model``: the model's own task when it
            records one of that name). Multi-hop tasks run as 1-hop prompts.
        lengths: prompt lengths in tokens (see ``at_length``); None: the task's own length.
        layers: layers to measure (default: all).
        heads: query heads to measure (default: all).
        n: prompts per length (``task.generate(n, seed)``).
        seed: seed of every length's prompts.
        batch_size: prompts per forward pass; memory is bounded by one batch.
        progress: progress bar (default: in a notebook or on a terminal).
        model_name: if given, the frame starts with a ``model`` column holding it (and
            ``attrs["model_name"]``), so that frames of several models concatenate.
        allow_task_mismatch: measure a task whose ids mean other tokens to the model's tokenizer
            (a model trained on another task); by default that raises. The task the model was
            trained on with other generator settings warns instead (``task_for_model``).

    Returns:
        One row per length, layer and head with the columns of ``schema.DISCREPANCY``; ``df.attrs``
        holds the configuration, model, backend, dtype and versions.

    Raises:
        TypeError: ``task`` is not a task, or ``lengths`` for a task without a length option.
        ValueError: bad ``n``, ``seed``, ``batch_size``, layers or heads; a length below the
            task's shortest prompt or beyond a hard context limit (beyond ``n_ctx`` warns); a
            target that is not a key before the query; ids outside the model's vocabulary, or
            meaning other tokens to its tokenizer.
    """
    model_name = schema.model_name(model_name)
    lens = as_lens(model, progress=progress)
    precision.require_float64(lens.backend.device, "discrepancy")
    task = task_for_model(task, lens.model)
    n, seed = validation.integer(n, "n", minimum=1), validation.seed(seed)
    batch_size = validation.integer(batch_size, "batch_size", minimum=1)
    progress = validation.optional_boolean(progress, "progress")
    allow_task_mismatch = validation.boolean(allow_task_mismatch, "allow_task_mismatch")
    chosen = lens.attention_layers(layers)
    per_layer = min(lens.layers[layer].n_heads for layer in chosen)
    heads = tuple(range(per_layer)) if heads is None else validation.integers(heads, "heads", minimum=0, unique=True)
    if not heads or max(heads) >= per_layer:
        raise ValueError(f"heads {list(heads)} must be a non-empty list of distinct heads in 0…{per_layer - 1}.")
    sizes = [None] if lengths is None else list(validation.integers(lengths, "lengths", minimum=2, unique=True))
    if not sizes:
        raise ValueError("lengths must list at least one length (or be None for the task as given).")
    tasks = [at_length(task, size) for size in sizes]
    rows = []
    with progress_bar(total=len(tasks) * math.ceil(n / batch_size), desc="discrepancy", progress=progress) as bar, \
            lens.backend.analysis():
        for size, each in zip(sizes, tasks, strict=True):
            rows += _one_length(lens, each, size, chosen, torch.tensor(heads), n, seed, batch_size, bar,
                                allow_task_mismatch)
    frame = pd.DataFrame(rows, columns=list(COLUMNS))
    frame.attrs.update({
        "config": {"task": getattr(task, "name", type(task).__name__), "lengths": sizes, "layers": chosen,
                   "heads": list(heads), "n": n, "seed": seed, "batch_size": batch_size},
        "model": lens.backend.model_name,
        "backend": lens.backend.kind,
        "dtype": str(lens.backend.dtype),
        "versions": schema.versions(),
    })
    return schema.tag_model(frame, model_name)


def _one_length(lens: Any, task: Task, size: int | None, layers: list[int], heads: Tensor, n: int, seed: int,
                batch_size: int, bar: Any, allow_task_mismatch: bool) -> list[dict]:
    """The rows of one length: running minima and sums over batches, per layer and head."""
    batch = checked_batch(task, n, seed=seed)
    check_fits(task, batch, lens.backend.d_vocab, tokenizer_of(lens.model), allow_task_mismatch)
    tokens = check_tokens(lens.backend, batch.tokens)
    length = int(tokens.shape[1])
    if size is not None and length != size:
        raise ValueError(f"Task {task.name!r} generated prompts of {length} tokens when asked for {size}.")
    targets = batch.answer_positions
    if int(targets.min()) < 0 or int(targets.max()) >= length - 1:
        raise ValueError(f"Task {task.name!r}: answer_positions must be keys before the query (0…{length - 2}).")

    def margins(start: int) -> dict[int, tuple[Tensor, Tensor]]:  # {layer: (raw, normalised) [prompt, head]}
        part, target = tokens[start:start + batch_size], targets[start:start + batch_size]
        query = torch.full((len(part),), length - 1, dtype=torch.long)
        out = {}

        def record(layer: int, capture: LayerCapture) -> None:  # each layer during the forward, then dropped
            geo = lens.layers[layer]
            geo.check_capture(capture)
            raw, normalised = head_margins(geo, capture, target, length - 1, heads)
            out[layer] = (raw.cpu(), normalised.cpu())

        lens.backend.capture(part, layers, query_index=query, on_layer=record)
        return out

    totals: dict[int, dict[str, Tensor]] = {}
    for batch_margins in ordered_map(margins, range(0, n, batch_size), bar=bar, agree=lambda: fingerprint(
            tokens, model=lens.backend.weights_owner(), answer_positions=targets.tolist(), batch_size=batch_size,
            layers=layers, heads=heads)):
        for layer, (raw, normalised) in batch_margins.items():
            total = totals.setdefault(layer, {"min_raw": raw.amin(0), "min_norm": normalised.amin(0),
                                              "sum_raw": torch.zeros(len(heads), dtype=torch.float64),
                                              "sum_norm": torch.zeros(len(heads), dtype=torch.float64)})
            total["min_raw"] = torch.minimum(total["min_raw"], raw.amin(0))
            total["min_norm"] = torch.minimum(total["min_norm"], normalised.amin(0))
            total["sum_raw"] += raw.sum(0)
            total["sum_norm"] += normalised.sum(0)
    return [{"length": length, "layer": layer, "head": int(head), "discrepancy": float(total["min_raw"][i]),
             "normalised": float(total["min_norm"][i]), "mean_margin": float(total["sum_raw"][i] / n),
             "mean_normalised": float(total["sum_norm"][i] / n), "n": n}
            for layer, total in totals.items() for i, head in enumerate(heads.tolist())]
