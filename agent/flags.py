"""The model flags `flexsql ask` and `flexsql eval --runner builtin` share, and how they override
[model] / [agent] settings (flags > FLEXSQL_* environment > flexsql.toml)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

import click

from flexsql.config import Settings, key_variable_problem
from flexsql.errors import ConfigError


def model_options(func: Callable[..., Any]) -> Callable[..., Any]:
    options = [
        click.option(
            "--base-url",
            default=None,
            metavar="URL",
            help="OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1 (vLLM) ([model] base_url)",
        ),
        click.option(
            "--model", "model_name", default=None, metavar="NAME", help="model name ([model] model)"
        ),
        click.option(
            "--api-key-env",
            default=None,
            metavar="VAR",
            help="environment variable holding the API key (the key itself is never printed)",
        ),
        click.option(
            "--plans",
            type=click.IntRange(1, 16),
            default=None,
            help="K diverse plans ([agent] plans, default 4)",
        ),
    ]
    for option in reversed(options):
        func = option(func)
    return func


def apply_model_flags(
    settings: Settings,
    base_url: str | None,
    model_name: str | None,
    api_key_env: str | None,
    plans: int | None,
) -> Settings:
    model = settings.model.model_copy(
        update={
            k: v
            for k, v in {"base_url": base_url, "model": model_name, "api_key_env": api_key_env}.items()
            if v is not None
        }
    )
    agent = settings.agent.model_copy(update={"plans": plans} if plans else {})
    return settings.model_copy(update={"model": model, "agent": agent})


def check_model_settings(settings: Settings) -> None:
    """Before the first model call of `flexsql ask` / `eval --runner builtin` (each costs time and money):
    an endpoint and a model name, and an API key variable that is a name and is set (an unset one would
    send no key, a key given as the name would be echoed). Errors name the flags these commands take."""
    from flexsql.agent.models.base import ModelUnavailable
    from flexsql.tools.engines.urls import redact

    model = settings.model
    if model.base_url and not model.model:
        raise ModelUnavailable(
            f"an endpoint is set ({redact(model.base_url)}) but no model name: add --model NAME (or [model] "
            f"model); the endpoint lists its models at GET {redact(model.base_url.rstrip('/'))}/models"
        )
    if model.model and not model.base_url:
        raise ModelUnavailable(
            f"a model name is set ({model.model}) but no endpoint: add --base-url URL (or [model] base_url), "
            "e.g. http://127.0.0.1:8000/v1 for vLLM or https://api.openai.com/v1"
        )
    if not (model.base_url and model.model):
        raise ModelUnavailable(
            "no model is configured for the agent: pass --base-url and --model (e.g. --base-url "
            "http://127.0.0.1:8000/v1 --model openai/gpt-oss-120b), or set base_url and model under [model] "
            "in flexsql.toml; an API key goes in an environment variable named with --api-key-env"
        )
    parts = urlsplit(model.base_url)
    if parts.scheme not in ("http", "https") or not parts.netloc:  # a typo would be retried against nothing
        raise ConfigError(
            f"the model base URL {redact(model.base_url)!r} is not an http(s) URL; give e.g. "
            "--base-url http://127.0.0.1:8000/v1"
        )
    named = [("--api-key-env / [model] api_key_env", model.api_key_env)]
    named += [(f"[model.stages.{n}] api_key_env", s.api_key_env) for n, s in model.stages.items()]
    for where, name in named:
        problem = key_variable_problem(name) if name is not None else None
        if problem:
            raise ConfigError(f"{where} {problem}")
