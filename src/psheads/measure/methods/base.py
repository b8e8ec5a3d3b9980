"""The score-method protocol, its registry and ``ScoreConfig``, the labelling rule and the base attention.

A score method turns a layer's factored logits (``psheads.measure.engine.KeyLogits``) into per-prompt,
per-head columns, at least ``positional`` and ``symbolic`` (the labelling rule reads them), and
describes its own columns (``frame_schema`` draws the frame's schema from them). ``score_heads`` runs
whichever method ``ScoreConfig.method`` names. A method declares its own parameters as a frozen
dataclass (its ``Parameters``): ``ScoreConfig`` validates them, carries them in ``parameters`` and
records them in ``df.attrs["config"]``; ``score_heads`` takes them as options. The scoring page's
"Your own score method" is the worked example.
"""

from __future__ import annotations

import dataclasses
import logging
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import torch
from jaxtyping import Float
from torch import Tensor

from psheads.interface import validation
from psheads.interface.config import config_dict
from psheads.interface.registry import Registry, named
from psheads.measure.engine import KeyLogits
from psheads.measure.prompts import PromptConfig, PromptOptions
from psheads.results import schema
from psheads.rope.precision import check_precision

logger = logging.getLogger(__name__)

NONFINITE = ("raise", "nan")
FORMER_OPTIONS = ("tau", "block_size")
"""Options every ``ScoreConfig`` carried before methods declared their own: a record of a method
without them (an anova frame of psheads 0.1) drops them silently."""


# --- protocol and registry -------------------------------------------------------------------
@runtime_checkable
class ScoreMethod(Protocol):
    """What a score method declares and computes: a ``name``, its ``columns`` (plain class
    attributes will do), ``min_swappable`` and ``score``.

    A method with options also has ``Parameters``: a frozen dataclass whose fields (each with a
    default) are its options, validated in its ``__post_init__``. ``config.parameters`` holds the
    instance ``score`` and ``min_swappable`` read (the built-in ``swap`` has ``tau`` and
    ``block_size``). The scoring page's "Your own score method" is the worked example.
    """

    @property
    def name(self) -> str:
        """Registry name (``ScoreConfig.method``)."""

    @property
    def columns(self) -> Mapping[str, str] | Sequence[str]:
        """The columns ``score`` returns, in frame order, each with what it means (``{name: meaning}``;
        a tuple of names leaves the meanings unsaid); must include ``positional`` and ``symbolic``. Both
        get a ``_std`` column over prompts; ``entropy`` is added for every method. The frame's schema
        (``frame_schema``) and the docs take the meanings of the other columns from here."""

    def min_swappable(self, config: ScoreConfig) -> int:
        """Fewest swappable keys a prompt needs at a layer."""

    def score(self, logits: KeyLogits, config: ScoreConfig) -> dict[str, Tensor]:
        """``{column: [*lead]}`` for every leading entry of ``logits`` (fp64)."""


_METHODS: Registry[ScoreMethod] = Registry(
    "score method", "psheads.register_score_method", group="psheads.score_methods",
    add=lambda name, method: register_score_method(named(name, method, "score method")))
"""The score methods; installed packages add theirs as entry points of ``psheads.score_methods``,
``name = "module:instance"`` (the instance's ``name`` is the entry point's)."""


def parameter_type(method: ScoreMethod) -> type | None:
    """The method's ``Parameters`` dataclass, or None for a method without options."""
    return getattr(method, "Parameters", None)


def parameter_names(method: ScoreMethod) -> tuple[str, ...]:
    """The names of the method's options, in declaration order."""
    kind = parameter_type(method)
    return () if kind is None else tuple(f.name for f in dataclasses.fields(kind) if f.init)


def _method(name: Any) -> ScoreMethod:
    """The registered method ``name``, or the ValueError ``ScoreConfig`` raises for an unknown one."""
    if not isinstance(name, str) or name not in _METHODS:
        raise ValueError(f"method must be one of {score_methods()} (register others with "
                         f"psheads.register_score_method), got {name!r}.")
    return _METHODS[name]


def _shared_options() -> set[str]:
    return {f.name for f in dataclasses.fields(ScoreConfig)} | {f.name for f in dataclasses.fields(PromptOptions)}


