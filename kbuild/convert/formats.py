"""Which converter handles a file, decided by its extension (and, for unknown ones, its bytes)."""
from __future__ import annotations

from pathlib import PurePosixPath

# extension -> kind, for documents that pymupdf opens page by page
PAGED: dict[str, str] = {
    "pdf": "pdf",
    "xps": "xps",
    "oxps": "xps",
    "epub": "epub",
    "cbz": "cbz",
    "fb2": "fb2",
    "mobi": "mobi",
    "svg": "svg",
    "png": "image",
    "jpg": "image",
    "jpeg": "image",
    "gif": "image",
    "bmp": "image",
    "tif": "image",
    "tiff": "image",
    "jxr": "image",
    "jpx": "image",
    "jp2": "image",
}

MARKDOWN = {"md", "markdown", "mdown", "mkd", "mkdn", "mdx"}  # MDX: Markdown with JSX (Docusaurus, Nextra)
RST = {"rst", "rest"}
HTML = {"html", "htm", "xhtml"}
CODE = {
    "py", "pyi", "pyx", "js", "mjs", "cjs", "jsx", "ts", "tsx", "go", "rs", "java", "kt",
    "kts", "scala", "groovy", "gradle", "c", "h", "cc", "cpp", "cxx", "hpp", "hh", "hxx", "cs",
    "m", "mm", "swift", "rb", "php", "pl", "pm", "lua", "r", "jl", "dart", "ex", "exs", "erl",
    "hrl", "hs", "ml", "mli", "fs", "clj", "cljs", "el", "lisp", "scm", "vim", "zig", "nim", "v",
    "sv", "vhd", "sh", "bash", "zsh", "fish", "ps1", "bat", "cmd", "sql", "toml", "yaml", "yml",
    "json", "jsonc", "json5", "ini", "cfg", "conf", "properties", "env", "xml", "xsd", "xsl",
    "css", "scss", "sass", "less", "vue", "svelte", "proto", "graphql", "gql", "tf", "hcl",
    "cmake", "mk", "make", "dockerfile", "nix", "sol", "asm", "s",
}

# Formats we recognise but cannot read: the error says what to export them to. (DOCX, PPTX, XLSX
# and XLS are read by kbuild.convert.office.)
UNSUPPORTED: dict[str, str] = {
    "doc": "a Word document",
    "odt": "an OpenDocument text",
    "rtf": "an RTF document",
    "ppt": "a PowerPoint deck",
    "odp": "an OpenDocument presentation",
    "ods": "an OpenDocument spreadsheet",
    "pages": "an Apple Pages document",
    "key": "an Apple Keynote deck",
    "numbers": "an Apple Numbers spreadsheet",
}

# Leading bytes of common binary formats, to say what a mislabelled file really is.
_MAGIC: list[tuple[bytes, str]] = [
    (b"%PDF-", "a PDF"),
    (b"\x89PNG\r\n\x1a\n", "a PNG image"),
    (b"\xff\xd8\xff", "a JPEG image"),
    (b"GIF87a", "a GIF image"),
    (b"GIF89a", "a GIF image"),
    (b"PK\x03\x04", "a ZIP archive (or an Office/EPUB file)"),
    (b"\x1f\x8b", "a gzip archive"),
    (b"7z\xbc\xaf\x27\x1c", "a 7-Zip archive"),
    (b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1", "an old Office document"),
    (b"\x7fELF", "an executable"),
    (b"MZ", "a Windows executable"),
]


def extension(filename: str) -> str:
    """Lower-case extension without the dot; "" when there is none."""
    suffix = PurePosixPath(filename.replace("\\", "/")).suffix
    return suffix[1:].lower()


def sniff(data: bytes) -> str | None:
    """What the bytes look like, e.g. "a PDF", or None when nothing is recognised."""
    for magic, what in _MAGIC:
        if data.startswith(magic):
            return what
    return None


def text_kind(ext: str) -> str:
    if ext in MARKDOWN:
        return "markdown"
    if ext in RST:
        return "rst"
    if ext in HTML:
        return "html"
    if ext in CODE:
        return "code"
    return "text"
