"""The long-context tasks (needle, variable-tracking, copy, passkey) and their teacher-forced scoring.

Prompts are built for a small byte-level BPE tokenizer trained here on the shipped prose (no
network) and parsed back from their decoded text: lengths are exact, answers are where the spans
say, variable chains resolve to their values, and the scoring counts what it should. The real
tokenizers of Gemma 3, SmolLM2 and Qwen2.5, where this machine has them, get one check each.
"""

from __future__ import annotations

import dataclasses
import gc
import re
from pathlib import Path

import pytest
import torch
import transformers

from psheads import data
from psheads.tasks import long_context
from psheads.tasks.long_context import (
    LONG_CONTEXT_TASKS,
    CopyTask,
    LongContextTask,
    NeedleTask,
    PasskeyTask,
    TeacherForced,
    VariableTrackingTask,
    long_context_names,
    long_context_task,
    register_long_context_task,
)
from tests import helpers

NAMES = ("copy", "needle", "passkey", "variable-tracking")
HAYSTACK_TASKS = ("needle", "passkey", "variable-tracking")
REAL = sorted(folder for folder in (Path.home() / ".cache" / "psheads" / "gguf").glob("*/")
              if (folder / "tokenizer.json").is_file())


@pytest.fixture(scope="session")
def bpe() -> transformers.PreTrainedTokenizerFast:
    """A byte-level BPE tokenizer of 800 tokens trained on the shipped prose, with a ``<bos>``."""
    return helpers.prose_bpe_tokenizer(800)


def _true_predictions(batch: TeacherForced) -> torch.Tensor:
    """What a perfect model predicts at ``logit_positions()``: the next token."""
    return batch.tokens.gather(1, batch.logit_positions() + 1)


def _answers(tokenizer, batch: TeacherForced, row: int) -> list[str]:
    return [tokenizer.decode(batch.tokens[row, start:stop]) for start, stop in batch.spans[row]]


# --- shapes, determinism ---------------------------------------------------------------------------

@pytest.mark.parametrize("name", NAMES)
@pytest.mark.parametrize("length", [520, 1000, 2049])
def test_prompts_have_exactly_the_length(bpe, name: str, length: int) -> None:
    batch = long_context_task(name).generate(bpe, length, n=3, seed=1)
    assert isinstance(batch, TeacherForced) and len(batch) == 3 and batch.task == name and batch.length == length
    assert batch.tokens.shape == (3, length) and batch.tokens.dtype == torch.long
    assert (batch.tokens[:, 0] == bpe.bos_token_id).all()
    assert (batch.tokens[:, 1:] != bpe.bos_token_id).all()
    assert len(batch.spans) == len(batch.labels) == len(batch.text) == 3
    for spans, labels in zip(batch.spans, batch.labels, strict=True):
        assert len(spans) == len(labels) >= 1
        assert all(1 <= start < stop <= length for start, stop in spans)
    assert batch.spans[0][-1][1] == length  # the prompt ends on its last answer
    assert batch.text[0].startswith("<bos>")


@pytest.mark.parametrize("name", NAMES)
def test_the_seed_decides_the_tokens(bpe, name: str) -> None:
    task = long_context_task(name)
    first, again = task.generate(bpe, 600, n=4, seed=7), task.generate(bpe, 600, n=4, seed=7)
    assert torch.equal(first.tokens, again.tokens) and first.spans == again.spans and first.labels == again.labels
    assert not torch.equal(first.tokens, task.generate(bpe, 600, n=4, seed=8).tokens)
    assert not torch.equal(first.tokens[0], first.tokens[1])  # prompts differ from one another
    assert torch.equal(task.generate(bpe, 600, n=2, seed=7).tokens, first.tokens[:2])  # prompt i whatever n


# --- the tasks against their text ------------------------------------------------------------------

NEEDLE = re.compile(r"One of the special magic numbers for (\w+) is: (\d+)\.")
QUESTION = re.compile(r"What is the special magic number for (\w+)\? The special magic number for \1 is:$")


