"""What a credential looks like: each kind, the words it cannot do without, and its finder.

Detection is detect-secrets' own plugins (their patterns and, for JWTs and private keys, their
checks). Their verification is never called: it sends the secret to the provider's API. The
shapes that detect-secrets 1.5 does not know are our own patterns, each saying what it adds.
Imported only when a text is scanned (kbuild.text.secrets): the plugins take about 50 ms.
"""
from __future__ import annotations

import importlib
import re
import sys
import types
from collections.abc import Callable, Iterable, Iterator
from typing import Any


class _ImportedOnUse(types.ModuleType):
    """A stand-in for a module that is imported for real the first time anything is looked up
    in it."""

    def __getattr__(self, name: str) -> Any:  # only for what a bare module does not have
        if sys.modules.get(self.__name__) is self:
            del sys.modules[self.__name__]
        return getattr(importlib.import_module(self.__name__), name)


# detect-secrets imports requests for its verification, which kbuild never calls: 95 of the
# 145 ms its plugins took to import, paid by every build that converts a source (python -X
# importtime -c "import kbuild.text.secret_kinds"). While they are
# imported, `requests` is a stand-in, which a release that does use it at import turns into
# the real one.
_absent = "requests" not in sys.modules
if _absent:
    sys.modules["requests"] = _ImportedOnUse("requests")
try:
    from detect_secrets.filters.heuristic import is_indirect_reference, is_not_alphanumeric_string, is_templated_secret
    from detect_secrets.plugins.aws import AWSKeyDetector
    from detect_secrets.plugins.azure_storage_key import AzureStorageKeyDetector
    from detect_secrets.plugins.base import RegexBasedDetector
    from detect_secrets.plugins.basic_auth import BasicAuthDetector
    from detect_secrets.plugins.github_token import GitHubTokenDetector
    from detect_secrets.plugins.gitlab_token import GitLabTokenDetector
    from detect_secrets.plugins.jwt import JwtTokenDetector
    from detect_secrets.plugins.keyword import CONFIG_DENYLIST_REGEX_TO_GROUP, KeywordDetector
    from detect_secrets.plugins.npm import NpmDetector
    from detect_secrets.plugins.private_key import PrivateKeyDetector
    from detect_secrets.plugins.pypi_token import PypiTokenDetector
    from detect_secrets.plugins.sendgrid import SendGridDetector
    from detect_secrets.plugins.slack import SlackDetector
    from detect_secrets.plugins.square_oauth import SquareOAuthDetector
    from detect_secrets.plugins.stripe import StripeDetector
finally:
    if _absent and isinstance(sys.modules.get("requests"), _ImportedOnUse):
        del sys.modules["requests"]  # anyone else's `import requests` gets the real one

Finder = Callable[[str], Iterable[str]]  # the secret values a text holds, as they stand in it


def _matches(*patterns: re.Pattern[str], group: bool = False) -> Finder:
    """The finder of patterns: each match whole, or its last group where that is the secret
    itself (the password of a URL)."""
    return lambda text: (m.group((m.lastindex or 0) if group else 0) for p in patterns for m in p.finditer(text))


def _detector(plugin: RegexBasedDetector, group: bool = False) -> Finder:
    """A detect-secrets plugin's patterns as a finder. Its own analyze_string yields a pattern's
    groups when it has any, which for some (GitHub's, GitLab's) is the token's prefix alone."""
    return _matches(*plugin.denylist, group=group)


# The private key detector names the header line only; the whole block is the secret.
PRIVATE_KEY_BLOCK = re.compile(r"-----BEGIN[A-Z0-9 ]*PRIVATE KEY[A-Z ]*-----[\s\S]*?(?:-----END[A-Z0-9 ]*PRIVATE KEY[A-Z ]*-----|\Z)"
                               r"|PuTTY-User-Key-File-2:[\s\S]*?(?:Private-MAC: \S+|\Z)")


