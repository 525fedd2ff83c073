"""tx's scheduler conformance kit through boto3 against moto_server: simple mode (what jobs
that end inside SubmitJob can show) and Docker mode (real containers over podman, real
CloudWatch log lines). Where moto cannot show a behaviour the test says why."""
from typing import Any, Dict, Sequence

import pytest

from tx.schedulers import Stream
from tx.schedulers import env as env_contract
from tx.specs import AppDef, AppState, Resource
from tx.testing import SchedulerConformance, is_subsequence
from tx_scheduler_aws_batch.scheduler import AwsBatchScheduler, create_scheduler

IMAGE = "localhost/busybox:tx"


class _AwsKit(SchedulerConformance):
    def app(self, name: str, image: str, roles: Sequence[Any]) -> AppDef:
        """The kit's apps, with the memory AWS Batch requires."""
        app = super().app(name, image, roles)
        for role in app.roles:
            role.resource = Resource(cpu=1, gpu=0, memMB=64)
        return app

    def dryrun_app_id(self, info: Any) -> str:
        """The job name: it is in the request several times (job, job definition, app id)."""
        return info.request.name

    def unknown_app_id(self) -> str:
        return "tx-q-simple:tx-conformance-unknown-0000"


class TestAwsBatchSimpleMode(_AwsKit):
    """moto's simple mode: every job SUCCEEDS inside SubmitJob, no container runs, no log
    is written; so no logs, no failing replica, nothing running to cancel."""

    timeout = 60.0
    log_streams = ()
    running_not_observable = "moto's simple mode ends every job inside SubmitJob: it is SUCCEEDED at the first describe"

    @pytest.fixture
    def scheduler(self, aws_simple: Any) -> AwsBatchScheduler:
        return create_scheduler("tx")

    @pytest.fixture
    def cfg(self, aws_simple: Any) -> Dict[str, Any]:
        return {"queue": aws_simple.queue}

    def test_failing_replica(self) -> None:  # type: ignore[override]
        pytest.skip("moto's simple mode succeeds every job; Docker mode runs failing apps "
                    "(test_failing_replicas: moto cannot give replicas of one role different commands)")

    def test_cancel(self) -> None:  # type: ignore[override]
        pytest.skip("moto's simple mode ends jobs inside SubmitJob: nothing runs to cancel; see Docker mode")

    def test_fresh_process_sees_the_app(self) -> None:  # type: ignore[override]
        pytest.skip("moto's simple mode has no running app to cancel from a fresh process; see Docker mode")


_NO_NODE_INDEX = (
    "moto sets no AWS_BATCH_JOB_NODE_INDEX in its containers, so two replicas of one role "
    "cannot tell themselves apart there (the one-replica-per-role tests below cover the same)"
)