def test_needles_are_hidden_and_asked(bpe) -> None:
    task = NeedleTask(n_needles=5, n_queries=3, digits=7)
    batch = task.generate(bpe, 1500, n=4, seed=3)
    for row in range(len(batch)):
        needles = dict(NEEDLE.findall(batch.text[row]))
        assert len(needles) == 5 and all(len(value) == 7 and value[0] != "0" for value in needles.values())
        assert len(set(needles.values())) == 5
        asked = []
        for (start, _), answer, label in zip(batch.spans[row], _answers(bpe, batch, row), batch.labels[row],
                                             strict=True):
            question = bpe.decode(batch.tokens[row, :start]).rstrip().splitlines()[-1]
            key = QUESTION.search(question).group(1)
            assert answer.strip() == needles[key]
            assert bpe.decode(batch.tokens[row, start]).strip()  # the span starts on the value, not a space
            assert re.fullmatch(r"depth=[01]\.\d\d", label)
            asked.append(key)
        assert len(set(asked)) == 3


def test_needle_depths_follow_the_needles(bpe) -> None:
    batch = NeedleTask(n_needles=2, n_queries=2).generate(bpe, 3000, n=6, seed=0)
    for row in range(len(batch)):
        text, (first, second) = batch.text[row], batch.labels[row]
        keys = [QUESTION.search(bpe.decode(batch.tokens[row, :start]).rstrip().splitlines()[-1]).group(1)
                for start, _ in batch.spans[row]]
        where = [text.index(f"numbers for {key} is:") for key in keys]
        assert (float(first[6:]) < float(second[6:])) == (where[0] < where[1])


def test_variable_chains_resolve_to_their_values(bpe) -> None:
    batch = VariableTrackingTask().generate(bpe, 2000, n=4, seed=5)
    for row in range(len(batch)):
        statements = re.findall(r"VAR ([A-Z]{5}) = (?:VAR ([A-Z]{5})|(\d{5}))\.", batch.text[row])
        assert len(statements) == 2 + 3 + 4 + 5  # a chain of k hops is k + 1 statements
        defined: dict[str, tuple[str | None, str | None]] = {}
        for name, source, value in statements:
            assert name not in defined and (not source or source in defined)  # in order, names distinct
            defined[name] = (source or None, value or None)
        hops_seen = []
        for (start, _), answer, label in zip(batch.spans[row], _answers(bpe, batch, row), batch.labels[row],
                                             strict=True):
            question = bpe.decode(batch.tokens[row, :start]).rstrip()
            asked = re.search(r"The value of VAR ([A-Z]{5}) is$", question).group(1)
            hops, (source, value) = 0, defined[asked]
            while source is not None:
                hops, (source, value) = hops + 1, defined[source]
            assert answer.strip() == value and label == f"hops={hops}"
            hops_seen.append(hops)
        assert sorted(hops_seen) == [1, 2, 3, 4]


def test_passkey_is_hidden_in_the_filler(bpe) -> None:
    batch = PasskeyTask(digits=4).generate(bpe, 800, n=3, seed=2)
    for row in range(len(batch)):
        (answer,) = _answers(bpe, batch, row)
        keys = re.findall(r"The pass key is (\d+)\. Remember it\. \1 is the pass key\.", batch.text[row])
        assert keys == [answer.strip()] and len(keys[0]) == 4
        assert "The grass is green. The sky is blue." in batch.text[row]
        assert batch.text[row].endswith(f"What is the pass key? The pass key is {answer.strip()}")


