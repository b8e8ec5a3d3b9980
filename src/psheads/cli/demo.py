"""``psheads demo``: the main job in one command: the shipped models (or a random GPT-J), then
Gemma 3 270M on natural text."""

from __future__ import annotations

import argparse
from typing import Any, cast

from psheads.cli import common
from psheads.cli.options import command, positive_int, seed


def add(sub: Any) -> None:
    """Add ``demo`` to the sub-commands."""
    demo = command(sub, "demo", "the main job: score and profile the shipped models (or a random GPT-J), then "
                                 "score Gemma 3 270M on natural text", run)
    demo.add_argument("--seed", type=seed, default=0, help="seed of the prompts (and of the random model)")
    demo.add_argument("--no-llm", action="store_true", help="skip the Gemma 3 270M part")
    demo.add_argument("--prompts", type=positive_int, default=512, help="number of prompts")


def run(args: argparse.Namespace) -> int:
    """The shipped models (or a random GPT-J), then Gemma 3 270M unless ``--no-llm``."""
    from psheads.models import zoo

    if all((zoo.PRETRAINED_DIR / name / "config.json").exists() for name in zoo.PRETRAINED):
        code = demo_shipped(args)
    else:
        code = demo_random(args)
    return code if args.no_llm else demo_llm(args)


DEMO_TEXT = (
    "A head acts positionally when its attention depends on where a token stands, and symbolically when it "
    "depends on what the token is. Rotary position embeddings give every head a bank of two-dimensional planes "
    "that turn at different speeds as the position grows. Fast planes tell neighbours apart; slow planes barely "
    "move, so they carry the identity of a word over long distances. Which planes a head uses goes a long way "
    "towards explaining which of the two behaviours it shows, and this demo measures both on a real model."
)
"""Natural text for the demo's LLM part (our own words)."""


def demo_llm(args: argparse.Namespace) -> int:
    """Gemma 3 270M's heads on windows of natural text, by layer (skipped without the gemma extra)."""
    import torch

    from psheads.measure.scoring import score_heads
    from psheads.models import zoo
    from psheads.rope.lens import RopeLens

    try:
        with common.loader_output(args.quiet):
            pretrained = zoo.load_pretrained("gemma-3-270m")
    except ValueError as err:
        print(f"\n== Gemma 3 270M: skipped ({err})")
        return 0
    lens = RopeLens(pretrained.model)
    tokens = pretrained.model.to_tokens(DEMO_TEXT)[0]
    width = min(64, len(tokens) - 1)
    prompts = torch.stack([tokens[start : start + width] for start in range(0, len(tokens) - width + 1, 8)])
    print(f"\n== Gemma 3 270M ({pretrained.info['licence']}): {lens}")
    print(f"{len(prompts)} windows of {width} tokens of natural text; medians over the 4 heads of each layer")
    frame = score_heads(lens, prompts, progress=common.progress(args))
    print(f"{'layer':>5} {'attention':>9} {'positional':>10} {'symbolic':>8}  labels")
    for layer, rows in frame.groupby("layer"):
        kind = "local" if lens.layers[cast(int, layer)].window is not None else "global"
        labels = ", ".join(f"{label} {count}" for label, count in rows["label"].value_counts().items() if count)
        print(f"{layer:>5} {kind:>9} {rows['positional'].median():>10.3f} {rows['symbolic'].median():>8.3f}  {labels}")
    return 0


def demo_shipped(args: argparse.Namespace) -> int:
    """Scores and frequency usage of the shipped models beside paper B's table 1."""
    from psheads.measure.frequency_profile import frequency_profile
    from psheads.measure.scoring import score_heads
    from psheads.models import zoo
    from psheads.reproduction.references import PAPER_B_TABLE_1
    from psheads.rope.lens import RopeLens
    from psheads.tasks import checked_batch

    for name in ("number", "letter"):  # the defaults: paper B's recipe
        with common.loader_output(args.quiet):
            shipped = zoo.load_pretrained(name)
        lens = RopeLens(shipped.model)
        prompts = checked_batch(shipped.task, args.prompts, seed=args.seed).tokens
        assert shipped.evaluation is not None  # every shipped task model comes with its evaluation
        accuracy = shipped.evaluation.set_index("hops")["accuracy"]
        print(f"\n== {name} task: {lens}")
        print("accuracy of the shipped weights by hops: "
              + ", ".join(f"{hops}: {acc:.4f}" for hops, acc in accuracy.items()))
        bars = common.progress(args)
        scores = score_heads(lens, prompts, progress=bars)
        profile = frequency_profile(lens, prompts, progress=bars).heads
        softmax = frequency_profile(lens, prompts, progress=bars, weighting="softmax", scale=False).heads
        print(f"{'layer':>5} {'positional':>10} {'symbolic':>8} {'label':>10} {'entropy':>7} "
              f"{'dominant':>8} {'mean_id':>7} {'B_style_id':>10} {'paper_B_id':>10}")
        for row, prof, ours, paper in zip(scores.itertuples(), profile.itertuples(), softmax.itertuples(),
                                          PAPER_B_TABLE_1[name], strict=True):
            print(f"{row.layer:>5} {row.positional:>10.3f} {row.symbolic:>8.3f} {row.label:>10} {row.entropy:>7.3f} "
                  f"{prof.dominant_plane:>8} {prof.mean_frequency_id:>7.1f} {ours.mean_frequency_id:>10.1f} "
                  f"{paper:>10}")
        print("mean_id: usage-weighted; B_style_id: paper B's definition (softmax of each plane's maximum logit), "
              "comparable with paper_B_id (table 1)")
    return 0


def demo_random(args: argparse.Namespace) -> int:
    """A random paper-B GPT-J: its geometry and its heads' frequency usage on random prompts."""
    import torch

    from psheads.measure.frequency_profile import frequency_profile
    from psheads.models import zoo
    from psheads.rope.lens import RopeLens

    print(f"No shipped models found: building a random paper-B GPT-J (12 layers x 1 head, hidden 128, "
          f"seed {args.seed}) ...")
    model = zoo.random_gptj(seed=args.seed)
    lens = RopeLens(model)
    print(f"{lens}\nSelf-check passed: the planes rebuild the model's attention pattern on every layer.\n")
    print(f"{'layer':>5} {'heads':>5} {'d_head':>6} {'rot_dim':>7} {'planes':>6} {'pairing':>8} "
          f"{'theta_1':>9} {'theta_F':>9} {'scale':>7}")
    for geo in lens.layers:
        print(f"{geo.layer:>5} {geo.n_heads:>5} {geo.d_head:>6} {geo.rotary_dim:>7} {geo.n_planes:>6} "
              f"{geo.pairing:>8} {float(geo.theta[0]):>9.3g} {float(geo.theta[-1]):>9.3g} {geo.scale:>7.4f}")
    generator = torch.Generator().manual_seed(args.seed)
    tokens = torch.randint(0, lens.backend.d_vocab - 2, (args.prompts, 17), generator=generator)
    profile = frequency_profile(lens, tokens, progress=common.progress(args))
    print(f"\nFrequency usage on {args.prompts} random prompts of 17 tokens (query = last token)")
    print(f"{'layer':>5} {'head':>4} {'dominant':>8} {'mean_id':>7}")
    for row in profile.heads.itertuples():
        print(f"{row.layer:>5} {row.head:>4} {row.dominant_plane:>8} {row.mean_frequency_id:>7.1f}")
    return 0
