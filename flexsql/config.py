"""Configuration from CLI flags, FLEXSQL_* environment variables and flexsql.toml, validated."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError, field_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from flexsql.errors import ConfigError


class SourceConfig(BaseModel):
    url: str
    name: str | None = None
    description: str = ""

    @field_validator("url")
    @classmethod
    def _has_scheme(cls, value: str) -> str:
        if "://" not in value:
            raise ValueError("a source URL looks like duckdb:///path/to.duckdb or postgresql://user@host/db")
        return value


class SandboxConfig(BaseModel):
    """Limits of run_python's sandbox process."""

    enabled: bool | None = None  # None: on for stdio and loopback HTTP, off otherwise
    timeout_s: float = Field(30.0, gt=0, le=600)
    cpu_s: int = Field(60, gt=0, le=3600)
    memory_mb: int = Field(2048, ge=128, le=65536)
    file_mb: int = Field(100, ge=1, le=10240)
    max_processes: int = Field(64, ge=1, le=4096)
    max_output_chars: int = Field(8000, ge=100, le=1_000_000)


class LimitsConfig(BaseModel):
    """Defaults for the tools' output and execution."""

    query_timeout_s: float = Field(30.0, gt=0, le=3600)
    preview_rows: int = Field(20, ge=1, le=500)
    cell_chars: int = Field(200, ge=10, le=10_000)
    output_chars: int = Field(4000, ge=500, le=100_000)
    store_rows: int = Field(1_000_000, ge=1000, le=50_000_000)
    store_mb: int = Field(512, ge=16, le=65536)


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="FLEXSQL_", env_nested_delimiter="__", extra="ignore")

    sources: list[SourceConfig] = []
    sandbox: SandboxConfig = SandboxConfig()
    limits: LimitsConfig = LimitsConfig()
    host: str = "127.0.0.1"
    port: int = Field(8000, ge=0, le=65535)
    auth_token: str | None = None

    @classmethod
    def settings_customise_sources(
        cls, settings_cls: type[BaseSettings], init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource, dotenv_settings: PydanticBaseSettingsSource,
        file_secret_settings: PydanticBaseSettingsSource,
    ) -> tuple[PydanticBaseSettingsSource, ...]:
        # init (flags) > FLEXSQL_* environment > the TOML file named in model_config
        return (init_settings, env_settings, TomlConfigSettingsSource(settings_cls))


def load_settings(config_file: str | Path | None = None, **overrides: Any) -> Settings:
    """Settings from (highest first) explicit overrides, FLEXSQL_* variables, then the TOML file
    (`config_file`, else $FLEXSQL_CONFIG, else ./flexsql.toml when it exists)."""
    path = Path(config_file or os.environ.get("FLEXSQL_CONFIG") or "flexsql.toml")
    if (config_file or os.environ.get("FLEXSQL_CONFIG")) and not path.exists():
        raise ConfigError(f"config file not found: {path}; create it or drop --config / FLEXSQL_CONFIG")

    class FileSettings(Settings):
        model_config = SettingsConfigDict(**{**Settings.model_config, "toml_file": str(path)})

    clean = {k: v for k, v in overrides.items() if v is not None}
    try:
        return FileSettings(**clean)
    except ValidationError as exc:
        problems = "; ".join(f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors())
        raise ConfigError(f"invalid configuration: {problems}") from None
    except Exception as exc:  # a TOML syntax error
        raise ConfigError(f"cannot read the configuration {path}: {exc}") from None
