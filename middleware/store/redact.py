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
import re._parser as regex_parser  # the stdlib's own regex parser (public as sre_parse before 3.11)
from functools import lru_cache
from collections.abc import Iterator
from typing import Any, NamedTuple


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
    from detect_secrets.core.plugins.util import get_mapping_from_secret_type_to_class
    from detect_secrets.plugins.base import RegexBasedDetector
    from detect_secrets.plugins.ip_public import IPPublicDetector

    out: list[_Pattern] = []
    # The registry's classes, as plain objects: detect-secrets' typing of them differs between releases.
    plugins: list[Any] = list(get_mapping_from_secret_type_to_class().values())
    for plugin in plugins:
        # A public IP address is not a credential; the entropy plugins flag every hex id.
        if RegexBasedDetector not in plugin.__mro__ or plugin is IPPublicDetector:
            continue
        for regex in plugin().denylist:
            groups = tuple(range(1, regex.groups + 1))
            # A short group is a token's tag, not its secret (GitLab's `(glpat|...)-...`, GitHub's
            # `(ghp|...)_...`): detect-secrets reports the tag alone; redact the whole match.
            if any(width < 10 for width in _group_widths(regex).values()):
                groups = ()
            out.append((regex, groups))
    return out


def _group_widths(pattern: re.Pattern[str]) -> dict[int, int]:
    """Each capturing group's longest possible match."""
    widths: dict[int, int] = {}

    def walk(items: Any) -> None:
        for op, arg in items:
            if op is regex_parser.SUBPATTERN:
                if arg[0] is not None:
                    widths[arg[0]] = int(arg[-1].getwidth()[1])
                walk(arg[-1])
            elif op in (regex_parser.MAX_REPEAT, regex_parser.MIN_REPEAT, regex_parser.POSSESSIVE_REPEAT):
                walk(arg[2])
            elif op is regex_parser.BRANCH:
                for branch in arg[1]:
                    walk(branch)
            elif op in (regex_parser.ASSERT, regex_parser.ASSERT_NOT):
                walk(arg[1])

    walk(regex_parser.parse(pattern.pattern, pattern.flags))
    return widths


