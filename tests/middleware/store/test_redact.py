"""Redaction: the secret shapes of issue #20 item 6, ids hashed rather than dropped, and ordinary text left alone."""

from __future__ import annotations

import importlib
import json

import pytest

from faultlens.middleware.model.trace import AgentInfo, Source, Step, Task, Trace
from faultlens.middleware.store import SQLiteStore

R = importlib.import_module("faultlens.middleware.store.redact")  # the package exports a function of the same name

AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"
JWT = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0.dozjgNryP4J3jVmNHl0w5N_XgL0n3I9PlFUP0THsR8U"
PEM = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo\n4lgOEePzNm0tRgeLezV6ffAt0gunVTLw7onL\n-----END RSA PRIVATE KEY-----"

# (text, the secret part that must disappear)
SECRETS = [
    ("my key is sk-abc123def", "sk-abc123def"),
    ("sk-proj-abcdefghijklmnopqrstuv", "abcdefghijklmnopqrstuv"),
    ("Authorization: Bearer xyz", "xyz"),
    ("pwd=abc12", "abc12"),
    ("passwd=abc12;", "abc12"),
    ("password=abc12", "abc12"),
    ('the config is {"password": "correct horse battery"}', "correct horse battery"),
    (f"aws_secret_access_key={AWS_SECRET}", AWS_SECRET),
    (f"here: {AWS_SECRET} (copied)", AWS_SECRET),
    ("AKIAIOSFODNN7EXAMPLE", "AKIAIOSFODNN7EXAMPLE"),
    (f"token {JWT}", JWT.split(".")[2]),
    ("clone https://user:pass@host.example/repo.git", "pass@"),
    (f"key:\n{PEM}\nthat's all", "MIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo"),
    ("ghp_abcdefghijklmnopqrstuvwxyz0123456789", "ghp_abcdefghijklmnopqrstuvwxyz0123456789"),
    ("slack xoxb-123456789012-abcdefghijkl", "xoxb-123456789012"),
    ("access_token: s3cr3tvalue", "s3cr3tvalue"),
]
# Issue #33: shapes detect-secrets misses (or reports only the tag of) that spans commonly carry.
GITHUB_PAT = "github_pat_11ABCDEFG0123456789_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456"
MORE_SECRETS = [
    (GITHUB_PAT, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456"),
    ("x-api-key: 0123456789abcdef0123", "0123456789abcdef0123"),
    ("X-Api-Key: abc123secretvalue", "abc123secretvalue"),
    ("headers={'x-api-key': 'abc123secretvalue'}", "abc123secretvalue"),
    ('curl -H "x-goog-api-key: AbC123xyz987" https://example.org', "AbC123xyz987"),
    ("api-key: abcd1234efgh", "abcd1234efgh"),
    ("X-Auth-Token: abcdef123456", "abcdef123456"),
    ("Authorization: abcdef0123456789", "abcdef0123456789"),
    ("Proxy-Authorization: Digest username42", "username42"),
    ("Cookie: sessionid=abcdef123456; csrftoken=zyx987", "abcdef123456"),
    ("glpat-abcdefghijklmnopqrst", "abcdefghijklmnopqrst"),
    ("hf_abcdefghijklmnopqrstuvwxyzABCDEFGH", "abcdefghijklmnopqrstuvwxyzABCDEFGH"),
    ("xoxe-1-abcdefghijklmnop", "abcdefghijklmnop"),
    ("xapp-1-A0123456789-1234567890123-abcdef0123456789", "abcdef0123456789"),
    ("gsk_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyzABCDEF"),
    ("r8_abcdefghijklmnopqrstuvwxyzABCDEFGHIJK", "abcdefghijklmnopqrstuvwxyzABCDEFGHIJK"),
    ("pplx-abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUV", "abcdefghijklmnopqrstuvwxyz"),
    ("tvly-dev-abcdefghijklmnopqrstuvwxyz", "abcdefghijklmnopqrstuvwxyz"),
    ("lsv2_pt_0123456789abcdef0123456789abcdef_0123456789", "0123456789abcdef0123456789abcdef"),
    ("pcsk_abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMN", "abcdefghijklmnopqrstuvwxyz"),
    ("npm_abcdefghijklmnopqrstuvwxyzABCDEFGHIJ", "abcdefghijklmnopqrstuvwxyzABCDEFGHIJ"),
    ("dop_v1_" + "0123456789abcdef" * 4, "0123456789abcdef" * 4),
    ("dapi0123456789abcdef0123456789abcdef", "0123456789abcdef0123456789abcdef"),
    ("ya29.a0AfH6SMBabcdefghijklmnopqrstuvwxyz", "a0AfH6SMBabcdefghijklmnopqrstuvwxyz"),
    ("sk_test_abcdefghijklmnopqrstuvwx", "abcdefghijklmnopqrstuvwx"),
]


@pytest.mark.parametrize("text, secret", MORE_SECRETS)
def test_shapes_detect_secrets_misses_are_redacted(text, secret):
    out = R.redact_text(text)
    assert secret not in out and R.REDACTED in out
    assert R.redact_text(out) == out
    assert R.redact_id(f"agent {text}").startswith(R.ID_PREFIX)


CLEAN = [
    "The answer is 391. Calculator returned 17 * 23 = 391.",
    "trace 0af7651916cd43dd8448eb211c80319c span b7ad6b7169203331",
    "commit 2fd4e1c67a2d28fced849ee1bb76e7391b93eb12",
    "We use sk-learn and scikit-learn",
    "max_tokens=512, input_tokens: 20",
    "The password field is required",
    "def f(token): return token",
    "solver",
    "https://example.org/docs/page",
]


@pytest.mark.parametrize("text, secret", SECRETS)
def test_each_secret_shape_is_redacted(text, secret):
    out = R.redact_text(text)
    assert secret not in out
    assert R.REDACTED in out


@pytest.mark.parametrize("text", CLEAN)
def test_ordinary_text_is_left_alone(text):
    assert R.redact_text(text) == text


def test_an_id_with_a_secret_is_hashed_the_same_way_every_time():
    assert R.redact_id("run-1") == "run-1"
    hashed = R.redact_id("run sk-abc123def")
    assert hashed.startswith(R.ID_PREFIX) and "sk-abc" not in hashed
    assert R.redact_id("run sk-abc123def") == hashed != R.redact_id("run sk-abc123deg")
    assert R.redact_id(hashed) == hashed  # stored ids come back unchanged


def test_redaction_is_idempotent():
    for text, _ in SECRETS:
        once = R.redact_text(text)
        assert R.redact_text(once) == once


def test_the_store_hashes_ids_and_redacts_every_column(tmp_path):
    store = SQLiteStore(tmp_path / "s.db")
    secret_id = "conv-Bearer abcdefgh"
    trace = Trace(
        id=secret_id,
        task=Task(query="q"),
        agents=[AgentInfo(name="agent password=hunter22")],
        source=Source(framework="svc sk-abc123def", format="otlp"),
        steps=[Step(index=0, agent="agent password=hunter22", content="hello", span_id="span sk-zzz999yyy")],
    )
    store.save_trace(trace)
    dump = "\n".join(str(row) for table in ("traces", "steps") for row in store._db().execute(f"SELECT * FROM {table}").fetchall())
    for secret in ("abcdefgh", "hunter22", "sk-abc123def", "sk-zzz999yyy"):
        assert secret not in dump
    # The caller's id still finds the run, under its hashed id; the agent keeps one (hashed) name everywhere.
    stored = store.get_trace(secret_id)
    assert stored.id == R.redact_id(secret_id) and stored.id.startswith(R.ID_PREFIX)
    assert stored.steps[0].agent == stored.agents[0].name == R.redact_id("agent password=hunter22")
    assert store.has_trace(secret_id) and [s.id for s in store.list_traces()] == [stored.id]
    store.add_step(secret_id, Step(index=1, agent="b", content="more", span_id="s2"))
    assert len(store.get_trace(stored.id).steps) == 2


def test_inline_media_bytes_are_left_intact_but_text_under_data_is_not():
    import base64

    # Base64 that happens to hold a key-shaped run: as text it would be cut; as media bytes it stays whole.
    blob = "AKIAIOSFODNN7EXAMPLE" + base64.b64encode(bytes(range(256)) * 8).decode()
    assert R.redact_text(blob) != blob
    assert R.redact({"media": [{"mime_type": "image/png", "data": blob}]})["media"][0]["data"] == blob
    assert R.redact({"data": "password=hunter22"}) == {"data": "password=[REDACTED]"}


# -- the cheap paths must not change what is found (issue #17) -----------------
from hypothesis import given, settings  # noqa: E402
from hypothesis import strategies as st  # noqa: E402


def _every_pattern(text: str) -> list[tuple[int, int]]:
    """What `find_secrets` finds when every pattern runs on every string (no hex shortcut, no length skip)."""
    spans = []
    for pattern, groups in R._tables().patterns:
        for match in pattern.finditer(text):
            spans += [match.span()] if not groups else [match.span(g) for g in groups if match.group(g)]
    merged: list[tuple[int, int]] = []
    for start, end in sorted(s for s in spans if s[0] != s[1]):
        if merged and start <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(end, merged[-1][1]))
        else:
            merged.append((start, end))
    return merged


