"""Fuzz the public entry points over argument types and values (hypothesis).

The contract: every input gives either a correct result or a ``ValueError``/``TypeError`` whose
message names the offending argument. Never an exception from deep inside torch, numpy or pandas
(``IndexError``, ``RuntimeError``, ``KeyError``, ``AttributeError``, ``ZeroDivisionError``,
``OverflowError`` …), and never a silent coercion (a bool or a float taken as an int, a
non-finite setting, a repeated head, a float token id truncated).

Numbers may be Python, numpy or 0-d torch scalars, and lists of indices may be numpy integer
arrays or 1-d integer tensors: such inputs must give exactly what the plain Python values give.

Every entry point has a small oracle (what its arguments accept) and a runner that calls it and
returns a description of the broken promise, or None. The fuzz tests draw arguments mixing
Python ints/floats/bools, numpy scalars, 0-d and 1-d tensors, None, strings, lists, NaN/inf and
huge ints; ``test_listed_case`` pins the cases the contract names explicitly.

Oracle verdicts: ``accept`` (must succeed, and the result is checked), ``refuse`` (must raise
ValueError/TypeError naming the argument), ``either`` (a defensible input either way: success, or
an error naming the argument; never anything else).
"""

from __future__ import annotations

import math
import re
import traceback
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields
from typing import Any

import numpy as np
import pandas as pd
import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import psheads
from psheads.measure import methods
from psheads.results import schema
from psheads.tasks import LetterTask, NumberTask, get_task
from tests.conftest import model_state

VOCAB, N_LAYERS, N_HEADS, N_KV_HEADS, N_PLANES = 64, 2, 4, 2, 4
BOS = 0  # the tiny tokenizer's BOS id: a prompt starting with it loses position 0 from the swappable keys

FUZZ = settings(
    derandomize=True,
    deadline=None,
    max_examples=40,
    database=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow, HealthCheck.filter_too_much,
                           HealthCheck.data_too_large],
)
ACCEPT, REFUSE, EITHER = "accept", "refuse", "either"

# three prompts of 8 tokens, none starting with BOS (default query 7, swappable keys 0…6)
TOKENS = torch.tensor([[5, 9, 3, 17, 22, 8, 41, 30], [12, 7, 7, 60, 2, 33, 19, 1], [44, 3, 28, 9, 50, 11, 6, 13]])
LENGTH = TOKENS.shape[1]


@pytest.fixture(scope="module")
def lens(model_factory) -> psheads.RopeLens:
    lens = psheads.RopeLens(model_factory("llama"))
    geo = lens.layers[0]
    assert (lens.n_layers, geo.n_heads, geo.n_kv_heads, geo.n_planes, geo.window) == (
        N_LAYERS, N_HEADS, N_KV_HEADS, N_PLANES, None)
    assert lens.backend.d_vocab == VOCAB
    return lens


# --- what a value is ----------------------------------------------------------------------------
def kind(value: Any) -> tuple[str, Any]:
    """``("bool" | "int" | "float" | "other", plain value)`` of a scalar-like value."""
    if isinstance(value, (bool, np.bool_)):
        return "bool", bool(value)
    if isinstance(value, torch.Tensor):
        if value.ndim != 0 or value.is_complex():
            return "other", value
        if value.dtype == torch.bool:
            return "bool", bool(value)
        return ("float", float(value.item())) if value.is_floating_point() else ("int", int(value.item()))
    if isinstance(value, (int, np.integer)):
        return "int", int(value)
    if isinstance(value, (float, np.floating)):
        return "float", float(value)
    return "other", value


def is_plain(value: Any) -> bool:
    """Only Python ints, floats, bools, strings, None and lists/tuples/dicts of them."""
    if value is None or type(value) in (int, float, bool, str):
        return True
    if type(value) in (list, tuple):
        return all(is_plain(item) for item in value)
    if type(value) is dict:
        return all(type(key) is str and is_plain(item) for key, item in value.items())
    return False


# --- oracles: (verdict, the plain value it stands for) ---------------------------------------------
def int_arg(value: Any, low: int | None = None, high: int | None = None) -> tuple[str, Any]:
    """An int in ``[low, high]`` (Python, numpy or 0-d torch; never a bool or a float)."""
    what, plain = kind(value)
    if what != "int" or (low is not None and plain < low) or (high is not None and plain > high):
        return REFUSE, None
    return ACCEPT, plain


def real_arg(value: Any, ok: Callable[[float], bool]) -> tuple[str, Any]:
    """A finite real number for which ``ok`` holds (never a bool)."""
    what, plain = kind(value)
    if what not in ("int", "float"):
        return REFUSE, None
    try:
        plain = float(plain)
    except OverflowError:  # an int beyond every float: refusing it is right, accepting it defensible
        return EITHER, None
    if not math.isfinite(plain) or not ok(plain):
        return REFUSE, None
    return ACCEPT, plain


def bool_arg(value: Any, optional: bool = False) -> tuple[str, Any]:
    """True or False (or None when ``optional``); 0/1 and other truthy values are refused."""
    if value is None and optional:
        return ACCEPT, None
    if type(value) is bool:
        return ACCEPT, value
    if isinstance(value, np.bool_) or (isinstance(value, torch.Tensor) and value.ndim == 0
                                       and value.dtype == torch.bool):
        return EITHER, bool(value)  # a numpy or torch bool: unsure (see the report)
    return REFUSE, None


def list_items(value: Any) -> list | None:
    """The items of a list-like of indices (list, tuple, range, 1-d array or tensor), else None."""
    if isinstance(value, torch.Tensor):
        return list(value) if value.ndim == 1 else None
    if isinstance(value, np.ndarray):
        return list(value) if value.ndim == 1 else None
    if isinstance(value, (list, tuple, range)):
        return list(value)
    return None


def plain_ints(items: Any) -> list[int] | None:
    """The items as plain ints, or None when one of them is not an int (a bool, a float, a string …)."""
    plain = []
    for entry in items:
        what, v = kind(entry)
        if what != "int":
            return None
        plain.append(v)
    return plain


def index_list(value: Any, item: Callable[[int], str], norm: Callable[[int], int] = lambda v: v, *,
               none: str = ACCEPT, empty: str = REFUSE, repeated: str = REFUSE) -> tuple[str, Any]:
    """A list of int indices; ``item(v)`` judges one, ``norm`` maps it to what it denotes."""
    if value is None:
        return none, None
    items = list_items(value)
    if items is None:
        return REFUSE, None  # a bare number, a string, a 2-d array …
    plain = plain_ints(items)
    if plain is None:
        return REFUSE, None
    verdicts = [item(v) for v in plain]
    if REFUSE in verdicts:
        return REFUSE, None
    if not plain:
        return empty, ()
    verdict = EITHER if EITHER in verdicts else ACCEPT
    if len({norm(v) for v in plain}) != len(plain):
        verdict = REFUSE if repeated == REFUSE else (EITHER if repeated == EITHER else verdict)
    return verdict, tuple(plain) if verdict != REFUSE else None


def layer_item(v: int) -> str:
    return ACCEPT if -N_LAYERS <= v < N_LAYERS else REFUSE


def head_item(v: int, n: int = N_HEADS) -> str:
    if 0 <= v < n:
        return ACCEPT
    return EITHER if -n <= v < 0 else REFUSE  # negative heads: unsure (see the report)


def layers_arg(value: Any) -> tuple[str, Any]:
    """None or a non-empty list of layers (negative counts from the end; repeats: unsure)."""
    return index_list(value, layer_item, lambda v: v % N_LAYERS, repeated=EITHER)


def heads_arg(value: Any, n: int = N_HEADS) -> tuple[str, Any]:
    """None or a non-empty list of distinct heads in 0…n−1."""
    return index_list(value, lambda v: head_item(v, n), lambda v: v % n)


def planes_arg(value: Any) -> tuple[str, Any]:
    """A list of frequency IDs 0…F (repeats and an empty list: unsure)."""
    return index_list(value, lambda v: ACCEPT if 0 <= v <= N_PLANES else REFUSE, none=REFUSE, empty=EITHER,
                      repeated=EITHER)


def seed_arg(value: Any) -> tuple[str, Any]:
    """Seeds cover torch's range [0, 2**64); negatives are refused (torch reads -1 as 2**64 - 1)."""
    return int_arg(value, 0, 2**64 - 1)


