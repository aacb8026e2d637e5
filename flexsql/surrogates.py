"""Lone surrogates: code points U+D800-U+DFFF standing alone, which JSON can carry as an escape
(`"\\ud800"`, and Python's json module reads it) but UTF-8 cannot encode. One in a model's reply made
`flexsql ask --json` die writing its answer; one in a client's request was dropped without a reply
(the SDK's strict parser refused the line). flexsql replaces each with U+FFFD, the replacement
character, wherever text comes in or goes out: a client's request (its JSON escapes, before the SDK
parses it), a tool's result, and everything the `flexsql` command prints."""

from __future__ import annotations

import codecs
import re
from typing import TypeVar

T = TypeVar("T")

REPLACEMENT = "\ufffd"
_LONE = re.compile("[\ud800-\udfff]")
# in JSON text: an escaped backslash (skipped, so the backslash parity is right), a high surrogate
# escape with the low one that completes it (kept), or any other surrogate escape (replaced)
_ESCAPES = re.compile(
    rb"\\\\|(\\u[dD][89abAB][0-9a-fA-F]{2}\\u[dD][c-fC-F][0-9a-fA-F]{2})|\\u[dD][89a-fA-F][0-9a-fA-F]{2}"
)
_MAYBE = re.compile(rb"\\u[dD][89a-fA-F]")


def replace_surrogates(value: T) -> T:
    """`value` with every lone surrogate in its strings (dict keys too, in lists, tuples and dicts)
    replaced by U+FFFD; the same object when there is none."""
    if isinstance(value, str):
        if value.isascii() or _LONE.search(value) is None:
            return value
        return _LONE.sub(REPLACEMENT, value)  # type: ignore[return-value]  # a str stays a str
    if isinstance(value, dict):
        items = [(replace_surrogates(k), replace_surrogates(v)) for k, v in value.items()]
        if all(k is k0 and v is v0 for (k, v), (k0, v0) in zip(items, value.items(), strict=True)):
            return value
        return dict(items)  # type: ignore[return-value]
    if isinstance(value, list | tuple):
        replaced = [replace_surrogates(v) for v in value]
        if all(a is b for a, b in zip(replaced, value, strict=True)):
            return value
        return type(value)(replaced)
    return value


def _escape(match: re.Match[bytes]) -> bytes:
    if match.group(0) == b"\\\\" or match.group(1) is not None:
        return match.group(0)
    return b"\\ufffd"


def replace_surrogate_escapes(text: bytes) -> bytes:
    """JSON text with every escape of a lone surrogate replaced by `\\ufffd`, of the same length (a
    body's Content-Length stays true); anything else, valid pairs included, as it was."""
    if _MAYBE.search(text) is None:
        return text
    return _ESCAPES.sub(_escape, text)


def _replace_on_encode(error: UnicodeError) -> tuple[str | bytes, int]:
    if not isinstance(error, UnicodeEncodeError):
        raise error
    # U+FFFD where the encoding has it (UTF-8, UTF-16…), given as bytes (CPython's UTF-8 encoder takes
    # only ASCII text from a handler), else the encoding's own '?'
    try:
        mark: str | bytes = REPLACEMENT.encode(error.encoding)
    except (UnicodeEncodeError, LookupError):
        mark = "?"
    return mark * (error.end - error.start), error.end


ERRORS = "flexsql.surrogates"
"""An `errors=` handler for text streams: what the stream cannot encode becomes U+FFFD (or '?')."""
codecs.register_error(ERRORS, _replace_on_encode)
