"""The secrets of the agent's model endpoints, and their removal from everything the agent writes or
returns.

The secrets are the API keys (the values of the variables `[model] api_key_env` and its per-stage
overrides name) and the credentials in a `base_url` (`https://user:password@host/v1`, which the HTTP
client sends as an HTTP Basic header). An endpoint sees them on every request and may echo them in a
reply — in the content, the reasoning, a tool call — and from there they would reach the answer, the
trace, a conversation file, an evaluation record. So each is replaced by `***` in every form text
can hold it: as it is, JSON-escaped (once and twice: a JSON string inside a JSON document), base64
(the Basic header), and percent-encoded (as written in the URL).
"""

from __future__ import annotations

import base64
import json
import os
from collections.abc import Iterable
from typing import Any, TypeVar
from urllib.parse import quote, unquote, urlsplit

from pydantic import BaseModel

from flexsql.config import Settings

MASK = "***"
MIN_SECRET = 4  # shorter values would mask ordinary text (and cannot be a real key)

M = TypeVar("M", bound=BaseModel)


def secret_forms(secret: str) -> list[str]:
    """Every way `secret` can be written in text the agent handles."""
    once = json.dumps(secret)[1:-1]
    forms = {
        secret,
        once,
        json.dumps(secret, ensure_ascii=False)[1:-1],
        json.dumps(once)[1:-1],
        base64.b64encode(secret.encode()).decode(),
        base64.urlsafe_b64encode(secret.encode()).decode(),
        quote(secret, safe=""),
    }
    return [f for f in forms if len(f) >= MIN_SECRET]


def url_secrets(url: str | None) -> list[str]:
    """The credentials in `url`: the password (as written and decoded), `user:password`, and the
    user alone when there is no password (then it is the secret, e.g. a token as the user name)."""
    if not url:
        return []
    try:
        parts = urlsplit(url)
        user, password = parts.username, parts.password
    except ValueError:
        return []
    found: list[str] = []
    if password:
        found += [password, unquote(password)]
        found.append(f"{unquote(user or '')}:{unquote(password)}")  # what HTTP Basic encodes
    elif user:
        found += [user, unquote(user), f"{unquote(user)}:"]
    return found


def endpoint_secrets(base_url: str | None, key: str | None) -> list[str]:
    """The secrets one endpoint is sent: its key and the credentials of its URL."""
    return [*([key] if key else []), *url_secrets(base_url)]


def question_secrets(settings: Settings) -> list[str]:
    """Every model secret of these settings: [model]'s and each stage's keys and URL credentials."""
    model = settings.model
    names = [model.api_key_env, *(s.api_key_env for s in model.stages.values())]
    urls = [model.base_url, *(s.base_url for s in model.stages.values())]
    keys = [os.environ[n] for n in names if n and os.environ.get(n)]
    return [*keys, *(secret for url in urls for secret in url_secrets(url))]


class Scrubber:
    """Replaces the secrets it was given, in every form, in text and in nested values."""

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self._forms: list[str] = []
        self.add(secrets)

    def add(self, secrets: Iterable[str]) -> None:
        forms = set(self._forms)
        for secret in secrets:
            if secret and len(secret) >= MIN_SECRET:
                forms.update(secret_forms(secret))
        # longest first: `user:password` goes before the password inside it
        self._forms = sorted(forms, key=lambda f: (-len(f), f))

    def __bool__(self) -> bool:
        return bool(self._forms)

    def __repr__(self) -> str:  # never the forms themselves
        return f"Scrubber({len(self._forms)} forms)"

    def text(self, text: str) -> str:
        for form in self._forms:
            if form in text:
                text = text.replace(form, MASK)
        return text

    def value(self, value: Any) -> Any:
        """`value` with every string in it (dict keys too) scrubbed; other values as they are."""
        if not self._forms:
            return value
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {self.value(k): self.value(v) for k, v in value.items()}
        if isinstance(value, list):
            return [self.value(v) for v in value]
        if isinstance(value, tuple) and not hasattr(value, "_fields"):
            return tuple(self.value(v) for v in value)
        if isinstance(value, BaseModel):
            return self.model(value)
        return value

    def model(self, model: M) -> M:
        """A copy of `model` with every string in its fields scrubbed (nested models included)."""
        if not self._forms:
            return model
        updates = {name: self.value(getattr(model, name)) for name in type(model).model_fields}
        return model.model_copy(update=updates)
