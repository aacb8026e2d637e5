"""Configuration from CLI flags, FLEXSQL_* environment variables and flexsql.toml, validated."""

from __future__ import annotations

import difflib
import logging
import os
import re
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, Literal, get_args

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PrivateAttr,
    ValidationError,
    create_model,
    field_validator,
)
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
    url: str = Field(
        description="Source URL: duckdb:///path, sqlite:///path, postgresql://user@host:port/db or "
        "snowflake://user@account/DB/SCHEMA?warehouse=…"
    )
    name: str | None = Field(
        None, description="The name tools take as `source` (default: derived from the URL)"
    )
    description: str = Field("", description="What the source holds; list_sources shows it")
    knowledge: str | None = Field(
        None,
        description="Folder of this source's knowledge store (verified queries, documents, facts learned "
        "from queries; `flexsql learn`, recall, remember): plain files to keep under version control. "
        "Unset: <data dir>/knowledge/<name>-<hash of the URL>, the data dir being $FLEXSQL_DATA_DIR or the "
        "user data folder. A --db URL or NAME=URL that matches a [[sources]] entry uses its folder",
    )
    # where the source was given, for messages: a flexsql.toml entry or FLEXSQL_SOURCES (None: --db)
    _origin: str | None = PrivateAttr(None)
    # the folder a relative file path in `url` is relative to: the TOML file's (None: the current folder)
    _base: Path | None = PrivateAttr(None)

    _written: str | None = PrivateAttr(None)  # the URL as given, when a relative path was made absolute

    @property
    def base(self) -> Path | None:
        return self._base

    def anchored_at(self, url: str) -> SourceConfig:
        """This source with its relative file path made absolute (`url`); messages quote it as written."""
        copy = self.model_copy(update={"url": url})
        copy._written = self._written or self.url
        return copy

    def given_as(self) -> str:
        """How the user gave this source, as messages name it: `--db NAME=URL`, or the file and entry."""
        written = self._written or self.url
        if self._origin:
            return f"{self._origin} (url = {written!r})"
        return f"--db {self.name + '=' if self.name else ''}{written}"

    @field_validator("url")
    @classmethod
    def _has_scheme(cls, value: str) -> str:
        if "://" not in value:
            raise ValueError("a source URL looks like duckdb:///path/to.duckdb or postgresql://user@host/db")
        return value


class SandboxConfig(StrictModel):
    """Limits of run_python's sandbox process."""

    enabled: bool | None = Field(
        None, description="Offer run_python; unset: on for stdio and loopback HTTP, off otherwise"
    )
    timeout_s: float = Field(
        30.0,
        gt=0,
        le=600,
        description="Wall-clock seconds per run_python call (a call may only ask for less)",
    )
    cpu_s: int = Field(60, gt=0, le=3600, description="CPU seconds per run_python call")
    memory_mb: int = Field(
        2048, ge=128, le=65536, description="Memory a run_python call may add to the sandbox process, in MB"
    )
    file_mb: int = Field(100, ge=1, le=10240, description="Largest file a run_python call may write, in MB")
    max_processes: int = Field(
        64,
        ge=1,
        le=4096,
        description="Processes and threads of the sandbox (raised to 2 × cores + 8 when lower)",
    )
    max_output_chars: int = Field(
        8000, ge=100, le=1_000_000, description="Characters of stdout and of stderr kept per run_python call"
    )
    max_concurrent: int = Field(
        4,
        ge=1,
        le=256,
        description="run_python programs running at once in the server, for all clients and agent runs "
        "together (each may use memory_mb)",
    )
    queue_wait_s: float = Field(
        10.0,
        ge=0,
        le=600,
        description="Seconds a run_python call beyond max_concurrent waits for a sandbox, then fails as busy",
    )


