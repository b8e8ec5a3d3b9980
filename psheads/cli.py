"""Command line: ``psheads demo`` (the built-in default job)."""

from __future__ import annotations

import argparse
import logging
import sys
from collections.abc import Sequence

import torch


def _demo(args: argparse.Namespace) -> int:
    from psheads import zoo
    from psheads.lens import RopeLens
    from psheads.profile import frequency_profile

    print(f"Building a random paper-B GPT-J (12 layers x 1 head, hidden 128, seed {args.seed}) ...")
    model = zoo.random_gptj(seed=args.seed)
    lens = RopeLens(model)
    print(f"{lens}\nSelf-check passed: the planes rebuild the model's attention pattern on every layer.\n")
    print("RoPE geometry per layer (read from the model's own tables)")
    print(f"{'layer':>5} {'heads':>5} {'d_head':>6} {'rot_dim':>7} {'planes':>6} {'pairing':>8} "
          f"{'theta_1':>9} {'theta_F':>9} {'scale':>7}")
    for geo in lens.layers:
        print(f"{geo.layer:>5} {geo.n_heads:>5} {geo.d_head:>6} {geo.rotary_dim:>7} {geo.n_planes:>6} "
              f"{geo.pairing:>8} {float(geo.theta[0]):>9.3g} {float(geo.theta[-1]):>9.3g} {geo.scale:>7.4f}")
    generator = torch.Generator().manual_seed(args.seed)
    tokens = torch.randint(0, int(model.cfg.d_vocab), (args.prompts, args.length), generator=generator)
    if args.length < 2:
        raise SystemExit("psheads demo: --length must be at least 2 (the query needs a key before it)")
    profile = frequency_profile(lens, tokens, progress=not args.quiet)
    print(f"\nFrequency usage on {args.prompts} random prompts of {args.length} tokens (query = last token)")
    print(f"{'layer':>5} {'head':>4} {'dominant':>8} {'mean_id':>7}  top-3 planes (share)")
    for row in profile.heads.itertuples():
        top = (profile.planes.query("layer == @row.layer and head == @row.head")
               .nlargest(3, "usage"))
        shares = ", ".join(f"{int(p)} ({u:.2f})" for p, u in zip(top["plane"], top["usage"]))
        print(f"{row.layer:>5} {row.head:>4} {row.dominant_plane:>8} {row.mean_frequency_id:>7.1f}  {shares}")
    return 0


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


def build_parser() -> argparse.ArgumentParser:
    """The ``psheads`` argument parser."""
    parser = argparse.ArgumentParser(prog="psheads", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    demo = sub.add_parser("demo", help="geometry and frequency usage of a seeded random paper-B GPT-J")
    demo.add_argument("--seed", type=int, default=0)
    demo.add_argument("--prompts", type=_positive_int, default=64, help="number of random prompts")
    demo.add_argument("--length", type=_positive_int, default=17, help="tokens per prompt (at least 2)")
    demo.add_argument("--quiet", action="store_true", help="no progress bar")
    demo.set_defaults(run=_demo)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit code."""
    logging.basicConfig(level=logging.WARNING)
    args = build_parser().parse_args(argv)
    return args.run(args)


if __name__ == "__main__":
    sys.exit(main())
