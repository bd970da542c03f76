"""Remove secrets (API keys, tokens, passwords, private keys, credentials in URLs) before anything is stored or sent to a model.

The patterns are detect-secrets' (Yelp's maintained set: every regex-based
plugin, e.g. AWS, GitHub, GitLab, Slack, Stripe, JWT, credentials in URLs, and
its keyword rules for `password=...` / `"secret": "..."`), plus the few shapes
it leaves to entropy scans or does not cover whole, listed in `_EXTRA`.

- `redact_text(s)` replaces each secret inside `s` by `[REDACTED]`.
- `redact_id(s)` keeps an identifier usable: one that contains a secret
  becomes `redacted-<sha256 prefix>`, the same every time, so spans of one run
  still land in one run and links keep working.
- `redact(value)` walks a JSON-like value: identifier fields (`ID_KEYS`) go
  through `redact_id`, values under secret-sounding keys are replaced whole,
  every other string through `redact_text`.

See docs/security.md for what is redacted, where, and what is not.
"""

from __future__ import annotations

import hashlib
import re
from functools import lru_cache
from collections.abc import Iterator
from typing import Any

from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
from detect_secrets.plugins.base import RegexBasedDetector
from detect_secrets.plugins.ip_public import IPPublicDetector
from detect_secrets.plugins.keyword import DENYLIST as SECRET_KEYWORDS

REDACTED = "[REDACTED]"
ID_PREFIX = "redacted-"
# Fields that identify something (a run, a span, an agent): hashed, not blanked.
ID_KEYS = frozenset({"id", "trace_id", "span_id", "parent_span_id", "native_id", "native_step", "agent", "name"})

# Values under keys with these names are secrets whatever they look like.
_SECRET_KEY = re.compile(r"(api[_-]?key|secret|password|passwd|pwd|token|authorization|auth[_-]?header|credential|cookie|private[_-]?key)", re.I)
# Token counters are not secrets.
_NOT_SECRET_KEY = re.compile(r"(_tokens?$|^tokens?_|token_count|max_tokens|tokens$)", re.I)

# (pattern, groups): the secret is the whole match (groups empty) or the listed groups.
_Pattern = tuple[re.Pattern[str], tuple[int, ...]]


def _detect_secrets_patterns() -> list[_Pattern]:
    out: list[_Pattern] = []
    # The registry's classes, as plain objects: detect-secrets' typing of them differs between releases.
    plugins: list[Any] = list(get_mapping_from_secret_type_to_class().values())
    for plugin in plugins:
        # A public IP address is not a credential; the entropy plugins flag every hex id.
        if RegexBasedDetector not in plugin.__mro__ or plugin is IPPublicDetector:
            continue
        for regex in plugin().denylist:
            out.append((regex, tuple(range(1, regex.groups + 1))))
    return out


# detect-secrets' keyword list (password, passwd, pwd, secret, api_key, db_pass,
# private_key, ...) plus the token words it leaves out. Its own keyword regexes
# (one per language's assignment syntax) cost several times all the other
# patterns together; one pattern over the same words finds the same
# assignments: `password=abc12`, `"password": "..."`, `token: xyz`.
_KEYWORDS = "|".join([*SECRET_KEYWORDS, "access_?key", "secret_?key", "access_?token", "auth_?token", "refresh_?token", "token", "auth"])
_ASSIGNMENT = re.compile(
    rf"(?<![A-Za-z])(?:{_KEYWORDS})(?![A-Za-z])[\w.-]*[\"'\]]?\s*(?:=|:|=>|:=)\s*"
    rf"(?:\"([^\"\n]+)\"|'([^'\n]+)'|(?!\d+(?:[\s,;}}\"')]|$))([^\s\"',;&}}<>]{{3,}}))",
    re.I,
)
# Every pattern needs one of these to match (a keyword, a URL, or a run of ten
# characters of the alphabets keys are written in); most strings of a trace
# (agent names, kinds, short messages) have none and skip the full scan.
_LONG_RUN = re.compile(r"[A-Za-z0-9_+/=.-]{10}")
# Substrings of every keyword above (each of detect-secrets' words holds key, pass, pwd, secret or contrase).
_CANDIDATE_WORDS = ("key", "pass", "pwd", "secret", "contrase", "token", "auth", "bearer", "basic", "private", "://")


def _candidate(text: str) -> bool:
    if _LONG_RUN.search(text):
        return True
    low = text.lower()
    return any(word in low for word in _CANDIDATE_WORDS)


