"""Fault injection: a training run SIGKILLed at every phase of a checkpoint resumes to the exact run.

For each phase a child process trains with one function patched to SIGKILL the process on its n-th
call: inside an optimizer step, during the evaluation, during head scoring, between two file writes
of a checkpoint, before the manifest, during the rename, and between the rename and the run-level
CSV files. The test then resumes the run in this process and checks that every file of the run
(weights, optimizer and RNG state, manifest, every row of ``evaluation.csv`` and ``dynamics.csv``)
is byte for byte that of an uninterrupted run.

To keep this fast on a small CPU, one helper process (this file run as a script) imports psheads
once and forks the children, all at once, before any tensor work (so the fork is safe); it reports
how each child ended. The uninterrupted run is computed here meanwhile.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
import safetensors.torch
import torch

from psheads.models import checkpoints, training
from psheads.tasks import NumberTask

# numerically sensitive: every test runs at 1 and 2 torch threads (see conftest.torch_threads)
pytestmark = pytest.mark.usefixtures("torch_threads")

CONFIG = dict(steps=4, batch_size=4, warmup_steps=1, checkpoint_every=2, eval_prompts=16, dynamics_prompts=4,
              model=dict(n_layer=2, n_embd=16, n_head=2, rotary_dim=8, n_positions=32))

# phase: (patched function, counted calls (those with a path argument ending so; "" counts all),
#         the counted call on which the child dies, before or after that call runs)
PHASES = {
    "optimizer step": ("torch.optim:AdamW.step", "", 3, "after"),  # step 3: weights updated, schedule not
    "evaluation": ("psheads.models.training.recording:evaluate", "", 2, "before"),  # checkpoint 4's evaluation
    "dynamics": ("psheads.measure.scoring:score_heads", "", 1, "before"),  # checkpoint 2's head scoring
    # checkpoint 4: trainer_state.safetensors written, trainer_state.json not yet
    "between files": ("safetensors.torch:save_file", "trainer_state.safetensors", 2, "after"),
    "before manifest": ("psheads.models.checkpoints:write_manifest", "", 2, "before"),  # every file but the manifest
    "rename": ("os:replace", "checkpoint-000002.partial", 1, "before"),  # complete, not yet renamed
    "run-level csv": ("os:replace", "evaluation.csv.partial", 1, "before"),  # renamed, CSVs not yet copied
}


def _config() -> training.TrainConfig:
    return training.TrainConfig(**CONFIG)


def _files(run: Path) -> dict[str, bytes]:
    return {p.relative_to(run).as_posix(): p.read_bytes() for p in sorted(run.rglob("*")) if p.is_file()}


@pytest.fixture(scope="module")
def helper(tmp_path_factory: pytest.TempPathFactory, torch_threads: int) -> tuple[subprocess.Popen, Path]:
    """Start the helper that forks one child per phase (run directories: ``<root>/<index>``)."""
    root = tmp_path_factory.mktemp("faults")
    env = {**os.environ, "HF_HUB_OFFLINE": "1"}
    process = subprocess.Popen([sys.executable, __file__, str(root), str(torch_threads)], env=env,
                               stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    yield process, root
    if process.poll() is None:
        process.kill()
        process.wait()


@pytest.fixture(scope="module")
def reference(helper) -> dict[str, bytes]:
    """Every file of the uninterrupted run (computed while the children run)."""
    run = helper[1] / "reference"
    training.train(NumberTask(), _config(), run, progress=False)
    return _files(run)


@pytest.fixture(scope="module")
def outcomes(helper, reference) -> dict[str, dict]:
    """How each child ended, from the helper's report."""
    process, _ = helper
    output = process.communicate(timeout=300)[0].decode(errors="replace")
    reports = [json.loads(line) for line in output.splitlines() if line.startswith('{"phase"')]
    assert process.returncode == 0 and len(reports) == len(PHASES), output[-5000:]
    return {report["phase"]: report for report in reports}


@pytest.mark.parametrize("phase", list(PHASES))
def test_sigkill_at_every_phase_resumes_exactly(phase, helper, reference, outcomes) -> None:
    outcome = outcomes[phase]
    run = Path(outcome["run"])
    log = Path(outcome["log"]).read_text(errors="replace")[-3000:]
    assert outcome["signal"] == signal.SIGKILL, f"the child was not killed at {phase!r} ({outcome}):\n{log}"
    _assert_killed_in_phase(phase, run)
    result = training.train(NumberTask(), _config(), run, progress=False)
    assert result.final_checkpoint == run / "checkpoint-000004"
    resumed = _files(run)
    final = "checkpoint-000004/"
    # the final weights and the optimizer and RNG state, exactly
    for name in ("model.safetensors", "trainer_state.safetensors"):
        want = safetensors.torch.load(reference[final + name])
        got = safetensors.torch.load(resumed[final + name])
        assert want.keys() == got.keys()
        for key in want:
            assert torch.equal(want[key], got[key]), f"{name}: {key}"
    assert json.loads(resumed[final + "trainer_state.json"]) == json.loads(reference[final + "trainer_state.json"])
    # every row of the records: in the run directory and in each checkpoint
    for name in ("evaluation.csv", "dynamics.csv"):
        for prefix in ("", final, "checkpoint-000002/"):
            assert resumed[prefix + name] == reference[prefix + name], prefix + name
    assert result.evaluation["step"].tolist() == [2] * 5 + [4] * 5  # hops 1-4 and all
    assert result.dynamics["step"].tolist() == [2] * 4 + [4] * 4  # 2 layers x 2 heads
    # and every other file of the run, byte for byte, with no partial directory left over
    assert sorted(resumed) == sorted(reference)
    for name in reference:
        assert resumed[name] == reference[name], name