class LimitsConfig(StrictModel):
    """Defaults for the tools' output and execution."""

    query_timeout_s: float = Field(
        30.0,
        gt=0,
        le=3600,
        description="Seconds before a query is cancelled on the engine (a call's timeout_s may only lower it)",
    )
    family_shards: int = Field(
        1000,
        ge=1,
        le=100_000,
        description='Tables the family references of one statement (EVENTS_2024*, a quoted "*") may read '
        "together; past it the statement is refused before it is expanded",
    )
    family_cells: int = Field(
        25_000,
        ge=1,
        le=10_000_000,
        description="Cells the family references of one statement may expand into: each reference's tables × "
        "its union's distinct columns, summed (a table lacking a column still holds its NULL); past it the "
        "statement is refused before it is expanded. The expansion is also bounded by the 1,000,000 "
        "characters the guard checks",
    )
    preview_rows: int = Field(
        20, ge=1, le=500, description="Rows a query result shows unless max_rows says otherwise"
    )
    cell_chars: int = Field(200, ge=10, le=10_000, description="Characters shown of one cell in text output")
    output_chars: int = Field(
        4000,
        ge=500,
        le=100_000,
        description="Characters of one tool's text output (longer text is cut, with a note)",
    )
    store_rows: int = Field(
        1_000_000,
        ge=1000,
        le=50_000_000,
        description="Rows of one query kept in the result store (fetch_rows, run_python)",
    )
    keep_rows: int = Field(
        1000,
        ge=1,
        le=50_000_000,
        description="Rows a result keeps when run_query is given max_rows: max(max_rows, keep_rows), "
        "at most store_rows (without max_rows it keeps up to store_rows)",
    )
    store_mb: int = Field(
        512,
        ge=16,
        le=65536,
        description="Size of the result store, in MB (a session's store, and one result in it)",
    )
    server_store_mb: int = Field(
        1024,
        ge=16,
        le=1_048_576,
        description="All sessions' result stores together, in MB: when full, the least recently used result "
        "of the client holding the most is evicted first (one result is at most the smaller of this and "
        "store_mb)",
    )
    client_sessions: int = Field(
        256,
        ge=1,
        le=100_000,
        description="2025-protocol HTTP sessions one client keeps state in at once (results, conversations), "
        "a client being a bearer token's identity, or every client without a token; a session past them "
        "is refused as busy until one of that client's sessions ends (closed, or idle 30 minutes)",
    )
    server_statements: int = Field(
        8,
        ge=1,
        le=1024,
        description="Statements running at once in the server, over all sources and clients (one past them "
        "waits for a slot, within its timeout)",
    )
    statement_mb: int = Field(
        32,
        ge=0,
        le=65536,
        description="Memory each running statement holds of server_store_mb while it runs, in MB: what the "
        "engine uses outside its own count (DuckDB's streaming buffer and threads' chunks, ~20 MB a query "
        "on 2 cores; more with more cores) and the batch a fetch holds before it is counted; all running statements together hold at most half of "
        "server_store_mb",
    )
    store_cell_kb: int = Field(
        1024,
        ge=1,
        le=1_048_576,
        description="Longest cell kept from a fetch, in KB (longer ones are cut, and the result says so)",
    )
    structured_kb: int = Field(
        1024,
        ge=16,
        le=1_048_576,
        description="One tool result as sent, in KB: structured content, text and the JSON-RPC/SSE envelope "
        "(MCP clients refuse SSE events over 1 MiB; what does not fit is cut, and says so)",
    )
    engine_memory_mb: int = Field(
        2048, ge=64, le=1_048_576, description="The engine's own memory budget, in MB (DuckDB memory_limit)"
    )
    engine_temp_mb: int = Field(
        10240,
        ge=0,
        le=10_485_760,
        description="The engine's spill budget, in MB (DuckDB max_temp_directory_size)",
    )
    lock_hold_s: float = Field(
        5.0,
        ge=0.1,
        le=86400,
        description="DuckDB files: seconds of use after which flexsql lets go of the file's lock (new "
        "statements wait for the running ones, then the file is left free for lock_yield_s), so that other "
        "programs can write it while statements keep coming (idle, it lets go after 2 s)",
    )
    lock_yield_s: float = Field(
        0.5,
        ge=0,
        le=60,
        description="DuckDB files: seconds the file is left free each time flexsql lets go of it under "
        "steady use: a writer retrying at least this often gets it",
    )
    value_index_wait_s: float = Field(
        20.0,
        ge=0,
        le=3600,
        description="Seconds a find_values call waits for the value index to build before it answers from "
        "the tables indexed so far, saying so (the build goes on in the background, one per source)",
    )
    value_index_ttl_s: float = Field(
        24 * 3600.0,
        gt=0,
        le=365 * 86400,
        description="Seconds after which a value-index entry is rebuilt even when the engine shows no "
        "change (Snowflake has no signal)",
    )


