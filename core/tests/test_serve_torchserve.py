"""``serve.torchserve`` against a real TorchServe 0.12 (the session's private server,
``tx.testing.torchserve``): ``tx run -s local_cwd serve.torchserve`` registers a .mar built
here with torch-model-archiver (a TorchScript ``Linear`` y = 2x + 1 and a handler), the
model answers predictions, and a server that is down, a model that cannot be fetched and a
model TorchServe refuses each end the run with one line saying so (TorchServe's own
message for a refusal), without a traceback.
"""
import os
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

from tx.testing.backends import backend_unavailable, free_port, record_stop, require_module, wait_for
from tx.testing.torchserve import TorchServe, executable, unavailable_reason

REPO = Path(__file__).resolve().parents[2]

HANDLER = '''
"""The request body is a JSON list of numbers; the answer, the model's outputs."""
import json
import os

import torch


class Handler:
    def initialize(self, context):
        self.model = torch.jit.load(os.path.join(context.system_properties["model_dir"], "linear.pt"))

    def handle(self, data, context):
        out = []
        for row in data:
            body = row.get("body") or row.get("data")
            if isinstance(body, (bytes, bytearray)):
                body = json.loads(body)
            with torch.no_grad():
                out.append(self.model(torch.tensor(body, dtype=torch.float32).reshape(-1, 1)).reshape(-1).tolist())
        return out
'''

MODEL = textwrap.dedent("""
    import sys
    import torch
    m = torch.nn.Linear(1, 1)
    with torch.no_grad():
        m.weight.fill_(2.0)
        m.bias.fill_(1.0)
    torch.jit.save(torch.jit.script(m), sys.argv[1])
""")