def tokens_arg(value: Any, *, ragged: bool) -> tuple[str, Any]:
    """Token ids ``[batch, pos]``; returns the rows as lists of plain ints.

    A tensor must hold integer ids; a list is one sequence of ids or a list of sequences (of
    equal length unless ``ragged``); every id lies in ``[0, VOCAB)`` and is an int, never a bool
    or a float. A numpy array of ids is not documented: unsure.
    """
    if isinstance(value, Mapping):  # a tokenizer's output: the rows its mask keeps, for calls that take prompts
        if not ragged:
            return REFUSE, None
        ids, mask = (torch.as_tensor(value[key]).tolist() for key in ("input_ids", "attention_mask"))
        return ACCEPT, [[v for v, keep in zip(row, kept, strict=True) if keep]
                        for row, kept in zip(ids, mask, strict=True)]
    if isinstance(value, torch.Tensor):
        if value.dtype.is_floating_point or value.dtype.is_complex or value.dtype == torch.bool:
            return REFUSE, None
        if value.ndim not in (1, 2) or value.numel() == 0:
            return REFUSE, None
        rows = value.reshape(-1, value.shape[-1]).tolist()
    elif isinstance(value, np.ndarray):
        if value.dtype.kind not in "iu" or value.ndim not in (1, 2) or value.size == 0:
            return REFUSE, None
        rows = value.reshape(-1, value.shape[-1]).tolist()
        verdict, rows = tokens_arg(rows, ragged=ragged)
        return (EITHER if verdict == ACCEPT else verdict), rows
    elif isinstance(value, (list, tuple)) and value:
        flat = all(kind(item)[0] != "other" for item in value)
        raw_rows = [value] if flat else value
        rows = []
        for row in raw_rows:
            if isinstance(row, str) and ragged:  # a string prompt among token lists: not judged here
                rows = None
                break
            if isinstance(row, torch.Tensor):
                verdict, inner = tokens_arg(row, ragged=ragged)
                if verdict != ACCEPT or row.ndim != 1:
                    return REFUSE, None
                rows.append(inner[0])
                continue
            if not isinstance(row, (list, tuple)) or not row:
                return REFUSE, None
            plain = plain_ints(row)
            if plain is None:
                return REFUSE, None
            rows.append(plain)
        if rows is None:
            odd = any(not isinstance(r, (str, list, tuple, torch.Tensor)) for r in raw_rows)
            return (REFUSE if odd else EITHER), None
        if not ragged and len({len(row) for row in rows}) != 1:
            return REFUSE, None
        if not ragged and any(isinstance(row, torch.Tensor) for row in raw_rows):
            if all(0 <= v < VOCAB for row in rows for v in row):  # a list of 1-d tensors for the lens: unsure
                return EITHER, rows
            return REFUSE, None
        if flat and ragged:  # score_heads([1, 2, 3]): one prompt or an error, both defensible
            if all(0 <= v < VOCAB for v in rows[0]):
                return EITHER, rows
            return REFUSE, None
    else:
        return REFUSE, None
    if any(not 0 <= v < VOCAB for row in rows for v in row):
        return REFUSE, None
    return ACCEPT, rows


# --- judging one call -----------------------------------------------------------------------------
#: how a message names an argument (a word, case-insensitive)
NAMES = {
    "prompts": r"prompts?|tokens?",
    "prompt": r"prompts?|tokens?",
    "tokens": r"tokens?",
    "layers": r"layers?",
    "layer": r"layers?",
    "heads": r"heads?",
    "head": r"heads?",
    "planes": r"planes?",
    "keys-needed": r"query|block_size|swappable|prompts?",  # too few swappable keys for the blocks
    "edit": r"shape",
    "model_or_lens": r"model|lens|RopeLens",
    "constraint": r"n_target|n_pre|min_hops|max_hops|hops|extra_target|n_symbols|max_int|n_letters|n_ints",
}


@dataclass(frozen=True)
class Expect:
    verdict: str
    names: tuple[str, ...] = ()


def expect(parts: dict[str, str]) -> Expect:
    """Combine per-argument verdicts: refused if any is refused (the error must name one of the
    refused or unsure arguments), unsure if any is unsure, else accepted."""
    refused = tuple(name for name, verdict in parts.items() if verdict == REFUSE)
    unsure = tuple(name for name, verdict in parts.items() if verdict == EITHER)
    if refused:
        return Expect(REFUSE, refused + unsure)
    if unsure:
        return Expect(EITHER, unsure)
    return Expect(ACCEPT)


def names_any(message: str, names: tuple[str, ...]) -> bool:
    return any(re.search(rf"\b(?:{NAMES.get(name, re.escape(name))})\b", message, re.IGNORECASE) for name in names)


def show(value: Any) -> str:
    """A short repr that tells numpy and torch scalars from Python ones."""
    if isinstance(value, torch.Tensor):
        data = value.tolist() if value.numel() <= 12 else f"<{value.numel()} values>"
        return f"torch.tensor({data!r}, dtype={value.dtype})"
    if isinstance(value, (np.generic, np.ndarray)):
        return f"np.{type(value).__name__ if isinstance(value, np.generic) else 'array'}({value.tolist()!r}" + (
            f", dtype={value.dtype})" if isinstance(value, np.ndarray) else ")")
    if isinstance(value, dict):
        return "{" + ", ".join(f"{k}={show(v)}" for k, v in value.items()) + "}"
    if isinstance(value, (list, tuple)) and len(value) <= 12:
        inner = ", ".join(show(v) for v in value)
        return f"[{inner}]" if isinstance(value, list) else f"({inner}{',' if len(value) == 1 else ''})"
    if type(value) is int and abs(value) >= 10**20:
        return f"<{len(str(abs(value)))}-digit int>"
    text = repr(value)
    return text if len(text) <= 120 else text[:117] + "..."


def origin(err: BaseException) -> str:
    frames = traceback.extract_tb(err.__traceback__)
    if not frames:
        return ""
    frame = frames[-1]
    path = frame.filename.split("site-packages/")[-1].split("/work/main/")[-1]
    return f" [at {path}:{frame.lineno} in {frame.name}]"


def judge(call: Callable[[], Any], expected: Expect, what: str,
          check: Callable[[Any], None] | None = None) -> str | None:
    """None if ``call()`` keeps the contract, else what went wrong.

    ``check(result)`` asserts that an accepted call's result is right.
    """
    wanted = " or ".join(expected.names)
    try:
        result = call()
    except (ValueError, TypeError) as err:
        message = f"{type(err).__name__}: {err}"
        if expected.verdict == ACCEPT:
            return f"{what}: must be accepted, raised {message}{origin(err)}"
        if not names_any(str(err), expected.names):
            return f"{what}: the error must name {wanted}, got {message}{origin(err)}"
        return None
    except Exception as err:  # the point of the test
        should = "succeed" if expected.verdict == ACCEPT else f"raise ValueError/TypeError naming {wanted}"
        return f"{what}: must {should}, raised {type(err).__name__}: {err}{origin(err)}"
    if expected.verdict == REFUSE:
        return f"{what}: must raise ValueError/TypeError naming {wanted}, but returned a result (silent coercion)"
    if check is not None:
        try:
            check(result)
        except AssertionError as err:
            return f"{what}: accepted, but the result is wrong: {err}"
        except Exception as err:
            return f"{what}: accepted, but checking the result raised {type(err).__name__}: {err}{origin(err)}"
    return None


def call_text(entry: str, *args: Any, **kwargs: Any) -> str:
    parts = [show(a) for a in args] + [f"{k}={show(v)}" for k, v in kwargs.items()]
    return f"{entry}({', '.join(parts)})"


def assert_unit_interval(series: pd.Series, name: str) -> None:
    values = series.to_numpy(dtype=float)
    assert np.isfinite(values).all(), f"{name} has non-finite values {values[~np.isfinite(values)][:4]}"
    assert ((values >= -1e-9) & (values <= 1 + 1e-9)).all(), f"{name} leaves [0, 1]: {values.min()}…{values.max()}"


def assert_plain_config(attrs: dict) -> None:
    assert is_plain(attrs.get("config")), f"attrs['config'] holds non-plain values: {attrs.get('config')!r}"


def query_part(value: Any, n_prompts: int) -> tuple[str, Any]:
    """None, one int for every prompt, or one int per prompt (range checked against the prompts)."""
    if value is None:
        return ACCEPT, None
    what, plain = kind(value)
    if what == "int":
        return ACCEPT, plain
    items = list_items(value)
    if items is None or isinstance(value, range):
        return REFUSE, None
    plain = plain_ints(items)
    if plain is None:
        return REFUSE, None
    return (ACCEPT, tuple(plain)) if len(plain) == n_prompts else (REFUSE, None)


