"""An Outlook message (.msg, an OLE compound file) as Markdown, with olefile: the subject as the
heading, then who sent it, to whom, the attachments' names, and the plain-text body (the HTML
body, as a web page's text, when there is no plain one). Properties are read from the streams
MS-OXMSG names `__substg1.0_TTTTYYYY` (tag, then type: 001F UTF-16, 001E 8-bit, 0102 bytes).
"""
from __future__ import annotations

import io

import olefile

from ..text.markdown import escape_text
from .html import html_to_markdown
from .model import Converted

SUBJECT, SENDER_NAME, SENDER_ADDRESS, TO, CC = "0037", "0C1A", "0C1F", "0E04", "0E03"
BODY, HTML_BODY, ATTACHMENT_NAME, ATTACHMENT_SHORT_NAME = "1000", "1013", "3707", "3704"


def convert_msg(data: bytes) -> Converted:
    with olefile.OleFileIO(io.BytesIO(data)) as message:
        def prop(tag: str, storage: str = "") -> str:
            prefix = f"{storage}/" if storage else ""
            for kind, codec in (("001F", "utf-16-le"), ("001E", "cp1252"), ("0102", "utf-8")):
                stream = f"{prefix}__substg1.0_{tag}{kind}"
                if message.exists(stream):
                    return message.openstream(stream).read().decode(codec, errors="replace").rstrip("\x00")
            return ""

        subject = _one_line(prop(SUBJECT)) or "(no subject)"
        sender, address = _one_line(prop(SENDER_NAME)), _one_line(prop(SENDER_ADDRESS))
        if address and address != sender:
            sender = f"{sender} ({address})" if sender else address
        fields = [("From", sender), ("To", _one_line(prop(TO))), ("Cc", _one_line(prop(CC)))]
        attachments = sorted({entry[0] for entry in message.listdir(streams=False, storages=True)
                              if entry[0].startswith("__attach_version1.0_")})
        names = [_one_line(prop(ATTACHMENT_NAME, a) or prop(ATTACHMENT_SHORT_NAME, a)) for a in attachments]
        fields.append(("Attachments", ", ".join(n for n in names if n)))
        body = prop(BODY)
        if not body.strip():
            body = html_to_markdown(prop(HTML_BODY))
        else:
            body = "\n".join(escape_text(line, line_start=True) for line in body.replace("\r\n", "\n").split("\n"))

    lines = [f"# {escape_text(subject)}", ""]
    lines += [f"- {label}: {escape_text(value)}" for label, value in fields if value]
    text = "\n".join(lines).rstrip() + "\n\n" + body.strip() + "\n"
    return Converted(text=text, kind="email")


def _one_line(text: str) -> str:
    return " ".join(text.split())
