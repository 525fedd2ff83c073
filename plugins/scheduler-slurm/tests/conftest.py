"""Fixtures of the tx-scheduler-slurm tests: a scheduler and the apps a test submits, on
the session's private cluster (the ``slurm_cluster`` and ``memory_clusters`` fixtures of
:mod:`tx_scheduler_slurm.testing`, loaded by the repository's root ``conftest.py``; see there
how the cluster is kept private and where the tests skip); the failing apps of
test_slurm_why_failed.py, submitted on the ``memory_clusters`` at the session's first slurm
test (``why_failed_apps``).
"""
import sys
import time
from pathlib import Path
from typing import Any, Dict, Iterator, List, Optional, Tuple

import pytest

from tx.specs import AppDef, Resource, Role, is_terminal
from tx.testing import find_replica
from tx.testing.backends import environ
from tx_scheduler_slurm import _client
from tx_scheduler_slurm.scheduler import SlurmScheduler, create_scheduler


class Apps:
    """Submits apps, remembers them, and cancels the ones still running at teardown."""

    py = sys.executable

    def __init__(self, sched: SlurmScheduler, job_dir: Path) -> None:
        self.sched = sched
        self.job_dir = job_dir
        self.ids: List[str] = []

    def cfg(self, **extra: Any) -> Dict[str, Any]:
        return {"job_dir": str(self.job_dir), **extra}

    @staticmethod
    def role(name: str, entrypoint: str, args: List[str], replicas: int = 1, **kw: Any) -> Role:
        kw.setdefault("resource", Resource(cpu=1, gpu=0, memMB=64))
        return Role(name, image="", entrypoint=entrypoint, args=args, num_replicas=replicas, **kw)

    def submit(self, roles: List[Role], name: str = "t", **cfg: Any) -> str:
        app_id = self.sched.submit(AppDef(name, roles=roles), self.cfg(**cfg))
        self.ids.append(app_id)
        return app_id

    def wait(self, app_id: str, timeout: float = 180) -> Any:
        desc = self.sched.wait(app_id, timeout=timeout, poll_interval=0.5)
        assert desc is not None and is_terminal(desc.state), desc
        return desc

    replica = staticmethod(find_replica)

    def text(self, app_id: str, role: str, k: int = 0, streams: Optional[str] = "stdout") -> str:
        return "".join(self.sched.log_iter(app_id, role, k, streams=streams))

    def cleanup(self) -> None:
        for app_id in self.ids:
            desc = self.sched.describe(app_id)
            if desc is not None and not is_terminal(desc.state):
                self.sched.cancel(app_id)


@pytest.fixture
def sched(slurm_nodes: List[str]) -> SlurmScheduler:
    return create_scheduler("tx")


@pytest.fixture
def apps(sched: SlurmScheduler, tmp_path: Path) -> Iterator[Apps]:
    a = Apps(sched, tmp_path / "job")
    yield a
    a.cleanup()


MB = Resource(cpu=1, gpu=0, memMB=100)
#: touches 400 MB, four times what its role asks for (memMB=100)
HOG = "import time\nb = bytearray(400 * 2**20)\nfor i in range(0, len(b), 4096): b[i] = 1\ntime.sleep(30)"
CRASH = "import os, signal, sys\nprint('about to crash', file=sys.stderr, flush=True)\nos.kill(os.getpid(), signal.SIGSEGV)"


def _role(name: str, args: List[str], entrypoint: str = sys.executable) -> Role:
    return Role(name, image="", entrypoint=entrypoint, args=args, resource=MB)


#: raises on line 1 once the trainer's program runs (its ``up`` line is in its file), so
#: that srun's SIGTERM finds the trainer running (see test_failing_replica_is_failed_with_its_exit_code)
RAISE = ("import os, time; f = 'slurm-%s-trainer-0.out' % os.environ['TX_APP_ID']; "
         "any(os.path.exists(f) and 'up' in open(f).read() or time.sleep(0.1) for _ in range(600)); "
         "raise ValueError('bad shard 7')")

#: app name -> (roles, run options)
CASES: Dict[str, Tuple[List[Role], Dict[str, Any]]] = {
    "raises": ([_role("trainer", ["-c", "echo up; exec sleep 60"], entrypoint="sh"), _role("worker", ["-c", RAISE])],
               {}),
    "signal": ([_role("crash", ["-c", CRASH])], {}),
    "memory": ([_role("trainer", ["60"], entrypoint="sleep"), _role("hog", ["-c", HOG])], {}),
    "time-limit": ([_role("slow", ["600"], entrypoint="sleep")], {"time": "1"}),
}


