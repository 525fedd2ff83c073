"""Real notebooks, executed headless by nbclient on an ipykernel kernel: ``%load_ext
tx_notebook``, ``%%workspacefile`` cells, ``%tx run`` on local_cwd; and the pieces
(memory workspace copy, local_cwd/local_dir running in it, torchx.notebook)."""
from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path
from typing import Dict, List

import fsspec
import pytest

from tx.runner import Runner
from tx.specs import AppDef, Role
from tx.testing.backends import require_module
from tx.workspace import WorkspaceError, localize_workspace

nbformat = require_module("nbformat", "the notebook tests write notebooks: pip install nbformat")
nbclient = require_module("nbclient", "the notebook tests execute notebooks headless: pip install nbclient")
require_module("ipykernel", "the notebook tests run a real kernel: pip install ipykernel")

TRAIN = "import os\nprint('train cwd', os.path.basename(os.getcwd())[:12])\nprint(open('data/msg.txt').read())\n"
FAIL = "print('about to fail')\nraise SystemExit(3)\n"


def _execute(cells: List[str], env: Dict[str, str], cwd: Path) -> List[str]:
    """Execute a notebook of code ``cells`` (kernel env ``env``) and return each cell's
    output text (streams, results and errors joined)."""
    nb = nbformat.v4.new_notebook(cells=[nbformat.v4.new_code_cell(c) for c in cells])
    path = cwd / "t.ipynb"
    nbformat.write(nb, str(path))
    nb = nbformat.read(str(path), as_version=4)
    client = nbclient.NotebookClient(nb, timeout=120, kernel_name="python3",
                                     resources={"metadata": {"path": str(cwd)}}, allow_errors=True)
    handlers = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    try:
        client.execute(env=env)
    finally:  # nbclient's asyncio loop.remove_signal_handler leaves SIGTERM at SIG_DFL
        for s, handler in handlers.items():
            signal.signal(s, handler)
    out = []
    for cell in nb.cells:
        text = ""
        for o in cell.get("outputs", []):
            if o["output_type"] == "stream":
                text += o["text"]
            elif o["output_type"] == "error":
                text += f"{o['ename']}: {o['evalue']}\n"
            else:
                text += o.get("data", {}).get("text/plain", "")
        out.append(text)
    return out


def test_a_notebook_runs_its_workspace_on_local_cwd_and_shows_logs_and_state(tx_env, tmp_path):
    env = {**tx_env, "PYTHONPATH": os.environ.get("PYTHONPATH", "")}  # the kernel imports this tree
    outs = _execute([
        "%load_ext tx_notebook",
        "%%workspacefile train.py\n" + TRAIN,
        "%%workspacefile data/msg.txt\nhello from the workspace",
        "%tx run -s local_cwd utils.python --script train.py",
        "%%workspacefile fail.py\n" + FAIL,
        "%tx run -s local_cwd utils.python --script fail.py",
        "%tx run -s nosuch utils.python --script train.py",
        "from torchx.notebook import get_workspace\nprint(get_workspace())",
    ], env, tmp_path)
    assert outs[0] == ""
    assert "Added train.py to tx workspace memory://torchx-workspace/" in outs[1]
    ok = outs[3]
    # the job ran in the workspace's copy (not the notebook's directory) and read its data file
    assert "python/0 train cwd tx-workspace" in ok and "python/0 hello from the workspace" in ok, ok
    assert "tx run: SUCCEEDED after" in ok.splitlines()[-1], ok
    bad = outs[5]
    assert "python/0 about to fail" in bad, bad
    assert "tx run: FAILED after" in bad and "exited with code 3" in bad.splitlines()[-1], bad
    assert outs[6].strip().startswith("tx run: error: unknown scheduler 'nosuch'") and "\n" not in outs[6].strip()
    assert outs[7].strip() == "memory://torchx-workspace/"
    # the job's files are the workspace's; the notebook's directory got none of them
    assert not (tmp_path / "train.py").exists()



