"""The log archive end to end on local_cwd: ``tx run`` copies the logs; once the local log
directory is gone (a cleaner of the temporary directory), ``tx log`` prints every byte from
the archive and says so on stderr; ``tx gc`` prunes the archive with the rest."""
import re
import shutil
import subprocess
from pathlib import Path
from typing import Callable, Dict

Tx = Callable[..., "subprocess.CompletedProcess[str]"]

SCRIPT = r'printf "a\000\377\n"; for i in 1 2 3; do echo "line $i"; done; printf "no newline"'


def test_tx_log_reads_the_archive_once_the_local_logs_are_gone(tx: Tx, tx_env: Dict[str, str],
                                                                tmp_path: Path) -> None:
    def txb(*args: str) -> "subprocess.CompletedProcess[bytes]":  # output as bytes
        return subprocess.run([str(Path(tx_env["PATH"].split(":")[0]) / "tx"), *args],
                              cwd=tmp_path, env=tx_env, capture_output=True, timeout=120)

    run = txb("run", "-s", "local_cwd", "utils.sh", "sh", "-c", SCRIPT)
    assert run.returncode == 0, run.stderr
    handle = run.stdout.split(b"\n", 1)[0].decode()  # the handle is stdout's first line
    log_dir = re.search(r"logs: (\S+)", run.stderr.decode("utf-8", "replace"))[1]  # type: ignore[index]

    def log() -> "subprocess.CompletedProcess[bytes]":
        return txb("log", handle)

    before = log()
    assert before.returncode == 0 and b"archive" not in before.stderr, before.stderr
    expected = b"sh/0 a\x00\xff\nsh/0 line 1\nsh/0 line 2\nsh/0 line 3\nsh/0 no newline\n"
    assert before.stdout == expected
    archived = Path(tx_env["TX_STATE_DIR"]) / "logs" / "local_cwd" / "tx" / handle.rsplit("/", 1)[1]
    assert (archived / "complete").exists()
    shutil.rmtree(log_dir)
    after = log()
    assert after.returncode == 0, after.stderr
    assert after.stdout == expected  # byte for byte, from the archive
    assert b"reading the log from tx's log archive" in after.stderr, after.stderr
    gc = tx("gc", "--keep", "0")
    assert gc.returncode == 0 and handle in gc.stdout, gc.stderr
    assert not archived.exists()
    gone = log()
    assert gone.returncode != 0 and b"archive" not in gone.stdout
