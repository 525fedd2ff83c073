"""The preemption chaos benchmark's drivers for the backends other than local_cwd and slurm
(bench/chaos_preemption.py runs them, bench/chaos_check.py judges): each starts its backend
privately, says how the job is submitted there, and warns as that backend's own preemption
test does (the mechanism proven there):

* ``local_docker`` (plugins/scheduler-docker/tests/test_docker_preemption.py): a private
  podman engine (scripts/start-podman.sh); the engine stops the job's container from
  outside with its own timeout (``StopTimeout`` = ``preempt_grace``: SIGTERM, SIGKILL after
  it); ``tx status`` then starts the next attempt.
* ``kubernetes`` (plugins/scheduler-k8s/tests/test_k8s_preemption.py): tx's test API server
  (fakekube, pods as processes of this host); the pod is evicted through the Eviction API,
  the fake kubelet SIGTERMs it and SIGKILLs it after ``terminationGracePeriodSeconds``;
  Volcano's job starts a new pod. Not a real cluster.
* ``gcp_batch`` (plugins/scheduler-gcp-batch/tests/test_gcp_preemption.py): the local Batch
  server (``fake_gcp``, in this process) preempts the task's Spot VM with Compute Engine's
  30 s notice (``preempt(notice_s=30)``: SIGTERM, SIGKILL after it); Batch's lifecycle
  policy runs the task again (at most 10 retries a job: a run takes 9 preemptions).
* ``aws_batch`` (plugins/scheduler-aws-batch/tests/test_aws_batch_preemption.py): moto's
  Batch in Docker mode over a private podman engine; the ECS stop sequence of a Spot
  reclaim (the engine's stop with the grace as timeout, then TerminateJob with the reclaim's
  status reason). moto runs no retry attempts, so the next attempt is ``tx run --resume``
  of the reclaimed app (the same TX_CHECKPOINT_DIR), as a user does after a reclaim.
* ``ray`` (plugins/scheduler-ray/tests/test_ray_preemption.py): a private Ray head; what
  ``ray stop`` does to the replica's actor process (SIGTERM, SIGKILL 2 s later), after
  which tx's watchdog warns the replica (SIGTERM) and SIGKILLs it ``preempt_grace`` later;
  the time of the warning is the job's own ``warned`` line.

The ranks are found on every backend the same way: the processes of this host whose command
line names the run's phase log and whose environment has ``RANK`` (a container's are
processes of this host too); the pid a rank writes in the phase log is its pid in its own
pid namespace (``NSpid``), so each rank is known by both. The four criteria are judged as on
local_cwd, from the checkpoint directory (a path of this host in every case: a bind mount or
a hostPath volume), the phase log and the ranks' end times.

Not a bench on its own: chaos_preemption.py imports it.
"""
from __future__ import annotations

import abc
import os
import shutil
import signal
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any, Dict, List, Optional, Tuple

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
BIN = os.path.dirname(sys.executable)
IMAGE = "localhost/busybox:tx"
RECLAIMED = "Host EC2 (instance i-0123456789abcdef0) terminated."


def rank_procs(marker: str) -> Dict[int, Tuple[int, int]]:
    """``{rank: (pid on this host, pid in its own namespace)}`` of the live training
    processes whose command line holds ``marker`` (the run's phase log) and whose
    environment has ``RANK`` (torchrun's own process has none)."""
    out = {}
    m = marker.encode()
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/cmdline", "rb") as f:
                if m not in f.read():
                    continue
            with open(f"/proc/{name}/environ", "rb") as f:
                env = f.read().split(b"\0")
            with open(f"/proc/{name}/status") as f:
                status = f.read()
        except OSError:
            continue
        rank = [e for e in env if e.startswith(b"RANK=")]
        state = [ln for ln in status.splitlines() if ln.startswith("State:")]
        if not rank or (state and "Z" in state[0].split()[1]):
            continue
        ns = [ln.split()[-1] for ln in status.splitlines() if ln.startswith("NSpid:")]
        out[int(rank[0][5:])] = (int(name), int(ns[0]) if ns else int(name))
    return out


