"""A scheduler that subclasses TorchX's docker scheduler as persistent-docker plugins do
(``DockerScheduler.__init__(session_name)``, its own request from ``_submit_dryrun``,
``schedule`` on ``self._docker_client``, ``describe`` over ``self._get_app_state``, the job
table in a file, ``log_iter`` with ``_to_str``, ``_cancel_existing``), installed through
TorchX's entry-point group and run on the session's private podman engine with ``tx run``
and ``torchx run``; a later process reads status and logs from the job file."""
import json
from pathlib import Path
from typing import Any, Dict

PERSISTENT = '''
import json
import os

from torchx.schedulers.api import AppDryRunInfo, DescribeAppResponse, Stream, filter_regex, split_lines
from torchx.schedulers.api import split_lines_iterator
from torchx.schedulers.docker_scheduler import DockerScheduler, _to_str
from torchx.schedulers.ids import make_unique
from torchx.specs.api import AppState, ReplicaStatus, Role, RoleStatus, is_terminal, macros

JOBS = os.environ["ACME_JOBS_FILE"]


def _load():
    if not os.path.exists(JOBS):
        return {}
    with open(JOBS) as f:
        return json.load(f)


class PersistentDocker(DockerScheduler):
    def __init__(self, session_name):
        super().__init__(session_name)
        self._scheduled = []

    def _submit_dryrun(self, app, cfg):
        app_id = make_unique(app.name)
        containers = []
        for role in app.roles:
            role = macros.Values(img_root="", app_id=app_id, replica_id="0", rank0_env="ACME_RANK0").apply(role)
            containers.append({"role": role.name, "name": f"{app_id}-{role.name}", "image": role.image,
                               "command": [role.entrypoint, *role.args],
                               "env": {**role.env, "ACME_RANK0": "localhost"}})
        return AppDryRunInfo({"id": app_id, "containers": containers}, repr)

    def schedule(self, dryrun_info):
        req = dryrun_info.request
        for c in req["containers"]:
            self._docker_client.containers.run(c["image"], c["command"], name=c["name"], environment=c["env"],
                                               detach=True, labels={"acme.app": req["id"]})
        jobs = _load()
        jobs[req["id"]] = req
        with open(JOBS, "w") as f:
            json.dump(jobs, f)
        self._scheduled.append(req["id"])
        return req["id"]

    def _container(self, req, role_name):
        c = next(c for c in req["containers"] if c["role"] == role_name)
        return self._docker_client.containers.get(c["name"])

    def describe(self, app_id):
        req = _load().get(app_id)
        if req is None:
            return None
        roles, statuses, states = [], [], []
        for c in req["containers"]:
            state = self._get_app_state(self._container(req, c["role"]))
            roles.append(Role(name=c["role"], image=c["image"]))
            statuses.append(RoleStatus(c["role"], [ReplicaStatus(id=0, state=state, role=c["role"],
                                                                 hostname=c["name"])]))
            states.append(state)
        if all(s == AppState.SUCCEEDED for s in states):
            state = AppState.SUCCEEDED
        elif any(is_terminal(s) and s != AppState.SUCCEEDED for s in states):
            state = AppState.FAILED
        else:
            state = next(s for s in states if not is_terminal(s))
        return DescribeAppResponse(app_id=app_id, state=state, roles=roles, roles_statuses=statuses)

    def log_iter(self, app_id, role_name, k=0, regex=None, since=None, until=None, should_tail=False,
                 streams=None):
        req = _load()[app_id]
        logs = self._container(req, role_name).logs(since=since, until=until, stream=should_tail,
                                                    stdout=streams != Stream.STDERR,
                                                    stderr=streams != Stream.STDOUT)
        if isinstance(logs, (bytes, str)):
            lines = split_lines(_to_str(logs))
        else:
            lines = split_lines_iterator(map(_to_str, logs))
        return filter_regex(regex, lines) if regex else lines

    def _cancel_existing(self, app_id):
        req = _load()[app_id]
        for c in req["containers"]:
            self._docker_client.containers.get(c["name"]).stop(timeout=1)


def create_scheduler(session_name, **kwargs):
    return PersistentDocker(session_name)
'''


def test_persistent_docker_subclass_runs_hello_world(podman_engine: Dict[str, str], cli: Any, install: Any,
                                                     tmp_path: Path) -> None:
    from tx_scheduler_docker.testing import IMAGE

    install("acme-dpersist", "0.1", {"acme_dpersist.py": PERSISTENT},
            "[torchx.schedulers]\ndocker_persistent = acme_dpersist:create_scheduler\n")
    jobs = tmp_path / "jobs.json"
    extra = {**podman_engine, "ACME_JOBS_FILE": str(jobs)}
    p = cli("run", "-s", "docker_persistent", "utils.echo", "--msg", "hello world", "--image", IMAGE,
            extra=extra)
    assert p.returncode == 0, p.stderr
    handle = p.stdout.split()[0]
    assert handle.startswith("docker_persistent://"), p.stdout
    # the container's output, relayed: to stdout by tx, to stderr by torchx (as TorchX does)
    relayed = p.stdout if cli.name == "tx" else p.stderr
    assert "hello world" in relayed, (p.stdout, p.stderr)
    app_id = handle.rsplit("/", 1)[1]
    req = json.loads(jobs.read_text())[app_id]
    assert [c["role"] for c in req["containers"]] == ["echo"]
    assert req["containers"][0]["env"]["TX_APP_ID"] == app_id  # tx's replica contract, macros applied
    # a later process knows the app from the job file and the engine
    status = cli("status", handle, extra=extra)
    assert status.returncode == 0 and "SUCCEEDED" in status.stdout, status.stdout + status.stderr
    log = cli("log", f"{handle}/echo", extra=extra)
    assert log.returncode == 0 and "hello world" in log.stdout, log.stdout + log.stderr