VARIABLE_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


def key_variable_problem(name: str, *, check_set: bool = True) -> str | None:
    """What is wrong with `name` as api_key_env (the NAME of the variable holding the API key), or None.
    The value is never repeated in the text: given by mistake, it is the key itself."""
    example = "e.g. export OPENAI_API_KEY=… and give OPENAI_API_KEY"
    if not VARIABLE_NAME.fullmatch(name):
        return (
            "takes the name of the environment variable that holds the API key, not the key itself; the "
            f"value given is no variable name (it is not repeated here, in case it is a key): {example}"
        )
    looks_like_key = len(name) >= 20 and any(c.islower() for c in name) and any(c.isdigit() for c in name)
    if looks_like_key and not os.environ.get(name):
        return (
            "takes the name of the environment variable that holds the API key; the value given is no set "
            f"variable and looks like a key itself (it is not repeated here): {example}"
        )
    if check_set and not os.environ.get(name):
        return (
            f"names the environment variable {name}, which is not set (or is empty) here: export {name}=… "
            "in the shell that runs flexsql, or leave the key out for an endpoint that needs none"
        )
    return None


Stage = Literal["classify", "link", "knowledge", "plan", "implement", "repair", "evaluate", "revise_plan"]
"""The agent's stages (the model-facing contract, docs/contract.md); [model.stages.X] names one."""
STAGES: tuple[Stage, ...] = get_args(Stage)

ResponseFormatMode = Literal["auto", "json_schema", "off"]


class ModelEndpoint(StrictModel):
    """How the agent reaches a model and what it sends: [model], each field of which a stage may
    override ([model.stages.X]); a stage's settings are [model]'s updated by its own."""

    base_url: str | None = Field(
        None,
        description="OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1 (vLLM) or "
        "https://api.openai.com/v1",
    )
    model: str | None = Field(None, description="The model name sent with every request")
    api_key_env: str | None = Field(
        None, description="The NAME of the environment variable holding the API key, never the key itself"
    )

    @field_validator("api_key_env")
    @classmethod
    def _a_variable_name(cls, value: str | None) -> str | None:
        problem = None if value is None else key_variable_problem(value, check_set=False)
        if problem:
            raise ValueError(problem)  # the value itself is never repeated: it may be a key
        return value

    temperature: float | None = Field(
        None, ge=0, le=2, description="Sampling temperature (unset: the server's default)"
    )
    max_tokens: int | None = Field(
        None, ge=1, description="Completion token cap per request (unset: the server's default)"
    )
    reasoning_effort: str | None = Field(
        None, description="Sent as reasoning_effort (e.g. low, medium, high) to reasoning models"
    )
    extra_body: dict[str, Any] = Field(
        {},
        description="Extra fields of every request body, passed through (e.g. chat_template_kwargs, top_k)",
    )
    timeout_s: float = Field(
        120.0,
        gt=0,
        le=3600,
        description="Seconds one model request may take in total: connecting, waiting, reading the reply "
        "however slowly the server sends it, and the retries with their backoff",
    )
    max_reply_bytes: int = Field(
        4_000_000,
        ge=10_000,
        le=256_000_000,
        description="Bytes of one reply (HTTP body, or a sampled reply's text); a bigger reply is "
        "an error, and is not read past this",
    )
    max_retries: int = Field(
        3, ge=0, le=20, description="Retries after HTTP 408/409/429/5xx, a timeout or a connection error"
    )
    retry_backoff_s: float = Field(
        0.5, ge=0, le=60, description="First backoff step in seconds; doubles per retry, full jitter"
    )
    concurrency: int = Field(
        8, ge=1, le=1024, description="Requests in flight per endpoint (base_url), for the whole process"
    )
    response_format: ResponseFormatMode = Field(
        "auto",
        description="auto: json_schema on requests without tools, dropped for an endpoint that rejects it; "
        "json_schema: on every request; off: never (replies are parsed leniently)",
    )


