"""A hostile model endpoint's replies, for the OpenAI stub (tests/support/openai_stub.py): malformed
bodies, huge ones, `{}`×N, JSON nested past any parser's depth, thousands of tool calls, a drip, and
echoes of what the request carried (the key, the Authorization header).

    with OpenAIStub(lambda req: MALFORMED["choices: [{}]"]) as stub: ...
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from typing import Any

from tests.support.openai_stub import Raw, StubRequest

DEEP = 1_200  # past CPython's recursion limit (1,000): json.loads and json.dumps raise RecursionError


def completion(
    message: Any = None, *, choices: Any = None, usage: Any = None, **extra: Any
) -> dict[str, Any]:
    """A chat.completion body; `message` (or `choices`) as given, however wrong."""
    body: dict[str, Any] = {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": "chat.completion",
        "created": 0,
        "model": "hostile",
        "choices": choices
        if choices is not None
        else [{"index": 0, "message": message, "finish_reason": "stop"}],
        "usage": usage if usage is not None else {"prompt_tokens": 1, "completion_tokens": 1},
        **extra,
    }
    return body


def raw_json(body: Any, **kwargs: Any) -> Raw:
    return Raw(json.dumps(body).encode(), **kwargs)


def content_reply(content: Any, **kwargs: Any) -> Raw:
    return raw_json(completion({"role": "assistant", "content": content}), **kwargs)


def nested(depth: int = DEEP) -> str:
    return "[" * depth + "]" * depth


def tool_calls_reply(calls: list[tuple[str, str]]) -> Raw:
    """A reply whose message carries these (name, raw arguments) tool calls."""
    message = {
        "role": "assistant",
        "content": None,
        "tool_calls": [
            {"id": f"call_{i}", "type": "function", "function": {"name": name, "arguments": arguments}}
            for i, (name, arguments) in enumerate(calls)
        ],
    }
    return raw_json(completion(message))


# every reply the red team saw crash the agent, and what the failure must say about it
MALFORMED: dict[str, tuple[Raw, str]] = {
    "non-JSON body": (Raw(b"<html>502 Bad Gateway</html>", content_type="text/html"), "not JSON"),
    "empty body": (Raw(b""), "empty"),
    "choices: [{}]": (raw_json(completion(choices=[{}])), "message"),
    "choices: [null]": (raw_json(completion(choices=[None])), "choice"),
    "choices not a list": (raw_json(completion(choices={"0": 1})), "choices"),
    "message: null": (raw_json(completion(None)), "message"),
    "content a number": (content_reply(42), "content"),
    "content an object": (content_reply({"type": "answerable"}), "content"),
    "tool_calls not a list": (
        raw_json(completion({"role": "assistant", "content": None, "tool_calls": "search_schema"})),
        "tool_calls",
    ),
    "tool call arguments a number": (
        raw_json(
            completion(
                {
                    "role": "assistant",
                    "tool_calls": [{"id": "c1", "function": {"name": "search_schema", "arguments": 7}}],
                }
            )
        ),
        "arguments",
    ),
    "usage with a string count": (
        raw_json(
            completion(
                {"role": "assistant", "content": '{"type": "answerable"}'},
                usage={"prompt_tokens": "many", "completion_tokens": 3},
            )
        ),
        "usage",
    ),
    "invalid UTF-8": (
        Raw(b'{"choices": [{"message": {"role": "assistant", "content": "\xff\xfe\xc3"}}]}'),
        "UTF-8",
    ),
    "a JSON array body": (raw_json([1, 2, 3]), "object"),
    # the body itself nested past the parser's depth (written as text: json.dumps cannot write it)
    "body nested 1,200 deep": (
        Raw(
            (
                '{"choices": [{"message": {"role": "assistant", "content": "x", "deep": ' + nested() + "}}]}"
            ).encode()
        ),
        "nested",
    ),
}


def braces(chars: int) -> str:
    """`{}`×N: every pair a JSON object the lenient parser could try."""
    return "{}" * (chars // 2)


def huge_body(content_bytes: int, *, chunk: int = 1 << 20) -> Iterator[bytes]:
    """A valid completion whose content is `content_bytes` of 'x', produced a chunk at a time
    (the test never holds it whole)."""
    head, tail = json.dumps(completion({"role": "assistant", "content": "@"})).encode().split(b"@")
    yield head
    left = content_bytes
    while left > 0:
        size = min(chunk, left)
        yield b"x" * size
        left -= size
    yield tail


def drip(body: bytes, *, every_s: float) -> Raw:
    """`body` one byte at a time, `every_s` apart."""
    return Raw([body[i : i + 1] for i in range(len(body))], drip_s=every_s)


def echo_headers(req: StubRequest) -> str:
    """What a hostile endpoint can echo of a request: its Authorization header."""
    return req.headers.get("authorization", "")