class TestAwsBatchDockerMode(_AwsKit):
    """moto's Docker mode over podman: real containers, RUNNING states, CloudWatch logs.

    moto has no node jobs (``<jobId>#<node>``): replica states are the job's and exit codes
    are not known per replica; its one log stream per job holds every node's lines."""

    timeout = 180.0
    log_streams = (Stream.COMBINED,)
    reports_exit_codes = False

    @pytest.fixture
    def scheduler(self, aws_docker: Any) -> AwsBatchScheduler:
        return create_scheduler("tx", poll_interval=0.5)

    @pytest.fixture
    def cfg(self, aws_docker: Any) -> Dict[str, Any]:
        return {"queue": aws_docker.queue}

    @pytest.fixture
    def image(self) -> str:
        return IMAGE

    def test_submit_describe_logs(self) -> None:  # type: ignore[override]
        pytest.skip(_NO_NODE_INDEX)

    def test_failing_replica(self) -> None:  # type: ignore[override]
        pytest.skip("moto sets no AWS_BATCH_JOB_NODE_INDEX: replicas of one role cannot differ, so one cannot "
                    "fail alone; test_failing_replicas runs the failing apps moto can show")

    def test_replica_environment(self) -> None:  # type: ignore[override]
        pytest.skip(_NO_NODE_INDEX)

    def test_fresh_process_sees_the_app(self) -> None:  # type: ignore[override]
        pytest.skip(_NO_NODE_INDEX)

    # the kit's checks above, with one replica per role (exact on moto too)
    def test_one_replica_roles_logs_and_environment(self, scheduler: AwsBatchScheduler, cfg: Dict[str, Any],
                                                    image: str) -> None:
        app = self.app("txconf1", image, [("alpha", self._printing_script("alpha"), 1),
                                          ("beta", self._printing_script("beta"), 1)])
        app_id = self.submit(scheduler, app, cfg)
        desc = self.wait_terminal(scheduler, app_id)
        assert desc.state == AppState.SUCCEEDED, f"{app_id}: {desc.state!r} {desc.msg}"
        assert {rs.role: [r.id for r in rs.replicas] for rs in desc.roles_statuses} == {"alpha": [0], "beta": [0]}
        for role in ("alpha", "beta"):
            lines = self.read_log(scheduler, app_id, role, 0, Stream.COMBINED)
            assert is_subsequence(self._expected(role, 0, "out"), lines), lines
            assert is_subsequence(self._expected(role, 0, "err"), lines), lines
            assert "progress 1\rprogress 2\n" in lines, lines

        names = [*env_contract.REQUIRED, *(env_contract.TORCHX_NAMES[n] for n in env_contract.REQUIRED)]
        script = "; ".join(f"printf '%s env {n}=%s\\n' \"$TX_ROLE_NAME\" \"${{{n}-UNSET}}\"" for n in names)
        app = self.app("txconfenv1", image, [("alpha", script, 1), ("beta", script, 1)])
        for role in app.roles:
            role.env.update(self.contract_env(scheduler))
        app_id = self.submit(scheduler, app, cfg)
        desc = self.wait_terminal(scheduler, app_id)
        assert desc.state == AppState.SUCCEEDED, f"{app_id}: {desc.state!r} {desc.msg}"
        for role in ("alpha", "beta"):
            lines = self.read_log(scheduler, app_id, role, 0, Stream.COMBINED)
            prefix = f"{role} env "
            got = dict(ln[len(prefix):].rstrip("\n").split("=", 1) for ln in lines if ln.startswith(prefix))
            self.check_replica_env(scheduler, app, app_id, role, 0, got)
            assert got["TX_APP_ID"] == app_id, got
            # the main node (alpha) has no main-node address; beta gets alpha's container address
            assert (got["TX_RANK0_HOST"] == "localhost") == (role == "alpha"), got

    def test_failing_replicas(self, scheduler: AwsBatchScheduler, cfg: Dict[str, Any], image: str) -> None:
        """The kit's failing replica as moto can show it (its replicas of one role cannot
        tell themselves apart, so they cannot differ): a role of 2 replicas that all exit 3,
        and a one-replica role that exits 3 beside one that succeeds; each app FAILED,
        saying why (moto reports the job's state for every replica)."""
        fail = 'echo "boom ${replica_id}" >&2; exit 3'
        both = self.submit(scheduler, self.app("txconffail2", image, [("worker", fail, 2)]), cfg)
        mixed = self.submit(scheduler, self.app("txconffail1", image, [("ok", "echo fine", 1), ("bad", fail, 1)]), cfg)
        for app_id, failed in ((both, ("worker", 0)), (mixed, ("bad", 0))):
            desc = self.wait_terminal(scheduler, app_id)
            assert desc.state == AppState.FAILED, f"{app_id}: {desc.state!r} {desc.msg}"
            got = {(rs.role, r.id): r.state for rs in desc.roles_statuses for r in rs.replicas}
            assert got.get(failed) == AppState.FAILED, f"{app_id}: {got}"
        (rs,) = self.describe(scheduler, both).roles_statuses
        assert sorted(r.id for r in rs.replicas) == [0, 1], rs

    def test_one_replica_roles_in_a_fresh_process(self, scheduler: AwsBatchScheduler, cfg: Dict[str, Any],
                                                  image: str) -> None:
        done = self.submit(scheduler, self.app("txconffresh1", image, [("alpha", self._printing_script("alpha"), 1),
                                                                       ("beta", "echo beta", 1)]), cfg)
        running = self.submit(scheduler, self.app("txconffresh1", image, [("sleeper", "echo started; sleep 600", 1)]), cfg)
        desc = self.wait_terminal(scheduler, done)
        assert desc.state == AppState.SUCCEEDED, f"{done}: {desc.state!r} {desc.msg}"
        got = self.fresh_call(scheduler, "describe", done)
        assert got["found"] and got["state"] == "SUCCEEDED", got
        assert sorted(got["replicas"]) == ["alpha", "beta"], got
        lines = self.fresh_call(scheduler, "log", done, "alpha", "0", "combined")["lines"]
        assert is_subsequence(self._expected("alpha", 0, "out"), lines), lines
        listed = self.fresh_call(scheduler, "list", done)["app_ids"]
        assert done in listed and running in listed, listed
        assert self.wait_started(scheduler, running).state == AppState.RUNNING
        got = self.fresh_call(scheduler, "describe", running)
        assert got["found"] and got["state"] == "RUNNING", got
        self.fresh_call(scheduler, "cancel", running)
        desc = self.wait_terminal(scheduler, running)
        assert desc.state == AppState.CANCELLED, f"{running}: {desc.state!r} {desc.msg}"
        assert desc.msg == "cancelled: cancelled by tx (tx cancel)"
