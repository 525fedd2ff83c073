"""The ``torchx`` command of tx-torchx-compat, and what TorchX projects run through it and
through ``tx``: component files named like modules, nested log directories."""
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, List

BIN_DIR = Path(sys.executable).parent
#: what the ``torchx`` console script runs (as conftest's CONSOLE)
TORCHX = "import sys\nfrom tx_torchx_compat.torchx.cli.main import console\nsys.exit(console())"

HELLO = '''
import torchx.specs as specs


def hello(who: str = "world") -> specs.AppDef:
    """Says hello.

    Args:
        who: whom to greet
    """
    return specs.AppDef("hello", [specs.Role("greeter", image="img", entrypoint="echo", args=["hello", who])])
'''


def test_version_help_and_exit_codes(py: Any, env: Any) -> None:
    v = py("--version", torchx=True)
    assert (v.returncode, v.stdout) == (0, "torchx-0.7.0\n"), v.stderr
    bare = py(torchx=True)  # TorchX: the help on stdout, exit 1
    assert bare.returncode == 1 and bare.stdout.startswith("usage: torchx"), bare
    assert "run" in bare.stdout and "Traceback" not in bare.stderr
    usage = py("status", torchx=True)
    assert usage.returncode == 2 and "torchx status: error:" in usage.stderr, usage.stderr
    missing = py("status", "local_cwd://torchx/nope-123", torchx=True)
    assert missing.returncode == 1 and missing.stderr.startswith("torchx status: error:"), missing.stderr
    # python -m torchx.cli.main (TorchX's module) runs the same command
    m = subprocess.run([sys.executable, "-m", "torchx.cli.main", "--version"], capture_output=True, text=True,
                       env=env, timeout=60)
    assert (m.returncode, m.stdout) == (0, "torchx-0.7.0\n"), m.stderr


def test_unknown_cfg_key_warns_under_torchx_and_fails_under_tx(cli: Any) -> None:
    p = cli("run", "--dryrun", "-s", "local_cwd", "-cfg", "prepend_cwd=True,bogus_key=1", "utils.echo", "--msg", "hi")
    if cli.name == "torchx":
        assert p.returncode == 0, p.stderr
        assert "torchx run: warning: -cfg bogus_key is not a run option of local_cwd" in p.stderr, p.stderr
        assert "=== SCHEDULER REQUEST ===" in p.stdout
    else:
        assert p.returncode == 1 and "unknown run option 'bogus_key'" in p.stderr, p.stderr


def test_torchx_cli_cmds_entry_point(py: Any, install: Any) -> None:
    install("acme-cmds", "1.0", {"acme_cmds.py": (
        "class CmdHi:\n"
        "    def add_arguments(self, subparser):\n"
        "        subparser.add_argument('--who', default='you')\n"
        "    def run(self, args):\n"
        "        print('hi', args.who)\n")},
        "[torchx.cli.cmds]\nhi = acme_cmds:CmdHi\n")
    p = py("hi", "--who", "me", torchx=True)
    assert (p.returncode, p.stdout) == (0, "hi me\n"), p.stderr


def test_component_file_named_torchx_beside_torchxconfig(cli: Any, tmp_path: Path) -> None:
    """A component file ``proj/torchx.py`` (named after the package it imports), picked by
    ``[cli:run] component`` of ``.torchxconfig``."""
    (tmp_path / "proj").mkdir()
    (tmp_path / "proj" / "torchx.py").write_text(HELLO)
    (tmp_path / ".torchxconfig").write_text("[cli:run]\ncomponent = proj/torchx.py:hello\n")
    p = cli("run", "--dryrun", "-s", "local_cwd", "--", "--who", "torchft")
    assert p.returncode == 0, p.stderr
    assert "- hello\n  - torchft\n" in p.stdout, p.stdout


def test_component_file_named_yaml_does_not_shadow_pyyaml(cli: Any, tmp_path: Path) -> None:
    (tmp_path / "yaml.py").write_text(HELLO)
    p = cli("run", "--dryrun", "-s", "local_cwd", "yaml.py:hello")
    assert p.returncode == 0, p.stderr
    assert "entrypoint: echo" in p.stdout  # the dryrun's YAML, written by PyYAML


