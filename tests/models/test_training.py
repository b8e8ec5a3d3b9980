"""Training: model builder, exact frequency gating, checkpoints, resume and dynamics (tiny runs)."""

from __future__ import annotations

import dataclasses
import json
import re
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import safetensors.torch
import torch
import transformers

import psheads
from psheads.models import checkpoints, training, zoo
from psheads.models.training import data as training_data
from psheads.models.training import recording
from psheads.results import schema
from psheads.tasks import LetterTask, NumberTask

# numerically sensitive: every test runs at 1 and 2 torch threads (see conftest.torch_threads)
pytestmark = pytest.mark.usefixtures("torch_threads")

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
    assert full.dynamics["label"].dtype == schema.LABEL_DTYPE  # read back from dynamics.csv
    # interrupt after the first checkpoint (and leave a half-written one behind), then resume
    partial = training.train(task, training.TrainConfig(**{**config.to_dict(), "steps": 6}), tmp_path / "cut",
                             progress=False)
    (partial.output_dir / "checkpoint-000006").rename(partial.output_dir / "checkpoint-000006.partial")
    resumed = training.train(task, config, tmp_path / "cut", progress=False, device="cpu")  # a run setting
    a = transformers.GPTJForCausalLM.from_pretrained(full.final_checkpoint)
    b = transformers.GPTJForCausalLM.from_pretrained(resumed.final_checkpoint)
    for (name, x), (_, y) in zip(a.state_dict().items(), b.state_dict().items(), strict=True):
        torch.testing.assert_close(x, y, atol=0, rtol=0, msg=name)
    assert (tmp_path / "cut" / "checkpoint-000003").exists()  # finished checkpoints are kept
    assert resumed.evaluation["step"].tolist() == full.evaluation["step"].tolist()
    with pytest.raises(ValueError, match="another task or configuration"):
        training.train(task, tiny_config(lr=3e-4), tmp_path / "full", progress=False)
    with pytest.raises(ValueError, match="already holds checkpoints"):
        training.train(task, config, tmp_path / "full", resume=False, progress=False)


def test_train_refuses_a_device_this_machine_lacks(tmp_path) -> None:
    run = tmp_path / "run"
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match=r"device 'cuda': no cuda device is available here; use 'cpu'"):
            training.train(NumberTask(), tiny_config(), run, progress=False, device="cuda")
    with pytest.raises(ValueError, match="device 'gpu' is not a device torch knows"):
        training.train(NumberTask(), tiny_config(), run, progress=False, device="gpu")
    with pytest.raises(ValueError, match="device 'meta' holds shapes, not numbers"):  # used to fail at a checkpoint
        training.train(NumberTask(), tiny_config(), run, progress=False, device="meta")
    with pytest.raises(TypeError, match="device must be a device name"):
        training.train(NumberTask(), tiny_config(), run, progress=False, device=0.5)
    assert not run.exists()
    assert training.training_device(torch.device("cpu")) == torch.device("cpu")


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


# --- regression tests: checkpoints complete or absent, no pickles, same run, damage, cleanup ----
def _copy_run(source, destination):
    shutil.copytree(source, destination)
    return destination


def _same_weights(a, b) -> None:
    x = safetensors.torch.load_file(a / "model.safetensors")
    y = safetensors.torch.load_file(b / "model.safetensors")
    assert x.keys() == y.keys()
    for name in x:
        assert torch.equal(x[name], y[name]), name


@pytest.fixture(scope="module")
def reference_run(tmp_path_factory, torch_threads):
    """An uninterrupted tiny run (checkpoints at steps 3 and 6), shared by the tests that damage copies."""
    return training.train(NumberTask(), tiny_config(dynamics_prompts=4), tmp_path_factory.mktemp("ref") / "run",
                          progress=False)


