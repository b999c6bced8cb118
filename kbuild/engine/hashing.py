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


def part_hashes(blob: bytes) -> dict[str, str]:
    """The hash of each entry of a value that is a JSON object: what a part read compares."""
    value = decode_value(blob)
    if not isinstance(value, dict):
        raise ValueError(f"a rule with parts=True must return a JSON object, not {type(value).__name__}")
    return {key: hash_bytes(canonical_json(entry).encode()) for key, entry in value.items()}


def decode_value(blob: bytes) -> Any:
    if blob[:1] == b"b":
        return blob[1:]
    return json.loads(blob[1:])