def swappable_part(value: Any, n_prompts: int) -> tuple[str, Any]:
    """None, a slice, one list of positions, or one list per prompt (checked against the prompts)."""
    if value is None:
        return ACCEPT, None
    if isinstance(value, slice):
        for bound in (value.start, value.stop, value.step):
            if bound is not None and kind(bound)[0] != "int":
                return REFUSE, None
        if value.step is not None and kind(value.step)[1] == 0:
            return REFUSE, None
        return ACCEPT, value
    items = list_items(value)
    if items is None:
        return REFUSE, None
    if items and all(list_items(item) is not None and not isinstance(item, range) for item in items):
        per_prompt = []
        for item in items:
            verdict, plain = index_list(item, lambda v: ACCEPT, empty=ACCEPT, repeated=REFUSE)
            if verdict == REFUSE:
                return REFUSE, None
            per_prompt.append(plain)
        return (ACCEPT, tuple(per_prompt)) if len(per_prompt) == n_prompts else (REFUSE, None)
    verdict, plain = index_list(value, lambda v: ACCEPT, empty=ACCEPT, repeated=REFUSE)
    return verdict, plain


def keys_part(rows: list[list[int]], query: Any, swappable: Any, exclude_bos: Any, need: int) -> tuple[str, str]:
    """(verdict on the query, verdict on having ``need`` swappable keys) for accepted options."""
    for index, row in enumerate(rows):
        length = len(row)
        q = query[index] if isinstance(query, tuple) else (length - 1 if query is None else query)
        if not -length <= q < length:
            return REFUSE, ACCEPT
        q %= length
        chosen = swappable[index] if isinstance(swappable, tuple) and swappable and isinstance(
            swappable[0], tuple) else swappable
        if chosen is None:
            bos = exclude_bos if exclude_bos is not None else row[0] == BOS
            keys = list(range(1 if bos else 0, q))
        elif isinstance(chosen, slice):
            keys = list(range(length)[chosen])
            if any(not 0 <= p < q for p in keys):
                return ACCEPT, EITHER  # a slice reaching the query or beyond: unsure (see the report)
        else:
            keys = list(chosen)
            if any(not 0 <= p < q for p in keys):
                return ACCEPT, REFUSE
        if len(keys) < need:
            return ACCEPT, REFUSE
    return ACCEPT, ACCEPT


# --- score_heads ------------------------------------------------------------------------------------
def score_options_oracle(options: dict, n_prompts: int) -> tuple[dict[str, str], dict[str, Any]]:
    parts: dict[str, str] = {}
    plain: dict[str, Any] = {}
    judges: dict[str, Callable[[Any], tuple[str, Any]]] = {
        "method": lambda v: (ACCEPT, v) if type(v) is str and v in ("swap", "anova") else (REFUSE, None),
        "tau": lambda v: real_arg(v, lambda x: x > 0),
        "block_size": lambda v: int_arg(v, 1),
        "gamma": lambda v: real_arg(v, lambda x: 0 <= x < 0.5),
        "by_frequency": bool_arg,
        "reduce": bool_arg,
        "batch_size": lambda v: int_arg(v, 1),
        "layers": layers_arg,
        "heads": heads_arg,
        "nonfinite": lambda v: (ACCEPT, v) if type(v) is str and v in ("raise", "nan") else (REFUSE, None),
        "batch_size_profile": lambda v: int_arg(v, 1),
        "query": lambda v: query_part(v, n_prompts),
        "swappable": lambda v: swappable_part(v, n_prompts),
        "exclude_bos": lambda v: bool_arg(v, optional=True),
        "prepend_bos": lambda v: bool_arg(v, optional=True),
        "progress": lambda v: bool_arg(v, optional=True),
    }
    for name, value in options.items():  # an unknown option is refused, naming it
        parts[name], plain[name] = judges.get(name, lambda v: (REFUSE, None))(value)
    return parts, plain


def needs_reference(options: dict, plain: dict, prompts: Any, rows: Any) -> bool:
    """Whether an accepted call used non-plain values whose plain equivalents are all known."""
    known = rows is not None and all(plain.get(k) is not None or v is None for k, v in options.items())
    return known and (any(not is_plain(v) and not isinstance(v, slice) for v in options.values())
                      or not is_plain(prompts))


def check_scores(frame: Any, plain: dict, n_prompts: int) -> None:
    assert isinstance(frame, pd.DataFrame), f"returned {type(frame).__name__}, not a DataFrame"
    names = methods.frame_schema().names  # the columns of every registered method
    assert set(frame.columns) <= set(names), f"unknown columns {set(frame.columns) - set(names)}"
    missing = {"layer", "head", "kv_head", "positional", "symbolic", "entropy", "label"} - set(frame.columns)
    assert not missing, f"missing columns {missing}"
    layers = sorted({v % N_LAYERS for v in plain["layers"]}) if plain.get("layers") is not None else [0, 1]
    heads = sorted({v % N_HEADS for v in plain["heads"]}) if plain.get("heads") is not None else [0, 1, 2, 3]
    assert sorted(frame["layer"].unique().tolist()) == layers, f"layers {sorted(frame['layer'].unique())} != {layers}"
    assert sorted(frame["head"].unique().tolist()) == heads, f"heads {sorted(frame['head'].unique())} != {heads}"
    if plain.get("reduce", True) and not plain.get("by_frequency", False):
        assert len(frame) == len(layers) * len(heads), f"{len(frame)} rows for {len(layers)}×{len(heads)} heads"
        assert (frame["n_prompts"] == n_prompts).all(), f"n_prompts {frame['n_prompts'].tolist()} != {n_prompts}"
    if not plain.get("reduce", True):
        assert sorted(frame["prompt"].unique().tolist()) == list(range(n_prompts)), "prompt column"
    for column in ("positional", "symbolic", "entropy"):
        assert_unit_interval(frame[column], column)
    assert set(frame["label"]) <= set(schema.LABEL_ORDER) - {"non-finite"}, f"labels {set(frame['label'])}"
    assert_plain_config(frame.attrs)


def run_score_heads(lens: Any, options: dict, prompts: Any = TOKENS, config: Any = None,
                    model_or_lens: Any = "lens") -> str | None:
    """``score_heads(lens, prompts, config, **options)`` against the oracle; same result as plain values."""
    target = lens if isinstance(model_or_lens, str) and model_or_lens == "lens" else model_or_lens
    prompt_verdict, rows = tokens_arg(prompts, ragged=True)
    n_prompts = len(rows) if rows is not None else (len(prompts) if isinstance(prompts, (list, tuple)) else 1)
    parts, plain = score_options_oracle(options, n_prompts)
    parts["prompts"] = prompt_verdict
    if target is not lens:
        parts["model_or_lens"] = REFUSE
    if config is not None and not isinstance(config, psheads.ScoreConfig):
        parts["config"] = REFUSE
    method = plain.get("method") or "swap"
    if rows is not None and all(parts.get(n, ACCEPT) == ACCEPT for n in
                                ("query", "swappable", "exclude_bos", "block_size", "method")):
        need = 2 * (plain.get("block_size") or 1) if method == "swap" else 2
        parts["query-range"], parts["keys-needed"] = keys_part(
            rows, plain.get("query"), plain.get("swappable"), plain.get("exclude_bos"), need)
        if parts["query-range"] == REFUSE:
            parts["query"] = REFUSE
        del parts["query-range"]
    expected = expect(parts)
    what = call_text("score_heads", "lens" if target is lens else model_or_lens, prompts,
                     **({"config": config} if config is not None else {}), **options)

    def check(frame: Any) -> None:
        check_scores(frame, plain, n_prompts)
        if needs_reference(options, plain, prompts, rows):
            same = {k: v for k, v in plain.items() if k in options}
            reference = psheads.score_heads(lens, [list(r) for r in rows], **same)
            pd.testing.assert_frame_equal(frame, reference, check_exact=True, obj="frame vs. plain-value frame")
            assert frame.attrs["config"] == reference.attrs["config"], "config differs from the plain-value config"

    return judge(lambda: psheads.score_heads(target, prompts, config, **options), expected, what, check)


# --- frequency_profile ------------------------------------------------------------------------------
def check_profile(profile: Any, plain: dict) -> None:
    assert isinstance(profile, psheads.FrequencyProfile), f"returned {type(profile).__name__}"
    planes, heads = profile.planes, profile.heads
    assert list(planes.columns) == schema.PROFILE_PLANES.names, f"plane columns {list(planes.columns)}"
    assert list(heads.columns) == schema.PROFILE_HEADS.names, f"head columns {list(heads.columns)}"
    layers = sorted({v % N_LAYERS for v in plain["layers"]}) if plain.get("layers") is not None else [0, 1]
    assert sorted(heads["layer"].unique().tolist()) == layers, f"layers {sorted(heads['layer'].unique())} != {layers}"
    assert len(heads) == len(layers) * N_HEADS, f"{len(heads)} head rows"
    assert_unit_interval(planes["usage"], "usage")
    sums = planes.groupby(["layer", "head"])["usage"].sum().to_numpy()
    assert np.allclose(sums, 1.0, atol=1e-9), f"usage sums {sums}"
    assert_plain_config(planes.attrs)


