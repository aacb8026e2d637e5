"""Attacks on run_python's sandbox: each must be contained with a clear error, and the server must go on serving.

The table below is also what the layer report is made from (python -m pytest … -k layers, and the report in
the sandbox module docstring): `test_attack_is_contained` runs every attack with all layers on;
`test_kernel_layers_alone_contain_escapes` turns the audit hook off to show that the kernel layers (Landlock,
the uid drop, the network namespace, rlimits) stop the escapes by themselves where the host provides them.
"""

from __future__ import annotations

import os
import socket
import sqlite3
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from flexsql.config import SandboxConfig
from flexsql.tools.engines import SourceRegistry, open_source
from flexsql.tools.python_tool import PythonResult, RunPython, run_python
from flexsql.tools.runtime.context import ToolContext
from flexsql.tools.sandbox.isolation import detect_isolation
from flexsql.tools.sandbox.limits import SandboxLimits
from flexsql.tools.sandbox.supervisor import Sandbox
from tests.support.engines import engine_url

ATTACK_SANDBOX = SandboxConfig(
    timeout_s=2, cpu_s=5, memory_mb=256, file_mb=16, max_processes=32, max_output_chars=1000
)
DENIED = ("SandboxRefusal", "PermissionError", "Permission denied", "Operation not permitted", "refused")


@dataclass
class Env:
    ctx: ToolContext
    db_path: str
    sqlite_path: str
    config_path: str
    outside: str
    parent_pid: int
    listener: socket.socket
    port: int
    unix_listener: (
        socket.socket
    )  # like PostgreSQL's /run/postgresql/.s.PGSQL.5432: mode 0777, outside the sandbox
    unix_path: str


@dataclass
class Attack:
    name: str
    code: str  # formatted with the Env's fields
    check: Callable[[PythonResult, Env], None]
    sandbox: SandboxConfig | None = None  # None: ATTACK_SANDBOX


def denied(result: PythonResult, _env: Env | None = None) -> None:
    assert not result.ok, result.to_text()
    assert any(word in (result.error or "") for word in DENIED), result.to_text()


def limit(name: str, *alternatives: str) -> Callable[[PythonResult, Env], None]:
    def check(result: PythonResult, _env: Env) -> None:
        assert not result.ok, result.to_text()
        assert {name, *alternatives} & set(result.limits_hit), result.to_text()

    return check


def all_of(*checks: Callable[[PythonResult, Env], None]) -> Callable[[PythonResult, Env], None]:
    def check(result: PythonResult, env: Env) -> None:
        for one in checks:
            one(result, env)

    return check


def outside_untouched(_result: PythonResult, env: Env) -> None:
    assert not os.path.exists(env.outside)


def db_intact(_result: PythonResult, env: Env) -> None:
    assert os.path.getsize(env.db_path) > 0
    assert open_source(f"sqlite:///{env.sqlite_path}").execute("SELECT count(*) FROM orders").rows == [(7,)]


def nothing_connected(_result: PythonResult, env: Env) -> None:
    env.listener.settimeout(0.2)
    with pytest.raises(TimeoutError):
        env.listener.accept()


def nothing_on_unix_socket(_result: PythonResult, env: Env) -> None:
    env.unix_listener.settimeout(0.2)
    with pytest.raises(TimeoutError):
        env.unix_listener.accept()


def no_secret_in_output(result: PythonResult, _env: Env) -> None:
    text = result.to_text()
    assert "hunter2" not in text and "FLEXSQL_SECRET_FOR_ATTACKS" not in text


def env_is_clean(result: PythonResult, env: Env) -> None:
    assert result.ok and result.value_repr is None, result.to_text()  # the variable is simply not there
    no_secret_in_output(result, env)


def output_capped(result: PythonResult, _env: Env) -> None:
    assert len(result.stdout) <= ATTACK_SANDBOX.max_output_chars
    assert result.stdout_truncated and result.stdout_chars > ATTACK_SANDBOX.max_output_chars


