"""One registry shape for tasks, score methods and RoPE families: register with replace=, the same
listing and lookup types, and errors that name the registered entries."""

from __future__ import annotations

import dataclasses
import re
import sys
import warnings

import pytest

import psheads
from psheads import tasks
from psheads.interface.registry import PluginWarning, Registry, named
from psheads.measure import methods
from psheads.rope import families
from tests import helpers


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


WIDGETS = '''
LOADS = []
LOADS.append(1)
good = 7
wrong = "seven"
clash = 8
'''


def test_installed_plugins_load_once_on_first_use_and_a_broken_one_warns_by_name(tmp_path, monkeypatch) -> None:
    group = "psheads-test.widgets"
    helpers.install_plugin(tmp_path, "widget_plugin", {group: {
        "good": "widget_plugin:good",
        "missing": "widget_plugin_missing:thing",  # its module does not import
        "wrong": "widget_plugin:wrong",  # not a widget
        "builtin": "widget_plugin:clash",  # a name the library registered itself
    }}, WIDGETS)
    monkeypatch.syspath_prepend(str(tmp_path))

    def add(name: str, entry: object) -> None:
        if not isinstance(entry, int):
            raise TypeError(f"a widget is an int, got {type(entry).__name__}")
        registry.register(name, entry)

    registry: Registry[int] = Registry("widget", "register_widget", group=group, add=add)
    registry.register("builtin", 1)
    assert "widget_plugin" not in sys.modules  # nothing is read before the first use
    with pytest.warns(PluginWarning) as caught:
        assert registry.names() == ("builtin", "good")
    messages = sorted(str(warning.message) for warning in caught)
    assert len(messages) == 3 and all("of package 'widget_plugin'" in message for message in messages)
    assert re.search(r"plugin 'builtin' .*widget_plugin:clash.*already registered", messages[0])
    assert re.search(r"plugin 'missing' .*ModuleNotFoundError.*widget_plugin_missing", messages[1])
    assert re.search(r"plugin 'wrong' .*TypeError: a widget is an int, got str", messages[2])
    assert registry.lookup("good") == 7 and registry.lookup("builtin") == 1
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # read once: no second round of warnings
        assert registry.names() == ("builtin", "good") and len(registry) == 2
    assert sys.modules["widget_plugin"].LOADS == [1]
    sys.modules.pop("widget_plugin")


def test_a_plugin_s_entry_point_and_object_must_agree_on_the_name() -> None:
    family = families.Family("plugin-family", ("PluginFamilyForCausalLM",))
    assert named("plugin-family", family, "family") is family and named("x", 3, "widget") == 3
    with pytest.raises(ValueError, match="entry point 'other' points to a family named 'plugin-family'"):
        named("other", family, "family")
