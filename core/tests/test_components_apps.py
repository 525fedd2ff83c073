"""The programs the built-in components launch (python -m tx.apps.X), run for real."""
import json
import signal
import subprocess
import sys
import threading
import urllib.parse
import urllib.request
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from tx.apps import booth_main
from tx.apps.process_monitor import TIMEOUT_EXIT_CODE
from tx.testing.backends import require_module


def app(name, *args, **kw):
    return subprocess.run(
        [sys.executable, "-m", f"tx.apps.{name}", *map(str, args)],
        capture_output=True, text=True, timeout=120, **kw,
    )


# -- copy_main -------------------------------------------------------------------------
def test_copy_file(tmp_path):
    src = tmp_path / "src.bin"
    src.write_bytes(bytes(range(256)) * 5000)
    dst = tmp_path / "new" / "dir" / "dst.bin"
    out = app("copy_main", "--src", src, "--dst", dst)
    assert out.returncode == 0, out.stderr
    assert dst.read_bytes() == src.read_bytes()
    assert f"copied {src.stat().st_size} bytes" in out.stdout


def test_copy_file_url(tmp_path):
    src = tmp_path / "a.txt"
    src.write_text("hello")
    out = app("copy_main", "--src", f"file://{src}", "--dst", f"file://{tmp_path}/b.txt")
    assert out.returncode == 0, out.stderr
    assert (tmp_path / "b.txt").read_text() == "hello"


@pytest.mark.parametrize("what, message", [("missing", "does not exist"), ("dir", "is a directory")])
def test_copy_errors(tmp_path, what, message):
    src = tmp_path / "x"
    if what == "dir":
        src.mkdir()
    out = app("copy_main", "--src", src, "--dst", tmp_path / "y")
    assert out.returncode == 1
    assert message in out.stderr
    assert not (tmp_path / "y").exists()


# -- booth_main ------------------------------------------------------------------------
def test_booth_writes_result(tmp_path):
    base = tmp_path / "booth"
    out = app("booth_main", "--x1", "1", "--x2", "3", "--trial_idx", "4", "--tracker_base", base)
    assert out.returncode == 0, out.stderr
    assert json.loads((base / "4.json").read_text()) == {"booth_eval": 0.0, "x1": 1.0, "x2": 3.0}
    out = app("booth_main", "--x1", "0", "--x2", "0", "--tracker_base", base)
    assert out.returncode == 0, out.stderr
    assert booth_main.read_result(str(base), 0)["booth_eval"] == 74.0


def test_booth_function():
    assert booth_main.booth(1, 3) == 0
    assert booth_main.booth(2, 2) == (2 + 4 - 7) ** 2 + (4 + 2 - 5) ** 2


def test_booth_bad_args():
    out = app("booth_main", "--x1", "a", "--x2", "1")
    assert out.returncode == 2 and "invalid float value" in out.stderr


# -- process_monitor -------------------------------------------------------------------
SLEEP = [sys.executable, "-c", "import time; time.sleep(600)"]


def test_monitor_passes_exit_status():
    out = app("process_monitor", "--poll_rate", "0.05", "--", sys.executable, "-c", "import sys; sys.exit(3)")
    assert out.returncode == 3
    assert "command exited with status 3" in out.stdout


def test_monitor_exit_on_file(tmp_path):
    done = tmp_path / "done"
    done.touch()
    out = app("process_monitor", "--poll_rate", "0.05", "--exit_on_file", done, "--", *SLEEP)
    assert out.returncode == 0
    assert f"{done} exists, stopping the command" in out.stdout


def test_monitor_timeout():
    out = app("process_monitor", "--timeout", "0.3", "--poll_rate", "0.05", "--", *SLEEP)
    assert out.returncode == TIMEOUT_EXIT_CODE
    assert "timeout of 0.3s reached" in out.stdout


def test_monitor_start_on_file(tmp_path):
    marker = tmp_path / "ran"
    touch = [sys.executable, "-c", f"open({str(marker)!r}, 'w').close()"]
    out = app("process_monitor", "--timeout", "0.3", "--poll_rate", "0.05",
              "--start_on_file", tmp_path / "start", "--", *touch)
    assert out.returncode == TIMEOUT_EXIT_CODE
    assert "timeout reached before the command started" in out.stdout
    assert not marker.exists()
    (tmp_path / "start").touch()
    out = app("process_monitor", "--poll_rate", "0.05", "--start_on_file", tmp_path / "start", "--", *touch)
    assert out.returncode == 0, out.stdout + out.stderr
    assert marker.exists()


def test_monitor_forwards_sigterm():
    proc = subprocess.Popen(
        [sys.executable, "-m", "tx.apps.process_monitor", "--poll_rate", "0.05", "--", *SLEEP],
        stdout=subprocess.PIPE, text=True,
    )
    try:
        assert proc.stdout.readline().startswith("started ")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) == 128 + signal.SIGTERM
        assert "command exited with status 143" in proc.stdout.read()
    finally:
        proc.kill()
        proc.wait()
        proc.stdout.close()


def test_monitor_errors(tmp_path):
    out = app("process_monitor", "--timeout", "1")
    assert out.returncode == 2 and "no command given" in out.stderr
    out = app("process_monitor", "--poll_rate", "0.05", "--", str(tmp_path / "no-such-binary"))
    assert out.returncode == 127 and "cannot start" in out.stderr


