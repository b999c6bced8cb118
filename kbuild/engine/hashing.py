"""Content hashes and value encoding: the identity of everything the engine compares."""
from __future__ import annotations

import json
from typing import Any, BinaryIO

import xxhash

ABSENT = "absent"  # the hash of a file that does not exist, so creating it is a change
FAILED = "failed"  # the hash a failed query presents to its readers in one build
UNKNOWN = "unknown"  # a query recorded as read but never built: its readers must run again


NOT_A_FILE = "not-a-file"  # a pipe, socket or device where a file was: never opened, so never waited on


def hash_bytes(data: bytes) -> str:
    return xxhash.xxh3_128_hexdigest(data)


def hash_pieces(pieces: list[bytes | memoryview]) -> str:
    """The hash_bytes of the pieces written one after the other, without joining them."""
    digest = xxhash.xxh3_128()
    for piece in pieces:
        digest.update(piece)
    return digest.hexdigest()


def hash_stream(stream: BinaryIO, block: int = 1 << 20) -> str:
    """The hash_bytes of everything `stream` holds, a block at a time: a large file is hashed in
    constant memory."""
    digest = xxhash.xxh3_128()
    while chunk := stream.read(block):
        digest.update(chunk)
    return digest.hexdigest()


# what json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False) uses, made
# once: json.dumps with arguments makes an encoder per call, and every query id is spelled here
_CANONICAL = json.JSONEncoder(sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def canonical_json(value: Any) -> str:
    """One spelling per value, so equal values hash equal across runs and machines."""
    return _CANONICAL.encode(value)


def encode_value(value: Any) -> bytes:
    """Query values are bytes or JSON; a one-byte tag keeps them apart."""
    if isinstance(value, (bytes, bytearray)):
        return b"b" + bytes(value)
    if hasattr(value, "model_dump"):  # a typed value (pydantic): stored as its JSON
        value = value.model_dump(mode="json")
    try:
        return b"j" + canonical_json(value).encode()
    except TypeError as exc:
        raise TypeError(
            f"a rule returned a value that is neither bytes nor JSON ({exc}); "
            "return dicts, lists, strings, numbers or bytes (pydantic: model_dump(mode='json'))"
        ) from None


class NotAnObject(ValueError):
    """A rule with parts=True returned something other than a JSON object."""


def part_hashes(blob: bytes) -> dict[str, str]:
    """The hash of each entry of a value that is a JSON object: what a part read compares."""
    return _parts(decode_value(blob))[1]


def encode_with_parts(value: Any) -> tuple[bytes, dict[str, str]]:
    """encode_value and part_hashes of a value with parts, each entry encoded once: the value's
    bytes are its entries' joined, as canonical_json spells an object. A source's chunks are
    thousands of entries, which encoding the value, decoding it and encoding each entry again
    spelled three times."""
    if hasattr(value, "model_dump"):
        value = value.model_dump(mode="json")
    if not isinstance(value, dict) or not all(isinstance(key, str) for key in value):
        blob = encode_value(value)  # JSON spells other keys as strings, and sorts them as such
        return blob, part_hashes(blob)
    try:
        text, parts = _parts(value)
    except TypeError:
        encode_value(value)  # raises its message for a value that is not JSON
        raise
    return b"j" + text.encode(), parts


def part_places(blob: bytes, names: list[str]) -> list[tuple[int, int]]:
    """Where each entry of a value encode_with_parts stored as `blob` stands, for its parts
    `names` (sorted): (where its name begins, where the entry does), found in one pass over the
    bytes ((-1, -1) where not found). The entries stand one after the other in the order of
    their names, each after its name: an entry ends where the next one's name begins."""
    places: list[tuple[int, int]] = []
    at = 1
    for n, name in enumerate(names):
        mark = (b"{" if n == 0 else b",") + canonical_json(name).encode() + b":"
        found = (1 if blob.startswith(mark, 1) else -1) if n == 0 else blob.find(mark, at)
        places.append((found, found + len(mark)) if found >= 0 else (-1, -1))
        if found >= 0:
            at = found + len(mark)
    return places


def part_bytes(blob: bytes, places: list[tuple[int, int]], n: int, digest: str) -> bytes | None:
    """The bytes of the `n`th entry of a value with parts stored as `blob` (part_places), when
    they have the hash `digest` recorded for it; else None. A name spelled inside an earlier
    entry (a nested object with a key of that name) finds other bytes, and the caller reads
    the whole value."""
    start = places[n][1]
    end = places[n + 1][0] if n + 1 < len(places) else len(blob) - 1
    if start < 0 or end < start:
        return None
    entry = blob[start:end]
    return entry if hash_bytes(entry) == digest else None


def _parts(value: Any) -> tuple[str, dict[str, str]]:
    if not isinstance(value, dict):
        raise NotAnObject(f"a rule with parts=True must return a JSON object, not {type(value).__name__}")
    spelled = {key: canonical_json(value[key]) for key in sorted(value)}
    text = "{" + ",".join(f"{canonical_json(key)}:{entry}" for key, entry in spelled.items()) + "}"
    return text, {key: hash_bytes(entry.encode()) for key, entry in spelled.items()}


def decode_value(blob: bytes) -> Any:
    if blob[:1] == b"b":
        return blob[1:]
    return json.loads(blob[1:])