def replaced_bad_bytes(result: PythonResult, _env: Env) -> None:
    assert result.ok, result.to_text()
    assert "\ufffd" in result.stdout and "ok" in result.stdout and "end" in result.stdout
    assert "\\udcff" in result.stdout  # a lone surrogate printed from Python is escaped, not an error


def crashed_cleanly(result: PythonResult, _env: Env) -> None:
    assert not result.ok
    assert "RecursionError" in (result.error or "") or "SIGSEGV" in (result.error or ""), result.to_text()


ATTACKS = [
    Attack("infinite_loop", "while True:\n    pass", limit("timeout")),
    Attack(
        "c_level_busy_loop",
        "import numpy as np\nwhile True:\n    np.linalg.svd(np.random.rand(200, 200))",
        limit("timeout", "cpu"),
    ),
    Attack(
        "cpu_limit",
        "while True:\n    pass",
        limit("cpu"),
        SandboxConfig(timeout_s=10, cpu_s=1, memory_mb=256, file_mb=16, max_processes=32),
    ),
    Attack("fork_bomb", "import os\nwhile True:\n    os.fork()", denied),
    Attack(
        "multiprocessing_bomb",
        "import multiprocessing as mp\nfor _ in range(1000):\n    mp.Process(target=print).start()",
        denied,
    ),
    Attack(
        "thread_bomb",
        "import threading, time\nkeep = []\nfor _ in range(100000):\n"
        "    t = threading.Thread(target=time.sleep, args=(30,))\n    t.start()\n    keep.append(t)",
        limit("processes"),
    ),
    Attack("memory_bomb_one_allocation", "b = bytearray(50 * 1024**3)", limit("memory")),
    Attack(
        "memory_bomb_growth", "keep = []\nwhile True:\n    keep.append(bytearray(10**7))", limit("memory")
    ),
    Attack("memory_bomb_numpy", "import numpy as np\nnp.ones((100_000, 100_000))", limit("memory")),
    Attack(
        "file_10_gb",
        "with open('big.bin', 'wb') as f:\n    for _ in range(10 * 1024):\n        f.write(b'0' * 2**20)",
        limit("file size"),
    ),
    Attack(
        "disk_fill_many_files",
        "for i in range(1000):\n    with open(f'f{{i}}.bin', 'wb') as f:\n"
        "        f.write(b'0' * (15 * 2**20))",
        limit("file size"),
    ),
    Attack(
        "parent_environment",
        "import os\nprint(dict(os.environ))\nos.environ.get('FLEXSQL_SECRET_FOR_ATTACKS')",
        lambda r, e: env_is_clean(r, e),
    ),
    Attack(
        "proc_parent_environ",
        "open('/proc/{parent_pid}/environ', 'rb').read()",
        all_of(denied, no_secret_in_output),
    ),
    Attack("proc_parent_mem", "open('/proc/{parent_pid}/mem', 'rb').read(16)", denied),
    Attack("read_database_file", "open({db_path!r}, 'rb').read(100)", denied),
    Attack(
        "duckdb_opens_database_file",
        "import duckdb\n"
        "duckdb.connect({db_path!r}, read_only=True).sql('SELECT count(*) FROM orders').fetchall()",
        lambda r, e: assert_failed_with(r, ("Permission denied", "IO Error", "IOException")),
    ),
    Attack(
        "sqlite_opens_database_file",
        "import sqlite3\nsqlite3.connect({sqlite_path!r}).execute('SELECT count(*) FROM orders').fetchall()",
        denied,
    ),
    Attack("read_config_file", "open({config_path!r}).read()", all_of(denied, no_secret_in_output)),
    Attack(
        "import_server_package",
        "import flexsql.tools.engines",
        lambda r, e: assert_failed_with(r, ("ModuleNotFoundError",)),
    ),
    Attack("read_etc_shadow", "open('/etc/shadow').read()", denied),
    Attack("symlink_to_outside", "import os\nos.symlink('/etc/passwd', 'link')\nopen('link').read()", denied),
    Attack("chdir_then_relative_read", "import os\nos.chdir('/')\nopen('etc/passwd').read()", denied),
    Attack(
        "socket_to_loopback",
        "import socket\ns = socket.create_connection(('127.0.0.1', {port}), timeout=1)\n"
        "s.sendall(b'exfiltrate')",
        all_of(denied, nothing_connected),
    ),
    Attack(
        "unix_socket_to_a_local_service",
        "import socket\ns = socket.socket(socket.AF_UNIX)\n"
        "s.connect({unix_path!r})\ns.sendall(b'exfiltrate')",
        all_of(denied, nothing_on_unix_socket),
    ),
    Attack(
        "udp_to_loopback",
        "import socket\nsocket.socket(socket.AF_INET, socket.SOCK_DGRAM).sendto(b'x', ('127.0.0.1', {port}))",
        denied,
    ),
    Attack("dns_lookup", "import socket\nsocket.getaddrinfo('example.com', 80)", denied),
    Attack(
        "spawn_shell",
        "import subprocess\nsubprocess.run(['sh', '-c', 'id'], capture_output=True).stdout",
        denied,
    ),
    Attack("os_system", "import os\nos.system('touch {outside}')", all_of(denied, outside_untouched)),
    Attack(
        "os_exec",
        "import os\nos.execv('/bin/sh', ['sh', '-c', 'touch {outside}'])",
        all_of(denied, outside_untouched),
    ),
    Attack("kill_the_server", "import os, signal\nos.kill({parent_pid}, signal.SIGKILL)", denied),
    Attack("kill_the_template", "import os, signal\nos.kill(os.getppid(), signal.SIGKILL)", denied),
    Attack(
        "write_outside_workdir", "open({outside!r}, 'w').write('pwned')", all_of(denied, outside_untouched)
    ),
    Attack("write_next_to_workdir", "open('../escape.txt', 'w').write('pwned')", denied),
    Attack("delete_database_file", "import os\nos.remove({db_path!r})", all_of(denied, db_intact)),
    Attack("ctypes_import", "import ctypes\nctypes.CDLL(None).system(b'id')", denied),
    Attack(
        "ctypes_through_numpy", "import numpy as np\nnp.ctypeslib.ctypes.CDLL(None).system(b'id')", denied
    ),
    Attack(
        "ctypes_pythonapi",
        "import numpy as np\n"
        "np.ctypeslib.ctypes.pythonapi.PyRun_SimpleString(b'import os; os.system(\"id\")')",
        denied,
    ),
    Attack("raise_rlimit", "import resource\nresource.setrlimit(resource.RLIMIT_AS, (-1, -1))", denied),
    Attack("audit_hook_tampering", "import gc\n[o for o in gc.get_objects() if callable(o)]", denied),
    Attack("huge_output", "for _ in range(200_000):\n    print('x' * 1000)", output_capped),
    Attack(
        "huge_output_below_python",
        "import os\nfor _ in range(500):\n    os.write(1, b'y' * 1_000_000)",
        lambda r, e: assert_capped_raw(r),
    ),
    Attack(
        "non_utf8_output",
        "import sys, os\nsys.stdout.buffer.write(b'\\xff\\xfe ok \\x80\\n')\n"
        "os.write(1, b'\\xc3\\x28 end\\n')\nprint('\\udcff')",
        replaced_bad_bytes,
    ),
    Attack(
        "recursion_bomb",
        "def f(n):\n    return f(n + 1)\nf(0)",
        lambda r, e: assert_failed_with(r, ("RecursionError",)),
    ),
    Attack(
        "recursion_bomb_past_the_c_stack",
        "import sys\nsys.setrecursionlimit(10**8)\nx, y = [], []\n"
        "for _ in range(10**5):\n    x, y = [x], [y]\nx == y",
        crashed_cleanly,
    ),
]


