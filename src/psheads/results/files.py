"""Result frames on disk, provenance included: ``save_frame`` and ``load_frame``.

The extension picks the format, and every format keeps the frame's ``attrs`` (config, versions,
…) and its column dtypes, ordered categoricals included:

* ``.parquet`` (needs pyarrow): dtypes natively; ``attrs`` in the file's metadata, both as
  pandas writes them (``pd.read_parquet`` restores them, tuples as lists) and exactly (key
  ``psheads``).
* ``.json``: one document ``{"columns": [...], "attrs": {...}, "records": [...]}``, one record
  per row; missing values are ``null``.
* ``.csv``: the table as ``DataFrame.to_csv`` writes it (lines end in ``\\r\\n`` where a text holds
  a ``\\r``, so that it is quoted), and a sidecar ``<file>.attrs.json`` holding ``{"rows": N,
  "sha256": ..., "columns": [...], "attrs": {...}}``, the hash of the CSV's bytes included.
  ``load_frame`` refuses a CSV whose bytes no longer match it (rewritten after ``save_frame``), and
  warns for a sidecar an older psheads wrote without one, whose attrs it cannot check. Without the
  sidecar it reads the CSV as pandas does, with empty ``attrs``.

``columns`` lists each column's ``name`` and ``dtype`` (plus ``categories`` and ``ordered`` for a
categorical, and ``cells``, ``"tuple"`` or ``"list"``, for a column of tuples or lists such as
``positions_i``, which every format gives back as such). In a CSV, a column of tuples or lists, or
of strings with an empty one (which CSV cannot tell from a missing value), holds each cell as JSON
text (``"csv": "json"``); missing cells stay empty. An object column of numbers, booleans and
strings that are not all strings (``[None, 3, 5]``, ``[2**70, "x"]``) holds JSON text in a CSV and
in parquet too (``"parquet": "json"``), so each cell comes back with its own type, big ints
included, and a missing one as None; numpy scalars come back as Python's. An object column holding
anything else (a set, a Decimal, ...) is refused by name, except in parquet where pyarrow gives it back as it was.
Times (``datetime64`` of any unit, with or without a time zone) and durations (``timedelta64``) come
back exactly from every format: a CSV and JSON hold them as text (ISO 8601, a time zone's in UTC,
the zone in the column's dtype; durations as pandas writes them), checked when saved, so a value
the text would not give back (a duration beyond about 292 years) is refused then, by column and
row; parquet holds them natively. ``float16`` columns come back bit for bit. A column ``load_frame``
could not read back is refused when saved, naming it: a dtype pandas cannot name (a time zone
given as a ``dateutil`` object), an extension dtype read_csv cannot parse in a CSV (intervals,
sparse columns), categories other than numbers and strings.
In ``attrs`` a tuple is stored as ``{"__tuple__": [...]}`` and a dict with non-string keys as
``{"__items__": [[key, value], ...]}``, so both come back as they were; a dict whose only key is
``"__tuple__"`` or ``"__items__"`` is stored as its pairs too, so every dict comes back as a dict.

Every file is written whole or not at all (``psheads.interface.atomic``): to a temporary file in
the same folder, renamed over ``path`` when complete (a CSV and its sidecar both written before
either is renamed), so Ctrl-C or an error mid-write leaves the old file as it was. A file
``load_frame`` cannot parse raises a ``ValueError`` that names it and says what to do.

pandas and pyarrow are imported inside the functions: the command line reads ``FORMATS`` without
loading them.
"""

from __future__ import annotations

import hashlib
import io
import json
import warnings
from pathlib import Path
from typing import TYPE_CHECKING, Any

from psheads.interface.atomic import replacing, write_atomic

if TYPE_CHECKING:
    import numpy as np
    import pandas as pd

FORMATS = (".csv", ".json", ".parquet")
"""Extensions ``save_frame`` writes and ``load_frame`` reads."""

PARQUET_KEY = b"psheads"
"""Parquet metadata key of the exact provenance document."""