def run_frequency_profile(lens: Any, options: dict, prompts: Any = TOKENS) -> str | None:
    prompt_verdict, rows = tokens_arg(prompts, ragged=True)
    n_prompts = len(rows) if rows is not None else (len(prompts) if isinstance(prompts, (list, tuple)) else 1)
    renamed = {("batch_size_profile" if k == "batch_size" else k): v for k, v in options.items()}
    parts, plain = score_options_oracle(renamed, n_prompts)
    parts = {("batch_size" if k == "batch_size_profile" else k): v for k, v in parts.items()}
    plain = {("batch_size" if k == "batch_size_profile" else k): v for k, v in plain.items()}
    parts["prompts"] = prompt_verdict
    if rows is not None and all(parts.get(n, ACCEPT) == ACCEPT for n in ("query", "swappable", "exclude_bos")):
        query_verdict, parts["keys-needed"] = keys_part(rows, plain.get("query"), plain.get("swappable"),
                                                        plain.get("exclude_bos"), 1)
        if query_verdict == REFUSE:
            parts["query"] = REFUSE
    expected = expect(parts)
    what = call_text("frequency_profile", "lens", prompts, **options)

    def check(profile: Any) -> None:
        check_profile(profile, plain)
        if needs_reference(options, plain, prompts, rows):
            reference = psheads.frequency_profile(lens, [list(r) for r in rows], **plain)
            pd.testing.assert_frame_equal(profile.planes, reference.planes, check_exact=True)
            assert profile.planes.attrs["config"] == reference.planes.attrs["config"], "config differs"

    return judge(lambda: psheads.frequency_profile(lens, prompts, **options), expected, what, check)


# --- RopeLens decompositions -------------------------------------------------------------------------
def run_frequency_logits(lens: Any, tokens: Any = TOKENS, layer: Any = 0, query: Any = -1,
                         by_layer: bool = False, layers: Any = None) -> str | None:
    """``frequency_logits(tokens, layer, query)`` or ``list(frequency_logits_by_layer(tokens, layers, query))``."""
    parts: dict[str, str] = {}
    token_verdict, rows = tokens_arg(tokens, ragged=False)
    parts["tokens"] = token_verdict
    if by_layer:
        parts["layers"], plain_layers = layers_arg(layers)
    else:
        parts["layer"], plain_layer = int_arg(layer, -N_LAYERS, N_LAYERS - 1)
    query_verdict, plain_query = int_arg(query)
    if query_verdict == ACCEPT and rows is not None and not -len(rows[0]) <= plain_query < len(rows[0]):
        query_verdict = REFUSE
    elif query_verdict == ACCEPT and rows is None:
        query_verdict = EITHER
    parts["query"] = query_verdict
    expected = expect(parts)

    def check(result: Any) -> None:
        length = len(rows[0])
        t = plain_query % length
        if by_layer:
            wanted = sorted({v % N_LAYERS for v in plain_layers}) if plain_layers is not None else [0, 1]
            assert [layer for layer, _ in result] == wanted, f"layers {[layer for layer, _ in result]} != {wanted}"
            planes = [p for _, p in result]
        else:
            planes = [result]
        for p in planes:
            assert isinstance(p, torch.Tensor) and p.dtype == torch.float64, f"got {type(p)} {getattr(p, 'dtype', '')}"
            assert tuple(p.shape) == (len(rows), N_HEADS, N_PLANES + 1, t + 1), f"shape {tuple(p.shape)}"
            assert torch.isfinite(p).all(), "non-finite logits"
        if not (is_plain(tokens) and is_plain(query) and (is_plain(layer) if not by_layer else is_plain(layers))):
            ids = torch.tensor(rows)
            if by_layer:
                reference = [p for _, p in lens.frequency_logits_by_layer(ids, list(plain_layers)
                                                                           if plain_layers is not None else None,
                                                                           plain_query)]
            else:
                reference = [lens.frequency_logits(ids, plain_layer, plain_query)]
            for got, want in zip(planes, reference, strict=True):
                torch.testing.assert_close(got, want, atol=0, rtol=0)

    if by_layer:
        what = call_text("lens.frequency_logits_by_layer", tokens, layers=layers, query=query)
        return judge(lambda: list(lens.frequency_logits_by_layer(tokens, layers, query)), expected, what, check)
    what = call_text("lens.frequency_logits", tokens, layer=layer, query=query)
    return judge(lambda: lens.frequency_logits(tokens, layer, query), expected, what, check)


def run_position_token_logits(lens: Any, tokens: Any = TOKENS, layer: Any = 0, query: Any = -1,
                              by_frequency: Any = False) -> str | None:
    parts: dict[str, str] = {}
    parts["tokens"], rows = tokens_arg(tokens, ragged=False)
    parts["layer"], plain_layer = int_arg(layer, -N_LAYERS, N_LAYERS - 1)
    parts["by_frequency"], plain_by = bool_arg(by_frequency)
    parts["query"], plain_query = int_arg(query)
    if parts["query"] == ACCEPT and rows is not None and not -len(rows[0]) <= plain_query < len(rows[0]):
        parts["query"] = REFUSE
    elif parts["query"] == ACCEPT and rows is None:
        parts["query"] = EITHER
    expected = expect(parts)

    def check(result: Any) -> None:
        t = plain_query % len(rows[0])
        shape = (len(rows), N_HEADS, *((N_PLANES + 1,) if plain_by else ()), t + 1, t + 1)
        assert isinstance(result, torch.Tensor), f"a {type(result).__name__}, not a tensor"
        assert tuple(result.shape) == shape, f"shape {tuple(result.shape)} != {shape}"
        assert torch.isfinite(result).all(), "non-finite logits"

    what = call_text("lens.position_token_logits", tokens, layer=layer, query=query, by_frequency=by_frequency)
    return judge(lambda: lens.position_token_logits(tokens, layer, query, by_frequency=by_frequency), expected,
                 what, check)


# --- gating and plane hooks ---------------------------------------------------------------------------
def run_gate(lens: Any, planes: Any, layers: Any = None, heads: Any = None, keys: Any = False) -> str | None:
    """``with lens.gate(planes, layers, heads, keys): model(tokens)``: same output as plain values."""
    model = lens.model
    parts: dict[str, str] = {}
    parts["planes"], plain_planes = planes_arg(planes)
    parts["layers"], plain_layers = layers_arg(layers)
    parts["keys"], plain_keys = bool_arg(keys)
    n = N_KV_HEADS if plain_keys else N_HEADS
    parts["heads"], plain_heads = heads_arg(heads, n) if parts["keys"] != REFUSE else heads_arg(heads, N_HEADS)
    expected = expect(parts)
    before = model_state(model)

    def gated() -> Any:
        with lens.gate(planes, layers, heads, keys):
            return model(TOKENS)

    def check(out: Any) -> None:
        assert tuple(out.shape) == (*TOKENS.shape, VOCAB) and torch.isfinite(out).all(), "bad logits"
        if not (is_plain(planes) and is_plain(layers) and is_plain(heads) and is_plain(keys)):
            with lens.gate(list(plain_planes), None if plain_layers is None else list(plain_layers),
                           None if plain_heads is None else list(plain_heads), plain_keys):
                reference = model(TOKENS)
            torch.testing.assert_close(out, reference, atol=0, rtol=0)

    what = call_text("lens.gate", planes, layers=layers, heads=heads, keys=keys)
    problem = judge(gated, expected, what, check)
    if problem is None and model_state(model) != before:
        problem = f"{what}: left hooks or flags on the model"
    return problem


EDITS: dict[str, tuple[str, Callable[[torch.Tensor], Any]]] = {
    "unchanged clone": (ACCEPT, lambda p: p.clone()),
    "None (leave as is)": (ACCEPT, lambda p: None),
    "scale plane 1 by 2": (ACCEPT, lambda p: torch.cat([p[:, :, :1] * 2, p[:, :, 1:]], dim=2)),
    "float32 copy": (ACCEPT, lambda p: p.float()),
    "transpose query/key (same shape)": (ACCEPT, lambda p: p.transpose(-1, -2).contiguous()),
    "drop the last key": (REFUSE, lambda p: p[..., :-1]),
    "drop the last plane": (REFUSE, lambda p: p[:, :, :-1]),
    "first prompt only (broadcastable)": (REFUSE, lambda p: p[:1].clone()),
    "one head (broadcastable)": (REFUSE, lambda p: p[:, :1].clone()),
    "planes summed, keepdim (broadcastable)": (REFUSE, lambda p: p.sum(2, keepdim=True)),
    "planes summed (4-d)": (REFUSE, lambda p: p.sum(2)),
    "extra leading dim": (REFUSE, lambda p: p.unsqueeze(0)),
    "one more key": (REFUSE, lambda p: torch.cat([p, p[..., :1]], dim=-1)),
    "flattened": (REFUSE, lambda p: p.flatten()),
    "a Python float": (REFUSE, lambda p: 1.0),
    "a numpy array": (EITHER, lambda p: p.numpy().copy()),
    "int64 copy": (EITHER, lambda p: p.long()),
    "a list": (REFUSE, lambda p: p.tolist()),
}