def test_a_checkpoint_holds_its_records_so_an_interruption_loses_none(tmp_path, monkeypatch, reference_run) -> None:
    """An interruption during a checkpoint's evaluation used to leave the checkpoint in place
    without its rows: the resumed run then never wrote them."""
    real = training.checkpoint_accuracy
    calls = []

    def interrupted(*args, **kwargs):
        calls.append(1)
        if len(calls) == 2:  # checkpoint 6's evaluation
            raise KeyboardInterrupt("killed")
        return real(*args, **kwargs)

    monkeypatch.setattr(recording, "checkpoint_accuracy", interrupted)
    with pytest.raises(KeyboardInterrupt):
        training.train(NumberTask(), tiny_config(dynamics_prompts=4), tmp_path, progress=False)
    monkeypatch.setattr(recording, "checkpoint_accuracy", real)
    assert [p.name for p in checkpoints.list_checkpoints(tmp_path)] == ["checkpoint-000003"]
    assert not list(tmp_path.glob("*.partial"))  # an interrupted checkpoint is removed, never half-kept
    resumed = training.train(NumberTask(), tiny_config(dynamics_prompts=4), tmp_path, progress=False)
    pd.testing.assert_frame_equal(resumed.evaluation, reference_run.evaluation)
    pd.testing.assert_frame_equal(resumed.dynamics, reference_run.dynamics)
    for name in ("evaluation.csv", "dynamics.csv"):
        assert (tmp_path / name).read_bytes() == (reference_run.output_dir / name).read_bytes()
        # each checkpoint holds the run's records up to and including its own step
        assert set(pd.read_csv(tmp_path / "checkpoint-000003" / name)["step"]) == {3}
        assert set(pd.read_csv(tmp_path / "checkpoint-000006" / name)["step"]) == {3, 6}
    _same_weights(resumed.final_checkpoint, reference_run.final_checkpoint)


class _Payload:
    """Unpickling this creates ``marker`` (as a malicious pickle would run a command)."""

    def __init__(self, marker) -> None:
        self.marker = str(marker)

    def __reduce__(self):
        return open, (self.marker, "w")


def test_resume_never_unpickles(tmp_path, reference_run) -> None:
    marker = tmp_path / "code-ran"
    # the old layout: trainer_state.pt, a pickle, and no manifest
    old = _copy_run(reference_run.output_dir, tmp_path / "old")
    for checkpoint in checkpoints.list_checkpoints(old):
        for name in ("manifest.json", "trainer_state.safetensors", "trainer_state.json"):
            (checkpoint / name).unlink(missing_ok=True)
        torch.save({"optimizer": _Payload(marker), "scheduler": {}, "rng": None, "step": 6},
                   checkpoint / "trainer_state.pt")
    with pytest.raises(ValueError, match=r"old format.*trainer_state\.pt.*never unpickles"):
        training.train(NumberTask(), tiny_config(dynamics_prompts=4), old, progress=False)
    assert not marker.exists()
    with pytest.raises(ValueError, match="old format"):
        checkpoints.latest_checkpoint(old)
    # a forged checkpoint whose manifest matches: pickled weights and trainer state are never opened
    forged = _copy_run(reference_run.output_dir, tmp_path / "forged")
    for checkpoint in checkpoints.list_checkpoints(forged):
        (checkpoint / "model.safetensors").unlink()
        torch.save({"weights": _Payload(marker)}, checkpoint / "pytorch_model.bin")
        torch.save({"optimizer": _Payload(marker)}, checkpoint / "trainer_state.pt")
        (checkpoint / "manifest.json").unlink()
        checkpoints.write_manifest(checkpoint, checkpoints.checkpoint_step(checkpoint))
    with pytest.raises(checkpoints.CheckpointError, match="No usable checkpoint"):
        training.train(NumberTask(), tiny_config(dynamics_prompts=4), forged, progress=False)
    assert not marker.exists()


def test_resume_refuses_another_task_or_config_naming_each_field(tmp_path) -> None:
    config = tiny_config(steps=3, dynamics_prompts=0)
    training.train(NumberTask(), config, tmp_path, progress=False)
    with pytest.raises(ValueError, match=r"task_options\.extra_target: 0 in the checkpoint, 5 now"):
        training.train(NumberTask(extra_target=5), config, tmp_path, progress=False)
    with pytest.raises(ValueError, match=r"task: 'number' in the checkpoint, 'letter' now"):
        training.train(LetterTask(), config, tmp_path, progress=False)
    other = tiny_config(steps=3, dynamics_prompts=0, lr=3e-4, seed=1, model={**TINY, "n_layer": 3})
    with pytest.raises(ValueError, match="another task or configuration") as info:
        training.train(NumberTask(), other, tmp_path, progress=False)
    message = str(info.value)
    for part in ("lr: 0.0001 in the checkpoint, 0.0003 now", "seed: 0 in the checkpoint, 1 now",
                 "model.n_layer: 2 in the checkpoint, 3 now"):
        assert part in message
    assert "batch_size" not in message  # only what differs


def _flip_byte(path) -> None:
    data = bytearray(path.read_bytes())
    data[len(data) - 7] ^= 0x01  # in the tensor data, past the header
    path.write_bytes(bytes(data))


