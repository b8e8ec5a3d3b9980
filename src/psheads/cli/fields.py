"""Command-line options generated from the config dataclasses: one source for each option.

A command whose options mirror a config (``TrainConfig``, ``ScoreConfig``, ``AtlasConfig``, …)
takes each option's name, type, default and help from the dataclass field: its annotation, its
default and its line in the class docstring's ``Attributes:`` section. They are read from the
config's source, not imported, so that ``--help`` and argparse's errors answer without importing
torch (a config's module imports it); ``tests/test_cli.py`` checks that what is read here is what
the imported dataclass holds.
"""

from __future__ import annotations

import argparse
import ast
import functools
import re
from dataclasses import MISSING, dataclass
from pathlib import Path
from typing import Any

PACKAGE = Path(__file__).resolve().parents[1]
"""The ``psheads`` folder, whose sources are read."""

TYPES: dict[str, dict[str, Any]] = {
    "int": {"type": int},
    "float": {"type": float},
    "str": {"type": str},
    "Path": {"type": str},
    "tuple[int, ...]": {"type": int, "nargs": "+"},
    "tuple[float, ...]": {"type": float, "nargs": "+"},
    "tuple[str, ...]": {"type": str, "nargs": "+"},
}
"""A field's annotation (without ``| None``) → how argparse reads it; a ``bool`` that defaults to
False is a flag."""


@dataclass(frozen=True)
class ConfigField:
    """One field of a config dataclass, as its source declares it.

    Attributes:
        name: the field's name.
        annotation: its annotation as written (``"tuple[int, ...] | None"``).
        default: its default (a literal, or a module constant it names); ``MISSING`` for none or a
            ``default_factory``.
        help: its line in the docstring's ``Attributes:`` section, as plain text.
    """

    name: str
    annotation: str
    default: Any
    help: str


def source_path(module: str) -> Path:
    """The source file of ``psheads.<module>`` (a package's ``__init__.py``)."""
    path = PACKAGE.joinpath(*module.split(".")[1:])
    return path / "__init__.py" if path.is_dir() else path.with_suffix(".py")


@functools.cache
def _tree(module: str) -> ast.Module:
    return ast.parse(source_path(module).read_text(encoding="utf-8"))


@functools.cache
def config_fields(module: str, name: str) -> dict[str, ConfigField]:
    """The fields of the dataclass ``name`` defined in ``module``, by name, in declaration order.

    Raises:
        LookupError: ``module`` defines no class ``name``.
    """
    tree = _tree(module)
    node = next((n for n in tree.body if isinstance(n, ast.ClassDef) and n.name == name), None)
    if node is None:
        raise LookupError(f"{module} defines no class {name}")
    docs = attribute_docs(ast.get_docstring(node) or "")
    return {stmt.target.id: ConfigField(stmt.target.id, ast.unparse(stmt.annotation),
                                        _value(stmt.value, module), docs.get(stmt.target.id, ""))
            for stmt in node.body if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name)
            and "ClassVar" not in ast.unparse(stmt.annotation)}


def attribute_docs(docstring: str) -> dict[str, str]:
    """A Google-style docstring's ``Attributes:`` entries as plain text (no double backticks, no
    final full stop), by name."""
    entries: dict[str, list[str]] = {}
    lines = docstring.splitlines()
    start = next((i for i, line in enumerate(lines) if line.strip() == "Attributes:"), len(lines))
    for line in lines[start + 1:]:
        if not line.strip() or not line.startswith(" "):
            break
        entry = re.match(r"    (\w+): (.*)", line)
        if entry:
            entries[entry[1]] = [entry[2]]
        elif entries:
            entries[list(entries)[-1]].append(line.strip())
    return {name: re.sub(r"``(.+?)``", r"\1", " ".join(words)).removesuffix(".") for name, words in entries.items()}


def _value(node: ast.expr | None, module: str) -> Any:
    """The value of a default: a literal, or a module constant it names (``rules.SINK``)."""
    if node is None:
        return MISSING
    try:
        return ast.literal_eval(node)
    except ValueError:
        pass
    if isinstance(node, ast.Name):
        return _constant(module, node.id)
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        imported = _imports(module).get(node.value.id)
        if imported is not None:
            return _constant(imported, node.attr)
    return MISSING  # field(default_factory=...), a call


def _imports(module: str) -> dict[str, str]:
    """Names bound at the top of ``module`` by ``from psheads.x import y [as z]``: name → ``psheads.x.y``."""
    found = {}
    for node in _tree(module).body:
        if isinstance(node, ast.ImportFrom) and node.level == 0 and (node.module or "").startswith("psheads"):
            found.update({alias.asname or alias.name: f"{node.module}.{alias.name}" for alias in node.names})
        elif isinstance(node, ast.Import):
            found.update({alias.asname: alias.name for alias in node.names if alias.asname})
    return found


def _constant(module: str, name: str) -> Any:
    """The value of the constant ``name`` of ``module`` (or of the module it was imported from)."""
    for node in _tree(module).body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == name for t in node.targets):
            return _value(node.value, module)
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.target.id == name:
            return _value(node.value, module)
    imported = _imports(module).get(name)
    if imported is not None:
        base, _, attr = imported.rpartition(".")
        return _constant(base, attr)
    return MISSING


def add_option(parser: argparse.ArgumentParser, field: ConfigField,
               flag: str | None = None, **overrides: Any) -> argparse.Action:
    """``--field-name`` (or ``flag``) read into ``args.<field name>``, with the field's type, default
    and help; ``overrides`` (argparse's own keywords) replace any of them.

    Raises:
        TypeError: a field whose annotation has no rule in ``TYPES`` (and no ``type`` override).
    """
    flag = flag or f"--{field.name.replace('_', '-')}"
    base = re.sub(r"\s*\|\s*None$", "", field.annotation)
    if base == "bool" and field.default is False:
        kind: dict[str, Any] = {"action": "store_true"}
    elif base in TYPES:
        kind = {**TYPES[base], "metavar": flag.lstrip("-").replace("-", "_").upper()}
    elif "type" in overrides:
        kind = {}
    else:
        raise TypeError(f"{field.name}: {field.annotation} has no command-line form; add it to TYPES or pass type=")
    default = list(field.default) if isinstance(field.default, tuple) else field.default
    spec = {"dest": field.name, "help": field.help.replace("%", "%%"), **kind,
            **({} if default is MISSING else {"default": default}), **overrides}
    return parser.add_argument(flag, **spec)


def config_values(args: argparse.Namespace, fields: dict[str, ConfigField], *names: str) -> dict[str, Any]:
    """The options ``names`` (fields of a config) from ``args``, as the config takes them (lists as tuples)."""
    unknown = set(names) - set(fields)
    if unknown:
        raise LookupError(f"not fields of the config: {sorted(unknown)}")
    values = {name: getattr(args, name) for name in names}
    return {name: tuple(value) if isinstance(value, list) else value for name, value in values.items()}