def _unknown(options: set[str], method: ScoreMethod) -> TypeError:
    """The error for options neither ``ScoreConfig`` nor ``method`` knows, listing the valid ones."""
    names = parameter_names(method)
    valid = sorted(_shared_options() - {"parameters"} | set(names))
    return TypeError(f"Unknown ScoreConfig option(s) {sorted(options)}; valid: {valid} (method {method.name!r} takes "
                     f"{', '.join(names) or 'no options of its own'}).")


def register_score_method(method: ScoreMethod, *, replace: bool = False) -> ScoreMethod:
    """Add a score method to the registry (returns it, so it can decorate an instance).

    Raises:
        TypeError: ``method`` lacks part of the ``ScoreMethod`` protocol, or its ``Parameters`` is no
            dataclass whose fields all have defaults.
        ValueError: its columns omit ``positional``/``symbolic``, an option shares a name with a
            ``ScoreConfig`` option, or the name is taken (pass ``replace=True`` to override).
    """
    if not isinstance(method, ScoreMethod) or not isinstance(getattr(method, "name", None), str):
        raise TypeError("A score method needs a str `name`, `columns`, `min_swappable(config)` and "
                        "`score(logits, config)` (see psheads.measure.methods.ScoreMethod); pass an instance.")
    columns = method.columns
    if isinstance(columns, str) or not all(isinstance(name, str) for name in columns) or (
            isinstance(columns, Mapping) and not all(isinstance(meaning, str) for meaning in columns.values())):
        raise TypeError(f"Score method {method.name!r}: columns must map each column name to what it means "
                        "({'positional': ..., 'symbolic': ..., 'my_column': 'what it measures'}) or be a tuple of "
                        f"names, got {columns!r}.")
    if not {"positional", "symbolic"} <= set(columns):
        raise ValueError(f"Score method {method.name!r} must return 'positional' and 'symbolic' columns.")
    kind = parameter_type(method)
    if kind is not None:
        if not (isinstance(kind, type) and dataclasses.is_dataclass(kind)) or any(
                f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING
                for f in dataclasses.fields(kind) if f.init):
            raise TypeError(f"Score method {method.name!r}: Parameters must be a (frozen) dataclass whose fields all "
                            "have defaults, e.g. @dataclass(frozen=True) class Parameters: k: int = 8.")
        clash = sorted(set(parameter_names(method)) & _shared_options())
        if clash:
            raise ValueError(f"Score method {method.name!r}: options {clash} are ScoreConfig's own; rename them.")
    return _METHODS.register(method.name, method, replace=replace)


def column_meanings(method: ScoreMethod) -> dict[str, str]:
    """The method's columns in frame order, each with its meaning ("" where the method gives none)."""
    columns = method.columns
    return dict(columns) if isinstance(columns, Mapping) else dict.fromkeys(columns, "")


def frame_schema(*names: str) -> schema.FrameSchema:
    """The schema of ``score_heads`` frames of the methods ``names`` (default: every registered one):
    ``psheads.results.schema.SCORES`` with each method's own columns (those beyond ``positional`` and
    ``symbolic``) in place of ``schema.METHOD_COLUMNS``, described as the method describes them.
    """
    extra: dict[str, list[str]] = {}
    for name in names or score_methods():
        for column, meaning in column_meanings(get_score_method(name)).items():
            if column not in schema.SCORE_SPREAD:
                extra.setdefault(column, []).append(f"{meaning or 'no description'} (method {name!r})")
    return schema.score_schema([schema.Column(column, "float", "; ".join(meanings))
                                for column, meanings in extra.items()])


def get_score_method(name: str) -> ScoreMethod:
    """The registered method ``name``."""
    return _METHODS.lookup(name)


def score_methods() -> tuple[str, ...]:
    """Names of the registered score methods, sorted."""
    return _METHODS.names()


