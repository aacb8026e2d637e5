"""OpenAI-compatible Chat Completions backend (vLLM, OpenAI, any compatible server), over httpx.

The endpoint is not trusted: a reply is read as a stream and refused past [model] max_reply_bytes
(its Content-Length, or the bytes read), the whole request — its retries and their backoff included —
is cut at [model] timeout_s however slowly the server drips it, and the body is checked field by field off the event loop — anything
that is not a chat completion (not JSON, not UTF-8, nested past the parser's depth, a choice
without a message, content that is not text, a usage count that is not a number) is a ModelError
that says what the endpoint sent, never a crash. Retries (429, 5xx, timeouts, connection errors)
use exponential backoff with full jitter and honour Retry-After; concurrency is bounded per
endpoint for the whole process. The API key lives in a closure and the request headers only:
every text raised, and every reply, is scrubbed of it and of the URL's credentials in every form
(flexsql.agent.secrets), so a key the endpoint echoes reaches nothing the agent writes.
"""

from __future__ import annotations

import asyncio
import email.utils
import functools
import json
import os
import random
import re
import ssl
import threading
import time
import weakref
import zlib
from collections.abc import Callable
from typing import Any
from urllib.parse import urljoin, urlsplit, urlunsplit

import anyio
import httpx

from flexsql.agent.contract import too_deep
from flexsql.agent.models.base import (
    ChatRequest,
    ModelError,
    ModelReply,
    ResolvedModelConfig,
    Stopwatch,
    ToolCall,
    Usage,
)
from flexsql.agent.secrets import Scrubber, endpoint_secrets

MAX_RETRY_AFTER_S = 30.0  # a server asking for longer is treated as down: fail instead of stalling a run
MAX_BACKOFF_S = 20.0
MAX_ERROR_TEXT = 400
ERROR_BODY_BYTES = 64 * 1024  # of an error reply's body: enough for its message, never more
BODY_DEPTH = 32  # nesting of a chat completion body (a real one nests 6 deep)
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


@functools.cache
def _tls() -> ssl.SSLContext:
    """One TLS context for every client of the process: building one reads the CA bundle (about 50 ms,
    paid by each new client, i.e. each run and event loop, before)."""
    return httpx.create_ssl_context()


def _loop_key() -> Any:
    """The running event loop: HTTP clients (their connection pools) are per loop."""
    try:
        return asyncio.get_running_loop()
    except RuntimeError:  # trio: one loop per process in practice
        return _TrioKey


class _TrioKey:
    pass


class _TooBig(Exception):
    """A reply past max_reply_bytes: `size` bytes announced (Content-Length) or read so far."""

    def __init__(self, size: int, announced: bool) -> None:
        super().__init__(size)
        self.size = size
        self.announced = announced


class _Malformed(Exception):
    """A 200 reply that is not a chat completion; the message says what it was instead."""


