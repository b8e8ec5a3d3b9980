"""Paper B's Theorem 3.1 as real models, and Theorem 3.2's bounds on their discrepancy.

Theorem 3.1: one attention layer with one head and one active RoPE plane of angle θ realises
*Index* (a positional head) and *Retrieval* (a symbolic head) exactly up to a length n0.
``construct("index", n0=...)`` and ``construct("retrieval", n0=...)`` write those heads as the
weights of a one-layer Llama model, save it as a Hugging Face directory and boot it as a
TransformerLens model, without any training.

How the weights realise the construction (vocabulary size V, residual width D = V rounded up to
even; the single head has d_head = D):

- **Embeddings** ``√D · e_i`` for token i: every residual vector has RMS 1, so with a tiny
  ``rms_norm_eps`` both RMSNorms before the head act as the identity and the final RMSNorm only
  rescales by a positive factor (the argmax is unchanged). The MLP is zero.
- **RoPE**: Llama's base is chosen so that the slowest plane (dims ``D/2 − 1`` and ``D − 1``)
  turns by θ per position (``base = θ^(−D/(D−2))``); q and k are zero on every other plane.
- **Keys and queries** are unit complex numbers on that plane, times ``κ = √(β·√D)`` each, so
  the logit from the query at t to the key at j is ``β · Re(q_t conj(k_j) e^{i(t−j)θ})``:

  - Index: every key is ``v = 1``; the query of the integer σ is ``e^{−iσθ}`` (every other token
    ``v``), so the logit is ``β cos((t − j − σ)θ)``, largest at ``j = t − σ``.
  - Retrieval: with ``ω = 2π/|ALPH|`` and φ the letter index, the key of a pair ``ab`` is
    ``e^{−iφ(a)ω}`` and the query of ``xy`` is ``e^{−iφ(y)ω}``, so the logit is
    ``β cos((φ(a) − φ(y))ω + (t − j)θ)``; other tokens get zero keys and queries.
- **Values** copy the answer's token onto the residual stream, scaled by c = 2 (Index: letters
  only; Retrieval: pairs only; every other token 0); the readout is the identity on the token
  dims. The prediction is right when the target key holds more than ``p_min`` of the attention:
  Index 1/2 (the attended letter, 2p*, must beat any other letter and the query's own integer, 1);
  Retrieval ``(1 + c)/(2c) = 3/4`` (the answer pair, c·p*, must beat the query's own pair,
  ``1 + c(1 − p*)``).

**The β rule.** Let Δ* be the smallest worst-case margin (``Construction.margin``) over the lengths
2 … n0 and ``r = p_min/(1 − p_min)``. At any valid input of length L ≤ n0 the L − 1 other keys
each trail the target by at least β·Δ*, so ``p* ≥ 1/(1 + (L − 1)e^{−βΔ*})``. With
``β = ln(2 (n0 − 1) r) / Δ*`` this is at least ``2r/(2r + 1) > p_min``: the argmax is exact.

Lengths: ``n0`` and every ``length`` here count the prompt's tokens, the query included. Theorem
3.2 is stated for the largest distance n between the query and a key; at the last position of a
prompt of L tokens that is ``n = L − 1``, and ``Construction.bound(L)`` evaluates the theorem
there. (With n = L the Retrieval upper bound fails at short prompts: at L = 3 the exact worst case
``cos θ − cos(ω − 2θ)`` exceeds ``1 − cos(ω − 3θ)``.)
"""

from __future__ import annotations

import dataclasses
import math
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

import numpy as np
import pandas as pd
import torch
import transformers
from jaxtyping import Complex, Float
from torch import Tensor

from psheads.interface import validation
from psheads.interface.config import from_known_fields
from psheads.models.checkpoints import save_model
from psheads.models.zoo import BACKENDS, boot_local
from psheads.tasks import IndexTask, RetrievalTask, word_tokenizer