def _assert_killed_in_phase(phase: str, run: Path) -> None:
    """The kill left the run in the state its phase implies (so each case hits what it names)."""
    complete = [p.name for p in checkpoints.list_checkpoints(run)]
    partial = sorted(p.name for p in run.glob("*.partial"))
    written = {p.name for p in (run / "checkpoint-000004.partial").glob("*")}
    if phase == "optimizer step":
        assert complete == ["checkpoint-000002"] and not partial
    elif phase == "evaluation":
        assert complete == ["checkpoint-000002"] and partial == ["checkpoint-000004.partial"]
        assert "trainer_state.json" in written and "evaluation.csv" not in written
    elif phase == "dynamics":
        assert complete == [] and partial == ["checkpoint-000002.partial"]
        started = {p.name for p in (run / "checkpoint-000002.partial").iterdir()}
        assert "evaluation.csv" in started and "dynamics.csv" not in started
    elif phase == "between files":
        assert complete == ["checkpoint-000002"] and partial == ["checkpoint-000004.partial"]
        assert "trainer_state.safetensors" in written and "trainer_state.json" not in written
    elif phase == "before manifest":
        assert complete == ["checkpoint-000002"] and partial == ["checkpoint-000004.partial"]
        assert "dynamics.csv" in written and "manifest.json" not in written
    elif phase == "rename":
        assert complete == [] and partial == ["checkpoint-000002.partial"]
        checkpoints.verify_checkpoint(run / "checkpoint-000002.partial")  # complete, only not renamed
    elif phase == "run-level csv":
        assert complete == ["checkpoint-000002"] and not (run / "evaluation.csv").exists()
    else:  # pragma: no cover
        raise AssertionError(phase)


# --- the helper and its children (this file run as a script) -----------------------------------
def _child(phase: str, run: Path) -> None:
    """Train with one function patched to SIGKILL this process on its n-th counted call."""
    import importlib

    target, suffix, kill_at, when = PHASES[phase]
    module_name, attribute = target.split(":")
    owner = importlib.import_module(module_name)
    *path, name = attribute.split(".")
    for part in path:
        owner = getattr(owner, part)
    original = getattr(owner, name)
    calls = 0

    def dying(*args, **kwargs):
        nonlocal calls
        counted = not suffix or any(isinstance(arg, (str, os.PathLike)) and os.fspath(arg).endswith(suffix)
                                    for arg in args)
        calls += counted
        if counted and calls == kill_at and when == "before":
            os.kill(os.getpid(), signal.SIGKILL)
        result = original(*args, **kwargs)
        if counted and calls == kill_at and when == "after":
            os.kill(os.getpid(), signal.SIGKILL)
        return result

    setattr(owner, name, dying)
    training.train(NumberTask(), _config(), run, progress=False)


def _helper(root: str, threads: str) -> None:
    """Fork one child per phase (after the imports, before any tensor work) and report their ends."""
    import transformers.models.gptj.modeling_gptj  # noqa: F401
    from transformer_lens.model_bridge import TransformerBridge  # noqa: F401

    import psheads.measure.scoring  # noqa: F401  (everything the children need, imported once)

    children = {}
    for index, phase in enumerate(PHASES):
        run, log = Path(root) / str(index), Path(root) / f"{index}.log"
        pid = os.fork()
        if pid == 0:  # the child: never returns
            try:
                descriptor = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
                os.dup2(descriptor, 1)
                os.dup2(descriptor, 2)
                torch.set_num_threads(int(threads))
                _child(phase, run)
                print(f"{phase}: trained to the end without being killed", flush=True)
            except BaseException:
                import traceback

                traceback.print_exc()
                sys.stderr.flush()
            finally:
                os._exit(3)
        children[pid] = (phase, run, log)
    for pid, (phase, run, log) in children.items():
        _, status = os.waitpid(pid, 0)
        print(json.dumps({"phase": phase, "run": str(run), "log": str(log),
                          "signal": os.WTERMSIG(status) if os.WIFSIGNALED(status) else None,
                          "exit": os.WEXITSTATUS(status) if os.WIFEXITED(status) else None}), flush=True)


if __name__ == "__main__":
    _helper(*sys.argv[1:])
