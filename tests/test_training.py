"""Training: model builder, exact frequency gating, checkpoints, resume and dynamics (tiny runs)."""

from __future__ import annotations

import json

import pytest
import torch
import transformers

import psheads
from psheads import training, zoo
from psheads.tasks import LetterTask, NumberTask

TINY = dict(n_layer=2, n_embd=32, n_head=2, rotary_dim=16, n_positions=64)


def tiny_config(**overrides) -> training.TrainConfig:
    fields = dict(steps=6, batch_size=8, warmup_steps=2, checkpoint_every=3, eval_prompts=32,
                  dynamics_prompts=8, model=TINY)
    return training.TrainConfig(**{**fields, **overrides})


def test_builder_follows_paper_b() -> None:
    model = training.build_model(NumberTask(), training.TrainConfig())
    cfg = model.config
    assert (cfg.n_layer, cfg.n_head, cfg.n_embd, cfg.rotary_dim) == (12, 1, 128, 128)
    assert cfg.n_positions >= 8192 and cfg.vocab_size == 136 + 2
    assert cfg.attn_pdrop == cfg.resid_pdrop == cfg.embd_pdrop == 0.1
    assert sum(p.numel() for p in model.parameters()) > 2_000_000


def test_config_validates_and_round_trips() -> None:
    config = tiny_config(keep_planes=[1, 2])
    assert training.TrainConfig.from_dict(json.loads(json.dumps(config.to_dict()))) == config
    with pytest.raises(ValueError, match="warmup_steps"):
        training.TrainConfig(steps=10, warmup_steps=10)
    with pytest.raises(ValueError, match="batch_size"):
        training.TrainConfig(batch_size=0)
    with pytest.raises(ValueError, match=r"keep_planes \[99\] do not exist"):
        training.build_model(NumberTask(), tiny_config(keep_planes=[1, 99]))


def test_run_checkpoints_resume_and_dynamics(tmp_path) -> None:
    task = NumberTask()
    config = tiny_config()
    full = training.train(task, config, tmp_path / "full", progress=False)
    assert sorted(p.name for p in (tmp_path / "full").glob("checkpoint-*")) == ["checkpoint-000003",
                                                                              "checkpoint-000006"]
    assert set(full.evaluation["hops"]) == {"1", "2", "3", "4", "all"}
    assert list(full.dynamics["step"].unique()) == [3, 6]
    assert {"positional", "symbolic", "label", "accuracy_all", "accuracy_4"} <= set(full.dynamics.columns)
    # interrupt after the first checkpoint (and leave a half-written one behind), then resume
    partial = training.train(task, training.TrainConfig(**{**config.to_dict(), "steps": 6}), tmp_path / "cut",
                             progress=False)
    (partial.output_dir / "checkpoint-000006").rename(partial.output_dir / "checkpoint-000006.partial")
    resumed = training.train(task, config, tmp_path / "cut", progress=False)
    a = transformers.GPTJForCausalLM.from_pretrained(full.final_checkpoint)
    b = transformers.GPTJForCausalLM.from_pretrained(resumed.final_checkpoint)
    for (name, x), (_, y) in zip(a.state_dict().items(), b.state_dict().items()):
        torch.testing.assert_close(x, y, atol=0, rtol=0, msg=name)
    assert (tmp_path / "cut" / "checkpoint-000003").exists()  # finished checkpoints are kept
    assert resumed.evaluation["step"].tolist() == full.evaluation["step"].tolist()
    with pytest.raises(ValueError, match="another task or configuration"):
        training.train(task, tiny_config(lr=3e-4), tmp_path / "full", progress=False)
    with pytest.raises(ValueError, match="already holds checkpoints"):
        training.train(task, config, tmp_path / "full", resume=False, progress=False)


def test_checkpoints_boot_offline_with_their_tokenizer(tmp_path) -> None:
    task = LetterTask()
    result = training.train(task, tiny_config(steps=3, dynamics_prompts=0), tmp_path, progress=False)
    model = zoo.boot_local(result.final_checkpoint)
    batch = task.generate(4, seed=11)
    tokens = model.to_tokens(batch.text, prepend_bos=False)
    assert torch.equal(tokens, batch.tokens)
    info = json.loads((result.final_checkpoint / "training_config.json").read_text())
    assert info["task"] == "letter" and info["step"] == 3


def test_gating_holds_planes_at_exactly_zero(tmp_path) -> None:
    keep = (1, 2)  # d_head 16, rotary 16: planes 1…8, of which 3…8 are gated
    result = training.train(NumberTask(), tiny_config(keep_planes=keep, dynamics_prompts=0), tmp_path,
                            progress=False)
    model = zoo.boot_local(result.final_checkpoint)
    lens = psheads.RopeLens(model)
    planes = lens.frequency_logits(NumberTask().generate(3, seed=1).tokens, 1)
    assert torch.count_nonzero(planes[:, :, 2:]) == 0  # frequency IDs 3…8 (and plane 0)
    assert torch.count_nonzero(planes[:, :, :2]) > 0
    hf = transformers.GPTJForCausalLM.from_pretrained(result.final_checkpoint)
    mask = training.query_keep_mask(hf, keep)
    assert torch.count_nonzero(hf.transformer.h[0].attn.q_proj.weight[mask == 0]) == 0
