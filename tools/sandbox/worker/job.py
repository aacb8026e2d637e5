"""The call itself, in the confined child: read the job, offer the inputs as DataFrames, run the user's code
with the audit hook armed, and report the value of its last expression (a DataFrame or Series as an Arrow
file, anything else as its repr), its error as a traceback of the user's cell only, and the limits it hit."""

from __future__ import annotations

import ast
import builtins
import errno
import json
import linecache
import os
import secrets
import signal
import sys
import traceback
from types import FrameType
from typing import Any

from .audit import install_audit_hook
from .channels import BoundedText, Rpc
from .flexsql_module import flexsql_module
from .frames import frame_to_table, read_frame, write_table
from .state import State

CELL = "<cell>"


class CPUTimeLimit(BaseException):
    """The CPU-time limit was reached (SIGXCPU); a BaseException so `except Exception` does not swallow it."""

    # user code sees it in its tracebacks, which name a class of __main__ without its module: "CPUTimeLimit:
    # …", as when the worker was a single script
    __module__ = "__main__"


def run_job(workdir: str, limits: dict[str, Any], state: State) -> None:
    """Run the call's job.json and send the report; never returns (the child exits here)."""
    rpc = Rpc()
    with open("job.json", encoding="utf-8") as fh:
        job = json.load(fh)
    os.remove("job.json")  # the user's code starts in an empty directory
    cap = int(job["max_output_chars"])
    out, err = BoundedText(1, cap), BoundedText(2, cap)
    sys.stdout, sys.stderr = out, err
    # the interpreter's original streams too, so nothing writes around the cap; typeshed has them Final
    sys.__stdout__ = out  # type: ignore[misc, assignment]
    sys.__stderr__ = err  # type: ignore[misc, assignment]
    sql_calls = [0]
    namespace = _namespace(job["inputs"], rpc, sql_calls)
    # ctypes is loaded (numpy imports it, and so did we): unlist it so `import ctypes` is refused by name
    for name in [n for n in sys.modules if n == "ctypes" or n.startswith("ctypes.") or n == "_ctypes"]:
        del sys.modules[name]
    state.libc = state.ctypes = None

    def on_cpu_limit(_signum: int, _frame: FrameType | None) -> None:
        raise CPUTimeLimit(f"CPU time limit of {limits['cpu_s']} s reached")

    signal.signal(signal.SIGXCPU, on_cpu_limit)
    violations: list[str] = []
    if state.audit_hook:
        install_audit_hook(workdir, state.real_read_roots, violations)

    report = _run_cell(job["code"], namespace, limits, cap)
    if violations:
        report["refused"] = violations[:20]
    report["stdout_chars"], report["stderr_chars"] = out.chars, err.chars
    report["sql_calls"] = sql_calls[0]
    try:
        rpc.send(report)
    except OSError:
        pass
    os._exit(0)


def _namespace(inputs: dict[str, str], rpc: Rpc, sql_calls: list[int]) -> dict[str, Any]:
    """The globals of the user's code: the inputs as `dfs` (and `df` when there is one), pd, np, duckdb and
    the `flexsql` module; the input files are removed once read."""
    import duckdb
    import numpy as np
    import pandas as pd

    sys.modules["flexsql"] = flexsql_module(rpc, sql_calls)
    dfs = {rid: read_frame(name) for rid, name in inputs.items()}
    for name in inputs.values():
        os.remove(name)
    namespace: dict[str, Any] = {
        "__name__": "__main__",
        "__builtins__": builtins,
        "dfs": dfs,
        "pd": pd,
        "np": np,
        "duckdb": duckdb,
        "flexsql": sys.modules["flexsql"],
    }
    if len(dfs) == 1:
        namespace["df"] = next(iter(dfs.values()))
    return namespace


