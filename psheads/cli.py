"""Command line: ``psheads demo | score | profile | train | lengthgen``. Thin: parse, call the library, print."""

from __future__ import annotations

import argparse
import json
import logging
import os
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, get_args

import torch

import psheads
from psheads import schema
from psheads.methods import score_methods
from psheads.references import PAPER_B_FREQUENCY_ID


def _positive_int(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


def _load(model: str) -> tuple[Any, Any]:
    """A shipped model or LLM name, or a local HF directory → (TransformerLens model, task or None)."""
    from psheads import zoo

    if model in zoo.PRETRAINED or model in zoo.LLMS:
        shipped = zoo.load_pretrained(model)
        return shipped.model, shipped.task
    if not Path(model).is_dir():
        raise SystemExit(f"psheads: {model!r} is neither a known model {zoo.PRETRAINED + tuple(zoo.LLMS)} "
                         "nor a directory")
    record = Path(model) / "training_config.json"  # a psheads training checkpoint knows its task
    task = None
    if record.exists():
        from psheads.tasks import get_task

        info = json.loads(record.read_text())
        task = get_task(info["task"], **info.get("task_options", {}))
    return zoo.boot_local(model), task


def _prompts(args: argparse.Namespace, task: Any, model: Any) -> Any:
    from psheads.tasks import checked_batch, get_task

    if args.prompts_file:
        lines = [line.strip() for line in Path(args.prompts_file).read_text().splitlines() if line.strip()]
        if not lines:
            raise SystemExit(f"psheads: {args.prompts_file} has no prompts")
        return lines
    chosen = get_task(args.task) if args.task else task
    if chosen is None:
        raise SystemExit("psheads: pass --task or --prompts-file for a model without a task")
    if hasattr(chosen, "for_tokenizer") and not chosen.built:  # a task for pretrained LLMs: the model's words
        chosen = chosen.for_tokenizer(model.tokenizer)
    return checked_batch(chosen, args.n, seed=args.seed).tokens


def _check_out(path: str | None, flag: str = "--out") -> None:
    """Refuse an output file that could not be written, before any work is done."""
    if path is None:
        return
    folder = Path(path).resolve().parent
    if not folder.is_dir():
        raise SystemExit(f"psheads: cannot write {flag} {path}: the folder {folder} does not exist")
    if not os.access(folder, os.W_OK):
        raise SystemExit(f"psheads: cannot write {flag} {path}: the folder {folder} is not writable")


def _score(args: argparse.Namespace) -> int:
    from psheads.scoring import score_heads

    _check_out(args.out)
    model, task = _load(args.model)
    frame = score_heads(model, _prompts(args, task, model), method=args.method, block_size=args.block_size,
                        by_frequency=args.by_frequency, prepend_bos=False if args.no_bos else None,
                        progress=not args.quiet)
    if args.out:
        frame.to_csv(args.out, index=False)
        print(f"wrote {len(frame)} rows to {args.out}")
    shown = [name for name in schema.SCORES.names if name in frame.columns and name != "kv_head"]
    print(frame[shown].to_string(index=False, float_format=lambda x: f"{x:.3f}"))
    return 0


def _profile(args: argparse.Namespace) -> int:
    from psheads.profile import frequency_profile

    _check_out(args.out)
    model, task = _load(args.model)
    profile = frequency_profile(model, _prompts(args, task, model), prepend_bos=False if args.no_bos else None,
                                progress=not args.quiet)
    if args.out:
        profile.planes.to_csv(args.out, index=False)
        print(f"wrote {len(profile.planes)} rows to {args.out}")
    print(profile.heads[schema.PROFILE_HEADS.names].to_string(index=False, float_format=lambda x: f"{x:.1f}"))
    return 0


FRAME_FORMATS = (".csv", ".parquet")
"""Extensions ``lengthgen --out`` writes (parquet keeps the frame's ``attrs``)."""


def _check_frame_out(path: str | None) -> None:
    """``_check_out`` plus a known extension, and pyarrow for parquet, before any work is done."""
    if path is None:
        return
    suffix = Path(path).suffix.lower()
    if suffix not in FRAME_FORMATS:
        raise SystemExit(f"psheads: --out {path}: write a {' or '.join(FRAME_FORMATS)} file (chosen by extension)")
    if suffix == ".parquet":
        try:
            import pyarrow  # noqa: F401
        except ImportError:
            raise SystemExit(f"psheads: --out {path}: parquet needs pyarrow (pip install pyarrow), or write a .csv "
                             "file (the settings in the frame's attrs are then not kept)") from None
    _check_out(path)


def _lengthgen(args: argparse.Namespace) -> int:
    from psheads.lengthgen import length_generalization
    from psheads.tasks import get_task

    _check_frame_out(args.out)
    if args.figure is not None and Path(args.figure).suffix.lower() not in (".html", ".htm"):
        raise SystemExit(f"psheads: --figure {args.figure}: the figure is written as HTML (.html)")
    _check_out(args.figure, "--figure")
    model, task = _load(args.model)
    chosen = get_task(args.task) if args.task else task
    if chosen is None:
        raise SystemExit("psheads: pass --task for a model without a task (number, letter)")
    frame = length_generalization(model, chosen, args.lengths, n=args.n, seed=args.seed,
                                  token_budget=args.token_budget, answers=args.answers, progress=not args.quiet)
    if args.out:
        if Path(args.out).suffix.lower() == ".parquet":
            frame.to_parquet(args.out, index=False)
        else:
            frame.to_csv(args.out, index=False)
        print(f"wrote {len(frame)} rows to {args.out}")
    if args.figure:
        from psheads import plotting

        # plotly.js inline: the page opens offline, at the cost of ~4 MB
        plotting.accuracy_vs_length(frame).write_html(args.figure, include_plotlyjs=True)
        print(f"wrote the figure to {args.figure}")
    table = frame.pivot(index="length", columns="hops", values="accuracy")
    print(f"accuracy of {args.model} on the {frame.attrs['task']} task ({args.n} prompts per length, seed {args.seed}, "
          f"argmax over {'the answer vocabulary' if args.answers == 'task' else 'the whole vocabulary'})")
    print(table.to_string(float_format=lambda x: f"{x:.3f}"))
    return 0


def _train(args: argparse.Namespace) -> int:
    from psheads.training import TrainConfig, train

    config = TrainConfig(steps=args.steps, batch_size=args.batch_size, lr=args.lr, warmup_steps=args.warmup,
                         checkpoint_every=args.checkpoint_every, seed=args.seed, eval_prompts=args.eval_prompts,
                         dynamics_prompts=args.dynamics_prompts,
                         keep_planes=tuple(args.keep_planes) if args.keep_planes else None)
    result = train(args.task, config, args.out, resume=not args.no_resume, progress=not args.quiet)
    final = result.evaluation[result.evaluation["step"] == result.evaluation["step"].max()]
    print(f"final checkpoint: {result.final_checkpoint} ({result.seconds:.0f} s of training in this call)")
    print(final.to_string(index=False))
    return 0


def _demo(args: argparse.Namespace) -> int:
    from psheads import zoo

    if all((zoo.PRETRAINED_DIR / name / "config.json").exists() for name in zoo.PRETRAINED):
        code = _demo_shipped(args)
    else:
        code = _demo_random(args)
    return code if args.no_llm else _demo_llm(args)


DEMO_TEXT = (
    "A head acts positionally when its attention depends on where a token stands, and symbolically when it "
    "depends on what the token is. Rotary position embeddings give every head a bank of two-dimensional planes "
    "that turn at different speeds as the position grows. Fast planes tell neighbours apart; slow planes barely "
    "move, so they carry the identity of a word over long distances. Which planes a head uses goes a long way "
    "towards explaining which of the two behaviours it shows, and this demo measures both on a real model."
)
"""Natural text for the demo's LLM part (our own words)."""


def _demo_llm(args: argparse.Namespace) -> int:
    from psheads import zoo
    from psheads.lens import RopeLens
    from psheads.scoring import score_heads

    try:
        pretrained = zoo.load_pretrained("gemma-3-270m")
    except ValueError as err:
        print(f"\n== Gemma 3 270M: skipped ({err})")
        return 0
    lens = RopeLens(pretrained.model)
    tokens = pretrained.model.to_tokens(DEMO_TEXT)[0]
    width = min(64, len(tokens) - 1)
    prompts = torch.stack([tokens[start : start + width] for start in range(0, len(tokens) - width + 1, 8)])
    print(f"\n== Gemma 3 270M ({pretrained.info['terms']}): {lens}")
    print(f"{len(prompts)} windows of {width} tokens of natural text; medians over the 4 heads of each layer")
    frame = score_heads(lens, prompts, progress=not args.quiet)
    print(f"{'layer':>5} {'attention':>9} {'positional':>10} {'symbolic':>8}  labels")
    for layer, rows in frame.groupby("layer"):
        kind = "local" if lens.layers[layer].window is not None else "global"
        labels = ", ".join(f"{label} {count}" for label, count in rows["label"].value_counts().items())
        print(f"{layer:>5} {kind:>9} {rows['positional'].median():>10.3f} {rows['symbolic'].median():>8.3f}  {labels}")
    return 0


def _demo_shipped(args: argparse.Namespace) -> int:
    from psheads import zoo
    from psheads.lens import RopeLens
    from psheads.profile import frequency_profile
    from psheads.scoring import score_heads
    from psheads.tasks import checked_batch

    for name in zoo.PRETRAINED:
        shipped = zoo.load_pretrained(name)
        lens = RopeLens(shipped.model)
        prompts = checked_batch(shipped.task, args.prompts, seed=args.seed).tokens
        accuracy = shipped.evaluation.set_index("hops")["accuracy"]
        print(f"\n== {name} task: {lens}")
        print("accuracy of the shipped weights by hops: "
              + ", ".join(f"{hops}: {acc:.4f}" for hops, acc in accuracy.items()))
        scores = score_heads(lens, prompts, progress=not args.quiet)
        profile = frequency_profile(lens, prompts, progress=not args.quiet).heads
        print(f"{'layer':>5} {'positional':>10} {'symbolic':>8} {'label':>10} {'entropy':>7} "
              f"{'dominant':>8} {'mean_id':>7} {'paper_B_id':>10}")
        for row, prof, paper in zip(scores.itertuples(), profile.itertuples(), PAPER_B_FREQUENCY_ID[name]):
            print(f"{row.layer:>5} {row.positional:>10.3f} {row.symbolic:>8.3f} {row.label:>10} {row.entropy:>7.3f} "
                  f"{prof.dominant_plane:>8} {prof.mean_frequency_id:>7.1f} {paper:>10}")
    return 0


def _demo_random(args: argparse.Namespace) -> int:
    from psheads import zoo
    from psheads.lens import RopeLens
    from psheads.profile import frequency_profile

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
    tokens = torch.randint(0, int(model.cfg.d_vocab) - 2, (args.prompts, 17), generator=generator)
    profile = frequency_profile(lens, tokens, progress=not args.quiet)
    print(f"\nFrequency usage on {args.prompts} random prompts of 17 tokens (query = last token)")
    print(f"{'layer':>5} {'head':>4} {'dominant':>8} {'mean_id':>7}")
    for row in profile.heads.itertuples():
        print(f"{row.layer:>5} {row.head:>4} {row.dominant_plane:>8} {row.mean_frequency_id:>7.1f}")
    return 0


def _add_prompt_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("model", help="a shipped model (number, letter), gemma-3-270m (psheads[gemma]) or a local "
                                      "Hugging Face directory")
    parser.add_argument("--task", help="generate prompts from this registered task (default: the model's)")
    parser.add_argument("--n", type=_positive_int, default=256, help="number of task prompts")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--prompts-file", help="a text file with one prompt per line instead of a task")
    parser.add_argument("--no-bos", action="store_true", help="do not prepend BOS to text prompts")
    parser.add_argument("--out", help="write the frame to this CSV file")
    parser.add_argument("--quiet", action="store_true", help="no progress bar")


def build_parser() -> argparse.ArgumentParser:
    """The ``psheads`` argument parser."""
    parser = argparse.ArgumentParser(prog="psheads", description=__doc__)
    parser.add_argument("--version", action="version", version=f"psheads {psheads.__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    demo = sub.add_parser("demo", help="the main job: score and profile the shipped models (or a random GPT-J), "
                                       "then score Gemma 3 270M on natural text")
    demo.add_argument("--seed", type=int, default=0)
    demo.add_argument("--no-llm", action="store_true", help="skip the Gemma 3 270M part")
    demo.add_argument("--prompts", type=_positive_int, default=512, help="number of prompts")
    demo.add_argument("--quiet", action="store_true", help="no progress bar")
    demo.set_defaults(run=_demo)

    score = sub.add_parser("score", help="positional/symbolic scores of every head")
    _add_prompt_options(score)
    score.add_argument("--method", choices=score_methods(), default="swap",
                       help="score method (register more with psheads.register_score_method)")
    score.add_argument("--block-size", type=_positive_int, default=1)
    score.add_argument("--by-frequency", action="store_true")
    score.set_defaults(run=_score)

    profile = sub.add_parser("profile", help="frequency usage of every head")
    _add_prompt_options(profile)
    profile.set_defaults(run=_profile)

    from psheads.lengthgen import DEFAULT_TOKEN_BUDGET, Answers

    lengthgen = sub.add_parser("lengthgen", help="accuracy per prompt length and hop count (length generalization)")
    lengthgen.add_argument("model", help="a shipped model (number, letter) or a local Hugging Face directory")
    lengthgen.add_argument("--lengths", type=_positive_int, nargs="+", required=True,
                           help="total prompt lengths in tokens (at least n_target + n_pre + 1 = 17 by default)")
    lengthgen.add_argument("--task", help="a registered multi-hop task (default: the model's)")
    lengthgen.add_argument("--n", type=_positive_int, default=512, help="prompts per length")
    lengthgen.add_argument("--seed", type=int, default=0)
    lengthgen.add_argument("--token-budget", type=_positive_int, default=DEFAULT_TOKEN_BUDGET,
                           help="tokens per forward pass (budget // length prompts at once, at least one)")
    lengthgen.add_argument("--answers", choices=get_args(Answers), default="task",
                           help="argmax over the task's answer tokens (default) or the whole vocabulary")
    lengthgen.add_argument("--out", help="write the frame to this .csv or .parquet file (parquet keeps the settings)")
    lengthgen.add_argument("--figure", help="write accuracy vs length to this HTML file (opens offline)")
    lengthgen.add_argument("--quiet", action="store_true", help="no progress bar")
    lengthgen.set_defaults(run=_lengthgen)

    train = sub.add_parser("train", help="train paper B's GPT-J on a task (resumes by default)")
    train.add_argument("task", help="a registered task (number, letter, ...)")
    train.add_argument("--out", required=True, help="run directory")
    train.add_argument("--steps", type=_positive_int, default=6000)
    train.add_argument("--batch-size", type=_positive_int, default=64)
    train.add_argument("--lr", type=float, default=1e-4)
    train.add_argument("--warmup", type=int, default=750)
    train.add_argument("--checkpoint-every", type=_positive_int, default=500)
    train.add_argument("--seed", type=int, default=0)
    train.add_argument("--eval-prompts", type=_positive_int, default=2048, help="test prompts per checkpoint")
    train.add_argument("--dynamics-prompts", type=int, default=256, help="prompts scored per checkpoint (0: off)")
    train.add_argument("--keep-planes", type=int, nargs="+", help="frequency gating: planes heads may use")
    train.add_argument("--no-resume", action="store_true", help="refuse a directory that already has checkpoints")
    train.add_argument("--quiet", action="store_true", help="no progress bar")
    train.set_defaults(run=_train)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    """Entry point; returns the exit code."""
    logging.basicConfig(level=logging.WARNING)
    args = build_parser().parse_args(argv)
    try:
        return args.run(args)
    except (ValueError, TypeError, FileNotFoundError) as err:
        print(f"psheads {args.command}: {err}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
