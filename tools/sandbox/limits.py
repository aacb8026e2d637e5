"""The limits one run_python call runs under: the [sandbox] settings, with the call's own wall-clock limit."""

from __future__ import annotations

import os

from pydantic import BaseModel

from flexsql.config import SandboxConfig

MB = 1024 * 1024


class SandboxLimits(BaseModel):
    timeout_s: float
    cpu_s: int
    memory_mb: int
    file_mb: int
    max_processes: int
    max_output_chars: int

    @classmethod
    def from_config(cls, config: SandboxConfig, timeout_s: float | None = None) -> SandboxLimits:
        return cls(
            timeout_s=timeout_s or config.timeout_s,
            cpu_s=config.cpu_s,
            memory_mb=config.memory_mb,
            file_mb=config.file_mb,
            max_processes=effective_max_processes(config),
            max_output_chars=config.max_output_chars,
        )


def effective_max_processes(config: SandboxConfig) -> int:
    """RLIMIT_NPROC counts threads, and DuckDB and Arrow start one per core: below that floor a plain
    duckdb.sql() would fail on a many-core host."""
    return max(config.max_processes, 2 * (os.cpu_count() or 1) + 8)
