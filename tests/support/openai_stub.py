"""A real HTTP server speaking the OpenAI Chat Completions API, with replies scripted per request.

    with OpenAIStub(lambda req: Reply(content='{"type": "answerable"}')) as stub:
        model = OpenAICompatModel(ResolvedModelConfig(base_url=stub.base_url, model="m"))
        ...
        assert stub.requests[0].stage == "classify"

The script is a function of the StubRequest (return a Reply, Fail, Hang, Raw, a str: the content, or
a dict: JSON content) or a list of those, consumed in order. Bodies look like vLLM's; a Raw reply is
sent byte for byte as it is (a malformed or huge body, a slow drip: tests/support/hostile_model.py).
"""

from __future__ import annotations

import json
import threading
import time
import traceback
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class StubRequest:
    headers: dict[str, str]  # lower-case names
    body: dict[str, Any]
    stage: str | None  # X-FlexSQL-Stage
    run_id: str | None  # X-FlexSQL-Run
    received_at: float = field(default_factory=time.monotonic)

    @property
    def messages(self) -> list[dict[str, Any]]:
        return self.body.get("messages", [])

    @property
    def tools(self) -> list[str]:
        return [t.get("function", {}).get("name", "") for t in self.body.get("tools") or []]

    @property
    def last_user_text(self) -> str:
        for message in reversed(self.messages):
            if message.get("role") == "user":
                return _text(message.get("content"))
        return ""

    @property
    def text(self) -> str:
        """Every message's text, joined: for `"CREATE TABLE" in req.text` style checks."""
        return "\n".join(_text(m.get("content")) for m in self.messages)

    @property
    def has_tool_results(self) -> bool:
        return any(m.get("role") == "tool" for m in self.messages)

    @property
    def tool_results(self) -> list[str]:
        return [_text(m.get("content")) for m in self.messages if m.get("role") == "tool"]


@dataclass
class Reply:
    content: str | dict[str, Any] | None = None  # a dict is sent as its JSON text
    tool_calls: list[tuple[str, dict[str, Any] | str]] = field(
        default_factory=list
    )  # (name, args or raw text)
    reasoning: str | None = None
    reasoning_field: str = "reasoning"  # or "reasoning_content" (older vLLM)
    usage: tuple[int, int] | None = None  # (prompt, completion); None: about 4 characters a token
    finish_reason: str | None = None  # None: "tool_calls" when there are some, else "stop"


@dataclass
class Fail:
    status: int = 429
    headers: dict[str, str] = field(default_factory=dict)
    message: str = "stub failure"


@dataclass
class Hang:
    seconds: float
    then: Reply | Fail | None = None  # what to answer after sleeping (default: an empty reply)


@dataclass
class Raw:
    """A reply sent as it is: `body` (bytes, or chunks produced lazily) with `status` and headers.

    length: send Content-Length (the real one, or `declared` when given); else the body ends when
    the connection closes. drip_s: sleep between chunks (a reply dripped a chunk at a time)."""

    body: bytes | Iterable[bytes] = b""
    status: int = 200
    content_type: str = "application/json"
    headers: dict[str, str] = field(default_factory=dict)
    length: bool = True
    declared: int | None = None
    drip_s: float = 0.0


Script = Callable[[StubRequest], Any] | list[Any]


