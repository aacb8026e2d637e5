"""Running a task's SQL (gold or predicted) on its database: in-process through flexsql's sources,
or through `flexsql serve` subprocesses over MCP stdio (the path an external agent uses)."""

from __future__ import annotations

import asyncio
import os
import shutil
import sys
import tempfile
import threading
from collections.abc import Coroutine, Sequence
from concurrent.futures import Future
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from pydantic import BaseModel

from flexsql.errors import FlexSQLError
from flexsql.paths import open_private

if TYPE_CHECKING:  # annotations only: both are imported where used, so scoring alone stays light
    from mcp import Client

    from flexsql.tools.engines import Source

T = TypeVar("T")

# Big enough for any benchmark answer; a result past it is reported as too large, not cut silently.
DEFAULT_MAX_ROWS = 1_000_000
MCP_PAGE_ROWS = 100_000


class TableResult(BaseModel):
    columns: list[str]
    rows: list[tuple[Any, ...]]
    engine: str = ""
    truncated: bool = False
    elapsed_s: float = 0.0


class ExecutionFailure(Exception):
    """A statement that did not give a result; `category` is timeout / refused / execution_error / too_large."""

    def __init__(self, category: str, message: str) -> None:
        super().__init__(message)
        self.category = category


class Executor:
    """Runs one statement on the database at `url` and returns all its rows."""

    name = "executor"

    def execute(self, url: str, sql: str, timeout_s: float) -> TableResult:  # pragma: no cover - interface
        raise NotImplementedError

    def warm(self, urls: Sequence[str]) -> None:
        """Open what the given databases need before the first query (optional)."""

    def close(self) -> None:
        """Release connections and subprocesses."""


class InProcessExecutor(Executor):
    """One cached Source per database URL (sources are thread-safe: SQLite opens a connection per thread)."""

    name = "in-process"

    def __init__(self, max_rows: int = DEFAULT_MAX_ROWS) -> None:
        self.max_rows = max_rows
        self._sources: dict[str, Source] = {}
        self._lock = threading.Lock()

    def source(self, url: str) -> Source:
        with self._lock:
            source = self._sources.get(url)
            if source is None:
                from flexsql.tools.engines import open_source

                source = open_source(url)
                self._sources[url] = source
            return source

    def execute(self, url: str, sql: str, timeout_s: float) -> TableResult:
        from flexsql.tools.engines import FetchLimits

        source = self.source(url)
        # scoring compares whole values: no byte or cell cap (a cut cell would compare as its prefix)
        limits = FetchLimits(
            max_rows=self.max_rows, max_bytes=2**62, count_limit=self.max_rows + 1, max_cell_bytes=2**62
        )
        try:
            result = source.execute(sql, timeout_s=timeout_s, limits=limits)
        except FlexSQLError as exc:
            category = {"timeout": "timeout", "refused": "refused"}.get(exc.code, "execution_error")
            raise ExecutionFailure(category, str(exc)) from None
        if result.truncated:
            raise ExecutionFailure("too_large", f"the result has more than {self.max_rows} rows")
        return TableResult(
            columns=result.columns,
            rows=result.rows,
            engine=source.engine.name,
            elapsed_s=result.elapsed_ms / 1000,
        )

    def close(self) -> None:
        with self._lock:
            for source in self._sources.values():
                source.close()
            self._sources.clear()


def flexsql_command() -> list[str]:
    """How to start flexsql: the `flexsql` script next to this interpreter, else on PATH, else `python -m`."""
    here = Path(sys.executable).parent / ("flexsql.exe" if os.name == "nt" else "flexsql")
    if here.exists():
        return [str(here)]
    found = shutil.which("flexsql")
    if found:
        return [found]
    return [sys.executable, "-P", "-m", "flexsql.server.cli"]  # -P: a flexsql/ folder in cwd cannot shadow it


