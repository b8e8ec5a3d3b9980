"""Result frames on disk, provenance included: ``save_frame`` and ``load_frame``.

The extension picks the format, and every format keeps the frame's ``attrs`` (config, versions,
…) and its column dtypes, ordered categoricals included:

* ``.parquet`` (needs pyarrow): dtypes natively; ``attrs`` in the file's metadata, both as
  pandas writes them (``pd.read_parquet`` restores them, tuples as lists) and exactly (key
  ``psheads``).
* ``.json``: one document ``{"columns": [...], "attrs": {...}, "records": [...]}``, one record
  per row; missing values are ``null``.
* ``.csv``: the table as ``DataFrame.to_csv`` writes it, and a sidecar ``<file>.attrs.json``
  holding ``{"columns": [...], "attrs": {...}}``. Without the sidecar ``load_frame`` reads the
  CSV as pandas does, with empty ``attrs``.

``columns`` lists each column's ``name`` and ``dtype`` (plus ``categories`` and ``ordered`` for a
categorical, and ``cells``, ``"tuple"`` or ``"list"``, for a column of tuples or lists such as
``positions_i``, which every format gives back as such). In a CSV, a column of tuples or lists, or
of strings with an empty one (which CSV cannot tell from a missing value), holds each cell as JSON
text (``"csv": "json"``); missing cells stay empty. In ``attrs`` a tuple is stored as ``{"__tuple__": [...]}`` and a dict with non-string
keys as ``{"__items__": [[key, value], ...]}``, so both come back as they were.

pandas and pyarrow are imported inside the functions: the command line reads ``FORMATS`` without
loading them.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import pandas as pd

FORMATS = (".csv", ".json", ".parquet")
"""Extensions ``save_frame`` writes and ``load_frame`` reads."""

PARQUET_KEY = b"psheads"
"""Parquet metadata key of the exact provenance document."""

_TUPLE, _ITEMS = "__tuple__", "__items__"


def check_frame_path(path: str | Path) -> str:
    """The format of ``path`` (its lower-case extension), checked before any work is done.

    Raises:
        ValueError: the extension is not one of ``FORMATS``.
        ImportError: ``.parquet`` without pyarrow installed.
    """
    suffix = Path(path).suffix.lower()
    if suffix not in FORMATS:
        raise ValueError(f"{path}: the extension picks the format; use one of {', '.join(FORMATS)}.")
    if suffix == ".parquet":
        try:
            import pyarrow  # noqa: F401
        except ImportError:
            raise ImportError(f"{path}: parquet needs pyarrow (pip install pyarrow); or write a .csv or .json file, "
                              "which keep the attrs too.") from None
    return suffix


def sidecar(path: str | Path) -> Path:
    """The provenance file next to a CSV: ``<path>.attrs.json``."""
    return Path(f"{path}.attrs.json")


def save_frame(frame: pd.DataFrame, path: str | Path) -> Path:
    """Write ``frame`` with its ``attrs`` and dtypes (format by extension, see ``FORMATS``).

    The index is not written: an unnamed index is dropped, a named one is refused
    (``frame.reset_index()`` first).

    Args:
        frame: the frame; column names must be distinct strings.
        path: a ``.csv`` (plus ``<path>.attrs.json``), ``.json`` or ``.parquet`` file.

    Returns:
        ``path`` as a ``Path``.

    Raises:
        TypeError: ``frame`` is not a DataFrame, or ``attrs`` hold a value JSON cannot store.
        ValueError: an unknown extension, a named index, or column names that are not distinct
            strings.
        ImportError: ``.parquet`` without pyarrow.
    """
    import pandas as pd

    if not isinstance(frame, pd.DataFrame):
        raise TypeError(f"save_frame writes a pandas DataFrame, got {type(frame).__name__}.")
    suffix, path = check_frame_path(path), Path(path)
    if any(name is not None for name in frame.index.names):
        raise ValueError(f"save_frame does not write the index, and this one is named {list(frame.index.names)}: "
                         "call frame.reset_index() first to keep it as columns.")
    names = list(frame.columns)
    if not all(isinstance(name, str) for name in names) or len(set(names)) != len(names):
        raise ValueError(f"save_frame needs distinct string column names, got {names}: rename the columns first.")
    columns = [_column(frame[name]) for name in names]
    as_json = {column["name"] for column in columns if column.pop("_json_in_csv", False)}
    document = {"columns": columns, "attrs": _stored(frame.attrs, exact=True)}
    if suffix == ".parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        plain = frame.copy(deep=False)  # pyarrow and pandas each store attrs as plain JSON
        plain.attrs = _stored(frame.attrs, exact=False)
        table = pa.Table.from_pandas(plain, preserve_index=False)
        metadata = {**(table.schema.metadata or {}), b"PANDAS_ATTRS": json.dumps(plain.attrs),
                    PARQUET_KEY: json.dumps(document)}
        pq.write_table(table.replace_schema_metadata(metadata), path)
    elif suffix == ".json":
        values = {name: [None if _missing(cell) else _stored(cell, exact=False, where=name) if isinstance(cell, tuple)
                         else cell for cell in frame[name].astype(object)] for name in names}
        document["records"] = [dict(zip(names, row)) for row in zip(*values.values())]
        try:
            text = json.dumps(document)
        except TypeError as err:
            raise TypeError(f"{path}: a column holds values JSON cannot store ({err}); write .parquet instead.") from None
        path.write_text(text)
    else:
        written = frame.copy(deep=False)
        for column in columns:
            if column["name"] in as_json:
                column["csv"] = "json"
                written[column["name"]] = pd.Series([None if _missing(cell) else json.dumps(_stored(cell, exact=False))
                                                     for cell in frame[column["name"]]], dtype=object, index=frame.index)
        written.to_csv(path, index=False)
        sidecar(path).write_text(json.dumps(document, indent=1))
    return path


def load_frame(path: str | Path) -> pd.DataFrame:
    """Read a frame ``save_frame`` wrote: values, dtypes and ``attrs`` as they were saved.

    Raises:
        ValueError: an unknown extension, or a JSON file (or CSV sidecar) that is not a
            ``save_frame`` document.
        FileNotFoundError: ``path`` does not exist.
        ImportError: ``.parquet`` without pyarrow.
    """
    import pandas as pd

    suffix, path = check_frame_path(path), Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"No frame at {path}.")
    if suffix == ".parquet":
        import pyarrow.parquet as pq

        frame = pd.read_parquet(path)
        stored = (pq.read_schema(path).metadata or {}).get(PARQUET_KEY)
        # parquet keeps most dtypes itself, but not an unordered categorical of numbers
        return frame if stored is None else _typed(frame, _document(json.loads(stored), path, ("columns", "attrs")))
    if suffix == ".json":
        document = _document(json.loads(path.read_text()), path, ("columns", "attrs", "records"))
        names = [column["name"] for column in document["columns"]]
        frame = pd.DataFrame([[row.get(name) for name in names] for row in document["records"]], columns=names)
        return _typed(frame, document)
    if not sidecar(path).is_file():
        return pd.read_csv(path, float_precision="round_trip")
    document = _document(json.loads(sidecar(path).read_text()), sidecar(path), ("columns", "attrs"))
    # categories are mapped back from their text; to_csv writes a missing value as an empty field,
    # so only that is missing ("NA" may be a word); to_csv writes floats as repr, which only the
    # round-trip parser is documented to read back bit for bit (the default is not)
    dtypes = {column["name"]: "str" if "categories" in column or column.get("csv") == "json" else column["dtype"]
              for column in document["columns"]}
    names = [column["name"] for column in document["columns"]]
    header = pd.read_csv(path, nrows=0).columns.tolist()
    if header != names:
        raise ValueError(f"{path} has the columns {header}, but its sidecar {sidecar(path)} describes {names}: "
                         "delete the stale sidecar.")
    try:
        frame = pd.read_csv(path, dtype=dtypes, keep_default_na=False, na_values=[""], float_precision="round_trip")
    except (ValueError, TypeError) as err:
        raise ValueError(f"{path} does not hold the values its sidecar {sidecar(path)} describes ({err}): delete the "
                         "stale sidecar, or write the frame again.") from None
    for column in document["columns"]:
        if column.get("csv") == "json":
            frame[column["name"]] = pd.Series([None if _missing(cell) else json.loads(cell)
                                               for cell in frame[column["name"]]], dtype=object)
    return _typed(frame, document)


def _missing(cell: Any) -> bool:
    """Whether a cell is missing (None, NaN, NA, NaT); a tuple, list or array never is."""
    import pandas as pd

    return not isinstance(cell, (tuple, list)) and getattr(cell, "ndim", 0) == 0 and bool(pd.isna(cell))


def _column(series: pd.Series) -> dict[str, Any]:
    """A column's name and dtype, with the categories of a categorical and the kind of container cells."""
    import pandas as pd

    if isinstance(series.dtype, pd.CategoricalDtype):
        return {"name": series.name, "dtype": "category", "ordered": bool(series.dtype.ordered),
                "categories": _stored(series.dtype.categories.tolist(), exact=False)}
    column: dict[str, Any] = {"name": series.name, "dtype": str(series.dtype)}
    if series.dtype == object or pd.api.types.is_string_dtype(series.dtype):
        present = [cell for cell in series if not _missing(cell)]
        kinds = {type(cell) for cell in present if isinstance(cell, (tuple, list))}
        if kinds:
            if len(kinds) > 1 or len(present) != sum(isinstance(cell, (tuple, list)) for cell in present):
                raise TypeError(f"Column {series.name!r} mixes tuples, lists and other values: a frame file keeps "
                                "one kind of container per column.")
            column["cells"] = "tuple" if kinds == {tuple} else "list"
        column["_json_in_csv"] = bool(kinds) or any(cell == "" for cell in present if isinstance(cell, str))
    return column


