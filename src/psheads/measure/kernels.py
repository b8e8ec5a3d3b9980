"""Fused kernels: one tensor function, compiled by ``torch.compile`` for large work, eager otherwise.

Elementwise chains over millions of entries (the swap score's pair cosines) cost a memory pass
per operation when run eagerly; compiled, they become one loop. The function is the same in
both modes, so the results agree to rounding (a few units in the last place of fp64).

When it compiles: when a call's work (entries it will touch, summed over the call's tiles)
reaches ``MIN_COMPILED_WORK``, the eager cost then dwarfs compilation (a few seconds once per
process; Inductor caches the kernels on disk). ``PSHEADS_COMPILE=0`` never compiles, ``=1``
always does (tests). Where compilation fails (no C++ compiler on a CPU machine, an unsupported
device), a warning is logged once and the function runs eagerly from then on.
"""

from __future__ import annotations

import logging
import os
import warnings
from collections.abc import Callable

import torch
from torch import Tensor

logger = logging.getLogger(__name__)

#: Entries of work from which a call is compiled (about 3 s of eager pair cosines on one core).
MIN_COMPILED_WORK = 2**25
COMPILE_ENV = "PSHEADS_COMPILE"


class Fused:
    """``fn`` run eagerly or compiled (static shapes, the first dim of each tensor dynamic).

    Call it as ``fused(*args, work=n)``: ``n`` is the work of the whole computation the call is
    part of (so every tile of one computation runs in the same mode).
    """

    def __init__(self, fn: Callable[..., Tensor]):
        self.fn = fn
        self._compiled: Callable[..., Tensor] | None = None
        self._failed = False

    def compiles(self, work: int) -> bool:
        """Whether a computation of ``work`` entries runs compiled."""
        setting = os.environ.get(COMPILE_ENV, "")
        if setting not in ("", "0", "1"):
            raise ValueError(f"{COMPILE_ENV} must be 0 (never compile), 1 (always) or unset (large work only); "
                             f"got {setting!r}.")
        if self._failed or setting == "0":
            return False
        return setting == "1" or work >= MIN_COMPILED_WORK

    def __call__(self, *args: Tensor | int | float, work: int) -> Tensor:
        if not self.compiles(work):
            return self.fn(*args)
        if self._compiled is None:
            # no fullgraph: past Dynamo's recompile limit (many distinct shapes in one process) new
            # shapes then run eagerly instead of failing
            self._compiled = torch.compile(self.fn, dynamic=False)
        for arg in args:
            if isinstance(arg, Tensor) and arg.ndim:
                torch._dynamo.maybe_mark_dynamic(arg, 0)
        try:
            with warnings.catch_warnings():  # Inductor's own deprecation notices are not the user's concern
                warnings.filterwarnings("ignore", category=FutureWarning, module=r"torch\._inductor")
                return self._compiled(*args)
        except Exception as error:  # any failure of the compiler stack falls back to eager
            self._failed = True
            logger.warning("torch.compile could not build %s (%s: %s); running it eagerly, which is exact but "
                           "slower. Set %s=0 to skip compiling.", self.fn.__name__, type(error).__name__,
                           str(error).splitlines()[0] if str(error) else "", COMPILE_ENV)
            return self.fn(*args)