_TUPLE, _ITEMS = "__tuple__", "__items__"
_SCALARS = (bool, int, float, str)
"""What an object column may hold besides tuples and lists, each cell as JSON gives it back."""


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
    (``frame.reset_index()`` first). The file is replaced whole or not at all: an interrupted or
    failed save leaves the old one as it was.

    Args:
        frame: the frame; column names must be distinct strings.
        path: a ``.csv`` (plus ``<path>.attrs.json``), ``.json`` or ``.parquet`` file.

    Returns:
        ``path`` as a ``Path``.

    Raises:
        TypeError: ``frame`` is not a DataFrame, ``attrs`` hold a value JSON cannot store, or a
            column holds values the format cannot give back (the message names it).
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
    for _, series in frame.items():
        _check_readable(series, suffix)
    columns = [_column(frame[name]) for name in names]
    as_text = {column["name"]: column.pop("_text", ()) for column in columns}
    odd = {column["name"]: column.pop("_odd") for column in columns if "_odd" in column}
    if odd and suffix != ".parquet":
        name, cell = next(iter(odd.items()))
        raise TypeError(f"Column {name!r} holds a {type(cell).__name__} ({cell!r:.60}), which a {suffix} file cannot "
                        f"give back: keep numbers, strings, None, tuples and lists in an object column, or convert it "
                        f"first (e.g. frame[{name!r}].astype(str)).")
    document = {"columns": columns, "attrs": to_json_data(frame.attrs)}
    if suffix == ".parquet":
        import pyarrow as pa
        import pyarrow.parquet as pq

        plain = frame.copy(deep=False)  # pyarrow and pandas each store attrs as plain JSON
        plain.attrs = to_json_data(frame.attrs, exact=False)
        for column in columns:
            if ".parquet" in as_text[column["name"]]:
                column["parquet"] = "json"
                plain[column["name"]] = _json_text(frame[column["name"]])
        for name, cell in odd.items():
            if not _arrow_gives_back(plain[name]):
                raise TypeError(f"Column {name!r} holds a {type(cell).__name__} ({cell!r:.60}), which parquet does not "
                                f"give back as it was: convert the column first (e.g. frame[{name!r}].astype(str)).")
        try:
            table = pa.Table.from_pandas(plain, preserve_index=False)
        except (pa.ArrowException, OverflowError, TypeError, ValueError) as err:
            name = next((name for name in names if _through_arrow(plain[name]) is None), None)
            raise TypeError(f"{path}: column {name!r} holds values parquet cannot store ({err}): convert it first, "
                            "or write .json.") from None
        metadata = {**(table.schema.metadata or {}), b"PANDAS_ATTRS": json.dumps(plain.attrs),
                    PARQUET_KEY: json.dumps(document)}
        with replacing(path) as temporary:
            pq.write_table(table.replace_schema_metadata(metadata), temporary)
    elif suffix == ".json":
        values = {name: _time_text(frame[name], suffix).tolist() if _is_time(frame[name].dtype) else
                  [None if _missing(cell) else to_json_data(cell, exact=False, where=f"column {name!r}")
                   if isinstance(cell, (tuple, list)) else _plain(cell) for cell in frame[name].astype(object)]
                  for name in names}
        document["records"] = [dict(zip(names, row, strict=True)) for row in zip(*values.values(), strict=True)]
        try:
            text = json.dumps(document)
        except TypeError as err:
            name = next((name for name in names if not _dumps(values[name])), None)
            raise TypeError(f"{path}: column {name!r} holds values JSON cannot store ({err}); write .parquet "
                            "instead.") from None
        write_atomic(path, text)
    else:
        written = frame.copy(deep=False)
        for column in columns:
            if ".csv" in as_text[column["name"]]:
                column["csv"] = "json"
                written[column["name"]] = _json_text(frame[column["name"]])
            elif _is_time(frame[column["name"]].dtype):
                written[column["name"]] = _time_text(frame[column["name"]], suffix)
        # csv quotes a field holding a character of the line ending, and pandas reads a lone \r as one
        data = written.to_csv(index=False, lineterminator="\r\n" if _holds_cr(written) else None).encode()
        document = {"rows": len(frame), "sha256": hashlib.sha256(data).hexdigest(), **document}
        # both written before either is renamed; the table first, so that a save cut short between the two
        # renames leaves the new table (refused with the old sidecar, by its hash) rather than the old one
        with replacing(sidecar(path)) as described, replacing(path) as table_file:
            table_file.write_bytes(data)
            described.write_text(json.dumps(document, indent=1))
    return path


