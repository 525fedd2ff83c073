"""An in-house scheduler written against TorchX 0.7.0's API and registered under TorchX's
``torchx.schedulers`` entry point group (tests/torchx_project/acme_scheduler) runs under tx
unchanged, through tx-torchx-compat: registered by name, listed by ``tx plugins``, run by
``tx run``, and passing tx's scheduler conformance kit (fresh processes included).

The distribution is installed into a private site directory the way pip installs it (the
module and an ``acme_torchx_scheduler-1.0.0.dist-info`` with its ``entry_points.txt``),
which is put on ``sys.path`` and ``PYTHONPATH`` for this module's tests only.
"""
from __future__ import annotations

import importlib
import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any, Dict, Iterator

import pytest

if importlib.util.find_spec("tx_torchx_compat") is None:  # CI (TX_TEST_REQUIRE_BACKENDS=1) fails instead
    from tx.testing.backends import backends_required

    _why = "tx-torchx-compat is not installed: pip install -e plugins/compat-torchx"
    if backends_required():
        raise RuntimeError(_why)
    pytest.skip(_why, allow_module_level=True)

from tx.plugins import get_registry, set_registry  # noqa: E402
from tx.schedulers.api import Scheduler  # noqa: E402
from tx.schedulers.streams import Stream  # noqa: E402
from tx.testing import SchedulerConformance  # noqa: E402

PROJECT = Path(__file__).resolve().parent / "torchx_project"
BIN = Path(sys.executable).parent


def _install(src: Path, site: Path) -> None:
    """Install the ACME scheduler into ``site`` as pip would (module + dist-info)."""
    site.mkdir(parents=True, exist_ok=True)
    shutil.copy(src / "acme_scheduler.py", site / "acme_scheduler.py")
    info = site / "acme_torchx_scheduler-1.0.0.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-torchx-scheduler\nVersion: 1.0.0\n")
    (info / "entry_points.txt").write_text(
        "[torchx.schedulers]\nacme_local = acme_scheduler:create_scheduler\n\n"
        "[torchx.named_resources]\nacme_gpu = acme_scheduler:acme_gpu\n"
    )
    (info / "top_level.txt").write_text("acme_scheduler\n")
    (info / "RECORD").write_text("")