VALUE_SCALE = 2.0
"""The factor c by which the value path copies the attended token (c > 1 beats the query's residual)."""


class Bound(NamedTuple):
    """Theorem 3.2's bounds on the worst-case normalised margin Δ at one length.

    Attributes:
        lower: the lower bound (None where the theorem gives none: Index).
        upper: the upper bound.
    """

    lower: float | None
    upper: float


class Recipe(Protocol):
    """How one construction of Theorem 3.1 sets its head; one instance per name in ``CONSTRUCTIONS``."""

    @property
    def name(self) -> str:
        """The construction's name (its key in ``CONSTRUCTIONS``)."""
        ...

    @property
    def task_type(self) -> type[IndexTask] | type[RetrievalTask]:
        """The task the construction answers."""
        ...

    def default_theta(self, n0: int, omega: float) -> float:
        """θ when the caller gives none."""
        ...

    def check_theta(self, theta: float, n0: int, omega: float) -> None:
        """Raise ``ValueError`` when θ does not realise the task up to n0."""
        ...

    def directions(self, task: Any, theta: float, omega: float) -> tuple[Tensor, Tensor]:
        """Unit complex query and key per token id (``[V]`` each; 0 switches a token off)."""
        ...

    def value_scales(self, task: Any) -> Float[Tensor, " vocab"]:
        """The value path's factor per token id."""
        ...

    def p_min(self) -> float:
        """Attention share of the target key above which the argmax is the answer."""
        ...

    def margin(self, config: ConstructionConfig, length: int) -> float:
        """The exact worst-case normalised margin over every valid input of ``length`` tokens."""
        ...

    def bound(self, config: ConstructionConfig, length: int) -> Bound:
        """Theorem 3.2 at ``n = length − 1``."""
        ...