def python_mounts(rw: List[str]) -> List[str]:
    """``--mounts`` entries that make this interpreter, its environment (torch), tx's sources
    (where its editable install points) and this checkout usable inside the busybox image,
    read-only at the same paths, and ``rw`` read-write (as the docker and aws tests do)."""
    import tx

    src = Path(tx.__file__).resolve().parents[3]  # the checkout the installed tx comes from
    ro = [os.path.realpath(x) for x in ("/usr", sys.base_prefix, sys.prefix, str(REPO), str(src),
                                        *os.environ.get("PYTHONPATH", "").split(os.pathsep)) if x]
    keep = [p for p in dict.fromkeys(ro) if (p == "/usr" or not p.startswith("/usr/")) and os.path.exists(p)]
    return [f"type=bind,src={p},dst={p},readonly" for p in keep] + [f"type=bind,src={p},dst={p}" for p in rw]


class Driver(abc.ABC):
    """One backend's part of the benchmark (chaos_preemption.Bench calls it)."""

    name = ""
    real = False
    warning = ""
    grace = 10.0
    #: the injection's time is the warning's (else the job's ``warned`` line is)
    exact_time = True
    #: preemptions one run can take (the backend's bound on retries)
    per_run = 10 ** 6
    #: a ``tx status`` look every this many seconds while the next attempt is awaited (0: none)
    look_every = 0.0
    #: seconds to wait for an attempt's two ranks
    start_timeout = 300.0
    detach = False
    note = ""

    def start(self, base: Path) -> None:
        """Start the backend privately under ``base``; point this process's environment at it."""

    def stop(self) -> None:
        """Stop what :meth:`start` started."""

    def bind(self, work: Path) -> None:
        """The bench's work directory (before the first run)."""
        self.work = work
        os.environ["TX_STATE_DIR"] = str(work / "state")  # in-process schedulers: the bench's state

    def cfg(self) -> str:
        return f"preempt_grace={self.grace:g},infra_retries=1000"

    def component(self) -> List[str]:
        """``dist.ddp``'s arguments before ``--script``."""
        return []

    def output_dir(self) -> str:
        return str(self.work / "out")

    def env(self) -> Dict[str, str]:
        return {}

    @abc.abstractmethod
    def warn(self, bench: Any, run: Dict[str, Any]) -> Dict[str, Any]:
        """Warn the attempt now; ``{"t", "target", "exact_time"}``."""
        raise NotImplementedError

    def after(self, bench: Any, run: Dict[str, Any], rec: Dict[str, Any]) -> None:
        """Once the warned attempt's ranks are gone (aws_batch: end the job, resume)."""


class DockerDriver(Driver):
    name, warning = "local_docker", "podman's engine stops the container (its StopTimeout = preempt_grace)"
    real = True
    look_every, detach = 5.0, True
    note = "podman's Docker API (a private engine): the engine's own stop, SIGTERM then SIGKILL after the grace."

    def start(self, base: Path) -> None:
        from tx_scheduler_docker.testing import podman_service

        short = Path(tempfile.mkdtemp(prefix="tx-chaos-podman-"))  # podman: a runroot under 50 characters
        self.base = short
        self._cm = podman_service(short)
        self.exports = self._cm.__enter__()
        for k in ("DOCKER_HOST", "CONTAINERS_CONF", "CONTAINERS_STORAGE_CONF", "CONTAINERS_REGISTRIES_CONF",
                  "DOCKER_TLS_VERIFY", "DOCKER_CERT_PATH", "DOCKER_API_VERSION"):
            os.environ.pop(k, None)
        os.environ.update(self.exports)
        import docker

        self.client = docker.DockerClient(base_url=self.exports["DOCKER_HOST"], timeout=300)

    def stop(self) -> None:
        self.client.close()
        self._cm.__exit__(None, None, None)
        shutil.rmtree(self.base, ignore_errors=True)

    def component(self) -> List[str]:
        pp = os.environ.get("PYTHONPATH", "")
        return ["--cpu", "2", "--memMB", "4096", "--image", IMAGE,
                "--env", f"PATH={BIN}:/usr/bin:/bin,HOME=/tmp,PYTHONPATH={pp}",
                "--mounts", ",".join(python_mounts([str(self.work)]))]

    def warn(self, bench: Any, run: Dict[str, Any]) -> Dict[str, Any]:
        c = self.client.containers.get(f"{run['app_id']}-train-0")
        t = time.time()
        th = threading.Thread(target=self.client.api.stop, args=(c.id,), daemon=True)  # no timeout: its StopTimeout
        th.start()
        self.stopping = th
        return {"t": t, "target": f"engine stop of {c.name} (StopTimeout {c.attrs['Config'].get('StopTimeout')})",
                "exact_time": True}

    def after(self, bench: Any, run: Dict[str, Any], rec: Dict[str, Any]) -> None:
        self.stopping.join(timeout=self.grace + 60)


