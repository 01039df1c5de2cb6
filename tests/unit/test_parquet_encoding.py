"""Tag columns handed to the Parquet writer as dictionaries built by arcs.native, and columns
without nulls marked required: the file reads back exactly the table written."""

from __future__ import annotations

import ctypes
import io
import itertools
from collections.abc import Sequence
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from arcs import native
from arcs.write.file_writers import parquet_options
from arcs.write.parquet_encoding import MAX_DICTIONARY_VALUES, dictionary_encoded, for_parquet, tags_in_one_form

TAGS = ["host", "region"]


def _written(table: pa.Table, tags: list[str]) -> pa.Table:
    sink = io.BytesIO()
    pq.write_table(for_parquet(table, tags), sink, **parquet_options(table.schema, tags))
    return pq.read_table(io.BytesIO(sink.getvalue()))


def _table(hosts: Sequence[str | None], regions: list[str]) -> pa.Table:
    rows = len(regions)
    return pa.table(
        {
            "time": pa.array(range(rows), pa.timestamp("us", tz="UTC")),
            "host": pa.array(hosts, pa.string()),
            "region": pa.array(regions, pa.string()),
            "usage": pa.array([i / 3 for i in range(rows)]),
        }
    )


def test_tags_become_dictionaries_and_read_back_as_the_strings_they_were(library: Any) -> None:
    hosts = [f"server{i % 7:02d}" for i in range(1000)]
    regions = ["us-east", "eu-central", "ap-south", "", "ü-ñ"] * 200
    table = _table(hosts, regions)
    prepared = for_parquet(table, TAGS)
    assert [str(t) for t in prepared.schema.types[1:3]] == ["dictionary<values=string, indices=int32, ordered=0>"] * 2
    assert not any(field.nullable for field in prepared.schema)
    assert len(prepared.column("host").chunk(0).dictionary) == 7
    back = _written(table, TAGS)
    assert back.to_pylist() == table.to_pylist()
    assert back.schema.field("host").type == pa.string()  # not a dictionary: no Arrow schema in the file
    assert back.schema.field("time").type == pa.timestamp("us", tz="UTC")


def test_a_column_with_nulls_stays_nullable_and_plain(library: Any) -> None:
    table = _table(["a", None, "b"], ["x", "y", "x"])
    prepared = for_parquet(table, TAGS)
    assert prepared.schema.field("host").type == pa.string() and prepared.schema.field("host").nullable
    assert not prepared.schema.field("region").nullable
    assert _written(table, TAGS).to_pylist() == table.to_pylist()


def test_fields_are_left_as_strings_and_only_tags_are_encoded(library: Any) -> None:
    table = _table(["a", "b"], ["x", "y"])
    assert for_parquet(table, ["host"]).schema.field("region").type == pa.string()


@pytest.mark.parametrize("distinct", [255, 256, 257, 9_000])
def test_a_dictionary_that_fills_its_table_starts_again_larger(library: Any, distinct: int) -> None:
    values = [f"v{i % distinct}" for i in range(2 * distinct)]
    encoded = dictionary_encoded(pa.chunked_array([pa.array(values)]))
    assert encoded is not None
    assert len(encoded.chunk(0).dictionary) == distinct
    assert encoded.cast(pa.string()).to_pylist() == values


def test_long_values_fill_a_small_dictionary_and_a_larger_one_takes_them(library: Any) -> None:
    values = [f"{i % 3}" * 5_000 for i in range(10)]  # 15,000 bytes of distinct values: past 64 a value
    encoded = dictionary_encoded(pa.chunked_array([pa.array(values)]))
    assert encoded is not None
    assert encoded.cast(pa.string()).to_pylist() == values


def test_more_distinct_values_than_a_dictionary_holds_stay_plain(library: Any) -> None:
    values = pa.chunked_array([pa.array([f"v{i}" for i in range(MAX_DICTIONARY_VALUES + 1)])])
    assert dictionary_encoded(values) is None


def test_chunks_and_slices_share_one_dictionary(library: Any) -> None:
    first = pa.array(["a", "bb", "a", "ccc"])
    second = pa.array(["zz", "bb", "a", "dddd", "eeeeeeeeeeeeeeeeeeeeeeeee"]).slice(1)  # an offset into its buffers
    encoded = dictionary_encoded(pa.chunked_array([first, second]))
    assert encoded is not None
    assert all(chunk.dictionary.equals(encoded.chunk(0).dictionary) for chunk in encoded.chunks)
    assert encoded.chunk(0).dictionary.to_pylist() == ["a", "bb", "ccc", "dddd", "eeeeeeeeeeeeeeeeeeeeeeeee"]
    assert encoded.cast(pa.string()).to_pylist() == [
        "a",
        "bb",
        "a",
        "ccc",
        "bb",
        "a",
        "dddd",
        "eeeeeeeeeeeeeeeeeeeeeeeee",
    ]