@dataclass(frozen=True)
class ConstructionConfig:
    """What ``construct`` builds.

    Attributes:
        kind: a name in ``CONSTRUCTIONS`` (``"index"`` or ``"retrieval"``).
        n0: the length (tokens, query included) up to which the head answers exactly; at least 2.
        n_letters: alphabet size |ALPH| of the shared vocabulary (retrieval: at least 2).
        max_offset: largest integer in the vocabulary (default ``n0``: every offset of a prompt of
            n0 + 1 tokens, the first length Index fails at).
        theta: the plane's angle in radians per position (default: Index ``2π/n0``; Retrieval
            ``ω/(4 n0)``, the middle of Theorem 3.1's interval ``0 < θ < ω/(2 n0)``).
        beta: inverse temperature, the logit of a unit cosine (default: the β rule, see the module).
        n_ctx: the model's context (default ``max(64, 4·n0)``).
    """

    kind: str
    n0: int = 16
    n_letters: int = 8
    max_offset: int | None = None
    theta: float | None = None
    beta: float | None = None
    n_ctx: int | None = None

    def __post_init__(self) -> None:
        if self.kind not in CONSTRUCTIONS:
            raise ValueError(f"Unknown construction {self.kind!r}; choose one of {sorted(CONSTRUCTIONS)}.")
        recipe = CONSTRUCTIONS[self.kind]
        n0 = validation.integer(self.n0, "n0", minimum=2)
        object.__setattr__(self, "n0", n0)
        object.__setattr__(self, "max_offset", validation.integer(
            n0 if self.max_offset is None else self.max_offset, "max_offset", minimum=1))
        object.__setattr__(self, "n_letters", validation.integer(self.n_letters, "n_letters", minimum=1, maximum=26))
        if self.kind == "retrieval" and self.n_letters < 2:
            raise ValueError(f"n_letters must be at least 2 for retrieval, got {self.n_letters}.")
        omega = self.omega
        theta = recipe.default_theta(n0, omega) if self.theta is None else validation.number(self.theta, "theta")
        recipe.check_theta(theta, n0, omega)
        object.__setattr__(self, "theta", theta)
        if self.beta is None:
            worst = min(recipe.margin(self, length) for length in range(2, n0 + 1))
            ratio = recipe.p_min() / (1 - recipe.p_min())
            object.__setattr__(self, "beta", math.log(2 * (n0 - 1) * ratio) / worst)
        object.__setattr__(self, "beta", validation.number(self.beta, "beta", above=0))
        object.__setattr__(self, "n_ctx", validation.integer(
            max(64, 4 * n0) if self.n_ctx is None else self.n_ctx, "n_ctx", minimum=n0))

    @property
    def omega(self) -> float:
        """``2π/|ALPH|``: the angle between consecutive letters (Retrieval)."""
        return 2 * math.pi / self.n_letters

    def task(self, length: int | None = None) -> IndexTask | RetrievalTask:
        """The construction's task at ``length`` tokens (default n0), on the shared vocabulary."""
        return CONSTRUCTIONS[self.kind].task_type(length=self.n0 if length is None else length,
                                                  n_letters=self.n_letters, max_offset=self.max_offset)

    def margin(self, length: int) -> float:
        """The exact worst-case normalised margin Δ over every valid input of ``length`` tokens.

        The minimum, over the task's inputs at that length, of the target key's logit minus the
        largest other logit at the query, divided by β (so in units of a cosine). The head attends
        the answer most where it is positive; ties (Δ = 0) and worse break the construction.
        """
        return CONSTRUCTIONS[self.kind].margin(self, validation.integer(length, "length", minimum=2))

    def bound(self, length: int) -> Bound:
        """Theorem 3.2's closed form at a prompt of ``length`` tokens (``n = length − 1``).

        Index: ``Δ ≤ min{1 − cos θ, 2π²/n²}`` (no lower bound). Retrieval:
        ``cos(nθ) − cos(ω − nθ) ≤ Δ ≤ 1 − cos(ω − nθ)``, stated for n < n0; the upper bound
        assumes a distractor at distance n, so it holds from n = 2 (at ``length = 2`` the only
        other key is the query itself and ``Δ = cos θ − cos ω`` exceeds it).
        """
        return CONSTRUCTIONS[self.kind].bound(self, validation.integer(length, "length", minimum=2))

    def bounds(self, lengths: Iterable[int]) -> pd.DataFrame:
        """``length, margin, lower, upper`` per length (lower is NaN where there is none): the
        curves ``psheads.plotting.discrepancy_vs_length`` draws."""
        rows = []
        for length in validation.integers(lengths, "lengths", minimum=2, unique=True):
            bound = self.bound(length)
            rows.append({"length": length, "margin": self.margin(length),
                         "lower": math.nan if bound.lower is None else bound.lower, "upper": bound.upper})
        return pd.DataFrame(rows, columns=["length", "margin", "lower", "upper"])

    def to_dict(self) -> dict:
        """Plain-JSON form (defaults resolved)."""
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> ConstructionConfig:
        """Inverse of ``to_dict``; unknown keys are logged and ignored."""
        return from_known_fields(cls, data)


