"""Causal tests: a model's accuracy on a task with chosen heads, or chosen planes of them, knocked out.

An ``Intervention`` names a set of heads (``(layer, head)`` pairs) and what to remove from them:

- the whole head (``planes=None``): **mean ablation**. The head's output ``z`` (its attention-
  weighted values, before the output projection; TransformerLens' ``hook_z``) is replaced, at
  every position, by its mean over the test prompts at that position, computed on the unchanged
  model. The head then writes its average contribution and no information about the prompt;
- chosen planes (``planes=[...]``): **frequency gating** with ``RopeLens.gate``: those planes are
  zeroed in the head's pre-rotary query, which removes exactly their terms from every logit of
  that head (see the gating page) and leaves its values, and the other heads, alone.

Why mean and not zero ablation for whole heads: a head always writes something into the
residual stream, and the later layers (and their layer norms) are calibrated to that offset.
Zeroing it removes the offset too, so a drop in accuracy may come from an input the later layers
never saw rather than from the missing information. Mean ablation removes only what varies with
the prompt, which is what "the model cannot use this head" means; it needs one extra forward pass
over the prompts. Gating all of a head's planes is no alternative: it makes the head attend
uniformly, which still writes the mean of the values and so keeps some prompt information.

``ablate`` evaluates the unchanged model (intervention ``"none"``) and then each intervention on
the same fresh test prompts, with ``psheads.measure.evaluation``'s accuracy per hop count. Every hook is
removed when an intervention ends, also on error, and the model's training flags are restored.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import pandas as pd
import torch
from jaxtyping import Float, Int
from torch import Tensor

from psheads.interface import validation
from psheads.interface.config import from_known_fields
from psheads.interface.progress import progress_bar
from psheads.measure.evaluation import batch_accuracy, last_logits
from psheads.results import schema
from psheads.rope.backends import HookSite
from psheads.rope.backends.facts import preserved_state
from psheads.rope.lens import RopeLens, as_lens
from psheads.tasks import Task, checked_batch, task_for_model, task_options

logger = logging.getLogger(__name__)

BASELINE = "none"
"""The intervention name of the unchanged model's rows."""

HEAD_ABLATION = "mean"
"""How a whole head is removed: its ``hook_z`` output replaced by the per-position mean over the test prompts."""

COLUMNS = tuple(schema.ABLATION.names)
"""The columns of ``ablate``'s frame."""

Head = tuple[int, int]


@dataclass(frozen=True)
class Intervention:
    """Heads to knock out, whole or only some of their RoPE planes.

    Attributes:
        name: label of the intervention's rows (anything but ``"none"``, the baseline).
        heads: ``(layer, head)`` pairs (query heads), at least one; stored sorted.
        planes: None: remove the whole heads (mean ablation of their output). Frequency IDs
            (``1…F``, 1 = fastest; 0 = the unrotated dims): zero these planes of the heads' queries
            (``RopeLens.gate``); stored sorted.
    """

    name: str
    heads: tuple[Head, ...]
    planes: tuple[int, ...] | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.name, str) or not self.name or self.name == BASELINE:
            raise ValueError(f"name must be a non-empty string other than {BASELINE!r} (the baseline's rows), "
                             f"got {self.name!r}.")
        if isinstance(self.heads, (str, bytes)) or not isinstance(self.heads, Iterable):
            raise TypeError(f"heads must be a list of (layer, head) pairs, got {type(self.heads).__name__}.")
        pairs = []
        for pair in self.heads:
            values = validation.integers(pair, "heads item", minimum=0)
            if len(values) != 2:
                raise ValueError(f"heads: each item must be a (layer, head) pair, got {pair!r}.")
            pairs.append(values)
        if not pairs:
            raise ValueError("heads must name at least one (layer, head) pair.")
        if len(set(pairs)) != len(pairs):
            raise ValueError(f"heads must not repeat a pair, got {sorted(pairs)}.")
        object.__setattr__(self, "heads", tuple(sorted(pairs)))
        if self.planes is not None:
            planes = validation.integers(self.planes, "planes", minimum=0, unique=True)
            if not planes:
                raise ValueError("planes must name at least one frequency ID (or be None to remove whole heads).")
            object.__setattr__(self, "planes", tuple(sorted(planes)))

    @property
    def layers(self) -> tuple[int, ...]:
        """The layers the intervention touches, sorted."""
        return tuple(sorted({layer for layer, _ in self.heads}))

    def to_dict(self) -> dict[str, Any]:
        """Plain data (lists), for ``attrs`` and JSON."""
        return {"name": self.name, "heads": [list(pair) for pair in self.heads],
                "planes": None if self.planes is None else list(self.planes)}

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Intervention:
        """Inverse of ``to_dict`` (unknown keys are logged and ignored)."""
        return from_known_fields(cls, data)