def load_frame(path: str | Path) -> pd.DataFrame:
    """Read a frame ``save_frame`` wrote: values, dtypes and ``attrs`` as they were saved.

    A CSV is read with its sidecar, which must describe it: a CSV rewritten after ``save_frame``
    (another frame's ``to_csv``, say) is refused. A sidecar without a content hash (written by an
    older psheads) is trusted with a warning; a CSV without a sidecar is read as pandas reads it.

    Raises:
        ValueError: an unknown extension; a JSON file (or CSV sidecar) that is not a ``save_frame``
            document; a CSV that changed after ``save_frame`` wrote it; a categorical cell that is
            not one of its column's categories (edited by hand, say); a file that cannot be parsed
            (cut short, damaged, or being written in place by another program). The message names
            the file.
        FileNotFoundError: ``path`` does not exist.
        ImportError: ``.parquet`` without pyarrow.
    """
    import pandas as pd

    suffix, path = check_frame_path(path), Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"No frame at {path}.")
    if suffix == ".parquet":
        return _read_parquet(path)
    if suffix == ".json":
        document = _parsed(path.read_bytes(), str(path), ("columns", "attrs", "records"), "write the frame again")
        names = [column["name"] for column in document["columns"]]
        frame = pd.DataFrame([[row.get(name) for name in names] for row in document["records"]], columns=names)
        for column in document["columns"]:
            if column["dtype"] == "object":  # as stored: [None, 3] is not [nan, 3.0]
                frame[column["name"]] = pd.Series([row.get(column["name"]) for row in document["records"]],
                                                  dtype=object)
        return _typed(frame, document, str(path))
    if not sidecar(path).is_file():
        try:
            return pd.read_csv(path, **_exact_floats())
        except ValueError as err:  # EmptyDataError, ParserError, UnicodeDecodeError
            raise ValueError(f"{path} is not a CSV file pandas can read ({err}): {_DAMAGED}.") from None
    return _typed(*_read_csv(path), str(path))


_DAMAGED = ("it was cut short or damaged (a copy or a write that did not finish), or another program is writing it "
            "in place: read it again once that is done, or write the frame again with save_frame")
"""What to do about a frame file that cannot be parsed."""


def _read_parquet(path: Path) -> pd.DataFrame:
    """The frame ``save_frame`` wrote at ``path`` as parquet (a plain parquet file as pandas reads it)."""
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    with path.open("rb") as handle:  # opened once: the table and its metadata come from one file
        try:
            frame = pd.read_parquet(handle)
            handle.seek(0)
            stored = (pq.read_schema(handle).metadata or {}).get(PARQUET_KEY)
        except (pa.ArrowException, ValueError) as err:
            raise ValueError(f"{path} is not a parquet file psheads can read ({err}): {_DAMAGED}.") from None
    if stored is None:
        return frame
    # parquet keeps most dtypes itself, but not an unordered categorical of numbers
    where = f"{path}'s psheads metadata"
    document = _parsed(stored, where, ("columns", "attrs"), "write the frame again")
    return _typed(_from_json_text(frame, document, "parquet"), document, where)


def _read_csv(path: Path) -> tuple[pd.DataFrame, dict]:
    """The CSV ``save_frame`` wrote at ``path``, checked against its sidecar (not yet typed), and the sidecar."""
    import pandas as pd

    document = _parsed(sidecar(path).read_bytes(), str(sidecar(path)), ("columns", "attrs"),
                       "delete it to read the CSV as pandas does, or write the frame again")
    data = path.read_bytes()  # hashed and parsed, so that both see the same bytes
    if "sha256" not in document:
        warnings.warn(f"{sidecar(path)} records no content hash (an older psheads wrote it), so its attrs cannot be "
                      f"checked against {path}: if the CSV was rewritten since, delete the sidecar; otherwise save "
                      "the frame again to record one.", UserWarning, stacklevel=3)
    elif hashlib.sha256(data).hexdigest() != document["sha256"]:
        raise ValueError(f"{path} changed after save_frame wrote it ({document.get('rows')} rows then), so its sidecar "
                         f"describes another table: delete {sidecar(path)} to read the CSV as pandas does, or save "
                         "the new frame with save_frame (if save_frame is writing it now, read it again once it is "
                         "done).")
    # categories and times are read back from their text; to_csv writes a missing value as an empty field,
    # so only that is missing ("NA" may be a word)
    dtypes = {column["name"]: _csv_dtype(column) for column in document["columns"]}
    names = [column["name"] for column in document["columns"]]
    try:
        header = pd.read_csv(io.BytesIO(data), nrows=0).columns.tolist()
    except ValueError as err:  # EmptyDataError, ParserError, UnicodeDecodeError
        raise ValueError(f"{path} is not a CSV file pandas can read ({err}): {_DAMAGED}.") from None
    if header != names:
        raise ValueError(f"{path} has the columns {header}, but its sidecar {sidecar(path)} describes {names}: "
                         "delete the stale sidecar.")
    try:
        frame = pd.read_csv(io.BytesIO(data), dtype=dtypes, keep_default_na=False, na_values=[""], **_exact_floats())
    except (ValueError, TypeError) as err:
        if "sha256" in document:  # the file is what save_frame wrote: this pandas reads it otherwise
            raise ValueError(f"{path} is the file save_frame wrote, but pandas {pd.__version__} cannot read it back as "
                             f"its sidecar describes ({err}): write the frame as .json or .parquet.") from None
        raise ValueError(f"{path} does not hold the values its sidecar {sidecar(path)} describes ({err}): delete the "
                         "stale sidecar, or write the frame again.") from None
    if "rows" in document and len(frame) != document["rows"]:
        raise ValueError(f"{path} reads back as {len(frame)} rows, but save_frame wrote {document['rows']}: pandas "
                         f"{pd.__version__} parses it otherwise; write the frame as .json or .parquet.")
    return _from_json_text(frame, document, "csv"), document


