"""Paper B's GPT-J built for a task (seeded from ``TrainConfig.seed``), and frequency gating: every
query head keeps only some RoPE planes, the others held at exactly zero.
"""

from __future__ import annotations

import torch
import transformers

from psheads.models import zoo
from psheads.models.training.config import TrainConfig
from psheads.rope import geometry
from psheads.tasks import Task


def build_model(task: Task, config: TrainConfig) -> transformers.GPTJForCausalLM:
    """Paper B's GPT-J for ``task`` (vocabulary + ``<unk>``/``<bos>``), seeded, gating applied."""
    with torch.random.fork_rng(devices=[]):
        torch.manual_seed(config.seed)
        model = transformers.GPTJForCausalLM(zoo.gptj_config(len(task.vocabulary) + 2, **config.model))
    apply_gating(model, config.keep_planes)
    return model


def query_keep_mask(model: transformers.GPTJForCausalLM, keep_planes: tuple[int, ...]) -> torch.Tensor:
    """``[n_embd]`` mask over q_proj outputs that keeps only ``keep_planes`` in every head."""
    cfg = model.config
    d_head = cfg.n_embd // cfg.n_head
    layout = geometry.plane_layout(d_head, cfg.rotary_dim or d_head, "adjacent")
    all_planes = list(range(1, layout.n_planes + 1)) + ([0] if layout.rotary_dim < d_head else [])
    unknown = sorted(set(keep_planes) - set(all_planes))
    if unknown:
        raise ValueError(f"keep_planes {unknown} do not exist: this model has frequency IDs 1…{layout.n_planes}"
                         + (" and 0 (unrotated dims)." if 0 in all_planes else "."))
    head_mask = geometry.plane_keep_mask(layout, [p for p in all_planes if p not in keep_planes])
    return head_mask.repeat(cfg.n_head)


def query_weights(model: transformers.GPTJForCausalLM) -> list[torch.nn.Parameter]:
    """Every layer's q_proj weight ``[n_embd, n_embd]``, in layer order (the model's own parameters)."""
    return [model.get_parameter(f"transformer.h.{layer}.attn.q_proj.weight")
            for layer in range(len(model.transformer.h))]


def apply_gating(model: transformers.GPTJForCausalLM, keep_planes: tuple[int, ...] | None) -> None:
    """Zero the q_proj rows of the gated planes (exact: those planes' logits are then 0)."""
    if keep_planes is None:
        return
    mask = query_keep_mask(model, keep_planes)
    with torch.no_grad():
        for weight in query_weights(model):
            weight.mul_(mask.to(weight)[:, None])