def run_plane_hooks(lens: Any, layers: Any = None, edit: str = "unchanged clone", hook_layer: int = 0) -> str | None:
    """A hook on the plane hook point returning ``EDITS[edit]`` while the model runs."""
    model = lens.model
    verdict, edit_fn = EDITS[edit]
    parts: dict[str, str] = {}
    parts["layers"], plain_layers = layers_arg(layers)
    chosen = sorted({v % N_LAYERS for v in plain_layers}) if plain_layers is not None else [0, 1]
    if parts["layers"] != REFUSE:
        parts["edit"] = verdict if hook_layer in chosen else ACCEPT
    expected = expect(parts)
    before = model_state(model)
    base = model(TOKENS)

    def hook(planes: torch.Tensor, hook: Any) -> Any:
        return edit_fn(planes)

    def run() -> Any:
        with lens.plane_hooks(layers) as names:
            if hook_layer not in names:
                return model(TOKENS)
            return model.run_with_hooks(TOKENS, fwd_hooks=[(names[hook_layer], hook)])

    def check(out: Any) -> None:
        assert isinstance(out, torch.Tensor) and tuple(out.shape) == (*TOKENS.shape, VOCAB), "bad logits"
        assert torch.isfinite(out).all(), "non-finite logits"
        if edit in ("unchanged clone", "None (leave as is)", "float32 copy") or hook_layer not in chosen:
            torch.testing.assert_close(out, base, atol=1e-5, rtol=0)

    what = call_text("lens.plane_hooks", layers) + f" with a hook on layer {hook_layer} returning {edit}"
    problem = judge(run, expected, what, check)
    if problem is None and model_state(model) != before:
        problem = f"{what}: left hooks or flags on the model"
    if problem is None and any("plane_logits" in name for name in model.hook_dict):
        problem = f"{what}: left a plane hook point on the model"
    return problem


# --- swap_attention ---------------------------------------------------------------------------------
def run_swap_attention(lens: Any, prompt: Any = TOKENS[0], layer: Any = 0, head: Any = 0,
                       options: dict | None = None) -> str | None:
    """``swap_attention(lens, prompt, layer, head, **options)``; agrees with ``score_heads``."""
    options = options or {}
    parts: dict[str, str] = {}
    rows = None
    several = (isinstance(prompt, torch.Tensor) and prompt.ndim == 2 and prompt.shape[0] > 1) or (
        isinstance(prompt, (list, tuple)) and len(prompt) > 1
        and all(isinstance(r, (list, tuple, torch.Tensor)) for r in prompt))
    if isinstance(prompt, str):
        parts["prompt"] = EITHER
    elif several:
        parts["prompt"] = REFUSE  # "swap_attention takes one prompt"
    else:
        parts["prompt"], rows = tokens_arg(prompt, ragged=False)
        batch_of_one = isinstance(prompt, np.ndarray) or (isinstance(prompt, torch.Tensor) and prompt.ndim == 2) or (
            isinstance(prompt, (list, tuple)) and all(isinstance(r, (list, tuple, torch.Tensor)) for r in prompt))
        if parts["prompt"] == ACCEPT and batch_of_one:
            parts["prompt"] = EITHER  # a [1, pos] batch for one prompt: unsure
    parts["layer"], plain_layer = int_arg(layer, -N_LAYERS, N_LAYERS - 1)
    parts["head"], plain_head = int_arg(head)
    if parts["head"] == ACCEPT:
        parts["head"] = head_item(plain_head)
    option_parts, plain = score_options_oracle(options, 1)
    parts.update(option_parts)
    if rows is not None and all(parts.get(n, ACCEPT) == ACCEPT for n in ("prompt", "query", "block_size")):
        query_verdict, parts["keys-needed"] = keys_part(rows, plain.get("query"), None, None,
                                                        2 * (plain.get("block_size") or 1))
        if query_verdict == REFUSE:
            parts["query"] = REFUSE
    expected = expect(parts)

    def check(frame: Any) -> None:
        assert isinstance(frame, pd.DataFrame) and list(frame.columns) == schema.SWAPS.names, "columns"
        if rows is not None:
            block = plain.get("block_size") or 1
            length = len(rows[0])
            q = (plain.get("query") if plain.get("query") is not None else -1) % length
            n_blocks = (q - (1 if rows[0][0] == BOS else 0)) // block
            assert len(frame) == n_blocks * (n_blocks - 1) // 2, f"{len(frame)} swaps for {n_blocks} blocks"
        for column in ("d_i", "d_j", "d_i_swapped", "d_j_swapped", "weight", "cos_positional", "cos_symbolic"):
            assert_unit_interval(frame[column], column)
        assert abs(frame["weight"].sum() - 1) < 1e-9, f"weights sum to {frame['weight'].sum()}"
        attrs = frame.attrs
        assert type(attrs["head"]) is int and attrs["head"] == plain_head % N_HEADS, f"attrs head {attrs['head']!r}"
        assert type(attrs["layer"]) is int and attrs["layer"] == plain_layer % N_LAYERS, \
            f"attrs layer {attrs['layer']!r}"
        for name in ("positional", "symbolic"):
            assert math.isfinite(attrs[name]) and -1e-9 <= attrs[name] <= 1 + 1e-9, f"{name} = {attrs[name]}"
        assert_plain_config(attrs)
        if rows is None:
            return
        same = {k: v for k, v in plain.items() if k in ("tau", "block_size", "query")}
        scores = psheads.score_heads(lens, [rows[0]], layers=[plain_layer], heads=[plain_head % N_HEADS], **same)
        for name in ("positional", "symbolic"):
            assert abs(scores[name].iloc[0] - attrs[name]) < 1e-9, \
                f"{name} {attrs[name]} disagrees with score_heads ({scores[name].iloc[0]})"

    what = call_text("swap_attention", "lens", prompt, layer, head, **options)
    return judge(lambda: psheads.swap_attention(lens, prompt, layer, head, **options), expected, what, check)


# --- tasks and the lens constructor -----------------------------------------------------------------
def run_generate(task_name: str, n: Any, seed: Any = 0) -> str | None:
    task = get_task(task_name)
    parts: dict[str, str] = {}
    parts["n"], plain_n = int_arg(n, 1)
    parts["seed"], plain_seed = seed_arg(seed)
    expected = expect(parts)

    def check(batch: Any) -> None:
        length = task.extra_target + task.n_target + task.n_pre + 1
        assert tuple(batch.tokens.shape) == (plain_n, length), f"tokens shape {tuple(batch.tokens.shape)}"
        assert batch.tokens.dtype == torch.long and int(batch.tokens.min()) >= 0
        assert int(batch.tokens.max()) < len(task.vocabulary), "token id outside the vocabulary"
        assert torch.equal(batch.answers, batch.tokens[torch.arange(plain_n), batch.answer_positions]), "answers"
        assert ((batch.hops >= task.min_hops) & (batch.hops <= task.max_hops)).all(), "hops"
        assert len(batch.text) == len(batch.answer_text) == plain_n
        reference = task.generate(plain_n, seed=plain_seed)
        assert torch.equal(batch.tokens, reference.tokens), "differs from generate with the plain n and seed"

    what = call_text(f"get_task({task_name!r}).generate", n, seed=seed)
    return judge(lambda: task.generate(n, seed=seed), expected, what, check)


TASK_FIELDS = {
    "number": (NumberTask, ("n_target", "n_pre", "min_hops", "max_hops", "extra_target", "n_symbols", "max_int")),
    "letter": (LetterTask, ("n_target", "n_pre", "min_hops", "max_hops", "extra_target", "n_letters", "n_ints")),
}


def task_valid(name: str, values: dict[str, int]) -> bool:
    """The documented constraints of the multi-hop tasks."""
    v = values
    ok = v["n_target"] >= 1 and v["n_pre"] >= 0 and v["extra_target"] >= 0 and 1 <= v["min_hops"] <= v["max_hops"] \
        and v["max_hops"] - 1 <= v["n_pre"]
    if name == "number":
        return ok and v["max_int"] >= v["n_target"] + v["n_pre"] and 1 <= v["n_symbols"] <= 702
    return ok and v["max_hops"] < v["n_letters"] <= 26 and v["n_ints"] >= 1


