"""``save_frame`` / ``load_frame``: every format keeps values, dtypes and attrs."""

from __future__ import annotations

import datetime
import json
import re
import sys
import warnings
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
import torch

import psheads
from psheads.results.files import FORMATS, sidecar

LABELS = ["positional", "symbolic", "uniform", "mixed", "non-finite"]


def result_frame() -> pd.DataFrame:
    """A score-like frame with every dtype the library's frames use, and nested provenance."""
    frame = pd.DataFrame({
        "layer": np.array([0, 0, 1], dtype=np.int64),
        "head": [0, 1, 0],
        "positional": [0.123456789012345678, np.nan, np.inf],
        "hops": ["1", "NA", None],  # "NA" is a word, None is missing
        "kept": [True, False, True],
        "label": pd.Categorical(["mixed", "positional", None], categories=LABELS, ordered=True),
        "plane": pd.Categorical([3, 1, 3]),
        "n_prompts": pd.array([4, None, 2], dtype="Int64"),
    })
    frame.attrs = {
        "config": {"method": "swap", "layers": (0, 1), "prompt_options": {"swappable": {"slice": [None, -1, None]}}},
        "lengths": [17, (33, "x")],
        "by_plane": {3: "fast", (1, 2): [np.int64(7)]},
        "tau": np.float64(1e-4),
        "versions": {"psheads": psheads.__version__},
        "note": None,
    }
    return frame


EXPECTED_ATTRS = {
    "config": {"method": "swap", "layers": (0, 1), "prompt_options": {"swappable": {"slice": [None, -1, None]}}},
    "lengths": [17, (33, "x")],
    "by_plane": {3: "fast", (1, 2): [7]},
    "tau": 1e-4,
    "versions": {"psheads": psheads.__version__},
    "note": None,
}


@pytest.mark.parametrize("suffix", FORMATS)
def test_every_format_round_trips_values_dtypes_and_attrs(tmp_path, suffix) -> None:
    frame = result_frame()
    path = psheads.save_frame(frame, tmp_path / f"frame{suffix}")
    loaded = psheads.load_frame(path)
    pd.testing.assert_frame_equal(loaded, frame, check_exact=True)
    assert loaded.attrs == EXPECTED_ATTRS
    assert isinstance(loaded.attrs["config"]["layers"], tuple)
    assert loaded["label"].cat.ordered and list(loaded["label"].cat.categories) == LABELS
    assert loaded["hops"].tolist()[:2] == ["1", "NA"] and pd.isna(loaded["hops"].iloc[2])
    assert frame.attrs["tau"].__class__ is np.float64  # the caller's frame is untouched


def test_each_format_is_readable_without_psheads(tmp_path) -> None:
    frame = result_frame()
    psheads.save_frame(frame, tmp_path / "f.parquet")
    assert pd.read_parquet(tmp_path / "f.parquet").attrs["config"]["layers"] == [0, 1]  # plain JSON: lists
    psheads.save_frame(frame, tmp_path / "f.json")
    document = json.loads((tmp_path / "f.json").read_text())
    assert [column["name"] for column in document["columns"]] == list(frame.columns)
    assert document["records"][1]["positional"] is None and document["records"][2]["hops"] is None
    assert document["columns"][5] == {"name": "label", "dtype": "category", "ordered": True, "categories": LABELS}
    psheads.save_frame(frame, tmp_path / "f.csv")
    assert pd.read_csv(tmp_path / "f.csv")["layer"].tolist() == [0, 0, 1]
    assert json.loads(sidecar(tmp_path / "f.csv").read_text())["attrs"]["config"]["layers"] == {"__tuple__": [0, 1]}


def test_a_csv_without_its_sidecar_reads_as_pandas_does(tmp_path) -> None:
    path = psheads.save_frame(result_frame(), tmp_path / "f.csv")
    sidecar(path).unlink()
    loaded = psheads.load_frame(path)
    assert loaded.attrs == {} and loaded["label"].dtype != "category" and len(loaded) == 3