@pytest.fixture(scope="session")
def linear_mar(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A model archive (``linear.mar``): TorchScript y = 2x + 1 and its handler."""
    require_module("torch", "the test model is a TorchScript Linear: pip install torch")
    require_module("model_archiver", "the test builds its .mar: pip install torch-model-archiver==0.12.0")
    d = tmp_path_factory.mktemp("mar")
    subprocess.run([sys.executable, "-c", MODEL, str(d / "linear.pt")], check=True, timeout=120)
    (d / "handler.py").write_text(HANDLER)
    subprocess.run([executable("torch-model-archiver") or "torch-model-archiver", "--model-name", "linear",
                    "--version", "1.0", "--serialized-file", str(d / "linear.pt"), "--handler", str(d / "handler.py"),
                    "--export-path", str(d)], check=True, timeout=120, capture_output=True)
    return d / "linear.mar"


@pytest.fixture
def model_name(torchserve_server: TorchServe):
    """A model name of this test's; unregistered after it (its worker stopped)."""
    name = f"m{uuid.uuid4().hex[:10]}"
    yield name
    torchserve_server.unregister(name)


def serve(run, mar, api, *params: str):
    """``run("run", "-s", "local_cwd", "serve.torchserve", ...)``: ``run`` is the ``tx``
    fixture or :func:`torchx`; the file server on a free port (``port=0``: parallel sessions
    on one machine would collide on 8222)."""
    return run("run", "-s", "local_cwd", "serve.torchserve", "--model_path", str(mar), "--management_api", api,
               "--params", ",".join(("port=0",) + params))


@pytest.fixture
def torchx(tx_env, tmp_path):
    """``torchx ARGS...`` (tx-torchx-compat's command) with the ``tx`` fixture's environment."""
    def run(*args: str):
        return subprocess.run([str(Path(sys.executable).parent / "torchx"), *args], cwd=tmp_path, env=tx_env,
                              capture_output=True, text=True, timeout=120)
    return run


def assert_failed_with(proc, message: str) -> None:
    """The run failed without a traceback; the app's one stderr line (relayed by ``tx run``
    as ``worker/0 ...``) is ``error: MESSAGE``, and the run's closing line quotes it
    (shortened by ``tx run`` where long)."""
    assert proc.returncode != 0, proc
    assert "Traceback" not in proc.stderr + proc.stdout, proc.stderr
    lines = [ln for ln in proc.stderr.splitlines() if ln.strip()]
    assert [ln for ln in lines if ln.startswith("worker/0 ")] == [f"worker/0 error: {message}"], proc.stderr
    quoted = lines[-1].partition("exited with code 1: error: ")[2]
    assert quoted, proc.stderr
    quoted = quoted.rsplit(")", 1)[0]
    assert message.startswith(quoted[:-3] if quoted.endswith("...") else quoted), proc.stderr


def test_register_predict_and_refuse_duplicate(tx, torchserve_server, linear_mar, model_name):
    ts = torchserve_server
    out = serve(tx, f"file://{linear_mar}", ts.management, f"model_name={model_name}", "initial_workers=1",
                "synchronous=true", "timeout=120")
    assert out.returncode == 0, out.stdout + out.stderr
    assert f'TorchServe: Model "{model_name}" Version: 1.0 registered with 1 initial workers' in out.stdout, out.stdout
    assert "model registered" in out.stdout
    assert model_name in ts.models()
    (desc,) = ts.request("GET", f"{ts.management}/models/{model_name}")
    assert [w["status"] for w in desc["workers"]] == ["READY"], desc
    assert ts.request("POST", f"{ts.inference}/predictions/{model_name}", [1, 2, 3]) == [3.0, 5.0, 7.0]

    # the same name again: TorchServe refuses, and its message is the run's one error line
    again = serve(tx, linear_mar, ts.management, f"model_name={model_name}")
    assert_failed_with(again, "TorchServe refused the model (HTTP 409 ConflictStatusException): "
                              f"Model version 1.0 is already registered for model {model_name}")
    assert ts.request("POST", f"{ts.inference}/predictions/{model_name}", [0]) == [1.0]  # still served


@pytest.mark.parametrize("command", ["tx", "torchx"])
def test_server_down_is_one_line(request, linear_mar, command):
    api = f"http://127.0.0.1:{free_port()}"  # nothing listens there
    out = serve(request.getfixturevalue(command), linear_mar, api, "model_name=down")
    assert_failed_with(out, f"cannot reach the TorchServe management API at {api}: Connection refused")
    assert "downloading" not in out.stdout  # checked before the model is fetched


@pytest.mark.parametrize("where", ["missing-file", "http-404", "no-protocol"])
def test_bad_model_url_is_one_line(tx, torchserve_server, tmp_path, where):
    ts = torchserve_server
    path = {"missing-file": str(tmp_path / "nothing.mar"), "http-404": f"{ts.inference}/no-such-model.mar",
            "no-protocol": "nosuchproto://bucket/model.mar"}[where]
    before = ts.models()
    out = serve(tx, path, ts.management, "model_name=badurl")
    expected = {"missing-file": "not found", "http-404": "not found",
                "no-protocol": "Protocol not known: nosuchproto"}[where]
    assert_failed_with(out, f"cannot fetch the model {path}: {expected}")
    assert ts.models() == before


def test_archive_torchserve_cannot_read_is_refused(tx, torchserve_server, tmp_path):
    ts = torchserve_server
    bad = tmp_path / "bad.mar"
    bad.write_bytes(b"this is no model archive")
    before = ts.models()
    out = serve(tx, bad, ts.management)
    assert_failed_with(out, "TorchServe refused the model (HTTP 400 InvalidModelException): Model name is not defined.")
    assert ts.models() == before


def test_management_api_not_a_url_is_one_line(tx, linear_mar):
    out = serve(tx, linear_mar, "127.0.0.1:8081")
    assert_failed_with(out, "--management_api must be an http(s) URL such as http://localhost:8081, not '127.0.0.1:8081'")



def test_start_script_runs_the_same_configuration(tmp_path, torchserve_server):
    """scripts/start-torchserve.sh (by hand) starts TorchServe with the fixture's flags on
    the given ports, a second start finds it running, stop-torchserve.sh ends its process group;
    while the fixture's TorchServe runs too (every port of each is its own: with TorchServe's
    default gRPC ports, 7070 and 7071, the second server failed to bind them and stopped)."""
    reason = unavailable_reason()
    if reason is not None:
        backend_unavailable("torchserve", reason)
    ports = {"TORCHSERVE_PORT": free_port(), "TORCHSERVE_MANAGEMENT_PORT": free_port(),
             "TORCHSERVE_METRICS_PORT": free_port(), "TORCHSERVE_GRPC_PORT": free_port(),
             "TORCHSERVE_GRPC_MANAGEMENT_PORT": free_port()}
    env = {**os.environ, "TORCHSERVE_BASE": str(tmp_path / "ts"), **{k: str(v) for k, v in ports.items()},
           "PATH": f"{Path(executable('torchserve')).parent}{os.pathsep}{os.environ['PATH']}"}
    scripts = REPO / "scripts"
    clear = record_stop(["bash", str(scripts / "stop-torchserve.sh")], env)
    try:
        start = subprocess.run(["bash", str(scripts / "start-torchserve.sh")], env=env, capture_output=True,
                               text=True, timeout=180)
        assert start.returncode == 0, start.stderr
        mgmt = f"http://127.0.0.1:{ports['TORCHSERVE_MANAGEMENT_PORT']}"
        assert start.stdout == (f"export TORCHSERVE_MANAGEMENT_API={mgmt} "
                                f"TORCHSERVE_INFERENCE_API=http://127.0.0.1:{ports['TORCHSERVE_PORT']}\n")
        assert TorchServe.request("GET", f"{mgmt}/models") == {"models": []}
        pid = int((tmp_path / "ts" / "torchserve.pid").read_text())
        again = subprocess.run(["bash", str(scripts / "start-torchserve.sh")], env=env, capture_output=True,
                               text=True, timeout=60)
        assert again.returncode == 0 and "already running" in again.stderr, again.stderr
        assert TorchServe.request("GET", f"{torchserve_server.management}/models")["models"] is not None
    finally:
        subprocess.run(["bash", str(scripts / "stop-torchserve.sh")], env=env, capture_output=True, timeout=60)
        clear()
    wait_for(lambda: not _group_alive(pid), timeout=15, what=f"TorchServe's process group {pid} to end")


def _group_alive(pgid: int) -> bool:
    """True while a process of group ``pgid`` is left (zombies not yet reaped count)."""
    try:
        os.killpg(pgid, 0)
        return True
    except ProcessLookupError:
        return False