def test_the_hex_shortcut_skips_only_patterns_that_need_a_character_outside_lowercase_hex():
    import re

    hex_only = R._HEX
    parse = R.regex_parser.parse
    assert not R._can_match_within(parse(r"AKIA[0-9A-Z]{16}"), 0, hex_only)
    assert not R._can_match_within(parse(r"sk-[a-z0-9]{8}"), 0, hex_only)
    assert not R._can_match_within(parse(r"(?:foo|bar)[0-9a-f]{4}"), 0, hex_only)
    # Could match inside hex: kept.
    assert R._can_match_within(parse(r"[0-9a-f]{32}"), 0, hex_only)
    assert R._can_match_within(parse(r"(?:x|b)[0-9]+"), 0, hex_only)
    assert R._can_match_within(parse(r"ABC"), re.I, hex_only)  # case-insensitive: abc is hex
    assert R._can_match_within(parse(r"[^\s]{5}"), 0, hex_only)
    # The real set keeps at most a few of its ~57 patterns for hex text.
    assert len(R._tables().hex_sized) < len(R._tables().sized) // 4


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="0123456789abcdef", max_size=80))
def test_hex_text_finds_what_every_pattern_finds(text):
    assert R.find_secrets(text) == _every_pattern(text)


@settings(max_examples=300, deadline=None)
@given(st.lists(st.sampled_from(list("aAbZ09_+/=.-:@ \n\"'=kKeEyYpsStTo") + ["key", "pass", "token", "AKIA", "sk-", "://", "é", "password="]), max_size=60).map("".join))
def test_every_string_finds_what_every_pattern_finds(text):
    assert R.find_secrets(text) == _every_pattern(text)