def without_hash(path) -> None:
    """Make the sidecar of ``path`` one that an older psheads wrote, without rows and content hash."""
    document = json.loads(sidecar(path).read_text())
    del document["sha256"], document["rows"]
    sidecar(path).write_text(json.dumps(document))


def test_a_stale_sidecar_is_refused(tmp_path) -> None:
    path = psheads.save_frame(result_frame(), tmp_path / "f.csv")
    result_frame().drop(columns="kept").to_csv(path, index=False)
    with pytest.raises(ValueError, match="changed after save_frame wrote it"):
        psheads.load_frame(path)
    without_hash(path)
    with pytest.warns(UserWarning, match="records no content hash"), \
            pytest.raises(ValueError, match="delete the stale sidecar"):
        psheads.load_frame(path)


def test_an_unnamed_index_is_dropped_and_a_named_one_refused(tmp_path) -> None:
    frame = result_frame().iloc[[2, 0]]
    loaded = psheads.load_frame(psheads.save_frame(frame, tmp_path / "f.json"))
    assert loaded.index.tolist() == [0, 1] and loaded["layer"].tolist() == [1, 0]
    with pytest.raises(ValueError, match="reset_index"):
        psheads.save_frame(frame.set_index("layer"), tmp_path / "g.json")


@pytest.mark.parametrize("name", ["frame.txt", "frame.xlsx", "frame"])
def test_bad_extensions_are_refused_before_anything_is_written(tmp_path, name) -> None:
    with pytest.raises(ValueError, match=r"use one of \.csv, \.json, \.parquet"):
        psheads.save_frame(result_frame(), tmp_path / name)
    with pytest.raises(ValueError, match=r"use one of"):
        psheads.load_frame(tmp_path / name)
    assert list(tmp_path.iterdir()) == []


def test_bad_frames_and_files_are_refused(tmp_path, monkeypatch) -> None:
    with pytest.raises(TypeError, match="pandas DataFrame"):
        psheads.save_frame({"a": [1]}, tmp_path / "f.csv")
    with pytest.raises(ValueError, match="distinct string column names"):
        psheads.save_frame(pd.DataFrame([[1, 2]], columns=["a", "a"]), tmp_path / "f.csv")
    unstorable = pd.DataFrame({"a": [1]})
    unstorable.attrs["path"] = tmp_path
    with pytest.raises(TypeError, match=r"attrs\[.path.\] holds a \w*Path"):
        psheads.save_frame(unstorable, tmp_path / "f.json")
    with pytest.raises(FileNotFoundError, match="No frame at"):
        psheads.load_frame(tmp_path / "missing.json")
    (tmp_path / "other.json").write_text("[1, 2]")
    with pytest.raises(ValueError, match="not a frame that psheads.save_frame wrote"):
        psheads.load_frame(tmp_path / "other.json")
    monkeypatch.setitem(sys.modules, "pyarrow", None)  # as if pyarrow were not installed
    with pytest.raises(ImportError, match=r"parquet needs pyarrow.*\.csv or \.json"):
        psheads.save_frame(pd.DataFrame({"a": [1]}), tmp_path / "f.parquet")


