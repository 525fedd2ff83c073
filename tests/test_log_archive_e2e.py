"""The log archive end to end on local_cwd: once ``tx run`` returns, a detached copier
copies the logs (the waiting process never loads the archive's code); once the local log
directory is gone (a cleaner of the temporary directory), ``tx log`` prints every byte from
the archive and says so on stderr; ``tx gc`` prunes the archive with the rest."""
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Callable, Dict

Tx = Callable[..., "subprocess.CompletedProcess[str]"]

SCRIPT = r'printf "a\000\377\n"; for i in 1 2 3; do echo "line $i"; done; printf "no newline"'


def _wait_for(path: Path, timeout: float = 60.0) -> None:
    """Until ``path`` exists (the archive's completion mark: the copier's last write)."""
    deadline = time.monotonic() + timeout
    while not path.exists():
        assert time.monotonic() < deadline, f"{path} was not written within {timeout} s"
        time.sleep(0.02)


def test_tx_run_leaves_the_last_copy_to_a_detached_copier(tx_env: Dict[str, str], tmp_path: Path) -> None:
    """`tx run` returns without copying; the copier completes the archive with every byte,
    with no other tx command run, and `tx log` reads it once the local logs are gone."""
    run = subprocess.run([str(Path(tx_env["PATH"].split(":")[0]) / "tx"), "run", "-s", "local_cwd",
                          "utils.sh", "sh", "-c", SCRIPT],
                         cwd=tmp_path, env=tx_env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    assert run.returncode == 0, run.stderr
    handle = run.stdout.split(b"\n", 1)[0].decode()
    archived = Path(tx_env["TX_STATE_DIR"]) / "logs" / "local_cwd" / "tx" / handle.rsplit("/", 1)[1]
    _wait_for(archived / "complete")
    assert (archived / "sh" / "0" / "part-000000").read_bytes() == b"a\x00\xff\nline 1\nline 2\nline 3\nno newline\n"
    shutil.rmtree(re.search(r"logs: (\S+)", run.stderr.decode("utf-8", "replace"))[1])  # type: ignore[index]
    after = subprocess.run([str(Path(tx_env["PATH"].split(":")[0]) / "tx"), "log", handle],
                           cwd=tmp_path, env=tx_env, capture_output=True, timeout=120)
    assert after.returncode == 0 and b"reading the log from tx's log archive" in after.stderr, after.stderr
    assert after.stdout == b"sh/0 a\x00\xff\nsh/0 line 1\nsh/0 line 2\nsh/0 line 3\nsh/0 no newline\n"


WAITER = """
import sys
from tx.runner import get_runner
from tx.specs import AppDef, Role
with get_runner() as runner:
    handle = runner.run(AppDef(name="quiet", roles=[Role(name="echo", image=".", entrypoint="echo", args=["hi"])]),
                        "local_cwd")
    status = runner.wait(handle, wait_interval=0.1)
    print(handle, status.state.name, sorted(m for m in ("fsspec", "tx.runner.archive") if m in sys.modules))
"""


def test_runner_wait_of_a_local_app_never_loads_the_archive(tx_env: Dict[str, str], tmp_path: Path) -> None:
    """Runner.wait of a local app returns without the archive's code (fsspec) loaded in the
    waiting process; the archive is complete all the same."""
    p = subprocess.run([sys.executable, "-c", WAITER], cwd=tmp_path, env=tx_env, capture_output=True, text=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr
    handle, state, loaded = p.stdout.split(" ", 2)
    assert state == "SUCCEEDED" and loaded.strip() == "[]", p.stdout
    archived = Path(tx_env["TX_STATE_DIR"]) / "logs" / "local_cwd" / "tx" / handle.rsplit("/", 1)[1]
    _wait_for(archived / "complete")
    assert (archived / "echo" / "0" / "part-000000").read_bytes() == b"hi\n"


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
    _wait_for(archived / "complete")  # the copier's or `tx log`'s catch-up: whichever ends first
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


#: the log archive's file system in the full-disk test (KiB); its filler leaves 8 KiB free
TMPFS_KIB = 64
#: what the app prints (bytes): more than the free space, so the archive's part is cut short
BIG = 40_000

IN_NAMESPACE = r'''
set -u
mount -t tmpfs -o size={kib}k tmpfs "$ARCH" || exit 97
head -c $(( ({kib} - 8) * 1024 )) /dev/zero > "$ARCH/filler" 2>/dev/null
tx run -s local_cwd utils.sh sh -c "$SCRIPT" > run.out 2> run.err; echo $? > run.rc
(cd "$ARCH" && find . -type f ! -name filler) > full.files
rm "$ARCH/filler"
tx log "$(head -n 1 run.out)" > log.out 2> log.err
(cd "$ARCH" && find . -type f) > back.files
cat "$ARCH"/local_cwd/tx/*/sh/0/part-* > archived.bin
'''


def test_a_full_archive_is_one_line_the_run_unharmed_and_it_catches_up(tx_env: Dict[str, str],
                                                                       tmp_path: Path) -> None:
    """The archive on a really full file system (a tiny tmpfs in a private mount namespace:
    the host sees nothing of it): `tx run` relays every byte, succeeds and says once that
    the archive cannot be written; no part (nor a half-written temporary) is left to be
    read back as if complete; once there is space, the next tx command (`tx log`) catches
    up: the archive holds every byte (read back from the archive: the test above)."""
    import shutil

    from tx.testing.backends import backend_unavailable

    if shutil.which("unshare") is None:
        backend_unavailable("unshare", "unshare is not installed: apt-get install util-linux")
    refused = subprocess.run(["unshare", "-rm", "true"], capture_output=True, text=True, timeout=60)
    if refused.returncode != 0:
        backend_unavailable("unshare", f"unshare -rm is refused here ({refused.stderr.strip()}): "
                            "the kernel or the container forbids user namespaces")
    arch = Path(tx_env["TX_STATE_DIR"]) / "logs"  # the default archive
    arch.mkdir(parents=True)
    # `tx run` makes the last copy itself, so that its warning and what it left are seen when it returns
    (tmp_path / "txconfig").write_text("[tx:logs]\nlast_copy = wait\n")
    env = dict(tx_env, ARCH=str(arch), TXCONFIG=str(tmp_path / "txconfig"), SCRIPT=f'head -c {BIG} /dev/zero | tr "\\000" x; echo; echo done')
    ns = subprocess.run(["unshare", "-rm", "sh", "-c", IN_NAMESPACE.format(kib=TMPFS_KIB)], cwd=tmp_path,
                        env=env, capture_output=True, timeout=120)
    assert ns.returncode == 0, ns.stderr
    read = lambda name: (tmp_path / name).read_bytes()  # noqa: E731
    raw = b"x" * BIG + b"\ndone\n"
    expected = b"sh/0 " + b"x" * BIG + b"\nsh/0 done\n"
    assert read("run.rc") == b"0\n", read("run.err")
    assert read("run.out").split(b"\n", 1)[1] == expected  # the run relayed every byte
    err = read("run.err").decode().splitlines()  # one line says so, then the run's own
    assert len(err) == 2 and "cannot write the log archive at" in err[0] \
        and "No space left on device" in err[0] and err[1].startswith("tx run: SUCCEEDED"), err
    full = read("full.files").decode().split()
    assert not [f for f in full if "/part-" in f or "/.tmp-" in f or f.endswith("/complete")], full  # nothing half-written
    assert read("log.out") == expected and read("log.err") == b""  # from the backend, as always
    handle_dir = read("run.out").split(b"\n", 1)[0].rsplit(b"/", 1)[1].decode()
    assert f"./local_cwd/tx/{handle_dir}/complete" in read("back.files").decode().split()
    assert read("archived.bin") == raw  # caught up: every byte
    assert not any(arch.iterdir())  # the mount was private: the host's directory is untouched
