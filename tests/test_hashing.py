"""A value with parts is encoded once: the same bytes and part hashes as encoding the whole and
hashing each entry, which is what every store already holds and every lock already records."""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kbuild.engine.hashing import (NotAnObject, canonical_json, decode_value, encode_value, encode_with_parts, hash_bytes,
                                   part_bytes, part_places)

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4), max_leaves=20)


@given(st.dictionaries(st.text(), json_values, max_size=8))
def test_a_value_with_parts_is_spelled_as_the_whole_value_is(value: dict) -> None:
    blob, parts = encode_with_parts(value)
    assert blob == encode_value(value)
    assert parts == {key: hash_bytes(canonical_json(entry).encode()) for key, entry in decode_value(blob).items()}


@pytest.mark.parametrize("value", [[1, 2], "text", None])
def test_a_value_with_parts_must_be_an_object(value: object) -> None:
    with pytest.raises(NotAnObject):
        encode_with_parts(value)


def test_an_object_with_numbers_for_names_has_the_parts_its_stored_value_has() -> None:
    blob, parts = encode_with_parts({2: "a", 10: "b"})
    assert blob == encode_value({2: "a", 10: "b"}) and set(parts) == {"2", "10"}


@given(st.dictionaries(st.text(), json_values, max_size=8))
def test_a_part_read_from_the_stored_bytes_is_that_entry_or_nothing(value: dict) -> None:
    """A part is read from the stored value's bytes alone when they tell it, never wrongly."""
    blob, parts = encode_with_parts(value)
    names = sorted(parts)
    places = part_places(blob, names)
    for n, name in enumerate(names):
        found = part_bytes(blob, places, n, parts[name])
        assert found is None or found == canonical_json(value[name]).encode()


def test_a_part_is_read_alone_unless_an_earlier_entry_spells_its_name() -> None:
    value = {"region:0": {"lines": ["a", "b"]}, "region:1": [1, {"x": "y"}], "region:2": "last"}
    blob, parts = encode_with_parts(value)
    names = sorted(parts)
    places = part_places(blob, names)
    assert [part_bytes(blob, places, i, parts[n]) for i, n in enumerate(names)] == [
        canonical_json(value[n]).encode() for n in names]
    # a nested object with a key spelled as the next part's name: never the wrong bytes
    tricky = {"a": {"a": 1, "b": 5}, "b": 2, "c": {"b": 4, "c": 3}}  # stored: {"a":{"a":1,"b":5},"b":2,...
    blob, parts = encode_with_parts(tricky)
    places = part_places(blob, sorted(parts))
    assert part_bytes(blob, places, 0, parts["a"]) is None and part_bytes(blob, places, 1, parts["b"]) is None
    assert part_bytes(blob, places, 2, parts["c"]) == b'{"b":4,"c":3}'
