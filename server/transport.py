"""Transports: stdio, and streamable HTTP (loopback by default; a bearer token is required to
bind any other address; DNS-rebinding protection on every bind, wildcard ones included)."""

from __future__ import annotations

import errno
import hmac
import logging
import socket
import sys
from functools import partial

from mcp.server import MCPServer
from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.transport_security import TransportSecuritySettings
from starlette.types import ASGIApp

from flexsql.config import Settings
from flexsql.errors import ConfigError
from flexsql.server.app import build_server
from flexsql.server.disconnect import CancelOnDisconnect
from flexsql.server.health import Health, memory_figures
from flexsql.server.host_check import AllowedHosts, HostCheck, advertised_base, is_loopback
from flexsql.server.lone_surrogates import ReplaceSurrogateEscapes
from flexsql.server.lone_surrogates import serve_stdio as stdio_replacing_surrogates
from flexsql.tools.engines import SourceRegistry

log = logging.getLogger("flexsql.server")


class StaticTokenVerifier:
    """Accepts exactly one bearer token, compared in constant time."""

    def __init__(self, token: str) -> None:
        self._token = token

    async def verify_token(self, token: str) -> AccessToken | None:
        if hmac.compare_digest(token.encode(), self._token.encode()):
            return AccessToken(token="***", client_id="flexsql-client", scopes=[])
        return None


def _prewarm_python(settings: Settings, allowed: bool) -> None:
    """Start run_python's sandbox template in the background so the first call is fast."""
    if settings.sandbox.enabled if settings.sandbox.enabled is not None else allowed:
        from flexsql.tools.sandbox.supervisor import prewarm

        prewarm()


def serve_stdio(settings: Settings, sources: SourceRegistry) -> None:
    server = build_server(settings, sources, allow_python=True)
    _prewarm_python(settings, True)
    stdio_replacing_surrogates(server)


def http_app(settings: Settings, sources: SourceRegistry) -> tuple[MCPServer, ASGIApp]:
    """The Starlette app for streamable HTTP, with auth and host checks applied."""
    host, port, token = settings.host, settings.port, settings.auth_token
    loopback = is_loopback(host)
    if not loopback and not token:
        raise ConfigError(
            f"refusing to serve HTTP on {host} without authentication: pass --auth-token or set "
            "FLEXSQL_AUTH_TOKEN (or bind 127.0.0.1)"
        )
    if token is not None and len(token) < 16:
        raise ConfigError(
            "the auth token is too short: use at least 16 random characters "
            "(e.g. python -c 'import secrets; print(secrets.token_urlsafe(32))')"
        )
    verifier = auth = None
    if token:
        base = advertised_base(host, port)
        verifier = StaticTokenVerifier(token)
        # validated from text, not built from AnyHttpUrl objects: AuthSettings keeps a path-less URL
        # given as text exactly as written, where an AnyHttpUrl would add a trailing slash to the issuer.
        # validate_token_resource is off, said explicitly (the SDK warns while it is unset): that check
        # refuses OAuth tokens issued for another resource, and this token is no OAuth token but the
        # server's own secret, compared whole in constant time (StaticTokenVerifier).
        auth = AuthSettings.model_validate(
            {"issuer_url": base, "resource_server_url": f"{base}/mcp", "validate_token_resource": False}
        )
    server = build_server(settings, sources, allow_python=loopback, token_verifier=verifier, auth=auth)
    # Host/Origin checks are ours (HostCheck): the SDK's take an exact list, which cannot name every
    # address of a wildcard bind, so its own check is off
    security = TransportSecuritySettings(enable_dns_rebinding_protection=False)
    app: ASGIApp = server.streamable_http_app(transport_security=security, host=host)
    budget = server.flexsql_state.store_budget  # type: ignore[attr-defined]  # set by build_server
    memory = partial(memory_figures, budget, list(sources))
    app = Health(
        ReplaceSurrogateEscapes(CancelOnDisconnect(app)),
        sources=len(list(sources)),
        memory=memory,
        verifier=verifier,
    )
    app = HostCheck(app, AllowedHosts.for_bind(host, port, settings.allowed_hosts))
    return server, app


def bind(host: str, port: int) -> socket.socket:
    """The listening socket, bound before anything says "serving": a taken port is a clear error
    (exit 2) instead of uvicorn's errno after the banner."""
    try:
        family = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)[0][0]
    except socket.gaierror as exc:
        raise ConfigError(
            f"cannot bind HTTP to {host!r}: {exc.strerror}; pass --host a local address"
        ) from None
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        if exc.errno == errno.EADDRINUSE:
            raise ConfigError(
                f"port {port} on {host} is already in use (another flexsql serve?); pass --port with a "
                "free port, or stop the program holding it"
            ) from None
        raise ConfigError(f"cannot bind HTTP to {host}:{port}: {exc.strerror or exc}") from None
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def serve_http(settings: Settings, sources: SourceRegistry) -> None:
    import uvicorn

    _server, app = http_app(settings, sources)
    sock = bind(settings.host, settings.port)
    _prewarm_python(settings, is_loopback(settings.host))
    port = sock.getsockname()[1]
    guard = "; every request must carry the bearer token" if settings.auth_token else ""
    sys.stderr.write(
        f"flexsql: serving streamable HTTP on http://{settings.host}:{port}/mcp (health: /healthz){guard}; "
        "Ctrl-C stops it\n"
    )
    level = logging.getLevelName(logging.getLogger().getEffectiveLevel()).lower()
    # log_config=None: uvicorn's records go through flexsql's plain handler (no colours, no wrapping)
    config = uvicorn.Config(
        app, log_level=level if level in ("debug", "info") else "warning", log_config=None
    )
    uvicorn.Server(config).run(sockets=[sock])