def _truncate(path) -> None:
    path.write_bytes(path.read_bytes()[: path.stat().st_size // 2])


DAMAGE = {
    "flipped weight byte": ("model.safetensors", _flip_byte),
    "truncated weights": ("model.safetensors", _truncate),
    "truncated optimizer state": ("trainer_state.safetensors", _truncate),
    "missing tokenizer": ("tokenizer.json", lambda path: path.unlink()),
    "extra file": ("pytorch_model.bin", lambda path: path.write_bytes(b"junk")),
    "damaged records": ("evaluation.csv", lambda path: path.write_text("step,hops\n6,x\n")),
    "garbage manifest": ("manifest.json", lambda path: path.write_text("{not json")),
}


@pytest.mark.parametrize("damage", list(DAMAGE))
def test_a_damaged_checkpoint_falls_back_to_the_previous_one(tmp_path, caplog, reference_run, damage) -> None:
    run = _copy_run(reference_run.output_dir, tmp_path / "run")
    name, hurt = DAMAGE[damage]
    hurt(run / "checkpoint-000006" / name)
    (run / "evaluation.csv").write_text("step,hops,accuracy,n\n99,all,1.0,1\n")  # stale rows are dropped
    with caplog.at_level("WARNING", logger="psheads.training"):
        resumed = training.train(NumberTask(), tiny_config(dynamics_prompts=4), run, progress=False)
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert any(str(run / "checkpoint-000006" / name) in w for w in warnings), warnings
    # checkpoint 6 was redone from checkpoint 3: the run is exactly the uninterrupted one again
    checkpoints.verify_checkpoint(run / "checkpoint-000006")
    _same_weights(resumed.final_checkpoint, reference_run.final_checkpoint)
    assert (run / "checkpoint-000006" / "trainer_state.safetensors").read_bytes() == \
        (reference_run.final_checkpoint / "trainer_state.safetensors").read_bytes()
    pd.testing.assert_frame_equal(resumed.evaluation, reference_run.evaluation)
    pd.testing.assert_frame_equal(resumed.dynamics, reference_run.dynamics)
    assert (run / "evaluation.csv").read_bytes() == (reference_run.output_dir / "evaluation.csv").read_bytes()


def test_no_good_checkpoint_raises_with_the_paths(tmp_path, reference_run) -> None:
    run = _copy_run(reference_run.output_dir, tmp_path / "run")
    for step in (3, 6):
        _flip_byte(run / f"checkpoint-00000{step}" / "model.safetensors")
    with pytest.raises(checkpoints.CheckpointError, match="No usable checkpoint") as info:
        training.train(NumberTask(), tiny_config(dynamics_prompts=4), run, progress=False)
    for step in (3, 6):
        assert str(run / f"checkpoint-00000{step}" / "model.safetensors") in str(info.value)


def test_a_failed_train_removes_the_directory_it_created(tmp_path, monkeypatch) -> None:
    target = tmp_path / "new" / "run"
    with pytest.raises(ValueError, match="keep_planes"):  # a bad config
        training.train(NumberTask(), tiny_config(keep_planes=[99]), target, progress=False)
    assert not (tmp_path / "new").exists()

    def broken(*args, **kwargs):
        raise RuntimeError("broken step")

    monkeypatch.setattr(training_data, "training_batch", broken)  # an error in the first step
    with pytest.raises(RuntimeError, match="broken step"):
        training.train(NumberTask(), tiny_config(), target, progress=False)
    assert not (tmp_path / "new").exists()
    monkeypatch.undo()
    monkeypatch.setattr(recording, "checkpoint_accuracy", broken)  # an error while writing the first checkpoint
    with pytest.raises(RuntimeError, match="broken step"):
        training.train(NumberTask(), tiny_config(dynamics_prompts=0), target, progress=False)
    assert not (tmp_path / "new").exists()
    mine = tmp_path / "mine"  # a directory the call did not create is kept
    mine.mkdir()
    with pytest.raises(RuntimeError, match="broken step"):
        training.train(NumberTask(), tiny_config(dynamics_prompts=0), mine, progress=False)
    assert mine.is_dir()


def test_checkpoints_sort_by_step_number(tmp_path) -> None:
    run = training.train(NumberTask(), tiny_config(steps=3, dynamics_prompts=0), tmp_path, progress=False)
    for name in ("checkpoint-999999", "checkpoint-1000000"):
        shutil.copytree(run.final_checkpoint, tmp_path / name)
    (tmp_path / "checkpoint-1000001.partial").mkdir()
    assert checkpoints.latest_checkpoint(tmp_path).name == "checkpoint-1000000"
    assert [p.name for p in checkpoints.list_checkpoints(tmp_path)] == [
        "checkpoint-000003", "checkpoint-999999", "checkpoint-1000000"]


BAD_CONFIGS = [
    (dict(steps=True), TypeError, "steps"),
    (dict(batch_size=8.0), TypeError, "batch_size"),
    (dict(checkpoint_every=0), ValueError, "checkpoint_every"),
    (dict(eval_prompts=np.bool_(True)), TypeError, "eval_prompts"),
    (dict(warmup_steps=False), TypeError, "warmup_steps"),
    (dict(dynamics_prompts=-1), ValueError, "dynamics_prompts"),
    (dict(dynamics_prompts=1.5), TypeError, "dynamics_prompts"),
    (dict(lr=float("nan")), ValueError, "lr"),
    (dict(lr=float("inf")), ValueError, "lr"),
    (dict(lr=0.0), ValueError, "lr"),
    (dict(lr=-1e-3), ValueError, "lr"),
    (dict(lr=True), TypeError, "lr"),
    (dict(lr="1e-3"), TypeError, "lr"),
    (dict(weight_decay=float("nan")), ValueError, "weight_decay"),
    (dict(weight_decay=float("-inf")), ValueError, "weight_decay"),
    (dict(weight_decay=-0.1), ValueError, "weight_decay"),
    (dict(betas=(0.9,)), ValueError, "betas"),
    (dict(betas=(0.9, 0.99, 0.999)), ValueError, "betas"),
    (dict(betas=(0.9, 1.0)), ValueError, "betas"),
    (dict(betas=(-0.1, 0.9)), ValueError, "betas"),
    (dict(betas=(0.9, float("nan"))), ValueError, "betas"),
    (dict(betas=(0.9, "x")), TypeError, "betas"),
    (dict(betas=0.9), TypeError, "betas"),
    (dict(betas="ab"), TypeError, "betas"),
    (dict(model={"n_layers": 2, "hidden": 3, "n_head": 2}), ValueError, r"model.*\['hidden', 'n_layers'\]"),
    (dict(model=[("n_layer", 2)]), TypeError, "model"),
    (dict(model={"n_layer": object()}), TypeError, "model"),
    (dict(keep_planes=[1.0, 2.0]), TypeError, "keep_planes"),
    (dict(keep_planes=[1, 2, 1]), ValueError, "keep_planes"),
    (dict(keep_planes=[-1]), ValueError, "keep_planes"),
    (dict(keep_planes=3), TypeError, "keep_planes"),
    (dict(seed=-1), ValueError, "seed"),
    (dict(seed=2**64), ValueError, "seed"),
    (dict(seed=1.0), TypeError, "seed"),
]


@pytest.mark.parametrize(("overrides", "error", "match"), BAD_CONFIGS,
                         ids=[f"{next(iter(o))}={next(iter(o.values()))!r}"[:40] for o, _, _ in BAD_CONFIGS])
def test_config_refuses_bad_values_naming_the_field(overrides, error, match) -> None:
    with pytest.raises(error, match=match):
        training.TrainConfig(**{**dict(steps=10, warmup_steps=2), **overrides})


def test_config_takes_numpy_and_torch_scalars_as_plain_numbers() -> None:
    config = training.TrainConfig(steps=np.int64(10), batch_size=torch.tensor(8), warmup_steps=np.int32(2),
                                  lr=np.float32(0.5), weight_decay=torch.tensor(0.25, dtype=torch.float64),
                                  betas=[np.float64(0.5), torch.tensor(0.75)], seed=np.uint64(2**64 - 1),
                                  dynamics_prompts=np.int16(0), keep_planes=np.array([1, 2]),
                                  model={"n_layer": np.int64(2), "resid_pdrop": np.float64(0.0)})
    assert config.to_dict() == json.loads(json.dumps(config.to_dict()))
    assert (config.steps, config.batch_size, config.lr, config.betas, config.seed) == (10, 8, 0.5, (0.5, 0.75),
                                                                                      2**64 - 1)
    assert type(config.steps) is int and type(config.lr) is float and type(config.model["n_layer"]) is int
    assert config.keep_planes == (1, 2) and training.TrainConfig.from_dict(config.to_dict()) == config


def test_every_allowed_seed_trains() -> None:
    """The largest seed still gives valid data and test-set seeds (derived seeds wrap)."""
    config = tiny_config(seed=2**64 - 1)
    tokens, answers = training.training_batch(NumberTask(), config, 5)
    assert tokens.shape[0] == answers.shape[0] == config.batch_size
    assert training.derived_seed(training.TEST_SEED_OFFSET + config.seed + 1) >= 0
    assert training.derived_seed(7 * 1_000_003 + 5) == 7 * 1_000_003 + 5  # ordinary seeds are unchanged


def test_a_second_training_into_one_folder_is_refused(tmp_path, monkeypatch, caplog) -> None:
    """Two trainings into one output_dir used to mix their checkpoints (one crashed, the other
    reported success over both)."""
    real, seen = training.checkpoint_accuracy, []

    def second_writer(*args, **kwargs):  # while the first run evaluates its first checkpoint
        if not seen:
            with pytest.raises(ValueError, match=r"is being written by another training \(pid \d+ on .*delete .*"
                                                 r"\.psheads-lock\.json"):
                training.train(NumberTask(), tiny_config(lr=3e-4), tmp_path / "run", progress=False)
            seen.append(True)
        return real(*args, **kwargs)

    monkeypatch.setattr(recording, "checkpoint_accuracy", second_writer)
    training.train(NumberTask(), tiny_config(dynamics_prompts=0), tmp_path / "run", progress=False)
    assert seen and not (tmp_path / "run" / checkpoints.LOCK).exists()  # released at the end
    monkeypatch.setattr(recording, "checkpoint_accuracy", real)
    # a lock left by a process that has died (SIGKILL) is taken over; one of a live process is not
    other = tmp_path / "other"
    other.mkdir()
    finished = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    lock = {"pid": int(finished.stdout), "host": socket.gethostname(), "since": "earlier"}
    (other / checkpoints.LOCK).write_text(json.dumps(lock))
    with caplog.at_level("WARNING", logger="psheads.models.checkpoints"):
        training.train(NumberTask(), tiny_config(dynamics_prompts=0, steps=3), other, progress=False)
    assert "no longer running" in caplog.text and not (other / checkpoints.LOCK).exists()
    with subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"]) as alive:
        try:
            (other / checkpoints.LOCK).write_text(json.dumps({**lock, "pid": alive.pid}))
            with pytest.raises(ValueError, match=f"pid {alive.pid} on"):
                training.train(NumberTask(), tiny_config(dynamics_prompts=0, steps=3), other, progress=False)
            assert (other / checkpoints.LOCK).exists()  # the holder's lock is left alone
        finally:
            alive.kill()


def test_symbolic_links_in_a_run_folder_are_replaced_never_written_through(tmp_path, reference_run) -> None:
    """A pre-placed evaluation.csv.partial -> victim was overwritten on resume, and a checkpoint
    folder that is a link ended in 'Cannot call rmtree on a symbolic link'."""
    run = _copy_run(reference_run.output_dir, tmp_path / "run")
    victim = tmp_path / "victim.txt"
    victim.write_text("precious")
    (run / "evaluation.csv.partial").symlink_to(victim)
    elsewhere = _copy_run(run / "checkpoint-000006", tmp_path / "elsewhere")
    shutil.rmtree(run / "checkpoint-000006")
    (run / "checkpoint-000006").symlink_to(elsewhere, target_is_directory=True)
    (elsewhere / "model.safetensors").write_bytes(b"damaged")  # step 6 is redone from step 3
    resumed = training.train(NumberTask(), tiny_config(dynamics_prompts=4), run, progress=False)
    assert victim.read_text() == "precious" and (elsewhere / "model.safetensors").read_bytes() == b"damaged"
    assert not (run / "checkpoint-000006").is_symlink() and not (run / "evaluation.csv.partial").exists()
    _same_weights(resumed.final_checkpoint, reference_run.final_checkpoint)
    assert (run / "evaluation.csv").read_bytes() == (reference_run.output_dir / "evaluation.csv").read_bytes()


@pytest.mark.parametrize(("call", "error", "match"), [
    (lambda: training.TrainConfig(model={"vocab_size": 5}), ValueError, r"model sets \['vocab_size'\], which the task"),
    (lambda: training.TrainConfig(model={"rotary_dim": 7}), ValueError, "rotary_dim'] must be even"),
    (lambda: training.TrainConfig(model={"rotary_dim": 256}), ValueError, r"rotary_dim'\] must be at most 128"),
    (lambda: training.TrainConfig(model={"activation_function": "evil"}), ValueError, "'evil' is not an activation"),
    (lambda: training.TrainConfig(model={"n_embd": -16}), ValueError, r"model\['n_embd'\] must be at least 1"),
    (lambda: training.TrainConfig(model={"n_embd": 100, "n_head": 3}), ValueError, "must be a multiple of"),
    (lambda: training.TrainConfig.from_dict("x"), TypeError, "TrainConfig.from_dict needs a dict"),
    (lambda: training.train(NumberTask(), tiny_config(model={"n_positions": 4}), "unused", progress=False),
     ValueError, r"n_positions'\] \(4\) is below the task's prompts of 17 tokens"),
    (lambda: training.train(3, tiny_config(), "unused", progress=False), TypeError, "task must be a psheads task"),
    (lambda: training.train(NumberTask(), tiny_config(), None, progress=False), TypeError, "output_dir must name"),
], ids=["vocab", "odd-rotary", "wide-rotary", "activation", "negative-width", "heads", "from-dict", "positions",
        "task", "output-dir"])
def test_a_bad_recipe_says_which_field_before_anything_runs(call, error, match, tmp_path, monkeypatch) -> None:
    """Each of these used to fail inside transformers (IndexError, size mismatch, KeyError, …)."""
    monkeypatch.chdir(tmp_path)
    with pytest.raises(error, match=match):
        call()
    assert list(tmp_path.iterdir()) == []  # nothing written


# --- paper B's recipe ---------------------------------------------------------------------------------
def test_paper_b_recipe_and_each_part_switches_alone() -> None:
    config = training.TrainConfig.paper_b()
    assert (config.steps, config.max_grad_norm, config.decay_norms_and_biases, config.train_set, config.keep_best,
            config.validation_prompts) == (6750, 1.0, False, 432_000, True, 2400)
    assert config.model == {"activation_function": "gelu"} and config.steps * config.batch_size == config.train_set
    assert (config.lr, config.betas, config.weight_decay, config.warmup_steps) == (1e-4, (0.95, 0.999), 1e-4, 750)
    merged = training.TrainConfig.paper_b(model={"n_layer": 2}, max_grad_norm=None)
    assert merged.model == {"activation_function": "gelu", "n_layer": 2} and merged.max_grad_norm is None
    gelu_new = training.TrainConfig.paper_b(model={"activation_function": "gelu_new"})
    assert gelu_new.model["activation_function"] == "gelu_new"
    assert training.TrainConfig.from_dict(json.loads(json.dumps(config.to_dict()))) == config
    for bad, kind in [(dict(max_grad_norm=0), ValueError), (dict(train_set=0), ValueError),
                      (dict(keep_best=1), TypeError), (dict(decay_norms_and_biases="no"), TypeError),
                      (dict(validation_prompts=0), ValueError)]:
        with pytest.raises(kind, match=next(iter(bad))):
            training.TrainConfig(**bad)


def test_no_decay_on_biases_and_layernorm_weights() -> None:
    """With decay_norms_and_biases=False a zero-gradient AdamW step leaves exactly the biases and
    LayerNorm weights in place and shrinks every other weight."""
    for decay_all in (True, False):
        config = tiny_config(decay_norms_and_biases=decay_all, weight_decay=0.5)
        model = training.build_model(NumberTask(), config)
        with torch.no_grad():
            for p in model.parameters():
                p.add_(0.25)  # biases start at 0, which decay would not move
        before = {name: p.detach().clone() for name, p in model.named_parameters()}
        optimizer = torch.optim.AdamW(training.parameter_groups(model, config), lr=0.1, weight_decay=0.5)
        for p in model.parameters():
            p.grad = torch.zeros_like(p)
        optimizer.step()
        for name, p in model.named_parameters():
            spared = name.endswith("bias") or ".ln_" in name
            moved = not torch.equal(p, before[name])
            assert moved == (decay_all or not spared), name
    names = [name for name, _ in model.named_parameters()]
    assert any(".ln_" in n and n.endswith("weight") for n in names) and any(n.endswith("bias") for n in names)


def test_gradient_clipping_bounds_the_step(tmp_path) -> None:
    """AdamW's step barely depends on the gradient's scale until it nears eps: a clip norm of 1e-12
    shrinks the gradient below eps and the first steps almost vanish."""
    initial = training.build_model(NumberTask(), tiny_config())
    moved = {}
    for clip in (None, 1e-12):
        run = training.train(NumberTask(), tiny_config(steps=3, checkpoint_every=3, dynamics_prompts=0,
                                                       max_grad_norm=clip), tmp_path / str(clip), progress=False)
        weights = safetensors.torch.load_file(run.final_checkpoint / "model.safetensors")
        moved[clip] = max(float((weights[n] - p).abs().max()) for n, p in initial.state_dict().items() if n in weights)
    assert moved[1e-12] < moved[None] / 100


def test_a_fixed_training_set_is_visited_once_per_epoch_in_a_new_order() -> None:
    config = tiny_config(train_set=20, batch_size=8)  # 3 steps an epoch, the last one of 4 prompts
    data = training.TrainingData(NumberTask(), config, progress=False)
    assert data.steps_per_epoch == 3
    tokens, answers = data.fixed_set()
    assert tokens.shape == (20, 17) and answers.shape == (20,)
    rows = {tuple(row) for row in tokens.tolist()}

    def epoch(e: int) -> list[tuple]:
        return [tuple(row) for step in range(3 * e, 3 * e + 3) for row in data.batch(step)[0].tolist()]

    first, second = epoch(0), epoch(1)
    assert sorted(first) == sorted(second) == sorted(tuple(row) for row in tokens.tolist()) and len(rows) == 20
    assert first != second
    assert [len(data.batch(s)[0]) for s in range(3)] == [8, 8, 4]
    again = training.TrainingData(NumberTask(), config, progress=False)
    assert all(torch.equal(again.batch(s)[0], data.batch(s)[0]) for s in (4, 0, 2))  # any order of access
    assert training.TrainingData(NumberTask(), tiny_config(), progress=False).steps_per_epoch is None
    big = training.TrainingData(NumberTask(), tiny_config(train_set=training.TRAIN_SET_CHUNK + 5), progress=False)
    assert len(big.fixed_set()[0]) == training.TRAIN_SET_CHUNK + 5  # a short last chunk


def test_paper_b_run_resumes_exactly_and_keeps_the_best_checkpoint(tmp_path, monkeypatch) -> None:
    config = training.TrainConfig.paper_b(steps=6, batch_size=8, warmup_steps=2, checkpoint_every=2,
                                          eval_prompts=16, dynamics_prompts=0, train_set=20, validation_prompts=16,
                                          model=TINY)
    task = LetterTask(sampling="paper-b")
    full = training.train(task, config, tmp_path / "full", progress=False)
    assert full.validation["step"].tolist() == [2, 4, 6] and (full.validation["n"] == 16).all()
    best = training.best_step(full.validation)
    assert full.best_checkpoint == tmp_path / "full" / f"checkpoint-{best:06d}"
    assert full.validation.set_index("step").loc[best, "accuracy"] == full.validation["accuracy"].max()
    original = training.TrainingData.batch
    calls = []

    def stop_after_four(self, step):
        calls.append(step)
        if step == 4:
            raise KeyboardInterrupt
        return original(self, step)

    monkeypatch.setattr(training.TrainingData, "batch", stop_after_four)
    with pytest.raises(KeyboardInterrupt):
        training.train(task, config, tmp_path / "resumed", progress=False)
    monkeypatch.setattr(training.TrainingData, "batch", original)
    resumed = training.train(task, config, tmp_path / "resumed", progress=False)
    _same_weights(resumed.final_checkpoint, full.final_checkpoint)
    pd.testing.assert_frame_equal(resumed.validation, full.validation)
    assert resumed.best_checkpoint.name == full.best_checkpoint.name


def test_best_step_prefers_the_earliest_of_equals() -> None:
    history = pd.DataFrame({"step": [500, 1000, 1500, 2000], "accuracy": [0.5, 0.9, 0.9, 0.8], "n": 10})
    assert training.best_step(history) == 1000
    assert training.best_step(history.iloc[:0]) is None


def test_a_run_recorded_before_the_recipe_options_still_resumes(tmp_path) -> None:
    """Records written before max_grad_norm, train_set, … (and LetterTask.sampling) existed lack
    those fields: they are read as their defaults, and only a real difference refuses the resume."""
    task, config = LetterTask(), tiny_config()
    old = recording._run_record(task, config)
    for name in ("max_grad_norm", "decay_norms_and_biases", "train_set", "keep_best", "validation_prompts"):
        del old["training"][name]
    del old["task_options"]["sampling"]
    checkpoints.check_same_run(tmp_path, recording._with_defaults(old, task), recording._run_record(task, config))
    with pytest.raises(ValueError, match="max_grad_norm"):
        checkpoints.check_same_run(tmp_path, recording._with_defaults(old, task),
                                   recording._run_record(task, tiny_config(max_grad_norm=1.0)))
    with pytest.raises(ValueError, match="sampling"):
        checkpoints.check_same_run(tmp_path, recording._with_defaults(old, task),
                                   recording._run_record(LetterTask(sampling="paper-b"), config))


def test_the_paper_b_script_trains_measures_and_skips_what_is_done(tmp_path, monkeypatch) -> None:
    """scripts/train_paper_b.py on tiny cells: tables per cell, both checkpoints measured, the fine grid
    inside the first fall below 90%, and a finished cell skipped."""
    import runpy

    script = runpy.run_path(str(Path(__file__).resolve().parents[2] / "scripts" / "train_paper_b.py"))
    full = script["cell_task_and_config"]

    def tiny_cell(variant, task_name, seed):
        task, config = full(variant, task_name, seed)
        model = {**TINY, **config.model}
        return task, dataclasses.replace(config, steps=4, batch_size=8, warmup_steps=1, checkpoint_every=2,
                                         eval_prompts=16, dynamics_prompts=0,
                                         train_set=None if config.train_set is None else 24,
                                         validation_prompts=16, model=model)

    globals_ = script["main"].__globals__
    monkeypatch.setitem(globals_, "cell_task_and_config", tiny_cell)
    monkeypatch.setitem(globals_, "LENGTHS", (17, 25))
    monkeypatch.setitem(globals_, "N_PROMPTS", 8)
    task, config = full("psheads-sampling", "letter", 3)
    assert task.sampling == "psheads" and config.train_set == 432_000 and config.seed == 3
    assert full("fresh-prompts", "number", 0)[1].train_set is None
    assert full("gelu-new", "letter", 0)[1].model == {"activation_function": "gelu_new"}
    assert script["main"](["--only", "paper-b:letter:0", "--runs", str(tmp_path / "runs"),
                           "--out", str(tmp_path / "out")]) == 0
    stem = tmp_path / "out" / "letter_paper-b_seed0"
    curve = pd.read_csv(f"{stem}_lengthgen.csv", dtype={"hops": str})
    assert set(curve["checkpoint"]) == {"best", "final"} and set(curve["length"]) <= {17, 25} | set(range(18, 25))
    record = json.loads(Path(f"{stem}_run.json").read_text())
    assert record["task_options"]["sampling"] == "paper-b" and record["training"]["max_grad_norm"] == 1.0
    assert pd.read_csv(f"{stem}_validation.csv")["step"].tolist() == [2, 4]
    before = Path(f"{stem}_lengthgen.csv").stat().st_mtime_ns
    assert script["main"](["--only", "paper-b:letter:0", "--runs", str(tmp_path / "runs"),
                           "--out", str(tmp_path / "out")]) == 0
    assert Path(f"{stem}_lengthgen.csv").stat().st_mtime_ns == before
    fine = script["fine_lengths"](pd.DataFrame({"hops": "all", "length": [17, 65, 145],
                                                "accuracy": [1.0, 0.95, 0.5]}))
    assert fine == [78, 92, 105, 118, 132]
    assert script["fine_lengths"](pd.DataFrame({"hops": "all", "length": [17, 65], "accuracy": [1.0, 0.95]})) == []
    with pytest.raises(SystemExit):
        script["main"](["--only", "psheads-sampling:number:0"])


def test_a_diverged_run_stops_at_the_first_non_finite_loss(tmp_path: Path) -> None:
    """lr = 1e30: the weights overflow float32 within a few steps and the loss turns NaN. The run must
    stop there, naming the step, instead of saving non-finite weights that a self-check later blames
    on the architecture; the checkpoints before it stay (huge but finite weights pass the self-check:
    the per-plane logits still rebuild them)."""
    config = training.TrainConfig(steps=40, batch_size=8, warmup_steps=0, lr=1e30, max_grad_norm=None,
                                  checkpoint_every=1, eval_prompts=8, dynamics_prompts=4, model=TINY)
    with pytest.raises(FloatingPointError,
                       match=r"Training diverged: the (loss|model's output) is not finite") as caught:
        training.train(NumberTask(), config, tmp_path / "run", progress=False)
    step = int(re.search(r"step (\d+)", str(caught.value)).group(1))
    kept = sorted(path.name for path in (tmp_path / "run").glob(f"{checkpoints.CHECKPOINT_PREFIX}*"))
    assert len(kept) == step - 1  # every checkpoint before the step, none after
