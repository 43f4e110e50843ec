"""Streamable HTTP: who may connect.

A store is someone's memory, and any process that reaches the port can read and rewrite it. So a
server bound to anything but loopback refuses to start without a bearer token (CORRIGENDA_TOKEN,
from the environment only), and when a token is set it is required on every request, loopback
included. Host and Origin are always checked against an allow-list (the SDK's DNS-rebinding
protection): without that, a web page the user visits could reach a loopback server through a
name that resolves to 127.0.0.1.

Every request is answered on its own (STATELESS), whatever the client's protocol version, so that any
server of a fleet on one store answers any request and a load balancer needs no stickiness.
"""

from __future__ import annotations

import socket
import sys
from collections.abc import Sequence
from typing import Any

from mcp.server.auth.routes import create_protected_resource_routes
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer
from mcp.server.request_state import RequestStateSecurity
from mcp.server.transport_security import TransportSecuritySettings
from starlette.applications import Starlette
from starlette.responses import Response
from starlette.routing import BaseRoute, Route
from starlette.types import ASGIApp, Receive, Scope, Send

from .config import MIN_TOKEN_LENGTH, Settings, is_loopback
from .connections import bounded_server
from .grants import GrantedTokens, Grants
from .grants import load as load_grants
from .oauth import Issuer

PATH = "/mcp"
LOOPBACK_NAMES = ("127.0.0.1", "localhost", "[::1]")

# No Mcp-Session-Id, for any client. A client of 2026-07-28 sends its version, capabilities and name with
# every request, and the SDK serves it without a session whatever this says; this makes the same true of
# a client of 2025-11-25 or before, whose spec makes the session optional: its `initialize` is answered
# and forgotten, and each later request stands alone, so a round-robin balancer may send it anywhere. With
# sessions, each server knew only those it had opened and answered the others 404 "Session not found".
# What no request alone can carry is lost to those older clients over HTTP (stdio keeps it): a question in
# the middle of a call (elicitation/create: CORRIGENDA_ASK_ON_UPDATE) and roots/list, both of which want
# the reply on the server that asked, and the client's name in what its writes record ("ada via unnamed
# client", not "ada via claude-code"). A client of 2026-07-28 is asked statelessly, in an input-required
# result (request_state below).
STATELESS = True


class RefusedToListen(Exception):
    """The settings would expose the store: the message says what to set."""


def netloc(host: str, port: int) -> str:
    return f"[{host.strip('[]')}]:{port}" if ":" in host else f"{host}:{port}"


def auth(settings: Settings, grants: Grants | None) -> dict[str, Any]:
    """MCPServer's auth arguments: a verifier for the credentials of `grants` (the configured token's and
    the grants file's, grants.py; with an OAuth issuer, its access tokens too, oauth.py), or none on
    stdio or without any."""
    if settings.transport != "http" or grants is None:
        return {}
    oauth = resource_server(settings)
    if oauth is None or oauth.resource_server_url is None:
        # The SDK wants an issuer for OAuth metadata; with no resource_server_url it publishes none.
        return {
            "token_verifier": GrantedTokens(grants),
            "auth": AuthSettings(issuer_url=f"http://{netloc(settings.host, settings.port)}", resource_server_url=None),
        }
    resource = str(oauth.resource_server_url)  # as the metadata publishes it: the audience a token must name
    issuer = Issuer(str(settings.oauth_issuer), resource, settings.oauth_jwks)
    return {"token_verifier": GrantedTokens(grants, issuer), "auth": oauth}


def request_state(settings: Settings) -> dict[str, Any]:
    """MCPServer's `request_state_security`: the key that seals what a client of 2026-07-28 carries between
    the rounds of a call (the question a `remember` asks the person, CORRIGENDA_ASK_ON_UPDATE), which the
    client's retry may bring to another server of the fleet. With CORRIGENDA_SESSION_SECRET, the same on
    every server, any of them opens it (the SDK derives its own key from the secret, apart from the web
    view's); without it, each process seals under a key of its own, and a retry that reaches another
    server is refused as "Invalid or expired requestState"."""
    if settings.session_secret is None:
        return {}
    return {"request_state_security": RequestStateSecurity(keys=[settings.session_secret.get_secret_value()])}


def resource_server(settings: Settings) -> AuthSettings | None:
    """With an OAuth issuer, the SDK's settings that make this an OAuth 2.1 resource server: given
    resource_server_url, it serves the RFC 9728 metadata (this resource, its authorization server) at
    /.well-known/oauth-protected-resource plus the resource's path, and its 401 names that address in
    `WWW-Authenticate: Bearer … resource_metadata="…"`. oauth.py checks the audience, against the very
    URL the metadata publishes; the SDK's own check of AccessToken.resource is left off, as it would
    refuse the static tokens, which name no resource."""
    if settings.oauth_issuer is None or settings.resource is None:
        return None
    return AuthSettings(
        issuer_url=settings.oauth_issuer, resource_server_url=settings.resource, validate_token_resource=False
    )


def authenticates(settings: Settings) -> bool:
    """Whether HTTP requests must carry a credential: a token or a grants file is set (OAuth needs one)."""
    return settings.token is not None or settings.grants is not None