def _exact_floats() -> dict[str, Any]:
    """``read_csv``'s arguments that read back the floats ``to_csv`` wrote (their repr) bit for bit.

    Before pandas 3.1 only the round-trip parser is documented to (the default is not); 3.1 reads
    every float with one exact parser and deprecates the argument.
    """
    import pandas as pd

    major, minor = (int(part) for part in pd.__version__.split(".")[:2])
    return {"float_precision": "round_trip"} if (major, minor) < (3, 1) else {}


def _holds_cr(frame: pd.DataFrame) -> bool:
    """Whether a column name, a category or a text cell of ``frame`` holds a carriage return."""
    import pandas as pd

    texts: list[Any] = list(frame.columns)
    for name in frame.columns:
        series = frame[name]
        if isinstance(series.dtype, pd.CategoricalDtype):
            texts += [str(category) for category in series.dtype.categories]
        elif series.dtype == object or pd.api.types.is_string_dtype(series.dtype):
            texts += series.tolist()
    return any(isinstance(text, str) and "\r" in text for text in texts)


def _check_readable(series: pd.Series, suffix: str) -> None:
    """Refuse, by its name, a column whose dtype ``load_frame`` could not give back from a ``suffix`` file."""
    import numpy as np
    import pandas as pd

    dtype, name = series.dtype, series.name
    try:
        pd.api.types.pandas_dtype(str(dtype))
    except TypeError:
        raise TypeError(f"Column {name!r} has the dtype {dtype}, which pandas cannot read back from its name: convert "
                        "it first (times: give their zone by its name, e.g. "
                        f"frame[{name!r}].dt.tz_convert('Europe/Paris')).") from None
    if suffix != ".csv" or not isinstance(dtype, pd.api.extensions.ExtensionDtype) or _is_time(dtype) \
            or isinstance(dtype, pd.CategoricalDtype):
        return
    array = dtype.construct_array_type()
    try:  # what read_csv calls to parse a column of an extension dtype (pandas' extension interface; no stub)
        array._from_sequence_of_strings(np.array([], dtype=object), dtype=dtype)  # type: ignore[attr-defined]
    except (NotImplementedError, TypeError, ValueError):
        raise TypeError(f"Column {name!r} has the dtype {dtype}, which pandas cannot read from a CSV: write .parquet "
                        f"or .json, or convert it first (e.g. frame[{name!r}].astype(str)).") from None


def _is_time(dtype: Any) -> bool:
    """Whether ``dtype`` holds times or durations of numpy's kinds (a time zone's included)."""
    import numpy as np
    import pandas as pd

    return isinstance(dtype, pd.DatetimeTZDtype) or (isinstance(dtype, np.dtype) and dtype.kind in "mM")


