"""Register a model with TorchServe:
``python -m tx.apps.serve --model_path URL --management_api URL [--model_name NAME ...] [--dryrun]``.

The model archive is fetched with fsspec into a temporary directory, served over HTTP on
``--port`` (8222; 0 picks a free port) and registered through the TorchServe management API
(``POST {management_api}/models?url=...``, https://pytorch.org/serve/management_api.html),
which downloads it from this program before answering. ``--dryrun`` prints the plan and
touches nothing. Exits 0 once TorchServe accepted the model; 1 with one line on stderr
(``error: ...``, no traceback) when the management API is no http(s) URL or cannot be
reached (checked before the model is fetched), the model cannot be fetched, the port cannot
be bound, or TorchServe refuses the model (its own message: a name already registered, an
archive it cannot read, a handler that fails to load with ``synchronous=true``).

What this program prints on stdout: the steps, the file server's requests, and TorchServe's
answer.
"""
import argparse
import functools
import json
import os
import shutil
import socket
import sys
import tempfile
import threading
import urllib.error
import urllib.parse
import urllib.request
import uuid
from http.server import SimpleHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, Dict, List, Optional

import fsspec

from tx.components.serve import TORCHSERVE_PARAMS  # the parameters this program forwards

__all__ = ["main", "parse_args", "refusal", "register", "registration_url", "routable_ip", "TORCHSERVE_PARAMS"]


class _Error(Exception):
    """A failure reported as one line on stderr (exit status 1)."""


def parse_args(argv: List[str]) -> argparse.Namespace:
    """Parse the command line (exits 2 with argparse's message on bad options)."""
    parser = argparse.ArgumentParser(prog="python -m tx.apps.serve", description="registers a model with TorchServe")
    parser.add_argument("--model_path", required=True, help="model archive (fsspec URL or path)")
    parser.add_argument("--management_api", required=True, help="TorchServe management API, e.g. http://localhost:8081")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for the management API")
    parser.add_argument("--port", type=int, default=8222,
                        help="port to serve the model file on (reachable by TorchServe; 0: any free port)")
    parser.add_argument("--dryrun", action="store_true", help="print what would be done, do nothing")
    for param in TORCHSERVE_PARAMS:
        parser.add_argument(f"--{param}", help=f"TorchServe registration parameter {param}")
    return parser.parse_args(argv)


def routable_ip(url: str) -> str:
    """The local IP address used to reach the host of ``url`` (no packet is sent);
    the host name when that cannot be determined."""
    parsed = urllib.parse.urlparse(url)
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.connect((parsed.hostname or "localhost", parsed.port or 80))
            return str(s.getsockname()[0])
    except OSError:
        return socket.gethostname()


def registration_url(args: argparse.Namespace, model_url: str) -> str:
    """The management API URL that registers ``model_url`` with the given parameters."""
    payload: Dict[str, str] = {"url": model_url}
    for param in TORCHSERVE_PARAMS:
        value = getattr(args, param)
        if value is not None:
            payload[param] = value
    return f"{args.management_api.rstrip('/')}/models?{urllib.parse.urlencode(payload)}"


def register(url: str, timeout: float) -> str:
    """POST to ``url``; returns the response body.

    Raises:
        urllib.error.HTTPError: TorchServe refused (its message is in the exception body).
        urllib.error.URLError: the management API cannot be reached.
    """
    req = urllib.request.Request(url, data=b"", method="POST")
    with urllib.request.urlopen(req, timeout=timeout) as resp:
        return resp.read().decode("utf-8", errors="replace")


def refusal(code: int, body: str) -> str:
    """One line saying why TorchServe refused: its JSON error's ``message`` (and ``type``)
    where the body is one (``{"code": 409, "type": "ConflictStatusException", "message": ...}``),
    else the body itself, whitespace collapsed."""
    message, kind = body, ""
    try:
        doc: Any = json.loads(body)
    except ValueError:
        doc = None
    if isinstance(doc, dict) and doc.get("message"):
        message, kind = str(doc["message"]), str(doc.get("type") or "")
    message = " ".join(message.split()) or "(no message)"
    hint = ""
    if code == 401:
        hint = " (TorchServe requires a token: start it with --disable-token-auth)"
    elif code == 405:  # TorchServe 0.12 registers models only with --enable-model-api
        hint = " (TorchServe registers models only when started with --enable-model-api)"
    return f"TorchServe refused the model (HTTP {code}{' ' + kind if kind else ''}): {message}{hint}"


def _status(answer: str) -> str:
    """TorchServe's ``status`` sentence from its JSON answer (``{"status": "Model \\"m\\"
    Version: 1.0 registered with 1 initial workers"}``), else the answer, on one line."""
    try:
        doc: Any = json.loads(answer)
    except ValueError:
        doc = None
    text = str(doc["status"]) if isinstance(doc, dict) and doc.get("status") else answer
    return " ".join(text.split())