def _overrides(base: type[StrictModel]) -> type[StrictModel]:
    """`base` with every field optional: None (left out) falls back to [model]'s value. Generated,
    so a stage can override exactly the fields [model] has, with the same ranges and descriptions."""
    fields: dict[str, Any] = {}
    for name, info in base.model_fields.items():
        # the field's ranges apply to a given value; None is "left out"
        annotation = info.annotation
        assert annotation is not None, name  # every field of a class body has one
        value = Annotated[annotation, *info.metadata] if info.metadata else annotation
        fields[name] = (value | None, Field(None, description=info.description))
    return create_model(
        "ModelStageConfig",
        __base__=StrictModel,
        __doc__="A stage's overrides of [model]: every field left out falls back to the [model] value.",
        **fields,
    )


if TYPE_CHECKING:  # the same fields, each optional at run time
    ModelStageConfig = ModelEndpoint
else:
    ModelStageConfig = _overrides(ModelEndpoint)


class ModelConfig(ModelEndpoint):
    """The agent's model endpoint ([model] in flexsql.toml, FLEXSQL_MODEL__*, or --base-url/--model)."""

    stages: dict[str, ModelStageConfig] = Field({}, description="Per-stage overrides, [model.stages.<stage>]")

    @field_validator("stages")
    @classmethod
    def _known_stages(cls, value: dict[str, ModelStageConfig]) -> dict[str, ModelStageConfig]:
        unknown = sorted(set(value) - set(STAGES))
        if unknown:
            raise ValueError(
                f"unknown stage {', '.join(unknown)} in [model.stages]; the stages are {', '.join(STAGES)}"
            )
        return value