# --- the config ------------------------------------------------------------------------------
@dataclass(frozen=True, init=False)
class ScoreConfig(PromptConfig):
    """Everything ``score_heads`` computes from (recorded in ``df.attrs["config"]``).

    Attributes:
        method: a registered score method, one of ``score_methods()`` (the default, ``"swap"``, is
            paper B's swap score).
        parameters: the method's options, an instance of its ``Parameters`` (None for a method
            without options). Pass them by name (``ScoreConfig(tau=1e-3)``, ``score_heads(...,
            block_size=2)``); ``config.tau`` reads one. The swap score's: ``tau``, the temperature
            of the swap weights α (paper B's 1e-4 makes α nearly an argmax), and ``block_size``,
            positions per swapped block.
        gamma: label threshold γ.
        by_frequency: score every plane as its own single-frequency head.
        reduce: average over prompts (False: one row per prompt).
        batch_size: prompts per forward pass.
        layers: layers to score (None = all).
        heads: query heads to score (None = all).
        nonfinite: what to do when a score is not finite (the model produced inf/NaN, e.g. an
            fp16 overflow): ``"raise"`` a ValueError naming the heads, or keep them as NaN
            labelled ``"non-finite"`` with a warning (``"nan"``).
        precision: the analysis dtype policy (``psheads.rope.precision``): ``"auto"`` (float64 on a
            CPU and on GPUs with full-rate float64, float32 on consumer GPUs, T4/L4 and MPS),
            ``"float64"`` or ``"float32"`` (averaged scores within 1e-5 of float64's, one prompt's swap
            scores within 3e-4). The dtype it picked is ``df.attrs["analysis_dtype"]``.
        prompt_options: query position, swappable keys and BOS handling.
    """

    method: str = "swap"
    parameters: Any = None
    gamma: float = 0.1
    by_frequency: bool = False
    reduce: bool = True
    batch_size: int = 64
    layers: tuple[int, ...] | None = None
    heads: tuple[int, ...] | None = None
    nonfinite: str = "raise"
    precision: str = "auto"
    prompt_options: PromptOptions = field(default_factory=PromptOptions)

    def __init__(self, method: str = "swap", *, parameters: Any = None, gamma: float = 0.1, by_frequency: bool = False,
                 reduce: bool = True, batch_size: int = 64, layers: Any = None, heads: Any = None,
                 nonfinite: str = "raise", precision: str = "auto", prompt_options: PromptOptions | None = None,
                 **options: Any) -> None:
        chosen = _method(method)
        names = parameter_names(chosen)
        if set(options) - set(names):
            raise _unknown(set(options) - set(names), chosen)
        kind = parameter_type(chosen)
        if parameters is None and kind is not None:
            parameters = kind(**options)
        elif options:
            parameters = dataclasses.replace(parameters, **options)
        if (parameters is None) != (kind is None) or (kind is not None and not isinstance(parameters, kind)):
            raise TypeError(f"parameters of method {method!r} must be "
                            f"{'None' if kind is None else f'a {kind.__name__}'}, got {type(parameters).__name__}.")
        values = {
            "method": method,
            "parameters": parameters,
            "gamma": validation.number(gamma, "gamma", minimum=0, below=0.5),
            "by_frequency": validation.boolean(by_frequency, "by_frequency"),
            "reduce": validation.boolean(reduce, "reduce"),
            "batch_size": validation.integer(batch_size, "batch_size", minimum=1),
            "layers": None if layers is None else validation.integers(layers, "layers"),
            "heads": None if heads is None else validation.integers(heads, "heads", minimum=0, unique=True),
            "nonfinite": nonfinite,
            "precision": check_precision(precision),
            "prompt_options": PromptOptions() if prompt_options is None else prompt_options,
        }
        for name, value in values.items():
            object.__setattr__(self, name, value)
        if self.nonfinite not in NONFINITE:
            raise ValueError(f"nonfinite must be one of {NONFINITE}, got {self.nonfinite!r}.")
        if not isinstance(self.prompt_options, PromptOptions):
            raise TypeError(f"prompt_options must be a PromptOptions, got {type(self.prompt_options).__name__}.")

    def __getattr__(self, name: str) -> Any:
        """A method option by name (``config.tau``)."""
        parameters = self.__dict__.get("parameters")
        if not name.startswith("__") and parameters is not None and name in parameter_names(
                _METHODS[self.__dict__["method"]]):
            return getattr(parameters, name)
        raise AttributeError(f"{type(self).__name__} has no attribute or option {name!r} (method "
                             f"{self.__dict__.get('method')!r}).")

    def replace(self, **changes: Any) -> ScoreConfig:
        """A copy with ``changes``: shared options, prompt options (``query``, ``swappable``,
        ``exclude_bos``, ``prepend_bos``) and the method's options by name. Another ``method``
        starts from its own defaults.

        Raises:
            ValueError: an unknown method.
            TypeError: an unknown option (the message lists the valid ones).
        """
        method = _method(changes.get("method", self.method))
        options = {}
        if "parameters" not in changes:
            options = {name: changes.pop(name) for name in parameter_names(method) if name in changes}
            changes["parameters"] = self.parameters if method.name == self.method else None
        return ScoreConfig(**self._shared(changes), **options)

    def _shared(self, changes: dict[str, Any]) -> dict[str, Any]:
        """This config's fields with ``changes`` (prompt options folded into ``prompt_options``)."""
        prompt_fields = {f.name for f in dataclasses.fields(PromptOptions)}
        own = {f.name for f in dataclasses.fields(self)}
        unknown = set(changes) - own - prompt_fields
        if unknown:
            raise _unknown(unknown, _method(changes.get("method", self.method)))
        prompt = {k: v for k, v in changes.items() if k in prompt_fields}
        values = {name: getattr(self, name) for name in own}
        values.update({k: v for k, v in changes.items() if k not in prompt_fields})
        if prompt:
            values["prompt_options"] = dataclasses.replace(values["prompt_options"], **prompt)
        return values

    def to_dict(self) -> dict:
        """Plain-JSON form: the method's options next to ``method``, as keys of their own."""
        out: dict[str, Any] = {}
        for name, value in super().to_dict().items():
            if name == "parameters" and value is not None:
                out.update({key: list(v) if isinstance(v, tuple) else v
                            for key, v in dataclasses.asdict(value).items()})
            elif name != "parameters":
                out[name] = value
        return out

    @classmethod
    def from_dict(cls, data: Any) -> ScoreConfig:
        """Inverse of ``to_dict``; unknown keys are logged and ignored (a non-dict raises ``TypeError``)."""
        data = config_dict(cls, data)
        if isinstance(data.get("prompt_options"), dict):
            data["prompt_options"] = PromptOptions.from_dict(data["prompt_options"])
        names = set(parameter_names(_method(data.get("method", "swap"))))
        known = {f.name for f in dataclasses.fields(cls)} - {"parameters"}
        unknown = sorted(set(data) - known - names - set(FORMER_OPTIONS))
        if unknown:
            logger.warning("Ignoring unknown %s keys: %s", cls.__name__, unknown)
        return cls(**{k: v for k, v in data.items() if k in known | names})