def run_task_fields(task_name: str, options: dict) -> str | None:
    cls, names = TASK_FIELDS[task_name]
    defaults = {f.name: f.default for f in fields(cls) if f.name in names}
    parts: dict[str, str] = {}
    plain = dict(defaults)
    for name, value in options.items():
        parts[name], plain[name] = int_arg(value)
    usable = {name: (plain[name] if parts.get(name, ACCEPT) == ACCEPT else defaults[name]) for name in defaults}
    if not task_valid(task_name, usable):  # the given ints break a documented constraint
        parts["constraint"] = REFUSE if all(v == ACCEPT for v in parts.values()) else EITHER
    expected = expect(parts)

    def make_and_generate() -> Any:
        task = cls(**options)
        return task, task.generate(3, seed=1)

    def check(result: Any) -> None:
        task, batch = result
        for name in names:
            assert type(getattr(task, name)) is int, f"{name} kept as {type(getattr(task, name)).__name__}"
        reference = cls(**{k: plain[k] for k in options}).generate(3, seed=1)
        assert torch.equal(batch.tokens, reference.tokens), "differs from the task built from plain ints"

    what = call_text(f"{cls.__name__}", **options) + ".generate(3, seed=1)"
    return judge(make_and_generate, expected, what, check)


def run_rope_lens(model: Any, options: dict) -> str | None:
    parts: dict[str, str] = {}
    plain: dict[str, Any] = {}
    judges = {"self_check": bool_arg, "probe_length": lambda v: int_arg(v, 2), "seed": seed_arg}
    for name, value in options.items():
        parts[name], plain[name] = judges[name](value)
    expected = expect(parts)

    def check(new: Any) -> None:
        assert isinstance(new, psheads.RopeLens) and new.n_layers == N_LAYERS
        assert new.frequency_logits(TOKENS, 1).shape == (3, N_HEADS, N_PLANES + 1, LENGTH)

    what = call_text("RopeLens", "model", **options)
    return judge(lambda: psheads.RopeLens(model, **options), expected, what, check)


# --- strategies --------------------------------------------------------------------------------------
SPECIAL_INTS = [0, 1, 2, 3, 4, 5, 7, 8, 9, 63, 64, -1, -2, -3, -4, -5, -9, 2**31, 2**53 + 1, 2**63 - 1, 2**63,
                2**64 - 1, 2**64, -(2**63), -(2**63) - 1, 10**30, 10**400]
SPECIAL_FLOATS = [0.0, -0.0, 0.5, 1.0, 2.0, 2.5, 1.5, -1.5, 0.1, 0.49, 1e-3, 1e-4, 1e-300, 5e-324, 1e300,
                  math.inf, -math.inf, math.nan, 3.0]
small_ints = st.integers(-6, 12)
py_ints = small_ints | st.sampled_from(SPECIAL_INTS)
py_floats = st.sampled_from(SPECIAL_FLOATS) | st.floats(-10, 10, allow_nan=False)
np_ints = st.one_of(small_ints.map(np.int64), small_ints.map(np.int32), st.integers(0, 12).map(np.uint8),
                    st.sampled_from([np.int64(2**63 - 1), np.uint64(2**64 - 1), np.int64(-(2**63))]))
np_floats = py_floats.map(np.float64) | st.sampled_from([np.float32(1e-3), np.float32(2.5), np.float32("nan")])
torch_ints = small_ints.map(torch.tensor) | small_ints.map(lambda v: torch.tensor(v, dtype=torch.int32))
torch_floats = py_floats.map(lambda v: torch.tensor(v, dtype=torch.float64)) | py_floats.map(torch.tensor)
torch_1d = st.lists(small_ints, max_size=3).map(lambda v: torch.tensor(v, dtype=torch.long))
others = st.one_of(st.none(), st.text(max_size=3), st.sampled_from(["3", "1e-3", "", "all", complex(1, 0), b"1"]),
                   st.lists(small_ints, max_size=3), st.lists(small_ints, max_size=3).map(tuple))
scalars = st.one_of(py_ints, py_floats, st.booleans(), np_ints, np_floats, st.booleans().map(np.bool_),
                    torch_ints, torch_floats, st.booleans().map(torch.tensor), torch_1d, others)
index_items = st.one_of(small_ints, small_ints, small_ints.map(np.int64), small_ints.map(torch.tensor),
                        st.sampled_from([1.0, 2.5, True, False, None, "1", np.float64(1.0), torch.tensor(1.0),
                                         torch.tensor([1])]))
index_lists = st.one_of(
    st.lists(st.integers(-5, 5), max_size=4),
    st.lists(st.integers(-5, 5), max_size=4).map(tuple),
    st.lists(st.integers(-5, 5), max_size=4).map(lambda v: np.array(v, dtype=np.int64)),
    st.lists(st.integers(-5, 5), max_size=4).map(lambda v: np.array(v, dtype=np.int32)),
    st.lists(st.integers(-5, 5), max_size=4).map(lambda v: torch.tensor(v, dtype=torch.long)),
    st.lists(index_items, max_size=3),
    st.sampled_from([range(2), np.array([0.0, 1.0]), torch.tensor([0.0, 1.0]), np.array([True, False]),
                     torch.tensor([[0, 1]]), np.array([[0, 1]]), "01"]),
    scalars,
)


def mixed(*specials: Any) -> st.SearchStrategy:
    """``scalars`` with some named values drawn more often."""
    return st.sampled_from(list(specials)) | scalars if specials else scalars


SCORE_OPTIONS = {
    "method": mixed("swap", "anova", "nope", None, ["swap"], 1),
    "tau": mixed(1e-4, 1e-3, np.float64(1e-3), torch.tensor(1e-3), 0, -1.0, math.inf, math.nan, True, 10**400),
    "block_size": mixed(1, 2, 3, 4, np.int64(2), torch.tensor(2), 0, True, 1.5, 2.0),
    "gamma": mixed(0.0, 0.1, 0.49, np.float64(0.2), 0.5, math.nan, True, -0.1),
    "by_frequency": mixed(True, False, 1, np.bool_(True)),
    "reduce": mixed(True, False, 0, np.bool_(False)),
    "batch_size": mixed(1, 2, 64, 2**40, np.int64(2), torch.tensor(2), 0, True, 2.5, 2**63, 10**30),
    "layers": index_lists,
    "heads": index_lists,
    "query": mixed(None, -1, 5, 7, 8, -8, -9, 2, np.int64(5), torch.tensor(5), 2.5, True, [7, 6, 5], (4, 4, 4),
                   np.array([7, 6, 5]), torch.tensor([7, 6, 5]), [7, 6], [7.0, 6, 5], [True, 6, 5]),
    "swappable": mixed(None, [0, 1, 2], [2, 1, 0, 3], (1, 2, 3), [0, 0, 1], [0, 9], [-1, 2], [0, 1.5], [True, 2],
                       np.array([0, 1, 2]), torch.tensor([0, 1, 2]), [[0, 1], [1, 2], [2, 3]], [[0, 1]], [],
                       slice(0, 3), slice(1, None), slice(None, -1), slice(None, None, 0), slice(0.5, 3), 3, "01"),
    "exclude_bos": mixed(None, True, False, 1),
    "prepend_bos": mixed(None, True, False, 0),
    "progress": mixed(None, False, 1),
}
if "nonfinite" in {f.name for f in fields(psheads.ScoreConfig)}:
    SCORE_OPTIONS["nonfinite"] = mixed("raise", "nan", "ignore", None)
PROFILE_OPTIONS = {name: SCORE_OPTIONS[name] for name in
                   ("batch_size", "layers", "query", "swappable", "exclude_bos", "prepend_bos", "progress")}


def padded_encoding(rows: list[list[int]], *, left: bool, lists: bool) -> Any:
    """``rows`` as a tokenizer pads them (``BatchEncoding``: ``input_ids`` and ``attention_mask``)."""
    from transformers import BatchEncoding

    width = max(len(row) for row in rows)
    pads = [[0] * (width - len(row)) for row in rows]
    ids = [pad + row if left else row + pad for row, pad in zip(rows, pads, strict=True)]
    mask = [[0] * len(pad) + [1] * len(row) if left else [1] * len(row) + [0] * len(pad)
            for row, pad in zip(rows, pads, strict=True)]
    if not lists:
        ids, mask = torch.tensor(ids), torch.tensor(mask)
    return BatchEncoding({"input_ids": ids, "attention_mask": mask})