class OpenAIStub:
    """POST /v1/chat/completions and GET /v1/models on 127.0.0.1, a free port, a background thread."""

    def __init__(
        self,
        script: Script,
        *,
        reject_json_schema: bool = False,
        model: str = "stub-model",
        port: int = 0,
        keep_requests: bool = True,
        prefix_cache: bool = False,
    ) -> None:
        """prefix_cache: simulate vLLM's automatic prefix caching and report the cached prompt tokens
        in `usage.prompt_tokens_details.cached_tokens` (as vLLM with --enable-prompt-tokens-details
        and OpenAI do): the longest prefix of the flattened request shared with an earlier one, in
        whole blocks of 64 characters (~16 tokens), at 4 characters a token."""
        self.script = script
        self.prefix_cache = prefix_cache
        self._seen: list[str] = []
        self.port = port
        self.keep_requests = keep_requests  # off for long benchmark runs: memory stays flat
        self.reject_json_schema = reject_json_schema
        self.model = model
        self.requests: list[StubRequest] = []
        self.errors: list[str] = []  # exceptions the script raised (re-raised on exit)
        self.in_flight = 0
        self.max_in_flight = 0
        self.raw_bytes_sent = 0  # body bytes of Raw replies that reached the socket
        self.raw_complete = 0  # Raw replies sent to their end (the client read them whole)
        self._lock = threading.Lock()
        self._queue = list(script) if isinstance(script, list) else None
        self._server: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def base_url(self) -> str:
        assert self._server is not None, "use OpenAIStub as a context manager"
        return f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def __enter__(self) -> OpenAIStub:
        stub = self

        class Handler(_Handler):
            owner = stub

        self._server = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self._server.daemon_threads = True
        self._server.block_on_close = False  # a Hang must not hold up the test's exit
        self._thread = threading.Thread(
            target=self._server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True, name="openai-stub"
        )
        self._thread.start()
        return self

    def __exit__(self, exc_type: Any, *_: Any) -> None:
        assert self._server is not None and self._thread is not None
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)
        if self.errors and exc_type is None:
            raise AssertionError("the stub's script raised:\n" + "\n".join(self.errors))

    # -- answering ----------------------------------------------------------------------------

    def _next(self, request: StubRequest) -> Any:
        if self._queue is not None:
            with self._lock:
                if not self._queue:
                    return Fail(
                        500,
                        message=f"stub script exhausted at request {len(self.requests)} "
                        f"(stage {request.stage})",
                    )
                return self._queue.pop(0)
        return self.script(request)  # type: ignore[operator]

    def answer(self, request: StubRequest) -> tuple[int, dict[str, str], dict[str, Any]]:
        fmt = request.body.get("response_format") or {}
        if self.reject_json_schema and fmt.get("type") == "json_schema":
            return _error(
                400, "response_format json_schema is not supported by this server", "BadRequestError"
            )
        try:
            reply = self._next(request)
        except Exception:
            self.errors.append(traceback.format_exc())
            return _error(500, "the stub's script raised (see the test's failure)", "InternalServerError")
        if isinstance(reply, Hang):
            time.sleep(reply.seconds)
            reply = reply.then or Reply(content="")
        if isinstance(reply, Raw):
            return reply.status, {}, reply  # type: ignore[return-value]
        if isinstance(reply, Fail):
            status, headers, body = _error(
                reply.status, reply.message, "RateLimitError" if reply.status == 429 else "Error"
            )
            return status, {**headers, **reply.headers}, body
        if isinstance(reply, str):
            reply = Reply(content=reply)
        elif isinstance(reply, dict):
            reply = Reply(content=reply)
        if not isinstance(reply, Reply):
            self.errors.append(f"the script returned {reply!r}; return Reply, Fail, Hang, str or dict")
            return _error(500, "bad script reply", "InternalServerError")
        return 200, {}, self._completion(request, reply)

    def _completion(self, request: StubRequest, reply: Reply) -> dict[str, Any]:
        content = json.dumps(reply.content) if isinstance(reply.content, dict) else reply.content
        calls = [
            {
                "id": f"chatcmpl-tool-{uuid.uuid4().hex[:16]}",
                "type": "function",
                "function": {"name": name, "arguments": args if isinstance(args, str) else json.dumps(args)},
            }
            for name, args in reply.tool_calls
        ]
        message: dict[str, Any] = {
            "role": "assistant",
            "content": content,
            "tool_calls": calls,
            "refusal": None,
            "annotations": None,
            "audio": None,
            "function_call": None,
        }
        message[reply.reasoning_field] = reply.reasoning
        if reply.usage is not None:
            prompt, completion = reply.usage
        else:
            prompt = len(json.dumps(request.messages)) // 4
            completion = max(
                1, (len(content or "") + sum(len(c["function"]["arguments"]) for c in calls)) // 4
            )
        details = None
        if self.prefix_cache:
            text = flatten(request.body)
            with self._lock:
                shared = max((common_prefix(text, t) for t in self._seen), default=0)
                self._seen.append(text)
            if reply.usage is None:
                prompt = len(text) // 4  # what the server tokenised: the tools included
            details = {"cached_tokens": min(prompt, shared // CACHE_BLOCK * CACHE_BLOCK // 4)}
        return {
            "id": f"chatcmpl-{uuid.uuid4().hex}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": request.body.get("model", self.model),
            "choices": [
                {
                    "index": 0,
                    "message": message,
                    "logprobs": None,
                    "finish_reason": reply.finish_reason or ("tool_calls" if calls else "stop"),
                    "stop_reason": None,
                }
            ],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
                "prompt_tokens_details": details,
            },
            "prompt_logprobs": None,
        }


class _Handler(BaseHTTPRequestHandler):
    owner: OpenAIStub
    protocol_version = "HTTP/1.1"  # keep-alive, as the SDK's connection pool expects
    timeout = 60  # an idle keep-alive connection's thread ends eventually
    disable_nagle_algorithm = True  # headers and body are two writes: Nagle + delayed ACK would add 40 ms

    def log_message(self, *_: Any) -> None:  # quiet
        pass

    def do_GET(self) -> None:
        if self.path.rstrip("/") == "/v1/models":
            self._send(
                200,
                {},
                {
                    "object": "list",
                    "data": [
                        {
                            "id": self.owner.model,
                            "object": "model",
                            "created": int(time.time()),
                            "owned_by": "vllm",
                        }
                    ],
                },
            )
        else:
            self._send(*_error(404, f"no route {self.path}", "NotFoundError"))

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length)
        if self.path.rstrip("/") != "/v1/chat/completions":
            self._send(*_error(404, f"no route {self.path}", "NotFoundError"))
            return
        try:
            body = json.loads(raw or b"{}")
        except json.JSONDecodeError as exc:
            self._send(*_error(400, f"invalid JSON body: {exc}", "BadRequestError"))
            return
        headers = {k.lower(): v for k, v in self.headers.items()}
        request = StubRequest(headers, body, headers.get("x-flexsql-stage"), headers.get("x-flexsql-run"))
        owner = self.owner
        with owner._lock:
            if owner.keep_requests:
                owner.requests.append(request)
            owner.in_flight += 1
            owner.max_in_flight = max(owner.max_in_flight, owner.in_flight)
        try:
            status, extra, payload = owner.answer(request)
        finally:
            with owner._lock:
                owner.in_flight -= 1
        if isinstance(payload, Raw):
            self._send_raw(payload)
        else:
            self._send(status, extra, payload)

    def _send_raw(self, raw: Raw) -> None:
        chunks = [raw.body] if isinstance(raw.body, bytes) else raw.body
        try:
            self.send_response(raw.status)
            self.send_header("Content-Type", raw.content_type)
            if raw.length:
                size = raw.declared if raw.declared is not None else len(raw.body)  # type: ignore[arg-type]
                self.send_header("Content-Length", str(size))
            else:
                self.send_header("Connection", "close")
                self.close_connection = True
            for name, value in raw.headers.items():
                self.send_header(name, value)
            self.end_headers()
            for chunk in chunks:
                if raw.drip_s:
                    time.sleep(raw.drip_s)
                self.wfile.write(chunk)
                self.wfile.flush()
                with self.owner._lock:
                    self.owner.raw_bytes_sent += len(chunk)
            with self.owner._lock:
                self.owner.raw_complete += 1
        except (BrokenPipeError, ConnectionResetError):  # the client stopped reading: what a cap does
            self.close_connection = True

    def _send(self, status: int, headers: dict[str, str], payload: dict[str, Any]) -> None:
        data = json.dumps(payload).encode()
        try:
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up (timeout, cancellation)
            self.close_connection = True


