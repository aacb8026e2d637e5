"""What confines run_python's sandbox on this host: the layers the kernel offers (network namespace through
`unshare --net`, Landlock, seccomp, a uid to drop to), detected without starting the template."""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import sys
from dataclasses import dataclass


@dataclass(frozen=True)
class Isolation:
    """What confines the sandbox on this host."""

    network_namespace: bool
    landlock_abi: int
    uid: int | None
    seccomp: bool = False
    remapped: tuple[str, ...] = ()
    platform_ok: bool = True

    def layers(self) -> list[str]:
        layers = [
            "a fresh process per call, forked from a pre-warmed template that never runs user code; "
            "its whole process group is killed at the wall-clock limit",
            "rlimits: address space, CPU seconds, file size, process/thread count, no core dumps",
            "empty environment (no credentials, tokens or connection details; the sandbox only gets data)",
            "private working directory, removed after the call",
        ]
        if self.network_namespace:
            layers.append("network namespace without interfaces (no network at all)")
        if self.landlock_abi:
            parts = [
                "read-only access to the Python installation and system libraries, writes only in the "
                "working directory, no program execution"
            ]
            if self.landlock_abi >= 4:
                parts.append("no TCP connect/bind")
            if self.landlock_abi >= 6:
                parts.append("no signals to processes outside the sandbox")
            layers.append(f"Landlock (ABI {self.landlock_abi}): " + "; ".join(parts))
        if self.seccomp:
            layers.append(
                "seccomp: no new sockets (socketpairs only), no ptrace, namespaces, mounts, bpf, io_uring, "
                "keyrings, kernel modules, kexec or reboot"
            )
        if self.uid is not None:
            layers.append(
                f"runs as unprivileged uid {self.uid} (no capabilities, no access to root-only files, "
                "cannot signal the server)"
            )
        layers.append(
            "audit hook (weaker, Python-level): refuses subprocesses, fork/exec, signals, sockets, "
            "ctypes/cffi, raising rlimits, and file access outside the working directory and the "
            "Python installation"
        )
        return layers

    def warnings(self) -> list[str]:
        """What is weaker than intended on this host, and what to do about it."""
        found = []
        if not self.platform_ok:
            found.append("run_python needs Linux; it is unavailable on this platform")
        if not self.landlock_abi and self.uid is None:
            found.append(
                "file access is only checked by the Python audit hook: C-level readers (DuckDB, Arrow) "
                "can read whatever this server's user can read. Run the server as root (the sandbox then "
                "drops to an unprivileged uid) or on Linux >= 5.13 with Landlock enabled, or set "
                "[sandbox] enabled = false"
            )
        if not self.network_namespace and self.landlock_abi < 4:
            found.append(
                "network access is only refused by the Python audit hook (no network namespace, no "
                "Landlock network rules): allow `unshare --net` or use Linux >= 6.7"
            )
        return found


def detect_isolation() -> Isolation:
    """The layers this host can provide, without starting the template (cheap; cached)."""
    return _detect()


_detect_cache: Isolation | None = None


def _detect() -> Isolation:
    global _detect_cache
    if _detect_cache is None:
        linux = sys.platform.startswith("linux")
        _detect_cache = Isolation(
            network_namespace=unshare_prefix() is not None,
            landlock_abi=_landlock_abi(),
            uid=sandbox_uid()[0],
            platform_ok=linux,
            seccomp=linux and os.uname().machine in ("x86_64", "aarch64"),
        )
    return _detect_cache


def _landlock_abi() -> int:
    if not sys.platform.startswith("linux"):
        return 0
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        libc.syscall.restype = ctypes.c_long
        abi = libc.syscall(444, None, 0, 1)
        return int(abi) if abi > 0 else 0
    except (OSError, AttributeError):
        return 0


def sandbox_uid() -> tuple[int | None, int | None]:
    """As root, the child drops to `nobody` (NPROC then counts only sandbox processes); otherwise it keeps ours."""
    if os.geteuid() != 0:
        return None, None
    try:
        entry = pwd.getpwnam("nobody")
        return entry.pw_uid, entry.pw_gid
    except KeyError:
        return 65534, 65534


_unshare_cache: list[list[str] | None] = []


def unshare_prefix() -> list[str] | None:
    """`unshare --net` (plus a user namespace when not root) if it works here, else None."""
    if not _unshare_cache:
        prefix = None
        binary = shutil.which("unshare") if sys.platform.startswith("linux") else None
        if binary:
            candidate = [binary, "--net"] + ([] if os.geteuid() == 0 else ["--map-root-user"])
            try:
                ok = (
                    subprocess.run(
                        [*candidate, "true"],
                        stdin=subprocess.DEVNULL,
                        stdout=subprocess.DEVNULL,
                        stderr=subprocess.DEVNULL,
                        timeout=10,
                        env={},
                    ).returncode
                    == 0
                )
            except (OSError, subprocess.TimeoutExpired):
                ok = False
            prefix = candidate if ok else None
        _unshare_cache.append(prefix)
    return _unshare_cache[0]


def own_netns() -> str | None:
    """This process's network namespace: the template's differs from it once `unshare --net` took effect."""
    try:
        return os.readlink("/proc/self/ns/net")
    except OSError:
        return None
