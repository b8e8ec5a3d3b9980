"""The precision policy: which dtype the analysis runs in, and what float32 costs in accuracy.

Float32 scores must lie within ``FLOAT32_TOLERANCE`` of float64's on every family of the suite,
with the same labels except for heads that close to a threshold. A device without float64 (Apple's
MPS) is stood in for by ``no_float64``: torch there says no device has float64, and any float64
tensor the analysis makes is an error.
"""

from __future__ import annotations

import contextlib
import dis
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from types import CodeType, FrameType, SimpleNamespace
from typing import Any
from unittest import mock

import numpy as np
import pandas as pd
import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

import psheads
from psheads.measure import engine
from psheads.measure.frequency_profile import plane_usage
from psheads.measure.prompts import prepare_prompts
from psheads.rope import precision
from tests.conftest import FAMILIES, HOOKED_FAMILIES

FLOAT32_TOLERANCE = 1e-5
"""float32's bound for averaged frames (every score, spread and entropy) and for one prompt's anova
scores and entropies: measured ≤ 1e-6 on every family here (tiny random models), ≤ 3.8e-6 on the
shipped models' averaged frames and ≤ 1.2e-6 on their per-prompt anova scores (64 to 1,024 prompts)."""
FLOAT32_PER_PROMPT_SWAP_TOLERANCE = 3e-4
"""float32's bound for one prompt's swap scores (``reduce=False``) at paper B's ``tau`` = 1e-4:
measured ≤ 9.2e-5 over 256 prompts of the shipped number model and 2.0e-4 over 1,024 (the
largest grows with the number of prompts: it is the tail of a distribution), ≤ 3.4e-5 on letter.
The swap weights are a softmax at temperature ``tau`` over attention differences, so float32's
rounding of the logits (≈ 1e-7 relative) reaches a prompt's score as ≈ 1e-7 · |logit| / tau; the
mean over prompts averages it out (within ``FLOAT32_TOLERANCE``)."""
COMPARED = ("positional", "symbolic", "positional_std", "symbolic_std", "entropy")
MEANS = ("positional", "symbolic", "entropy")


class _Float64Guard(TorchDispatchMode):
    """Raises on any operation that makes a float64 tensor."""

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        out = func(*args, **(kwargs or {}))
        leaves = torch.utils._pytree.tree_leaves(out)
        if any(isinstance(each, torch.Tensor) and each.dtype == torch.float64 for each in leaves):
            raise AssertionError(f"{func} made a float64 tensor on a device without float64")
        return out


@contextlib.contextmanager
def no_float64() -> Iterator[None]:
    """Every device lacks float64 (as MPS does), and making a float64 tensor fails."""
    with mock.patch.object(precision, "supports_float64", lambda device: False), _Float64Guard():
        yield


def _tokens(model: object, n: int = 5, length: int = 40) -> torch.Tensor:
    generator = torch.Generator().manual_seed(0)
    return torch.randint(1, min(int(model.cfg.d_vocab), 64), (n, length), generator=generator)  # type: ignore[attr-defined]


def tolerance_for(frame: pd.DataFrame) -> float:
    """float32's bound for a frame: ``FLOAT32_PER_PROMPT_SWAP_TOLERANCE`` for one prompt's swap
    scores, ``FLOAT32_TOLERANCE`` for everything else."""
    per_prompt = "prompt" in frame.columns
    swap = frame.attrs["config"]["method"] == "swap"
    return FLOAT32_PER_PROMPT_SWAP_TOLERANCE if per_prompt and swap else FLOAT32_TOLERANCE


def assert_close_scores(float64: pd.DataFrame, float32: pd.DataFrame, gamma: float = 0.1,
                        compared: tuple[str, ...] = COMPARED) -> float:
    """Float32 scores within ``tolerance_for`` the frame of float64's, labels equal where no score is
    that close to a threshold; returns the largest difference."""
    tolerance = tolerance_for(float64)
    columns = [name for name in (*compared, "interaction") if name in float64.columns]
    assert len(float64) == len(float32) and (float64["head"].to_numpy() == float32["head"].to_numpy()).all()
    difference = float(np.abs(float64[columns].to_numpy() - float32[columns].to_numpy()).max())
    assert difference <= tolerance, (difference, tolerance)
    near = np.zeros(len(float64), dtype=bool)
    for name in ("positional", "symbolic"):
        for threshold in (gamma, 1 - gamma):
            near |= np.abs(float64[name].to_numpy() - threshold) <= tolerance
    assert (float64["label"] == float32["label"])[~near].all()
    return difference


