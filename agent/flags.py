"""The model flags `flexsql ask` and `flexsql eval --runner builtin` share, and how they override
[model] / [agent] settings (flags > FLEXSQL_* environment > flexsql.toml)."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import click

from flexsql.config import Settings


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