@settings(max_examples=500, deadline=None)
@given(st.text(max_size=60) | st.text(alphabet="abcXYZ0129_+/=.- kKeEyY", max_size=40))
def test_the_candidate_gate_is_the_run_or_keyword_test(text):
    import re

    run = re.search(r"[A-Za-z0-9_+/=.-]{10}", text) is not None
    words = any(w in text.lower() for w in ("key", "pass", "pwd", "secret", "contrase", "token", "auth", "bearer", "basic", "private", "://"))
    assert R._candidate(text) == (run or words)


def test_secrets_in_a_long_paragraph_and_under_named_keys_are_still_redacted():
    prose = "lorem ipsum dolor " * 40
    assert "hunter22" not in R.redact_text(prose + " password=hunter22 " + prose)
    assert AWS_SECRET not in R.redact_text(prose + AWS_SECRET + " " + prose)
    value = R.redact({"api_key": 0, "nested": {"password": "x", "note": None, "n": 3}, "span_id": "0af7651916cd43dd", "items": [None, 1, "sk-abc123def"]})
    assert value == {"api_key": R.REDACTED, "nested": {"password": R.REDACTED, "note": None, "n": 3}, "span_id": "0af7651916cd43dd", "items": [None, 1, R.REDACTED]}


@settings(max_examples=300, deadline=None)
@given(st.text(alphabet="0123456789abcdef", max_size=60) | st.sampled_from(["0af7651916cd43dd", "4bf92f3577b34da6a3ce929d0e0e4736", "ab" * 20]))
def test_a_hex_id_is_kept_exactly_when_no_pattern_finds_a_secret_in_it(text):
    # redact_id answers lowercase hex shorter than any pattern that could match in it without scanning.
    assert (R.redact_id(text) == text) == (not _every_pattern(text))


