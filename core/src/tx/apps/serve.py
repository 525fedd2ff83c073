"""Register a model with TorchServe:
``python -m tx.apps.serve --model_path URL --management_api URL [--model_name NAME ...] [--dryrun]``.

The model archive is fetched with fsspec into a temporary directory, served over HTTP on
``--port`` (8222) and registered through the TorchServe management API
(``POST {management_api}/models?url=...``, https://pytorch.org/serve/management_api.html),
which downloads it from this program before answering. ``--dryrun`` prints the plan and
touches nothing. Exits 0 once TorchServe accepted the model, 1 otherwise.
"""
import argparse
import functools
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
from typing import Dict, List, Optional

import fsspec

from tx.components.serve import TORCHSERVE_PARAMS  # the parameters this program forwards

__all__ = ["main", "parse_args", "register", "registration_url", "routable_ip"]


def parse_args(argv: List[str]) -> argparse.Namespace:
    """Parse the command line."""
    parser = argparse.ArgumentParser(prog="python -m tx.apps.serve", description="registers a model with TorchServe")
    parser.add_argument("--model_path", required=True, help="model archive (fsspec URL or path)")
    parser.add_argument("--management_api", required=True, help="TorchServe management API, e.g. http://localhost:8081")
    parser.add_argument("--timeout", type=float, default=60.0, help="seconds to wait for the management API")
    parser.add_argument("--port", type=int, default=8222, help="port to serve the model file on (reachable by TorchServe)")
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


def main(argv: Optional[List[str]] = None) -> int:
    """Run the program; returns the exit status."""
    args = parse_args(sys.argv[1:] if argv is None else argv)
    model_file = f"{args.model_name or 'model'}_{uuid.uuid4().hex[:12]}.mar"
    model_url = f"http://{routable_ip(args.management_api)}:{args.port}/{model_file}"
    if args.dryrun:
        print(f"dryrun: would download {args.model_path} as {model_file}")
        print(f"dryrun: would serve it at {model_url}")
        print(f"dryrun: would POST {registration_url(args, model_url)}", flush=True)
        return 0


    with tempfile.TemporaryDirectory() as tmpdir:
        print(f"downloading {args.model_path}", flush=True)
        try:
            with fsspec.open(args.model_path, "rb") as src, open(os.path.join(tmpdir, model_file), "wb") as dst:
                shutil.copyfileobj(src, dst, 1 << 20)
        except OSError as e:
            print(f"error: cannot fetch the model: {e}", file=sys.stderr)
            return 1
        handler = functools.partial(SimpleHTTPRequestHandler, directory=tmpdir)
        server = ThreadingHTTPServer(("", args.port), handler)
        model_url = f"http://{routable_ip(args.management_api)}:{server.server_port}/{model_file}"
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        try:
            print(f"serving the model at {model_url}", flush=True)
            url = registration_url(args, model_url)
            print(f"POST {url}", flush=True)
            try:
                print(register(url, args.timeout), flush=True)
            except urllib.error.HTTPError as e:
                body = e.read().decode("utf-8", errors="replace")
                print(f"error: TorchServe answered {e.code}: {body}", file=sys.stderr)
                return 1
            except (urllib.error.URLError, OSError) as e:
                print(f"error: cannot reach {args.management_api}: {e}", file=sys.stderr)
                return 1
        finally:
            server.shutdown()
            server.server_close()
    print("model registered", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
