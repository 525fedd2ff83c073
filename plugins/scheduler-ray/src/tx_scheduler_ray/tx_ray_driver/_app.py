"""The driver's orchestration: placement groups, replica actors, retries, state.json."""
from __future__ import annotations

import json
import os
import signal
import sys
import time
from typing import Any, Dict, List, Optional

from . import FORMAT_VERSION, STATE_FILE, STREAMS, log_name, state_dir
from ._loss import infra_reason, saved_since, verdict
from ._peers import ended_on_their_own, failure_record
from ._replica import actor_class, logs_dir

PENDING, RUNNING, SUCCEEDED, FAILED, CANCELLED = "PENDING", "RUNNING", "SUCCEEDED", "FAILED", "CANCELLED"
_TERMINAL = (SUCCEEDED, FAILED, CANCELLED)
_MB = 1 << 20


class Cancelled(Exception):
    """SIGTERM arrived (``ray job stop``)."""


def say(msg: str) -> None:
    """A line of the driver's own log (the Ray job's output, not a replica's)."""
    print(f"[tx-ray-driver] {msg}", flush=True)


class Replica:
    """The driver's record of one replica."""

    def __init__(self, role_idx: int, role: Dict[str, Any], replica_id: int, required: bool) -> None:
        self.role_idx = role_idx
        self.role = role
        self.id = replica_id
        self.required = required
        self.state = PENDING
        self.pg: Any = None
        self.bundle = 0
        self.pg_ready: Any = None  # ObjectRef of pg.ready() for replicas waiting alone
        self.actor: Any = None
        self.info: Dict[str, Any] = {}
        self.attempt = -1
        self.pid: Optional[int] = None
        self.exit_code: Optional[int] = None
        self.sizes: Dict[str, int] = {}
        self.msg = ""
        self.tail = ""
        self.cause = ""  # the end of this attempt's stderr, for why it failed (not in state.json's replicas)
        self.infra = ""  # why the infrastructure lost this attempt (Ray's words), "" for the user's own failure
        self.started: Optional[float] = None
        self.ended: Optional[float] = None
        self.wait_ref: Any = None

    @property
    def name(self) -> str:
        return f"{self.role['name']}/{self.id}"

    def to_json(self, sid: str) -> Dict[str, Any]:
        return {
            "id": self.id,
            "state": self.state,
            "attempt": max(self.attempt, 0),
            "hostname": self.info.get("hostname", ""),
            "node_ip": self.info.get("node_ip", ""),
            "node_id": self.info.get("node_id", ""),
            "pid": self.pid,
            "actor_pid": self.info.get("actor_pid"),
            "exit_code": self.exit_code,
            "msg": self.msg,
            "stderr_tail": self.tail,
            "started": self.started,
            "ended": self.ended,
            "logs": {s: log_name(sid, self.role["name"], self.id, s) for s in STREAMS} if self.info else {},
            "sizes": self.sizes,
        }


def _bundle(role: Dict[str, Any]) -> Dict[str, float]:
    res = role["resources"]
    b = {"CPU": float(res.get("CPU", 1))}
    if res.get("GPU"):
        b["GPU"] = float(res["GPU"])
    if res.get("memory"):
        b["memory"] = float(res["memory"])
    for k, v in res.items():
        if k not in ("CPU", "GPU", "memory"):
            b[k] = float(v)
    return b


def _fmt_res(res: Dict[str, float]) -> str:
    parts = []
    for k, v in sorted(res.items()):
        if k.startswith("node:") or k == "object_store_memory":
            continue
        parts.append(f"memory {v / _MB:.0f} MB" if k == "memory" else f"{k} {v:g}")
    return ", ".join(parts)


