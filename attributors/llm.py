"""The one LLM client every model-based attributor uses.

Everything that reaches a model goes through `LLMClient.acall` (or `call`):

- litellm `acompletion`/`completion`, so any litellm model string works
  (`openai/...`, `anthropic/...`, `ollama/...`, `openai/NAME` + `api_base` for
  any OpenAI-compatible server, `local/smollm2` for the in-process model);
- structured output: a JSON schema derived from a pydantic answer model is
  sent as `response_format` when the provider supports schemas; otherwise the
  schema goes into the prompt and the reply is read by a tolerant text parser
  (`parse_answer`) that never invents a value;
- retries with exponential backoff (tenacity) on rate limits, timeouts,
  connection errors and 5xx answers;
- a concurrency limit shared by all calls of one client;
- an on-disk response cache (SQLite under `.faultlens/cache/`) keyed by model,
  api_base, messages and parameters, so reruns are free and reproducible;
- token and USD accounting from litellm (models without a price count 0 USD
  and the client says so in `cost_notes`);
- a per-run budget (USD and/or calls): the call that would exceed it raises
  `BudgetExceeded` instead of reaching the model;
- secrets are redacted (`middleware.store.redact`) from every message before it is
  sent or cached.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
import sqlite3
import threading
import time
import weakref
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from faultlens.middleware.errors import FaultlensError
from faultlens.middleware.model.trace import Cost
from faultlens.middleware.store.redact import redact, redact_text

# Offline by default: litellm would otherwise fetch its price map from the
# network on import (and retry for ~10s without one). Set it to False to fetch.
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")

T = TypeVar("T", bound=BaseModel)

DEFAULT_CACHE_DIR = Path(".faultlens") / "cache"


class LLMError(FaultlensError):
    """The model could not be reached or refused the call (after retries)."""


class BudgetExceeded(FaultlensError):
    """The per-run budget (USD or calls) is used up; no further call is made."""


def default_cache_dir() -> Path:
    return Path(os.environ.get("FAULTLENS_CACHE_DIR") or DEFAULT_CACHE_DIR)


def default_model() -> str | None:
    """The model used when none is given: $FAULTLENS_MODEL, else none."""
    return os.environ.get("FAULTLENS_MODEL") or None


# ---------------------------------------------------------------- parsing


class ParseError(FaultlensError, ValueError):
    """The model's text could not be read as the requested answer."""


_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.S)
_TRAILING_COMMA = re.compile(r",\s*([}\]])")


def _balanced_objects(text: str) -> list[str]:
    """Every top-level {...} substring, respecting strings and escapes."""
    found, depth, start, in_string, escape = [], 0, -1, False, False
    for i, ch in enumerate(text):
        if in_string:
            if escape:
                escape = False
            elif ch == "\\":
                escape = True
            elif ch == '"':
                in_string = False
            continue
        if ch == '"':
            in_string = True
        elif ch == "{":
            if depth == 0:
                start = i
            depth += 1
        elif ch == "}" and depth > 0:
            depth -= 1
            if depth == 0:
                found.append(text[start : i + 1])
    return found


def extract_json(text: str) -> dict[str, Any]:
    """The JSON object inside a model reply: bare, fenced, or wrapped in prose.

    Tolerates code fences, text around the object and trailing commas; it
    does not repair anything else (no guessing at truncated output).
    """
    candidates: list[str] = []
    for fenced in _FENCE.findall(text):
        candidates.extend(_balanced_objects(fenced))
    candidates.extend(_balanced_objects(text))
    if not candidates:
        raise ParseError("no JSON object in the answer")
    last_error = ""
    for candidate in candidates:
        for attempt in (candidate, _TRAILING_COMMA.sub(r"\1", candidate)):
            try:
                value = json.loads(attempt, strict=False)  # literal newlines inside strings are common in model output
            except json.JSONDecodeError as exc:
                last_error = f"{exc.msg} at column {exc.colno}"
                continue
            if isinstance(value, dict):
                return value
    raise ParseError(f"the JSON object in the answer is not valid JSON ({last_error})")


def parse_answer(text: str, answer_model: type[T]) -> T:
    """Read `text` as `answer_model`, raising ParseError naming what is wrong."""
    data = extract_json(text)
    try:
        return answer_model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or "answer"
        raise ParseError(f"field {where!r}: {first['msg']}") from None


def json_schema_format(answer_model: type[BaseModel]) -> dict[str, Any]:
    """The OpenAI-style `response_format` for a pydantic answer model."""
    return {
        "type": "json_schema",
        "json_schema": {"name": answer_model.__name__, "schema": answer_model.model_json_schema(), "strict": False},
    }