def test_component_file_leaves_sys_path_alone(py: Any, tmp_path: Path) -> None:
    (tmp_path / "comps").mkdir()
    (tmp_path / "comps" / "logging.py").write_text(HELLO)
    (tmp_path / "comps" / "helpers.py").write_text("WHO = 'sibling'\n")
    (tmp_path / "comps" / "c.py").write_text(HELLO.replace('who: str = "world"', "who: str = helpers.WHO")
                                             .replace("import torchx.specs as specs", "import helpers\nimport torchx.specs as specs"))
    p = py("import sys\nbefore = list(sys.path)\n"
           "from torchx.specs.finder import get_component\n"
           "for f in ('comps/logging.py:hello', 'comps/c.py:hello'):\n"
           "    app = get_component(f).fn()\n"
           "    print(app.roles[0].args)\n"
           "import logging\n"
           "assert sys.path == before, (before, sys.path)\n"
           "print(hasattr(logging, 'getLogger'))\n", cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines() == ["['hello', 'world']", "['hello', 'sibling']", "True"], p.stdout


def test_nested_log_dir_is_created(cli: Any, tmp_path: Path) -> None:
    dry = cli("run", "--dryrun", "-s", "local_cwd", "-cfg", "log_dir=log/avazu/w2_p1_16k", "utils.echo")
    assert dry.returncode == 0, dry.stderr
    assert not (tmp_path / "log").exists()
    p = cli("run", "-s", "local_cwd", "-cfg", "log_dir=log/avazu/w2_p1_16k", "utils.echo", "--msg", "nested")
    assert p.returncode == 0, p.stderr
    handle = p.stdout.split()[0]
    app_id = handle.rsplit("/", 1)[1]
    logs = list((tmp_path / "log" / "avazu" / "w2_p1_16k").glob(f"*/{app_id}/echo/0/stdout.log"))
    assert len(logs) == 1 and logs[0].read_text() == "nested\n", (handle, logs)


def test_component_option_prefixes(cli: Any, tmp_path: Path) -> None:
    (tmp_path / "train.py").write_text("print('training')\n")
    p = cli("run", "--dryrun", "-s", "local_cwd", "dist.ddp", "--script", "train.py", "--j", "1x1",
            "--mount", f"type=bind,src={tmp_path},dst={tmp_path}")  # local_cwd honours src == dst only
    assert p.returncode == 0, p.stderr
    assert f"dst_path: {tmp_path}" in p.stdout, p.stdout
    bad = cli("run", "--dryrun", "-s", "local_cwd", "dist.ddp", "--script", "train.py", "--rdzv", "x")
    assert bad.returncode == 2 and "Traceback" not in bad.stderr
    assert bad.stderr.count("\n") == 1 and "ambiguous option: --rdzv could match --rdzv_port" in bad.stderr, bad.stderr


def test_torchx_configure_writes_torchxconfig(py: Any, tmp_path: Path) -> None:
    """``torchx configure`` writes ``./.torchxconfig`` and replaces one that exists, as
    TorchX 0.7.0 does; no ``.txconfig`` appears (it would hide ``.torchxconfig`` from tx)."""
    (tmp_path / ".torchxconfig").write_text("[local_cwd]\nlog_dir = old\n")
    p = py("configure", "-s", "local_cwd", torchx=True)
    assert p.returncode == 0, p.stderr
    text = (tmp_path / ".torchxconfig").read_text()
    assert "[local_cwd]" in text and "log_dir = old" not in text, text
    assert not (tmp_path / ".txconfig").exists()
    # TorchX's command class does the same where a project calls it
    (tmp_path / ".torchxconfig").unlink()
    c = py("import argparse\nfrom torchx.cli.cmd_configure import CmdConfigure\n"
           "cmd = CmdConfigure(); parser = argparse.ArgumentParser(); cmd.add_arguments(parser)\n"
           "cmd.run(parser.parse_args(['-s', 'local_cwd']))\n")
    assert c.returncode == 0, c.stderr
    assert (tmp_path / ".torchxconfig").is_file() and not (tmp_path / ".txconfig").exists()


def test_a_reader_that_leaves_is_no_error_as_under_tx(env: Any, tmp_path: Path) -> None:
    """`torchx runopts | head -1` through a real pipe of 4 KiB (Linux's smallest): runopts
    prints about 15 KB, so the command is still writing when the reader closes the pipe.
    As under `tx`: exit 0 and nothing on stderr (it was a BrokenPipeError traceback)."""
    import fcntl

    for cmd in ([str(BIN_DIR / "tx")], [sys.executable, "-P", "-c", TORCHX]):
        r, w = os.pipe()
        fcntl.fcntl(w, 1031, 4096)  # F_SETPIPE_SZ
        p = subprocess.Popen([*cmd, "runopts"], stdout=w, stderr=subprocess.PIPE, env=env, cwd=tmp_path)
        os.close(w)
        with os.fdopen(r, "rb") as reader:
            first = reader.readline()  # the reader leaves after one line
        assert p.stderr is not None
        err = p.stderr.read().decode()
        assert (first.endswith(b":\n"), p.wait(timeout=60), err) == (True, 0, ""), (cmd, first)


SAME_PROCESS = '''
import json, sys
from tx.cli import cmd_run
from tx.cli.main import main as tx_main
from tx_torchx_compat.torchx.cli.main import run_main as torchx_main

rcs = [torchx_main(["run", "-s", "local_cwd", "-cfg", "bogus_key=1", "utils.echo", "--msg", "from-torchx"])]
rcs.append(tx_main(["run", "-s", "local_cwd", "-cfg", "bogus_key=1", "utils.echo", "--msg", "refused"]))
rcs.append(tx_main(["run", "-s", "local_cwd", "utils.echo", "--msg", "from-tx"]))
sys.stdout.flush()
print(json.dumps({"rcs": rcs, "defaults": [cmd_run.UNKNOWN_CFG_KEYS, cmd_run.RELAY_STDOUT]}))
'''


def test_torchx_run_then_tx_run_in_one_process_each_keep_their_behaviour(py: Any) -> None:
    """`torchx run` warns about an unknown -cfg key and relays the job's stdout to stderr;
    a `tx run` after it in the same process still refuses the key and relays to stdout, and
    tx's defaults are what they were (the compat command passes its behaviour as arguments)."""
    p = py(SAME_PROCESS)
    assert p.returncode == 0, p.stderr
    import json

    result = json.loads(p.stdout.strip().splitlines()[-1])
    assert result == {"rcs": [0, 1, 0], "defaults": ["error", "stdout"]}, (p.stdout, p.stderr)
    assert "torchx run: warning: -cfg bogus_key is not a run option of local_cwd" in p.stderr, p.stderr
    assert "unknown run option 'bogus_key'" in p.stderr, p.stderr
    assert "from-torchx" in p.stderr and "from-torchx" not in p.stdout, (p.stdout, p.stderr)
    assert "from-tx" in p.stdout and "refused" not in p.stdout, p.stdout


def test_the_compat_package_sets_no_attribute_of_a_tx_module() -> None:
    """Compatibility reaches tx-core as arguments: no module of tx-torchx-compat assigns an
    attribute of a tx module it imported (``cmd_run.UNKNOWN_CFG_KEYS = ...``) or setattr()s one."""
    import ast

    import tx_torchx_compat

    bad = []
    for path in sorted(Path(tx_torchx_compat.__file__).parent.rglob("*.py")):
        tree = ast.parse(path.read_text(), str(path))
        tx_names = {"tx"}
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and (node.module or "").split(".")[0] == "tx" and not node.level:
                tx_names |= {a.asname or a.name for a in node.names}
            elif isinstance(node, ast.Import):
                tx_names |= {(a.asname or a.name).split(".")[0] for a in node.names if a.name.split(".")[0] == "tx"}

        def root(expr: ast.AST) -> str:
            while isinstance(expr, ast.Attribute):
                expr = expr.value
            return expr.id if isinstance(expr, ast.Name) else ""

        for node in ast.walk(tree):
            targets: List[ast.AST] = []
            if isinstance(node, ast.Assign):
                targets = [t for tgt in node.targets for t in (tgt.elts if isinstance(tgt, ast.Tuple) else [tgt])]
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
                targets = [node.target]
            elif isinstance(node, ast.Call) and isinstance(node.func, ast.Name) and node.func.id in ("setattr", "delattr"):
                targets = [ast.Attribute(value=node.args[0], attr="?")] if node.args else []
            for t in targets:
                if isinstance(t, ast.Attribute) and root(t) in tx_names:
                    bad.append(f"{path.name}:{node.lineno}: {ast.unparse(t)}")
    assert bad == []


def test_a_run_from_another_directory_gets_its_own_checkpoint_location(cli: Any, tmp_path: Path) -> None:
    """Issue 41, item 1, through ``torchx`` as through ``tx``: the same app run again, from
    another directory, is a new run with a fresh ``TX_CHECKPOINT_DIR`` (before: one location
    per app name, ``<root>/<session>/<app name>``, so the second run resumed the first's
    checkpoints); each run's location is under tx's checkpoint root and named after the app."""
    seen = []
    for where in ("a", "b"):
        (tmp_path / where).mkdir()
        p = cli("run", "-s", "local_cwd", "utils.sh", "--", "sh", "-c", 'echo "ckpt=$TX_CHECKPOINT_DIR"',
                cwd=tmp_path / where)
        assert p.returncode == 0, p.stderr
        said = [ln.split("ckpt=", 1)[1] for ln in (p.stdout + p.stderr).splitlines() if "ckpt=" in ln]
        assert len(said) == 1 and said[0], (p.stdout, p.stderr)
        seen.append(said[0])
    assert seen[0] != seen[1], seen
    root = tmp_path / "state" / "checkpoints" / "tx"
    assert all(Path(s).parent == root and Path(s).name.startswith("sh-") for s in seen), seen