@pytest.fixture(scope="module")
def acme_installed(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dict[str, str]]:
    """The ACME scheduler installed in a private site dir; a private state and cache dir."""
    base = tmp_path_factory.mktemp("acme")
    site = base / "site"
    _install(PROJECT / "acme_scheduler", site)
    mp = pytest.MonkeyPatch()
    mp.syspath_prepend(str(site))
    mp.setenv("PYTHONPATH", os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH")) if p))
    mp.setenv("ACME_STATE_DIR", str(base / "acme-state"))
    mp.setenv("XDG_CACHE_HOME", str(base / "cache"))
    mp.setenv("TX_STATE_DIR", str(base / "tx-state"))
    importlib.invalidate_caches()
    old = set_registry(None)
    try:
        yield dict(os.environ)
    finally:
        set_registry(old)
        mp.undo()
        sys.modules.pop("acme_scheduler", None)


@pytest.fixture
def acme(acme_installed: Dict[str, str]) -> Iterator[Scheduler[Any]]:
    reg = get_registry().get("schedulers", "acme_local")
    assert reg is not None, "acme_local from the torchx.schedulers entry point is not registered"
    sched = reg.load()("compat-test")
    yield sched
    sched.close()


class TestAcmeConformance(SchedulerConformance):
    """tx's conformance kit against the TorchX-style scheduler, created by name through the
    plugin registry (in this process and in fresh ones) as ``tx status`` would."""

    log_streams = (Stream.STDOUT, Stream.STDERR)
    timeout = 60.0
    appdef_not_stored = "a TorchX-style scheduler: TorchX 0.7's describe rebuilds the roles and keeps no AppDef"

    @pytest.fixture
    def scheduler(self, acme: Scheduler[Any]) -> Scheduler[Any]:
        return acme

    @pytest.fixture
    def cfg(self) -> Dict[str, Any]:
        return {"queue": "dev"}


def test_registered_with_its_distribution(acme_installed: Dict[str, str]) -> None:
    reg = get_registry()
    sched = reg.get("schedulers", "acme_local")
    assert sched is not None and sched.plugin == "torchx_compat"
    assert "acme-torchx-scheduler 1.0.0" in sched.description
    assert "torchx.schedulers" in sched.description
    from tx.specs import named_resources

    res = named_resources["acme_gpu"]
    assert (res.cpu, res.gpu, res.memMB) == (16, 2, 64 * 1024)


def test_scheduler_class_is_the_authors(acme: Scheduler[Any]) -> None:
    import acme_scheduler

    assert isinstance(acme, acme_scheduler.AcmeScheduler)
    assert type(acme).__name__ == "AcmeScheduler"
    assert acme.backend == "acme_local"


def test_tx_plugins_shows_where_it_came_from(acme_installed: Dict[str, str]) -> None:
    p = subprocess.run([str(BIN / "tx"), "plugins", "-v"], env=acme_installed, capture_output=True, text=True,
                       timeout=60)
    assert p.returncode == 0, p.stderr
    assert "torchx_compat (tx-torchx-compat " in p.stdout, p.stdout
    assert ("    scheduler acme_local: acme-torchx-scheduler 1.0.0, TorchX entry point torchx.schedulers\n"
            in p.stdout), p.stdout
    assert ("    named resource acme_gpu: acme-torchx-scheduler 1.0.0, TorchX entry point torchx.named_resources\n"
            in p.stdout), p.stdout


def test_tx_run_and_status_from_the_cli(acme_installed: Dict[str, str], tmp_path: Path) -> None:
    env = {**acme_installed, "HOME": str(tmp_path)}
    run = subprocess.run(
        [str(BIN / "tx"), "run", "-s", "acme_local", "-cfg", "queue=dev,priority=3", "utils.sh", "echo", "hello from acme"],
        env=env, cwd=tmp_path, capture_output=True, text=True, timeout=60,
    )
    assert run.returncode == 0, run.stderr
    handle = run.stdout.strip().splitlines()[-1]
    assert handle.startswith("acme_local://"), run.stdout
    status = subprocess.run([str(BIN / "tx"), "status", handle], env=env, capture_output=True, text=True,
                            timeout=60)
    assert status.returncode == 0, status.stderr
    log = subprocess.run([str(BIN / "tx"), "log", "-f", "--streams", "stdout", handle], env=env,
                         capture_output=True, text=True, timeout=60)
    assert "hello from acme" in log.stdout, (log.stdout, log.stderr)


def test_env_run_option_reaches_the_scheduler(acme: Scheduler[Any], monkeypatch: pytest.MonkeyPatch) -> None:
    """TORCHX_PRIORITY / TX_QUEUE set run options ``priority`` and ``queue`` (a required
    one); an explicit cfg value wins."""
    from tx.runner import Runner
    from tx.specs import AppDef, Role

    app = AppDef("envopt", [Role("one", entrypoint="echo", args=["x"])])
    monkeypatch.setenv("TORCHX_PRIORITY", "7")
    monkeypatch.setenv("TX_QUEUE", "from-env")
    with Runner("compat", {"acme_local": lambda session, **kw: acme}) as runner:
        assert runner.dryrun(app, "acme_local").request.priority == 7
        assert runner.dryrun(app, "acme_local").request.queue == "from-env"
        assert runner.dryrun(app, "acme_local", {"priority": 2}).request.priority == 2
        monkeypatch.setenv("TX_PRIORITY", "9")
        assert runner.dryrun(app, "acme_local").request.priority == 9