@st.composite
def token_inputs(draw: Any, ragged: bool = False, min_length: int = 2) -> Any:
    """Token ids in every form: tensors of every dtype, lists (ragged or not), numpy arrays, and
    sometimes one odd id (negative, ≥ vocab, a float, a bool, None, a string, a numpy int)."""
    n = draw(st.integers(1, 3))
    length = draw(st.integers(min_length, 9))
    rows = [draw(st.lists(st.integers(1, VOCAB - 1), min_size=length, max_size=length)) for _ in range(n)]
    if ragged and draw(st.booleans()):
        rows = [row[: draw(st.integers(min_length, length))] for row in rows]
    form = draw(st.sampled_from(["list", "tuple", "tensor", "tensor", "numpy", "one list", "one tensor", "odd",
                                 "padded"]))
    if form == "padded":  # a tokenizer's output: padded with id 0 on one side, its mask saying where
        return padded_encoding(rows, left=draw(st.booleans()), lists=draw(st.booleans()))
    odd = draw(st.sampled_from([None, None, None, -1, VOCAB, 1000, 2**63, 2.5, 3.0, True, "t1", np.int64(3),
                                torch.tensor(3), np.float64(2.0), [1]]))
    if odd is not None and form in ("list", "tuple", "one list"):
        row = draw(st.integers(0, len(rows) - 1))
        rows[row][draw(st.integers(0, len(rows[row]) - 1))] = odd
    if form == "list":
        return rows
    if form == "tuple":
        return tuple(tuple(row) for row in rows)
    if form == "one list":
        return rows[0]
    equal = [row + [1] * (length - len(row)) for row in rows]
    if form in ("tensor", "one tensor"):
        dtype = draw(st.sampled_from([torch.long, torch.long, torch.int32, torch.int16, torch.uint8, torch.float32,
                                      torch.float64, torch.bool]))
        values = torch.tensor(equal)
        if odd in (-1, VOCAB, 1000):
            values[0, -1] = odd
        tensor = values.to(dtype)
        return tensor[0] if form == "one tensor" else tensor
    if form == "numpy":
        return np.array(equal, dtype=draw(st.sampled_from([np.int64, np.int32, np.float64])))
    return draw(st.sampled_from([
        "t1 t2 t3", None, 5, torch.zeros(1, 0, dtype=torch.long), torch.zeros(0, 5, dtype=torch.long),
        torch.ones(1, 1, 4, dtype=torch.long), [], [[]], [[1, 2], [3]], torch.tensor(3), [[1, 2, 3], "t1 t2"],
        torch.tensor([[1, 2.5, 3]]), [torch.tensor([1, 2, 3]), torch.tensor([4, 5, 6])], {"a": 1},
        b"t1 t2 t3", bytearray(b"\x01\x02\x03"), memoryview(b"t1 t2"), [b"t1 t2", b"t3 t4"],  # bytes: never ids
    ]))


def present(options: dict[str, st.SearchStrategy], max_keys: int = 3) -> st.SearchStrategy:
    """Up to ``max_keys`` of ``options``, each with a drawn value."""
    return st.lists(st.sampled_from(sorted(options)), max_size=max_keys, unique=True).flatmap(
        lambda keys: st.fixed_dictionaries({key: options[key] for key in keys}))


# --- the fuzz tests --------------------------------------------------------------------------------------
@settings(FUZZ, max_examples=60)
@given(options=present(SCORE_OPTIONS))
def test_score_heads_options(lens, options) -> None:
    assert (problem := run_score_heads(lens, options)) is None, problem


@settings(FUZZ, max_examples=60)
@given(prompts=token_inputs(ragged=True), options=present({k: SCORE_OPTIONS[k] for k in ("query", "block_size")}, 1))
def test_score_heads_prompts(lens, prompts, options) -> None:
    assert (problem := run_score_heads(lens, options, prompts)) is None, problem


@FUZZ
@given(options=present(PROFILE_OPTIONS), prompts=st.just(TOKENS) | token_inputs(ragged=True))
def test_frequency_profile(lens, options, prompts) -> None:
    assert (problem := run_frequency_profile(lens, options, prompts)) is None, problem


@settings(FUZZ, max_examples=60)
@given(tokens=st.just(TOKENS) | token_inputs(), layer=mixed(0, 1, -1, -2, 2, np.int64(1), torch.tensor(1)),
       query=mixed(-1, 0, 3, np.int64(3), torch.tensor(3)), by_layer=st.booleans(), layers=index_lists)
def test_frequency_logits(lens, tokens, layer, query, by_layer, layers) -> None:
    assert (problem := run_frequency_logits(lens, tokens, layer, query, by_layer, layers)) is None, problem


@FUZZ
@given(tokens=st.just(TOKENS) | token_inputs(), layer=mixed(0, 1, -1, np.int64(1)),
       query=mixed(-1, 0, 4, np.int64(3), torch.tensor(3)), by_frequency=mixed(True, False, 0, 1))
def test_position_token_logits(lens, tokens, layer, query, by_frequency) -> None:
    assert (problem := run_position_token_logits(lens, tokens, layer, query, by_frequency)) is None, problem


@settings(FUZZ, max_examples=60)
@given(planes=index_lists | st.sampled_from([[1], [1, 2], [0], [4], [5], (3,), np.array([1, 2])]),
       layers=st.none() | index_lists, heads=st.none() | index_lists, keys=mixed(False, True, 0, 1))
def test_gate(lens, planes, layers, heads, keys) -> None:
    assert (problem := run_gate(lens, planes, layers, heads, keys)) is None, problem


@FUZZ
@given(layers=st.none() | st.sampled_from([[0], [1], [0, 1], np.array([1]), [-1]]) | index_lists,
       edit=st.sampled_from(sorted(EDITS)), hook_layer=st.sampled_from([0, 1]))
def test_plane_hook_edits(lens, layers, edit, hook_layer) -> None:
    assert (problem := run_plane_hooks(lens, layers, edit, hook_layer)) is None, problem


@settings(FUZZ, max_examples=60)
@given(prompt=st.sampled_from([TOKENS[0], TOKENS[1].tolist(), TOKENS, TOKENS[:1], TOKENS.tolist(),
                               [TOKENS[0].tolist()]]) | token_inputs(),
       layer=mixed(0, 1, -1, np.int64(1), torch.tensor(1), 2),
       head=mixed(0, 3, 4, -1, np.int64(2), torch.tensor(2), 2.5, True),
       options=present({k: SCORE_OPTIONS[k] for k in ("tau", "block_size", "query")}, 2))
def test_swap_attention(lens, prompt, layer, head, options) -> None:
    assert (problem := run_swap_attention(lens, prompt, layer, head, options)) is None, problem


@FUZZ
@given(task=st.sampled_from(["number", "letter"]),
       n=mixed(1, 3, np.int64(3), torch.tensor(3), 0, -1, True, 2.5).filter(lambda v: not (
           kind(v)[0] == "int" and kind(v)[1] > 64)),
       seed=mixed(0, 7, 2**63 - 1, -1, 2**63, 2**64 - 1, True, 2.5, np.int64(3), torch.tensor(3)))
def test_task_generate(task, n, seed) -> None:
    assert (problem := run_generate(task, n, seed)) is None, problem


task_values = st.one_of(st.integers(-2, 30), st.sampled_from([1.5, 8.0, True, None, "8", np.int64(8), torch.tensor(8),
                                                               np.float64(8.0), math.nan, 702, 703]))


@FUZZ
@given(task=st.sampled_from(["number", "letter"]), data=st.data())
def test_task_fields(task, data) -> None:
    names = TASK_FIELDS[task][1]
    options = data.draw(present(dict.fromkeys(names, task_values), 2), label="options")
    assert (problem := run_task_fields(task, options)) is None, problem


@settings(FUZZ, max_examples=25)
@given(options=present({"self_check": mixed(True, False, 1, None), "probe_length": mixed(2, 8, 2**63, 1, 2.5, True),
                        "seed": mixed(0, 5, -1, 2**63, 2**64 - 1, 2.5, True, np.int64(5))}, 2))
def test_rope_lens_constructor(lens, options) -> None:
    assert (problem := run_rope_lens(lens.model, options)) is None, problem


# --- the cases the contract names ----------------------------------------------------------------------
def _case(runner: Callable[..., str | None], *args: Any, **kwargs: Any) -> Callable[[Any], str | None]:
    def run(lens: Any) -> str | None:
        return runner(lens, *args, **kwargs)

    return run


def _no_lens(runner: Callable[..., str | None], *args: Any, **kwargs: Any) -> Callable[[Any], str | None]:
    def run(lens: Any) -> str | None:
        return runner(*args, **kwargs)

    return run


