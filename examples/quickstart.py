"""Quickstart: per-frequency logits, the position × token matrix, gating and plane hooks.

Run with a local Hugging Face model directory, or without arguments on a seeded random
paper-B GPT-J (offline):

    python examples/quickstart.py [path/to/local/model]
"""

from __future__ import annotations

import sys

import torch

import psheads as ps
from psheads.models import zoo


@torch.no_grad()
def main(model_dir: str | None = None) -> dict:
    model = zoo.boot_local(model_dir) if model_dir else zoo.random_gptj(seed=0)
    lens = ps.RopeLens(model)  # self-check: the planes rebuild the model's attention pattern
    print(lens)
    layer = lens.n_layers // 2
    geo = lens.layers[layer]
    print(f"layer {layer}: {geo.n_planes} planes, θ from {float(geo.theta[0]):.3g} to "
          f"{float(geo.theta[-1]):.3g} rad/position, scale {geo.scale:.4f}")

    tokens = torch.randint(0, int(model.cfg.d_vocab), (2, 24), generator=torch.Generator().manual_seed(0))
    planes = lens.frequency_logits(tokens, layer)  # [batch, head, plane, key]
    share = planes.norm(dim=-1) / planes.norm(dim=-1).sum(-1, keepdim=True)
    top = share[0, 0].topk(3)
    print("head 0, first prompt: largest planes", [(int(i) + 1, round(float(v), 3)) for v, i in zip(*top)])

    M = lens.position_token_logits(tokens, layer)  # [batch, head, position, token]
    print("M diagonal equals the model's logit row:",
          torch.allclose(torch.diagonal(M, dim1=-2, dim2=-1), planes.sum(2)))

    fastest = [1, 2, 3, 4]
    with lens.gate(fastest, layers=[layer]):  # zero the four fastest planes of every query head
        gated = model(tokens)
    ungated = model(tokens)
    print(f"gating planes {fastest} of layer {layer} moves the logits by {float((gated - ungated).abs().max()):.3g}")

    with lens.plane_hooks([layer]) as names:
        def drop_fastest(plane_logits, hook):
            plane_logits[:, :, : len(fastest)] = 0.0  # same edit, on the per-plane logits
            return plane_logits

        edited = model.run_with_hooks(tokens, fwd_hooks=[(names[layer], drop_fastest)])
    print(f"the same edit through plane hooks differs from gating by {float((edited - gated).abs().max()):.2g}")
    return {"lens": lens, "gated": gated, "edited": edited}


if __name__ == "__main__":
    main(sys.argv[1] if len(sys.argv) > 1 else None)