# Every pattern needs one of these to match (a keyword, a URL, or a run of ten
# characters of the alphabets keys are written in); most strings of a trace
# (agent names, kinds, short messages) have none and skip the full scan.
# A run of ten characters of the alphabets keys are written in ([A-Za-z0-9_+/=.-]{10}), found by
# mapping every byte to "a" (in the alphabet) or " " and looking for ten "a"s: a regex tries
# each position in turn and costs several times as much on a paragraph of prose.
_KEY_BYTES = frozenset(b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_+/=.-")
_RUN_TABLE = bytes(0x61 if byte in _KEY_BYTES else 0x20 for byte in range(256))
_RUN = b"a" * 10
# Substrings of every keyword above (each of detect-secrets' words holds key, pass, pwd, secret or contrase),
# matched on the lower-cased text.
_CANDIDATE_WORDS = re.compile(r"key|pass|pwd|secret|contrase|token|auth|bearer|basic|private|://")


def _candidate(text: str) -> bool:
    if _RUN in text.encode("utf-8", "surrogatepass").translate(_RUN_TABLE):
        return True
    return _CANDIDATE_WORDS.search(text.lower()) is not None


# detect-secrets' keyword list (password, passwd, pwd, secret, api_key, db_pass,
# private_key, ...) plus the token words it leaves out. Its own keyword regexes
# (one per language's assignment syntax) cost several times all the other
# patterns together; one pattern over the same words finds the same
# assignments: `password=abc12`, `"password": "..."`, `token: xyz`.
# Header spellings (`x-api-key: ...`, `X-Auth-Token: ...`) join their words with a hyphen, which
# detect-secrets' `api_?key` does not allow.
def _assignment() -> re.Pattern[str]:
    from detect_secrets.plugins.keyword import DENYLIST as SECRET_KEYWORDS

    _KEYWORDS = "|".join([*SECRET_KEYWORDS, "access_?key", "secret_?key", "access_?token", "auth_?token", "refresh_?token", "token", "auth",
                          "api-key", "auth-key", "access-key", "secret-key", "access-token", "auth-token", "refresh-token"])
    # One level of JSON string escaping is seen through (`{\"password\": \"hunter5\"}`, an upstream's JSON
    # error body kept inside a JSON string): the key may close with `\"`, and a value may be `\"...\"` (group 3).
    # An unquoted value stops before a `\"` that closes the string it is in, so the text stays well escaped.
    return re.compile(
        rf"(?<![A-Za-z])(?:{_KEYWORDS})(?![A-Za-z])[\w.-]*\\?[\"'\]]?\s*(?:=|:|=>|:=)\s*"
        rf"(?:\"([^\"\n]+)\"|'([^'\n]+)'|\\\"((?:[^\"\\\n]|\\[^\"\n])+)\\\""
        rf"|(?!\d+(?:[\s,;}}\"')]|$))((?:[^\s\"',;&}}<>\\]|\\(?![\"'])){{3,}}))",
        re.I,
    )


def _extra() -> list[_Pattern]:
    return [
        # A whole PEM private key (detect-secrets flags only its BEGIN line).
        (re.compile(r"-----BEGIN[A-Z ]*PRIVATE KEY(?: BLOCK)?-----.*?(?:-----END[A-Z ]*PRIVATE KEY(?: BLOCK)?-----|\Z)", re.S), ()),
        # HTTP credentials, however short.
        (re.compile(r"\b(?:Bearer|Basic|Token)\s+([A-Za-z0-9._~+/=-]{3,})", re.I), (1,)),
        # OpenAI/Anthropic-style keys, including short test keys (detect-secrets knows only the legacy long form).
        (re.compile(r"\bsk-(?:ant|proj|or|live|test|svcacct|admin)-[A-Za-z0-9_-]{4,}"), ()),
        (re.compile(r"\bsk-(?:(?=[A-Za-z0-9_-]*\d)[A-Za-z0-9_-]{6,}|[A-Za-z0-9_-]{16,})"), ()),
        (re.compile(r"\b(?:AKIA|ASIA)[0-9A-Z]{16}\b"), ()),
        (re.compile(r"\bgh[pousr]_[A-Za-z0-9]{20,}\b"), ()),
        (re.compile(r"\bxox[a-z]-[A-Za-z0-9-]{10,}"), ()),
        (re.compile(r"\bAIza[0-9A-Za-z_-]{30,}"), ()),
        # Prefixed keys of services agents commonly call that detect-secrets has no plugin for: GitHub
        # fine-grained tokens, Hugging Face, Groq, Replicate, Perplexity, Tavily, LangSmith, Pinecone,
        # npm, DigitalOcean, Databricks, Google OAuth access tokens, Slack app tokens, Stripe test and
        # restricted keys (its plugin knows only the 24-character live ones).
        (re.compile(
            r"\b(?:github_pat_[A-Za-z0-9_]{20,}|hf_[A-Za-z0-9]{30,}|gsk_[A-Za-z0-9]{30,}|r8_[A-Za-z0-9]{30,}|pplx-[A-Za-z0-9]{30,}"
            r"|tvly-[A-Za-z0-9-]{20,}|lsv2_(?:pt|sk)_[0-9a-f]{32}_[0-9a-f]{10}|pcsk_[A-Za-z0-9_]{30,}|npm_[A-Za-z0-9]{36}"
            r"|dop_v1_[0-9a-f]{64}|dapi[0-9a-f]{32}|ya29\.[0-9A-Za-z_-]{20,}|xapp-[0-9A-Za-z-]{10,}|[rs]k_(?:live|test)_[0-9A-Za-z]{10,})"
        ), ()),
        # The credential of an `Authorization:` header whatever its scheme (Bearer and the like are
        # matched above; a bare key is not), and a whole `Cookie:` / `Set-Cookie:` header's value.
        # (Either inside one level of JSON string escaping too: `\"Authorization\": \"abc\"`.)
        (re.compile(r"\b(?:proxy-)?authorization\\?[\"']?\s*[:=]\s*\\?[\"']?(?:[A-Za-z0-9-]+\s+(?=\S))?((?:[^\s\"',;\\]|\\(?![\"'])){3,})", re.I), (1,)),
        (re.compile(r"\b(?:set-)?cookie\\?[\"']?\s*:\s*\\?[\"']?((?:[^\r\n\"'\\]|\\(?![\"'])){3,})", re.I), (1,)),
        # key=value / key: value with a secret-sounding key, quoted or not (a plain count such as max_tokens=512 is not one).
        (_assignment(), (1, 2, 3, 4)),
        # A whole JSON Web Token, signature included.
        (re.compile(r"\beyJ[A-Za-z0-9_-]+\.eyJ[A-Za-z0-9_-]*\.[A-Za-z0-9_-]*"), ()),
        # A bare AWS secret access key: 40 base64 characters with upper, lower and digits, standing alone.
        (re.compile(r"(?<![A-Za-z0-9/+=])(?=[A-Za-z0-9/+]{40}(?![A-Za-z0-9/+=]))(?=[^\s]*[a-z])(?=[^\s]*[A-Z])(?=[^\s]*[0-9])[A-Za-z0-9/+]{40}"), ()),
        # user:password@ in any URL.
        (re.compile(r"\b[a-z][a-z0-9+.-]*://[^\s:/@]+:([^\s@/]+)@", re.I), (1,)),
    ]

# Span and trace ids (16 and 32 lowercase hex digits) are the one kind of
# string that is new on every span, so the short-string cache never helps and
# every id used to go through all the patterns. Which patterns could match
# inside a string of lowercase hex digits at all is decided once, from each
# pattern's parsed form (`_can_match_within`); for such strings only those run.
# And no pattern runs on a string shorter than its shortest possible match.
_HEX = frozenset("0123456789abcdef")
_HEX_TEXT = re.compile(r"[0-9a-f]+")


def _char_within(code: int, flags: int, alphabet: frozenset[str]) -> bool:
    char = chr(code)
    if flags & re.I:
        return char.lower() in alphabet or char.upper() in alphabet
    return char in alphabet


def _class_within(items: list[Any], flags: int, alphabet: frozenset[str]) -> bool:
    """Whether a character class `[...]` can match some character of `alphabet` (True when unsure)."""
    negated = any(op is regex_parser.NEGATE for op, _ in items)
    for char in alphabet:
        hit = False
        for op, arg in items:
            if op is regex_parser.LITERAL:
                hit = _char_within(arg, flags, frozenset(char))
            elif op is regex_parser.RANGE:
                hit = any(arg[0] <= ord(c) <= arg[1] for c in ({char, char.lower(), char.upper()} if flags & re.I else {char}))
            elif op is regex_parser.CATEGORY:
                if arg is regex_parser.CATEGORY_DIGIT:
                    hit = char.isdigit()
                elif arg is regex_parser.CATEGORY_WORD:
                    hit = True
                else:
                    return True  # a negated or whitespace category: not worth deciding
            if hit:
                break
        if hit != negated:
            return True
    return False


def _can_match_within(items: Any, flags: int, alphabet: frozenset[str]) -> bool:
    """False only if every match of this parsed pattern must hold a character outside `alphabet`.

    Conservative: look-arounds, anchors and anything not listed count as
    "could match", so a pattern is only ever skipped for a string it cannot match.
    """
    for op, arg in items:
        if op is regex_parser.LITERAL:
            if not _char_within(arg, flags, alphabet):
                return False
        elif op is regex_parser.IN:
            if not _class_within(arg, flags, alphabet):
                return False
        elif op in (regex_parser.MAX_REPEAT, regex_parser.MIN_REPEAT, regex_parser.POSSESSIVE_REPEAT):
            low, _, sub = arg
            if low >= 1 and not _can_match_within(sub, flags, alphabet):
                return False
        elif op is regex_parser.SUBPATTERN:
            if not _can_match_within(arg[-1], flags | (arg[1] or 0), alphabet):
                return False
        elif op is regex_parser.BRANCH:
            if not any(_can_match_within(branch, flags, alphabet) for branch in arg[1]):
                return False
    return True


def _shortest_match(pattern: re.Pattern[str]) -> int:
    return int(regex_parser.parse(pattern.pattern, pattern.flags).getwidth()[0])


class _Tables(NamedTuple):
    patterns: list[_Pattern]
    sized: list[tuple[re.Pattern[str], tuple[int, ...], int]]  # (pattern, groups, shortest match), in `patterns` order
    hex_sized: list[tuple[re.Pattern[str], tuple[int, ...], int]]  # those that can match inside lowercase hex


# Lowercase hex shorter than this is something no pattern can match in (`_secret_spans` would skip them all):
# a new span or trace id on every span, answered without a scan or a place in the short-string cache.
# 0 (no shortcut) until `_tables` has been built; the first id that needs the scan builds it. A global and
# not a field of the tables: `redact_id` reads it for every id, and a call to the cached `_tables` costs
# about a fifth of a 16-digit id's whole redaction.
_HEX_SAFE_BELOW = 0


@lru_cache(maxsize=1)
def _tables() -> _Tables:
    """The patterns, compiled on first use: detect-secrets and the compiling cost ~0.2 s, which importing
    faultlens to trace (the tracer imports this module) should not pay before anything is stored."""
    global _HEX_SAFE_BELOW
    patterns = _detect_secrets_patterns() + _extra()
    sized = [(pattern, groups, _shortest_match(pattern)) for pattern, groups in patterns]
    hex_sized = [entry for entry in sized if _can_match_within(regex_parser.parse(entry[0].pattern, entry[0].flags), entry[0].flags, _HEX)]
    _HEX_SAFE_BELOW = min((shortest for _, _, shortest in hex_sized), default=2**31)
    return _Tables(patterns, sized, hex_sized)


def _secret_spans(text: str) -> Iterator[tuple[int, int]]:
    size = len(text)
    tables = _tables()
    for pattern, groups, shortest in tables.hex_sized if _HEX_TEXT.fullmatch(text) else tables.sized:
        if shortest > size:
            continue
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
    _KEY_INFO.clear()


def _redact(text: str) -> str:
    if not _candidate(text):
        return text
    spans = find_secrets(text)
    if spans and ";base64," in text:
        payloads = [m.span(1) for m in _MEDIA_DATA_URL.finditer(text)]
        spans = [(a, b) for a, b in spans if not any(start <= a and b <= end for start, end in payloads)]
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
    if len(value) < _HEX_SAFE_BELOW and _HEX_TEXT.fullmatch(value):
        return value
    if redact_text(value) == value:
        return value
    return ID_PREFIX + hashlib.sha256(value.encode("utf-8", "surrogatepass")).hexdigest()[:24]


@lru_cache(maxsize=4096)
def is_secret_key(key: str) -> bool:
    return bool(_SECRET_KEY.search(key)) and not _NOT_SECRET_KEY.search(key)


# Inline media bytes (Media.data): base64 of an image or a video frame, not
# text; a pattern matching inside it by chance would corrupt the picture.
_BASE64_BLOB = re.compile(r"(?:[A-Za-z0-9+/]{4}){16,}(?:[A-Za-z0-9+/]{2}==|[A-Za-z0-9+/]{3}=)?")
# The same bytes sent inline in a chat message (an image part's data URL): its payload is skipped too. A chance
# match there (an AWS key id's ABIA... in a PNG's base64) corrupted the image and made a re-run's replayed request
# differ from the stored one.
_MEDIA_DATA_URL = re.compile(r"data:(?:image|audio|video)/[\w.+-]+;base64,([A-Za-z0-9+/]+=*)")


# Values with nothing to redact, returned as they are without a call.
_PLAIN = (int, float, bool, type(None))
# key -> (the key redacted, whether it names a secret, whether its value is an id or media data).
# Keys are field and argument names, repeated in every step: looked up once each.
_KEY_INFO: dict[str, tuple[str, bool, bool]] = {}
_KEY_INFO_MAX = 65536


def _key_info(key: str) -> tuple[str, bool, bool]:
    info = _KEY_INFO.get(key)
    if info is None:
        info = (redact_text(key), is_secret_key(key), key in ID_KEYS or key == "data")
        if len(_KEY_INFO) < _KEY_INFO_MAX:
            _KEY_INFO[key] = info
    return info


def redact(value: Any, key: str | None = None) -> Any:
    """Return a copy of a JSON-like value with secrets replaced (identifiers hashed, see `redact_id`)."""
    if isinstance(value, str):
        if key == "data" and _BASE64_BLOB.fullmatch(value):
            return value
        return redact_id(value) if key in ID_KEYS else redact_text(value)
    if isinstance(value, dict):
        return _redact_dict(value)
    if isinstance(value, list):
        return [v if isinstance(v, _PLAIN) else redact(v, key) for v in value]
    return value


def _redact_dict(value: dict[Any, Any]) -> dict[Any, Any]:
    out = {}
    for k, v in value.items():
        if not isinstance(k, str):
            out[k] = v if isinstance(v, _PLAIN) else redact(v)
            continue
        safe_key, secret_key, special = _KEY_INFO.get(k) or _key_info(k)
        if v is None:
            out[safe_key] = v
        elif secret_key and v != "" and not isinstance(v, (dict, list)):
            out[k] = REDACTED
        elif isinstance(v, str) and not special:
            out[safe_key] = _redact_short(v) if len(v) <= 512 else _redact(v)
        elif isinstance(v, _PLAIN):
            out[safe_key] = v
        else:
            out[safe_key] = redact(v, k)
    return out
