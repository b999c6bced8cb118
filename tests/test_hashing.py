"""A value with parts is encoded once: the same bytes and part hashes as encoding the whole and
hashing each entry, which is what every store already holds and every lock already records."""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from kbuild.engine.hashing import NotAnObject, canonical_json, decode_value, encode_value, encode_with_parts, hash_bytes

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
