"""Decoding bytes to text, and the line-preserving conversion of text sources."""
from __future__ import annotations

import codecs
import re

from .formats import sniff
from .model import ConversionError, Converted

# Bytes that never occur in real text; tab, LF, VT, FF, CR and ESC are left out.
_CONTROL_BYTES = bytes(b for b in range(32) if b not in (9, 10, 11, 12, 13, 27))
_SAMPLE = 64 * 1024  # enough bytes to judge "text or not" without scanning a 100 MB file
_MAX_CONTROL_FRACTION = 0.02  # real text has none; a few stray ones are tolerated
_BOMS: list[tuple[bytes, str]] = [
    # UTF-32 first: its little-endian BOM starts with UTF-16's.
    (codecs.BOM_UTF32_LE, "utf-32"),
    (codecs.BOM_UTF32_BE, "utf-32"),
    (codecs.BOM_UTF8, "utf-8-sig"),
    (codecs.BOM_UTF16_LE, "utf-16"),
    (codecs.BOM_UTF16_BE, "utf-16"),
]
_META_CHARSET = re.compile(rb"""<meta[^>]+charset\s*=\s*["']?\s*([A-Za-z0-9_.:-]+)""", re.I)
# Ligatures and the like: compatibility characters whose NFKC form is the plain letters (PDFs carry
# them: "veriﬁed"). NFKC over the whole text would also turn ² into 2 and ½ into 1⁄2, which changes
# what a text says.
LIGATURES = str.maketrans({"\ufb00": "ff", "\ufb01": "fi", "\ufb02": "fl", "\ufb03": "ffi", "\ufb04": "ffl",
                           "\ufb05": "st", "\ufb06": "st"})


def decode(data: bytes, *, html: bool = False) -> tuple[str, list[str]]:
    """Decode a text source; returns the text and warnings. Raises ConversionError
    for bytes that are not text. html=True honours a <meta charset> declaration."""
    for bom, codec in _BOMS:
        if data.startswith(bom):
            try:
                return data.decode(codec), []
            except UnicodeDecodeError:
                raise ConversionError(
                    f"starts with a {codec.upper().replace('-SIG', '')} byte-order mark but is not "
                    "valid in that encoding (truncated or corrupt?); re-save it as UTF-8"
                ) from None

    sample = data[:_SAMPLE]
    if sniff(data) == "a PDF":
        raise ConversionError(_binary_message(data))  # often plain ASCII, yet not text
    if b"\x00" in sample:
        utf16 = _bomless_utf16(sample)
        if utf16 is not None:
            try:
                text = data.decode(utf16)
            except UnicodeDecodeError:
                pass
            else:
                return text, [f"decoded as {utf16} (no byte-order mark); re-save it as UTF-8"]
        raise ConversionError(_binary_message(data))
    if _control_fraction(sample) > _MAX_CONTROL_FRACTION:
        raise ConversionError(_binary_message(data))

    try:
        return data.decode("utf-8"), []
    except UnicodeDecodeError:
        pass

    if html:
        declared = _declared_charset(data)
        if declared is not None:
            try:
                return data.decode(declared), []
            except UnicodeDecodeError:
                pass  # the declaration lies; fall back to detection

    encoding = _detect(data)
    if encoding is None:
        raise ConversionError(
            "is not UTF-8 and its text encoding could not be recognised; "
            "re-save it as UTF-8 (or check that it really is a text file)"
        )
    text = data.decode(encoding, errors="replace")
    if text.count("\ufffd") > max(8, len(text) // 100):
        raise ConversionError(
            f"does not decode cleanly as {encoding}, the closest guess; re-save it as UTF-8"
        )
    return text, [f"decoded as {encoding} (not UTF-8); re-save it as UTF-8 if the text looks wrong"]


def looks_binary(data: bytes) -> bool:
    """Whether `decode` refuses the bytes for what their start shows (a PDF, NUL bytes that are
    not UTF-16's, control bytes), found without decoding them all."""
    if any(data.startswith(bom) for bom, _ in _BOMS):
        return False
    sample = data[:_SAMPLE]
    if sniff(data) == "a PDF":
        return True
    if b"\x00" in sample:
        return _bomless_utf16(sample) is None
    return _control_fraction(sample) > _MAX_CONTROL_FRACTION


def binary_message(data: bytes) -> str:
    return _binary_message(data)


def convert_text(data: bytes, kind: str) -> Converted:
    """Markdown, reST, code and plain text: line N of text.md is line N of the source."""
    text, warnings = decode(data)
    text = normalise_newlines(text)
    if not text.strip():
        warnings.append("contains only whitespace; text.md will be empty")
    return Converted(text=text, pages=[], figures=[], kind=kind, warnings=warnings)


def normalise_newlines(text: str) -> str:
    """CRLF and CR become LF; the text ends in exactly one LF. Only trailing empty
    lines are removed, so every line keeps its number."""
    text = text.removeprefix("\ufeff")
    text = text.replace("\r\n", "\n").replace("\r", "\n")
    return text.rstrip("\n") + "\n"


def _control_fraction(sample: bytes) -> float:
    if not sample:
        return 0.0
    stripped = sample.translate(None, _CONTROL_BYTES)
    return (len(sample) - len(stripped)) / len(sample)


def _bomless_utf16(sample: bytes) -> str | None:
    """UTF-16 without a BOM shows as NULs in every other byte for Latin-script text."""
    sample = sample[: len(sample) // 2 * 2]
    pairs = len(sample) // 2
    if pairs < 2:
        return None
    even_nuls = sample[0::2].count(0)
    odd_nuls = sample[1::2].count(0)
    if odd_nuls >= 0.4 * pairs and even_nuls <= 0.02 * pairs:
        return "utf-16-le"
    if even_nuls >= 0.4 * pairs and odd_nuls <= 0.02 * pairs:
        return "utf-16-be"
    return None


def _declared_charset(data: bytes) -> str | None:
    match = _META_CHARSET.search(data[:4096])
    if match is None:
        return None
    try:
        return codecs.lookup(match.group(1).decode("ascii")).name
    except (LookupError, UnicodeDecodeError):
        return None


def _detect(data: bytes) -> str | None:
    from charset_normalizer import from_bytes  # only paid for by non-UTF-8 sources

    results = list(from_bytes(data))
    if not results:
        return None
    # Short Western text fits several 8-bit code pages equally well, and
    # charset-normalizer then picks one arbitrarily (cp1250 for French, say).
    # Among the equally good, prefer cp1252, by far the most common legacy one.
    lowest = min(r.chaos for r in results)
    for result in results:
        if result.chaos <= lowest + 1e-6 and (
            result.encoding == "cp1252" or "cp1252" in result.could_be_from_charset
        ):
            return "cp1252"
    return results[0].encoding


def _binary_message(data: bytes) -> str:
    what = sniff(data)
    if what is not None:
        return (
            f"is binary data ({what}), not text; give it the file extension of what it "
            "really is, or replace it with the text version"
        )
    return (
        "is binary data, not text (it contains NUL or control bytes); "
        "replace it with a text version or give it the right file extension"
    )


def plain_letters(text: str) -> str:
    """Ligature glyphs as the letters they stand for."""
    return text.translate(LIGATURES)
