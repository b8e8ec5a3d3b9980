"""The one engine every measurement runs on.

    prompts ─► batches ─► one capture per batch ─► per layer stack and key group: KeyLogits
            ─► a measurement ─► Measured rows ─► running-sum reduction ─► tidy frame

A *measurement* is any function ``KeyLogits -> {column: tensor [*lead]}``: the score methods of
``psheads.measure.methods``, frequency usage in ``psheads.measure.frequency_profile``, or your own. The engine
batches the prompts, captures q/k̃/tables once per batch, stacks layers that share their geometry and
tables into one pass, groups prompts that share a key layout, bounds memory by ``CHUNK_BYTES``
and, with ``by_frequency``, hands the measurement one view per RoPE plane. Long inputs stream:
each layer is measured during the forward and its capture dropped. Under
``torch.distributed`` the batches are spread over the ranks (``psheads.interface.distributed``).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd
import torch
from einops import rearrange
from jaxtyping import Float
from torch import Tensor

from psheads.interface.distributed import fingerprint, ordered_map
from psheads.interface.progress import progress_bar
from psheads.measure.prompts import KeyGroup, PromptSet
from psheads.rope import geometry, precision
from psheads.rope.layer import LayerCapture, LayerGeometry, weighted_query
from psheads.rope.lens import RopeLens

#: Bytes one intermediate fp64 tensor may take; prompts, heads and rows are chunked to fit.
CHUNK_BYTES = 2**28


@dataclass(frozen=True)
class KeyLogits:
    """One layer's logits at the query for a group of prompts, in factored form (fp64).

    Over the swappable keys S (``n`` of them, in order), the position × token matrix is
    ``M[p, m] = positions[p] · tokens[m]`` before the soft-cap: the logit the token now at key
    ``m`` would get at key position ``p``. Row ``p`` of ``positions`` depends only on the position
    (the model's rotation tables; shared by every prompt and head), row ``m`` of ``tokens`` only on
    the token (its pre-rotary key weighted by the query); see
    ``psheads.rope.geometry.position_token_factors``. The diagonal of M is the model's own logit row on
    S. ``other`` holds the logits to the visible keys outside S (BOS, the query itself, keys not
    chosen), which no swap moves; an attention sink (gpt-oss) is one more such logit, outside the
    soft-cap and every plane. Leading dims ``*lead`` are ``[prompt, head]`` for whole heads and
    ``[prompt, head, plane]`` for per-plane views (``by_frequency``, which carry no sink).

    Attributes:
        positions: ``[n, k]`` (or broadcastable to ``[*lead, n, k]``) position factors.
        tokens: ``[*lead, n, k]`` token factors.
        other: ``[*lead, n_other]`` pre-soft-cap logits to the other visible keys.
        softcap: the layer's soft-cap, applied entrywise by every accessor.
        sinks: ``[*lead]`` the heads' attention-sink logits, or None.
    """

    positions: Float[Tensor, "*#lead n k"]
    tokens: Float[Tensor, "*lead n k"]
    other: Float[Tensor, "*lead n_other"]
    softcap: float | None
    sinks: Float[Tensor, "*lead"] | None = None

    @property
    def n(self) -> int:
        """Number of swappable keys |S|."""
        return int(self.tokens.shape[-2])

    @property
    def lead(self) -> torch.Size:
        """Leading dims."""
        return self.tokens.shape[:-2]

    @functools.cached_property
    def small_matrix(self) -> Float[Tensor, "*lead n n"] | None:
        """All of M (soft-capped), kept when it is no bigger than the token factors (``n <= k``)."""
        return self._product(slice(None)) if self.n <= self.tokens.shape[-1] else None

    @functools.cached_property
    def diagonal(self) -> Float[Tensor, "*lead n"]:
        """The model's logits to the keys in S (soft-capped)."""
        if self.small_matrix is not None:
            return self.small_matrix.diagonal(dim1=-2, dim2=-1)
        return geometry.soft_cap((self.positions * self.tokens).sum(-1), self.softcap)

    @functools.cached_property
    def other_logits(self) -> Float[Tensor, "*lead n_other"]:
        """Logits to the visible keys outside S (soft-capped), then the sink's (if any)."""
        other = geometry.soft_cap(self.other, self.softcap)
        return other if self.sinks is None else torch.cat([other, self.sinks.unsqueeze(-1).to(other)], dim=-1)

    @functools.cached_property
    def log_attention(self) -> Float[Tensor, "*lead visible"]:
        """log D: the unswapped attention at the query over S, then the other visible keys."""
        logits = torch.cat([self.diagonal, self.other_logits], dim=-1)
        return logits - torch.logsumexp(logits, dim=-1, keepdim=True)

    def matrix(self, rows: slice = slice(None)) -> Float[Tensor, "*lead row n"]:
        """``M[rows, :]`` (soft-capped); all of M by default."""
        if self.small_matrix is not None:
            return self.small_matrix[..., rows, :]
        return self._product(rows)

    def _product(self, rows: slice) -> Float[Tensor, "*lead row n"]:
        if self.positions.ndim == 2:  # shared positions: one matrix product for every entry
            product = (self.tokens @ self.positions[rows].T).transpose(-1, -2)
        else:
            product = self.positions[..., rows, :] @ self.tokens.transpose(-1, -2)
        return geometry.soft_cap(product, self.softcap)

    def select(self, index: Tensor | slice | int) -> KeyLogits:
        """The view restricted to some flattened leading entries (``index`` into ``lead.numel()``)."""
        shape = (*self.lead, *self.positions.shape[-2:])
        positions = self.positions if self.positions.ndim == 2 else self.positions.expand(shape).flatten(0, -3)[index]
        sinks = None if self.sinks is None else self.sinks.expand(self.lead).flatten()[index]
        return KeyLogits(positions, self.tokens.flatten(0, -3)[index], self.other.flatten(0, -2)[index], self.softcap,
                         sinks)

    def flat(self) -> KeyLogits:
        """The view with its leading dims flattened into one."""
        return self.select(slice(None))


Measurement = Callable[[KeyLogits], dict[str, Tensor]]
"""``KeyLogits -> {column: [*lead] tensor}``; the engine calls it once per group (and plane set)."""


@dataclass
class Measured:
    """A measurement's values for some prompts and heads of a stack of layers (layers that share
    their geometry and tables are measured in one pass).

    Attributes:
        layers: the layers, in stack order.
        prompts: indices of the prompts in the prompt set.
        heads: ``[h]`` query heads (the same in every layer of the stack).
        values: ``{column: [prompt, layer · head]}`` or ``[prompt, layer · head, slot]`` (fp64,
            CPU; layer-major); slots are planes ``1 … F`` then 0 with ``by_frequency``.
    """

    layers: list[LayerGeometry]
    prompts: list[int]
    heads: Tensor
    values: dict[str, Tensor]


def stacked_layers(lens: RopeLens, layers: list[int], captures: dict[int, LayerCapture]) -> list[list[int]]:
    """Layers grouped so that each group's heads can be scored in one pass: same geometry, same
    device (a model spread over devices is measured where each layer's capture lies, and only the
    small per-head results move) and the same rotation tables on this batch."""
    stacks: list[list[int]] = []
    for layer in layers:
        for stack in stacks:
            first = stack[0]
            if (lens.layers[first].same_geometry(lens.layers[layer])
                    and captures[first].q.device == captures[layer].q.device
                    and _same_table(captures[first].cos, captures[layer].cos)
                    and _same_table(captures[first].sin, captures[layer].sin)):
                stack.append(layer)
                break
        else:
            stacks.append([layer])
    return stacks


def _same_table(a: Tensor, b: Tensor) -> bool:
    """Whether two rotation tables hold the same values: the same memory (layers that share one
    table) without reading it, which on a GPU would wait for the device; else compared."""
    if (a.data_ptr(), a.shape, a.stride(), a.dtype, a.device) == (b.data_ptr(), b.shape, b.stride(), b.dtype, b.device):
        return True
    return torch.equal(a, b)


def _bounded(lens: RopeLens, stacks: list[list[int]], heads: tuple[int, ...] | None, n_pos: int) -> list[list[int]]:
    """The stacks cut so that one prompt's factors of a stack fit ``CHUNK_BYTES`` (long prompts:
    one layer at a time; a single layer is never cut)."""
    out = []
    for stack in stacks:
        geo = lens.layers[stack[0]]
        per_layer = 8 * (len(heads) if heads is not None else geo.n_heads) * n_pos * (geo.d_head + 1) * 5
        size = max(1, CHUNK_BYTES // per_layer)
        out += [stack[start:start + size] for start in range(0, len(stack), size)]
    return out


def _stack(lens: RopeLens, stack: list[int], captures: dict[int, LayerCapture]) -> tuple[LayerGeometry, LayerCapture]:
    """One geometry and capture whose heads are the stacked layers' heads, in order."""
    first = lens.layers[stack[0]]
    if len(stack) == 1:
        return first, captures[stack[0]]
    geo = dataclasses.replace(first, n_heads=first.n_heads * len(stack), n_kv_heads=first.n_kv_heads * len(stack))
    capture = LayerCapture(q=torch.cat([captures[layer].q for layer in stack], dim=2),
                           k=torch.cat([captures[layer].k for layer in stack], dim=2),
                           cos=captures[stack[0]].cos, sin=captures[stack[0]].sin)
    return geo, capture


def _index(positions: Sequence[int], device: torch.device) -> slice | Tensor:
    """A slice when ``positions`` is a contiguous run (a view, no copy), else an index tensor."""
    if len(positions) and list(positions) == list(range(positions[0], positions[0] + len(positions))):
        return slice(positions[0], positions[0] + len(positions))
    return torch.tensor(list(positions), device=device, dtype=torch.long)


def key_logits(geo: LayerGeometry, capture: LayerCapture, group: KeyGroup, heads: Tensor,
               by_frequency: bool, dtype: torch.dtype = torch.float64) -> list[KeyLogits]:
    """The factored logits of a group's prompts and ``heads`` in ``dtype`` (the analysis dtype,
    ``psheads.rope.precision``): one whole-head view, or with ``by_frequency`` two per-plane views
    (the F rotated planes, then the unrotated dims)."""
    device = capture.k.device
    rows = _index(group.rows, device)
    cos, sin = (table.to(dtype) for table in capture.full_tables)
    t = group.query
    q = capture.q[rows, 0][:, _index(heads.tolist(), device)].to(dtype)  # [g, h, d]
    q_rot = weighted_query(geo, geometry.rotate(q, cos[t], sin[t], geo.layout))
    k = rearrange(capture.k[rows], "prompt pos kv d -> prompt kv pos d")
    k = k[:, _index(geo.kv_head_of[heads].tolist(), device)]
    swappable, others = _index(group.swappable, device), _index(group.others, device)
    positions, tokens = geometry.position_token_factors(q_rot, k[:, :, swappable], cos[swappable], sin[swappable],
                                                        geo.layout, geo.scale)
    k_other = geometry.rotate(k[:, :, others].to(dtype), cos[others], sin[others], geo.layout)
    products = q_rot.unsqueeze(-2) * k_other * geo.scale  # [g, h, n_other, d]
    if not by_frequency:
        sinks = geo.sink_logits()  # per head of one layer (stacked layers share their sinks)
        sinks = None if sinks is None else sinks[heads.cpu() % len(sinks)].to(device, dtype).expand(len(group.rows), -1)
        return [KeyLogits(positions, tokens, products.sum(-1), geo.softcap, sinks)]
    planes = geo.n_planes
    (p, t_), (p0, t0) = geometry.plane_factors(positions, tokens, planes)  # [(g, h,) plane, n, 2 or 1]
    o = rearrange(products @ geo.layout.membership().to(products), "... other plane -> ... plane other")
    unrotated = KeyLogits(p0, t0, o[:, :, planes:], geo.softcap)
    if planes == 0:  # a layer without RoPE: plane 0 is the whole head
        return [unrotated]
    return [KeyLogits(p, t_, o[:, :, :planes], geo.softcap), unrotated]


def run(
    lens: RopeLens,
    prompts: PromptSet,
    measure: Measurement,
    *,
    layers: list[int],
    heads: tuple[int, ...] | None,
    min_keys: int,
    need: str,
    by_frequency: bool = False,
    batch_size: int = 64,
    progress: bool | None = None,
    desc: str = "psheads",
    local: Callable[[Measured], Any] | None = None,
    dtype: torch.dtype = torch.float64,
    settings: Mapping[str, Any] | None = None,
) -> Iterator[Any]:
    """Run ``measure`` on every layer, head and prompt; yields ``Measured`` per layer and part.

    Batches are spread over the ranks of a ``torch.distributed`` job
    (``psheads.interface.distributed.ordered_map``); every rank receives every batch's results, in
    batch order.

    Args:
        lens: the lens (geometry and backend).
        prompts: prepared prompts.
        measure: the measurement.
        layers: layers to measure.
        heads: query heads to measure (None: all).
        min_keys: fewer swappable keys at a layer is an error (``need`` says what they are for).
        need: what ``min_keys`` keys are needed for, for the error message.
        by_frequency: measure every RoPE plane as its own head (adds a slot axis).
        batch_size: prompts per forward pass; memory is bounded by one batch.
        progress: progress bar (default: in a notebook or on a terminal; rank 0 only).
        desc: progress-bar label.
        local: applied to each ``Measured`` on the rank that computed it, and yielded instead (for
            example ``RunningMean.partial``: only the sums travel between ranks).
        dtype: the analysis dtype (``psheads.rope.precision.analysis_dtype``); the values reach
            ``Measured`` and the reductions in fp64 on the CPU whatever it is.
        settings: what else changes a number, by name, for the ranks of a job to compare before
            any work (the caller's config: method, parameters, precision); the model's weights,
            the analysis dtype and the settings above are compared anyway.

    Raises:
        ValueError: ``dtype`` is float64 and the model's device has none (Apple's MPS).
    """
    if dtype == torch.float64 and not precision.supports_float64(lens.backend.device):
        raise ValueError(f"{desc} runs in float64, which torch lacks on {lens.backend.device}: use precision='auto' "
                         "or 'float32' where the call takes it, or run the model on the CPU.")
    n_batches = math.ceil(len(prompts) / batch_size)
    work = functools.partial(_batch, lens, prompts, measure, layers, heads, min_keys, need, by_frequency,
                             local or (lambda item: item), dtype)
    with lens.backend.analysis(), progress_bar(total=n_batches, desc=desc, progress=progress) as bar:
        for results in ordered_map(work, prompts.batches(batch_size), bar=bar, agree=lambda: fingerprint(
                [each.tokens for each in prompts], model=lens.backend.weights_owner(), **{
                    **(settings or {}), "batch_size": batch_size, "layers": layers, "heads": heads,
                    "by_frequency": by_frequency, "analysis_dtype": precision.dtype_name(dtype),
                    "positions": [(each.query, each.candidates) for each in prompts]})):
            yield from results


def _batch(lens: RopeLens, prompts: PromptSet, measure: Measurement, layers: list[int], heads: tuple[int, ...] | None,
           min_keys: int, need: str, by_frequency: bool, local: Callable[[Measured], Any], dtype: torch.dtype,
           batch: tuple[list[int], Tensor, Tensor]) -> list[Any]:
    """One batch: one capture, then every stack of layers, key group and part.

    Long inputs (``Backend.long_input``) stream: each layer is measured during the forward as soon
    as its capture is complete, and dropped, so memory holds one layer's capture instead of all.
    """
    indices, tokens, query = batch
    results: list[Any] = []

    def measure_stack(stack: list[int], captures: dict[int, LayerCapture]) -> None:
        geo, capture = _stack(lens, stack, captures)
        per_layer = lens.layers[stack[0]].n_heads
        chosen = torch.tensor(heads if heads is not None else range(per_layer))
        stacked = (torch.arange(len(stack))[:, None] * per_layer + chosen).flatten()
        for group in prompts.key_groups(indices, geo, min_keys, need):
            # the token factors hold [prompt, head, n, d + 1] (twice while built, and the swap score
            # keeps both factors in rank order too): cut the group to fit
            per_prompt = 8 * len(stacked) * len(group.swappable) * (geo.d_head + 1) * 5
            for part in group.split(max(1, CHUNK_BYTES // per_prompt)):
                views = key_logits(geo, capture, part, stacked, by_frequency, dtype)
                values = _concat_slots([measure(view) for view in views]) if by_frequency else measure(views[0])
                results.append(local(Measured([lens.layers[layer] for layer in stack], part.prompts, chosen,
                                              {name: _on_cpu(value) for name, value in values.items()})))

    if _streams(lens, tokens):
        def on_layer(layer: int, capture: LayerCapture) -> None:
            lens.layers[layer].check_capture(capture)
            measure_stack([layer], {layer: capture})

        lens.backend.capture(tokens, layers, query_index=query, on_layer=on_layer)
        return results
    captures = lens.backend.capture(tokens, layers, query_index=query)
    for layer, capture in captures.items():
        lens.layers[layer].check_capture(capture)
    for stack in _bounded(lens, stacked_layers(lens, layers, captures), heads, int(tokens.shape[1])):
        measure_stack(stack, captures)
    captures.clear()
    return results


def _on_cpu(value: Tensor) -> Tensor:
    """A measured value on the CPU, floats in fp64 (``exact_dtype``): the reductions over prompts
    run in fp64 whatever the analysis dtype."""
    cpu = torch.device("cpu")
    return value.to(cpu, precision.exact_dtype(cpu)) if value.is_floating_point() else value.cpu()


def _streams(lens: RopeLens, tokens: Tensor) -> bool:
    """Whether a batch of ``tokens`` is measured layer by layer during its forward (long inputs)."""
    return lens.backend.long_input(tokens.shape)


def _concat_slots(parts: list[dict[str, Tensor]]) -> dict[str, Tensor]:
    return {name: torch.cat([part[name] for part in parts], dim=2) for name in parts[0]}


# --- reduction ---------------------------------------------------------------------------------
def key_columns(layers: list[LayerGeometry], heads: Tensor, by_frequency: bool) -> dict[str, np.ndarray]:
    """Index columns for a ``[layer · head(, slot)]`` block of values, flattened layer- then head-major."""
    parts = []
    for geo in layers:
        n_slots = geo.n_planes + 1 if by_frequency else 1
        head_ids = np.repeat(heads.numpy(), n_slots)
        columns = {"layer": np.full(len(head_ids), geo.layer), "head": head_ids,
                   "kv_head": geo.kv_head_of.numpy()[head_ids]}
        if by_frequency:
            columns["plane"] = np.tile(np.array(geo.plane_ids), len(heads))
            columns["theta"] = np.tile(np.array(geo.theta.tolist() + [0.0]), len(heads))
        parts.append(columns)
    return {name: np.concatenate([part[name] for part in parts]) for name in parts[0]}


def _frame(parts: list[dict[str, np.ndarray]], columns: list[str]) -> pd.DataFrame:
    return pd.DataFrame({name: np.concatenate([part[name] for part in parts]) for name in columns})


@dataclass
class Sums:
    """A ``Measured``'s values summed over its prompts: ``{column: [layer · head(, slot)]}`` (fp64),
    squares as ``<column>_sq``, over ``n`` prompts."""

    layers: list[LayerGeometry]
    heads: tuple[int, ...]
    n: int
    sums: dict[str, Tensor]


@dataclass
class _Block:
    """Running sums of one stack of layers: ``{column: [layer · head(, slot)]}`` rows, layer-major."""

    layers: list[LayerGeometry]
    heads: tuple[int, ...]
    sums: dict[str, Tensor]


def _layer_rows(i: int, heads: tuple[int, ...]) -> slice:
    """The rows of the ``i``-th layer in a layer-major ``[layer · head(, slot)]`` block."""
    return slice(i * len(heads), (i + 1) * len(heads))


class RunningMean:
    """Running sums per (layer, head[, slot]): memory does not grow with the number of prompts.

    Sums are kept per stack of layers as the engine measured them, so that one batch costs a few
    whole-stack additions; every entry still adds its prompts in batch order.

    Args:
        spread: columns that also get a ``<column>_std`` (over prompts, ddof = 0).
        by_frequency: values carry a slot (plane) axis.
    """

    def __init__(self, spread: tuple[str, ...] = (), by_frequency: bool = False) -> None:
        self.spread = spread
        self.by_frequency = by_frequency
        self._blocks: dict[tuple[tuple[int, ...], tuple[int, ...]], _Block] = {}
        self._where: dict[tuple[int, tuple[int, ...]], tuple[_Block, int]] = {}  # (layer, heads) -> (block, i)
        self._counts: dict[tuple[int, tuple[int, ...]], int] = {}

    def partial(self, item: Measured) -> Sums:
        """One ``Measured``'s sums over its prompts (what travels between ranks)."""
        sums = {name: value.sum(0) for name, value in item.values.items()}
        sums.update({name + "_sq": item.values[name].square().sum(0) for name in self.spread if name in sums})
        return Sums(item.layers, tuple(item.heads.tolist()), len(item.prompts), sums)

    def merge(self, part: Sums) -> None:
        """Accumulate one ``partial``: one addition per column when its stack was seen before."""
        keys = [(geo.layer, part.heads) for geo in part.layers]
        for key in keys:
            self._counts[key] = self._counts.get(key, 0) + part.n
        stack = (tuple(geo.layer for geo in part.layers), part.heads)
        if stack in self._blocks:
            for name, value in part.sums.items():
                self._blocks[stack].sums[name].add_(value)
            return
        if not any(key in self._where for key in keys):  # a new stack of new layers
            block = self._blocks[stack] = _Block(list(part.layers), part.heads,
                                                 {name: value.clone() for name, value in part.sums.items()})
            self._where.update({key: (block, i) for i, key in enumerate(keys)})
            return
        for i, (key, geo) in enumerate(zip(keys, part.layers, strict=True)):  # stacked otherwise before: by layer
            rows = _layer_rows(i, part.heads)
            if key in self._where:
                block, j = self._where[key]
                for name, value in part.sums.items():
                    block.sums[name][_layer_rows(j, block.heads)].add_(value[rows])
            else:
                block = self._blocks[((geo.layer,), part.heads)] = _Block(
                    [geo], part.heads, {name: value[rows].clone() for name, value in part.sums.items()})
                self._where[key] = (block, 0)

    def frame(self, columns: list[str]) -> pd.DataFrame:
        """Means (and spreads) in ``columns`` order after the key columns (``n_prompts``: the count),
        sorted by layer and head; planes stay in slot order (1 … F, then 0)."""
        parts: list[dict[str, np.ndarray]] = []
        for block in sorted(self._blocks.values(), key=lambda block: block.heads):  # then stably by layer
            counts = [self._counts[(geo.layer, block.heads)] for geo in block.layers]
            if len(set(counts)) == 1:  # the whole block at once
                parts.append(self._means(block.layers, block.heads, block.sums, counts[0], columns))
            else:
                parts += [self._means([geo], block.heads, {name: total[_layer_rows(i, block.heads)]
                                                           for name, total in block.sums.items()}, n, columns)
                          for i, (geo, n) in enumerate(zip(block.layers, counts, strict=True))]
        keys = ["layer", "head", "kv_head"] + (["plane", "theta"] if self.by_frequency else [])
        frame = _frame(parts, keys + columns)
        order = np.argsort(frame["layer"].to_numpy(), kind="stable")  # a layer's rows keep head and slot order
        return frame if (order[1:] > order[:-1]).all() else frame.iloc[order].reset_index(drop=True)

    def _means(self, layers: list[LayerGeometry], heads: tuple[int, ...], sums: dict[str, Tensor], n: int,
               columns: list[str]) -> dict[str, np.ndarray]:
        """Key columns and ``columns`` of layers whose sums all count ``n`` prompts."""
        part = key_columns(layers, torch.tensor(heads), self.by_frequency)
        for name in columns:
            if name.endswith("_std") and name[:-4] in self.spread:
                mean = sums[name[:-4]] / n
                part[name] = (sums[name[:-4] + "_sq"] / n - mean.square()).clamp_min(0).sqrt().reshape(-1).numpy()
            elif name == "n_prompts":
                part[name] = np.full(len(part["head"]), n)
            else:
                part[name] = (sums[name] / n).reshape(-1).numpy()
        return part


def per_prompt_frame(items: Iterator[Measured], columns: list[str], by_frequency: bool) -> pd.DataFrame:
    """One row per (prompt, layer, head[, plane]), in that sort order."""
    parts = []
    for item in items:
        keys = key_columns(item.layers, item.heads, by_frequency)
        size = len(keys["head"])
        for g, prompt in enumerate(item.prompts):
            part = {"prompt": np.full(size, prompt), **keys}
            part.update({name: item.values[name][g].reshape(-1).numpy() for name in columns})
            parts.append(part)
    key_names = ["prompt", "layer", "head", "kv_head"] + (["plane", "theta"] if by_frequency else [])
    order = ["prompt", "layer", "head"] + (["plane"] if by_frequency else [])
    return _frame(parts, key_names + columns).sort_values(order, kind="stable").reset_index(drop=True)