def _run_cell(code: str, namespace: dict[str, Any], limits: dict[str, Any], cap: int) -> dict[str, Any]:
    """The report of running the user's code: its value or its error, and the limits it hit."""
    report: dict[str, Any] = {
        "op": "done",
        "value_repr": None,
        "value_type": None,
        "result_file": None,
        "error": None,
        "error_type": None,
        "limits": [],
    }
    value = None
    try:
        value = _execute(code, namespace)
    except SystemExit as exc:
        if exc.code not in (None, 0):
            report["error"], report["error_type"] = f"SystemExit: {exc.code}", "SystemExit"
    except BaseException as exc:  # noqa: B036 - user code may raise anything; report it
        report["error"], report["error_type"] = _user_traceback(exc, code), type(exc).__name__
        limit = _limit_of(exc)
        if limit:
            report["limits"].append(limit)
    if report["error"] is None and value is not None:
        try:
            _describe_value(value, report, cap)
        except BaseException as exc:  # noqa: B036
            limit = _limit_of(exc)
            error = f"the value of the last expression could not be returned: {type(exc).__name__}: {exc}"
            if limit in ("file size", "memory"):
                error += (
                    f" (the {limit} limit: {limits['file_mb']} MB per file, {limits['memory_mb']} MB "
                    "of memory); return an aggregate or df.head(n) instead"
                )
            report["error"] = error
            report["error_type"] = type(exc).__name__
            if limit:
                report["limits"].append(limit)
    return report


def _execute(code: str, namespace: dict[str, Any]) -> Any:
    linecache.cache[CELL] = (len(code), None, code.splitlines(True), CELL)
    tree = ast.parse(code, CELL, "exec")
    last = None
    final = tree.body[-1] if tree.body else None
    if isinstance(final, ast.Expr):
        tree.body.pop()
        last = ast.Expression(final.value)
    exec(compile(tree, CELL, "exec"), namespace)  # noqa: S102 - running the user's code is the point
    if last is not None:
        return eval(compile(last, CELL, "eval"), namespace)  # noqa: S307
    return None


def _limit_of(exc: BaseException) -> str | None:
    if isinstance(exc, MemoryError):
        return "memory"
    if isinstance(exc, CPUTimeLimit):
        return "cpu"
    if isinstance(exc, OSError) and exc.errno == errno.EFBIG:
        return "file size"
    if isinstance(exc, OSError) and exc.errno == errno.EAGAIN:
        return "processes"
    if isinstance(exc, RuntimeError) and "can't start new thread" in str(exc):
        return "processes"
    return None


def _user_traceback(exc: BaseException, code: str, max_lines: int = 20) -> str:
    """The traceback restricted to frames of the user's cell; the library and sandbox frames are dropped."""
    if isinstance(exc, SyntaxError) and exc.filename == CELL:
        lines = traceback.format_exception_only(type(exc), exc)
    else:
        # select the cell's frames before any source line is looked up (library files are not to be read)
        frames = traceback.StackSummary.extract(
            (frame, line)
            for frame, line in traceback.walk_tb(exc.__traceback__)
            if frame.f_code.co_filename == CELL
        )
        lines = ["Traceback (most recent call last):\n"] if frames else []
        lines += traceback.format_list(frames)
        lines += traceback.format_exception_only(type(exc), exc)
    text_lines = "".join(lines).rstrip("\n").split("\n")
    if len(text_lines) > max_lines:
        cut = len(text_lines) - max_lines + 1
        text_lines = text_lines[:3] + [f"  … {cut} lines cut …"] + text_lines[3 + cut :]
    text = "\n".join(text_lines)
    return text if len(text) <= 4000 else text[:1500] + "\n  … cut …\n" + text[-2400:]


def _describe_value(value: Any, report: dict[str, Any], cap: int) -> None:
    import pandas as pd

    report["value_type"] = type(value).__name__
    if isinstance(value, pd.DataFrame | pd.Series):
        table = frame_to_table(value)
        name = f"result-{secrets.token_hex(8)}.arrow"
        write_table(table, name)
        report["result_file"] = name
        kind = "Series" if isinstance(value, pd.Series) else "DataFrame"
        report["value_repr"] = f"{kind}: {table.num_rows} rows × {table.num_columns} columns"
        return
    if isinstance(value, str | bytes) and len(value) > cap:
        unit = "chars" if isinstance(value, str) else "bytes"
        report["value_repr"] = repr(value[:cap])[:cap] + f" … ({len(value)} {unit})"
        return
    text = repr(value)
    report["value_repr"] = text if len(text) <= cap else text[:cap] + f" … ({len(text)} chars)"