# -- serve -----------------------------------------------------------------------------
def test_serve_dryrun():
    out = app("serve", "--model_path", "s3://bucket/m.mar", "--management_api", "http://127.0.0.1:8081",
              "--model_name", "resnet", "--initial_workers", "2", "--dryrun")
    assert out.returncode == 0, out.stderr
    assert "dryrun: would download s3://bucket/m.mar as resnet_" in out.stdout
    post = [line for line in out.stdout.splitlines() if "would POST" in line][0]
    url = urllib.parse.urlparse(post.split("would POST ", 1)[1])
    assert (url.scheme, url.netloc, url.path) == ("http", "127.0.0.1:8081", "/models")
    query = urllib.parse.parse_qs(url.query)
    assert query["model_name"] == ["resnet"] and query["initial_workers"] == ["2"]
    assert query["url"][0].startswith("http://127.0.0.1:8222/resnet_")


class _FakeTorchServe:
    """A management API that downloads the model from the given url, as TorchServe does."""

    def __init__(self, status: int = 200) -> None:
        self.requests = []
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802
                parsed = urllib.parse.urlparse(self.path)
                query = {k: v[0] for k, v in urllib.parse.parse_qs(parsed.query).items()}
                with urllib.request.urlopen(query["url"], timeout=30) as resp:
                    body = resp.read()
                outer.requests.append((parsed.path, query, body))
                reply = json.dumps({"status": "registered" if status == 200 else "conflict"}).encode()
                self.send_response(status)
                self.send_header("Content-Length", str(len(reply)))
                self.end_headers()
                self.wfile.write(reply)

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.mark.parametrize("status, rc", [(200, 0), (409, 1)])
def test_serve_registers_model(tmp_path, status, rc):
    model = tmp_path / "model.mar"
    model.write_bytes(b"\x00model-bytes" * 1000)
    ts = _FakeTorchServe(status)
    try:
        out = app("serve", "--model_path", model, "--management_api", ts.url, "--port", "0",
                  "--model_name", "mnist", "--batch_size", "4")
    finally:
        ts.close()
    assert out.returncode == rc, out.stdout + out.stderr
    ((path, query, body),) = ts.requests
    assert path == "/models"
    assert query["model_name"] == "mnist" and query["batch_size"] == "4"
    assert query["url"].startswith("http://127.0.0.1:") and query["url"].endswith(".mar")
    assert body == model.read_bytes()
    if rc:
        assert out.stderr == 'error: TorchServe refused the model (HTTP 409): {"status": "conflict"}\n'
    else:
        assert "model registered" in out.stdout


def test_serve_unreachable_api(tmp_path):
    model = tmp_path / "m.mar"
    model.write_bytes(b"x")
    ts = _FakeTorchServe()
    ts.close()  # nothing listens there any more
    out = app("serve", "--model_path", model, "--management_api", ts.url, "--port", "0", "--timeout", "5")
    assert out.returncode == 1
    assert out.stderr == f"error: cannot reach the TorchServe management API at {ts.url}: Connection refused\n"


@pytest.mark.parametrize("code, body, line", [
    (409, '{"code": 409, "type": "ConflictStatusException", "message": "Model version 1.0 is  already registered"}',
     "TorchServe refused the model (HTTP 409 ConflictStatusException): Model version 1.0 is already registered"),
    (401, "Token Authorization failed",
     "TorchServe refused the model (HTTP 401): Token Authorization failed"
     " (TorchServe requires a token: start it with --disable-token-auth)"),
    (405, '{"code": 405, "type": "MethodNotAllowedException", "message": "Requested method is not allowed"}',
     "TorchServe refused the model (HTTP 405 MethodNotAllowedException): Requested method is not allowed"
     " (TorchServe registers models only when started with --enable-model-api)"),
    (500, "", "TorchServe refused the model (HTTP 500): (no message)"),
])
def test_serve_refusal_is_one_line(code, body, line):
    from tx.apps.serve import refusal

    assert refusal(code, body) == line


class _ModelHost:
    """An HTTP server the model is fetched from, answering every GET with ``status``."""

    def __init__(self, status: int) -> None:
        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802
                self.send_response(status)
                self.send_header("Content-Length", "4")
                self.end_headers()
                self.wfile.write(b"oops")

            do_HEAD = do_GET  # noqa: N815

            def log_message(self, *args) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.mark.parametrize("status, reason", [(500, "Internal Server Error"), (404, "not found")])
def test_serve_model_host_error_is_one_line(status, reason):
    """fsspec's HTTP errors (404: FileNotFoundError; else aiohttp's ClientResponseError, no
    OSError) end the program with one line, before anything is registered."""
    require_module("aiohttp", "fsspec's http:// filesystem: pip install aiohttp")
    host, api = _ModelHost(status), _FakeTorchServe()
    try:
        out = app("serve", "--model_path", f"{host.url}/m.mar", "--management_api", api.url, "--port", "0")
    finally:
        host.close()
        api.close()
    assert out.returncode == 1 and "Traceback" not in out.stderr, out.stderr
    (line,) = out.stderr.splitlines()
    assert line.startswith(f"error: cannot fetch the model {host.url}/m.mar: ") and reason in line, line
    assert api.requests == []