# --- the labelling rule and the base attention ----------------------------------------------------
def label(positional: float, symbolic: float, gamma: float = 0.1) -> str:
    """The labelling rule: pure positional ⇔ s_POS ≥ 1−γ and s_SYM ≤ γ; symbolic the mirror
    image; uniform ⇔ both ≥ 1−γ; mixed otherwise; non-finite when either score is NaN or ±inf."""
    if not (math.isfinite(positional) and math.isfinite(symbolic)):
        return "non-finite"
    high_pos, high_sym = positional >= 1 - gamma, symbolic >= 1 - gamma
    if high_pos and high_sym:
        return "uniform"
    if high_pos and symbolic <= gamma:
        return "positional"
    if high_sym and positional <= gamma:
        return "symbolic"
    return "mixed"


def score_config(config: Any) -> ScoreConfig:
    """``config``, or the default ``ScoreConfig`` for None.

    Raises:
        TypeError: ``config`` is something else.
    """
    if config is None:
        return ScoreConfig()
    if not isinstance(config, ScoreConfig):
        raise TypeError(f"config must be a psheads.ScoreConfig, got {type(config).__name__}.")
    return config


def base_attention(logits: KeyLogits) -> tuple[Float[Tensor, "*lead n"], Float[Tensor, "*lead"]]:
    """Attention on S of the unswapped input, and the normalised entropy over every visible key.

    The entropy is ``−Σ D log D / log(number of visible keys)`` (0 with a single key).
    """
    log_d = logits.log_attention
    d = log_d.exp()
    n_visible = log_d.shape[-1]
    entropy = -(d * log_d).sum(-1) / math.log(n_visible) if n_visible > 1 else torch.zeros_like(d[..., 0])
    return d[..., : logits.n], entropy