_EXTRA: list[_Pattern] = [
    # A whole PEM private key (detect-secrets flags only its BEGIN line).
    (re.compile(r"-----BEGIN[A-Z ]*PRIVATE KEY(?: BLOCK)?-----.*?(?:-----END[A-Z ]*PRIVATE KEY(?: BLOCK)?-----|\Z)", re.S), ()),
    # HTTP credentials, however short.
    (re.compile(r"\b(?:Bearer|Basic|Token)\s+([A-Za-z0-9._~+/=-]{3,})", re.I), (1,)),
    # OpenAI/Anthropic-style keys, including short test keys (detect-secrets knows only the legacy long form).
    (re.compile(r"\bsk-(?:ant|proj|or|live|test|svcacct|admin)-[A-Za-z0-9_-]{4,}"), ()),
    (re.compile(r"\bsk-(?:(?=[A-Za-z0-9_-]*\d)[A-Za-z0-9_-]{6,}|[A-Za-z0-9_-]{16,})"), ()),
    (re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"), ()),
    (re.compile(r"\bgh[pousr]_[A-Za-z0-9]{20,}\b"), ()),
    (re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}"), ()),
    (re.compile(r"\bAIza[0-9A-Za-z_-]{30,}"), ()),
    # key=value / key: value with a secret-sounding key, quoted or not (a plain count such as max_tokens=512 is not one).
    (_ASSIGNMENT, (1, 2, 3)),
    # A whole JSON Web Token, signature included.
    (re.compile(r"\beyJ[A-Za-z0-9_-]+\.eyJ[A-Za-z0-9_-]*\.[A-Za-z0-9_-]*"), ()),
    # A bare AWS secret access key: 40 base64 characters with upper, lower and digits, standing alone.
    (re.compile(r"(?<![A-Za-z0-9/+=])(?=[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=]))(?=[^\s]*[a-z])(?=[^\s]*[A-Z])(?=[^\s]*[0-9])[A-Za-z0-9/+]{40}"), ()),
    # user:password@ in any URL.
    (re.compile(r"\b[a-z][a-z0-9+.-]*://[^\s:/@]+:([^\s@/]+)@", re.I), (1,)),
]
_PATTERNS: list[_Pattern] = _detect_secrets_patterns() + _EXTRA


def _secret_spans(text: str) -> Iterator[tuple[int, int]]:
    for pattern, groups in _PATTERNS:
        for match in pattern.finditer(text):
            if not groups:
                yield match.span()
                continue
            for group in groups:
                if match.group(group):
                    yield match.span(group)


def find_secrets(text: str) -> list[tuple[int, int]]:
    """The (start, end) spans of secrets in `text`, merged and in order."""
    merged: list[tuple[int, int]] = []
    for start, end in sorted(_secret_spans(text)):
        if start == end:
            continue
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


def redact_text(text: str) -> str:
    if len(text) <= 512:
        return _redact_short(text)
    return _redact(text)


@lru_cache(maxsize=65536)
def _redact_short(text: str) -> str:
    # Traces repeat their short strings (agent and tool names, roles, models) step after step.
    return _redact(text)


def clear_cache() -> None:
    """Forget cached short strings (for measurements that must start cold)."""
    _redact_short.cache_clear()


def _redact(text: str) -> str:
    if not _candidate(text):
        return text
    spans = find_secrets(text)
    if not spans:
        return text
    out, last = [], 0
    for start, end in spans:
        out += [text[last:start], REDACTED]
        last = end
    out.append(text[last:])
    return "".join(out)


def redact_id(value: str) -> str:
    """`value` unchanged, or `redacted-<hash>` if it contains a secret (the same value always maps to the same id)."""
    if redact_text(value) == value:
        return value
    return ID_PREFIX + hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()[:24]


@lru_cache(maxsize=4096)
def is_secret_key(key: str) -> bool:
    return bool(_SECRET_KEY.search(key)) and not _NOT_SECRET_KEY.search(key)


# Inline media bytes (Media.data): base64 of an image or a video frame, not
# text; a pattern matching inside it by chance would corrupt the picture.
_BASE64_BLOB = re.compile(r"(?:[A-Za-z0-9+/]{4}){16,}(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?")


def redact(value: Any, key: str | None = None) -> Any:
    """Return a copy of a JSON-like value with secrets replaced (identifiers hashed, see `redact_id`)."""
    if isinstance(value, str):
        if key == "data" and _BASE64_BLOB.fullmatch(value):
            return value
        return redact_id(value) if key in ID_KEYS else redact_text(value)
    if isinstance(value, dict):
        out = {}
        for k, v in value.items():
            if isinstance(k, str) and is_secret_key(k) and v not in (None, "") and not isinstance(v, (dict, list)):
                out[k] = REDACTED
            else:
                out[redact_text(k) if isinstance(k, str) else k] = redact(v, k if isinstance(k, str) else None)
        return out
    if isinstance(value, list):
        return [redact(v, key) for v in value]
    return value