def _cell(value: Any, kind: str) -> Any:
    """A container cell read back (a list from JSON or CSV, an array from parquet) as a ``kind``."""
    items = value.tolist() if hasattr(value, "tolist") else list(value)
    return tuple(items) if kind == "tuple" else items


def _typed(frame: pd.DataFrame, document: dict) -> pd.DataFrame:
    """``frame`` with the dtypes and ``attrs`` its document records."""
    import pandas as pd

    for column in document["columns"]:
        name = column["name"]
        if "categories" in column:
            # a CSV holds the text of each category, JSON the category itself
            lookup = {str(category): category for category in column["categories"]}
            values = [lookup.get(value, value) if isinstance(value, str) else value for value in frame[name]]
            frame[name] = pd.Categorical(values, categories=column["categories"], ordered=column["ordered"])
        elif "cells" in column:
            frame[name] = pd.Series([None if _missing(cell) else _cell(cell, column["cells"]) for cell in frame[name]],
                                    dtype=object, index=frame.index)
        else:
            try:
                frame[name] = frame[name].astype(column["dtype"])
            except (ValueError, TypeError) as err:
                raise ValueError(f"Column {name!r} does not hold {column['dtype']} values as its description says "
                                 f"({err}): the file and its description disagree; write the frame again.") from None
    frame.attrs = _restored(document["attrs"])
    return frame