def assert_failed_with(result: PythonResult, words: tuple[str, ...]) -> None:
    assert not result.ok, result.to_text()
    assert any(word in (result.error or "") for word in words), result.to_text()


def assert_capped_raw(result: PythonResult) -> None:
    assert len(result.stdout) <= ATTACK_SANDBOX.max_output_chars
    assert result.stdout_truncated and result.stdout_chars > ATTACK_SANDBOX.max_output_chars


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory):
    directory = tmp_path_factory.mktemp("attacks")
    with engine_url("duckdb", directory) as duck_url, engine_url("sqlite", directory) as sqlite_url:
        duck = open_source(duck_url, name="shop")
        config = directory / "flexsql.toml"
        config.write_text('auth_token = "hunter2"\n[[sources]]\nurl = "postgresql://app:hunter2@db/prod"\n')
        listener = socket.create_server(("127.0.0.1", 0))
        unix_path = f"/tmp/flexsql-test-{uuid.uuid4().hex[:12]}.sock"
        unix_listener = socket.socket(socket.AF_UNIX)
        unix_listener.bind(unix_path)
        unix_listener.listen()
        os.chmod(unix_path, 0o777)
        os.environ["FLEXSQL_SECRET_FOR_ATTACKS"] = "hunter2"
        try:
            yield Env(
                ctx=ToolContext(sources=SourceRegistry([duck]), sandbox=ATTACK_SANDBOX),
                db_path=duck_url.removeprefix("duckdb:///"),
                sqlite_path=sqlite_url.removeprefix("sqlite:///"),
                config_path=str(config),
                outside=f"/tmp/flexsql-escape-{uuid.uuid4().hex}",
                parent_pid=os.getpid(),
                listener=listener,
                port=listener.getsockname()[1],
                unix_listener=unix_listener,
                unix_path=unix_path,
            )
        finally:
            os.environ.pop("FLEXSQL_SECRET_FOR_ATTACKS", None)
            listener.close()
            unix_listener.close()
            os.unlink(unix_path)
            duck.close()


