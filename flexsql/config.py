"""Configuration from CLI flags, FLEXSQL_* environment variables and flexsql.toml, validated."""

from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator
from pydantic_settings import (
    BaseSettings,
    PydanticBaseSettingsSource,
    SettingsConfigDict,
    TomlConfigSettingsSource,
)

from flexsql.errors import ConfigError


class StrictModel(BaseModel):
    """A config section: a key it does not know is an error (a misspelling would otherwise be
    ignored silently and the default used)."""

    model_config = ConfigDict(extra="forbid")


class SourceConfig(StrictModel):
    url: str
    name: str | None = None
    description: str = ""

    @field_validator("url")
    @classmethod
    def _has_scheme(cls, value: str) -> str:
        if "://" not in value:
            raise ValueError("a source URL looks like duckdb:///path/to.duckdb or postgresql://user@host/db")
        return value


class SandboxConfig(StrictModel):
    """Limits of run_python's sandbox process."""

    enabled: bool | None = None  # None: on for stdio and loopback HTTP, off otherwise
    timeout_s: float = Field(30.0, gt=0, le=600)
    cpu_s: int = Field(60, gt=0, le=3600)
    memory_mb: int = Field(2048, ge=128, le=65536)
    file_mb: int = Field(100, ge=1, le=10240)
    max_processes: int = Field(64, ge=1, le=4096)
    max_output_chars: int = Field(8000, ge=100, le=1_000_000)


class LimitsConfig(StrictModel):
    """Defaults for the tools' output and execution."""

    query_timeout_s: float = Field(30.0, gt=0, le=3600)
    preview_rows: int = Field(20, ge=1, le=500)
    cell_chars: int = Field(200, ge=10, le=10_000)
    output_chars: int = Field(4000, ge=500, le=100_000)
    store_rows: int = Field(1_000_000, ge=1000, le=50_000_000)
    store_mb: int = Field(512, ge=16, le=65536)
    # longest cell kept from a fetch (longer ones are cut, and the result says so)
    store_cell_kb: int = Field(1024, ge=1, le=1_048_576)
    # structured_content of one tool result, in JSON bytes (MCP clients refuse SSE events over 1 MiB)
    structured_kb: int = Field(1024, ge=16, le=1_048_576)
    # the engine's own memory and spill budget (DuckDB memory_limit, max_temp_directory_size)
    engine_memory_mb: int = Field(2048, ge=64, le=1_048_576)
    engine_temp_mb: int = Field(10240, ge=0, le=10_485_760)
    # value-index entries older than this are rebuilt even when the engine shows no change (Snowflake has no signal)
    value_index_ttl_s: float = Field(24 * 3600.0, gt=0, le=365 * 86400)


# The agent's stages (agent/contract.py uses the same names); [model.stages.X] must name one of them.
MODEL_STAGES = ("classify", "link", "knowledge", "plan", "implement", "repair", "evaluate", "revise_plan")

ResponseFormatMode = Literal["auto", "json_schema", "off"]


class ModelStageConfig(StrictModel):
    """A stage's overrides of [model]: every field left out falls back to the [model] value."""

    base_url: str | None = None
    model: str | None = None
    api_key_env: str | None = None
    temperature: float | None = Field(None, ge=0, le=2)
    max_tokens: int | None = Field(None, ge=1)
    reasoning_effort: str | None = None
    extra_body: dict[str, Any] | None = None
    timeout_s: float | None = Field(None, gt=0, le=3600)
    max_retries: int | None = Field(None, ge=0, le=20)
    concurrency: int | None = Field(None, ge=1, le=1024)
    response_format: ResponseFormatMode | None = None