class K8sDriver(Driver):
    name, warning = "kubernetes", ("eviction on tx's test API server (fakekube; terminationGracePeriodSeconds "
                                   "= preempt_grace)")
    note = ("tx's test API server (fakekube: pods as processes of this host; its kubelet SIGTERMs an evicted pod "
            "and SIGKILLs it after terminationGracePeriodSeconds), not a real cluster.")

    def start(self, base: Path) -> None:
        from _common import start_fakekube

        base.mkdir(parents=True, exist_ok=True)
        self.server, _ = start_fakekube(base)

    def stop(self) -> None:
        self.server.terminate()
        self.server.wait(timeout=60)

    def cfg(self) -> str:
        return f"queue=default,{super().cfg()}"

    def component(self) -> List[str]:
        pp = os.environ.get("PYTHONPATH", "")
        return ["--memMB", "2048", "--env", f"PATH={BIN}:/usr/bin:/bin,PYTHONPATH={pp}",
                "--mounts", f"type=bind,src={self.work},dst={self.work}"]

    def warn(self, bench: Any, run: Dict[str, Any]) -> Dict[str, Any]:
        from kubernetes import client, config
        from tx_scheduler_k8s._pod import LABEL_INSTANCE

        ns, name = run["app_id"].split(":")
        api = client.CoreV1Api(config.new_client_from_config(os.environ["KUBECONFIG"]))
        try:
            pod = next(p for p in api.list_namespaced_pod(ns, label_selector=f"{LABEL_INSTANCE}={name}").items
                       if p.status.phase == "Running" and p.metadata.deletion_timestamp is None)
            t = time.time()
            api.create_namespaced_pod_eviction(pod.metadata.name, ns, client.V1Eviction(
                metadata=client.V1ObjectMeta(name=pod.metadata.name, namespace=ns)))
        finally:
            api.api_client.close()
        return {"t": t, "target": f"eviction of pod {pod.metadata.name}", "exact_time": True}