def _document(document: Any, path: Path, keys: tuple[str, ...]) -> dict:
    if not isinstance(document, dict) or not set(keys) <= set(document):
        raise ValueError(f"{path} is not a frame that psheads.save_frame wrote (it needs the keys {list(keys)}).")
    return document


def _stored(value: Any, exact: bool, where: str = "attrs") -> Any:
    """``value`` as JSON data; ``exact`` tags tuples and dicts with non-string keys so they come back."""
    if hasattr(value, "item") and callable(value.item) and getattr(value, "ndim", None) == 0:
        value = value.item()  # numpy scalars
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        items = [_stored(item, exact, f"{where}[{index}]") for index, item in enumerate(value)]
        return {_TUPLE: items} if exact and isinstance(value, tuple) else items
    if isinstance(value, dict):
        if all(isinstance(key, str) for key in value):
            return {key: _stored(item, exact, f"{where}[{key!r}]") for key, item in value.items()}
        if exact:
            return {_ITEMS: [[_stored(key, exact, where), _stored(item, exact, f"{where}[{key!r}]")]
                             for key, item in value.items()]}
        return {str(key): _stored(item, exact, f"{where}[{key!r}]") for key, item in value.items()}
    raise TypeError(f"{where} holds a {type(value).__name__}, which a frame file cannot store: keep only numbers, "
                    "strings, None, lists, tuples and dicts in attrs (convert it, e.g. with str()).")


def _restored(value: Any) -> Any:
    """Inverse of ``_stored(value, exact=True)``."""
    if isinstance(value, list):
        return [_restored(item) for item in value]
    if isinstance(value, dict):
        if value.keys() == {_TUPLE}:
            return tuple(_restored(item) for item in value[_TUPLE])
        if value.keys() == {_ITEMS}:
            return {_restored(key): _restored(item) for key, item in value[_ITEMS]}
        return {key: _restored(item) for key, item in value.items()}
    return value