@pytest.mark.parametrize("length", [9, 10, 1001, 1002])
def test_copy_repeats_its_first_half(bpe, length: int) -> None:
    batch = CopyTask().generate(bpe, length, n=2, seed=4)
    half = (length - 1) // 2
    tokens = batch.tokens
    assert torch.equal(tokens[:, 1:1 + half], tokens[:, 1 + half:1 + 2 * half])
    if length % 2 == 0:  # one more token: the sequence goes on
        assert torch.equal(tokens[:, -1], tokens[:, 1])
    assert batch.unit == "token" and batch.spans == (((half + 2, length),),) * 2
    assert batch.labels == ((f"distance={half}",),) * 2
    pool = set(long_context.word_pool(bpe).tolist())
    assert set(tokens[:, 1:].flatten().tolist()) <= pool
    if half <= len(pool):  # distinct while the pool allows
        assert len(set(tokens[0, 1:1 + half].tolist())) == half
    words = [bpe.decode([token]) for token in pool]
    assert all(re.fullmatch(r" [A-Za-z][a-z]+", word) for word in words)


# --- scoring ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("name", NAMES)
def test_true_next_tokens_score_everything_and_one_wrong_token_costs_one(bpe, name: str) -> None:
    batch = long_context_task(name).generate(bpe, 700, n=3, seed=6)
    predictions = _true_predictions(batch)
    answers = sum(len(spans) for spans in batch.spans)
    tokens = sum(stop - start for spans in batch.spans for start, stop in spans)
    total = answers if batch.unit == "answer" else tokens
    assert batch.score(predictions) == (total, total)
    assert batch.correct_by_answer(predictions) == [[True] * len(spans) for spans in batch.spans]
    start, stop = batch.spans[1][0]
    column = batch.logit_positions()[1].tolist().index(stop - 2)  # the last token of prompt 1's first answer
    wrong = predictions.clone()
    wrong[1, column] = (wrong[1, column] + 1) % len(bpe)
    assert batch.score(wrong) == (total - 1, total)
    assert batch.correct_by_answer(wrong)[1][0] is False and batch.correct_by_answer(wrong)[0] == [True] * len(
        batch.spans[0])


def test_logit_positions_cover_every_answer_token_once(bpe) -> None:
    batch = NeedleTask().generate(bpe, 900, n=2, seed=0)
    positions = batch.logit_positions()
    for row, spans in enumerate(batch.spans):
        needed = sorted({p for start, stop in spans for p in range(start - 1, stop - 1)})
        assert positions[row, : len(needed)].tolist() == needed
        assert (positions[row, len(needed):] == needed[-1]).all()


def test_prompts_needing_fewer_positions_repeat_their_last_one() -> None:
    tokens = torch.arange(20).reshape(2, 10)
    batch = TeacherForced("made", 10, tokens, (((2, 4), (3, 6)), ((8, 9),)), (("a", "b"), ("c",)), "answer",
                          ("x", "y"))
    positions = batch.logit_positions()
    assert positions.tolist() == [[1, 2, 3, 4], [7, 7, 7, 7]]
    predictions = tokens.gather(1, positions + 1)
    assert batch.score(predictions) == (3, 3)
    predictions[1, 1:] = 0  # the padding is never read
    assert batch.score(predictions) == (3, 3)
    predictions[0, 1] = 0  # position 2 predicts token 3: both answers of prompt 0 hold it
    assert batch.score(predictions) == (1, 3)
    assert dataclasses.replace(batch, unit="token").score(predictions) == (4, 6)


def test_score_refuses_predictions_of_the_wrong_kind(bpe) -> None:
    batch = PasskeyTask().generate(bpe, 300, n=2)
    predictions = _true_predictions(batch)
    with pytest.raises(ValueError, match="shape of logit_positions"):
        batch.score(predictions[:, :-1])
    with pytest.raises(TypeError):  # ours ("an integer tensor") or, under the suite's shape checks, jaxtyping's
        batch.score(predictions.float())


def test_teacher_forced_checks_its_parts() -> None:
    tokens = torch.zeros(1, 5, dtype=torch.long)
    with pytest.raises(ValueError, match="1 ≤ start < stop ≤ 5"):
        TeacherForced("made", 5, tokens, (((0, 2),),), (("a",),), "answer", ("x",))
    with pytest.raises(ValueError, match="unit must be one of"):
        TeacherForced("made", 5, tokens, (((1, 2),),), (("a",),), "word", ("x",))
    with pytest.raises(ValueError, match="one label per answer"):
        TeacherForced("made", 5, tokens, (((1, 2),),), (("a", "b"),), "answer", ("x",))


