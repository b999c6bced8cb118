"""A conversation transcript (JSON Lines, one message a line: role, content, id) -> Markdown.

Each message becomes a section under a heading that names its role and id, so the slicer cuts
at message boundaries (a message longer than a chunk is cut inside it, at a paragraph or a
sentence, like any section) and every fact's headings say who said it, in which message. Only
a person's own words may become settled knowledge: the heading of each message that is not the
user's says that it is a candidate.
"""
from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, ValidationError, field_validator

from .model import Converted
from .text import decode, normalise_newlines

Role = Literal["user", "assistant", "system", "tool", "developer"]


class Message(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)  # a log may carry timestamps, tokens...

    id: str
    role: Role
    content: str

    @field_validator("id", mode="before")
    @classmethod
    def _id(cls, value: Any) -> str:
        return str(value).strip() if isinstance(value, (str, int)) and str(value).strip() else _missing("id")

    @field_validator("content", mode="before")
    @classmethod
    def _content(cls, value: Any) -> str:
        """A string, or the parts of a multi-part message (OpenAI's and Anthropic's form): their text."""
        if isinstance(value, list):
            return "\n\n".join(str(p.get("text", "")) for p in value if isinstance(p, dict) and p.get("text"))
        return value if isinstance(value, str) else _missing("content")


def _missing(field: str) -> str:
    raise ValueError(f"{field} must be a non-empty string")


def messages(text: str) -> list[Message] | None:
    """The messages of a transcript, or None when the text is not one (any other JSON Lines)."""
    found = []
    for line in text.splitlines():
        if not line.strip():
            continue
        try:
            found.append(Message.model_validate(json.loads(line)))
        except (ValueError, ValidationError):
            return None
    return found or None


def heading(message: Message) -> str:
    """A message's heading: its role, its id, and whether its words may be taken as settled.
    Every fact cut from the message carries it in its breadcrumb."""
    if message.role == "user":
        return f"{message.role}, message {message.id} (the user's own words)"
    return f"{message.role}, message {message.id} (candidate: not the user's words, not confirmed)"


def render(found: list[Message]) -> str:
    parts = ["# Conversation transcript\n"]
    for message in found:
        body = normalise_newlines(message.content).strip() or "(empty message)"
        # a heading inside a message would outrank the message's own: it is shown as text
        body = "\n".join(("\\" + line) if line.lstrip().startswith("#") else line for line in body.splitlines())
        parts.append(f"## {heading(message)}\n\n{body}\n")
    return "\n".join(parts)


def convert_transcript(data: bytes) -> Converted | None:
    """The transcript as Markdown, or None for JSON Lines that are not a transcript."""
    text, warnings = decode(data)
    found = messages(text)
    if found is None:
        return None
    return Converted(text=render(found), pages=[], figures=[], kind="markdown", warnings=warnings)


def role_of(data: bytes, message_id: str) -> str | None:
    """The role of one message of a transcript (None when it has no such message)."""
    found = messages(decode(data)[0]) or []
    return next((m.role for m in found if m.id == message_id), None)