class AgentConfig(StrictModel):
    """The built-in agent's shape and budget per question ([agent] in flexsql.toml)."""

    plans: int = Field(
        4, ge=1, le=16, description="K diverse plans per question (FlexSQL: 8 in batches of 4)"
    )
    plan_concurrency: int = Field(4, ge=1, le=64, description="Plans implemented at once")
    code_repairs: int = Field(3, ge=0, le=10, description="Execution-error repairs per implementation")
    plan_revisions: int = Field(2, ge=0, le=10, description="Evaluator-driven revisions per plan")
    evaluate: bool = Field(True, description="Run the evaluator on each candidate")
    tool_rounds: int = Field(
        8, ge=0, le=100, description="Tool-call rounds per stage before the answer is demanded"
    )
    tool_result_chars: int = Field(4000, ge=200, le=100_000, description="Tool text a stage sees per call")
    stage_tool_chars: int = Field(40_000, ge=1000, le=1_000_000, description="Tool text per stage in total")
    tool_calls_per_reply: int = Field(
        16,
        ge=1,
        le=1000,
        description="Tool calls run from one model reply; the others are answered `not run: limit`",
    )
    reasoning_chars: int = Field(
        16_000,
        ge=1000,
        le=10_000_000,
        description="Reasoning of one reply sent back on the step's tool-call turns (its end); reasoning "
        "leaves the thread at the next step, as chat templates drop it",
    )
    request_chars: int = Field(
        1_000_000,
        ge=50_000,
        le=100_000_000,
        description="Characters of one model request (system text, tools, messages); a step whose "
        "thread grows past it fails with a message",
    )
    trace_bytes: int = Field(
        8_000_000,
        ge=100_000,
        le=1_000_000_000,
        description="Bytes of one question's trace; later events are kept as short summaries, and the "
        "trace says it was cut",
    )
    traces_bytes: int = Field(
        256_000_000,
        ge=1_000_000,
        le=100_000_000_000,
        description="Bytes of the traces the MCP `ask` tool keeps in the user cache (at most 500 traces); "
        "the oldest go first",
    )
    max_model_calls: int = Field(
        80,
        ge=1,
        le=10_000,
        description="Model calls per question; when spent, the best candidate so far is answered",
    )
    max_tokens: int = Field(400_000, ge=1000, description="Prompt + completion tokens per question")
    max_seconds: float = Field(600.0, gt=0, le=86_400, description="Seconds per question")
    conversations_dir: str | None = Field(
        None,
        description="Keep conversations on disk in this folder (`flexsql ask --conversation ID`); "
        "unset: in memory. Server clients' conversations go to a subfolder per client",
    )
    max_conversation_files: int = Field(
        1000,
        ge=1,
        le=1_000_000,
        description="Conversation files kept in conversations_dir, all clients together; the oldest go first",
    )
    max_concurrent_runs: int = Field(
        4,
        ge=1,
        le=256,
        description="Agent runs (`ask` calls) the MCP server runs at once, for all clients together",
    )
    run_wait_s: float = Field(
        30.0,
        ge=0,
        le=3600,
        description="Seconds an `ask` beyond max_concurrent_runs waits for a run to end, then fails as busy",
    )


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="FLEXSQL_", env_nested_delimiter="__", extra="forbid")

    sources: list[SourceConfig] = Field(
        [],
        description="The databases to serve, [[sources]] (FLEXSQL_SOURCES: a JSON list); "
        "none: the demo database",
    )
    sandbox: SandboxConfig = Field(SandboxConfig(), description="run_python's sandbox")
    limits: LimitsConfig = Field(LimitsConfig(), description="Tool output and execution limits")
    model: ModelConfig = Field(ModelConfig(), description="The agent's model endpoint")
    agent: AgentConfig = Field(AgentConfig(), description="The built-in agent's shape and budget")
    host: str = Field("127.0.0.1", description="Address `flexsql serve --http` binds")
    port: int = Field(8000, ge=0, le=65535, description="Port `flexsql serve --http` listens on")
    auth_token: str | None = Field(
        None, description="Bearer token HTTP clients must send; required to bind a host other than loopback"
    )
    allowed_hosts: list[str] = Field(
        [], description="Extra Host names HTTP clients may use (a proxy's, a DNS alias), `name[:port]`"
    )

    def knowledge_of(self, source: SourceConfig) -> str | None:
        """The knowledge folder of a source given on the command line: its own, else that of the
        [[sources]] entry with the same name or URL."""
        if source.knowledge:
            return source.knowledge
        for entry in self.sources:
            if entry.knowledge and (entry.url == source.url or (source.name and entry.name == source.name)):
                return entry.knowledge
        return None

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
    warn_unknown_variables()
    try:
        settings = FileSettings(**clean)
    except ValidationError as exc:
        problems = "; ".join(_problem(e, path, clean) for e in exc.errors())
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
    _note_origins(settings, path, clean)
    return settings


def _note_origins(settings: Settings, path: Path, overrides: dict[str, Any]) -> None:
    """Relative paths in flexsql.toml are relative to the file's folder (as a client that starts the
    server elsewhere needs), and each source remembers where it was given, for messages."""
    environ = {k.upper() for k in os.environ}
    from_file = path.exists()
    if "sources" not in overrides:
        if "FLEXSQL_SOURCES" in environ:
            for n, source in enumerate(settings.sources, 1):
                source._origin = f"the environment variable FLEXSQL_SOURCES, source {n}"
        elif from_file:
            for n, source in enumerate(settings.sources, 1):
                source._base = (
                    path.resolve().parent
                )  # engines know which URLs hold a path (server/cli_support)
                source._origin = f"{path.resolve()}, [[sources]] entry {n}"
    folder = settings.agent.conversations_dir
    if (
        from_file
        and folder
        and "FLEXSQL_AGENT__CONVERSATIONS_DIR" not in environ
        and not Path(folder).is_absolute()
    ):
        settings.agent.conversations_dir = str(path.resolve().parent / Path(folder).expanduser())


