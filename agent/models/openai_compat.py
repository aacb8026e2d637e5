"""OpenAI-compatible Chat Completions backend (vLLM, OpenAI, any compatible server) over the openai SDK.

The SDK's own retries are off: this module retries (429, 5xx, timeouts, connection errors) with
exponential backoff and full jitter, honours Retry-After, and bounds concurrency per endpoint for
the whole process. The API key never leaves the SDK client: every text raised is scrubbed of it.
"""

from __future__ import annotations

import asyncio
import email.utils
import os
import random
import re
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit, urlunsplit

import anyio
import openai

from flexsql.agent.models.base import (
    ChatRequest,
    ModelError,
    ModelReply,
    ResolvedModelConfig,
    Stopwatch,
    ToolCall,
    Usage,
)

MAX_RETRY_AFTER_S = 30.0  # a server asking for longer is treated as down: fail instead of stalling a run
MAX_BACKOFF_S = 20.0
MAX_ERROR_TEXT = 400
RETRYABLE_STATUS = {408, 409, 429} | set(range(500, 600))

# Endpoints that answered 400 to response_format json_schema under `auto`: not sent again this process.
_NO_JSON_SCHEMA: set[str] = set()
# One slot count per endpoint for the whole process. Evaluations run one event loop per worker thread,
# and anyio's primitives bind to one loop, so the limit is a thread-safe semaphore taken cooperatively.
_SLOTS: dict[str, threading.BoundedSemaphore] = {}
_SLOTS_LOCK = threading.Lock()


class _EndpointSlot:
    """`async with` one of the endpoint's `size` slots, shared by every loop and thread of the process;
    waiting is a cancellable poll (a few ms), never a blocked thread."""

    def __init__(self, semaphore: threading.BoundedSemaphore) -> None:
        self._semaphore = semaphore

    async def __aenter__(self) -> None:
        delay = 0.001
        while not self._semaphore.acquire(blocking=False):
            await anyio.sleep(delay)
            delay = min(delay * 2, 0.02)

    async def __aexit__(self, *exc: object) -> None:
        self._semaphore.release()


