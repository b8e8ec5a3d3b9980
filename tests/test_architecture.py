"""The import contract: the package's folders are layers, and imports point down.

``psheads.LAYERS`` declares the order once. Every import inside the package, at module level or
inside a function, is read from the source: a module imports only from its own layer and the
layers below it, only by its canonical name (never a flat alias from ``psheads.MOVED``, never
through the package face ``psheads/__init__.py``), and never a private name of another module.
TransformerLens, Hugging Face and torch internals are touched in ``rope/backends/`` only; no
module takes part in an import cycle; the architecture page's module table is the code's.
"""

from __future__ import annotations

import ast
import importlib
from pathlib import Path

import psheads
from tests import architecture

SOURCE = Path(psheads.__file__).parent


def test_every_module_belongs_to_a_layer() -> None:
    modules = architecture.modules()
    assert {m.layer for m in modules} == {*architecture.layer_names(), "face"}
    assert {m.name for m in modules if m.layer == "face"} == {"psheads", "psheads.__main__"}
    top = sorted(p.name for p in SOURCE.iterdir() if not p.name.startswith((".", "__pycache__")))
    # the top level reads as the architecture: the layers, the public face (__init__, __main__) and the package marker
    assert len(top) <= len(psheads.LAYERS) + 3, top
    for module in modules:
        assert module.doc, f"{module.name} has no docstring saying what it holds"


def test_imports_point_down() -> None:
    order = {name: index for index, name in enumerate(architecture.layer_names())}
    upward = [f"{m.name} ({m.layer}) imports {target} ({architecture.layer_of(target)})"
              for m in architecture.modules() if m.layer != "face" for target in m.imports
              if order[architecture.layer_of(target)] > order[m.layer]]
    assert not upward, "\n".join(upward)


def test_the_checks_catch_counter_examples() -> None:
    """Each check can fail: an upward import, a private name, an internal and a hook name are reported."""
    source = ("from psheads.models import zoo\nfrom psheads.measure import engine\nimport psheads.rope.lens as lens\n"
              "def f(model):\n    from psheads.rope.backends import _upcast\n    engine._frame(); lens._cache\n"
              "    model.original_model.run_with_hooks('blocks.0.hook_resid_post')\n")
    tree = ast.parse(source)
    found = architecture.imports_of(tree, "psheads.measure.example", is_package=False)
    assert found == {"psheads.models.zoo", "psheads.measure.engine", "psheads.rope.lens", "psheads.rope.backends"}
    order = {name: index for index, name in enumerate(architecture.layer_names())}
    assert order[architecture.layer_of("psheads.models.zoo")] > order["measure"]
    assert architecture.private_uses(tree, "psheads.measure.example", is_package=False) == {
        "psheads.rope.backends._upcast", "psheads.measure.engine._frame", "psheads.rope.lens._cache"}
    spotted = " ".join(architecture.internals(tree))
    assert ".original_model" in spotted and ".run_with_hooks" in spotted and "hook name 'blocks.0" in spotted


def test_calls_through_the_package_face_count_as_imports() -> None:
    """``import psheads`` inside the package is no blind spot: each public name it reads counts as an
    import of that name's home, so a low layer calling ``psheads.train`` is an upward import."""
    tree = ast.parse("import psheads\nfrom psheads import score_heads\ndef f(model):\n    psheads.train(model)\n"
                     "    return psheads.__version__\n")
    found = architecture.imports_of(tree, "psheads.rope.example", is_package=False)
    assert found == {"psheads.models.training", "psheads.measure.scoring"}
    order = {name: index for index, name in enumerate(architecture.layer_names())}
    assert all(order[architecture.layer_of(name)] > order["rope"] for name in found)


def test_no_module_imports_the_package_face() -> None:
    """The face sits on top: a module inside the package imports each name from its home, never
    through ``psheads/__init__.py`` (``from psheads import plotting``, ``from psheads import __version__``)."""
    problems = [f"{m.name}: {line}" for m in architecture.modules() if m.layer != "face" for line in m.face_imports]
    assert not problems, "\n".join(problems)


def test_the_face_check_catches_counter_examples() -> None:
    tree = ast.parse("import psheads\nimport psheads.plotting as plotting\nfrom psheads import __version__\n"
                     "def f():\n    from .. import data\n    from psheads.interface.version import __version__\n")
    found = architecture.face_imports(tree, "psheads.rope.example", is_package=False)
    assert found == ["line 1: import psheads", "line 3: from psheads import __version__",
                     "line 5: from psheads import data"]


def test_no_import_cycles() -> None:
    assert not architecture.cycles(), "\n".join(" -> ".join(cycle) for cycle in architecture.cycles())


def test_the_cycle_check_finds_a_cycle(monkeypatch) -> None:
    fake = [architecture.Module("psheads.rope.a", "rope", Path("a.py"), "a", {"psheads.rope.b"}),
            architecture.Module("psheads.rope.b", "rope", Path("b.py"), "b", {"psheads.rope.a"})]
    monkeypatch.setattr(architecture, "modules", lambda: fake)
    assert architecture.cycles() == [["psheads.rope.a", "psheads.rope.b", "psheads.rope.a"]]


def test_imports_use_canonical_names_and_no_private_names() -> None:
    flat = {f"psheads.{name}" for name in psheads.MOVED}
    problems = []
    for module in architecture.modules():
        problems += [f"{module.name} imports the flat alias {t}" for t in module.imports if t in flat]
        problems += [f"{module.name} imports the private name {n}" for n in module.private_imports]
    assert not problems, "\n".join(problems)


def test_library_internals_only_in_the_backend() -> None:
    problems = [f"{m.name}: {what}" for m in architecture.modules() if not architecture.in_backends(m.name)
                for what in m.internals]
    assert not problems, "\n".join(problems)


def test_flat_names_are_the_same_modules() -> None:
    for old, new in psheads.MOVED.items():
        flat = importlib.import_module(f"psheads.{old}")
        home = importlib.import_module(f"psheads.{new}")
        assert flat is home and getattr(psheads, old) is home
        assert home.__spec__.name == f"psheads.{new}" and home.__name__ == f"psheads.{new}"
    from psheads.zoo import boot_gguf  # the names the README uses

    assert boot_gguf is importlib.import_module("psheads.models.zoo").boot_gguf
    for name in psheads.__all__:
        assert getattr(psheads, name) is not None


def test_the_architecture_page_table_is_the_code() -> None:
    page = (Path(__file__).parents[1] / "docs" / "architecture.md").read_text()
    begin, end = architecture.TABLE_MARKERS
    assert begin in page and end in page, "docs/architecture.md lost its generated module table"
    shown = page.split(begin)[1].split(end)[0].strip()
    assert shown == architecture.module_table().strip(), (
        "docs/architecture.md's module table is stale: run `python -m tests.regenerate`")