def _time_text(series: pd.Series, suffix: str) -> pd.Series:
    """Each time of ``series`` as text (ISO 8601, a time zone's in UTC; durations as pandas writes them), a
    missing one as None, checked to read back exactly.

    Raises:
        TypeError: a time its text does not give back (one pandas cannot parse), named by column and row.
    """
    import numpy as np
    import pandas as pd

    utc = series.dt.tz_convert("UTC") if isinstance(series.dtype, pd.DatetimeTZDtype) else series
    text = pd.Series([None if _missing(cell) else cell.isoformat() if isinstance(cell, pd.Timestamp) else str(cell)
                      for cell in utc], dtype=object, index=series.index)
    same = _read_back(text, series)
    if same is None:  # a time pandas cannot parse: find it
        same = np.array([_read_back(text.iloc[[row]], series.iloc[[row]]) is not None for row in range(len(text))])
    if not same.all():
        row = int(np.argmin(same))
        raise TypeError(f"Column {series.name!r} holds {series.iloc[row]} (row {row}, counting from 0), which a "
                        f"{suffix} file cannot give back exactly as text: write .parquet, which keeps times as they "
                        "are.")
    return text


def _read_back(text: pd.Series, series: pd.Series) -> np.ndarray | None:
    """Whether each time of ``series`` reads back from ``text``; None where one cannot be parsed."""
    try:
        return (_times(text, series.dtype).eq(series) | series.isna()).to_numpy(dtype=bool)
    except (ValueError, TypeError, OverflowError):  # OutOfBoundsDatetime and OutOfBoundsTimedelta are ValueErrors
        return None


def _times(values: pd.Series, dtype: Any) -> pd.Series:
    """Times (or durations) of ``dtype`` read back from the text ``_time_text`` wrote (missing: NaT)."""
    import pandas as pd

    text = values.astype(object).where(values.notna(), None)
    if dtype.kind == "m":
        return pd.to_timedelta(text).astype(dtype)
    zone = getattr(dtype, "tz", None)
    times = pd.to_datetime(text, format="ISO8601", utc=zone is not None)
    return (times if zone is None else times.dt.tz_convert(zone)).astype(dtype)


def _csv_dtype(column: dict) -> str:
    """The dtype ``read_csv`` reads a column as, before ``_typed`` gives it its own."""
    import pandas as pd

    try:
        time = _is_time(pd.api.types.pandas_dtype(column["dtype"]))
    except TypeError:  # read_csv refuses it, and the error names the file
        time = False
    if "categories" in column or column.get("csv") == "json" or time:
        return "str"
    return "float64" if column["dtype"] == "float16" else column["dtype"]  # read_csv has no float16 parser


def _json_text(series: pd.Series) -> pd.Series:
    """Each cell of ``series`` as JSON text (tuples as lists), a missing one as None."""
    import pandas as pd

    where = f"column {series.name!r}"
    return pd.Series([None if _missing(cell) else json.dumps(to_json_data(cell, exact=False, where=where))
                      for cell in series], dtype=object, index=series.index)


def _from_json_text(frame: pd.DataFrame, document: dict, fmt: str) -> pd.DataFrame:
    """``frame`` with the columns its document says ``fmt`` holds as JSON text read back."""
    import pandas as pd

    for column in document["columns"]:
        if column.get(fmt) == "json":
            frame[column["name"]] = pd.Series([None if _missing(cell) else json.loads(cell)
                                               for cell in frame[column["name"]]], dtype=object, index=frame.index)
    return frame


def _through_arrow(series: pd.Series) -> pd.Series | None:
    """``series`` as pyarrow gives it back, or None where pyarrow cannot store it."""
    import pyarrow as pa

    try:
        return pa.Array.from_pandas(series).to_pandas()
    except (pa.ArrowException, OverflowError, TypeError, ValueError):
        return None


def _dumps(values: list) -> bool:
    """Whether JSON can store ``values``."""
    try:
        json.dumps(values)
    except TypeError:
        return False
    return True


def _arrow_gives_back(series: pd.Series) -> bool:
    """Whether pyarrow gives back every cell of an object column with its type (a set comes back as an array)."""
    back = _through_arrow(series)
    if back is None:
        return False
    try:
        return all(_missing(cell) if _missing(was) else type(cell) is type(was) and bool(cell == was)
                   for was, cell in zip(series, back, strict=True))
    except (TypeError, ValueError):  # cells whose == is not a bool
        return False


def _missing(cell: Any) -> bool:
    """Whether a cell is missing (None, NaN, NA, NaT); a tuple, list or array never is."""
    import pandas as pd

    return not isinstance(cell, (tuple, list)) and getattr(cell, "ndim", 0) == 0 and bool(pd.isna(cell))


