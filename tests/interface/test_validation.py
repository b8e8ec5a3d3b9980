"""Every public entry point validates its arguments in one way (regression tests for inputs that
were accepted silently or refused with a misleading message)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

import psheads
from psheads.interface import validation
from psheads.tasks import NumberTask, TaskBatch, checked_batch


def test_numbers_accept_numpy_and_torch_scalars_and_refuse_the_rest() -> None:
    assert validation.integer(np.int64(3), "x") == 3 and validation.integer(torch.tensor(4), "x") == 4
    assert validation.number(np.float32(0.25), "tau") == 0.25 and validation.number(torch.tensor(2.0), "tau") == 2.0
    assert validation.integers(np.array([1, 2]), "layers") == (1, 2)
    assert validation.integers(torch.tensor([3]), "layers") == (3,)
    for call, error, message in [
        (lambda: validation.integer(True, "steps"), TypeError, "steps must be an int, got a bool"),
        (lambda: validation.integer(2.5, "query"), TypeError, "query must be an int, got float"),
        (lambda: validation.integer(torch.tensor([1, 2]), "head"), TypeError, "head must be an int, got a tensor"),
        (lambda: validation.number(float("inf"), "tau"), ValueError, "tau must be finite"),
        (lambda: validation.number(float("nan"), "lr"), ValueError, "lr must be finite"),
        (lambda: validation.number(np.bool_(True), "tau"), TypeError, "tau must be a number, got a bool"),
        (lambda: validation.integers(5, "layers"), TypeError, r"layers must be a list of ints \(e.g. \[5\]\)"),
        (lambda: validation.integers([1, 1], "heads", unique=True), ValueError, r"heads must not repeat items"),
        (lambda: validation.seed(-1), ValueError, "seed must be at least 0"),
        (lambda: validation.seed(2**64), ValueError, "seed must be at most"),
        (lambda: validation.boolean(1, "reduce"), TypeError, "reduce must be True or False"),
    ]:
        with pytest.raises(error, match=message):
            call()


def test_score_options_are_validated_with_their_names(model_factory) -> None:
    lens = psheads.RopeLens(model_factory("llama"))
    tokens = torch.randint(0, 64, (2, 8))
    frame = psheads.score_heads(lens, tokens, tau=np.float64(1e-3), layers=np.array([1]), heads=[torch.tensor(0)],
                                query=np.int64(-1))
    assert len(frame) == 1 and frame.attrs["config"]["tau"] == 1e-3
    for options, error, message in [
        ({"tau": float("inf")}, ValueError, "tau must be finite"),
        ({"tau": True}, TypeError, "tau must be a number, got a bool"),
        ({"batch_size": True}, TypeError, "batch_size must be an int, got a bool"),
        ({"block_size": 1.5}, TypeError, "block_size must be an int"),
        ({"gamma": 0.5}, ValueError, "gamma must be less than 0.5"),
        ({"heads": [0, 0]}, ValueError, "heads must not repeat items"),
        ({"layers": 5}, TypeError, r"layers must be a list of ints \(e.g. \[5\]\)"),
        ({"query": 2.5}, TypeError, "query must be an int"),
        ({"reduce": 0}, TypeError, "reduce must be True or False"),
        ({"nonfinite": "ignore"}, ValueError, "nonfinite must be one of"),
    ]:
        with pytest.raises(error, match=message):
            psheads.score_heads(lens, tokens, **options)
    with pytest.raises(TypeError, match="prompt 0 must hold integer token ids"):
        psheads.score_heads(lens, [[1, 2.5, 3, 4]])
    with pytest.raises(TypeError, match="token tensors must hold integer ids"):
        psheads.score_heads(lens, torch.rand(2, 5))
    with pytest.raises(TypeError, match=r"prompt 0 must hold integer token ids, got a bool \(True\)"):
        psheads.score_heads(lens, [[1, True, 3]])  # torch alone would read True as token 1
    with pytest.raises(TypeError, match="tokens must hold integer token ids, got a bool"):
        lens.frequency_logits([[1, True, 3]], 0)


def test_swap_attention_and_lens_arguments(model_factory) -> None:
    lens = psheads.RopeLens(model_factory("llama"))
    tokens = torch.randint(0, 64, (3, 8))
    swaps = psheads.swap_attention(lens, tokens[0], np.int64(1), torch.tensor(2))
    assert len(swaps) == 21
    with pytest.raises(ValueError, match="prompt: swap_attention takes one prompt, got a batch of 3"):
        psheads.swap_attention(lens, tokens, 1, 0)
    with pytest.raises(ValueError, match="prompt: swap_attention takes one prompt, got a list of 2"):
        psheads.swap_attention(lens, [[1, 2, 3, 4], [5, 6, 7, 8]], 1, 0)
    with pytest.raises(TypeError, match="head must be an int"):
        psheads.swap_attention(lens, tokens[0], 1, 0.0)
    with pytest.raises(TypeError, match=r"planes must be a list of ints \(e.g. \[3\]\)"), lens.gate(3):
        pass
    with pytest.raises(TypeError, match=r"layers must be a list of ints"), lens.gate([1], layers=1):
        pass
    with pytest.raises(TypeError, match="planes item must be an int"), lens.gate([1.0]):
        pass
    with pytest.raises(TypeError, match="seed must be an int"):
        psheads.RopeLens(lens.model, seed=1.5)
    with pytest.raises(TypeError, match="by_frequency must be True or False"):
        lens.position_token_logits(tokens, 0, by_frequency="yes")


def test_prompts_beyond_the_context_warn_where_the_tables_extrapolate(model_factory) -> None:
    lens = psheads.RopeLens(model_factory("llama", max_position_embeddings=16))
    with pytest.warns(UserWarning, match="Sequence length 20 exceeds the model's context of 16 tokens"):
        lens.frequency_logits(torch.randint(0, 64, (1, 20)), 0)
    gptj = psheads.RopeLens(model_factory("gptj"))
    with pytest.raises(ValueError, match="exceeds the model's context of 1024 tokens"):
        gptj.frequency_logits(torch.zeros(1, 1025, dtype=torch.long), 0)


def test_task_seeds_and_batches_are_checked() -> None:
    task = NumberTask()
    assert torch.equal(task.generate(4, seed=np.int64(3)).tokens, task.generate(4, seed=3).tokens)
    with pytest.raises(ValueError, match="seed must be at least 0"):
        task.generate(4, seed=-1)
    with pytest.raises(TypeError, match="n must be an int, got a bool"):
        task.generate(True)
    with pytest.raises(ValueError, match="n must be at least 1"):
        task.generate(0)

    class Broken(NumberTask):
        def generate(self, n, seed=0):
            return super().generate(n, seed).tokens

    with pytest.raises(TypeError, match="generate returned Tensor, not a psheads.tasks.TaskBatch"):
        checked_batch(Broken(), 4)

    class Short(NumberTask):
        def generate(self, n, seed=0):
            batch = super().generate(n, seed)
            return TaskBatch(batch.tokens[:-1], batch.answers, batch.hops, batch.answer_positions, batch.text,
                             batch.answer_text)

    with pytest.raises(ValueError, match="returned parts of other sizes"):
        checked_batch(Short(), 4)
    assert len(checked_batch(task, 5, seed=2)) == 5


def test_devices_and_config_dicts_say_what_is_wrong() -> None:
    assert validation.device("cpu") == "cpu" and validation.device(torch.device("cpu")) == "cpu"
    with pytest.raises(TypeError, match="device must be a device name"):
        validation.device(0)
    with pytest.raises(ValueError, match="device 'nowhere' is not a device torch knows"):
        validation.device("nowhere")
    with pytest.raises(ValueError, match="device 'meta' holds shapes"):
        validation.device("meta")
    if not torch.cuda.is_available():
        with pytest.raises(ValueError, match="no cuda device is available here"):
            validation.device("cuda:0")
    for data in (None, [1, 2], "x", {1: 2}):  # each used to fail inside dict() or **kwargs
        with pytest.raises(TypeError, match=r"ScoreConfig.from_dict needs a dict of field names"):
            psheads.ScoreConfig.from_dict(data)
    with pytest.raises(TypeError, match="PromptOptions.from_dict needs a dict"):
        psheads.measure.prompts.PromptOptions.from_dict(None)


def test_swap_attention_takes_one_head(model_factory) -> None:
    """heads=(1,) used to end in 'got multiple values for keyword argument'."""
    with pytest.raises(TypeError, match=r"swap_attention scores one head: pass head=…, not heads="):
        psheads.swap_attention(model_factory("llama"), torch.arange(1, 9), 0, 0, heads=(1,))
