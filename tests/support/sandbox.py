"""run_python's limits in the tests: small enough to fail fast, big enough for pandas."""

from __future__ import annotations

from flexsql.config import SandboxConfig

TEST_SANDBOX = SandboxConfig(
    timeout_s=10, cpu_s=10, memory_mb=512, file_mb=32, max_processes=64, max_output_chars=2000
)