class McpExecutor(Executor):
    """Runs statements through the `run_query` tool of one `flexsql serve --db URL` subprocess per
    database, over MCP stdio. The MCP client is async; it lives on its own event loop thread so the
    harness's worker threads can call it synchronously."""

    name = "mcp-stdio"

    def __init__(
        self,
        command: Sequence[str] | None = None,
        max_rows: int = DEFAULT_MAX_ROWS,
        log_dir: Path | None = None,
    ) -> None:
        self.command = list(command or flexsql_command())
        self.max_rows = max_rows
        self.log_dir = Path(log_dir) if log_dir else Path(tempfile.mkdtemp(prefix="flexsql-eval-mcp-"))
        self.log_dir.mkdir(parents=True, exist_ok=True)
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._loop.run_forever, name="flexsql-eval-mcp", daemon=True)
        self._thread.start()
        self._clients: dict[str, Future[Client]] = {}
        self._stops: list[asyncio.Event] = []
        self._tasks: list[Future[None]] = []
        self._lock = threading.Lock()

    def _submit(self, coro: Coroutine[Any, Any, T]) -> Future[T]:
        return asyncio.run_coroutine_threadsafe(coro, self._loop)

    def _start(self, url: str) -> Future[Client]:
        with self._lock:
            ready = self._clients.get(url)
            if ready is None:
                ready = Future()
                self._clients[url] = ready
                self._tasks.append(self._submit(self._serve(url, ready)))
            return ready

    def _client(self, url: str) -> Client:
        return self._start(url).result(timeout=60)

    def warm(self, urls: Sequence[str]) -> None:
        """Start every database's server at once (each start costs about a second)."""
        futures = [self._start(url) for url in dict.fromkeys(urls)]
        for future in futures:
            try:
                future.result(timeout=60)
            except Exception:  # reported to the tasks that need this server
                pass

    async def _serve(self, url: str, ready: Future[Client]) -> None:
        from mcp import Client, StdioServerParameters
        from mcp.client.stdio import stdio_client

        stop = asyncio.Event()
        self._stops.append(stop)
        params = StdioServerParameters(
            command=self.command[0], args=[*self.command[1:], "serve", "--db", url], env={**os.environ}
        )
        log_path = self.log_dir / f"serve-{len(self._stops)}.log"
        with open_private(log_path) as log:
            try:
                async with Client(stdio_client(params, errlog=log)) as client:
                    ready.set_result(client)
                    await stop.wait()
            except BaseException as exc:  # the server did not start: every caller sees why
                if not ready.done():
                    log.flush()
                    tail = _tail(log_path)
                    ready.set_exception(
                        ExecutionFailure(
                            "execution_error",
                            f"could not start `{' '.join(self.command)} serve --db {url}`: "
                            f"{_leaf(exc)}" + (f"; its stderr ends with: {tail}" if tail else ""),
                        )
                    )
                if not isinstance(exc, Exception):
                    raise

    def execute(self, url: str, sql: str, timeout_s: float) -> TableResult:
        client = self._client(url)
        future = self._submit(self._query(client, sql, timeout_s))
        try:
            return future.result(timeout=timeout_s + 30)
        except TimeoutError:
            future.cancel()
            raise ExecutionFailure(
                "timeout", f"no answer from the MCP server within {timeout_s + 30:g} s"
            ) from None

    async def _query(self, client: Client, sql: str, timeout_s: float) -> TableResult:
        import time

        started = time.perf_counter()
        page = min(self.max_rows, MCP_PAGE_ROWS)
        result = await client.call_tool("run_query", {"sql": sql, "max_rows": page, "timeout_s": timeout_s})
        data = _structured(result)
        columns = list(data.get("columns") or [])
        rows = [tuple(r) for r in data.get("rows") or []]
        total = data.get("total_rows")
        if data.get("truncated"):
            result_id = data.get("result_id")
            if data.get("total_is_lower_bound") or total is None or total > self.max_rows or not result_id:
                raise ExecutionFailure(
                    "too_large", f"the result has more than {len(rows)} rows that can be fetched"
                )
            while len(rows) < total:
                more = _structured(
                    await client.call_tool(
                        "fetch_rows", {"result_id": result_id, "offset": len(rows), "limit": page}
                    )
                )
                batch = [tuple(r) for r in more.get("rows") or []]
                if not batch:
                    break
                rows += batch
            if len(rows) < total:
                raise ExecutionFailure(
                    "too_large",
                    f"only {len(rows)} of {total} rows could be fetched over MCP "
                    "(the server keeps fewer rows; raise its store limit)",
                )
        return TableResult(columns=columns, rows=rows, engine="mcp", elapsed_s=time.perf_counter() - started)

    def close(self) -> None:
        for stop in list(self._stops):
            self._loop.call_soon_threadsafe(stop.set)
        for task in self._tasks:
            try:
                task.result(timeout=10)
            except Exception:  # a server that failed to start already reported why
                pass
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(timeout=5)


def _leaf(exc: BaseException) -> str:
    while isinstance(exc, BaseExceptionGroup) and exc.exceptions:
        exc = exc.exceptions[0]
    return f"{type(exc).__name__}: {exc}"


def _tail(path: Path, chars: int = 600) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace").strip()
    except OSError:
        return ""
    lines = [line for line in text.splitlines() if line.strip()]
    return " | ".join(lines[-3:])[-chars:]


def _structured(result: Any) -> dict[str, Any]:
    text = " ".join(getattr(c, "text", "") for c in (result.content or []))
    if result.is_error:
        # the server's error results carry the error's code (flexsql/errors.py): categorise by it, not by wording
        error = (result.meta or {}).get("flexsql/error")
        code = error.get("code") if isinstance(error, dict) else None
        category = {"timeout": "timeout", "refused": "refused"}.get(code or "", "execution_error")
        raise ExecutionFailure(category, text or "the tool call failed without a message")
    data = result.structured_content
    if (
        isinstance(data, dict)
        and "result" in data
        and "columns" not in data
        and isinstance(data["result"], dict)
    ):
        data = data["result"]
    if not isinstance(data, dict) or "columns" not in data:
        raise ExecutionFailure("execution_error", f"run_query returned no structured result: {text[:300]}")
    return data
