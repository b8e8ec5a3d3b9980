"""The checkpoint store on its own: sealed writes, the manifest, the trainer state, resume checks."""

from __future__ import annotations

import json

import pytest
import torch

from psheads.models import checkpoints
from psheads.models.checkpoints import CheckpointError


def _write(folder, step: int = 4) -> None:
    (folder / "weights.bin").write_bytes(b"\x00\x01" * 100)
    (folder / "sub").mkdir()
    (folder / "sub" / "note.txt").write_text("records")


def test_sealed_is_complete_or_absent(tmp_path) -> None:
    target = tmp_path / "checkpoint-000004"
    with checkpoints.sealed(target, 4) as partial:
        assert partial.name == "checkpoint-000004.partial" and partial.is_dir()
        _write(partial)
    assert not partial.exists()
    manifest = checkpoints.verify_checkpoint(target)
    assert manifest["step"] == 4 and set(manifest["files"]) == {"weights.bin", "sub/note.txt"}
    failed = tmp_path / "checkpoint-000008"
    with pytest.raises(RuntimeError, match="disk full"), checkpoints.sealed(failed, 8) as partial:
        _write(partial)
        raise RuntimeError("disk full")
    assert not failed.exists() and not partial.exists()
    assert checkpoints.latest_checkpoint(tmp_path) == target


@pytest.mark.parametrize("damage", ["missing", "extra", "changed", "manifest"])
def test_verify_names_each_damaged_file(tmp_path, damage: str) -> None:
    target = tmp_path / "checkpoint-000004"
    with checkpoints.sealed(target, 4) as partial:
        _write(partial)
    if damage == "missing":
        (target / "sub" / "note.txt").unlink()
        match = r"note\.txt is missing"
    elif damage == "extra":
        (target / "stray.txt").write_text("x")
        match = r"stray\.txt is not listed in the manifest"
    elif damage == "changed":
        (target / "weights.bin").write_bytes(b"\x00\x02" * 100)
        match = r"weights\.bin does not match its SHA-256"
    else:
        (target / checkpoints.MANIFEST).write_text("[]")
        match = "manifest.json is unreadable"
    with pytest.raises(CheckpointError, match=match):
        checkpoints.verify_checkpoint(target)
    assert checkpoints.latest_checkpoint(tmp_path) is None  # skipped, with a warning


def test_trainer_state_round_trips_without_pickles(tmp_path) -> None:
    model = torch.nn.Linear(3, 2)
    optimizer = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.95, 0.999))
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1.0)
    model(torch.ones(1, 3)).sum().backward()
    optimizer.step()
    scheduler.step()
    checkpoints.write_trainer_state(tmp_path, optimizer, scheduler, step=1)
    state = checkpoints.read_trainer_state(tmp_path)
    assert state["step"] == 1 and torch.equal(state["rng"], torch.get_rng_state())
    assert state["optimizer"]["param_groups"][0]["betas"] == (0.95, 0.999)  # tuples come back as tuples
    for index, entries in optimizer.state_dict()["state"].items():
        for name, value in entries.items():
            assert torch.equal(torch.as_tensor(state["optimizer"]["state"][index][name]), torch.as_tensor(value))
    meta = json.loads((tmp_path / checkpoints.TRAINER_JSON).read_text())
    meta["format"] = 1
    (tmp_path / checkpoints.TRAINER_JSON).write_text(json.dumps(meta))
    with pytest.raises(CheckpointError, match="inconsistent"):
        checkpoints.read_trainer_state(tmp_path)


def test_resume_checks_name_every_difference(tmp_path) -> None:
    saved = {"task": "number", "task_options": {"n_target": 8}, "training": {"lr": 1e-4, "steps": 10}}
    checkpoints.check_same_run(tmp_path, saved, dict(saved))
    now = {"task": "number", "task_options": {"n_target": 6}, "training": {"lr": 1e-3, "steps": 10}}
    with pytest.raises(ValueError, match=r"task_options\.n_target: 8 in the checkpoint, 6 now; lr: 0\.0001 in the "
                                         r"checkpoint, 0\.001 now"):
        checkpoints.check_same_run(tmp_path, saved, now)
    (tmp_path / checkpoints.TRAINING_CONFIG).write_text("[1, 2]")
    with pytest.raises(CheckpointError, match="not a JSON object"):
        checkpoints.read_training_record(tmp_path)