@dataclass(frozen=True)
class Construction:
    """A booted model that realises a Theorem 3.1 construction, with its task and angles.

    Attributes:
        config: what was built (defaults resolved): θ, ω, β, n0 and the exact margins and bounds.
        model: the one-layer, one-head TransformerLens model (``TransformerBridge`` or
            ``HookedTransformer``).
        task: the task it answers, at ``n0`` tokens.
        base: the RoPE base written in the model's config.
    """

    config: ConstructionConfig
    model: Any = dataclasses.field(repr=False)
    task: IndexTask | RetrievalTask
    base: float

    @property
    def kind(self) -> str:
        """``"index"`` or ``"retrieval"``."""
        return self.config.kind

    @property
    def n0(self) -> int:
        """The length up to which the construction is exact."""
        return self.config.n0

    @property
    def theta(self) -> float:
        """The active plane's angle, radians per position."""
        assert self.config.theta is not None  # resolved by ConstructionConfig.__post_init__
        return float(self.config.theta)

    @property
    def omega(self) -> float:
        """``2π/|ALPH|``, the letter angle of Retrieval (Index does not use it)."""
        return self.config.omega

    @property
    def beta(self) -> float:
        """Inverse temperature: the logit of a unit cosine, ``scale · ‖q‖ · ‖k‖``."""
        assert self.config.beta is not None  # resolved by ConstructionConfig.__post_init__
        return float(self.config.beta)

    def margin(self, length: int) -> float:
        """``ConstructionConfig.margin``: the exact worst-case normalised margin at ``length`` tokens."""
        return self.config.margin(length)

    def bound(self, length: int) -> Bound:
        """``ConstructionConfig.bound``: Theorem 3.2 at ``length`` tokens (``n = length − 1``)."""
        return self.config.bound(length)

    def bounds(self, lengths: Iterable[int]) -> pd.DataFrame:
        """``ConstructionConfig.bounds``: ``length, margin, lower, upper`` per length."""
        return self.config.bounds(lengths)


# --- the two recipes ----------------------------------------------------------------------------
def _worst_gap(target: np.ndarray, others: np.ndarray) -> float:
    """min over target slots i of ``target[i] − max_{j ≠ i} others[j]`` (same slots, 1-D)."""
    order = np.argsort(others)[::-1]
    best, second = others[order[0]], others[order[1]] if len(others) > 1 else -np.inf
    rivals = np.where(np.arange(len(others)) == order[0], second, best)
    return float(np.min(target - rivals))


class IndexRecipe:
    """Index: all keys v, the query of σ is ``ρ(θ)^(−σ) v``; values copy letters."""

    name = "index"
    task_type = IndexTask

    def default_theta(self, n0: int, omega: float) -> float:
        return 2 * math.pi / n0

    def check_theta(self, theta: float, n0: int, omega: float) -> None:
        if not 0 < theta < 2 * math.pi / max(n0 - 1, 1):
            raise ValueError(f"theta must lie in (0, 2π/(n0 − 1)) = (0, {2 * math.pi / max(n0 - 1, 1):.6g}) for Index "
                             f"to be exact up to n0={n0} (no other key at the target's angle), got {theta}.")

    def directions(self, task: Any, theta: float, omega: float) -> tuple[Tensor, Tensor]:
        size = len(task.vocabulary) + 2  # <unk> and <bos> follow the words
        query = torch.ones(size, dtype=torch.complex128)
        offsets = torch.arange(1, task.max_offset + 1)
        query[task.integer_id(offsets)] = torch.polar(torch.ones(len(offsets), dtype=torch.float64),
                                                      -offsets.double() * theta)
        return query, torch.ones(size, dtype=torch.complex128)

    def value_scales(self, task: Any) -> Float[Tensor, " vocab"]:
        scales = torch.zeros(len(task.vocabulary) + 2, dtype=torch.float64)
        scales[: task.n_letters] = VALUE_SCALE
        return scales

    def p_min(self) -> float:
        return 0.5

    def margin(self, config: ConstructionConfig, length: int) -> float:
        # logit/β = cos(mθ) with m = t − j − σ over the keys j = 0 … t; the target is m = 0
        theta, max_offset = config.theta, config.max_offset
        assert theta is not None and max_offset is not None  # resolved by ConstructionConfig.__post_init__
        worst = math.inf
        for sigma in range(1, min(max_offset, length - 1) + 1):
            m = np.arange(-sigma, length - sigma)
            worst = min(worst, 1.0 - float(np.cos(m[m != 0] * theta).max()))
        return worst

    def bound(self, config: ConstructionConfig, length: int) -> Bound:
        n = length - 1
        assert config.theta is not None  # resolved by ConstructionConfig.__post_init__
        return Bound(None, min(1 - math.cos(config.theta), 2 * math.pi**2 / n**2))