@pytest.mark.parametrize("suffix", FORMATS)
def test_tuple_cells_and_empty_strings_come_back_as_they_were(tmp_path, suffix, model_factory) -> None:
    """A CSV used to give positions_i back as the string "(0,)" and an empty string as missing; JSON
    and parquet gave tuples back as lists and arrays."""
    swaps = psheads.swap_attention(model_factory("llama"), torch.arange(1, 9), layer=0, head=0)
    assert isinstance(swaps["positions_i"].iloc[0], tuple)
    loaded = psheads.load_frame(psheads.save_frame(swaps, tmp_path / f"swaps{suffix}"))
    pd.testing.assert_frame_equal(loaded, swaps, check_exact=True)
    assert all(isinstance(cell, tuple) and all(type(i) is int for i in cell) for cell in loaded["positions_i"])
    words = pd.DataFrame({"word": ["", "a", None], "cells": [[1], [], None], "tuples": [(1, 2), (), (4,)]})
    loaded = psheads.load_frame(psheads.save_frame(words, tmp_path / f"words{suffix}"))
    assert loaded["word"].tolist()[:2] == ["", "a"] and pd.isna(loaded["word"].iloc[2])
    assert loaded["cells"].tolist() == [[1], [], None]
    assert loaded["tuples"].tolist() == [(1, 2), (), (4,)]
    with pytest.raises(TypeError, match="mixes tuples, lists and other values"):
        psheads.save_frame(pd.DataFrame({"x": [(1,), [2]]}), tmp_path / f"mixed{suffix}")


def test_a_file_that_disagrees_with_its_description_says_so(tmp_path) -> None:
    """A JSON int column holding null, or a CSV whose sidecar is stale, used to end in a pandas dtype error."""
    path = psheads.save_frame(pd.DataFrame({"layer": [0, 1]}), tmp_path / "f.json")
    document = json.loads(path.read_text())
    document["records"][1]["layer"] = None
    path.write_text(json.dumps(document))
    with pytest.raises(ValueError, match=r"f\.json: column 'layer' does not hold int64 values as its description says"):
        psheads.load_frame(path)
    csv = psheads.save_frame(pd.DataFrame({"layer": [0, 1]}), tmp_path / "f.csv")
    pd.DataFrame({"layer": ["a", "b"]}).to_csv(csv, index=False)
    without_hash(csv)  # a sidecar with a hash refuses the rewritten file before reading it
    with pytest.warns(UserWarning, match="records no content hash"), \
            pytest.raises(ValueError, match="does not hold the values its sidecar .* describes"):
        psheads.load_frame(csv)


def test_a_csv_rewritten_after_save_frame_is_refused(tmp_path) -> None:
    """Only the header used to be compared: a CSV that pandas rewrote with other values (or fewer
    rows) came back with the old sidecar's attrs."""
    swap = pd.DataFrame({"layer": [0, 0, 1, 1, 2], "head": [0, 1, 0, 1, 0], "score": [0.1, 0.2, 0.3, 0.4, 0.5]})
    swap.attrs = {"config": {"method": "swap"}, "n_prompts": 5}
    anova = swap.assign(score=[9.0, 8.0, 7.0, 6.0, 5.0])
    for rewritten in (anova, swap.head(3)):
        path = psheads.save_frame(swap, tmp_path / "s.csv")
        assert json.loads(sidecar(path).read_text())["rows"] == 5
        rewritten.to_csv(path, index=False)
        with pytest.raises(ValueError,
                           match=r"s\.csv changed after save_frame wrote it .*delete .*s\.csv\.attrs\.json"):
            psheads.load_frame(path)


def test_a_sidecar_without_a_content_hash_loads_with_a_warning(tmp_path) -> None:
    """Sidecars written before the hash was recorded still load; the warning says they cannot be checked."""
    path = psheads.save_frame(result_frame(), tmp_path / "f.csv")
    without_hash(path)
    with pytest.warns(UserWarning, match=r"f\.csv\.attrs\.json records no content hash"):
        loaded = psheads.load_frame(path)
    pd.testing.assert_frame_equal(loaded, result_frame(), check_exact=True)
    assert loaded.attrs == EXPECTED_ATTRS


def test_a_csv_that_reads_back_as_other_rows_is_refused(tmp_path) -> None:
    path = psheads.save_frame(pd.DataFrame({"a": [1, 2]}), tmp_path / "f.csv")
    document = json.loads(sidecar(path).read_text())
    sidecar(path).write_text(json.dumps({**document, "rows": 3}))
    with pytest.raises(ValueError, match=r"f\.csv reads back as 2 rows, but save_frame wrote 3"):
        psheads.load_frame(path)