def heads_by_label(scores: pd.DataFrame, labels: str | Iterable[str] = "positional") -> tuple[Head, ...]:
    """The ``(layer, head)`` pairs a reduced ``score_heads`` frame labels with any of ``labels``, sorted.

    Raises:
        ValueError: missing columns, or a per-plane or per-prompt frame (its labels are not a head's).
    """
    schema.SCORES.check(scores, ["layer", "head", "label"], "heads_by_label")
    extra = [column for column in ("plane", "prompt") if column in scores.columns]
    if extra:
        raise ValueError(f"heads_by_label needs one row per head (a reduced score_heads frame without by_frequency); "
                         f"this frame has the column(s) {extra}.")
    wanted = {labels} if isinstance(labels, str) else set(labels)
    chosen = scores[scores["label"].isin(wanted)]
    return tuple(sorted((int(layer), int(head)) for layer, head in zip(chosen["layer"], chosen["head"], strict=True)))


def random_heads(model_or_lens: Any, count: int, seed: int = 0, exclude: Iterable[Head] = ()) -> tuple[Head, ...]:
    """``count`` distinct ``(layer, head)`` pairs drawn uniformly (seeded) from the model's heads, sorted.

    Args:
        model_or_lens: a TransformerLens RoPE model or a ``RopeLens``.
        count: heads to draw.
        seed: seed of the draw.
        exclude: heads never drawn (e.g. the heads of the intervention this one controls for).

    Raises:
        ValueError: fewer than ``count`` heads are left after ``exclude``.
    """
    lens = as_lens(model_or_lens)
    count, seed = validation.integer(count, "count", minimum=1), validation.seed(seed)
    excluded = {tuple(validation.integers(pair, "exclude item")) for pair in exclude}
    pool = [(geo.layer, head) for geo in lens.layers for head in range(geo.n_heads)
            if (geo.layer, head) not in excluded]
    if count > len(pool):
        raise ValueError(f"count={count} heads asked for, but only {len(pool)} are left after excluding "
                         f"{len(excluded)}.")
    order = torch.randperm(len(pool), generator=torch.Generator().manual_seed(seed))[:count]
    return tuple(sorted(pool[i] for i in order.tolist()))


def _check_against(lens: RopeLens, intervention: Intervention) -> None:
    """Raise ``ValueError`` if the intervention names a layer, head or plane the model lacks."""
    for layer, head in intervention.heads:
        if layer >= lens.n_layers:
            raise ValueError(f"Intervention {intervention.name!r}: layer {layer} is out of range; the model has "
                             f"layers 0…{lens.n_layers - 1}.")
        geo = lens.layers[layer]
        if head >= geo.n_heads:
            raise ValueError(f"Intervention {intervention.name!r}: head {head} is out of range; layer {layer} has "
                             f"heads 0…{geo.n_heads - 1}.")
        if intervention.planes is not None and max(intervention.planes) > geo.layout.n_planes:
            raise ValueError(f"Intervention {intervention.name!r}: plane {max(intervention.planes)} is out of range; "
                             f"layer {layer} has planes 1…{geo.layout.n_planes} (1 = fastest) and 0 (unrotated dims).")


def head_means(lens: RopeLens, tokens: Int[Tensor, "batch pos"], layers: Sequence[int], batch_size: int,
               bar: Any = None) -> dict[int, Float[Tensor, "pos head d_head"]]:
    """Each layer's head outputs z averaged over the prompts, per position (fp64, on the model's device).

    Runs the model as it is (hooks the caller added act); gradients and mode are the caller's business.
    """
    sums: dict[int, Tensor] = {}

    def recorder(layer: int, site: HookSite) -> Any:
        def hook(z: Tensor, hook: Any) -> None:
            total = site.to_canonical(z).detach().double().sum(0)
            sums[layer] = total if layer not in sums else sums[layer] + total

        return hook

    hooks = [(site.name, recorder(layer, site)) for layer, site in ((layer, _site(lens, layer)) for layer in layers)]
    device = lens.backend.device
    with lens.model.hooks(fwd_hooks=hooks):
        for start in range(0, len(tokens), batch_size):
            last_logits(lens.model, tokens[start:start + batch_size].to(device))
            if bar is not None:
                bar.update(1)
    return {layer: total / len(tokens) for layer, total in sums.items()}


def _site(lens: RopeLens, layer: int) -> HookSite:
    """Where the heads' outputs z of ``layer`` are read and replaced."""
    return lens.backend.output_site(layer, lens.layers[layer].d_head)


def _replacer(site: HookSite, heads: list[int], mean: Float[Tensor, "pos head d_head"]) -> Any:
    def hook(z: Tensor, hook: Any) -> Tensor:
        canonical = site.to_canonical(z).clone()
        canonical[:, :, heads] = mean[: canonical.shape[1], heads].to(dtype=z.dtype, device=z.device)
        return site.from_canonical(canonical, z)

    return hook