class Submitted:
    """The apps of one cluster: its scheduler (created while the cluster is active, so what
    it learns is this cluster's), job directory and app ids by case."""

    def __init__(self, name: str, cluster: Any, job_dir: Path) -> None:
        self.name = name
        self.cluster = cluster
        self.job_dir = job_dir
        with cluster.active():
            self.sched: SlurmScheduler = create_scheduler("tx")
            self.ids = {case: self.sched.submit(AppDef(case, roles=roles), {"job_dir": str(job_dir), **cfg})
                        for case, (roles, cfg) in CASES.items()}
            #: a job of the same user that tx did not submit
            self.plain = _client.run(["sbatch", "--parsable", f"--output={job_dir}/plain-%j.out", "--job-name=sh-0",
                                   "--wrap", "true"]).stdout.strip()

    def forgotten(self, app_id: str) -> bool:
        """Whether slurmctld no longer holds the job (MinJobAge passed)."""
        p = self.cluster.run("squeue", "--noheader", "--states=all", "--format=%i", "--jobs", app_id)
        return p.returncode != 0 and "Invalid job id" in p.stderr

    def final(self, case: str, timeout: float = 240) -> Any:
        """The app's description once it ended; on the accounting cluster, once slurmctld
        forgot it too, so that it comes from sacct."""
        app_id = self.ids[case]
        deadline = time.monotonic() + timeout
        # every look asks Slurm (no shared snapshot of the status plane, docs/scale.md): a
        # snapshot read before the purge would say squeue after ``forgotten`` said gone
        with self.cluster.active(), environ({"TX_STATUS_MAX_AGE": "0"}):
            while True:
                # forgotten first, then describe: slurmctld forgets once and for all, so a
                # describe after it comes from sacct (the other order could return a squeue
                # answer read just before the purge)
                gone = self.name != "accounting" or self.forgotten(app_id)
                desc = self.sched.describe(app_id)
                done = desc is not None and is_terminal(desc.state)
                if done and gone:
                    return desc
                assert time.monotonic() < deadline, f"{case} ({app_id}) did not end: {desc}"
                time.sleep(0.5)


@pytest.fixture(scope="session")
def why_failed_apps(memory_clusters: Dict[str, Any],
                    tmp_path_factory: pytest.TempPathFactory) -> Iterator[Dict[str, Submitted]]:
    """The four failing apps of test_slurm_why_failed.py, submitted on both memory clusters
    at once (their waits overlap), by cluster name. Session-wide, and requested by
    :func:`_why_failed_apps_early` at the first slurm test of the session that also runs
    those tests: the time limit's wait (1 minute, and slurmctld checks limits every 30 s)
    then passes while the other slurm tests run, instead of in test_slurm_why_failed.py."""
    subs = {name: Submitted(name, cluster, tmp_path_factory.mktemp(name.replace(" ", "-")))
            for name, cluster in memory_clusters.items()}
    yield subs
    for sub in subs.values():
        with sub.cluster.active():
            for app_id in sub.ids.values():
                desc = sub.sched.describe(app_id)
                if desc is not None and not is_terminal(desc.state):
                    sub.sched.cancel(app_id)


@pytest.fixture(scope="session")
def _runs_why_failed(request: pytest.FixtureRequest) -> bool:
    """Whether this session runs a test of test_slurm_why_failed.py (after -k, -m and the
    like: deselected tests are not in ``session.items``)."""
    return any(item.path.name == "test_slurm_why_failed.py" for item in request.session.items)


@pytest.fixture(autouse=True)
def _why_failed_apps_early(request: pytest.FixtureRequest, _runs_why_failed: bool) -> None:
    """At a slurm test of a session that runs test_slurm_why_failed.py, submit its apps
    (:func:`why_failed_apps`, once per session) before the test runs; a session of only
    tests not marked slurm starts no cluster."""
    if _runs_why_failed and request.node.get_closest_marker("slurm") is not None:
        request.getfixturevalue("why_failed_apps")


@pytest.fixture
def sbatch_calls(monkeypatch) -> List[List[str]]:
    """The Slurm commands tx runs (counted, then run for real)."""
    calls: List[List[str]] = []
    real = _client.run

    def run(argv: Any, *a: Any, **kw: Any) -> Any:
        calls.append(list(argv))
        return real(argv, *a, **kw)

    monkeypatch.setattr(_client, "run", run)
    return calls
