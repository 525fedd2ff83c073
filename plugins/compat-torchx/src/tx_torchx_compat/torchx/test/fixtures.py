"""``torchx.test.fixtures``: TorchX 0.7.0's unittest helpers (``TestWithTmpDir``,
``DistributedTestCase``), written
for tx-torchx-compat from TorchX's documented behaviour."""
import os
import shutil
import signal
import sys
import threading
import tempfile
import unittest
import uuid
from pathlib import Path
from typing import Callable, Dict, Iterable, List, TypeVar, Union

__all__ = ["IS_CI", "IS_MACOS", "DistributedTestCase", "TestWithTmpDir"]

Ret = TypeVar("Ret")

#: whether the tests run on a CI machine (the ``CI`` variable is set, as GitHub Actions does)
IS_CI: bool = bool(os.getenv("CI"))
#: whether the tests run on macOS
IS_MACOS: bool = sys.platform == "darwin"


class TestWithTmpDir(unittest.TestCase):
    """A TestCase with a fresh temporary directory per test, ``self.tmpdir`` (a Path), removed
    in ``tearDown``, and helpers that write files in it by path relative to it."""

    def setUp(self) -> None:
        self.tmpdir: Path = Path(tempfile.mkdtemp(prefix=f"torchx-{type(self).__name__}-"))

    def tearDown(self) -> None:
        shutil.rmtree(self.tmpdir, ignore_errors=True)

    def touch(self, filepath: str) -> Path:
        """Create an empty file ``tmpdir/filepath`` (parents included); returns its path."""
        path = self.tmpdir / filepath
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch()
        return path

    def write(self, filepath: str, content: Iterable[str]) -> Path:
        """Write ``content`` (strings, written as given: no newline is added) to
        ``tmpdir/filepath``; returns its path."""
        path = self.touch(filepath)
        path.write_text("".join(content))
        return path

    def write_shell_script(self, script_path: str, content: List[str]) -> Path:
        """Write an executable bash script ``tmpdir/script_path``: a ``#!/bin/bash`` line,
        then each line of ``content``; returns its path."""
        path = self.touch(script_path)
        path.write_text("\n".join(["#!/bin/bash", *content]) + "\n")
        path.chmod(0o755)
        return path

    def read(self, filepath: Union[str, Path]) -> List[str]:
        """The lines (with their newlines) of ``tmpdir/filepath`` (an absolute path is read
        as is)."""
        with open(self.tmpdir / filepath) as f:
            return f.readlines()


class DistributedTestCase(TestWithTmpDir):
    """A :class:`TestWithTmpDir` that runs a function as a local DDP job:
    ``self.run_ddp(world_size=2, fn=f)(*args)`` runs ``f(*args)`` in ``world_size`` new
    processes (torch's elastic launcher, c10d rendezvous on a free localhost port, no
    restarts; ``fn`` must be picklable: a module-level function) and returns
    ``{rank: return value}``. ``fn`` initialises its process group itself (e.g.
    ``torchx.distributed.init_pg()``), as TorchX documents. Unlike TorchX's, the call puts
    back the test process's handlers of SIGINT, SIGTERM, SIGHUP and SIGQUIT, which torch's
    elastic agent replaces (with its own that raise in the test process) and leaves set.
    """

    def run_ddp(self, world_size: int, fn: Callable[..., Ret]) -> Callable[..., Dict[int, Ret]]:
        """A callable that runs ``fn`` on ``world_size`` local ranks (see the class doc).

        Raises:
            torch.distributed.elastic.multiprocessing.errors.ChildFailedError: (when called)
                a rank failed.
        """
        # deferred: torch only for tests that run a DDP job
        from torch.distributed.launcher.api import LaunchConfig, elastic_launch

        config = LaunchConfig(min_nodes=1, max_nodes=1, nproc_per_node=world_size, run_id=uuid.uuid4().hex,
                              rdzv_backend="c10d", rdzv_endpoint="localhost:0", max_restarts=0,
                              monitor_interval=0.1)
        launch = elastic_launch(config, entrypoint=fn)

        def run(*args: object) -> Dict[int, Ret]:
            if threading.current_thread() is not threading.main_thread():  # no handler to set
                return launch(*args)
            signals = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT)
            saved = {s: signal.getsignal(s) for s in signals}
            try:
                return launch(*args)
            finally:
                for s, handler in saved.items():
                    if handler is not None:  # None: set outside Python, nothing to put back
                        signal.signal(s, handler)
        return run
