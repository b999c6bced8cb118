"""A faithful scripted model: a valid, grounded answer to each question kbuild asks, made from
the request itself (the chunk's own words), for ScriptedServer.

    with ScriptedServer(faithful_reply) as server: ...

It reads the request as the server received it (the schema's name says which question), so it
also proves that everything a reply is made from went out in the request.
"""
from __future__ import annotations

import json
import re

from openai_server import Reply, message_text

SOURCE = re.compile(r"<source>\n(.*?)\n</source>", re.S)


def sources(request: dict) -> list[str]:
    """The untrusted blocks of the user message, in order."""
    for message in reversed(request["messages"]):  # the question, not a worked example or a retry's note
        found = SOURCE.findall(message_text(message["content"])) if message.get("role") == "user" else []
        if found:
            return found
    return []


def first_sentence(text: str) -> str:
    """The first sentence of the prose, in plain words (links and images by their words)."""
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", re.sub(r"<[^>]+>", "", text))
    words = " ".join(line for line in text.splitlines() if line.strip() and not line.lstrip().startswith(("#", "=", "-", "`")))
    match = re.search(r"(.+?[.!?])(\s|$)", words)
    return (match.group(1) if match else words)[:300]


def answer(request: dict) -> dict | str:
    fmt = request.get("response_format") or {}
    if not fmt and "yes or no" in message_text(request["messages"][0]["content"]):
        return "no"  # the meaning judge: never "same" without evidence
    schema = fmt.get("json_schema", {}) if fmt.get("type") == "json_schema" else {}
    name = schema.get("name") or _name_from_prompt(request)
    blocks = sources(request)
    if name == "ChunkReading":
        chunk = blocks[-1]
        views = [p for p in schema.get("schema", {}).get("properties", {}) if p not in ("rewrite", "summary")] \
            or re.findall(r'"([\w-]+)" \(', message_text(request["messages"][0]["content"]))
        sentence = first_sentence(chunk)
        return {"rewrite": chunk, "summary": sentence, **{view: [sentence] for view in views}}
    if name in ("SourceSummary", "Abstract"):
        first = blocks[0].splitlines()[0].lstrip("- ") if blocks and blocks[0] else ""
        return {"summary": first} if name == "SourceSummary" else {"abstract": first}
    if name == "Grounding":
        return {"unsupported": []}
    if name in ("Section", "Synthesis"):
        # fact 1's first sentence that fits a statement's bound (a synthesis shows each fact's source first)
        first = re.search(r"\[1\] (?:\([^)\n]*\) )?(.{1,300}?[.!?])(\s|$)", blocks[0] if blocks else "")
        return {"statements": [{"text": first.group(1), "cites": [1]}] if first else []}
    if name == "Spec":
        return {"requirements": []}
    if name == "DisagreementVerdict":
        return {"reasoning": "Both speak of the same thing and give it two values.", "verdict": "disagree"}
    if name == "FigureText":
        return {"text": blocks[0] if blocks else ""}
    raise ValueError(f"no scripted answer for {name!r}")


def _name_from_prompt(request: dict) -> str:
    """JSON mode sends no schema name: the schema in the prompt says which question it is."""
    text = " ".join(message_text(m["content"]) for m in request["messages"])
    for key, name in (('"rewrite"', "ChunkReading"), ('"unsupported"', "Grounding"), ('"statements"', "Section"),
                      ('"requirements"', "Spec"), ('"abstract"', "Abstract"), ('"summary"', "SourceSummary")):
        if key in text:
            return name
    return ""


def faithful_reply(request: dict) -> Reply:
    got = answer(request)
    return Reply(got if isinstance(got, str) else json.dumps(got))


def quoted_sentence(text: str) -> str:
    """The first sentence of a text as it is written, its links, code and markup with it: what a
    model that quotes its source copies (headings, fences and table rows are no sentences; a list
    item's number is not one either)."""
    lines = [re.sub(r"^(\d+[.)]|[-*+])\s+", "", line.strip()) for line in text.splitlines()
             if line.strip() and not line.lstrip().startswith(("#", "```", "~~~", "|", "=", "-" * 3))]
    words = " ".join(lines) or " ".join(text.split())  # a part that is all table: its first words
    match = re.search(r"(.+?[.!?])(\s|$)", words)
    sentence = match.group(1) if match else words
    if len(sentence) > 280:  # the schema's bound: a long address goes first, then the words past it
        sentence = re.sub(r"\]\([^)\s]{40,}\)", "]", sentence)[:280].rsplit(" ", 1)[0]
    return sentence


def quoting_reply(request: dict) -> Reply:
    """A faithful model that quotes its source word for word, markup and all: its rewrite is the
    chunk, its summaries and picks the first sentence as written (a link, `<https://...>`, an
    HTML tag or a page marker in it is copied too)."""
    got = answer(request)
    if isinstance(got, dict):
        blocks = sources(request)
        if "rewrite" in got and blocks:
            sentence = quoted_sentence(blocks[-1])
            got = {key: ([sentence] if isinstance(value, list) else value) for key, value in got.items()}
            got["summary"] = sentence
        elif ("summary" in got or "abstract" in got) and blocks:
            key = "summary" if "summary" in got else "abstract"
            got[key] = quoted_sentence(blocks[0].lstrip("- "))
    return Reply(got if isinstance(got, str) else json.dumps(got))
