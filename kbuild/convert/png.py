"""A PNG encoder for pymupdf pixmaps, faster than MuPDF's own for rendered pages.

MuPDF's own PNG writer compresses at zlib's default level and costs twice the
rendering itself; level 3 with no row filter is about twice as fast for files
~5% larger (measured on rendered text pages).

An RGB pixmap whose every pixel is grey (R = G = B: text, rules, grey drawings)
is written as a greyscale PNG. That is lossless (it decodes to the same pixels),
a third of the bytes to compress, and about 3 times faster overall, checking
included; pages with any colour stay RGB.
"""
from __future__ import annotations

import struct
import zlib

import pymupdf

_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_LEVEL = 3


def encode_png(pixmap: pymupdf.Pixmap) -> bytes:
    """An RGB or grey pixmap (without alpha) as PNG bytes."""
    width, height = pixmap.width, pixmap.height
    samples = pixmap.samples
    n, stride = pixmap.n, pixmap.stride
    if n == 3 and stride == 3 * width:
        red = samples[0::3]
        if red == samples[1::3] and red == samples[2::3]:
            samples, n, stride = red, 1, width
    colour_type = {1: 0, 3: 2}[n]  # grey or RGB; pixmaps here never carry alpha
    view = memoryview(samples)
    # Each row is preceded by its filter type, 0 (none).
    rows = b"\x00" + b"\x00".join([view[y:y + stride] for y in range(0, height * stride, stride)])
    header = struct.pack(">IIBBBBB", width, height, 8, colour_type, 0, 0, 0)
    return b"".join([
        _SIGNATURE,
        _chunk(b"IHDR", header),
        _chunk(b"IDAT", zlib.compress(rows, _LEVEL)),
        _chunk(b"IEND", b""),
    ])


def _chunk(tag: bytes, body: bytes) -> bytes:
    return struct.pack(">I", len(body)) + tag + body + struct.pack(">I", zlib.crc32(tag + body))