class ModelConfig(StrictModel):
    """The agent's model endpoint ([model] in flexsql.toml, FLEXSQL_MODEL__*, or --base-url/--model)."""

    base_url: str | None = None  # e.g. http://127.0.0.1:8000/v1 (vLLM) or https://api.openai.com/v1
    model: str | None = None
    api_key_env: str | None = None  # the NAME of the variable holding the key, never the key itself
    temperature: float | None = Field(None, ge=0, le=2)
    max_tokens: int | None = Field(None, ge=1)
    reasoning_effort: str | None = None
    extra_body: dict[str, Any] = {}
    timeout_s: float = Field(120.0, gt=0, le=3600)
    max_retries: int = Field(3, ge=0, le=20)
    retry_backoff_s: float = Field(0.5, ge=0, le=60)  # first backoff step; doubles per retry, full jitter
    concurrency: int = Field(8, ge=1, le=1024)
    response_format: ResponseFormatMode = "auto"
    stages: dict[str, ModelStageConfig] = {}

    @field_validator("stages")
    @classmethod
    def _known_stages(cls, value: dict[str, ModelStageConfig]) -> dict[str, ModelStageConfig]:
        unknown = sorted(set(value) - set(MODEL_STAGES))
        if unknown:
            raise ValueError(
                f"unknown stage {', '.join(unknown)} in [model.stages]; "
                f"the stages are {', '.join(MODEL_STAGES)}"
            )
        return value


class AgentConfig(StrictModel):
    """The built-in agent's shape and budget per question ([agent] in flexsql.toml)."""

    plans: int = Field(4, ge=1, le=16)  # K diverse plans (FlexSQL: 8 in batches of 4)
    plan_concurrency: int = Field(4, ge=1, le=64)  # plans implemented at once
    code_repairs: int = Field(3, ge=0, le=10)  # execution-error repairs per implementation
    plan_revisions: int = Field(2, ge=0, le=10)  # evaluator-driven revisions per plan
    evaluate: bool = True  # run the evaluator on each candidate
    tool_rounds: int = Field(8, ge=0, le=100)  # tool-call rounds per stage before the answer is demanded
    tool_result_chars: int = Field(4000, ge=200, le=100_000)  # tool text a stage sees per call
    stage_tool_chars: int = Field(40_000, ge=1000, le=1_000_000)  # tool text per stage in total
    max_model_calls: int = Field(80, ge=1, le=10_000)
    max_tokens: int = Field(400_000, ge=1000)  # prompt + completion per question
    max_seconds: float = Field(600.0, gt=0, le=86_400)
    conversations_dir: str | None = None  # keep conversations on disk (`flexsql ask --conversation ID`)


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="FLEXSQL_", env_nested_delimiter="__", extra="forbid")

    sources: list[SourceConfig] = []
    sandbox: SandboxConfig = SandboxConfig()
    limits: LimitsConfig = LimitsConfig()
    model: ModelConfig = ModelConfig()
    agent: AgentConfig = AgentConfig()
    host: str = "127.0.0.1"
    port: int = Field(8000, ge=0, le=65535)
    auth_token: str | None = None
    allowed_hosts: list[
        str
    ] = []  # extra Host names HTTP clients may use (a proxy's, a DNS alias), `name[:port]`

    @classmethod
    def settings_customise_sources(
        cls,
        settings_cls: type[BaseSettings],
        init_settings: PydanticBaseSettingsSource,
        env_settings: PydanticBaseSettingsSource,
        dotenv_settings: PydanticBaseSettingsSource,
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
    except Exception as exc:  # a TOML syntax error, or an environment variable that is not JSON
        env_field = re.search(r'field "(\w+)" from source "EnvSettingsSource"', str(exc))
        if env_field:
            name = f"FLEXSQL_{env_field.group(1).upper()}"
            example = (
                f'{name}=\'[{{"name": "sales", "url": "duckdb:///data/sales.duckdb"}}]\''
                if name == "FLEXSQL_SOURCES"
                else f"{name}__<KEY>=<value> for one setting"
            )
            raise ConfigError(
                f"the environment variable {name} is not valid JSON (flexsql reads it as the "
                f"`{env_field.group(1)}` setting): give JSON, e.g. {example}, or unset it"
            ) from None
        raise ConfigError(f"cannot read the configuration {path}: {exc}") from None