class GcpDriver(Driver):
    name, warning = "gcp_batch", "Spot VM preemption on tx's local Batch server (fake_gcp; 30 s notice)"
    grace = 30.0
    per_run = 9  # Batch's lifecycle policy: at most 10 retries a job
    note = ("tx's local Batch server (fake_gcp: tasks as processes of this host; preempt(notice_s=30) as Compute "
            "Engine reclaims a Spot VM), not Google Cloud.")

    def start(self, base: Path) -> None:
        sys.path.insert(0, str(REPO / "plugins" / "scheduler-gcp-batch" / "tests"))
        from fake_gcp import FakeGcp
        from tx_scheduler_gcp_batch.testing import LOCATION, PROJECT

        base.mkdir(parents=True, exist_ok=True)
        self.fake = FakeGcp(str(base)).start()
        os.environ.update({
            "CLOUDSDK_API_ENDPOINT_OVERRIDES_BATCH": self.fake.url + "/",
            "CLOUDSDK_API_ENDPOINT_OVERRIDES_LOGGING": self.fake.url + "/",
            "GOOGLE_CLOUD_PROJECT": PROJECT, "CLOUDSDK_BATCH_LOCATION": LOCATION,
            "CLOUDSDK_CONFIG": str(base / "gcloud-config"), "NO_GCE_CHECK": "true",
            "PATH": f"{BIN}{os.pathsep}{os.environ['PATH']}"})  # the tasks run this environment's torchrun

    def stop(self) -> None:
        self.fake.stop()

    def cfg(self) -> str:
        return f"provisioning_model=SPOT,infra_retries={self.per_run}"

    def warn(self, bench: Any, run: Dict[str, Any]) -> Dict[str, Any]:
        from tx_scheduler_gcp_batch.scheduler import create_scheduler

        sched = create_scheduler("tx")
        job = sched.describe(run["app_id"]).metadata["job_name"]  # type: ignore[union-attr]
        t = time.time()
        self.fake.preempt(job, 0, notice_s=self.grace)
        return {"t": t, "target": f"preempt(notice_s={self.grace:g}) of task 0", "exact_time": True}


class AwsDriver(Driver):
    name, warning = "aws_batch", ("ECS stop of a Spot reclaim on moto, not AWS (engine stop -t preempt_grace, "
                                  "TerminateJob; next attempt: tx run --resume)")
    note = ("moto's Batch in Docker mode over a private podman engine, not AWS: moto runs no retry attempts, so each "
            "next attempt is `tx run --resume` of the reclaimed app (the same TX_CHECKPOINT_DIR).")
    start_timeout = 420.0

    def start(self, base: Path) -> None:
        from tx_scheduler_aws_batch.testing import make_queue, start_moto

        self.docker = DockerDriver()
        self.docker.start(base)
        base.mkdir(parents=True, exist_ok=True)
        endpoint, svc = start_moto(base / "moto.log", env=self.docker.exports, use_docker=True, nodes=True)
        self.moto = make_queue(endpoint, svc, "chaos")
        for var in ("AWS_PROFILE", "AWS_REGION", "AWS_ENDPOINT_URL_BATCH", "AWS_ENDPOINT_URL_LOGS",
                    "AWS_SESSION_TOKEN"):
            os.environ.pop(var, None)
        os.environ.update(self.moto.env(), AWS_CONFIG_FILE=str(base / "no-aws-config"),
                          AWS_SHARED_CREDENTIALS_FILE=str(base / "no-aws-credentials"),
                          AWS_EC2_METADATA_DISABLED="true")

    def stop(self) -> None:
        self.moto.service.stop()
        self.docker.stop()

    def bind(self, work: Path) -> None:
        super().bind(work)
        self.docker.work = work

    def cfg(self) -> str:
        return f"queue={self.moto.queue},preempt_grace={self.grace:g},infra_retries=0"

    def component(self) -> List[str]:
        pp = os.environ.get("PYTHONPATH", "")
        return ["--cpu", "2", "--memMB", "4096", "--image", IMAGE,
                "--env", f"PATH={BIN}:/usr/local/bin:/usr/bin:/bin,HOME=/tmp,PYTHONPATH={pp}",
                "--mounts", ",".join(python_mounts([str(self.work)]))]

    def _job_id(self, run: Dict[str, Any]) -> str:
        from tx_scheduler_aws_batch.scheduler import create_scheduler

        return create_scheduler("tx").describe(run["app_id"]).metadata["job_id"]  # type: ignore[union-attr]

    def warn(self, bench: Any, run: Dict[str, Any]) -> Dict[str, Any]:
        job_id = self._job_id(run)
        (c,) = [c for c in self.docker.client.containers.list() if job_id in c.name]
        t = time.time()
        th = threading.Thread(target=c.stop, kwargs={"timeout": int(self.grace)}, daemon=True)
        th.start()
        self.stopping, self.job_id = th, job_id
        return {"t": t, "target": f"engine stop -t {self.grace:g} of {c.name}, then TerminateJob", "exact_time": True}

    def after(self, bench: Any, run: Dict[str, Any], rec: Dict[str, Any]) -> None:
        self.stopping.join(timeout=self.grace + 60)
        self.moto.client("batch").terminate_job(jobId=self.job_id, reason=RECLAIMED)

        until(lambda: bench.status(run) in ("FAILED", "CANCELLED", "SUCCEEDED"), 120, 1.0)
        rec["reclaimed_state"] = bench.status(run)
        bench.resume(run)


