"""Data parallelism: every prompt-set front-end under ``torchrun`` on 2 and 3 CPU processes (gloo)
gives, on every rank, the frame of one process, bit for bit; a failing rank stops every rank, and so
do ranks that pass different work."""

from __future__ import annotations

import copy
import os
import pickle
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
import torch

from psheads.interface import distributed
from tests.interface import distributed_job

JOB = Path(distributed_job.__file__)
ROOT = JOB.parents[2]


def launch(out: Path, n: int, *flags: str, **environment: str) -> subprocess.CompletedProcess:
    """``torchrun --nproc-per-node n`` on the job, one thread per process."""
    env = {**os.environ, "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "HF_HUB_OFFLINE": "1",
           "PYTHONPATH": os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]), **environment}
    command = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc-per-node", str(n),
               str(JOB), str(out), *flags]
    return subprocess.run(command, env=env, cwd=ROOT, capture_output=True, text=True, timeout=600)


@pytest.fixture(scope="module")
def serial() -> dict[str, pd.DataFrame]:
    threads = torch.get_num_threads()
    torch.set_num_threads(1)  # as in the job's processes
    try:
        return distributed_job.frames()
    finally:
        torch.set_num_threads(threads)


@pytest.mark.parametrize(("n", "flags"), [(2, ()), (3, ("--init",))], ids=["torchrun-2", "own-group-3"])
def test_every_rank_gets_the_one_process_frame(serial: dict[str, pd.DataFrame], tmp_path: Path, n: int,
                                               flags: tuple[str, ...]) -> None:
    done = launch(tmp_path, n, *flags)
    assert done.returncode == 0, done.stderr[-3000:]
    for rank in range(n):
        result = pickle.loads((tmp_path / f"rank{rank}.pkl").read_bytes())
        assert result["world"] == n
        assert "train runs in one process" in result["train"]
        assert set(result["frames"]) == set(serial)
        for name, frame in result["frames"].items():
            pd.testing.assert_frame_equal(frame, serial[name], check_exact=True, obj=f"{name} on rank {rank} of {n}")
            assert frame.attrs.get("config") == serial[name].attrs.get("config")


def test_a_failing_rank_stops_every_rank(tmp_path: Path) -> None:
    done = launch(tmp_path, 2, "--fail")
    assert done.returncode != 0
    assert "item 1 is broken on purpose" in done.stderr
    assert "rank 1 failed, so every rank stops" in done.stderr  # rank 0's message names rank 1


def test_ranks_that_pass_different_work_all_stop_with_one_message(tmp_path: Path) -> None:
    done = launch(tmp_path, 2, "--disagree")
    assert done.returncode == 0, done.stderr[-3000:]
    raised = [pickle.loads((tmp_path / f"rank{rank}.pkl").read_bytes()) for rank in range(2)]
    assert raised[0] == raised[1]  # the same error on every rank, before any work: the ranks stay in step
    differences = {"prompts": "in ids.", "count": "in count (24 vs 16), shapes", "batch_size": "in batch_size (8 vs 6)",
                   "evaluate": "in count (24 vs 16), shapes", "evaluate seed": "in ids, answers."}
    for name, difference in differences.items():
        message = raised[0][name]
        assert message.startswith("ValueError: every rank must pass the same model, prompts"), message
        assert "psheads shards the prompts over the ranks itself" in message
        assert f"rank 1 differs from rank 0 {difference}" in message, message


def test_ranks_that_score_otherwise_all_stop_naming_what_differs(tmp_path: Path) -> None:
    done = launch(tmp_path, 2, "--mixed")
    assert done.returncode == 0, done.stderr[-3000:]
    raised = [pickle.loads((tmp_path / f"rank{rank}.pkl").read_bytes()) for rank in range(2)]
    assert raised[0] == raised[1]
    differences = {"model": "in model.", "tau": "in tau (0.0001 vs 0.0002).",
                   "precision": "in precision ('float64' vs 'float32'), analysis_dtype ('float64' vs 'float32').",
                   "method": "in method ('swap' vs 'anova'), tau", "reduce": "in reduce (True vs False).",
                   "profile model": "in model.", "evaluate model": "in model."}
    for name, difference in differences.items():
        message = raised[0][name]
        assert message.startswith("ValueError: every rank must pass the same model, prompts"), message
        assert f"rank 1 differs from rank 0 {difference}" in message, message