def test_ids_are_redacted_the_same_before_the_patterns_are_built():
    """The patterns are compiled on first use; the very first ids of a process are mapped as every later one is."""
    import subprocess
    import sys

    code = ("from faultlens.middleware.store import redact as R; "
            "first = [R.redact_id(v) for v in ('0123456789abcdef', 'run-sk-proj-abcdefgh12345678')]; "
            "again = [R.redact_id(v) for v in ('0123456789abcdef', 'run-sk-proj-abcdefgh12345678')]; "
            "print(first == again, first[0], first[1].startswith(R.ID_PREFIX))")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout.split()
    assert out == ["True", "0123456789abcdef", "True"]


# Issue #43, finding 9: secrets inside one level of JSON string escaping (an upstream's JSON error body kept
# inside a JSON string), and a GCP service account's keys. (text, the secret that must disappear)
GCP_KEY_ID = "0123456789abcdef0123456789abcdef01234567"
ESCAPED = [
    ('upstream 401: {\\"password\\": \\"hunter5\\"}', "hunter5"),
    ('{\\"type\\": \\"service_account\\", \\"private_key_id\\": \\"' + GCP_KEY_ID + '\\"}', GCP_KEY_ID),
    ('{\\"client_secret\\": \\"GOCSPX-abcdef123456\\"}', "GOCSPX-abcdef123456"),
    ('{\\"api_key\\":\\"abc\\\\\\\\def123\\"}', "def123"),  # an escaped backslash inside the value
    ('{\\"Authorization\\": \\"abcdef0123456789\\"}', "abcdef0123456789"),
    ('{\\"headers\\": {\\"Cookie\\": \\"sessionid=abcdef123456\\"}}', "abcdef123456"),
    ('{\\"url\\": \\"db://host/x?password=hunter6\\"}', "hunter6"),
    ('{\\"private_key\\": \\"-----BEGIN PRIVATE KEY-----\\\\nMIIEvQIBADANBgkqhkiG9w0B\\\\n-----END PRIVATE KEY-----\\\\n\\"}', "MIIEvQIBADANBgkqhkiG9w0B"),
]


@pytest.mark.parametrize("text, secret", ESCAPED)
def test_redaction_sees_through_one_level_of_json_string_escaping(text, secret):
    out = R.redact_text(text)
    assert secret not in out and R.REDACTED in out
    assert R.redact_text(out) == out
    # What is left is still escaped JSON: unescaped once, it parses, secret replaced.
    unescaped = json.loads(f'"{out}"')
    assert R.REDACTED in json.dumps(json.loads(unescaped[unescaped.index("{"):]))


def test_a_gcp_service_account_is_redacted_as_an_object_and_as_escaped_text():
    account = {"type": "service_account", "project_id": "demo-project", "private_key_id": GCP_KEY_ID,
               "private_key": "-----BEGIN PRIVATE KEY-----\nMIIEvQIBADANBgkqhkiG9w0B\n-----END PRIVATE KEY-----\n",
               "client_email": "bot@demo-project.iam.gserviceaccount.com", "client_secret": "GOCSPX-abcdef123456"}
    redacted = R.redact(account)
    assert redacted["private_key_id"] == redacted["private_key"] == redacted["client_secret"] == R.REDACTED
    assert redacted["project_id"] == "demo-project" and redacted["client_email"] == account["client_email"]
    body = json.dumps({"error": f"bad credentials {json.dumps(account)}"})  # the account's JSON inside an error string
    out = R.redact_text(body)
    assert all(secret not in out for secret in (GCP_KEY_ID, "MIIEvQIBADANBgkqhkiG9w0B", "GOCSPX-abcdef123456"))
    assert "demo-project" in json.loads(out)["error"]


def test_escaped_quotes_around_ordinary_values_are_left_alone():
    text = '{\\"max_tokens\\": 512, \\"kind\\": \\"tool_call\\", \\"password_hint\\": \\"\\"}'
    assert R.redact_text(text) == text
