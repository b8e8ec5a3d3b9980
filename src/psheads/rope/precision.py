"""The precision policy: which float dtype the analysis runs in on a device.

psheads' analysis (the factored logits and the score arithmetic) runs in float64 where float64
is fast: on a CPU and on data-centre GPUs with full-rate float64 units (P100, V100, A100, H100,
H200, B200; AMD's MI200/MI300). Consumer and inference GPUs (GeForce, T4, L4, A10, RTX) run
float64 at 1/32 to 1/64 of their float32 rate, and Apple's MPS has no float64 at all: there
``"auto"`` picks float32. ``"float64"`` and ``"float32"`` force one.
"""

from __future__ import annotations

from typing import Any, Literal, get_args

import torch

Precision = Literal["auto", "float64", "float32"]
PRECISIONS: tuple[str, ...] = get_args(Precision)

#: CUDA compute capabilities whose float64 rate is at least half the float32 rate: P100 (6.0),
#: V100 (7.0), A100/A30 (8.0), H100/H200/GH200 (9.0), B200/GB200 (10.0).
FULL_RATE_CUDA = frozenset({(6, 0), (7, 0), (8, 0), (9, 0), (10, 0)})
#: AMD architectures (ROCm's ``gcnArchName``) with full-rate float64: MI200 (gfx90a), MI300 (gfx94x).
FULL_RATE_ROCM = ("gfx90a", "gfx94")


def check_precision(value: Any) -> str:
    """``value`` if it names a policy.

    Raises:
        ValueError: any other value (the message lists the policies).
    """
    if not isinstance(value, str) or value not in PRECISIONS:
        raise ValueError(f"precision must be one of {PRECISIONS}, got {value!r}: 'auto' picks float64 on a CPU and on "
                         "GPUs with full-rate float64, float32 elsewhere (consumer GPUs, T4/L4, Apple MPS).")
    return value


def supports_float64(device: torch.device) -> bool:
    """Whether torch can hold float64 tensors on ``device`` (Apple's MPS cannot)."""
    return torch.device(device).type != "mps"


def full_rate_float64(device: torch.device) -> bool:
    """Whether ``device`` runs float64 at least at half its float32 rate (CPUs and data-centre GPUs)."""
    device = torch.device(device)
    if device.type == "cpu":
        return True
    if device.type != "cuda":
        return False
    if torch.version.hip is not None:
        arch = str(getattr(torch.cuda.get_device_properties(device), "gcnArchName", ""))
        return arch.startswith(FULL_RATE_ROCM)
    return tuple(torch.cuda.get_device_capability(device)) in FULL_RATE_CUDA


def analysis_dtype(precision: str, device: torch.device) -> torch.dtype:
    """The float dtype the analysis runs in on ``device`` under ``precision``.

    Raises:
        ValueError: ``"float64"`` on a device without float64 (MPS), or an unknown policy.
    """
    precision = check_precision(precision)
    if precision == "float64" and not supports_float64(device):
        raise ValueError(f"precision='float64' is impossible on {torch.device(device)}: torch has no float64 "
                         "there. Pass precision='auto' or 'float32' (averaged scores within 1e-5 of float64's).")
    if precision == "float32" or (precision == "auto" and not (supports_float64(device) and full_rate_float64(device))):
        return torch.float32
    return torch.float64


def dtype_name(dtype: torch.dtype) -> str:
    """``"float64"`` for ``torch.float64``: how frames record the analysis dtype (``attrs["analysis_dtype"]``)."""
    return str(dtype).removeprefix("torch.")


def require_float64(device: torch.device, what: str) -> None:
    """Refuse ``what`` (a computation that needs float64) on a device without it.

    Raises:
        ValueError: ``device`` has no float64 (Apple's MPS).
    """
    if not supports_float64(device):
        raise ValueError(f"{what} computes in float64, which torch lacks on {torch.device(device)}: run the model on "
                         "the CPU for it (model.to('cpu')). score_heads and frequency_profile run there in float32 "
                         "(precision='auto').")


def exact_dtype(device: torch.device) -> torch.dtype:
    """The widest float dtype on ``device``: float64, float32 where torch has no float64 (MPS)."""
    return torch.float64 if supports_float64(device) else torch.float32