@pytest.mark.parametrize("suffix", FORMATS)
def test_carriage_returns_in_text_round_trip(tmp_path, suffix) -> None:
    """to_csv does not quote a lone \\r, which pandas then read as a line break: 3 rows came back as 4, and
    with an int column the load failed asking to delete a sidecar that was not stale."""
    frame = pd.DataFrame({"s": ["a\rb", "a\r\nb", "plain"], "i": [1, 2, 3],
                          "c": pd.Categorical(["x\ry", "z", "x\ry"]), "name\rx": [0.5, 1.5, 2.5]})
    loaded = psheads.load_frame(psheads.save_frame(frame, tmp_path / f"cr{suffix}"))
    pd.testing.assert_frame_equal(loaded, frame, check_exact=True)


def cells(series: pd.Series) -> list[tuple[type, object]]:
    return [(type(cell), cell) for cell in series]


@pytest.mark.parametrize("suffix", FORMATS)
def test_object_columns_of_numbers_and_text_round_trip(tmp_path, suffix) -> None:
    """[None, 3, 5] came back as '3' from CSV and 3.0 from JSON and parquet; big ints and mixed columns as
    strings from CSV, and parquet raised an OverflowError that named no column."""
    frame = pd.DataFrame({
        "small": pd.Series([None, 3, 5], dtype=object),
        "big": pd.Series([2**70, -(2**80), None], dtype=object),
        "mixed": pd.Series(["3", 3, None], dtype=object),
        "kinds": pd.Series([True, 1, 1.5], dtype=object),
        "numpy": pd.Series([np.int64(7), np.float64(0.1), np.bool_(False)], dtype=object),
    })
    loaded = psheads.load_frame(psheads.save_frame(frame, tmp_path / f"o{suffix}"))
    pd.testing.assert_frame_equal(loaded, frame, check_exact=True)
    assert cells(loaded["small"]) == [(type(None), None), (int, 3), (int, 5)]
    assert cells(loaded["big"]) == [(int, 2**70), (int, -(2**80)), (type(None), None)]
    assert cells(loaded["mixed"]) == [(str, "3"), (int, 3), (type(None), None)]
    assert cells(loaded["kinds"]) == [(bool, True), (int, 1), (float, 1.5)]
    assert cells(loaded["numpy"]) == [(int, 7), (float, 0.1), (bool, False)]  # numpy scalars as Python's
    assert type(frame["numpy"].iloc[0]) is np.int64  # the caller's frame is untouched


@pytest.mark.parametrize("suffix", FORMATS)
def test_an_object_column_no_format_keeps_is_refused_by_name(tmp_path, suffix) -> None:
    frame = pd.DataFrame({"ok": [1, 2], "odd": pd.Series([{1, 2}, None], dtype=object)})
    with pytest.raises(TypeError, match=r"[Cc]olumn 'odd' holds a set"):
        psheads.save_frame(frame, tmp_path / f"odd{suffix}")


def test_csv_floats_are_exact_and_load_frame_warns_nothing(tmp_path) -> None:
    """load_frame passed float_precision, which pandas 3.1 deprecates: every CSV load warned."""
    bits = np.random.default_rng(0).integers(0, 2**63, 4000, dtype=np.int64).view(np.float64)
    awkward = [0.0, -0.0, 5e-324, 2.2250738585072014e-308, 1.7976931348623157e308, 0.1, 1 / 3, 9007199254740993.0]
    values = np.concatenate([bits[np.isfinite(bits)], -bits[np.isfinite(bits)], awkward])
    frame = pd.DataFrame({"x": values})
    for with_sidecar in (True, False):
        path = psheads.save_frame(frame, tmp_path / "floats.csv")
        if not with_sidecar:
            sidecar(path).unlink()
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            loaded = psheads.load_frame(path)
        assert [str(warning.message) for warning in caught] == []
        assert loaded["x"].to_numpy().view(np.int64).tolist() == values.view(np.int64).tolist()