def schema_instruction(answer_model: type[BaseModel]) -> str:
    """The schema as prompt text, for providers that cannot enforce it."""
    schema = json.dumps(answer_model.model_json_schema(), ensure_ascii=False)
    return f"Reply with one JSON object only, no other text, matching this JSON schema:\n{schema}"


# ---------------------------------------------------------------- cache


class ResponseCache:
    """Model replies on disk, keyed by a hash of everything that shapes the reply."""

    def __init__(self, directory: str | Path):
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.path = self.directory / "llm.sqlite"
        self._lock = threading.Lock()
        with self._connect() as conn:
            conn.execute("CREATE TABLE IF NOT EXISTS replies (key TEXT PRIMARY KEY, model TEXT, reply TEXT, created_at REAL)")

    def _connect(self) -> sqlite3.Connection:
        conn = sqlite3.connect(self.path, timeout=30)
        conn.execute("PRAGMA journal_mode=WAL")
        return conn

    @staticmethod
    def key(payload: dict[str, Any]) -> str:
        blob = json.dumps(payload, sort_keys=True, ensure_ascii=False, default=str)
        return hashlib.sha256(blob.encode("utf-8")).hexdigest()

    def get(self, key: str) -> dict[str, Any] | None:
        with self._lock, self._connect() as conn:
            row = conn.execute("SELECT reply FROM replies WHERE key = ?", (key,)).fetchone()
        return json.loads(row[0]) if row else None

    def put(self, key: str, model: str, reply: dict[str, Any]) -> None:
        with self._lock, self._connect() as conn:
            conn.execute(
                "INSERT OR REPLACE INTO replies (key, model, reply, created_at) VALUES (?, ?, ?, ?)",
                (key, model, json.dumps(reply, ensure_ascii=False), time.time()),
            )


# ---------------------------------------------------------------- client


STRUCTURED_MODES = ("auto", "schema", "json_object", "text")


@dataclass
class Reply:
    """One model answer: the text, the parsed answer (or why it did not parse) and what it cost."""

    text: str
    answer: BaseModel | None
    parse_error: str | None
    cost: Cost
    cached: bool
    structured: str  # "schema" or "json_object" (response_format sent), or "text" (schema in the prompt)


def _retryable() -> tuple[type[BaseException], ...]:
    import litellm

    names = ("RateLimitError", "Timeout", "APIConnectionError", "InternalServerError", "ServiceUnavailableError", "BadGatewayError")
    return tuple(getattr(litellm, n) for n in names if hasattr(litellm, n))