class _StatusError:
    """A non-2xx reply: its status, headers and (the first ERROR_BODY_BYTES of) its body."""

    def __init__(self, status: int, headers: httpx.Headers, body: bytes) -> None:
        self.status_code = status
        self.headers = headers
        text = body.decode("utf-8", errors="replace")
        try:
            parsed: Any = json.loads(text)
        except (ValueError, RecursionError):
            parsed = None
        if isinstance(parsed, dict) and "error" in parsed:
            parsed = parsed["error"]  # OpenAI's shape: {"error": {"message": …}}
        self.body: Any = parsed if parsed is not None else text
        self.message = f"Error code: {status}"


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
        # a named variable that is not set: refused at the first request rather than sent as a placeholder
        self._missing_key = bool(cfg.api_key_env and not key and api_key is None)
        self._key_set = bool(key)
        # The key lives only inside this closure and the request headers; never an attribute a repr
        # could show. The scrubber holds its forms (and the URL's credentials) to mask them.
        secret = key or "EMPTY"  # vLLM without --api-key accepts any key; send the usual placeholder
        self._secret: Callable[[], str] = lambda: secret
        self._scrubber = Scrubber(endpoint_secrets(self.base_url, key))
        self._clients: weakref.WeakKeyDictionary[Any, httpx.AsyncClient] = weakref.WeakKeyDictionary()

    def __repr__(self) -> str:
        return f"OpenAICompatModel({self.name!r})"

    # -- the protocol ---------------------------------------------------------------------------

    async def complete(self, request: ChatRequest) -> ModelReply:
        # [model] timeout_s bounds the whole request, retries and their backoff included: a hung
        # endpoint fails within timeout_s, not max_retries + 1 times over.
        if self._missing_key and self.cfg.api_key_env:
            from flexsql.config import key_variable_problem
            from flexsql.errors import ConfigError

            raise ConfigError(f"[model] api_key_env {key_variable_problem(self.cfg.api_key_env)}")
        watch = Stopwatch()
        deadline = time.monotonic() + self.cfg.timeout_s
        use_schema = self._sends_schema(request)
        attempt = 0
        while True:
            # Failures are raised after the except blocks, so that no ModelError carries the HTTP
            # client's exception (and through it the request and its Authorization header) as
            # __context__.
            failure: ModelError | None = None
            retry: tuple[str, str] | None = None  # (what happened, what to do) if there is no retry
            delay = 0.0
            try:
                queued = time.monotonic()
                async with endpoint_limiter(self.base_url, self.cfg.concurrency):
                    deadline += time.monotonic() - queued  # waiting for a slot is not the endpoint's time
                    status, headers, body = await self._post(request, use_schema, deadline)
            except (TimeoutError, httpx.TimeoutException):
                retry = (
                    f"did not answer within {self.cfg.timeout_s:g} s ([model] timeout_s, the bound of one "
                    f"request with its retries), {attempt + 1} attempt(s)",
                    "check that the server is up and not overloaded, or raise [model] timeout_s "
                    "(FLEXSQL_MODEL__TIMEOUT_S)",
                )
                delay = self._backoff(attempt)
            except _TooBig as exc:  # the same request would get the same reply: not retried
                failure = self._error(
                    request,
                    f"sent a reply of {'' if exc.announced else 'more than '}{exc.size:,} bytes, past "
                    f"[model] max_reply_bytes ({self.cfg.max_reply_bytes:,}); it was not read",
                    "lower [model] max_tokens, or raise max_reply_bytes (FLEXSQL_MODEL__MAX_REPLY_BYTES) "
                    "if the server is right to send that much",
                )
            except _Malformed as exc:
                failure = self._malformed(request, str(exc))
            except httpx.HTTPError as exc:  # connection refused or reset, a broken HTTP exchange
                cause = exc.__cause__ or exc
                retry = (
                    f"cannot be reached ({type(cause).__name__}: {cause}), {attempt + 1} attempt(s)",
                    "check that the server is running and [model] base_url is right (it usually ends in /v1)",
                )
                delay = self._backoff(attempt)
            else:
                if 200 <= status < 300:
                    try:
                        # off the event loop: a big body takes a while to check, and other
                        # sessions must not wait for it
                        return await anyio.to_thread.run_sync(self._reply, body, request, watch)
                    except _Malformed as exc:
                        failure = self._malformed(request, str(exc))
                else:
                    error = _StatusError(status, headers, body)
                    if use_schema and self.cfg.response_format == "auto" and _rejects_schema(error):
                        # Not a failure of the request: the endpoint lacks structured outputs; ask
                        # again without, and never offer it again (lenient parsing takes over).
                        _NO_JSON_SCHEMA.add(self.base_url)
                        use_schema = False
                        continue
                    if status not in RETRYABLE_STATUS or attempt >= self.cfg.max_retries:
                        failure = self._status_error(error, request, attempt + 1)
                    else:
                        retry_after = _retry_after(headers)
                        delay = self._backoff(attempt) if retry_after is None else retry_after
                        if time.monotonic() + delay >= deadline:
                            failure = self._status_error(error, request, attempt + 1, out_of_time=True)
            if retry is not None and (
                attempt >= self.cfg.max_retries or time.monotonic() + delay >= deadline
            ):
                failure = self._error(request, *retry)
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
        # when tool_choice is auto (vllm#39929), so a request that allows tool calls goes without
        # it and its final answer is parsed leniently; set response_format = "json_schema" for
        # endpoints that combine both (OpenAI).
        allows_calls = bool(request.tools) and request.tool_choice != "none"
        return not allows_calls and self.base_url not in _NO_JSON_SCHEMA

    def _arguments(self, request: ChatRequest, use_schema: bool) -> dict[str, Any]:
        """The request body; extra_body's keys are merged in at the top level, over the others."""
        cfg = self.cfg
        args: dict[str, Any] = {"model": cfg.model, "messages": request.messages}
        if request.tools:
            args["tools"] = request.tools
            args["tool_choice"] = request.tool_choice
        if cfg.temperature is not None:
            args["temperature"] = cfg.temperature
        if cfg.max_tokens is not None:
            args["max_tokens"] = cfg.max_tokens
        if cfg.reasoning_effort is not None:
            args["reasoning_effort"] = cfg.reasoning_effort
        if use_schema and request.response_schema is not None:
            name = _SCHEMA_NAME.sub("_", request.schema_name or request.stage)[:64] or "answer"
            args["response_format"] = {
                "type": "json_schema",
                "json_schema": {"name": name, "schema": request.response_schema},
            }
        return {**args, **cfg.extra_body}

    def _headers(self, request: ChatRequest) -> dict[str, str]:
        return {
            "Authorization": f"Bearer {self._secret()}",
            "Content-Type": "application/json",
            "Accept": "application/json",
            "Accept-Encoding": "identity",  # a compressed reply could not be capped as it is read
            "User-Agent": "flexsql",
            "X-FlexSQL-Stage": request.stage,
            "X-FlexSQL-Run": request.run_id,
        }

    async def _post(
        self, request: ChatRequest, use_schema: bool, deadline: float
    ) -> tuple[int, httpx.Headers, bytes]:
        """(status, headers, body) of one POST, the whole of it before `deadline` (time.monotonic); a
        2xx body is refused past max_reply_bytes (announced or read), an error body is cut at
        ERROR_BODY_BYTES."""
        content = json.dumps(self._arguments(request, use_schema), default=str).encode()
        with anyio.fail_after(max(deadline - time.monotonic(), 0.0)):
            async with self._client().stream(
                "POST", f"{self.base_url}/chat/completions", content=content, headers=self._headers(request)
            ) as response:
                ok = 200 <= response.status_code < 300
                limit = self.cfg.max_reply_bytes if ok else ERROR_BODY_BYTES
                announced = _content_length(response.headers)
                if announced is not None and announced > limit:
                    if ok:
                        raise _TooBig(announced, announced=True)
                    return response.status_code, response.headers, b""
                raw = await _read_capped(response, limit, ok)
                body = _decoded(raw, response.headers.get("content-encoding", ""), limit, ok)
                return response.status_code, response.headers, body

    def _client(self) -> httpx.AsyncClient:
        key = _loop_key()
        client = self._clients.get(key)
        if client is None:
            # per event loop: a client's connection pool belongs to the loop it was made on
            client = self._clients[key] = httpx.AsyncClient(
                # a redirect is not followed: it would send the whole prompt, and the key, to an
                # address no one configured (_status_error says where base_url should point)
                timeout=httpx.Timeout(self.cfg.timeout_s),
                follow_redirects=False,
                verify=_tls(),
            )
        return client

    def _backoff(self, attempt: int) -> float:
        # full jitter: uniform in [0, base * 2^attempt], capped
        return random.uniform(0, min(MAX_BACKOFF_S, self.cfg.retry_backoff_s * 2**attempt))

    # -- reply ----------------------------------------------------------------------------------

    def _reply(self, body: bytes, request: ChatRequest, watch: Stopwatch) -> ModelReply:
        """The reply in `body` (run in a worker thread), scrubbed of the endpoint's secrets."""
        reply = completion_reply(body, request.tool_names)
        reply.elapsed_s = watch.elapsed
        return self._scrubber.model(reply)

    # -- errors (every text passes through _scrub) -----------------------------------------------

    def _scrub(self, text: str) -> str:
        return self._scrubber.text(text)

    def _error(self, request: ChatRequest, what: str, todo: str) -> ModelError:
        return ModelError(
            self._scrub(
                f"model endpoint {display_url(self.base_url)} (model {self.cfg.model}, stage {request.stage}) "
                f"{what}; {todo}"
            )
        )

    def _malformed(self, request: ChatRequest, what: str) -> ModelError:
        return self._error(
            request,
            f"answered {what}, not a chat completion",
            "check that base_url points at an OpenAI-compatible API (it usually ends in /v1) and not at "
            "a proxy or a web page",
        )

    def _status_error(
        self, exc: _StatusError, request: ChatRequest, attempts: int, out_of_time: bool = False
    ) -> ModelError:
        status = exc.status_code
        detail = _error_text(exc)
        said = f"answered HTTP {status}" + (f" ({detail})" if detail else "")
        if status in RETRYABLE_STATUS:
            within = f" within [model] timeout_s ({self.cfg.timeout_s:g} s)" if out_of_time else ""
            return self._error(
                request,
                f"{said}, {attempts} attempt(s){within}",
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
        if 300 <= status < 400:
            location = exc.headers.get("location", "")
            target = display_url(urljoin(f"{self.base_url}/chat/completions", location)) if location else None
            return self._error(
                request,
                f"{said}, a redirect{f' to {target}' if target else ''}, which flexsql does not follow (it "
                "would send the prompt and the key to an address you did not configure)",
                "set [model] base_url to the endpoint's own address"
                + (f" (the redirect points at {target})" if target else ""),
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


# -- reading a reply --------------------------------------------------------------------------------


def _content_length(headers: httpx.Headers) -> int | None:
    value = headers.get("content-length", "").strip()
    return int(value) if value.isdigit() else None


async def _read_capped(response: httpx.Response, limit: int, refuse: bool) -> bytes:
    """The body as sent, at most `limit` bytes: past it, _TooBig when `refuse`, else what fit."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in response.aiter_raw():
        if size + len(chunk) > limit:
            if refuse:
                raise _TooBig(limit, announced=False)
            chunks.append(chunk[: limit - size])
            break
        chunks.append(chunk)
        size += len(chunk)
    return b"".join(chunks)


def _decoded(raw: bytes, encoding: str, limit: int, refuse: bool) -> bytes:
    """`raw` undone of its Content-Encoding (we ask for none; a server may compress anyway), never
    past `limit` bytes once decompressed (a small gzip can hold gigabytes)."""
    encoding = encoding.strip().lower()
    if encoding in ("", "identity"):
        return raw
    if encoding not in ("gzip", "x-gzip", "deflate"):
        if refuse:
            raise _Malformed(f"a body compressed as {encoding[:40]!r}, which flexsql does not read")
        return b""
    # gzip or zlib (auto-detected), then raw deflate (what some servers call deflate)
    for wbits in (47, -15):
        inflater = zlib.decompressobj(wbits)
        try:
            out = inflater.decompress(raw, limit + 1)
        except zlib.error:
            continue
        if len(out) > limit or inflater.unconsumed_tail:
            if refuse:
                raise _TooBig(limit, announced=False)
            return out[:limit]
        return out
    if refuse:
        raise _Malformed(f"a body that is not valid {encoding}")
    return b""


def _kind(value: Any) -> str:
    """What a JSON value is, for a message: "a string", "a number", …"""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    return "an object"


def _count(usage: dict[str, Any], name: str) -> int:
    value = usage.get(name)
    if value is None:
        return 0
    if isinstance(value, bool) or not isinstance(value, int | float) or value < 0 or value != int(value):
        raise _Malformed(f"usage.{name} that is {_kind(value)}, not a count of tokens")
    return int(value)


def _cached(usage: dict[str, Any]) -> int:
    """Cached prompt tokens, where the server reports them (`prompt_tokens_details.cached_tokens`:
    OpenAI, vLLM with --enable-prompt-tokens-details); an optional extension, so a malformed one
    counts as none rather than failing the reply."""
    details = usage.get("prompt_tokens_details")
    value = details.get("cached_tokens") if isinstance(details, dict) else None
    return value if isinstance(value, int) and not isinstance(value, bool) and value >= 0 else 0


def _text_content(content: Any) -> str | None:
    """Message content: text, or a list of text parts (joined)."""
    if content is None or isinstance(content, str):
        return content
    if isinstance(content, list):
        texts = []
        for part in content:
            text = part.get("text") if isinstance(part, dict) else None
            if not isinstance(text, str):
                raise _Malformed("message content parts that are not text")
            texts.append(text)
        return "".join(texts)
    raise _Malformed(f"message content that is {_kind(content)}, not text")


def completion_body(body: bytes) -> dict[str, Any]:
    """The JSON object of a 200 reply's body, or _Malformed saying what the body was instead."""
    if not body.strip():
        raise _Malformed("an empty body")
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise _Malformed(
            f"a body that is not UTF-8 (byte 0x{body[exc.start]:02x} at {exc.start:,})"
        ) from None
    try:
        data = json.loads(text.lstrip("\ufeff"))
    except RecursionError:
        raise _Malformed("JSON nested deeper than the parser allows") from None
    except ValueError:
        start = " ".join(text[:80].split())
        raise _Malformed(f"a body that is not JSON (it starts {start!r})") from None
    if too_deep(data, BODY_DEPTH):
        raise _Malformed(f"JSON nested more than {BODY_DEPTH} levels deep")
    if not isinstance(data, dict):
        raise _Malformed(f"a JSON body that is {_kind(data)}, not an object")
    return data


def completion_reply(body: bytes, known_tools: list[str]) -> ModelReply:
    """The ModelReply in a chat completion body, every field checked: _Malformed on the first one
    that is not what the protocol says (optional extensions that are wrong are left out)."""
    data = completion_body(body)
    choices = data.get("choices")
    if choices is None and data.get("error") is not None:
        error = data["error"]
        detail = error.get("message") if isinstance(error, dict) else error
        raise _Malformed(f"an error instead of a completion ({str(detail)[:MAX_ERROR_TEXT]})")
    if not isinstance(choices, list):
        raise _Malformed(f"choices that is {_kind(choices)}, not a list")
    if not choices:
        raise _Malformed("no choice (the request may have been cut by a proxy)")
    choice = choices[0]
    if not isinstance(choice, dict):
        raise _Malformed(f"a choice that is {_kind(choice)}, not an object")
    message = choice.get("message")
    if not isinstance(message, dict):
        raise _Malformed(f"a choice without a message (its message is {_kind(message)})")
    think, content = split_think(_text_content(message.get("content")))
    reasoning = next(
        (
            message[k]
            for k in ("reasoning", "reasoning_content")
            if isinstance(message.get(k), str) and message[k]
        ),
        None,
    )
    raw_calls = message.get("tool_calls")
    if raw_calls is not None and not isinstance(raw_calls, list):
        raise _Malformed(f"message tool_calls that is {_kind(raw_calls)}, not a list")
    calls = []
    for i, call in enumerate(raw_calls or []):
        if not isinstance(call, dict):
            raise _Malformed(f"tool call {i + 1} that is {_kind(call)}, not an object")
        function = call.get("function")
        if function is None:
            continue
        if not isinstance(function, dict):
            raise _Malformed(f"tool call {i + 1} whose function is {_kind(function)}, not an object")
        name, arguments = function.get("name"), function.get("arguments")
        if name is not None and not isinstance(name, str):
            raise _Malformed(f"tool call {i + 1} whose name is {_kind(name)}, not text")
        if isinstance(arguments, dict):  # some servers send the object itself
            arguments = json.dumps(arguments)
        elif arguments is not None and not isinstance(arguments, str):
            raise _Malformed(f"tool call {i + 1} with arguments that are {_kind(arguments)}, not JSON text")
        call_id = call.get("id")
        calls.append(
            ToolCall(
                id=call_id if isinstance(call_id, str) and call_id else f"call_{i}",
                name=clean_tool_name(name or "", known_tools),
                arguments=arguments if arguments is not None else "{}",
            )
        )
    usage = data.get("usage")
    if usage is not None and not isinstance(usage, dict):
        raise _Malformed(f"usage that is {_kind(usage)}, not an object")
    usage = usage or {}
    finish = choice.get("finish_reason")
    model = data.get("model")
    return ModelReply(
        content=content,
        tool_calls=calls,
        reasoning=reasoning or (think if think else None),
        usage=Usage(
            prompt_tokens=_count(usage, "prompt_tokens"),
            completion_tokens=_count(usage, "completion_tokens"),
            cached_tokens=_cached(usage),
        ),
        finish_reason=finish if isinstance(finish, str) else None,
        model=model if isinstance(model, str) else None,
    )


def _error_text(exc: _StatusError) -> str:
    body = exc.body
    if isinstance(body, dict):
        text = body.get("message") or body.get("detail") or body.get("error") or body
    else:
        text = body if body else exc.message
    text = str(text).strip()
    return text if len(text) <= MAX_ERROR_TEXT else text[:MAX_ERROR_TEXT] + "…"


def _rejects_schema(exc: _StatusError) -> bool:
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