# --- the policy ------------------------------------------------------------------------------
@dataclass(frozen=True)
class StandIn:
    """A device as the resolver sees it: its torch name, and what torch reports about a GPU.

    ``capability`` is what ``torch.cuda.get_device_capability`` returns (on ROCm too: HIP builds
    report the architecture's major and minor digits, so gfx900 reads as (9, 0), like a V100);
    ``hip_arch`` is ROCm's ``gcnArchName`` (None: an NVIDIA device, or not a GPU).
    """

    device: str
    capability: tuple[int, int] | None = None
    hip_arch: str | None = None

    @contextlib.contextmanager
    def active(self) -> Iterator[None]:
        """torch as it reads on this device's machine; a GPU query on another kind of device fails."""
        def capability(device: object = None) -> tuple[int, int]:
            if self.capability is None:
                raise AssertionError(f"get_device_capability asked on {self.device}")
            return self.capability

        def properties(device: object = None) -> SimpleNamespace:
            if self.hip_arch is None:
                raise AssertionError(f"get_device_properties asked on {self.device} (gcnArchName exists on ROCm only)")
            return SimpleNamespace(gcnArchName=self.hip_arch, major=self.capability[0],  # type: ignore[index]
                                   minor=self.capability[1])  # type: ignore[index]

        hip = "6.2.41133" if self.hip_arch is not None else None
        mps = torch.device(self.device).type == "mps"
        with mock.patch.object(torch.version, "hip", hip), \
                mock.patch.object(torch.cuda, "get_device_capability", capability), \
                mock.patch.object(torch.cuda, "get_device_properties", properties), \
                mock.patch.object(torch.backends.mps, "is_available", lambda: mps):
            yield


def _nvidia(capability: tuple[int, int], index: int = 0) -> StandIn:
    return StandIn(f"cuda:{index}", capability=capability)


def _rocm(arch: str) -> StandIn:
    digits = arch.split(":")[0].removeprefix("gfx")
    return StandIn("cuda:0", capability=(int(digits[:-2]), int(digits[-2], 16)), hip_arch=arch)


#: Every branch ``analysis_dtype`` can take: (device, policy, the dtype it picks or the error it raises).
POLICY_TABLE: list[tuple[str, StandIn, str, torch.dtype | str]] = [
    ("cpu", StandIn("cpu"), "auto", torch.float64),
    ("P100", _nvidia((6, 0)), "auto", torch.float64),
    ("P40 / GTX 10xx", _nvidia((6, 1)), "auto", torch.float32),
    ("V100", _nvidia((7, 0)), "auto", torch.float64),
    ("T4 / RTX 20xx", _nvidia((7, 5)), "auto", torch.float32),
    ("A100 (second GPU)", _nvidia((8, 0), index=1), "auto", torch.float64),
    ("A10 / RTX 30xx", _nvidia((8, 6)), "auto", torch.float32),
    ("L4 / RTX 40xx", _nvidia((8, 9)), "auto", torch.float32),
    ("H100 / H200", _nvidia((9, 0)), "auto", torch.float64),
    ("B200", _nvidia((10, 0)), "auto", torch.float64),
    ("RTX 50xx", _nvidia((12, 0)), "auto", torch.float32),
    ("MI250 (gfx90a)", _rocm("gfx90a:sramecc+:xnack-"), "auto", torch.float64),
    ("MI300X (gfx942)", _rocm("gfx942:sramecc+:xnack-"), "auto", torch.float64),
    ("Vega 64 (gfx900, reads as 9.0)", _rocm("gfx900:xnack-"), "auto", torch.float32),
    ("RX 6900 (gfx1030)", _rocm("gfx1030"), "auto", torch.float32),
    ("RX 7900 (gfx1100)", _rocm("gfx1100"), "auto", torch.float32),
    ("mps", StandIn("mps"), "auto", torch.float32),
    ("xpu", StandIn("xpu"), "auto", torch.float32),
    ("cpu", StandIn("cpu"), "float32", torch.float32),
    ("H100", _nvidia((9, 0)), "float32", torch.float32),
    ("mps", StandIn("mps"), "float32", torch.float32),
    ("cpu", StandIn("cpu"), "float64", torch.float64),
    ("RTX 30xx", _nvidia((8, 6)), "float64", torch.float64),
    ("RX 7900", _rocm("gfx1100"), "float64", torch.float64),
    ("mps", StandIn("mps"), "float64", r"impossible on mps.*precision='auto' or 'float32'"),
    ("cpu", StandIn("cpu"), "fp16", r"precision must be one of \('auto', 'float64', 'float32'\)"),
]
_RESOLVER = (precision.check_precision, precision.supports_float64, precision.full_rate_float64,
             precision.analysis_dtype)


def _resolve(stand_in: StandIn, policy: str) -> torch.dtype | str:
    """The dtype ``analysis_dtype`` picks on the stand-in, or the message it raises."""
    with stand_in.active():
        try:
            return precision.analysis_dtype(policy, torch.device(stand_in.device))
        except ValueError as error:
            return str(error)