class RetrievalRecipe:
    """Retrieval: key ``ρ(ω)^(−φ(first)) v``, query ``ρ(ω)^(−φ(second)) v``; values copy pairs."""

    name = "retrieval"
    task_type = RetrievalTask

    def default_theta(self, n0: int, omega: float) -> float:
        return omega / (4 * n0)

    def check_theta(self, theta: float, n0: int, omega: float) -> None:
        if not 0 < theta < omega / (2 * n0):
            raise ValueError(f"theta must lie in Theorem 3.1's interval (0, ω/(2 n0)) = (0, {omega / (2 * n0):.6g}), "
                             f"got {theta}.")

    def directions(self, task: Any, theta: float, omega: float) -> tuple[Tensor, Tensor]:
        size = len(task.vocabulary) + 2
        letters = torch.arange(task.n_letters)
        firsts, seconds = letters.repeat_interleave(task.n_letters), letters.repeat(task.n_letters)
        ids = task.pair_id(firsts, seconds)
        unit = torch.ones(len(ids), dtype=torch.float64)
        query, key = torch.zeros(size, dtype=torch.complex128), torch.zeros(size, dtype=torch.complex128)
        query[ids] = torch.polar(unit, -seconds.double() * omega)
        key[ids] = torch.polar(unit, -firsts.double() * omega)
        return query, key

    def value_scales(self, task: Any) -> Float[Tensor, " vocab"]:
        scales = torch.zeros(len(task.vocabulary) + 2, dtype=torch.float64)
        scales[task.pair_id(0, 0): task.pair_id(0, 0) + task.n_letters**2] = VALUE_SCALE
        return scales

    def p_min(self) -> float:
        return (1 + VALUE_SCALE) / (2 * VALUE_SCALE)

    def margin(self, config: ConstructionConfig, length: int) -> float:
        # logit/β = cos(kω + dθ) at distance d = t − j; the target has k = 0 and d ≥ 1, every other
        # key (the query itself at d = 0 included, as x ≠ y) any k = 1 … |ALPH| − 1
        theta, omega = config.theta, config.omega
        assert theta is not None  # resolved by ConstructionConfig.__post_init__
        d = np.arange(length)
        k = np.arange(1, config.n_letters)
        rivals = np.cos(k[:, None] * omega + d[None, :] * theta).max(0)
        target = np.where(d >= 1, np.cos(d * theta), np.inf)  # no target at d = 0: the query is not doubled
        return _worst_gap(target, rivals)

    def bound(self, config: ConstructionConfig, length: int) -> Bound:
        n, theta, omega = length - 1, config.theta, config.omega
        assert theta is not None  # resolved by ConstructionConfig.__post_init__
        return Bound(math.cos(n * theta) - math.cos(omega - n * theta), 1 - math.cos(omega - n * theta))


CONSTRUCTIONS: dict[str, Recipe] = {recipe.name: recipe for recipe in (IndexRecipe(), RetrievalRecipe())}
"""The constructions of Theorem 3.1 by name."""


