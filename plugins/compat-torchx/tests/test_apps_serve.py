"""``torchx.apps.serve.serve``: what AppDefs built by TorchX 0.7.0 run (``python -m
torchx.apps.serve.serve ...``) is tx's upload app, with TorchX's helper names."""
import getpass
import re
import socket
import subprocess
import sys


def test_python_m_torchx_apps_serve_serve_runs_tx_app(tmp_path):
    model = tmp_path / "m.mar"
    model.write_bytes(b"x")
    with socket.socket() as s:  # a port nothing listens on once closed
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    out = subprocess.run([sys.executable, "-m", "torchx.apps.serve.serve", "--model_path", str(model),
                          "--management_api", f"http://127.0.0.1:{port}", "--port", "0"],
                         capture_output=True, text=True, timeout=120)
    assert out.returncode == 1, out
    assert out.stderr == (f"error: cannot reach the TorchServe management API at http://127.0.0.1:{port}: "
                          "Connection refused\n")


def test_torchx_helpers():
    from torchx.apps.serve import serve

    assert serve.get_routable_ip_to("http://127.0.0.1:8081") == "127.0.0.1"
    assert re.fullmatch(rf"{re.escape(getpass.getuser())}_[0-9a-f]{{16}}", serve.rand_id())
    assert "initial_workers" in serve.TORCHSERVE_PARAMS
    assert serve.parse_args(["--model_path", "a", "--management_api", "http://b"]).port == 8222