@pytest.mark.parametrize(("name", "stand_in", "policy", "expected"), POLICY_TABLE,
                         ids=[f"{row[0]}-{row[2]}" for row in POLICY_TABLE])
def test_the_policy_picks_per_device(name: str, stand_in: StandIn, policy: str, expected: torch.dtype | str) -> None:
    got = _resolve(stand_in, policy)
    if isinstance(expected, str):
        assert isinstance(got, str) and re.search(expected, got), got
    else:
        assert got == expected, f"{name}: precision={policy!r} picked {got}"


def _line(code: CodeType, offset: int) -> int | None:
    """The source line of the instruction at ``offset``."""
    return max(((start, line) for start, line in dis.findlinestarts(code) if start <= offset), default=(0, None))[1]


def test_the_policy_table_runs_every_instruction_of_the_resolver() -> None:
    """A branch added to the resolver without a row here fails: every bytecode instruction of the
    resolver's functions must run under some row (which also covers each side of an ``and``/``or``)."""
    codes = {function.__code__: function.__name__ for function in _RESOLVER}
    run: dict[CodeType, set[int]] = {code: set() for code in codes}

    def trace(frame: FrameType, event: str, arg: object) -> Any:
        if frame.f_code not in run:
            return None
        frame.f_trace_opcodes, frame.f_trace_lines = True, False

        def opcodes(frame: FrameType, event: str, arg: object) -> Any:
            if event == "opcode":
                run[frame.f_code].add(frame.f_lasti)
            return opcodes
        return opcodes

    previous = sys.gettrace()
    sys.settrace(trace)
    try:
        outcomes = [_resolve(stand_in, policy) for _, stand_in, policy, _ in POLICY_TABLE]
    finally:
        sys.settrace(previous)
    missed = {name: [f"line {_line(code, each.offset)}: {each.opname} {each.argrepr}".rstrip()
                     for each in dis.get_instructions(code)
                     if each.offset not in run[code] and each.opname != "RESUME"]  # runs before the call event
              for code, name in codes.items()}
    assert not any(missed.values()), f"instructions of the resolver no row of POLICY_TABLE runs: {missed}"
    assert {torch.float32, torch.float64} <= set(outcomes) and any(isinstance(each, str) for each in outcomes)


@pytest.mark.parametrize("value", ["float16", "fp32", None, 64])
def test_an_unknown_precision_is_refused_with_the_choices(value: object) -> None:
    with pytest.raises(ValueError, match=r"precision must be one of \('auto', 'float64', 'float32'\)"):
        psheads.ScoreConfig(precision=value)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="precision must be one of"):
        psheads.ProfileConfig(precision=value)  # type: ignore[arg-type]


def test_the_policy_and_the_dtype_it_picked_are_recorded(model_factory) -> None:
    model = model_factory("llama")
    frame = psheads.score_heads(model, _tokens(model), precision="float32", progress=False)
    assert frame.attrs["config"]["precision"] == "float32" and frame.attrs["analysis_dtype"] == "float32"
    assert psheads.ScoreConfig.from_dict(frame.attrs["config"]).precision == "float32"
    default = psheads.score_heads(model, _tokens(model), progress=False)
    assert default.attrs["config"]["precision"] == "auto" and default.attrs["analysis_dtype"] == "float64"
    old = {key: value for key, value in default.attrs["config"].items() if key != "precision"}
    assert psheads.ScoreConfig.from_dict(old).precision == "auto"  # records of psheads 0.1
    profile = psheads.frequency_profile(model, _tokens(model), precision="float32", progress=False)
    assert profile.planes.attrs["analysis_dtype"] == "float32"


def test_auto_on_the_cpu_is_float64_bit_for_bit(model_factory) -> None:
    model = model_factory("gemma2")  # soft-capped
    tokens = _tokens(model)
    for method in ("swap", "anova"):
        auto = psheads.score_heads(model, tokens, method=method, progress=False)
        forced = psheads.score_heads(model, tokens, method=method, precision="float64", progress=False)
        pd.testing.assert_frame_equal(auto, forced, check_exact=True)


# --- float32's distance to float64 -------------------------------------------------------------
@pytest.mark.parametrize("family", FAMILIES)
def test_float32_scores_are_within_1e_5_of_float64_on_every_family(model_factory, family: str) -> None:
    model = model_factory(family)
    lens = psheads.RopeLens(model)
    tokens = _tokens(model)
    for method, by_frequency in [("swap", False), ("swap", True), ("anova", False), ("anova", True)]:
        for reduce in (True, False):  # averaged frames, and one row per prompt
            frames = [psheads.score_heads(lens, tokens, method=method, by_frequency=by_frequency, reduce=reduce,
                                          precision=policy, progress=False) for policy in ("float64", "float32")]
            assert frames[1].attrs["analysis_dtype"] == "float32"
            assert_close_scores(*frames)
    profiles = [psheads.frequency_profile(lens, tokens, precision=policy, progress=False).planes
                for policy in ("float64", "float32")]
    assert np.abs(profiles[0]["usage"] - profiles[1]["usage"]).max() <= FLOAT32_TOLERANCE