# --- refused lengths and options -------------------------------------------------------------------

@pytest.mark.parametrize("name", HAYSTACK_TASKS)
def test_too_short_names_the_minimum_and_the_minimum_works(bpe, name: str) -> None:
    task = long_context_task(name)
    with pytest.raises(ValueError, match=r"too short.*at least (\d+) tokens") as error:
        task.generate(bpe, 60, n=3, seed=1)
    minimum = int(re.search(r"at least (\d+) tokens", str(error.value)).group(1))
    assert task.generate(bpe, minimum, n=3, seed=1).tokens.shape == (3, minimum)
    with pytest.raises(ValueError, match=f"at least {minimum} tokens"):
        task.generate(bpe, minimum - 1, n=3, seed=1)


def test_copy_too_short_names_the_minimum(bpe) -> None:
    with pytest.raises(ValueError, match="at least 5 tokens"):
        CopyTask().generate(bpe, 4, n=1)
    assert CopyTask().generate(bpe, 5, n=1).spans == (((4, 5),),)


@pytest.mark.parametrize("name", ["needle", "variable-tracking"])
def test_too_long_names_the_haystack_and_its_size(bpe, name: str) -> None:
    size = len(bpe(data.path("prose.txt").read_text(encoding="utf-8"), add_special_tokens=False)["input_ids"])
    with pytest.raises(ValueError, match=rf"'prose' haystack has {size} tokens.*haystack='pydoc'"):
        long_context_task(name).generate(bpe, size + 2000, n=1)
    assert long_context_task(name).generate(bpe, size // 2, n=1).length == size // 2


def test_the_pydoc_haystack(bpe) -> None:
    batch = NeedleTask(haystack="pydoc").generate(bpe, 800, n=2, seed=0)
    assert batch.tokens.shape == (2, 800) and [a.strip() for a in _answers(bpe, batch, 0)] == [
        dict(NEEDLE.findall(batch.text[0]))[key] for key in
        (QUESTION.search(bpe.decode(batch.tokens[0, :start]).rstrip().splitlines()[-1]).group(1) for start, _ in
         batch.spans[0])]
    assert "pydoc" in long_context.HAYSTACKS and "The" in long_context.haystack_text("pydoc")[:10_000]


@pytest.mark.parametrize(("factory", "options", "message"), [
    (NeedleTask, {"n_queries": 5}, "n_queries must be at most 4"),
    (NeedleTask, {"n_needles": 0}, "n_needles must be at least 1"),
    (NeedleTask, {"digits": 1, "n_needles": 10}, "pass more digits"),
    (NeedleTask, {"haystack": "novel"}, "haystack must be one of 'prose', 'pydoc'"),
    (VariableTrackingTask, {"hops": ()}, "at least one chain"),
    (VariableTrackingTask, {"hops": (0, 1)}, "hops item must be at least 1"),
    (PasskeyTask, {"digits": 0}, "digits must be at least 1"),
])
def test_options_are_checked(factory, options: dict, message: str) -> None:
    with pytest.raises(ValueError, match=re.escape(message)):
        factory(**options)


def test_arguments_are_checked(bpe) -> None:
    with pytest.raises(TypeError, match="Hugging Face tokenizer"):
        NeedleTask().generate("gpt2", 1000, n=1)
    with pytest.raises(TypeError, match="n must be an int"):
        NeedleTask().generate(bpe, 1000, n=1.0)
    with pytest.raises(ValueError, match="seed must be at least 0"):
        CopyTask().generate(bpe, 100, n=1, seed=-1)


# --- the registry ----------------------------------------------------------------------------------

def test_the_registry_lists_builds_and_refuses() -> None:
    assert long_context_names() == NAMES == LONG_CONTEXT_TASKS.names()
    assert all(isinstance(long_context_task(name), LongContextTask) for name in NAMES)
    built = long_context_task("needle", n_needles=6, n_queries=3)
    assert built == NeedleTask(n_needles=6, n_queries=3) and built.name == "needle"
    assert long_context_task("variable-tracking", hops=[2, 2]).hops == (2, 2)
    with pytest.raises(ValueError, match="Unknown long-context task 'haystack'; registered: copy, needle"):
        long_context_task("haystack")
    with pytest.raises(TypeError, match="takes no option 'window'; its options are: digits, haystack"):
        long_context_task("needle", window=3)
    with pytest.raises(TypeError, match="its options are: none"):
        long_context_task("copy", digits=3)
    with pytest.raises(ValueError, match="n_queries must be at most"):
        long_context_task("needle", n_needles=1)


def test_registering_a_task(bpe) -> None:
    @dataclasses.dataclass(frozen=True)
    class Short:
        digits: int = 3
        name: str = "short-passkey"

        def generate(self, tokenizer, length: int, n: int, seed: int = 0) -> TeacherForced:
            return dataclasses.replace(PasskeyTask(digits=self.digits).generate(tokenizer, length, n, seed),
                                       task=self.name)

    try:
        task = Short()
        assert register_long_context_task(task) is task
        assert "short-passkey" in long_context_names()
        assert long_context_task("short-passkey", digits=4).generate(bpe, 300, n=1).task == "short-passkey"
        with pytest.raises(ValueError, match="already registered; pass replace=True"):
            register_long_context_task(Short())
        assert register_long_context_task(Short(digits=2), replace=True).digits == 2
        with pytest.raises(ValueError, match="already registered"):
            register_long_context_task(NeedleTask())
    finally:
        LONG_CONTEXT_TASKS.pop("short-passkey")
    with pytest.raises(TypeError, match="task instance"):
        register_long_context_task(NeedleTask)
    with pytest.raises(TypeError, match="task instance"):
        register_long_context_task(object())
    assert long_context_names() == NAMES


# --- real tokenizers, where this machine has them --------------------------------------------------

@pytest.mark.skipif(not REAL, reason="no real LLM tokenizer under ~/.cache/psheads/gguf/")
@pytest.mark.parametrize("folder", REAL, ids=lambda folder: folder.name.split("-")[0])
def test_real_tokenizers(folder: Path) -> None:
    tokenizer = transformers.AutoTokenizer.from_pretrained(folder)
    start = tokenizer.bos_token_id if tokenizer.bos_token_id is not None else tokenizer.eos_token_id
    for name in NAMES:
        batch = long_context_task(name).generate(tokenizer, 1024, n=2, seed=0)
        assert batch.tokens.shape == (2, 1024) and (batch.tokens[:, 0] == start).all()
        assert batch.score(_true_predictions(batch))[0] == batch.score(_true_predictions(batch))[1]
        if name == "copy":
            continue
        for row in range(2):
            for (begin, stop), answer in zip(batch.spans[row], _answers(tokenizer, batch, row), strict=True):
                assert re.fullmatch(r"\d{5,6}", answer)  # the digits, without the space before them
                assert tokenizer.decode(batch.tokens[row, :begin]).rstrip().endswith(("is:", "is"))
                assert stop - begin == len(answer)  # these tokenizers write one digit per token


def test_the_haystack_is_tokenized_once_and_forgotten_with_its_tokenizer(bpe) -> None:
    cache = long_context.text.TokenizerCache()
    calls = []
    assert cache.get(bpe, "key", lambda: calls.append(1) or 5) == 5
    assert cache.get(bpe, "key", lambda: calls.append(1) or 6) == 5 and calls == [1]
    tokenizer = transformers.PreTrainedTokenizerFast(tokenizer_object=bpe.backend_tokenizer, bos_token="<bos>")
    assert cache.get(tokenizer, "key", lambda: 7) == 7 and len(cache._entries) == 2
    del tokenizer
    gc.collect()
    assert len(cache._entries) == 1