class App:
    """Runs the app described by ``spec`` (see :mod:`tx_scheduler_ray.request`)."""

    def __init__(self, spec: Dict[str, Any]) -> None:
        import ray

        self.ray = ray
        self.spec = spec
        self.app_id: str = spec["app_id"]
        prefix = spec["address"] + "-"
        # the app id is "<host>:<port>-<submission id>"
        self.sid: str = self.app_id[len(prefix):] if self.app_id.startswith(prefix) else self.app_id
        self.grace = float(spec.get("stop_grace_s", 5.0))
        self.logs_dir = logs_dir()
        self.dir = os.path.join(self.logs_dir, state_dir(self.sid))
        os.makedirs(self.dir, exist_ok=True)
        self.state = PENDING
        self.msg = "reserving resources"
        self.failure: Optional[Dict[str, Any]] = None
        self.num_restarts = 0
        self.restarts_by_role = [0] * len(spec["roles"])
        #: retries after infrastructure failures, for the whole app (not counted per role)
        self.infra_retries = int(spec.get("infra_retries", 3))
        self.infra_used = 0
        #: the attempts that ended (index, state, kind, reason, retried), oldest first
        self.attempts: List[Dict[str, Any]] = []
        self.rank0: Dict[str, Any] = {}
        self.cancelled = False
        self.pgs: List[Any] = []
        self.Actor = actor_class()
        self.replicas: List[Replica] = []
        for ri, role in enumerate(spec["roles"]):
            need = role["num_replicas"] if role.get("min_replicas") is None else max(1, role["min_replicas"])
            for k in range(role["num_replicas"]):
                self.replicas.append(Replica(ri, role, k, k < need))
        self.driver = {"node_id": ray.get_runtime_context().get_node_id(), "pid": os.getpid(),
                       "hostname": os.uname().nodename}

    # -- state.json ----------------------------------------------------------------------
    def write(self) -> None:
        """Replace ``state.json`` atomically with the current state."""
        roles = []
        for ri, role in enumerate(self.spec["roles"]):
            roles.append({"name": role["name"],
                          "replicas": [r.to_json(self.sid) for r in self.replicas if r.role_idx == ri]})
        doc = {
            "version": FORMAT_VERSION, "app_id": self.app_id, "submission_id": self.sid,
            "state": self.state, "msg": self.msg, "failure": self.failure,
            "num_restarts": self.num_restarts, "rank0": self.rank0, "driver": self.driver,
            "attempts": self.attempts, "infra_retries": self.infra_retries, "infra_used": self.infra_used,
            "updated": time.time(), "roles": roles,
        }
        path = os.path.join(self.dir, STATE_FILE)
        tmp = path + ".tmp"
        with open(tmp, "w", encoding="utf-8") as f:
            json.dump(doc, f)
        os.replace(tmp, path)

    # -- signals ---------------------------------------------------------------------------
    def _on_term(self, signum: int, _frame: Any) -> None:
        self.cancelled = True
        raise Cancelled()

    def check_cancel(self) -> None:
        if self.cancelled:
            raise Cancelled()

    # -- placement ---------------------------------------------------------------------------
    def pending_reason(self, pg: Any, what: str) -> str:
        from ray.util.placement_group import placement_group_table

        table = placement_group_table(pg)
        bundles = list(table.get("bundles", {}).values())
        groups: Dict[str, int] = {}
        for b in bundles:
            key = "{" + _fmt_res(b) + "}"
            groups[key] = groups.get(key, 0) + 1
        asks = ", ".join(f"{n} x {k}" for k, n in groups.items())
        sched = (table.get("stats") or {}).get("scheduling_state", "") or table.get("state", "")
        why = {
            "INFEASIBLE": "infeasible: no node of the cluster can hold a bundle",
            "NO_RESOURCES": "not enough free resources now",
        }.get(sched, sched.lower().replace("_", " ") or "waiting")
        total = _fmt_res(self.ray.cluster_resources())
        return (f"waiting for placement group {table.get('name')} ({what}: {asks}; strategy "
                f"{table.get('strategy')}): {why}; cluster total: {total}")

    def place_required(self) -> None:
        """Reserve one placement group for the required replicas; wait until it is placed."""
        from ray.util.placement_group import placement_group

        req = [r for r in self.replicas if r.required]
        pg = placement_group([_bundle(r.role) for r in req], strategy=self.spec.get("placement_strategy", "SPREAD"),
                             name=f"tx-{self.sid}")
        self.pgs.append(pg)
        for i, r in enumerate(req):
            r.pg, r.bundle = pg, i
        ready = pg.ready()
        waited = 0.0
        while True:
            done, _ = self.ray.wait([ready], timeout=0.5)
            self.check_cancel()
            if done:
                self.ray.get(done[0])
                return
            waited += 0.5
            if waited >= 1.0 and int(waited * 2) % 4 == 0:
                msg = self.pending_reason(pg, f"{len(req)} required replicas")
                if msg != self.msg:
                    self.msg = msg
                    say(msg)
                    self.write()

    def place_extras(self) -> None:
        """One single-bundle placement group per replica beyond an elastic role's minimum."""
        from ray.util.placement_group import placement_group

        for r in self.replicas:
            if not r.required:
                r.pg = placement_group([_bundle(r.role)], name=f"tx-{self.sid}-{r.role['name']}-{r.id}")
                r.bundle = 0
                r.pg_ready = r.pg.ready()
                r.msg = "waiting for resources (elastic replica beyond min_replicas)"
                self.pgs.append(r.pg)

    # -- replicas ------------------------------------------------------------------------------
    def _new_actor(self, r: Replica) -> Any:
        from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

        b = _bundle(r.role)
        custom = {k: v for k, v in b.items() if k not in ("CPU", "GPU", "memory")}
        names = {s: log_name(self.sid, r.role["name"], r.id, s) for s in STREAMS}
        return self.Actor.options(
            num_cpus=b["CPU"], num_gpus=b.get("GPU", 0), memory=b.get("memory"),
            resources=custom or None,
            scheduling_strategy=PlacementGroupSchedulingStrategy(
                placement_group=r.pg, placement_group_bundle_index=r.bundle,
                placement_group_capture_child_tasks=False),
        ).remote(names)

    def launch(self, group: List[Replica], new_rank0: bool) -> None:
        """Start ``group`` (actors created where missing), telling each where rank 0 is."""
        for r in group:
            if r.actor is None:
                r.actor = self._new_actor(r)
        infos = []
        for r in group:
            try:
                infos.append(self.ray.get(r.actor.info.remote()))
            except Exception as e:  # noqa: BLE001 - the actor could not be created
                infos.append({"error": _short(e), "infra": infra_reason(e)})
        rank0 = next((r for r in self.replicas if r.role_idx == 0 and r.id == 0), None)
        for r, info in zip(group, infos):
            if "error" not in info:
                r.info = info
        if new_rank0 or not self.rank0:
            assert rank0 is not None
            if rank0.actor is not None and rank0.info:
                port = self.ray.get(rank0.actor.free_port.remote())
                self.rank0 = {"host": rank0.info["node_ip"], "hostname": rank0.info["hostname"], "port": port}
        names = self.spec["rank0_env"]
        for r, info in zip(group, infos):
            r.attempt += 1
            r.exit_code, r.tail, r.cause, r.ended, r.pid, r.infra = None, "", "", None, None, ""
            if "error" in info:
                self._failed_to_start(r, f"replica actor failed: {info['error']}", info.get("infra", ""))
                continue
            env = dict(r.role["env"])
            for n in names:
                env[n] = self.rank0.get("host", "")
            env["MASTER_ADDR"] = self.rank0.get("host", "")
            env["MASTER_PORT"] = str(self.rank0.get("port", ""))
            # torchrun's --local_addr: the address its agent advertises to the other nodes
            # (the workers' MASTER_ADDR when it is rendezvous rank 0), the node's Ray
            # address instead of its host name, which may resolve to loopback
            if info.get("node_ip"):
                env.setdefault("PET_LOCAL_ADDR", info["node_ip"])
            values = {"app_id": self.app_id, "replica_id": str(r.id), "rank0_env": names[0]}
            argv = [r.role["entrypoint"], *r.role["args"]]
            try:
                started = self.ray.get(r.actor.start.remote(argv, env, self.spec.get("drop_env", []), values))
            except Exception as e:  # noqa: BLE001 - the actor died
                self._failed_to_start(r, _short(e), infra_reason(e))
                continue
            if "error" in started:  # e.g. the program does not exist
                self._failed_to_start(r, started["error"])
                continue
            r.pid, r.started = started["pid"], started["started"]
            r.state, r.msg = RUNNING, ""
            r.wait_ref = r.actor.wait.remote()
            say(f"{r.name} attempt {r.attempt} started on {r.info.get('hostname')} ({r.info.get('node_ip')}), pid {r.pid}")

    def _failed_to_start(self, r: Replica, why: str, infra: str = "") -> None:
        r.state, r.exit_code, r.msg, r.ended = FAILED, None if infra else 127, why, time.time()
        r.tail, r.infra = why, infra
        if infra:
            r.actor = None  # lost: a new one is made for the next attempt
        say(f"{r.name} could not start: {why}")
        self.pending_failures.append(r)

    def stop(self, group: List[Replica], state: str, why: str) -> None:
        """Stop the running replicas of ``group`` (in parallel) and mark them ``state``."""
        running = [r for r in group if r.state == RUNNING and r.actor is not None]
        refs = []
        for r in running:
            r.wait_ref = None
            refs.append(r.actor.stop.remote(self.grace))
        for r, ref in zip(running, refs):
            try:
                res = self.ray.get(ref, timeout=self.grace + 10)
                self._record(r, res)
            except Exception as e:  # noqa: BLE001 - the actor died meanwhile
                r.msg = _short(e)
            r.state, r.msg = state, why
            r.ended = r.ended or time.time()
        for r in group:
            if r.state == PENDING:
                r.state, r.msg = state, why

    def _record(self, r: Replica, res: Dict[str, Any]) -> None:
        r.exit_code = res.get("exit_code")
        r.sizes = res.get("sizes") or r.sizes
        r.tail = res.get("stderr_tail") or ""
        r.cause = res.get("cause_tail") or ""
        r.ended = res.get("ended")

    # -- the run ---------------------------------------------------------------------------------
    def run(self) -> int:
        """Run the app to its end; returns the driver's exit code (0: succeeded)."""
        signal.signal(signal.SIGTERM, self._on_term)
        self.pending_failures: List[Replica] = []
        try:
            self.write()
            self.place_required()
            self.place_extras()
            self.state, self.msg = RUNNING, ""
            self.launch([r for r in self.replicas if r.required], new_rank0=True)
            self.write()
            rc = self.loop()
        except BaseException as e:  # noqa: BLE001 - a cancel, or record why the driver itself failed
            signal.signal(signal.SIGTERM, signal.SIG_IGN)
            # the handler's Cancelled, raised while a call of Ray's (ray.wait, ray.get) waited
            # in its C++ code, comes out of that call as a SystemError ("returned a result
            # with an exception set"): self.cancelled says the cancel all the same
            if isinstance(e, Cancelled) or self.cancelled:
                say("stop requested: stopping every replica")
                self.stop(self.replicas, CANCELLED, "app cancelled")
                self.state, self.msg = CANCELLED, "cancelled (ray job stop)"
                rc = 0
            else:
                say(f"driver error: {e!r}")
                self.stop(self.replicas, CANCELLED, "driver error")
                self.state, self.msg = FAILED, f"tx's Ray driver failed: {_short(e)}"
                rc = 1
        self.cleanup()
        self.write()
        say(f"app {self.state}")
        return rc

    def loop(self) -> int:
        while True:
            for r in self.pending_failures[:]:
                self.pending_failures.remove(r)
                if self.on_failure(r):
                    return 1
            waits = {r.wait_ref: r for r in self.replicas if r.wait_ref is not None}
            placing = {r.pg_ready: r for r in self.replicas if r.pg_ready is not None and r.state == PENDING}
            if not waits and not self.pending_failures:
                return self.finish()
            done, _ = self.ray.wait(list(waits) + list(placing), num_returns=1, timeout=0.5)
            self.check_cancel()
            for ref in done:
                if ref in placing:
                    r = placing[ref]
                    r.pg_ready = None
                    self.launch([r], new_rank0=False)
                    self.write()
                    continue
                r = waits[ref]
                if r.wait_ref is not ref:
                    continue
                r.wait_ref = None
                try:
                    self._record(r, self.ray.get(ref))
                except Exception as e:  # noqa: BLE001 - the actor (or its node) died
                    seen = time.time()  # the loss (a node's death is declared seconds later)
                    if type(e).__name__ == "ActorUnavailableError":
                        say(f"{r.name}: its actor cannot be reached ({_short(e)}); waiting for Ray's verdict")
                    died = verdict(self.ray, r.actor, e, self.check_cancel)
                    if died is None:  # it answers again: its replica still runs
                        say(f"{r.name}: its actor answers again")
                        r.wait_ref = r.actor.wait.remote()
                        continue
                    r.exit_code, r.tail, r.ended = None, _short(died), seen
                    r.infra = infra_reason(died)
                    r.actor = None
                if r.exit_code == 0:
                    r.state, r.msg = SUCCEEDED, ""
                    say(f"{r.name} succeeded")
                    self.write()
                    continue
                r.state = FAILED
                if r.infra:
                    r.msg = f"lost to the infrastructure ({r.infra}): {r.tail}"
                else:
                    r.msg = f"exited with code {r.exit_code}" if r.exit_code is not None else f"replica actor died: {r.tail}"
                say(f"{r.name} failed: {r.msg}")
                self.write()
                if self.on_failure(r):
                    return 1

    def _attempt(self, kind: str, reason: str, retried: bool, **extra: Any) -> None:
        """Record that the app's current attempt (``num_restarts``) FAILED: ``kind`` is
        ``infra`` or ``user`` (tx.specs.FailureKind's values); ``extra``: what the client
        needs to name a lost replica's save (``checkpoint_dir``, ``since``, ``until``)."""
        self.attempts.append({"index": self.num_restarts, "state": FAILED, "kind": kind, "reason": reason,
                              "retried": retried, **extra})

    def _await_save(self, r: Replica) -> Dict[str, Any]:
        """A replica lost with its actor was warned by its watchdog (SIGTERM, SIGKILL
        ``preempt_grace`` s later): where its ``TX_CHECKPOINT_DIR`` is a directory this
        driver reads, wait (at most that grace from the loss) for a save completed since
        (a ``step-*/.tx-complete`` marker written then), so that the next attempt resumes
        from it; returns ``{"checkpoint_dir", "since", "until"}`` for the client's
        ``saved step N in X s`` (tx.schedulers.saves), or {} without a location."""
        ckpt = str((r.role.get("env") or {}).get("TX_CHECKPOINT_DIR") or "")
        if ckpt.startswith("file://"):
            ckpt = ckpt[len("file://"):]
        if not ckpt:
            return {}
        lost = r.ended or time.time()
        grace = float(self.spec.get("preempt_grace_s", 0) or 0)
        since = max(lost - grace, float(r.started or 0))  # Ray may see a node's loss late
        if os.path.isdir(ckpt) or os.path.isdir(os.path.dirname(ckpt.rstrip("/"))):  # (the save may create it)
            deadline = lost + grace + 1
            while time.time() < deadline and not saved_since(ckpt, since):
                time.sleep(0.2)
        return {"checkpoint_dir": ckpt, "since": since, "until": time.time()}

    def on_failure(self, r: Replica) -> bool:
        """Restart per the role's retry policy; returns True when the app has failed.

        A replica lost to the infrastructure (:func:`infra_reason`) is restarted within the
        app's ``infra_retries`` and spends none of the role's ``max_retries``."""
        ri, role = r.role_idx, r.role
        policy = role.get("retry_policy", "APPLICATION")
        if r.infra:
            why = f"{r.name}: {r.infra}"
            retry = self.infra_used < self.infra_retries
        else:
            why = f"{r.name}: exit code {r.exit_code}" if r.exit_code is not None else f"{r.name}: {r.msg}"
            retry = self.restarts_by_role[ri] < role.get("max_retries", 0)
        saved = self._await_save(r) if r.infra else {}
        if retry:
            if r.infra:
                self.infra_used += 1
            else:
                self.restarts_by_role[ri] += 1
            self._attempt("infra" if r.infra else "user", why, True, **saved)
            self.num_restarts += 1
            if policy in ("REPLICA", "HOT_SPARE"):
                group = [r]
            elif policy == "ROLE":
                group = [x for x in self.replicas if x.role_idx == ri and x.attempt >= 0]
            else:
                group = [x for x in self.replicas if x.attempt >= 0]
            why = f"restart {self.num_restarts} ({policy}): {why}"
            say(why)
            self.stop([x for x in group if x is not r], PENDING, why)
            for x in group:
                x.state, x.msg = PENDING, why
            self.write()
            self.launch(group, new_rank0=any(x.role_idx == 0 and x.id == 0 for x in group) and len(group) > 1)
            self.write()
            return False
        if policy == "HOT_SPARE":
            alive = [x for x in self.replicas if x.role_idx == ri and x.state in (RUNNING, SUCCEEDED)]
            need = role.get("min_replicas") or role["num_replicas"]
            if len(alive) >= need:
                say(f"{r.name} failed; {len(alive)} replicas of {role['name']} remain (min {need})")
                return False
        if r.infra:
            why = f"infra_retries exhausted ({self.infra_used} used): {why}"
        self._attempt("infra" if r.infra else "user", why, False, **saved)
        others = [x for x in self.replicas if x is not r and x.state == RUNNING and x.wait_ref is not None]
        for x, res in ended_on_their_own(self, r, others):  # r only lost its peer: the others' own ends
            self._record(x, res)
            x.state, x.msg = (SUCCEEDED, "") if x.exit_code == 0 else (FAILED, f"exited with code {x.exit_code}")
        self.failure = failure_record(r, [x for x in others if x.state == FAILED])
        self.stop(self.replicas, CANCELLED, f"stopped: {r.name} failed")
        self.state = FAILED
        self.msg = f"{r.name} failed: {r.msg}"
        return True

    def finish(self) -> int:
        """Every started replica has ended: unplaced elastic replicas are given up."""
        for r in self.replicas:
            if r.state == PENDING:
                r.state, r.msg = CANCELLED, "not placed before the app ended"
        if any(r.state == FAILED for r in self.replicas) and self.failure is None:
            self.failure = failure_record(next(r for r in self.replicas if r.state == FAILED))
        self.state, self.msg = SUCCEEDED, ""
        return 0

    def cleanup(self) -> None:
        """Kill the replica actors and remove the placement groups."""
        from ray.util.placement_group import remove_placement_group

        for r in self.replicas:
            if r.actor is not None:
                try:
                    self.ray.kill(r.actor)
                except Exception:  # noqa: BLE001 - already dead
                    pass
        for pg in self.pgs:
            try:
                remove_placement_group(pg)
            except Exception:  # noqa: BLE001 - already removed
                pass


def _short(e: BaseException) -> str:
    """One line for an exception; for Ray's task and actor errors, the error they carry."""
    import re

    cause = getattr(e, "cause", None)
    if isinstance(cause, BaseException):
        e = cause
    text = re.sub(r"\x1b\[[0-9;]*m", "", str(e))
    text = " ".join(text.split())
    return text[:500] if text else type(e).__name__


def main() -> int:
    """Entry point of ``python -m tx_ray_driver``."""
    from . import SPEC_ENV

    import ray

    raw = os.environ.get(SPEC_ENV)
    if not raw:
        say(f"{SPEC_ENV} is not set: this module runs as the Ray job of a tx app")
        return 2
    spec = json.loads(raw)
    ray.init(logging_level="WARNING", log_to_driver=False)
    app = App(spec)
    say(f"app {app.app_id}: {len(app.replicas)} replicas, state in {app.dir}")
    rc = app.run()
    sys.stdout.flush()
    return rc