# FLEXSQL_* variables that are not settings: read elsewhere, or handed to `--runner command` programs.
OTHER_VARIABLES = frozenset(
    {"CONFIG", "CACHE_DIR", "DATA_DIR", "EMBEDDINGS", "WORDNET_DIR", "UPDATE_SNAPSHOT", "QUESTION_FILE", "QUESTION",
     "DB_URL", "DB", "MCP_CONFIG", "OUT_DIR", "TASK_DIR", "INSTANCE_ID", "EXTERNAL_KNOWLEDGE_FILE"}
)  # fmt: skip
_warned: set[str] = set()


def _section(loc: tuple[Any, ...]) -> type[BaseModel] | None:
    """The model class that holds the last key of `loc` (Settings, a section, a stage…)."""
    cls: type[BaseModel] = Settings
    for part in loc[:-1]:
        if not isinstance(part, str) or part not in cls.model_fields:
            continue  # a list index or a dict key (a source, a stage name)
        found = _model_in(cls.model_fields[part].annotation)
        if found is None:
            return None
        cls = found
    return cls


def _model_in(annotation: Any) -> type[BaseModel] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    for arg in get_args(annotation):
        found = _model_in(arg)
        if found is not None:
            return found
    return None


def _origin(loc: tuple[Any, ...], path: Path, overrides: dict[str, Any]) -> str:
    keys = [str(p) for p in loc if isinstance(p, str)]
    environ = {k.upper() for k in os.environ}
    for i in range(len(keys), 0, -1):
        name = "FLEXSQL_" + "__".join(keys[:i]).upper()
        if name in environ:
            return f"the environment variable {name}"
    if keys and keys[0] in overrides:
        return "a command-line option"
    return str(path.resolve()) if path.exists() else "the defaults"


def _problem(error: Any, path: Path, overrides: dict[str, Any]) -> str:
    """One validation error: where the value came from, and for an unknown key a did-you-mean."""
    loc = tuple(error["loc"])
    where = ".".join(str(p) for p in loc)
    message = error["msg"]
    if error["type"] == "extra_forbidden" and loc:
        section = _section(loc)
        names = sorted(section.model_fields) if section is not None else []
        close = difflib.get_close_matches(str(loc[-1]), names, n=1, cutoff=0.6)
        message = "unknown setting" + (f" — did you mean {close[0]}?" if close else "")
        if names and not close:
            message += f" (known here: {', '.join(names)})"
    return f"{where} (from {_origin(loc, path, overrides)}): {message}"


def _setting_variables() -> list[str]:
    names = []
    for name, field in Settings.model_fields.items():
        names.append(f"FLEXSQL_{name.upper()}")
        section = _model_in(field.annotation)
        if section is not None and section is not SourceConfig:
            names += [f"FLEXSQL_{name.upper()}__{key.upper()}" for key in section.model_fields]
    return names


def warn_unknown_variables() -> None:
    """A misspelled FLEXSQL_* variable would be ignored silently: say so once, with a did-you-mean."""
    for key in os.environ:
        upper = key.upper()
        if not upper.startswith("FLEXSQL_") or upper in _warned:
            continue
        rest = upper.removeprefix("FLEXSQL_")
        if rest in OTHER_VARIABLES or rest.startswith(("TEST_", "SECRET_")):
            continue
        if rest.split("__")[0].lower() in Settings.model_fields:
            continue  # a setting, or a key inside one (validation names a wrong key)
        _warned.add(upper)
        close = difflib.get_close_matches(upper, _setting_variables(), n=1, cutoff=0.75)
        logging.getLogger("flexsql.config").warning(
            "%s is not a flexsql setting and is ignored%s (docs/settings.md lists them)",
            key,
            f"; did you mean {close[0]}?" if close else "",
        )