@dataclass
class LLMClient:
    """litellm behind a cache, retries, a concurrency limit and a budget.

    One client is one run: its `cost` adds up every call it made, and its
    budget (`budget_usd`, `max_calls`) applies to that total.
    """

    model: str
    api_base: str | None = None
    api_key: str | None = None
    temperature: float = 0.0
    max_tokens: int = 512
    timeout: float = 120.0
    max_retries: int = 4
    retry_wait: float = 1.0  # seconds before the first retry; doubles each time, capped at 30s
    concurrency: int = 4
    # How the answer schema is conveyed: "schema" = OpenAI-style json_schema
    # response_format; "json_object" = {"type": "json_object", "schema": ...},
    # the form llama.cpp's server enforces; "text" = schema in the prompt only;
    # "auto" = "schema" where litellm says the model supports it, else "text".
    structured: str = "auto"
    cache: bool = True
    cache_dir: str | Path | None = None
    budget_usd: float | None = None
    max_calls: int | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    cost: Cost = field(default_factory=Cost, init=False)
    cached_calls: int = field(default=0, init=False)
    cost_notes: list[str] = field(default_factory=list, init=False)
    _cache: ResponseCache | None = field(default=None, init=False, repr=False)
    _semaphores: Any = field(default=None, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.structured not in STRUCTURED_MODES:
            raise FaultlensError(f"structured must be one of {', '.join(STRUCTURED_MODES)}, not {self.structured!r}")
        if self.cache:
            self._cache = ResponseCache(self.cache_dir or default_cache_dir())
        # One semaphore per event loop: asyncio primitives are bound to the loop they first wait on.
        self._semaphores = weakref.WeakKeyDictionary()

    # -- capabilities ----------------------------------------------------
    @property
    def backend(self) -> str:
        return "local" if self.model.startswith("local/") else "litellm"

    def structured_mode(self) -> str:
        """The way the schema is sent to this model: schema, json_object or text."""
        if self.structured != "auto":
            return self.structured
        if self.model.startswith("local/"):
            return "schema"
        import litellm

        try:
            return "schema" if litellm.supports_response_schema(model=self.model) else "text"
        except Exception:  # unknown models: litellm cannot say, so the prompt carries the schema
            return "text"

    def supports_vision(self) -> bool:
        import litellm

        try:
            return bool(litellm.supports_vision(model=self.model))
        except Exception:
            return False

    def context_tokens(self) -> tuple[int, str]:
        """The model's input budget in tokens and where the number came from."""
        return context_tokens(self.model)

    # -- budget ----------------------------------------------------------
    def _check_budget(self) -> None:
        if self.max_calls is not None and self.cost.calls >= self.max_calls:
            raise BudgetExceeded(f"call budget used up: {self.cost.calls} of {self.max_calls} calls made")
        if self.budget_usd is not None and self.cost.usd >= self.budget_usd:
            raise BudgetExceeded(f"USD budget used up: ${self.cost.usd:.4f} spent of ${self.budget_usd:.4f}")

    # -- the call --------------------------------------------------------
    def _request(self, messages: list[dict[str, Any]], answer_model: type[BaseModel] | None) -> tuple[dict[str, Any], str]:
        messages = [_redact_message(m) for m in messages]
        mode = "text"
        kwargs: dict[str, Any] = {"model": self.model, "messages": messages, "temperature": self.temperature, "max_tokens": self.max_tokens}
        if answer_model is not None:
            mode = self.structured_mode()
            if mode == "schema":
                kwargs["response_format"] = json_schema_format(answer_model)
            elif mode == "json_object":
                kwargs["response_format"] = {"type": "json_object", "schema": answer_model.model_json_schema()}
            else:
                messages = messages + [{"role": "user", "content": schema_instruction(answer_model)}]
                kwargs["messages"] = messages
        if self.api_base:
            kwargs["api_base"] = self.api_base
        kwargs.update(self.extra)
        return kwargs, mode

    def _cache_key(self, kwargs: dict[str, Any]) -> str:
        payload = {k: v for k, v in kwargs.items() if k not in ("api_key", "timeout", "num_retries")}
        return ResponseCache.key(payload)

    def _account(self, response: Any, seconds: float) -> Cost:
        import litellm

        usage = getattr(response, "usage", None)
        tokens_in = int(getattr(usage, "prompt_tokens", 0) or 0)
        tokens_out = int(getattr(usage, "completion_tokens", 0) or 0)
        usd = (getattr(response, "_hidden_params", None) or {}).get("response_cost")
        if usd is None and _priced(self.model):
            try:
                usd = litellm.completion_cost(completion_response=response, model=self.model)
            except Exception:  # litellm could not price this response; reported below as unknown
                usd = None
        if usd is None:
            note = f"litellm has no price for {self.model}; USD counted as 0"
            if note not in self.cost_notes:
                self.cost_notes.append(note)
            usd = 0.0
        return Cost(calls=1, input_tokens=tokens_in, output_tokens=tokens_out, usd=float(usd), seconds=seconds)

    def _finish(self, text: str, cost: Cost, cached: bool, mode: str, answer_model: type[BaseModel] | None) -> Reply:
        answer, error = None, None
        if answer_model is not None:
            try:
                answer = parse_answer(text, answer_model)
            except ParseError as exc:
                error = str(exc)
        return Reply(text=text, answer=answer, parse_error=error, cost=cost, cached=cached, structured=mode)

    def _store(self, key: str, text: str, cost: Cost) -> None:
        if self._cache is not None:
            self._cache.put(key, self.model, {"text": text, "cost": cost.model_dump()})

    def _semaphore(self) -> asyncio.Semaphore:
        loop = asyncio.get_running_loop()
        sem = self._semaphores.get(loop)
        if sem is None:
            sem = self._semaphores[loop] = asyncio.Semaphore(max(1, self.concurrency))
        return sem

    def _retrying(self, asynchronous: bool):
        from tenacity import AsyncRetrying, Retrying, retry_if_exception_type, stop_after_attempt, wait_exponential

        cls = AsyncRetrying if asynchronous else Retrying
        return cls(
            retry=retry_if_exception_type(_retryable()),
            stop=stop_after_attempt(self.max_retries + 1),
            wait=wait_exponential(multiplier=self.retry_wait, max=30),
            reraise=True,
        )

    def _call_kwargs(self, kwargs: dict[str, Any]) -> dict[str, Any]:
        # Retries are ours (tenacity); litellm must not retry underneath.
        out = dict(kwargs, timeout=self.timeout, num_retries=0)
        if self.api_key:
            out["api_key"] = self.api_key
        elif self.api_base and self.model.startswith("openai/") and not os.environ.get("OPENAI_API_KEY"):
            # OpenAI-compatible local servers ignore the key, but the client insists on one.
            out["api_key"] = "not-needed"
        return out

    def _text_of(self, response: Any) -> str:
        try:
            return response.choices[0].message.content or ""
        except (AttributeError, IndexError) as exc:
            raise LLMError(f"{self.model} returned no message ({exc})") from None

    def _lookup(self, messages: list[dict[str, Any]], answer_model: type[BaseModel] | None) -> tuple[dict[str, Any], str, str, Reply | None]:
        kwargs, mode = self._request(messages, answer_model)
        key = self._cache_key(kwargs)
        hit = self._cache.get(key) if self._cache else None
        if hit is not None:
            self.cached_calls += 1
            return kwargs, mode, key, self._finish(hit["text"], Cost(), True, mode, answer_model)
        self._check_budget()
        return kwargs, mode, key, None

    def _error(self, exc: Exception) -> LLMError:
        if isinstance(exc, _retryable()):
            return LLMError(f"{self.model}: {type(exc).__name__} after {self.max_retries} retries: {exc}")
        return LLMError(f"{self.model}: {type(exc).__name__}: {exc}")

    def _record(self, response: Any, started: float, key: str, mode: str, answer_model: type[BaseModel] | None) -> Reply:
        cost = self._account(response, time.monotonic() - started)
        self.cost = self.cost + cost
        text = self._text_of(response)
        self._store(key, text, cost)
        return self._finish(text, cost, False, mode, answer_model)

    async def acall(self, messages: list[dict[str, Any]], answer_model: type[BaseModel] | None = None) -> Reply:
        """Send `messages`; with `answer_model`, ask for and parse that JSON answer.

        Raises BudgetExceeded before a call the budget does not allow, and
        LLMError when the model fails (after retries for transient errors).
        """
        import litellm
        import openai

        kwargs, mode, key, hit = self._lookup(messages, answer_model)
        if hit is not None:
            return hit
        async with self._semaphore():
            self._check_budget()  # again: other tasks may have spent the budget while this one waited
            started = time.monotonic()
            try:
                async for attempt in self._retrying(True):
                    with attempt:
                        response = await litellm.acompletion(**self._call_kwargs(kwargs))
            except openai.OpenAIError as exc:  # litellm's exceptions all derive from it
                raise self._error(exc) from exc
            return self._record(response, started, key, mode, answer_model)

    def call(self, messages: list[dict[str, Any]], answer_model: type[BaseModel] | None = None) -> Reply:
        """The synchronous twin of `acall` (litellm `completion`)."""
        import litellm
        import openai

        kwargs, mode, key, hit = self._lookup(messages, answer_model)
        if hit is not None:
            return hit
        started = time.monotonic()
        try:
            for attempt in self._retrying(False):
                with attempt:
                    response = litellm.completion(**self._call_kwargs(kwargs))
        except openai.OpenAIError as exc:
            raise self._error(exc) from exc
        return self._record(response, started, key, mode, answer_model)


def _priced(model: str) -> bool:
    import litellm

    return model in litellm.model_cost or model.split("/", 1)[-1] in litellm.model_cost


def _redact_message(message: dict[str, Any]) -> dict[str, Any]:
    content = message.get("content")
    if isinstance(content, str):
        return {**message, "content": redact_text(content)}
    if isinstance(content, list):
        parts = []
        for part in content:
            if isinstance(part, dict) and part.get("type") == "text":
                parts.append({**part, "text": redact_text(part.get("text", ""))})
            else:
                parts.append(part)  # image parts: base64 or URLs, redacting would corrupt them
        return {**message, "content": parts}
    return redact(message)


FALLBACK_CONTEXT_TOKENS = 8192


def context_tokens(model: str) -> tuple[int, str]:
    """Input budget of `model` in tokens, from litellm's model info.

    Models litellm does not know get FALLBACK_CONTEXT_TOKENS (8192), and the
    second value says so.
    """
    if model.startswith("local/"):
        from .local import LOCAL_N_CTX

        return LOCAL_N_CTX, f"local model n_ctx={LOCAL_N_CTX}"
    import litellm

    try:
        info = litellm.get_model_info(model=model)
    except Exception:
        return FALLBACK_CONTEXT_TOKENS, f"{model} unknown to litellm; fallback budget {FALLBACK_CONTEXT_TOKENS} tokens"
    tokens = info.get("max_input_tokens") or info.get("max_tokens")
    if not tokens:
        return FALLBACK_CONTEXT_TOKENS, f"litellm knows no context size for {model}; fallback budget {FALLBACK_CONTEXT_TOKENS} tokens"
    return int(tokens), f"litellm model info: max_input_tokens={tokens}"