FLOAT_ROW = [[1, 2.5, 3, 4, 5]]
LISTED: dict[str, Callable[[Any], str | None]] = {
    **{f"score_heads-tau={show(v)}": _case(run_score_heads, {"tau": v})
       for v in (math.inf, -math.inf, math.nan, 0, 0.0, -1e-3, True, np.float64(1e-3), torch.tensor(1e-3), 10**400)},
    **{f"score_heads-batch_size={show(v)}": _case(run_score_heads, {"batch_size": v})
       for v in (True, 0, -1, 2.5, 2.0, np.int64(2), torch.tensor(2))},
    **{f"score_heads-block_size={show(v)}": _case(run_score_heads, {"block_size": v})
       for v in (True, 0, 1.5, 2.0, np.int64(2), torch.tensor(2))},
    **{f"score_heads-gamma={show(v)}": _case(run_score_heads, {"gamma": v})
       for v in (math.nan, 0.5, True, -0.1, math.inf, np.float64(0.2), torch.tensor(0.2))},
    **{f"score_heads-query={show(v)}": _case(run_score_heads, {"query": v})
       for v in (2.5, True, 8, -9, 7.0, np.int64(5), torch.tensor(5), torch.tensor([7, 6, 5]), [7, 6])},
    **{f"score_heads-heads={show(v)}": _case(run_score_heads, {"heads": v})
       for v in ([1, 1], [4], [-5], 2, [], [1.0], [True], np.array([0, 2]), torch.tensor([0, 2]),
                 [np.int64(1), torch.tensor(2)])},
    **{f"score_heads-layers={show(v)}": _case(run_score_heads, {"layers": v})
       for v in (5, 1, [2], [-3], [], [0.0], np.array([0, 1]), [np.int64(1)], torch.tensor([1]))},
    **{f"score_heads-method={show(v)}": _case(run_score_heads, {"method": v}) for v in (["swap"], None, "nope")},
    **{f"score_heads-{name}={show(v)}": _case(run_score_heads, {name: v})
       for name in ("by_frequency", "reduce") for v in (1, 0, "yes")},
    **{f"score_heads-swappable={show(v)}": _case(run_score_heads, {"swappable": v})
       for v in (3, torch.tensor(3), torch.tensor(True), "012", [0, 0, 1], [0, 9], [0, 1.5], [True, 2],
                 slice(None, None, 0), slice(0.5, 3), np.array([0, 1, 2]), torch.tensor([0, 1, 2]), [[0, 1]])},
    **{f"score_heads-progress={show(v)}": _case(run_score_heads, {"progress": v})
       for v in (1, "yes", torch.tensor([]))},
    "score_heads-unknown option": _case(run_score_heads, {"taux": 1e-3}),
    "score_heads-config='swap'": _case(run_score_heads, {}, config="swap"),
    "score_heads-config=ProfileConfig()": _case(run_score_heads, {}, config=psheads.ProfileConfig()),
    "score_heads-model_or_lens=None": _case(run_score_heads, {}, model_or_lens=None),
    "score_heads-model_or_lens='llama'": _case(run_score_heads, {}, model_or_lens="llama"),
    **{f"score_heads-prompts={name}": _case(run_score_heads, {}, value) for name, value in {
        "[[1,2.5,3,4,5]]": FLOAT_ROW, "float tensor": TOKENS.float(), "bool tensor": TOKENS.bool(),
        "[[-1,...]]": [[-1, 2, 3, 4]], "[[64,...]]": [[64, 2, 3, 4]], "[[True,...]]": [[True, 2, 3, 4]],
        "[[1.0,2.0,3.0]]": [[1.0, 2.0, 3.0]], "bare string": "t1 t2 t3", "[]": [], "None": None,
        "int32 tensor": TOKENS.int(), "[[np.int64]]": [[np.int64(3), 4, 5, 6]],
    }.items()},
    **{f"frequency_profile-{name}={show(v)}": _case(run_frequency_profile, {name: v})
       for name, v in (("layers", 5), ("layers", [2]), ("batch_size", True), ("batch_size", 0), ("batch_size", 2.5),
                       ("query", 2.5), ("query", True), ("query", 8), ("layers", np.array([1])),
                       ("query", np.int64(3)), ("query", torch.tensor(3)))},
    **{f"frequency_logits-tokens={name}": _case(run_frequency_logits, value) for name, value in {
        "[[1,2.5,3]]": [[1, 2.5, 3]], "float tensor": TOKENS.float(), "[[-1,2,3]]": [[-1, 2, 3]],
        "[[1,64,3]]": [[1, 64, 3]], "[[True,2,3]]": [[True, 2, 3]], "bool tensor": TOKENS.bool(),
        "[[1,2],[3]]": [[1, 2], [3]],
    }.items()},
    **{f"frequency_logits-layer={show(v)}": _case(run_frequency_logits, TOKENS, v)
       for v in (2, -3, 1.0, True, np.int64(1), torch.tensor(1))},
    **{f"frequency_logits-query={show(v)}": _case(run_frequency_logits, TOKENS, 0, v)
       for v in (8, -9, 2.5, True, np.int64(3), torch.tensor(3))},
    **{f"frequency_logits_by_layer-layers={show(v)}": _case(run_frequency_logits, TOKENS, 0, -1, True, v)
       for v in (5, 1, [2], [], np.array([0, 1]), [np.int64(1)])},
    **{f"position_token_logits-{name}={show(v)}": _case(run_position_token_logits, **{name: v})
       for name, v in (("by_frequency", 1), ("query", 2.5), ("layer", 2), ("query", np.int64(3)))},
    **{f"gate-planes={show(v)}": _case(run_gate, v)
       for v in (3, 1.0, [1.5], [9], [-1], "12", [True], [np.int64(1)], np.array([1, 2]), torch.tensor([1, 2]))},
    **{f"gate-layers={show(v)}": _case(run_gate, [1], v) for v in (5, 0, [2], [np.int64(1)])},
    **{f"gate-heads={show(v)}": _case(run_gate, [1], None, v) for v in ([4], 2, [1.0], [1, 1], np.array([0, 1]))},
    "gate-heads=[3] keys=True (2 KV heads)": _case(run_gate, [1], None, [3], True),
    "gate-keys=1": _case(run_gate, [1], None, None, 1),
    **{f"plane_hooks-edit={edit}": _case(run_plane_hooks, None, edit) for edit in EDITS},
    **{f"plane_hooks-layers={show(v)}": _case(run_plane_hooks, v) for v in (5, 0, [2], np.array([0, 1]))},
    **{f"swap_attention-prompt={name}": _case(run_swap_attention, value) for name, value in {
        "[3, pos] tensor": TOKENS, "list of 3 lists": TOKENS.tolist(), "float row": TOKENS[0].float(),
        "list of ints": TOKENS[0].tolist(),
    }.items()},
    **{f"swap_attention-head={show(v)}": _case(run_swap_attention, TOKENS[0], 0, v)
       for v in (4, 2.5, 1.0, True, np.int64(1), torch.tensor(1))},
    **{f"swap_attention-layer={show(v)}": _case(run_swap_attention, TOKENS[0], v, 0)
       for v in (5, 1.0, np.int64(1), torch.tensor(1))},
    **{f"swap_attention-{name}={show(v)}": _case(run_swap_attention, TOKENS[0], 0, 0, {name: v})
       for name, v in (("tau", math.nan), ("tau", 0), ("block_size", 0), ("block_size", True), ("query", 2.5),
                       ("query", 8), ("tau", np.float64(1e-3)), ("query", np.int64(6)))},
    **{f"generate-seed={show(v)}": _no_lens(run_generate, "number", 4, v)
       for v in (-1, 2**64 - 1, 2**63, True, 2.5, np.int64(3), torch.tensor(3), 2**63 - 1)},
    **{f"generate-n={show(v)}": _no_lens(run_generate, "letter", v)
       for v in (0, True, -1, 2.5, np.int64(3), torch.tensor(3))},
    **{f"{cls}-{name}={show(v)}": _no_lens(run_task_fields, cls, {name: v})
       for cls, name, v in (("number", "n_target", 2.5), ("number", "n_pre", True), ("letter", "n_letters", 8.0),
                            ("number", "max_hops", np.int64(3)), ("letter", "n_ints", None))},
    **{f"RopeLens-{name}={show(v)}": (lambda key, value: lambda lens: run_rope_lens(lens.model, {key: value}))(name, v)
       for name, v in (("seed", -1), ("seed", 2.5), ("seed", 2**64 - 1), ("probe_length", True),
                       ("probe_length", 2.5), ("self_check", 1), ("seed", np.int64(5)))},
}


@pytest.mark.parametrize("case", sorted(LISTED))
def test_listed_case(lens, case) -> None:
    assert (problem := LISTED[case](lens)) is None, problem


@FUZZ
@given(name=st.one_of(st.sampled_from([["number"], ("letter",), None, 3, b"number", {"number": 1},
                                       ["number", "letter"]]),
                      st.lists(st.text(max_size=3), max_size=2)))
def test_names_where_strings_are_expected(name) -> None:
    """A list (or any non-string) as a task or model name is a TypeError that says a name is a string."""
    for call in (psheads.tasks.get_task, psheads.load_pretrained):
        with pytest.raises(TypeError, match=r"name must be a (task|model) name \(a string"):
            call(name)