def _column(series: pd.Series) -> dict[str, Any]:
    """A column's name and dtype, with the categories of a categorical and the kind of container cells."""
    import pandas as pd

    if isinstance(series.dtype, pd.CategoricalDtype):
        categories = [_plain(category) for category in series.dtype.categories]
        odd = next((category for category in categories if not isinstance(category, _SCALARS)), None)
        if odd is not None:
            raise TypeError(f"Column {series.name!r} has categories of type {type(odd).__name__} ({odd!r:.60}), which "
                            "a frame file does not give back: keep numbers and strings as categories, or convert "
                            f"them first (e.g. frame[{series.name!r}].cat.rename_categories(str)).")
        return {"name": series.name, "dtype": "category", "ordered": bool(series.dtype.ordered),
                "categories": categories}
    column: dict[str, Any] = {"name": series.name, "dtype": str(series.dtype)}
    if series.dtype == object or pd.api.types.is_string_dtype(series.dtype):
        present = [cell for cell in series if not _missing(cell)]
        kinds = {type(cell) for cell in present if isinstance(cell, (tuple, list))}
        if kinds:
            if len(kinds) > 1 or len(present) != sum(isinstance(cell, (tuple, list)) for cell in present):
                raise TypeError(f"Column {series.name!r} mixes tuples, lists and other values: a frame file keeps "
                                "one kind of container per column.")
            column["cells"] = "tuple" if kinds == {tuple} else "list"
            column["_text"] = (".csv",)
        elif any(not isinstance(cell, str) for cell in present):
            odd = next((cell for cell in present if not isinstance(_plain(cell), _SCALARS)), None)
            if odd is None:
                column["_text"] = (".csv", ".parquet")  # text would turn 3 into '3', pandas' inference into 3.0
            else:
                column["_odd"] = odd
        elif any(cell == "" for cell in present):
            column["_text"] = (".csv",)
    return column


def _cell(value: Any, kind: str) -> Any:
    """A container cell read back (a list from JSON or CSV, an array from parquet) as a ``kind``."""
    items = value.tolist() if hasattr(value, "tolist") else list(value)
    return tuple(items) if kind == "tuple" else items


def _typed(frame: pd.DataFrame, document: dict, where: str) -> pd.DataFrame:
    """``frame`` with the dtypes and ``attrs`` its document records (read from ``where``, which errors name)."""
    import pandas as pd

    for column in document["columns"]:
        name = column["name"]
        if "categories" in column:
            # a CSV holds the text of each category, JSON the category itself
            lookup = {str(category): category for category in column["categories"]}
            values = [lookup.get(value, value) if isinstance(value, str) else value for value in frame[name]]
            _check_categories(values, column, where)
            frame[name] = pd.Categorical(values, categories=column["categories"], ordered=column["ordered"])
        elif "cells" in column:
            frame[name] = pd.Series([None if _missing(cell) else _cell(cell, column["cells"]) for cell in frame[name]],
                                    dtype=object, index=frame.index)
        else:
            try:
                dtype = pd.api.types.pandas_dtype(column["dtype"])
                stored_as_text = _is_time(dtype) and not _is_time(frame[name].dtype)
                frame[name] = _times(frame[name], dtype) if stored_as_text else frame[name].astype(dtype)
            except (ValueError, TypeError) as err:
                raise ValueError(f"{where}: column {name!r} does not hold {column['dtype']} values as its "
                                 f"description says ({err}): the file and its description disagree; write the frame "
                                 "again.") from None
    try:
        frame.attrs = from_json_data(document["attrs"])
    except (TypeError, ValueError) as err:  # a marker holding something else: not what save_frame writes
        raise ValueError(f"{where}: the attrs are not as save_frame writes them ({err}); write the frame "
                         "again.") from None
    return frame


def _check_categories(values: list, column: dict, where: str) -> None:
    """Refuse a value of a categorical column (read from ``where``) that is not one of its categories."""
    known = set(column["categories"])
    unknown = [(row, value) for row, value in enumerate(values) if not _missing(value) and value not in known]
    if unknown:
        (row, value), others = unknown[0], len(unknown) - 1
        more = f"; {others} more rows hold values that are not either" if others else ""
        raise ValueError(f"{where}: column {column['name']!r} holds {value!r} in row {row} (counting from 0), which "
                         f"is not one of its categories {column['categories']}{more}: correct the cells, or write the "
                         "frame again.")