def _loop_key() -> Any:
    """The running event loop: SDK clients (their connection pools) are per loop."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:  # trio: one loop per process in practice
        return _TrioKey


class _TrioKey:
    pass


def endpoint_limiter(base_url: str, size: int) -> _EndpointSlot:
    """The limit shared by every model object of `base_url` in this process (the first one's size wins)."""
    with _SLOTS_LOCK:
        semaphore = _SLOTS.get(base_url)
        if semaphore is None:
            semaphore = _SLOTS[base_url] = threading.BoundedSemaphore(size)
    return _EndpointSlot(semaphore)


def display_url(url: str) -> str:
    """`url` without user:password@ (a key may ride there) and without a trailing slash."""
    parts = urlsplit(url)
    netloc = parts.hostname or ""
    if parts.port:
        netloc += f":{parts.port}"
    return urlunsplit((parts.scheme, netloc, parts.path.rstrip("/"), "", ""))


_THINK = re.compile(r"^\s*(?:<think>)?(?P<reasoning>.*?)</think>\s*(?P<content>.*)$", re.DOTALL)
_SCHEMA_NAME = re.compile(r"[^A-Za-z0-9_-]")


def split_think(content: str | None) -> tuple[str | None, str | None]:
    """(reasoning, content) from content that starts with a <think>…</think> block (or only its end,
    when the chat template opened the block in the prompt, as Qwen3's does)."""
    if not content or "</think>" not in content:
        return None, content
    stripped = content.lstrip()
    if not stripped.startswith("<think>") and "<think>" in content:
        return None, content  # a think tag in the middle is the model's text, not a reasoning block
    match = _THINK.match(content)
    if match is None:
        return None, content
    return match["reasoning"].strip() or None, match["content"]


def clean_tool_name(name: str, known: list[str]) -> str:
    """gpt-oss sometimes leaks harmony tokens into the name (`search_schema<|channel|>commentary`)
    or a namespace (`functions.search_schema`); keep the name the tools were declared with."""
    cleaned = name.split("<|", 1)[0].strip()
    if known and cleaned not in known:
        tail = re.split(r"[.=:\s]", cleaned)[-1]
        if tail in known:
            return tail
    return cleaned


class OpenAICompatModel:
    """A ChatModel over POST {base_url}/chat/completions."""

    def __init__(self, cfg: ResolvedModelConfig, *, api_key: str | None = None) -> None:
        self.cfg = cfg
        self.base_url = cfg.base_url.rstrip("/")
        self.name = f"openai:{cfg.model}@{display_url(self.base_url)}"
        key = (
            api_key if api_key is not None else (os.environ.get(cfg.api_key_env) if cfg.api_key_env else None)
        )
        self._key_set = bool(key)
        # The key lives only inside this closure and the SDK client; never an attribute a repr could show.
        secret = key or "EMPTY"  # vLLM without --api-key accepts any key; the SDK insists on one
        self._secret: Callable[[], str] = lambda: secret
        self._clients: weakref.WeakKeyDictionary[Any, openai.AsyncOpenAI] = weakref.WeakKeyDictionary()

    def __repr__(self) -> str:
        return f"OpenAICompatModel({self.name!r})"

    # -- the protocol ---------------------------------------------------------------------------

    async def complete(self, request: ChatRequest) -> ModelReply:
        watch = Stopwatch()
        use_schema = self._sends_schema(request)
        attempt = 0
        while True:
            # Failures are raised after the except blocks, so that no ModelError carries the SDK's
            # exception (and through it the request and its Authorization header) as __context__.
            failure: ModelError | None = None
            delay = 0.0
            try:
                async with endpoint_limiter(self.base_url, self.cfg.concurrency):
                    completion = await self._client().chat.completions.create(
                        **self._arguments(request, use_schema)
                    )
                return self._reply(completion, request, watch)
            except openai.APIStatusError as exc:
                if use_schema and self.cfg.response_format == "auto" and _rejects_schema(exc):
                    # Not a failure of the request: the endpoint lacks structured outputs; ask again
                    # without, and never offer it again (lenient parsing takes over).
                    _NO_JSON_SCHEMA.add(self.base_url)
                    use_schema = False
                    continue
                if exc.status_code not in RETRYABLE_STATUS or attempt >= self.cfg.max_retries:
                    failure = self._status_error(exc, request, attempt + 1)
                else:
                    retry_after = _retry_after(exc.response.headers)
                    delay = self._backoff(attempt) if retry_after is None else retry_after
            except openai.APITimeoutError:
                if attempt >= self.cfg.max_retries:
                    failure = self._error(
                        request,
                        f"did not answer within {self.cfg.timeout_s:g} s, {attempt + 1} attempt(s)",
                        "check that the server is up and not overloaded, or raise [model] timeout_s "
                        "(FLEXSQL_MODEL__TIMEOUT_S)",
                    )
                delay = self._backoff(attempt)
            except openai.APIConnectionError as exc:
                if attempt >= self.cfg.max_retries:
                    cause = exc.__cause__ or exc
                    failure = self._error(
                        request,
                        f"cannot be reached ({type(cause).__name__}: {cause}), {attempt + 1} attempt(s)",
                        "check that the server is running and [model] base_url is right "
                        "(it usually ends in /v1)",
                    )
                delay = self._backoff(attempt)
            except openai.OpenAIError as exc:  # a malformed body and the like: retrying will not help
                failure = self._error(
                    request,
                    f"answered something the SDK cannot read ({exc})",
                    "check that base_url points at an OpenAI-compatible API",
                )
            if failure is not None:
                raise failure
            attempt += 1
            await anyio.sleep(delay)

    # -- request --------------------------------------------------------------------------------

    def _sends_schema(self, request: ChatRequest) -> bool:
        if request.response_schema is None or self.cfg.response_format == "off":
            return False
        if self.cfg.response_format == "json_schema":
            return True
        # auto: vLLM turns response_format into a decoding constraint that suppresses tool calls
        # when tool_choice is auto (vllm#39929), so a request with tools goes without it and its
        # final answer is parsed leniently; set response_format = "json_schema" for endpoints that
        # combine both (OpenAI).
        return not request.tools and self.base_url not in _NO_JSON_SCHEMA

    def _arguments(self, request: ChatRequest, use_schema: bool) -> dict[str, Any]:
        cfg = self.cfg
        args: dict[str, Any] = {
            "model": cfg.model,
            "messages": request.messages,
            "timeout": cfg.timeout_s,
            "extra_headers": {"X-FlexSQL-Stage": request.stage, "X-FlexSQL-Run": request.run_id},
        }
        if request.tools:
            args["tools"] = request.tools
            args["tool_choice"] = "auto"
        if cfg.temperature is not None:
            args["temperature"] = cfg.temperature
        if cfg.max_tokens is not None:
            args["max_tokens"] = cfg.max_tokens
        if cfg.reasoning_effort is not None:
            args["reasoning_effort"] = cfg.reasoning_effort
        if cfg.extra_body:
            args["extra_body"] = cfg.extra_body
        if use_schema and request.response_schema is not None:
            name = _SCHEMA_NAME.sub("_", request.schema_name or request.stage)[:64] or "answer"
            args["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": name, "schema": request.response_schema},
            }
        return args

    def _client(self) -> openai.AsyncOpenAI:
        key = _loop_key()
        client = self._clients.get(key)
        if client is None:
            # Our own httpx client: the SDK's default one closes itself from __del__ on whatever loop
            # runs at collection time, which fails once its own loop is gone (one loop per anyio.run).
            http = openai.DefaultAsyncHttpxClient(timeout=self.cfg.timeout_s)
            client = self._clients[key] = openai.AsyncOpenAI(
                base_url=self.base_url,
                api_key=self._secret(),
                max_retries=0,
                timeout=self.cfg.timeout_s,
                http_client=http,
            )
        return client

    def _backoff(self, attempt: int) -> float:
        # full jitter: uniform in [0, base * 2^attempt], capped
        return random.uniform(0, min(MAX_BACKOFF_S, self.cfg.retry_backoff_s * 2**attempt))

    # -- reply ----------------------------------------------------------------------------------

    def _reply(self, completion: Any, request: ChatRequest, watch: Stopwatch) -> ModelReply:
        if not getattr(completion, "choices", None):
            raise self._error(
                request,
                "answered without any choice",
                "check the server's logs; the request may have been cut by a proxy",
            )
        choice = completion.choices[0]
        message = choice.message
        extra = message.model_extra or {}
        reasoning = (
            getattr(message, "reasoning", None)
            or extra.get("reasoning")
            or getattr(message, "reasoning_content", None)
            or extra.get("reasoning_content")
        )
        think, content = split_think(message.content)
        if think and not reasoning:
            reasoning = think
        known = request.tool_names
        calls = [
            ToolCall(
                id=call.id or f"call_{i}",
                name=clean_tool_name(call.function.name or "", known),
                arguments=call.function.arguments if call.function.arguments is not None else "{}",
            )
            for i, call in enumerate(message.tool_calls or [])
            if getattr(call, "function", None) is not None
        ]
        usage = completion.usage
        return ModelReply(
            content=content,
            tool_calls=calls,
            reasoning=reasoning if isinstance(reasoning, str) and reasoning else None,
            usage=Usage(
                prompt_tokens=getattr(usage, "prompt_tokens", 0) or 0,
                completion_tokens=getattr(usage, "completion_tokens", 0) or 0,
            ),
            finish_reason=choice.finish_reason,
            model=completion.model,
            elapsed_s=watch.elapsed,
        )

    # -- errors (every text passes through _scrub) -----------------------------------------------

    def _scrub(self, text: str) -> str:
        secret = self._secret()
        if self._key_set and len(secret) >= 4:
            text = text.replace(secret, "***")
        return text

    def _error(self, request: ChatRequest, what: str, todo: str) -> ModelError:
        return ModelError(
            self._scrub(
                f"model endpoint {display_url(self.base_url)} (model {self.cfg.model}, stage {request.stage}) "
                f"{what}; {todo}"
            )
        )

    def _status_error(self, exc: openai.APIStatusError, request: ChatRequest, attempts: int) -> ModelError:
        status = exc.status_code
        detail = _error_text(exc)
        said = f"answered HTTP {status}" + (f" ({detail})" if detail else "")
        if status in RETRYABLE_STATUS:
            return self._error(
                request,
                f"{said}, {attempts} attempt(s)",
                "the server is overloaded or failing: check its logs, lower [model] "
                "concurrency, or raise [model] max_retries",
            )
        if status in (401, 403):
            where = (
                f"the variable {self.cfg.api_key_env}" + ("" if self._key_set else " (not set)")
                if self.cfg.api_key_env
                else "no variable: [model] api_key_env is not set"
            )
            return self._error(
                request,
                said,
                f"the API key was refused; it is read from {where} — set the right key "
                "there, or name another variable with api_key_env / --api-key-env",
            )
        if status == 404:
            return self._error(
                request,
                said,
                f"check [model] model against GET {display_url(self.base_url)}/models "
                "and that base_url ends in /v1",
            )
        return self._error(
            request,
            f"rejected the request: {said}",
            "check [model] settings (model, max_tokens, extra_body, response_format) "
            "against what the server supports",
        )


def _error_text(exc: openai.APIStatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        text = body.get("message") or body.get("detail") or body.get("error") or body
    else:
        text = body if body is not None else exc.message
    text = str(text).strip()
    return text if len(text) <= MAX_ERROR_TEXT else text[:MAX_ERROR_TEXT] + "…"


def _rejects_schema(exc: openai.APIStatusError) -> bool:
    if exc.status_code not in (400, 422):
        return False
    text = (_error_text(exc) + " " + str(exc.message)).lower()
    return "response_format" in text or "json_schema" in text


def _retry_after(headers: Any) -> float | None:
    """Seconds the server asked us to wait (Retry-After seconds or HTTP date, retry-after-ms), capped."""
    value = headers.get("retry-after-ms")
    try:
        if value is not None:
            return min(MAX_RETRY_AFTER_S, max(0.0, float(value) / 1000))
    except ValueError:
        pass
    value = headers.get("retry-after")
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        try:
            parsed = email.utils.parsedate_to_datetime(value)
        except (TypeError, ValueError):
            return None
        seconds = parsed.timestamp() - time.time()
    return min(MAX_RETRY_AFTER_S, max(0.0, seconds))