def _code(attack: Attack, env: Env) -> str:
    return attack.code.format(
        **{
            k: getattr(env, k)
            for k in ("db_path", "sqlite_path", "config_path", "outside", "parent_pid", "port", "unix_path")
        }
    )


@pytest.mark.integration
@pytest.mark.parametrize("attack", ATTACKS, ids=[a.name for a in ATTACKS])
def test_attack_is_contained(attack: Attack, env: Env):
    ctx = env.ctx if attack.sandbox is None else ToolContext(sources=env.ctx.sources, sandbox=attack.sandbox)
    result = run_python(ctx, RunPython(code=_code(attack, env)))
    attack.check(result, env)
    # the server is still serving, the sources are still there, and the next call is clean
    after = run_python(env.ctx, RunPython(code="6 * 7"))
    assert after.ok and after.value_repr == "42", after.to_text()
    assert sqlite3.connect(env.sqlite_path).execute("SELECT count(*) FROM customers").fetchone() == (5,)


def test_attack_suite_is_large_enough():
    assert len(ATTACKS) >= 20


# What the kernel layers stop without the audit hook: escapes that only a Python-level check could catch
# otherwise (reading/writing files, connecting, signalling, executing).
KERNEL_ESCAPES = {
    "proc_parent_environ",
    "read_database_file",
    "duckdb_opens_database_file",
    "read_config_file",
    "write_outside_workdir",
    "write_next_to_workdir",
    "delete_database_file",
    "socket_to_loopback",
    "kill_the_server",
    "os_system",
    "spawn_shell",
    "read_etc_shadow",
    "symlink_to_outside",
    "fork_bomb",
    "ctypes_import",
    "unix_socket_to_a_local_service",
}
# Without the hook these start (fork is allowed): what must fail is running a program or multiplying.
HOOKLESS_CODE = {
    "os_system": "import os\nos.system('touch {outside}')",
    "ctypes_import": "import ctypes\nctypes.CDLL(None).system(b'touch {outside}')",
    "spawn_shell": "import subprocess\nsubprocess.run(['/bin/sh', '-c', 'touch {outside}']).returncode",
    "fork_bomb": "import os, time\nwhile True:\n    if os.fork() == 0:\n        time.sleep(60)",
}