def _parsed(text: bytes, where: str, keys: tuple[str, ...], fix: str) -> dict:
    """The ``save_frame`` document in ``text`` (read from ``where``), with at least ``keys``; ``fix``: what to do
    if not."""
    try:
        document = json.loads(text)
    except ValueError as err:  # JSONDecodeError, UnicodeDecodeError
        raise ValueError(f"{where} is not valid JSON ({err}): save_frame did not write it, or it was cut short; "
                         f"{fix}.") from None
    if not isinstance(document, dict) or not set(keys) <= set(document):
        raise ValueError(f"{where} is not a frame that psheads.save_frame wrote (it needs the keys {list(keys)}).")
    problem = _misshapen(document)
    if problem:
        raise ValueError(f"{where} does not describe a frame as psheads.save_frame writes it ({problem}): {fix}.")
    return document


def _misshapen(document: dict) -> str | None:
    """What is wrong with the shape of a frame document (its ``columns`` and ``records``), or None."""
    columns = document["columns"]
    if not isinstance(columns, list) or not all(isinstance(column, dict) and isinstance(column.get("name"), str)
                                                and isinstance(column.get("dtype"), str) for column in columns):
        return "'columns' must list objects, each with a 'name' and a 'dtype'"
    for column in columns:
        if "categories" in column and not (isinstance(column["categories"], list)
                                           and all(isinstance(item, _SCALARS) for item in column["categories"])
                                           and isinstance(column.get("ordered"), bool)):
            return f"column {column['name']!r} needs a list of 'categories' (numbers or strings) and an 'ordered' flag"
        if column.get("cells", "tuple") not in ("tuple", "list"):
            return f"column {column['name']!r} has 'cells' {column['cells']!r}, not 'tuple' or 'list'"
    records = document.get("records", [])
    if not isinstance(records, list) or not all(isinstance(row, dict) for row in records):
        return "'records' must be a list of objects, one per row"
    return None


def to_json_data(value: Any, exact: bool = True, where: str = "attrs") -> Any:
    """``value`` as JSON data (``json.dumps`` writes it); numpy scalars as the Python values they hold.

    Args:
        value: numbers, strings, None, lists, tuples and dicts, nested.
        exact: store a tuple as ``{"__tuple__": [...]}`` and a dict with keys that are not all
            strings as ``{"__items__": [[key, value], ...]}``, so that ``from_json_data`` gives them
            back; a dict whose only key is one of these two is stored as its pairs too, so every dict
            comes back as it was. Otherwise tuples become lists and keys strings (plain JSON).
        where: what ``value`` is, for the error message.

    Raises:
        TypeError: ``value`` holds anything else (the message names where).
    """
    value = _plain(value)
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, (list, tuple)):
        items = [to_json_data(item, exact, f"{where}[{index}]") for index, item in enumerate(value)]
        return {_TUPLE: items} if exact and isinstance(value, tuple) else items
    if isinstance(value, dict):
        if all(isinstance(key, str) for key in value) and not (exact and set(value) in ({_TUPLE}, {_ITEMS})):
            return {key: to_json_data(item, exact, f"{where}[{key!r}]") for key, item in value.items()}
        if exact:
            return {_ITEMS: [[to_json_data(key, exact, where), to_json_data(item, exact, f"{where}[{key!r}]")]
                             for key, item in value.items()]}
        return {str(key): to_json_data(item, exact, f"{where}[{key!r}]") for key, item in value.items()}
    raise TypeError(f"{where} holds a {type(value).__name__}, which psheads cannot store as JSON: keep only numbers, "
                    f"strings, None, lists, tuples and dicts in {where.partition('[')[0]} (convert it, e.g. with "
                    "str()).")


def _plain(value: Any) -> Any:
    """A numpy scalar as the Python value it holds; anything else as it is."""
    if hasattr(value, "item") and callable(value.item) and getattr(value, "ndim", None) == 0:
        return value.item()
    return value


def from_json_data(value: Any) -> Any:
    """Inverse of ``to_json_data(value, exact=True)``: tuples and dicts with other keys as they were."""
    if isinstance(value, list):
        return [from_json_data(item) for item in value]
    if isinstance(value, dict):
        if value.keys() == {_TUPLE}:
            return tuple(from_json_data(item) for item in value[_TUPLE])
        if value.keys() == {_ITEMS}:
            return {from_json_data(key): from_json_data(item) for key, item in value[_ITEMS]}
        return {key: from_json_data(item) for key, item in value.items()}
    return value
