"""Handles a server gives its clients to reach state it keeps — result ids of the store that stateless
HTTP clients share, conversation ids minted for them — are random, and end with a short check made
with a key of this server process. The state behind a handle lives in one process only, so a handle
another process minted (a replica behind the same address, or this server before a restart) can never
name anything here; the check lets the server say so, instead of the "unknown or evicted" it says of a
handle it gave and has since dropped. The check is a courtesy, not the protection: the random part
alone keeps a handle unguessable, and a handle this process never stored resolves to nothing either
way."""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import string

_KEY = secrets.token_bytes(16)  # this process's: another process (or this one restarted) has its own

URLSAFE = string.ascii_letters + string.digits + "-_"
HEX = "0123456789abcdef"


def _check(body: str, alphabet: str, chars: int) -> str:
    digest = hmac.new(_KEY, body.encode(), hashlib.sha256).digest()
    return "".join(alphabet[b % len(alphabet)] for b in digest[:chars])


class HandleKind:
    """One kind of handle: `prefix`, then `random_chars` random characters of `alphabet`, then
    `check_chars` characters of the check."""

    def __init__(self, prefix: str, alphabet: str, random_chars: int, check_chars: int) -> None:
        self.prefix = prefix
        self.alphabet = alphabet
        self.random_chars = random_chars
        self.check_chars = check_chars
        chars = "".join(re.escape(c) for c in alphabet)
        self._shape = re.compile(f"{re.escape(prefix)}[{chars}]{{{random_chars + check_chars}}}")

    def mint(self) -> str:
        body = self.prefix + "".join(secrets.choice(self.alphabet) for _ in range(self.random_chars))
        return body + _check(body, self.alphabet, self.check_chars)

    def has_shape(self, handle: str) -> bool:
        """Whether `handle` looks like one this kind mints (by anyone)."""
        return self._shape.fullmatch(handle) is not None

    def minted_here(self, handle: str) -> bool:
        """Whether this process minted `handle` (1 in len(alphabet)**check_chars of other handles pass)."""
        if not self.has_shape(handle):
            return False
        body, check = handle[: -self.check_chars], handle[-self.check_chars :]
        return hmac.compare_digest(check, _check(body, self.alphabet, self.check_chars))


RESULT_IDS = HandleKind("r_", URLSAFE, random_chars=10, check_chars=2)
"""Result ids of a store several clients share: `r_` + 10 random URL-safe characters (60 bits) + 2 of check."""

CONVERSATION_IDS = HandleKind("conv-", HEX, random_chars=28, check_chars=4)
"""Conversation ids minted on stateless HTTP: `conv-` + 32 hex digits (112 random bits, 16 of check)."""

ELSEWHERE = (
    "was not given by this flexsql server (it may come from a replica behind the same address, or from "
    "this server before it restarted), and what it named is kept only where it was given"
)
"""How an error says a handle of another process's (the README's "Several servers" says what to do)."""