@pytest.mark.parametrize(("name", "n"), [("number", 64), ("number", 256), ("letter", 64), ("letter", 256),
                                         pytest.param("number", 1024, marks=pytest.mark.slow)])
def test_float32_on_the_shipped_models_per_prompt_and_averaged(name: str, n: int) -> None:
    """The task models at their own prompts, where one prompt's swap score is furthest from float64's
    (9.2e-5 at 256 prompts of number, 2.0e-4 at 1,024): averaged frames and anova within
    ``FLOAT32_TOLERANCE``, a prompt's swap scores within ``FLOAT32_PER_PROMPT_SWAP_TOLERANCE``."""
    shipped = psheads.load_pretrained(name)
    tokens = shipped.task.generate(n, seed=0).tokens
    for method in ("swap", "anova"):
        for reduce in (True, False):
            float64, float32 = (psheads.score_heads(shipped.model, tokens, method=method, reduce=reduce,
                                                    precision=policy, progress=False)
                                for policy in ("float64", "float32"))
            assert_close_scores(float64, float32)


@pytest.mark.parametrize("family", HOOKED_FAMILIES)
def test_float32_scores_are_within_1e_5_of_float64_on_hooked_transformers(model_factory, family: str) -> None:
    model = model_factory(family, "hooked")
    for method in ("swap", "anova"):
        assert_close_scores(*[psheads.score_heads(model, _tokens(model), method=method, precision=policy,
                                                  progress=False) for policy in ("float64", "float32")])


def test_long_inputs_stream_in_float32_too(model_factory, monkeypatch: pytest.MonkeyPatch) -> None:
    from psheads.rope.backends import base

    model = model_factory("llama")
    tokens = _tokens(model, n=2, length=96)
    short = psheads.score_heads(model, tokens, method="anova", precision="float32", progress=False)
    monkeypatch.setattr(base, "SCORES_BYTES", -1)  # every input is long: SDPA capture, layers streamed
    long = psheads.score_heads(model, tokens, method="anova", precision="float32", progress=False)
    assert_close_scores(short, long)


# --- a device without float64 (MPS) ----------------------------------------------------------------
@pytest.mark.parametrize("family", ["llama", "gemma2", "neox"])
def test_without_float64_auto_scores_in_float32_and_makes_no_float64_tensor(model_factory, family: str) -> None:
    model = model_factory(family)
    lens = psheads.RopeLens(model)
    tokens = _tokens(model)
    reference = {method: psheads.score_heads(lens, tokens, method=method, progress=False)
                 for method in ("swap", "anova")}
    with no_float64():
        frames = {method: psheads.score_heads(lens, tokens, method=method, progress=False) for method in reference}
        with pytest.raises(ValueError, match="impossible on cpu"):
            psheads.score_heads(lens, tokens, precision="float64", progress=False)
        with pytest.raises(ValueError, match="psheads runs in float64, which torch lacks on cpu"):
            next(engine.run(lens, prepare_prompts(lens.backend, tokens), plane_usage, layers=[0], heads=None,
                            min_keys=1, need="one key"))
    for method, frame in frames.items():
        assert frame.attrs["analysis_dtype"] == "float32"
        # here the CPU lacks float64 too, so the sums over prompts are float32 and a spread
        # sqrt(E[x²] − mean²) near 0 loses digits to cancellation (1.7e-5 on llama's swap score); on
        # MPS itself they run on the CPU in float64, as in every test above
        assert_close_scores(reference[method], frame, compared=MEANS)
        spreads = ["positional_std", "symbolic_std"]
        assert np.abs(reference[method][spreads].to_numpy() - frame[spreads].to_numpy()).max() <= 1e-3


def test_what_needs_float64_says_so_on_a_device_without_it(model_factory) -> None:
    model = model_factory("llama")
    lens = psheads.RopeLens(model)
    with mock.patch.object(precision, "supports_float64", lambda device: False):
        with pytest.raises(ValueError, match="The per-plane logits computes in float64, which torch lacks on cpu"):
            lens.frequency_logits(_tokens(model), 0)
        with pytest.raises(ValueError, match=r"plane_hooks computes in float64.*model.to\('cpu'\)"), lens.plane_hooks():
            pass
        with pytest.raises(ValueError, match="discrepancy computes in float64"):
            psheads.discrepancy(lens, "number", lengths=[17])