class RayDriver(Driver):
    name, warning = "ray", "ray stop's signals to the replica's actor (SIGTERM, SIGKILL 2 s later)"
    real = True
    exact_time = False
    note = ("a private Ray head; the actor's process ended as `ray stop` ends it, then tx's watchdog warns the "
            "replica: the warning's time is the job's `warned` line.")

    def start(self, base: Path) -> None:
        from tx_scheduler_ray.testing import RayHead

        temp = Path(tempfile.mkdtemp(prefix="txchaos-"))  # Ray's socket paths: a short temp dir
        self.head = RayHead(os.path.join(BIN, "ray"), temp)
        self.head.start()
        for k in [k for k in os.environ if k.startswith("RAY_")]:
            del os.environ[k]
        os.environ["RAY_ADDRESS"] = self.head.url

    def stop(self) -> None:
        self.head.stop()
        shutil.rmtree(self.head.temp, ignore_errors=True)

    def bind(self, work: Path) -> None:
        super().bind(work)
        self.cwd = work / "cwd"  # what Ray uploads as the job's working_dir: nothing
        self.cwd.mkdir(exist_ok=True)

    def component(self) -> List[str]:
        return ["--memMB", "1024"]

    def _actor(self, app_id: str) -> Optional[int]:
        from tx_scheduler_ray.scheduler import create_scheduler

        s = create_scheduler("tx")
        try:
            reps = (s.describe(app_id).metadata or {}).get("replicas") or {}  # type: ignore[union-attr]
        finally:
            s.close()
        pids = [r.get("actor_pid") for r in reps.values() if r.get("actor_pid")]
        return int(pids[0]) if pids else None

    def warn(self, bench: Any, run: Dict[str, Any]) -> Dict[str, Any]:
        pid = self._actor(run["app_id"])
        if pid is None:
            raise SystemExit(f"ray: no actor pid for {run['app_id']}")
        t = time.time()
        os.kill(pid, signal.SIGTERM)

        def then() -> None:  # ray stop's grace period, here 2 s
            deadline = time.monotonic() + 2
            while time.monotonic() < deadline and os.path.exists(f"/proc/{pid}"):
                time.sleep(0.1)
            try:
                os.kill(pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        threading.Thread(target=then, daemon=True).start()
        return {"t": t, "target": f"SIGTERM, SIGKILL 2 s later, to actor {pid}", "exact_time": False}


DRIVERS = {d.name: d for d in (DockerDriver, K8sDriver, GcpDriver, AwsDriver, RayDriver)}


def until(what, timeout: float, every: float = 0.05):
    """Poll ``what()`` until truthy; its value, or None after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        got = what()
        if got:
            return got
        time.sleep(every)
    return None


def tx_run_argv(driver: Driver, train: Path, job: Tuple[str, ...], phases: Path, resume: str = "") -> List[str]:
    """``tx run`` of the benchmark's job on ``driver``'s backend."""
    argv = ["run", "-s", driver.name, "-cfg", driver.cfg()]
    if driver.detach:
        argv.insert(1, "--detach")
    if resume:
        argv[1:1] = ["--resume", resume]
    out = list(job)
    out[out.index("--output-dir") + 1] = driver.output_dir()
    return [*argv, "dist.ddp", "-j", "1x2", *driver.component(), "--script", str(train), "--", *out,
            "--phase-log", str(phases)]

