"""Remove secrets (API keys, bearer tokens, passwords) before anything is stored or sent to a model."""

from __future__ import annotations

import functools
import re
from typing import Any

REDACTED = "[REDACTED]"

# Values under keys with these names are secrets whatever they look like.
_SECRET_KEY = re.compile(r"(api[_-]?key|secret|password|passwd|token|authorization|auth[_-]?header|credential|cookie)", re.I)
# Token counters are not secrets.
_NOT_SECRET_KEY = re.compile(r"(_tokens?$|^tokens?_|token_count|max_tokens|tokens$)", re.I)

_SECRET_TEXT = [
    re.compile(r"\b(Bearer|Basic)\s+[A-Za-z0-9._~+/=-]{8,}", re.I),
    re.compile(r"\bsk-(?:ant-|proj-|or-)?[A-Za-z0-9_-]{16,}"),
    re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"),
    re.compile(r"\bgh[pousr]_[A-Za-z0-9]{30,}\b"),
    re.compile(r"\bxox[abprs]-[A-Za-z0-9-]{10,}"),
    re.compile(r"\bAIza[0-9A-Za-z_-]{30,}"),
    re.compile(r"((?:api[_-]?key|token|secret|password)\s*[=:]\s*)['\"]?[^\s'\",;&]{6,}", re.I),
]
# Literals (lowercase) one of which any match of the pattern at the same
# position contains. Python's `re` scans a pattern starting with \b at every
# character (5-15 µs per pattern on a few hundred characters); a substring test
# on the lowercased text is ~100 times cheaper, so a pattern runs only on text
# that holds one of its hints. Keep the two lists in step.
_HINTS = [
    ("bearer", "basic"),
    ("sk-",),
    ("akia", "asia"),
    ("ghp_", "gho_", "ghu_", "ghs_", "ghr_"),
    ("xox",),
    ("aiza",),
    ("api", "token", "secret", "password"),
]
assert len(_HINTS) == len(_SECRET_TEXT)
_ANY_HINT = re.compile("|".join(re.escape(hint) for hints in _HINTS for hint in hints))


def redact_text(text: str) -> str:
    lowered = text.lower()
    if _ANY_HINT.search(lowered) is None:
        return text
    for pattern, hints in zip(_SECRET_TEXT, _HINTS):
        if not any(hint in lowered for hint in hints):
            continue
        if pattern.groups:
            text = pattern.sub(lambda m: (m.group(1) + " " if m.group(1).lower() in ("bearer", "basic") else m.group(1)) + REDACTED, text)
        else:
            text = pattern.sub(REDACTED, text)
    return text


@functools.lru_cache(maxsize=4096)
def is_secret_key(key: str) -> bool:
    return bool(_SECRET_KEY.search(key)) and not _NOT_SECRET_KEY.search(key)


def redact(value: Any) -> Any:
    """Return a copy of a JSON-like value with secrets replaced by [REDACTED]."""
    if isinstance(value, str):
        return redact_text(value)
    if isinstance(value, dict):
        return {
            k: (REDACTED if isinstance(k, str) and is_secret_key(k) and v not in (None, "") and not isinstance(v, (dict, list)) else redact(v))
            for k, v in value.items()
        }
    if isinstance(value, list):
        return [redact(v) for v in value]
    return value