def _check_api(api: str, timeout: float) -> None:
    """Fail unless ``api`` is an http(s) URL whose host accepts TCP connections."""
    parsed = urllib.parse.urlparse(api)
    if parsed.scheme not in ("http", "https") or not parsed.hostname:
        raise _Error(f"--management_api must be an http(s) URL such as http://localhost:8081, not {api!r}")
    try:
        port = parsed.port or (443 if parsed.scheme == "https" else 80)
    except ValueError as e:
        raise _Error(f"--management_api {api!r}: {e}") from None
    try:
        with socket.create_connection((parsed.hostname, port), timeout=min(timeout, 10.0)):
            pass
    except OSError as e:
        raise _Error(f"cannot reach the TorchServe management API at {api}: {e.strerror or e}") from None


def _fetch(model_path: str, dest: str) -> int:
    """Copy ``model_path`` (fsspec URL or path) to ``dest``; returns its size in bytes."""
    try:
        with fsspec.open(model_path, "rb") as src, open(dest, "wb") as dst:
            shutil.copyfileobj(src, dst, 1 << 20)
    except FileNotFoundError as e:  # fsspec's HTTP filesystem raises it, with only the URL, for any
        # failed HEAD/GET (a 500 too): the cause says which, where there is one
        cause = e.__cause__
        if cause is None or isinstance(cause, FileNotFoundError) or getattr(cause, "status", None) == 404:
            raise _Error(f"cannot fetch the model {model_path}: not found") from None
        raise _Error(f"cannot fetch the model {model_path}: {' '.join(str(cause).split()) or type(cause).__name__}"
                     ) from None
    except Exception as e:  # noqa: BLE001 (any fsspec backend's error: a directory, an unknown protocol, a
        # backend not installed, an HTTP 500 (aiohttp's ClientResponseError), botocore's, gcsfs's ...)
        text = " ".join(str(e).split())
        raise _Error(f"cannot fetch the model {model_path}: {text or type(e).__name__}"
                     f"{f' ({type(e).__name__})' if text and not isinstance(e, (OSError, ImportError, ValueError)) else ''}"
                     ) from None
    return os.path.getsize(dest)


class _QuietHandler(SimpleHTTPRequestHandler):
    """The file server's handler, its request log on stdout (stderr holds only errors)."""

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 (the base class's name)
        print(f"file server: {self.address_string()} {format % args}", flush=True)


def _upload(args: argparse.Namespace, tmpdir: str, model_file: str) -> str:
    """Serve ``model_file`` from ``tmpdir`` and register it; returns TorchServe's answer."""
    try:
        server = ThreadingHTTPServer(("", args.port), functools.partial(_QuietHandler, directory=tmpdir))
    except OSError as e:
        raise _Error(f"cannot serve the model on port {args.port}: {e.strerror or e}") from None
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        model_url = f"http://{routable_ip(args.management_api)}:{server.server_port}/{model_file}"
        print(f"serving the model at {model_url}", flush=True)
        url = registration_url(args, model_url)
        print(f"POST {url}", flush=True)
        try:
            return register(url, args.timeout)
        except urllib.error.HTTPError as e:
            raise _Error(refusal(e.code, e.read().decode("utf-8", errors="replace"))) from None
        except (urllib.error.URLError, OSError) as e:
            reason = getattr(e, "reason", e)
            if isinstance(reason, (TimeoutError, socket.timeout)):
                raise _Error(f"TorchServe at {args.management_api} did not answer within {args.timeout:g} s") from None
            raise _Error(f"cannot reach the TorchServe management API at {args.management_api}: {reason}") from None
    finally:
        server.shutdown()
        server.server_close()


def main(argv: Optional[List[str]] = None) -> int:
    """Run the program; returns the exit status (0 registered, 1 failed, one line on stderr)."""
    args = parse_args(sys.argv[1:] if argv is None else argv)
    model_file = f"{args.model_name or 'model'}_{uuid.uuid4().hex[:12]}.mar"
    if args.dryrun:
        model_url = f"http://{routable_ip(args.management_api)}:{args.port}/{model_file}"
        print(f"dryrun: would download {args.model_path} as {model_file}")
        print(f"dryrun: would serve it at {model_url}")
        print(f"dryrun: would POST {registration_url(args, model_url)}", flush=True)
        return 0
    try:
        _check_api(args.management_api, args.timeout)
        with tempfile.TemporaryDirectory() as tmpdir:
            print(f"downloading {args.model_path}", flush=True)
            size = _fetch(args.model_path, os.path.join(tmpdir, model_file))
            print(f"fetched {size} bytes", flush=True)
            answer = _upload(args, tmpdir, model_file)
    except _Error as e:
        print(f"error: {e}", file=sys.stderr, flush=True)
        return 1
    print(f"TorchServe: {_status(answer)}", flush=True)
    print("model registered", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
