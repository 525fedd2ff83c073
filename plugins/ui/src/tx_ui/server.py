"""The ``tx ui`` web application: Starlette routes over :class:`tx_ui._backend.Backend`,
pages rendered on the server with Jinja2, live updates as server-sent events (sse-starlette).

Pages (every request needs the token, see :class:`TokenGate`):

* ``/``: the apps of every scheduler, newest first; ``?scheduler=``, ``?state=`` (a state
  name or ``active``), ``?q=`` (part of the name or handle) filter it;
* ``/app?handle=H``: an app's state, replicas, why it waits or failed, run options, AppDef, logs;
* ``/sweep?handle=H&metric=M&param=P``: a sweep's trials, and the plot of metric M the
  trials recorded against their parameter P;
* ``POST /cancel``: cancel an app, or every trial of a sweep (form fields ``handle`` and
  ``csrf``);
* ``/events/apps``, ``/events/app?handle=H``, ``/events/sweep?handle=H``,
  ``/events/log?handle=H&role=R&replica=K``: the event streams the pages' script reads (the
  apps table, the status, the trials, a replica's log).

Starlette: https://www.starlette.io/ ; sse-starlette: https://github.com/sysid/sse-starlette ;
server-sent events: https://html.spec.whatwg.org/multipage/server-sent-events.html
"""
from __future__ import annotations

import hashlib
import hmac
import secrets
from http.cookies import SimpleCookie
from typing import Any, Awaitable, Callable, List, MutableMapping, Optional, Sequence
from urllib.parse import parse_qs

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import BaseRoute, Mount, Route
from starlette.staticfiles import StaticFiles

from tx.runner import ACTIVE_STATES
from tx_ui._backend import Backend
from tx_ui._pages import REFRESH_S, ROUTES, UI, Handler, timeline

__all__ = ["ACTIVE_STATES", "REFRESH_S", "TokenGate", "create_app", "new_token", "run_server", "serve_url", "timeline"]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]


def new_token() -> str:
    """A fresh one-time token (48 hex digits, from :mod:`secrets`)."""
    return secrets.token_hex(24)


class TokenGate:
    """ASGI middleware: a request passes only with the token, given as ``?token=``, as the
    ``Authorization: token T`` header or as the cookie the first such request set (so that
    the page's own requests and event streams carry it); others get 403 and one line.

    The cookie's name holds the port (cookies are shared by every port of a host) and it is
    ``HttpOnly; SameSite=Strict``: another site cannot send it.
    """

    def __init__(self, app: ASGIApp, token: str, cookie: str) -> None:
        self.app = app
        self.token = token
        self.cookie = cookie

    def _given(self, scope: Scope) -> tuple:
        query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
        if query.get("token"):
            return query["token"][0], True
        for name, value in scope.get("headers", []):
            if name == b"authorization":
                kind, _, text = value.decode("latin-1").partition(" ")
                if kind.lower() in ("token", "bearer"):
                    return text.strip(), False
            elif name == b"cookie":
                jar: SimpleCookie = SimpleCookie()
                try:
                    jar.load(value.decode("latin-1"))
                except Exception:  # noqa: BLE001 - a cookie header we cannot read carries no token
                    continue
                if self.cookie in jar:
                    return jar[self.cookie].value, False
        return "", False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        given, in_query = self._given(scope)
        if not given or not hmac.compare_digest(given.encode(), self.token.encode()):
            response = PlainTextResponse(
                "tx ui: this page needs the token that `tx ui` printed (open the URL it printed, "
                "with ?token=...)\n", status_code=403)
            await response(scope, receive, send)
            return
        if not in_query:
            await self.app(scope, receive, send)
            return
        cookie = f"{self.cookie}={self.token}; Path=/; HttpOnly; SameSite=Strict".encode("latin-1")

        async def send_with_cookie(message: Message) -> None:
            if message["type"] == "http.response.start":
                message = dict(message)
                message["headers"] = [*message.get("headers", []), (b"set-cookie", cookie)]
            await send(message)

        await self.app(scope, receive, send_with_cookie)


def _endpoint(ui: UI, handler: Handler) -> Callable[[Request], Awaitable[Response]]:
    """``handler`` as a Starlette endpoint, with ``ui`` as its first argument."""

    async def endpoint(request: Request) -> Response:
        return await handler(ui, request)

    endpoint.__name__ = endpoint.__qualname__ = handler.__name__
    return endpoint


def create_app(backend: Backend, token: str, port: int, *, csrf_secret: Optional[bytes] = None) -> ASGIApp:
    """The ``tx ui`` ASGI application: the handlers of :data:`tx_ui._pages.ROUTES` and the
    static files, behind :class:`TokenGate`.

    Args:
        backend: what the pages ask tx through.
        token: the one-time token every request needs.
        port: the port it serves on (names the token's cookie).
        csrf_secret: the key of the cancel form's CSRF token (default: random).
    """
    csrf = hmac.new(csrf_secret or secrets.token_bytes(32), b"tx-ui cancel", hashlib.sha256).hexdigest()
    ui = UI(backend, csrf)
    routes: List[BaseRoute] = [Route(path, _endpoint(ui, handler), methods=list(methods))
                               for path, handler, methods in ROUTES]
    routes.append(Mount("/static", app=StaticFiles(packages=[("tx_ui", "static")]), name="static"))
    return TokenGate(Starlette(routes=routes), token, cookie=f"tx-ui-token-{port}")


def serve_url(host: str, port: int, token: str) -> str:
    """The URL ``tx ui`` prints: ``http://HOST:PORT/?token=T`` (an IPv6 host in brackets)."""
    shown = f"[{host}]" if ":" in host else host
    return f"http://{shown}:{port}/?token={token}"


def run_server(sock: Any, app: ASGIApp, on_ready: Optional[Callable[[], None]] = None) -> None:
    """Serve ``app`` with uvicorn on the bound, listening socket ``sock`` until SIGINT/SIGTERM."""
    config = uvicorn.Config(app, log_level="warning", timeout_graceful_shutdown=2, lifespan="off",
                            access_log=False)
    server = uvicorn.Server(config)
    if on_ready is not None:
        original = server.startup

        async def startup(sockets: Optional[Sequence[Any]] = None) -> None:
            await original(sockets=sockets)
            on_ready()

        server.startup = startup  # type: ignore[method-assign]
    server.run(sockets=[sock])