@pytest.fixture(scope="module")
def hookless() -> Sandbox:
    iso = detect_isolation()
    if not (iso.landlock_abi and iso.uid is not None and iso.seccomp and iso.network_namespace):
        pytest.skip(
            "this host lacks one of Landlock, root (uid drop), seccomp or `unshare --net`: the kernel "
            "layers are not all there to test without the audit hook"
        )
    sandbox = Sandbox(audit_hook=False)
    yield sandbox
    sandbox.close()


@pytest.mark.integration
@pytest.mark.parametrize(
    "attack",
    [a for a in ATTACKS if a.name in KERNEL_ESCAPES],
    ids=[a.name for a in ATTACKS if a.name in KERNEL_ESCAPES],
)
def test_kernel_layers_alone_contain_escapes(attack: Attack, env: Env, hookless: Sandbox):
    """Defense in depth: with the audit hook off, Landlock / the uid drop / the namespace / rlimits still hold."""
    code = _code(Attack(attack.name, HOOKLESS_CODE.get(attack.name, attack.code), attack.check), env)
    outcome = hookless.run(code, {}, SandboxLimits.from_config(ATTACK_SANDBOX))
    report = outcome.report or {}
    error = (report.get("error") or "") + (outcome.crash or "")
    if attack.name in ("os_system", "ctypes_import", "spawn_shell"):
        # the shell cannot be executed (Landlock grants no execute right) or not even forked (process limit)
        assert not os.path.exists(env.outside)
        assert report.get("value_repr") not in ("0", None) or error, report
        return
    if attack.name == "fork_bomb":
        assert "processes" in (report.get("limits") or []) or "timeout" in outcome.limits_hit, (report, error)
        if hookless.uid is not None:  # every forked copy was killed with the group and reaped
            assert _wait_until_no_process_of(hookless.uid), "processes of the sandbox uid survived the call"
        return
    assert error, f"{attack.name} was not stopped without the audit hook: {report}"
    assert any(
        w in error
        for w in (
            "Permission denied",
            "Operation not permitted",
            "PermissionError",
            "IO Error",
            "IOException",
        )
    ), error
    if attack.name == "socket_to_loopback":
        nothing_connected(None, env)  # type: ignore[arg-type]
    if attack.name == "unix_socket_to_a_local_service":
        nothing_on_unix_socket(None, env)  # type: ignore[arg-type]
    if attack.name in ("write_outside_workdir",):
        outside_untouched(None, env)  # type: ignore[arg-type]


def _wait_until_no_process_of(uid: int, seconds: float = 3.0) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        alive = []
        for name in os.listdir("/proc"):
            if name.isdigit():
                try:
                    if os.stat(f"/proc/{name}").st_uid == uid:
                        alive.append(name)
                except OSError:
                    continue
        if not alive:
            return True
        time.sleep(0.05)
    return False


@pytest.mark.integration
def test_template_survives_a_killed_child_and_restarts_when_killed(env: Env):
    """Even if the template itself dies (not something user code can do), the next call starts a new one."""
    from flexsql.tools.sandbox.supervisor import get_sandbox

    sandbox = get_sandbox()
    pid = sandbox.start()["pid"]
    os.kill(pid, 9)
    result = run_python(env.ctx, RunPython(code="1 + 1"))
    assert result.ok and result.value_repr == "2"
    assert sandbox.start()["pid"] != pid


def test_attack_path_names_are_real(env: Env):
    assert Path(env.db_path).is_file() and Path(env.sqlite_path).is_file() and Path(env.config_path).is_file()