@pytest.mark.parametrize("suffix", [".csv", ".json"])
def test_a_file_that_is_not_json_is_named(tmp_path, suffix) -> None:
    """A malformed sidecar or JSON frame raised a bare JSONDecodeError without the file's name."""
    path = psheads.save_frame(pd.DataFrame({"a": [1]}), tmp_path / f"f{suffix}")
    broken = sidecar(path) if suffix == ".csv" else path
    broken.write_text('{"columns": [')
    with pytest.raises(ValueError, match=rf"{broken.name} is not valid JSON \(.*line 1.*\)"):
        psheads.load_frame(path)


def interrupt_half_way(monkeypatch) -> list[str]:
    """Make every write of a frame file stop with KeyboardInterrupt half-way through its bytes, as Ctrl-C
    would; returns the names of the files written half."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    write_bytes, write_table, halves = Path.write_bytes, pq.write_table, []

    def half_bytes(self, data):
        halves.append(self.name)
        write_bytes(self, data[: len(data) // 2])
        raise KeyboardInterrupt

    def half_table(table, where, *args, **kwargs):
        sink = pa.BufferOutputStream()
        write_table(table, sink, *args, **kwargs)
        half_bytes(Path(where), sink.getvalue().to_pybytes())

    monkeypatch.setattr(Path, "write_bytes", half_bytes)
    monkeypatch.setattr(Path, "write_text", lambda self, text, *args, **kwargs: half_bytes(self, text.encode()))
    monkeypatch.setattr(pq, "write_table", half_table)
    return halves


@pytest.mark.parametrize("suffix", FORMATS)
def test_an_interrupted_save_leaves_the_old_file_whole(tmp_path, monkeypatch, suffix) -> None:
    """Ctrl-C during save_frame over a good file left it unreadable ("Parquet magic bytes not found")."""
    path = psheads.save_frame(result_frame(), tmp_path / f"s{suffix}")
    before = {p.name: p.read_bytes() for p in tmp_path.iterdir()}
    newer = result_frame().assign(positional=[1.0, 2.0, 3.0])
    with monkeypatch.context() as patched:
        halves = interrupt_half_way(patched)
        with pytest.raises(KeyboardInterrupt):
            psheads.save_frame(newer, path)
    assert halves  # the write was interrupted, half-way through a file
    assert {p.name: p.read_bytes() for p in tmp_path.iterdir()} == before  # no temporary file left either
    loaded = psheads.load_frame(path)
    pd.testing.assert_frame_equal(loaded, result_frame(), check_exact=True)
    assert loaded.attrs == EXPECTED_ATTRS
    psheads.save_frame(newer, path)  # and the next save replaces it whole
    pd.testing.assert_frame_equal(psheads.load_frame(path), newer, check_exact=True)
    assert sorted(p.name for p in tmp_path.iterdir()) == sorted(before)


@pytest.mark.parametrize("suffix", FORMATS)
def test_a_cut_short_or_garbled_file_is_named(tmp_path, suffix) -> None:
    """A parquet file cut short raised pyarrow's "Parquet magic bytes not found", naming no file."""
    path = psheads.save_frame(result_frame(), tmp_path / f"f{suffix}")
    whole = path.read_bytes()
    named = rf"{re.escape(str(path))}.*(write the frame again|save_frame)"  # the file, and what to do
    for damaged in (whole[: len(whole) // 2], b"\xff\xfe\x00 not a frame \x00" * 8, b""):
        path.write_bytes(damaged)
        with pytest.raises(ValueError, match=named):
            psheads.load_frame(path)
    if suffix == ".csv":  # without its sidecar, read as pandas does: still named
        sidecar(path).unlink()
        for damaged in (b"\xff\xfe\x00 not text", b""):
            path.write_bytes(damaged)
            with pytest.raises(ValueError, match=named):
                psheads.load_frame(path)


@pytest.mark.parametrize("suffix", [".csv", ".json"])
def test_a_document_of_another_shape_is_named(tmp_path, suffix) -> None:
    """A frame document whose records or columns have another shape ended in a bare AttributeError or KeyError."""
    path = psheads.save_frame(pd.DataFrame({"a": [1]}), tmp_path / f"f{suffix}")
    described = sidecar(path) if suffix == ".csv" else path
    document = json.loads(described.read_text())
    for damage in ({"columns": [{"dtype": "int64"}]}, {"columns": ["a"]}, {"records": [[1]]}):
        if suffix == ".csv" and "records" in damage:
            continue
        described.write_text(json.dumps({**document, **damage}))
        with pytest.raises(ValueError, match=re.escape(str(described))):
            psheads.load_frame(path)


def dtype_columns() -> dict[str, pd.Series]:
    """A column of each dtype a frame may hold beyond the library's own, missing values included."""
    import dateutil.tz

    naive = pd.Series(np.array(["2024-03-31T00:59:59.123456789", "NaT", "1900-01-01"], dtype="datetime64[ns]"))
    paris = pd.Series(pd.date_range("2024-03-31 01:30", periods=3, freq="h", tz="Europe/Paris", unit="us"))
    return {
        "naive_ns": naive,
        "naive_us": pd.Series(np.array(["2024-01-01T12:00:00.000001", "NaT", "0001-01-01"], dtype="datetime64[us]")),
        "naive_s": pd.Series(np.array(["2024-01-01T12:00:00", "NaT", "9999-12-31T23:59:59"], dtype="datetime64[s]")),
        "utc": naive.dt.tz_localize("UTC"),
        "paris": paris.where(paris.index != 1),  # across the change to summer time, and a NaT
        "offset": naive.dt.tz_localize(datetime.timezone(datetime.timedelta(hours=5, minutes=30))),
        "delta": pd.Series(pd.to_timedelta([1, None, -86_400_000_000_005], unit="ns")),
        "delta_s": pd.Series(np.array([1, "NaT", -3600], dtype="timedelta64[s]")),
        "half": pd.Series(np.array([1.5, np.nan, -np.inf], dtype=np.float16)),
        "period": pd.Series(pd.period_range("2024-01", periods=3, freq="M")),
        "interval": pd.Series(pd.interval_range(0, 3)),
        "sparse": pd.Series(pd.arrays.SparseArray([0, 1, 0])),
        "complex": pd.Series([1 + 2j, 3j, -1.5 + 0j]),
        "dateutil": naive.dt.tz_localize(dateutil.tz.gettz("Europe/Paris")),
        "times_as_categories": pd.Series(pd.Categorical(naive)),
    }


ROUND_TRIPS = {"naive_ns", "naive_us", "naive_s", "utc", "paris", "offset", "delta", "delta_s", "half"}
"""Columns every format gives back (the others: given back, or refused by name when saved)."""


@pytest.mark.parametrize("suffix", FORMATS)
@pytest.mark.parametrize("name", list(dtype_columns()))
def test_a_column_either_comes_back_or_is_refused_when_saved(tmp_path, suffix, name) -> None:
    """A datetime column saved to CSV and failed only at load; float16 with NaN gave KeyError: dtype('float16');
    tz-aware times NotImplementedError; categories that JSON cannot store were blamed on attrs[0]."""
    frame = pd.DataFrame({"i": [0, 1, 2], name: dtype_columns()[name]})
    try:
        path = psheads.save_frame(frame, tmp_path / f"f{suffix}")
    except TypeError as err:
        assert name not in ROUND_TRIPS, err
        assert re.search(rf"[Cc]olumn '{name}'", str(err)), err
        assert list(tmp_path.iterdir()) == []
        return
    pd.testing.assert_frame_equal(psheads.load_frame(path), frame, check_exact=True)


@pytest.mark.parametrize("suffix", FORMATS)
def test_every_float16_comes_back_bit_for_bit(tmp_path, suffix) -> None:
    halves = np.arange(2**16, dtype=np.uint16).view(np.float16)
    frame = pd.DataFrame({"h": halves[~np.isnan(halves)].tolist() + [np.nan]}, dtype=np.float16)
    loaded = psheads.load_frame(psheads.save_frame(frame, tmp_path / f"h{suffix}"))
    assert loaded["h"].dtype == np.float16
    assert loaded["h"].to_numpy()[:-1].view(np.uint16).tolist() == frame["h"].to_numpy()[:-1].view(np.uint16).tolist()
    assert np.isnan(loaded["h"].iloc[-1])


def test_a_time_its_text_cannot_give_back_is_refused_by_row(tmp_path) -> None:
    """Durations beyond pandas' text parser (about 292 years) are refused when saved, not when loaded."""
    far = pd.DataFrame({"d": np.array([1, "NaT", 10**12], dtype="timedelta64[s]")})
    for suffix in (".csv", ".json"):
        with pytest.raises(TypeError, match=r"Column 'd' holds .* \(row 2, counting from 0\).*write \.parquet"):
            psheads.save_frame(far, tmp_path / f"far{suffix}")
    assert list(tmp_path.iterdir()) == []
    pd.testing.assert_frame_equal(psheads.load_frame(psheads.save_frame(far, tmp_path / "far.parquet")), far)


def test_a_cell_edited_to_an_unknown_category_is_refused_by_column_and_row(tmp_path) -> None:
    """A label hand-edited to a word that is not a label loaded as NaN, with only a pandas deprecation warning."""
    path = psheads.save_frame(result_frame(), tmp_path / "f.json")
    document = json.loads(path.read_text())
    document["records"][1]["label"] = "positionnal"
    path.write_text(json.dumps(document))
    refused = r"f\.json: column 'label' holds 'positionnal' in row 1 \(counting from 0\), which is not one of its"
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(ValueError, match=refused):
            psheads.load_frame(path)
    csv = psheads.save_frame(result_frame(), tmp_path / "f.csv")
    csv.write_text(csv.read_text().replace(",mixed,", ",banana,"))
    without_hash(csv)  # a sidecar with a hash refuses the edited file before reading it
    with pytest.warns(UserWarning, match="records no content hash"), \
            pytest.raises(ValueError, match=r"column 'label' holds 'banana' in row 0 \(counting from 0\)"):
        psheads.load_frame(csv)


@pytest.mark.parametrize("suffix", FORMATS)
def test_attrs_that_look_like_the_markers_come_back_as_they_were(tmp_path, suffix) -> None:
    """A user's dict whose only key was '__tuple__' came back as a tuple, one whose only key was '__items__'
    as a dict of its pairs."""
    attrs = {"run": {"__tuple__": [1, 2]}, "pairs": {"__items__": [[1, 2]]}, "both": {"__tuple__": 1, "x": (2,)},
             "nested": [{"__tuple__": ({"__items__": {3: "c"}},)}], "tuple": (1, {"__tuple__": None})}
    frame = pd.DataFrame({"a": [1]})
    frame.attrs = attrs
    loaded = psheads.load_frame(psheads.save_frame(frame, tmp_path / f"f{suffix}"))
    assert loaded.attrs == attrs
    assert type(loaded.attrs["run"]) is dict and type(loaded.attrs["run"]["__tuple__"]) is list
    assert type(loaded.attrs["nested"][0]["__tuple__"]) is tuple and type(loaded.attrs["tuple"]) is tuple
    frame.attrs = {"__tuple__": [1]}  # the whole attrs, too
    assert psheads.load_frame(psheads.save_frame(frame, tmp_path / f"g{suffix}")).attrs == {"__tuple__": [1]}
