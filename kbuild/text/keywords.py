"""The requirement keywords of RFC 2119 (and RFC 8174: only in capitals are they keywords)."""
from __future__ import annotations

import re

# Longest first, so that "MUST NOT" is one keyword, not "MUST": a rewrite that drops the NOT
# says the opposite.
KEYWORDS = ("MUST NOT", "SHALL NOT", "SHOULD NOT", "NOT RECOMMENDED", "MUST", "SHALL", "SHOULD", "MAY",
            "REQUIRED", "RECOMMENDED", "OPTIONAL")
KEYWORD = re.compile(r"\b(" + "|".join(KEYWORDS) + r")\b")
