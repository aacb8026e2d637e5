"""Which Host and Origin headers the HTTP server answers: DNS-rebinding protection that also works
off loopback. A browser tricked into talking to the server sends the attacker's name as Host, so
the check is on names; ports only matter where `--allowed-host name:port` asks for one."""

from __future__ import annotations

import ipaddress
import socket
from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import urlsplit

from starlette.types import ASGIApp, Receive, Scope, Send

WILDCARD_BINDS = ("0.0.0.0", "::", "")
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "::1", "localhost.localdomain")


def split_host(value: str) -> tuple[str, int | None]:
    """`name[:port]` or `[v6]:port` → (lower-case name without brackets, port or None)."""
    value = value.strip()
    if value.startswith("["):
        name, _, rest = value[1:].partition("]")
        port = rest[1:] if rest.startswith(":") else ""
    elif value.count(":") == 1:
        name, port = value.split(":")
    else:  # a bare name, or a bare IPv6 address
        name, port = value, ""
    return name.lower().rstrip("."), int(port) if port.isdigit() else None


def _resolved(name: str) -> set[str]:
    try:
        # sockaddr[0] is the address text (typeshed also allows the (int, bytes) of a Python without IPv6)
        return {addr[0].lower() for *_, addr in socket.getaddrinfo(name, None) if isinstance(addr[0], str)}
    except OSError:  # an unresolvable name is still accepted as itself
        return set()


def machine_names() -> set[str]:
    """Names and addresses this machine answers to, for a wildcard bind."""
    names = {n.lower() for n in (socket.gethostname(), socket.getfqdn()) if n}
    found = set(names) | set(LOOPBACK_NAMES)
    for name in names:
        found |= _resolved(name)
    return found


def advertised_base(host: str, port: int) -> str:
    """The base URL the server names in what it advertises (auth metadata, WWW-Authenticate): a
    wildcard bind is no address a client can reach, so it names this machine instead (its host
    name, which the host check allows; a bare address if the machine has no usable name)."""
    bind = split_host(host)[0]
    if bind in WILDCARD_BINDS:
        bind = _reachable_name(ipv6=split_host(host)[0] == "::")
    return f"http://[{bind}]:{port}" if ":" in bind else f"http://{bind}:{port}"


def _reachable_name(ipv6: bool) -> str:
    name = socket.gethostname().lower().rstrip(".")
    if name and name not in LOOPBACK_NAMES:
        return name
    # no host name set: the address outgoing traffic leaves from (connect on UDP sends nothing)
    family, probe = (socket.AF_INET6, "2001:db8::1") if ipv6 else (socket.AF_INET, "192.0.2.1")
    try:
        with socket.socket(family, socket.SOCK_DGRAM) as sock:
            sock.connect((probe, 9))
            address: str = sock.getsockname()[0]  # (host, port[, flow, scope]) for AF_INET and AF_INET6
            return address
    except OSError:
        return "::1" if ipv6 else "127.0.0.1"


@dataclass(frozen=True)
class AllowedHosts:
    machine: frozenset[str]  # the bind's own names and addresses
    extra: frozenset[str]  # `--allowed-host name`: on any port
    with_port: frozenset[tuple[str, int]]  # `--allowed-host name:port`: on that port only
    port: int  # the server's port: a web origin on a machine name must use it
    local_address: bool  # wildcard bind: an IP literal naming the address the connection arrived on

    @classmethod
    def for_bind(cls, host: str, port: int, extra: Iterable[str] = ()) -> AllowedHosts:
        bind = split_host(host)[0]
        if bind in WILDCARD_BINDS:
            machine = machine_names()
        else:
            machine = {bind} | _resolved(bind)
            if is_loopback(bind):
                machine |= set(LOOPBACK_NAMES)
        bare, with_port = set(), set()
        for item in extra:
            name, item_port = split_host(item)
            if item_port is None:
                bare.add(name)
            else:
                with_port.add((name, item_port))
        return cls(frozenset(machine), frozenset(bare), frozenset(with_port), port, bind in WILDCARD_BINDS)

    def _own(self, name: str, local_ip: str | None) -> bool:
        return name in self.machine or (
            self.local_address and local_ip is not None and _same_address(name, local_ip)
        )

    def allows(self, host: str, local_ip: str | None) -> bool:
        name, port = split_host(host)
        if not name:
            return False
        if name in self.extra or (port is not None and (name, port) in self.with_port):
            return True
        return self._own(name, local_ip)

    def allows_origin(self, origin: str, local_ip: str | None) -> bool:
        """A web page may call the server from its own origin only (another local web app may not)."""
        parts = urlsplit(origin)
        if parts.scheme not in ("http", "https") or not parts.hostname:
            return False
        name = parts.hostname.lower().rstrip(".")
        try:
            port = parts.port or (443 if parts.scheme == "https" else 80)
        except ValueError:
            return False
        if name in self.extra or (name, port) in self.with_port:
            return True
        return port == self.port and self._own(name, local_ip)


def is_loopback(host: str) -> bool:
    if host.lower() in ("localhost", "localhost.localdomain"):
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False


def _same_address(name: str, local_ip: str) -> bool:
    try:
        address = ipaddress.ip_address(name)
        local = ipaddress.ip_address(local_ip)
    except ValueError:
        return False
    mapped = getattr(local, "ipv4_mapped", None)  # a dual-stack socket reports ::ffff:a.b.c.d
    return address == local or (mapped is not None and address == mapped)


class HostCheck:
    """ASGI middleware: 421 for a Host, 403 for an Origin that is not one of this server's names,
    with what to do about it."""

    def __init__(self, app: ASGIApp, allowed: AllowedHosts) -> None:
        self.app = app
        self.allowed = allowed

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope.get("headers", [])}
        local_ip = (scope.get("server") or (None,))[0]
        host = headers.get("host", "")
        if not self.allowed.allows(host, local_ip):
            name = split_host(host)[0] or "(none)"
            await _refuse(
                send,
                421,
                f"flexsql: the Host header {host!r} is not a name or address of this server "
                f"(refused to protect against DNS rebinding); if clients reach the server as "
                f"{name!r}, start it with --allowed-host {name}",
            )
            return
        origin = headers.get("origin")
        if origin and not self.allowed.allows_origin(origin, local_ip):
            await _refuse(
                send,
                403,
                f"flexsql: requests from the web origin {origin!r} are refused (DNS-rebinding "
                "protection); if that site is yours, add its name with --allowed-host",
            )
            return
        await self.app(scope, receive, send)


async def _refuse(send: Send, status: int, text: str) -> None:
    body = text.encode()
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"text/plain; charset=utf-8"),
                (b"content-length", str(len(body)).encode()),
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