@contextlib.contextmanager
def applied(lens: RopeLens, intervention: Intervention,
            means: dict[int, Float[Tensor, "pos head d_head"]] | None = None) -> Iterator[None]:
    """Apply ``intervention`` to the lens's model while the block runs; every hook is removed on exit.

    Args:
        lens: the model's lens.
        intervention: what to knock out.
        means: ``head_means`` for the intervention's layers (needed to remove whole heads).

    Raises:
        ValueError: the intervention does not fit the model, or ``means`` lacks one of its layers.
    """
    _check_against(lens, intervention)
    by_layer: dict[int, list[int]] = {}
    for layer, head in intervention.heads:
        by_layer.setdefault(layer, []).append(head)
    with contextlib.ExitStack() as stack:
        if intervention.planes is not None:
            for layer, heads in by_layer.items():
                stack.enter_context(lens.gate(intervention.planes, layers=[layer], heads=heads))
        else:
            available = means or {}
            missing = [layer for layer in by_layer if layer not in available]
            if missing:
                raise ValueError(f"Intervention {intervention.name!r}: no head means for layers {missing}; compute "
                                 "them with head_means.")
            hooks = [(_site(lens, layer).name, _replacer(_site(lens, layer), heads, available[layer]))
                     for layer, heads in by_layer.items()]
            stack.enter_context(lens.model.hooks(fwd_hooks=hooks))
        yield


def ablate(model_or_lens: Any, task: Task | str, interventions: Iterable[Intervention], n: int = 512, seed: int = 0,
           batch_size: int = 64, progress: bool | None = None) -> pd.DataFrame:
    """Next-token accuracy of the model on ``n`` fresh prompts of ``task``, unchanged and under each intervention.

    Every intervention runs on the same prompts (``task.generate(n, seed)``). A whole head is
    mean-ablated: its output ``z`` is replaced by its per-position mean over these prompts on the
    unchanged model (see the module docstring for why); planes are gated in the head's query with
    ``RopeLens.gate``. The prediction is the argmax after the last token over the task's
    candidates, or the whole vocabulary when it has none (as ``psheads.evaluate``).

    Args:
        model_or_lens: a TransformerLens RoPE model (``TransformerBridge`` or ``HookedTransformer``)
            or a ``RopeLens``.
        task: a task, or the name of a registered one (the task the model was trained on with
            other generator settings warns, as in ``psheads.evaluate``).
        interventions: ``Intervention`` objects with distinct names.
        n: test prompts.
        seed: seed of the prompts.
        batch_size: prompts per forward pass.
        progress: progress bar (default: in a notebook or on a terminal).

    Returns:
        One row per intervention (``"none"`` first, then in the given order) and hop count ("1",
        "2", …, then "all"): ``intervention, hops, accuracy, n`` (``psheads.results.schema.ABLATION``).
        ``attrs`` holds the task and its options, ``n``, ``seed``, ``batch_size``, the
        interventions (``Intervention.to_dict``), ``head_ablation``, the model, backend and versions.

    Raises:
        TypeError: not a TransformerLens RoPE model, a bad task, or an intervention of another type.
        ValueError: bad ``n``/``seed``/``batch_size``, repeated intervention names, or a layer, head
            or plane the model lacks.
    """
    lens = as_lens(model_or_lens, progress=progress)
    model = lens.model
    n, seed = validation.integer(n, "n", minimum=1), validation.seed(seed)
    batch_size = validation.integer(batch_size, "batch_size", minimum=1)
    progress = validation.optional_boolean(progress, "progress")
    task = task_for_model(task, model)
    options = task_options(task)  # before any work: a task that cannot record itself is refused
    chosen = list(interventions) if isinstance(interventions, Iterable) else [interventions]
    for each in chosen:
        if not isinstance(each, Intervention):
            raise TypeError(f"interventions must be psheads.experiments.ablation.Intervention objects, got "
                            f"{type(each).__name__}.")
        _check_against(lens, each)
    names = [each.name for each in chosen]
    if len(set(names)) != len(names):
        raise ValueError(f"Intervention names must be distinct, got {names}.")
    mean_layers = sorted({layer for each in chosen if each.planes is None for layer in each.layers})
    batch = checked_batch(task, n, seed=seed)
    steps = -(-n // batch_size)
    frames = []
    with progress_bar(total=steps * (1 + len(chosen) + bool(mean_layers)), desc="ablate", progress=progress) as bar, \
            torch.no_grad(), preserved_state(model):
        means = head_means(lens, batch.tokens, mean_layers, batch_size, bar) if mean_layers else {}
        for intervention in [None, *chosen]:
            with contextlib.nullcontext() if intervention is None else applied(lens, intervention, means):
                rows, _ = batch_accuracy(model, task, batch, batch_size, bar)
            name = BASELINE if intervention is None else intervention.name
            rows.insert(0, "intervention", name)
            frames.append(rows)
            logger.info("%s: accuracy %.4f on %d prompts", name, float(rows["accuracy"].iloc[-1]), n)
    frame = pd.concat(frames, ignore_index=True)[list(COLUMNS)]
    frame.attrs = {"task": task.name, "task_options": options, "n": n,
                   "seed": seed, "batch_size": batch_size, "interventions": [each.to_dict() for each in chosen],
                   "head_ablation": HEAD_ABLATION, "model": lens.backend.model_name, "backend": lens.backend.kind,
                   "versions": schema.versions()}
    return frame