def transport_security(settings: Settings, port: int | None = None) -> TransportSecuritySettings:
    """Allowed Host and Origin values: the configured lists, else the loopback names and the bind
    address, each with the port (`settings.port` unless another is given: the web view's)."""
    port = port or settings.port
    names = list(LOOPBACK_NAMES)
    bound = netloc(settings.host, port).rsplit(":", 1)[0]
    if bound not in names:
        names.append(bound)
    return TransportSecuritySettings(
        enable_dns_rebinding_protection=True,
        allowed_hosts=settings.allowed_hosts or [f"{name}:{port}" for name in names],
        allowed_origins=settings.allowed_origins or [f"http://{name}:{port}" for name in names],
    )


def check_port(host: str, port: int, flag: str) -> None:
    """Refuse, in one line, a port another process listens on (rather than announce a server that then
    fails to bind)."""
    family = socket.AF_INET6 if ":" in host.strip("[]") else socket.AF_INET
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds: TIME_WAIT is no owner
        try:
            probe.bind((host.strip("[]"), port))
        except OSError as exc:
            raise RefusedToListen(
                f"cannot listen on {netloc(host, port)} ({exc.strerror}): choose another {flag}"
            ) from None


def refuse_exposure_without_token(settings: Settings, where: str, what: str = "") -> None:
    """RefusedToListen if `settings.host` is off loopback and neither a token nor grants are set."""
    if not authenticates(settings) and not is_loopback(settings.host):
        raise RefusedToListen(
            f"refusing to {f'serve {what} on' if what else 'listen on'} {where} without a token: other machines "
            f"can reach it. Set CORRIGENDA_TOKEN (environment only) to a secret of {MIN_TOKEN_LENGTH}+ characters, "
            "a grants file in CORRIGENDA_GRANTS, or use --host 127.0.0.1"
        )


def serve_http(
    server: MCPServer[Any], settings: Settings, notices: Sequence[str] = (), routes: Sequence[BaseRoute] = ()
) -> None:
    """Listen until stopped; `server` must have been built with `auth(settings)`. `notices`: lines for
    stderr after the one saying where it listens; `routes`: served beside the MCP endpoint (mcp_app)."""
    where = netloc(settings.host, settings.port)
    refuse_exposure_without_token(settings, where)
    check_port(settings.host, settings.port, "--port (CORRIGENDA_PORT)")
    security = transport_security(settings)
    access = "no token (loopback only)"
    if authenticates(settings):
        given = [
            name for name, on in (("CORRIGENDA_TOKEN", settings.token), ("CORRIGENDA_GRANTS", settings.grants)) if on
        ]
        access = f"bearer token required ({', '.join(given)})"
        if settings.oauth_issuer is not None:
            access += f"; OAuth access tokens of {settings.oauth_issuer} for {settings.resource}"
    hint = ""
    if not settings.allowed_hosts and not is_loopback(settings.host):
        hint = (
            "; a client that reaches this machine by another name or address gets 421 until it is listed "
            f"in CORRIGENDA_ALLOWED_HOSTS (e.g. {netloc(socket.gethostname(), settings.port)})"
        )
    sys.stderr.write(
        f"corrigenda: listening on http://{where}{PATH}; {access}; allowed Host: {', '.join(security.allowed_hosts)}{hint}\n"
    )
    for notice in notices:
        sys.stderr.write(f"corrigenda: {notice}\n")
    sys.stderr.flush()
    bounded_server(mcp_app(server, settings, routes), settings.host, settings.port, settings.log_level).run()


def mcp_app(server: MCPServer[Any], settings: Settings, routes: Sequence[BaseRoute] = ()) -> Starlette:
    """The MCP endpoint at PATH, with the Host and Origin checks (and the token, if `server` has one);
    `routes` beside it, after it. The SDK's bearer check guards PATH alone: each of `routes` must
    carry its own checks (the web view's Mount has its Gate, ui_gate.py).

    With OAuth, the RFC 9728 metadata lists as `scopes_supported` the scopes the grants file names
    (`oauth_scope`), possibly none: an MCP client asks for exactly those, and with no list it asks for
    every scope the issuer supports (`openid`, `offline_access`, …), which a client credentials grant
    is refused. The grants file is read again for them: build_server has checked it."""
    app = server.streamable_http_app(
        streamable_http_path=PATH, stateless_http=STATELESS, transport_security=transport_security(settings),
        host=settings.host,
    )  # fmt: skip
    oauth = resource_server(settings)
    if oauth is not None and oauth.resource_server_url is not None:
        scopes = sorted(v for k, v in load_grants(settings.grants, oauth=True).by_claim if k == "oauth_scope")
        (metadata,) = create_protected_resource_routes(oauth.resource_server_url, [oauth.issuer_url], scopes)
        # In the SDK's route's place: it lists AuthSettings.required_scopes, which it requires of every token.
        app.router.routes[:] = [metadata if getattr(r, "path", None) == metadata.path else r for r in app.router.routes]
    for route in app.router.routes:
        if isinstance(route, Route) and route.path == PATH:
            route.app = PostOnly(route.app)
    app.router.routes.extend(routes)
    return app


class PostOnly:
    """The MCP endpoint answers a GET 405, as the spec allows a server that offers no stream of its own
    messages. With no session, nothing could ever be sent on one: the SDK would hold it open, idle, on
    whichever server the balancer chose, until a timeout cut it and the client opened another."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if STATELESS and scope["type"] == "http" and scope["method"] == "GET":
            await Response(status_code=405, headers={"Allow": "POST"})(scope, receive, send)
            return
        await self.app(scope, receive, send)