PRIVATE_KEY = PrivateKeyDetector()


def _private_keys(text: str) -> Iterator[str]:
    return (block for block in PRIVATE_KEY_BLOCK.findall(text) if any(PRIVATE_KEY.analyze_string(block)))


# The JWT detector's pattern ends lazily, so its match stops before the signature; the token is
# taken whole here and kept only if the detector's validator says it is one.
JWT = re.compile(r"eyJ[A-Za-z0-9_=-]+\.[A-Za-z0-9_=-]+(?:\.[A-Za-z0-9_.+/=-]*)?")


def _jwts(text: str) -> Iterator[str]:
    return (token.rstrip(".") for token in JWT.findall(text) if JwtTokenDetector.is_formally_valid(token.rstrip(".")))


# detect-secrets finds an AWS secret access key only quoted near "aws ... key"; prose ("the AWS
# secret access key is ...") and shell assignments leave it unquoted. Same shape, quotes optional,
# and mixed case required so that a 40-digit hex hash next to the word "aws" is not taken.
AWS_SECRET_KEY = re.compile(r"(?i)\baws.{0,30}?(?:key|secret|token|pass|pwd|pw).{0,30}?"
                            r"(?<![A-Za-z0-9/+])((?-i:(?=[A-Za-z0-9/+]{0,39}[a-z])(?=[A-Za-z0-9/+]{0,39}[A-Z]))[A-Za-z0-9/+]{40})(?![A-Za-z0-9/+=])")
# GitHub's fine-grained tokens (github_pat_, 82 characters after it) are newer than its detector.
GITHUB_PAT = re.compile(r"\bgithub_pat_\w{82}\b")
# OpenAI's project and service keys (sk-proj-..., sk-svcacct-...) and other sk- keys: the
# detector knows only the legacy shape with T3BlbkFJ in its middle, which this covers too.
SK_KEY = re.compile(r"\bsk-(?:proj-|svcacct-|admin-)?[A-Za-z0-9_-]{20,}\b")

# Google's API keys (Maps, Firebase, Gemini...): AIza and 35 more characters. detect-secrets 1.5
# has no plugin for them; this is the shape Google documents and gitleaks' gcp-api-key rule finds.
GOOGLE_API_KEY = re.compile(r"(?<![\w-])AIza[0-9A-Za-z_-]{35}(?![\w-])")

KEYWORDS = KeywordDetector()


def _assigned(text: str) -> Iterator[str]:
    """Values assigned to a secret-sounding name (`password: ...`, `AWS_SECRET_ACCESS_KEY=...`),
    quoted or not: detect-secrets' config-file patterns, run on the lines that hold a keyword,
    with its own filters and ours for what prose and code assign that is no secret."""
    for line in _candidate_lines(text):
        values = list(KEYWORDS.analyze_string(line, CONFIG_DENYLIST_REGEX_TO_GROUP))
        # `password = request.form["password"]` names where a secret is; its filter is asked last,
        # being the slow one (its pattern is quadratic in the line: 3 ms for a line of prose).
        if values and not is_indirect_reference(line):
            yield from filter(None, (_plausible(value, line) for value in values))


def _plausible(value: str, line: str) -> str:
    """The secret in a keyword's value, or "" when the value reads as words or as code."""
    at = line.find(value)
    quoted = at > 0 and line[at - 1] in "'\"`"
    token = value.split()[0].rstrip(".,;:)`") if value.split() else ""
    if (len(token) < 6 or is_templated_secret(token) or is_not_alphanumeric_string(token) or token[0] in "$%<{(["
            or "..." in token or "\u2026" in token):  # `OPENAI_API_KEY=sk-...` in a README is a placeholder
        return ""
    if quoted:
        return value if value.strip() == token else ""  # a quoted sentence is a label, not a secret
    # Unquoted, a secret has a digit or a symbol: `form.password`, `None`, `Password: must be set`,
    # `password_field = user_input` and `secret_name: prod/db/app` are names, words and paths.
    if re.fullmatch(r"[A-Za-z_./-]+", token) or "://" in token:
        return ""
    return token


