"""A Jupyter notebook (.ipynb, nbformat 4 JSON) as Markdown: markdown cells as they are (cleaned
as any Markdown source is), code cells as fenced code in the kernel's language, and each code
cell's outputs as text (streams, results' plain text, errors' name and message; images are
left out). Read as code, a notebook is JSON whose every line is a quoted string.
"""
from __future__ import annotations

import json
import re
from typing import Any

from .markdown import clean_markdown
from .model import Converted
from .text import decode


def convert_notebook(data: bytes) -> Converted | None:
    """The notebook as Markdown; None when `data` is not a notebook (any other JSON)."""
    text, warnings = decode(data)
    try:
        notebook = json.loads(text)
    except ValueError:
        return None
    if not isinstance(notebook, dict) or not isinstance(notebook.get("cells"), list):
        return None
    metadata = notebook.get("metadata") if isinstance(notebook.get("metadata"), dict) else {}
    language = _language(metadata)
    parts: list[str] = []
    for cell in notebook["cells"]:
        if not isinstance(cell, dict):
            continue
        source = _joined(cell.get("source")).strip("\n")
        kind = cell.get("cell_type")
        if kind == "markdown" and source.strip():
            parts.append(source)
        elif kind == "code":
            if source.strip():
                parts.append(_fenced(source, language))
            outputs = [_output(o) for o in cell.get("outputs") or [] if isinstance(o, dict)]
            if any(outputs):
                parts.append(_fenced("\n".join(o for o in outputs if o).strip("\n"), ""))
        elif kind == "raw" and source.strip():
            parts.append(_fenced(source, ""))
    markdown = clean_markdown("\n\n".join(parts) + "\n")
    return Converted(text=markdown, kind="notebook", warnings=warnings)


def _language(metadata: dict[str, Any]) -> str:
    for key, field in (("kernelspec", "language"), ("language_info", "name")):
        holder = metadata.get(key)
        if isinstance(holder, dict) and isinstance(holder.get(field), str):
            return re.sub(r"[^\w+#-]", "", holder[field].lower())
    return ""


def _output(output: dict[str, Any]) -> str:
    kind = output.get("output_type")
    if kind == "stream":
        return _joined(output.get("text"))
    if kind in ("execute_result", "display_data"):
        data = output.get("data") if isinstance(output.get("data"), dict) else {}
        return _joined(data.get("text/plain"))
    if kind == "error":
        return f"{output.get('ename', 'Error')}: {output.get('evalue', '')}"
    return ""


def _joined(value: Any) -> str:
    """A notebook's multi-line string: a string, or a list of lines."""
    if isinstance(value, list):
        return "".join(v for v in value if isinstance(v, str))
    return value if isinstance(value, str) else ""


def _fenced(text: str, language: str) -> str:
    longest = max((len(run) for run in re.findall(r"`{3,}", text)), default=2)
    fence = "`" * (longest + 1)
    return f"{fence}{language}\n{text}\n{fence}"