# --- building the model -------------------------------------------------------------------------
def head_weights(query: Complex[Tensor, " vocab"], key: Complex[Tensor, " vocab"], values: Float[Tensor, " vocab"],
                 width: int, kappa: float) -> dict[str, Float[Tensor, "out width"]]:
    """Embedding, q/k/v/o and readout matrices of the construction (Llama layout, ``[out, in]``).

    Token i's residual vector is ``√width · e_i``. q and k live on the slowest RoPE plane (dims
    ``width/2 − 1`` and ``width − 1`` under the halves pairing) and have norm ``κ`` for a unit
    direction; v copies token i's dim scaled by ``values[i]``; o and the readout are identities.
    """
    size = len(query)
    root = math.sqrt(width)
    eye = torch.eye(width, dtype=torch.float64)
    plane = (width // 2 - 1, width - 1)
    projections = {}
    for name, direction in (("q", query), ("k", key)):
        matrix = torch.zeros(width, width, dtype=torch.float64)
        matrix[plane[0], :size] = kappa * direction.real / root
        matrix[plane[1], :size] = kappa * direction.imag / root
        projections[name] = matrix
    v = torch.zeros(width, width, dtype=torch.float64)
    v[range(size), range(size)] = values
    return {"embed": root * eye[:size], "q": projections["q"], "k": projections["k"], "v": v, "o": eye,
            "unembed": eye[:size]}


def construct(kind: str, *, backend: str = "bridge", dtype: torch.dtype = torch.float32, device: str = "cpu",
              **options: Any) -> Construction:
    """Build and boot the Theorem 3.1 construction ``kind`` (see the module docstring).

    Args:
        kind: ``"index"`` (positional) or ``"retrieval"`` (symbolic); see ``CONSTRUCTIONS``.
        backend: ``"bridge"`` (TransformerBridge) or ``"hooked"`` (HookedTransformer, TL 3.x).
        dtype: parameter dtype.
        device: device.
        **options: ``ConstructionConfig`` fields: ``n0``, ``n_letters``, ``max_offset``,
            ``theta``, ``beta``, ``n_ctx``.

    Returns:
        The ``Construction``: model, task (at n0 tokens), θ, ω, β and the RoPE base.

    Raises:
        ValueError: an unknown kind or backend, or options that cannot realise the task.
    """
    if backend not in BACKENDS:
        raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}.")
    config = ConstructionConfig(kind=kind, **options)
    assert config.theta is not None and config.beta is not None and config.n_ctx is not None  # resolved
    recipe = CONSTRUCTIONS[config.kind]
    task = config.task()
    size = len(task.vocabulary) + 2
    width = size + size % 2
    base = config.theta ** (-width / (width - 2))  # the slowest plane turns by θ
    query, key = recipe.directions(task, config.theta, config.omega)
    weights = head_weights(query, key, recipe.value_scales(task), width, math.sqrt(config.beta * math.sqrt(width)))
    model = transformers.LlamaForCausalLM(_llama_config(size, width, config.n_ctx, base)).eval()
    with torch.no_grad():
        for parameter in model.parameters():
            parameter.zero_()
        for norm in (model.model.layers[0].input_layernorm, model.model.layers[0].post_attention_layernorm,
                     model.model.norm):
            norm.weight.fill_(1.0)
        attention = model.model.layers[0].self_attn
        model.model.embed_tokens.weight.copy_(weights["embed"])
        attention.q_proj.weight.copy_(weights["q"])
        attention.k_proj.weight.copy_(weights["k"])
        attention.v_proj.weight.copy_(weights["v"])
        attention.o_proj.weight.copy_(weights["o"])
        model.lm_head.weight.copy_(weights["unembed"])
    with tempfile.TemporaryDirectory() as directory:
        save_model(model, directory)
        word_tokenizer(task.vocabulary).save_pretrained(directory)
        booted = boot_local(directory, dtype=dtype, device=device, backend=backend)
    return Construction(config, booted, task, base)


def _llama_config(size: int, width: int, n_ctx: int, base: float) -> transformers.LlamaConfig:
    """One layer, one head over the whole residual, zero MLP, RMSNorm that acts as the identity."""
    return transformers.LlamaConfig(
        vocab_size=size, hidden_size=width, intermediate_size=2, num_hidden_layers=1, num_attention_heads=1,
        num_key_value_heads=1, max_position_embeddings=n_ctx, rms_norm_eps=1e-12, tie_word_embeddings=False,
        rope_parameters={"rope_type": "default", "rope_theta": base}, bos_token_id=size - 1, eos_token_id=size - 1,
        pad_token_id=size - 1, attention_dropout=0.0,
    )
