"""The child's channels to the server, and the plain descriptor writes the zygote and the child share.

fd 1 and 2 are pipes the server reads; sys.stdout and sys.stderr count every character and pass only the
first `limit` on, so an output flood costs neither the pipe nor the server. fd 3 (RPC_FD) carries JSON lines:
flexsql.sql() requests and their answers, then the final report.
"""

from __future__ import annotations

import io
import json
import os
import socket
from typing import Any

MB = 1024 * 1024
RPC_FD = 3
MAX_LINE = 4 * MB


def log(message: str) -> None:
    try:
        os.write(2, (message.rstrip() + "\n").encode("utf-8", "replace"))
    except OSError:
        pass


def write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        try:
            written = os.write(fd, view)
        except InterruptedError:
            continue
        view = view[written:]


class BoundedText(io.TextIOBase):
    """sys.stdout/sys.stderr: counts every character, passes only the first `limit` on to the pipe."""

    def __init__(self, fd: int, limit: int) -> None:
        self._fd = fd
        self._limit = limit
        self.chars = 0
        self.buffer = BoundedBinary(self)

    encoding = "utf-8"
    errors = "backslashreplace"

    def writable(self) -> bool:
        return True

    def isatty(self) -> bool:
        return False

    def fileno(self) -> int:
        return self._fd

    def flush(self) -> None:
        pass

    def write(self, text: str) -> int:
        if not isinstance(text, str):
            raise TypeError(f"write() argument must be str, not {type(text).__name__}")
        room = self._limit - self.chars
        self.chars += len(text)
        if room > 0:
            write_all(self._fd, text[:room].encode("utf-8", "backslashreplace"))
        return len(text)


class BoundedBinary(io.RawIOBase):
    def __init__(self, owner: BoundedText) -> None:
        self._owner = owner

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        data = bytes(data)
        room = self._owner._limit - self._owner.chars
        self._owner.chars += len(data)
        if room > 0:
            write_all(self._owner._fd, data[:room])
        return len(data)


class Rpc:
    """JSON lines over fd 3: requests to the server (flexsql.sql) and the final report."""

    def __init__(self) -> None:
        self.sock = socket.socket(fileno=RPC_FD)
        self._buffer = b""

    def send(self, message: dict[str, Any]) -> None:
        self.sock.sendall((json.dumps(message, default=str) + "\n").encode())

    def receive(self) -> dict[str, Any]:
        while b"\n" not in self._buffer:
            chunk = self.sock.recv(1 << 16)
            if not chunk:
                raise ConnectionError("the server closed the connection to the sandbox")
            self._buffer += chunk
            if len(self._buffer) > MAX_LINE:
                raise ConnectionError("oversized reply from the server")
        line, self._buffer = self._buffer.split(b"\n", 1)
        message = json.loads(line)
        if not isinstance(message, dict):
            raise ConnectionError("malformed reply from the server")
        return message
