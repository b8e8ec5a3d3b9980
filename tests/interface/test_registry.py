"""One registry shape for tasks, score methods and RoPE families: register with replace=, the same
listing and lookup types, and errors that name the registered entries."""

from __future__ import annotations

import dataclasses

import pytest

import psheads
from psheads import tasks
from psheads.interface.registry import Registry
from psheads.measure import methods
from psheads.rope import families


def test_a_registry_registers_replaces_looks_up_and_lists() -> None:
    registry: Registry[int] = Registry("widget", "register_widget")
    assert registry.register("b", 2) == 2 and registry.register("a", 1) == 1
    assert registry.names() == ("a", "b") and registry.lookup("a") == 1 and "b" in registry and len(registry) == 2
    with pytest.raises(ValueError, match="already registered; pass replace=True"):
        registry.register("a", 3)
    assert registry.register("a", 3, replace=True) == 3 and registry.lookup("a") == 3
    with pytest.raises(ValueError, match=r"Unknown widget 'c'; registered: a, b \(add one with register_widget\)"):
        registry.lookup("c")
    with pytest.raises(TypeError, match="name must be a widget name"):
        registry.lookup(["a"])  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="non-empty string"):
        registry.register("", 0)
    assert registry.pop("b") == 2 and registry.names() == ("a",)


def _entries():
    """(register, list, look up, an entry to register under a fresh name) for each registry."""

    class Halves:
        name = "registry-test"
        columns = ("positional", "symbolic")

        def min_swappable(self, config):
            return 2

        def score(self, logits, config):
            raise NotImplementedError

    family = families.Family("registry-test", ("RegistryTestForCausalLM",), "Registry test")
    return [
        (lambda replace=False: tasks.register_task("registry-test", tasks.NumberTask, replace=replace),
         tasks.available_tasks, tasks.get_task, tasks.base._REGISTRY),
        (lambda replace=False: psheads.register_score_method(Halves(), replace=replace),
         psheads.score_methods, methods.get_score_method, methods.base._METHODS),
        (lambda replace=False: families.register_family(family, replace=replace),
         families.families, families.get_family, families._REGISTRY),
    ]


@pytest.mark.parametrize("index", range(3), ids=["tasks", "score methods", "families"])
def test_every_registry_behaves_alike(index: int) -> None:
    register, listing, lookup, registry = _entries()[index]
    register()
    try:
        assert isinstance(listing(), tuple) and list(listing()) == sorted(listing()) and "registry-test" in listing()
        with pytest.raises(ValueError, match="already registered; pass replace=True"):
            register()
        latest = register(replace=True)  # a notebook cell run twice
        found = lookup("registry-test")
        assert found is latest or isinstance(found, latest)  # get_task builds the task its factory makes
        with pytest.raises(ValueError, match=r"Unknown .*'nope'; registered: .*registry-test"):
            lookup("nope")
    finally:
        registry.pop("registry-test")
    assert "registry-test" not in listing()


def test_a_family_cannot_take_another_familys_architecture() -> None:
    with pytest.raises(ValueError, match="read by family 'llama' already"):
        families.register_family(families.Family("my-llama", ("LlamaForCausalLM",)))
    with pytest.raises(TypeError, match="must be a psheads.rope.families.Family"):
        families.register_family("llama")  # type: ignore[arg-type]
    custom = families.register_family(families.Family("registry-arch", ("RegistryArchForCausalLM",), "Registry arch"))
    try:
        assert families.family_of("RegistryArchForCausalLM") is custom
        assert "Registry arch" in families.family_titles()
    finally:
        families._REGISTRY.pop("registry-arch")
    assert families.family_of("RegistryArchForCausalLM") is families.GENERIC


@dataclasses.dataclass(frozen=True)
class _Plain:
    length: int = 4


def test_task_options_come_from_the_protocol_or_the_dataclass_or_are_refused() -> None:
    assert tasks.task_options(tasks.NumberTask(n_pre=5))["n_pre"] == 5
    assert "name" not in tasks.task_options(tasks.NumberTask())

    class Declared:
        name = "declared"
        options = {"length": 6}

    assert tasks.task_options(Declared()) == {"length": 6}

    class Silent:
        name = "silent"

    with pytest.raises(TypeError, match="cannot record how to rebuild it: give it an `options` property"):
        tasks.task_options(Silent())
    Declared.options = ["length"]
    with pytest.raises(TypeError, match="options must be a dict"):
        tasks.task_options(Declared())