def _encode(library: Any, offsets: list[int], data: bytes, capacity: int = 16) -> tuple[int, list[int], bool]:
    """The encoder's result, the indices it wrote, and whether it marked the dictionary refused."""
    slots = (ctypes.c_int64 * (2 * capacity))()
    dictionary_offsets = (ctypes.c_int32 * (capacity + 1))()
    text = ctypes.create_string_buffer(256 + 16)
    state = native.Dictionary(
        ctypes.addressof(slots),
        len(slots),
        ctypes.addressof(dictionary_offsets),
        ctypes.addressof(text),
        capacity,
        256,
        0,
    )
    rows = len(offsets) - 1
    indices = (ctypes.c_int32 * max(rows, 1))()
    given_offsets = (ctypes.c_int32 * len(offsets))(*offsets)
    buffer = ctypes.create_string_buffer(data, len(data))
    result = library.arcs_dictionary_encode(
        ctypes.byref(state),
        ctypes.addressof(given_offsets),
        ctypes.addressof(buffer),
        len(data),
        rows,
        ctypes.addressof(indices),
    )
    return result, list(indices[:rows]), bool(state.refused)


def test_the_encoder_gives_indices_in_order_of_first_appearance(library: Any) -> None:
    data = b"bbaabb"
    assert _encode(library, [0, 2, 4, 6, 6], data) == (3, [0, 1, 0, 2], False)  # "bb", "aa", "bb", ""


@pytest.mark.parametrize(
    "offsets",
    [
        [0, 3, 2],  # decreasing
        [0, 7],  # past the data
        [-1, 2],
    ],
)
def test_the_encoder_refuses_offsets_that_do_not_fit(library: Any, offsets: list[int]) -> None:
    assert _encode(library, offsets, b"abcdef")[0] == -1


def test_the_encoder_says_full_when_its_table_has_no_room(library: Any) -> None:
    data = b"abcdefgh"
    result, _indices, refused = _encode(library, list(range(9)), data, capacity=4)
    assert (result, refused) == (-2, True)


@settings(max_examples=200, deadline=None)
@given(
    values=st.lists(
        st.text(alphabet="ab\u00e9\U0001f600", max_size=20) | st.sampled_from(["x" * 17, "y" * 16, "z" * 8]),
        min_size=1,
        max_size=300,
    ),
    cuts=st.lists(st.integers(0, 300), max_size=3),
)
def test_any_strings_in_any_chunks_encode_to_themselves(values: list[str], cuts: list[int]) -> None:
    if native.library() is None:
        pytest.skip("arcs.native is not built")
    bounds = sorted({0, len(values), *(c for c in cuts if c < len(values))})
    column = pa.chunked_array([pa.array(values[a:b], pa.string()) for a, b in itertools.pairwise(bounds)])
    encoded = dictionary_encoded(column)
    assert encoded is not None
    dictionary = encoded.chunk(0).dictionary.to_pylist()
    assert sorted(dictionary) == sorted(set(values))  # each value once
    assert encoded.cast(pa.string()).to_pylist() == values


def test_tables_with_tags_in_both_forms_get_them_as_dictionaries_in_all(library: Any) -> None:
    lane = pa.table({"host": pa.array(["a", "b", "a"]).dictionary_encode(), "v": [1.0, 2.0, 3.0]})
    general = pa.table({"host": pa.array(["c", None, "a"]), "note": ["x", "y", "z"], "v": [4.0, 5.0, 6.0]})
    many = pa.table({"host": pa.array([f"h{i}" for i in range(MAX_DICTIONARY_VALUES + 1)])})
    formed = tags_in_one_form([lane, general, many])
    assert all(pa.types.is_dictionary(table.schema.field("host").type) for table in formed)
    assert formed[1].schema.field("note").type == pa.string()  # not a dictionary anywhere: left alone
    whole = pa.concat_tables(formed, promote_options="permissive").unify_dictionaries()
    expected = ["a", "b", "a", "c", None, "a", *(f"h{i}" for i in range(MAX_DICTIONARY_VALUES + 1))]
    assert whole.column("host").cast(pa.string()).to_pylist() == expected
    first, *others = whole.column("host").chunks
    assert all(chunk.dictionary.equals(first.dictionary) for chunk in others)