CACHE_BLOCK = 64  # characters of one simulated cache block (~16 tokens)


def flatten(body: dict[str, Any]) -> str:
    """A request as chat templates lay it out: the system text, the tool definitions, then every
    message with its tool calls (what a server's prefix cache sees, in order)."""
    messages = list(body.get("messages", []))
    parts = []
    if messages and messages[0].get("role") == "system":
        parts.append("S:" + _text(messages[0].get("content")))
        messages = messages[1:]
    parts.append("T:" + json.dumps(body.get("tools") or [], sort_keys=True))
    for m in messages:
        calls = json.dumps(m.get("tool_calls") or "", sort_keys=True)
        parts.append(str(m.get("role", "?"))[:1].upper() + ":" + _text(m.get("content")) + calls)
    return "\n".join(parts)


def common_prefix(a: str, b: str) -> int:
    """Length of the longest common prefix of two texts (a binary search over slice comparisons)."""
    lo, hi = 0, min(len(a), len(b))
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if a[:mid] == b[:mid]:
            lo = mid
        else:
            hi = mid - 1
    return lo


def _error(status: int, message: str, kind: str) -> tuple[int, dict[str, str], dict[str, Any]]:
    return status, {}, {"error": {"message": message, "type": kind, "param": None, "code": status}}


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # content parts
        return "\n".join(p.get("text", "") for p in content if isinstance(p, dict))
    return "" if content is None else str(content)