@pytest.mark.parametrize("later", [False, True], ids=["first-call", "after-a-shared-call"])
def test_a_call_on_one_rank_alone_fails_soon_saying_another_rank_did_not_join(tmp_path: Path, later: bool) -> None:
    done = launch(tmp_path, 2, "--main-only-later" if later else "--main-only", PSHEADS_DIST_JOIN_TIMEOUT_MIN="0.1")
    assert done.returncode == 0, done.stderr[-3000:]
    result = pickle.loads((tmp_path / "rank0.pkl").read_bytes())
    assert result["seconds"] < 60, result
    assert result["raised"].startswith("RuntimeError: rank 0 of 2 waited 6 s for every rank to reach this psheads "
                                       "call, and rank 1 did not join"), result["raised"]
    assert "every rank must make the same psheads calls" in result["raised"]


def test_one_process_is_alone() -> None:
    assert distributed.world() == distributed.World(0, 1)
    assert distributed.is_main()
    seen = []

    def agree() -> dict:
        raise AssertionError("one process fingerprints nothing")

    assert list(distributed.ordered_map(lambda item: seen.append(item) or item * 2, range(5), agree=agree)) \
        == [0, 2, 4, 6, 8]
    assert seen == list(range(5))


def test_a_fingerprint_sees_the_count_the_shapes_the_ids_and_the_settings() -> None:
    tokens = torch.arange(24).reshape(4, 6)
    ragged = [tokens[0], tokens[1, :5], tokens[2, :4]]
    base, uneven = distributed.fingerprint(tokens, batch_size=2), distributed.fingerprint(ragged, batch_size=2)
    assert distributed.fingerprint(tokens.clone().int(), batch_size=2) == base  # ids, whatever their dtype
    assert distributed.fingerprint([row.clone() for row in ragged], batch_size=2) == uneven
    changed = {("ids",): distributed.fingerprint(tokens.flip(0), batch_size=2),
               ("batch_size",): distributed.fingerprint(tokens, batch_size=3),
               ("count", "shapes", "ids"): distributed.fingerprint(tokens[:3], batch_size=2),
               ("shapes", "ids"): distributed.fingerprint([ragged[0], ragged[2], ragged[1]], batch_size=2)}
    for names, other in changed.items():
        reference = uneven if names == ("shapes", "ids") else base
        assert tuple(name for name in reference if reference[name] != other[name]) == names
    assert distributed.fingerprint(tokens, keys=list(range(100)))["keys"] != list(range(100))  # long: hashed


def test_a_fingerprint_sees_the_weights_their_names_shapes_and_dtype() -> None:
    model = torch.nn.Sequential(torch.nn.Linear(4, 3), torch.nn.LayerNorm(3))
    tokens = torch.arange(6).reshape(2, 3)
    base = distributed.fingerprint(tokens, model=model)
    assert distributed.fingerprint(tokens, model=copy.deepcopy(model)) == base
    edited = copy.deepcopy(model)
    with torch.no_grad():
        edited[1].weight[2] += 1e-6
    big = torch.nn.Linear(1000, 1000)
    tweaked = copy.deepcopy(big)
    with torch.no_grad():
        tweaked.weight.mul_(1 + 1e-6)  # every value: a fine-tune, another seed
    for other in (edited, copy.deepcopy(model).double(), torch.nn.Sequential(torch.nn.Linear(4, 3))):
        assert distributed.fingerprint(tokens, model=other)["model"] != base["model"]
    assert distributed.fingerprint(tokens, model=tweaked)["model"] != distributed.fingerprint(tokens, model=big)[
        "model"]


def test_alone_hides_the_job(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORLD_SIZE", "4")  # would initialise a group, were it not alone
    with distributed.alone():
        assert distributed.world().size == 1


def test_a_world_size_without_a_launcher_says_what_to_do(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("WORLD_SIZE", "2")
    for name in ("RANK", "MASTER_ADDR", "MASTER_PORT"):
        monkeypatch.delenv(name, raising=False)
    with pytest.raises(ValueError, match="launch with torchrun"):
        distributed.world()