def test_a_notebook_runs_its_workspace_on_local_docker_as_an_image(podman_engine, tx_env, tmp_path):
    """The docker workspace kind builds the notebook's workspace into the job's image
    (on the session's private podman engine; skipped where it cannot start)."""
    env = {**tx_env, **podman_engine, "PYTHONPATH": os.environ.get("PYTHONPATH", "")}
    outs = _execute([
        "%load_ext tx_notebook",
        "%%workspacefile msg.txt\nin the image",
        "%tx run -s local_docker -cfg quiet=True utils.sh --image localhost/busybox:tx cat /msg.txt",
        "%tx run -s local_docker -cfg quiet=True utils.sh --image localhost/busybox:tx cat /nope.txt",
    ], env, tmp_path)
    assert "sh/0 in the image" in outs[2] and "tx run: SUCCEEDED after" in outs[2].splitlines()[-1], outs[2]
    assert "tx run: FAILED after" in outs[3].splitlines()[-1] and "nope.txt" in outs[3], outs[3]

def test_memory_workspace_is_copied_to_a_temporary_directory_and_bad_ones_are_one_line(tmp_path, monkeypatch):
    monkeypatch.setenv("TMPDIR", str(tmp_path))
    import tempfile
    monkeypatch.setattr(tempfile, "tempdir", None)
    fs = fsspec.filesystem("memory")
    fs.pipe({"/ws-copy/a.py": b"1", "/ws-copy/sub/b.txt": b"2"})
    d = Path(localize_workspace("memory://ws-copy/"))
    assert d.parent == tmp_path and d.name.startswith("tx-workspace-")
    assert sorted(p.relative_to(d).as_posix() for p in d.rglob("*") if p.is_file()) == ["a.py", "sub/b.txt"]
    assert localize_workspace("file:///x/y") == "/x/y" and localize_workspace("rel/dir") == "rel/dir"
    with pytest.raises(WorkspaceError, match="is not a directory with files"):
        localize_workspace("memory://nothing-here/")
    with pytest.raises(WorkspaceError, match="^workspace 'nosuchproto://x': "):
        localize_workspace("nosuchproto://x")
    assert [p.name for p in tmp_path.iterdir()] == [d.name]  # the refused ones left nothing


@pytest.mark.parametrize("scheduler", ["local_cwd", "local_dir"])
def test_local_schedulers_run_the_first_role_in_the_workspace(scheduler, tx_env, tmp_path, monkeypatch):
    for k in ("TX_STATE_DIR", "TMPDIR"):
        monkeypatch.setenv(k, tx_env[k])
    fs = fsspec.filesystem("memory")
    fs.pipe({f"/ws-{scheduler}/run.sh": b"pwd; cat msg\n", f"/ws-{scheduler}/msg": b"from-ws\n"})
    roles = [Role("a", image=str(tmp_path), entrypoint="bash", args=["run.sh"]),
             Role("b", image=str(tmp_path), entrypoint="pwd")]
    with Runner("nbt") as runner:
        info = runner.dryrun(AppDef("ws", roles), scheduler, {}, workspace=f"memory://ws-{scheduler}/")
        handle = runner.schedule(info)
        status = runner.wait(handle, wait_interval=0.2)
        assert status is not None and status.state.name == "SUCCEEDED", status
        a = "".join(runner.log_lines(handle, "a", 0))
        b = "".join(runner.log_lines(handle, "b", 0))
    ws_dir = a.splitlines()[0]
    assert os.path.basename(ws_dir).startswith("tx-workspace-") and a.splitlines()[1] == "from-ws"
    # only the first role gets the workspace (as every workspace kind)
    assert b.strip() == (str(tmp_path) if scheduler == "local_dir" else os.getcwd())


def test_torchx_notebook_without_tx_notebook_says_what_to_install():
    code = ("import sys; sys.modules['tx_notebook'] = None\n"
            "try:\n    import torchx.notebook\nexcept ModuleNotFoundError as e:\n    print(e)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.stdout.strip().endswith("pip install tx-notebook") and len(out.stdout.strip().splitlines()) == 1, out


def test_importing_torchx_notebook_in_a_kernel_registers_workspacefile(tx_env, tmp_path):
    """As TorchX's module: ``import torchx.notebook`` alone gives ``%%workspacefile``."""
    env = {**tx_env, "PYTHONPATH": os.environ.get("PYTHONPATH", "")}
    outs = _execute([
        "import torchx.notebook",
        "%%workspacefile pkg/a.py\nx = 1",
        "import fsspec\nfrom torchx.notebook import get_workspace\n"
        "print(fsspec.open(get_workspace() + 'pkg/a.py', 'rt').open().read())",
    ], env, tmp_path)
    assert "Added pkg/a.py to tx workspace" in outs[1] and outs[2].strip() == "x = 1", outs
