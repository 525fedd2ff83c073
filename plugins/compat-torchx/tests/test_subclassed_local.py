"""A scheduler that subclasses TorchX's local scheduler as persistent-local plugins do
(its own ``__init__`` without the base's, its own ``_submit_dryrun`` over
``_to_popen_request``, the base's ``schedule``/``describe``, a job table saved to a file,
``log_iter`` over ``LogIterator``), installed through TorchX's entry-point group and run
with ``tx run`` and ``torchx run``; and the names such projects import."""
from pathlib import Path
from typing import Any

PERSISTENT = '''
import json
import os
from dataclasses import asdict
from typing import Optional

from torchx.cli.cmd_log import _prefix_line, find_role_replicas, validate
from torchx.cli.colors import ENDC, GREEN
from torchx.schedulers.api import AppDryRunInfo, DescribeAppResponse, Stream, filter_regex, split_lines_iterator
from torchx.schedulers.docker_scheduler import _to_str
from torchx.schedulers.local_scheduler import (
    COMBINED_LOG, STDERR_LOG, STDOUT_LOG, AppId, CWDImageProvider, ImageProvider, LocalOpts, LocalScheduler,
    LogIterator, PopenRequest, _LocalAppDef,
)
from torchx.schedulers.slurm_scheduler import SLURM_STATES
from torchx.specs.api import AppDef, AppState, Role, is_terminal, parse_app_handle

JOBS = os.environ["ACME_JOBS_FILE"]


class PersistentLocal(LocalScheduler):
    def __init__(self, session_name, image_provider_class, cache_size=100, extra_paths=None):
        self.backend = "local"
        self.session_name = session_name
        self._apps = {}
        self._image_provider_class = image_provider_class
        self._cache_size = cache_size
        self._extra_paths = extra_paths or []
        self._base_log_dir = None
        self._created_tmp_log_dir = False

    def _submit_dryrun(self, app, cfg):
        opts = dict(cfg)
        opts["log_dir"] = opts.get("log_dir") or os.environ["ACME_JOB_DIR"]
        request = self._to_popen_request(app, opts)
        return AppDryRunInfo(request, lambda r: str(asdict(r)))

    def schedule(self, dryrun_info):
        app_id = super().schedule(dryrun_info=dryrun_info)
        self._save()
        return app_id

    def _save(self):
        jobs = {i: [a.state.name, a.log_dir, list(a.role_replicas)] for i, a in self._apps.items()}
        with open(JOBS, "w") as f:
            json.dump(jobs, f)

    def describe(self, app_id):
        resp = super().describe(app_id=app_id)
        if resp:
            self._save()
            return resp
        with open(JOBS) as f:
            saved = json.load(f)
        if app_id in saved:
            resp = DescribeAppResponse()
            resp.app_id = app_id
            resp.state = AppState[saved[app_id][0]]
            resp.roles = [Role(name=n, image="") for n in saved[app_id][2]]
            return resp
        return None

    def log_iter(self, app_id, role_name, k=0, regex=None, since=None, until=None, should_tail=False,
                 streams=None):
        app = self._apps[app_id]
        name = {None: COMBINED_LOG, Stream.COMBINED: COMBINED_LOG, Stream.STDOUT: STDOUT_LOG,
                Stream.STDERR: STDERR_LOG}[streams]
        path = os.path.join(app.log_dir, role_name, str(k), name)
        lines = split_lines_iterator(LogIterator(app_id, path, self))
        return filter_regex(regex, lines) if regex else lines


def create_scheduler(session_name, cache_size=100, extra_paths=None, **kwargs):
    assert SLURM_STATES["COMPLETED"] == AppState.SUCCEEDED and _to_str(b"x") == "x"
    assert _prefix_line("p ", "a\\n") == "p a\\n" and isinstance(GREEN + ENDC, str)
    return PersistentLocal(session_name, CWDImageProvider, cache_size, extra_paths)
'''


def test_persistent_local_subclass_runs_hello_world(cli: Any, install: Any, tmp_path: Path) -> None:
    install("acme-persist", "0.3", {"acme_persist.py": PERSISTENT},
            "[torchx.schedulers]\nacme_persistent = acme_persist:create_scheduler\n")
    jobs = tmp_path / "jobs.json"
    extra = {"ACME_JOBS_FILE": str(jobs), "ACME_JOB_DIR": str(tmp_path / "job_dir")}
    p = cli("run", "-s", "acme_persistent", "utils.echo", "--msg", "hello world", extra=extra)
    assert p.returncode == 0, p.stderr
    handle = p.stdout.split()[0]
    assert handle.startswith("acme_persistent://"), p.stdout
    # the replica's output, relayed: to stdout by tx, to stderr by torchx (as TorchX does)
    relayed = p.stdout if cli.name == "tx" else p.stderr
    assert "hello world" in relayed, (p.stdout, p.stderr)
    app_id = handle.rsplit("/", 1)[1]
    saved = __import__("json").loads(jobs.read_text())
    assert saved[app_id][0] == "SUCCEEDED" and saved[app_id][2] == ["echo"], saved
    logs = tmp_path / "job_dir" / handle.split("://")[1].split("/")[0] / app_id / "echo" / "0"
    assert (logs / "stdout.log").read_text() == "hello world\n"
    assert (logs / "combined.log").read_text() == "hello world\n"
    assert '"final_state": "SUCCEEDED"' in (logs.parent.parent / "SUCCESS").read_text()
    # a later process knows the app from the job file only
    status = cli("status", handle, extra=extra)
    assert status.returncode == 0 and "SUCCEEDED" in status.stdout, status.stdout + status.stderr


def test_failing_replica_and_cancel(tmp_path: Path) -> None:
    import time

    from torchx.schedulers.local_scheduler import LocalDirectoryImageProvider, LocalScheduler
    from torchx.specs import AppDef, AppState, Role

    s = LocalScheduler("sess", LocalDirectoryImageProvider, cache_size=2)
    try:
        bad = AppDef("bad", [Role("r", image=str(tmp_path), entrypoint="sh", args=["-c", "pwd; exit 3"])])
        h = s.schedule(s.submit_dryrun(bad, {"log_dir": str(tmp_path / "logs")}))
        resp = s.wait(h, timeout=30)
        assert resp is not None and resp.state == AppState.FAILED
        assert list(s.log_iter(h, "r", 0)) == [f"{tmp_path}\n"]
        slow = AppDef("slow", [Role("r", image=str(tmp_path), entrypoint="sleep", args=["60"])])
        h2 = s.schedule(s.submit_dryrun(slow, {"log_dir": str(tmp_path / "logs")}))
        started = time.monotonic()
        s.cancel(h2)
        assert s.describe(h2).state == AppState.CANCELLED and time.monotonic() - started < 10
    finally:
        s.close()


def test_plugin_that_fails_to_load_is_named(cli: Any, install: Any) -> None:
    install("acme-broken", "1.2", {"acme_broken.py": "import acme_missing_dependency\n"},
            "[torchx.schedulers]\nacme_broken = acme_broken:create_scheduler\n")
    p = cli("runopts", "acme_broken")
    assert p.returncode == 1 and p.stderr.count("\n") == 1, p.stderr
    assert "unexpected" not in p.stderr and "Traceback" not in p.stderr
    assert ("entry point acme_broken = acme_broken:create_scheduler (group torchx.schedulers) of acme-broken 1.2 "
            "failed: ModuleNotFoundError: No module named 'acme_missing_dependency'") in p.stderr, p.stderr