# Each kind: the words (lower case) it cannot match without, then its finder. A substring test
# is C-fast and lets a page with none of them skip every regex: `kbuild check` scans every page.
# Measured against the hand-written patterns this replaced (find_secrets on every page): this
# repository's kb/ and docs/ (0.3 MB) 46 ms against 34 ms; with its code too (1.0 MB) 117 ms
# against 103 ms; the 2,000-fact store of benchmarks/check.py (3.1 MB, no secret, no hint) 361 ms
# against 161 ms, nearly all of it these 41 substring tests (1.5 ns a character each; a pattern
# of all of them, or a gate such as "gh", costs more). `kbuild check` on the 10,000-fact store:
# 8.86 s against 7.22 s, as it now also reads text.md and the Originals and imports detect-secrets
# (`python benchmarks/check.py --facts 10000 --runs 3`, both in one run). Without the hints, and
# testing each line for keywords, 5 times as much.
# The keyword detector's denylist (api_?key, db_?pass, passwd, pwd, secret, contraseña...) by the
# words each entry holds.
KEYWORD_HINTS = ("key", "pass", "pwd", "secret", "contrase")
# The keyword patterns need one of those words and a ':' or '=' on its line; those lines are found
# from the words out, in the text lowered (ASCII only, so that positions stay). Measured on 0.3 MB
# of pages: a case-blind pattern took 57 ms (re.I tries every position), this 6 ms.
KEYWORD = re.compile("|".join(KEYWORD_HINTS))
ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def _candidate_lines(text: str) -> Iterator[str]:
    end = -1
    for word in KEYWORD.finditer(text.translate(ASCII_LOWER)):
        if word.start() <= end:
            continue  # a line already given
        start, end = text.rfind("\n", 0, word.start()) + 1, text.find("\n", word.end())
        end = len(text) if end < 0 else end
        line = text[start:end]
        if ":" in line or "=" in line:
            yield line


KINDS: dict[str, tuple[tuple[str, ...], Finder]] = {
    "a private key": (("private key", "putty-user-key"), _private_keys),
    "an AWS access key": (("akia", "asia", "abia", "acca", "a3t", "aws"), _detector(AWSKeyDetector(), group=True)),
    "an AWS secret access key": (("aws",), _matches(AWS_SECRET_KEY, group=True)),
    "an Azure storage key": (("accountkey=",), _detector(AzureStorageKeyDetector())),
    "a GitHub token": (("ghp_", "gho_", "ghu_", "ghs_", "ghr_"), _detector(GitHubTokenDetector())),
    "a GitHub fine-grained token": (("github_pat_",), _matches(GITHUB_PAT)),
    "a Google API key": (("aiza",), _matches(GOOGLE_API_KEY)),
    "a GitLab token": (("glpat-", "gldt-", "glft-", "glsoat-", "glrt-", "gr1348941", "glcbt-", "glimt-", "glptt-",
                        "glagent-", "gloas-"), _detector(GitLabTokenDetector())),
    "a JSON web token": (("eyj",), _jwts),
    "an npm token": (("_authtoken",), _detector(NpmDetector(), group=True)),
    "an OpenAI-style key": (("sk-",), _matches(SK_KEY)),
    "a PyPI token": (("pypi-",), _detector(PypiTokenDetector())),
    "a SendGrid key": (("sg.",), _detector(SendGridDetector())),
    "a Slack token or webhook": (("xox", "hooks.slack.com"), _detector(SlackDetector())),
    "a Square key": (("sq0csp-",), _detector(SquareOAuthDetector())),
    "a Stripe key": (("k_live_",), _detector(StripeDetector())),
    "a password in a URL": (("://",), _detector(BasicAuthDetector(), group=True)),
    "an assigned secret": (KEYWORD_HINTS, _assigned),
}
