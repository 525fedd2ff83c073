"""What ``tx run`` of a local app loads while the user waits: not the log archive's code
(fsspec, asyncio: its last copy is made by a detached process, docs/recovery.md), and none
of the standard library modules it has no use for on that path (shutil with zlib, bz2 and
lzma, which argparse loads for the terminal's width; socket; tempfile; an entry point scan
once the plugin cache is warm; hashlib, subprocess and the records of runs with failover).
Each run is a real ``tx run`` on local_cwd, in a fresh interpreter, with the test's own
state and caches."""
import json
import subprocess
import sys
from pathlib import Path
from typing import Dict

#: modules the waiting ``tx run`` process must not load
NOT_ON_THE_PATH = ("fsspec", "asyncio", "shutil", "bz2", "lzma", "socket", "tempfile", "importlib.metadata",
                   "urllib.parse", "ipaddress", "subprocess", "secrets", "hashlib", "tx.runner.failover")

PROBE = """
import json, sys
from tx.cli.main import main
rc = main(["run", "-s", "local_cwd", "utils.echo", "--msg", "hi"])
print(json.dumps([rc, sorted(m for m in sys.modules if m in {names!r})]))
"""


def test_tx_run_of_a_local_app_loads_no_archive_and_no_unused_stdlib(tx_env: Dict[str, str], tmp_path: Path) -> None:
    env = dict(tx_env, XDG_CACHE_HOME=str(tmp_path / "cache"))
    code = PROBE.format(names=NOT_ON_THE_PATH)
    for attempt in ("cold", "warm"):  # the first run fills the entry point cache
        p = subprocess.run([sys.executable, "-c", code], cwd=tmp_path, env=env, capture_output=True, text=True,
                           timeout=120)
        assert p.returncode == 0, p.stderr
        rc, loaded = json.loads(p.stdout.strip().splitlines()[-1])
        assert rc == 0 and "echo/0 hi" in p.stdout, p.stdout + p.stderr
    assert loaded == [], f"tx run loaded {loaded} while the user waited"
