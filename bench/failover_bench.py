"""Failover on the private Slurm cluster: handover time, work lost, and the watcher's cost.

Starts a private Slurm cluster (scripts/start-slurm.sh, 2 nodes, as bench/sweep_bench.py
does) and a private podman engine (scripts/start-podman.sh, as bench/docker_bench.py does),
then:

1. **Handover.** N times for each of local_cwd and local_docker (interleaved):
   ``Runner.run_with_fallback(app, [("slurm", {"partition": "down"}), target],
   pending_timeout=T)`` with the detached watcher following the run (as after ``tx run
   --detach``). Partition ``down`` of the private cluster has one node that is down, so
   the app stays PENDING on Slurm. The replica writes the kernel's uptime
   (``/proc/uptime``, 10 ms steps; the same clock inside a container) when it starts.
   Per run: the handover (replica start minus submission minus T), split into the
   watcher's noticing and cancelling (until the Slurm hop was confirmed ended) and
   submitting to the target until the replica ran.

2. **Work lost.** N times: an app runs on Slurm (partition ``debug``, ``infra_retries=0``)
   with ``--fallback local_docker``; it does one step every S seconds and checkpoints its
   step every K steps (the step, written to ``$TX_CHECKPOINT_DIR`` under a temporary name
   and moved into place). After a random number of steps (K+1 to 3K) its node is set
   down (``scontrol update nodename=... state=down``): the job ends NODE_FAIL, an
   infrastructure failure, and the watcher fails the run over to local_docker, which
   resumes from the checkpoint. Per run: the steps done twice (the last step done on
   Slurm minus the step resumed from: at most K-1 when nothing is lost beyond the
   checkpoint), whether any Slurm step came after the container's first (the run on two
   backends at once), and the seconds from the node going down to the container's first
   step.

3. **The watcher's cost**: M runs (default 200) PENDING on Slurm (partition ``down``)
   under a long timeout, one :func:`tx.runner.failover.poll` over all of them (what the
   watcher does each second): the Slurm commands it runs, its wall and CPU time, and the
   process's peak memory.

Writes bench/RESULTS-recovery.md. Needs root, Slurm's packages (scripts/install-slurm.sh)
and podman (scripts/install-podman.sh).

    python bench/failover_bench.py [--runs 6] [--timeout 3] [--lost-runs 6] [--every 4] [--followed 200]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import random
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any, Dict, List

sys.path.insert(0, str(Path(__file__).resolve().parent))
from docker_bench import IMAGE, start_engine, stop_engine  # noqa: E402 - the sibling bench's engine helpers
from slurm_bench import REPO, SCRIPTS, free_ports  # noqa: E402 - the sibling bench's cluster helpers

#: the replica of a handover run: the kernel's uptime when it starts, into its checkpoint dir
STARTED = 'mkdir -p "$TX_CHECKPOINT_DIR" && read u _ < /proc/uptime && echo "$u" > "$TX_CHECKPOINT_DIR/started"'
#: the replica of a work-lost run (POSIX sh: dash on Slurm, busybox in the container): one
#: step every {step} s up to {steps}, the step checkpointed every {every}; each line of
#: progress says where it ran and the kernel's uptime
STEPS = ('d="$TX_CHECKPOINT_DIR"; mkdir -p "$d"; w=docker; [ -n "$SLURM_JOB_ID" ] && w=slurm; '
         's=$(cat "$d/ckpt" 2>/dev/null || echo 0); read u _ < /proc/uptime; echo "resume $s $w $u" >> "$d/progress"; '
         'while [ "$s" -lt {steps} ]; do sleep {step}; s=$((s + 1)); read u _ < /proc/uptime; '
         'echo "step $s $w $u" >> "$d/progress"; '
         'if [ $((s % {every})) -eq 0 ]; then echo "$s" > "$d/ckpt.tmp"; mv "$d/ckpt.tmp" "$d/ckpt"; fi; done')


def uptime_offset() -> float:
    """Seconds to add to a ``/proc/uptime`` reading to get the time since the epoch."""
    with open("/proc/uptime") as f:
        up = float(f.read().split()[0])
    return time.time() - up


def ckpt_dir(rec: Any) -> Path:
    return Path(rec.appdef["roles"][0]["env"]["TX_CHECKPOINT_DIR"])


def wait_file(path: Path, timeout: float = 120) -> str:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return path.read_text()
        time.sleep(0.02)
    raise SystemExit(f"{path} not written in {timeout} s")


def load() -> str:
    return "/".join(f"{x:.1f}" for x in os.getloadavg())


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--runs", type=int, default=6, help="handover runs per target")
    ap.add_argument("--timeout", type=float, default=3.0, help="the pending timeout, seconds")
    ap.add_argument("--lost-runs", type=int, default=6, help="work-lost runs")
    ap.add_argument("--every", type=int, default=4, help="K: a checkpoint every K steps")
    ap.add_argument("--step", type=float, default=0.5, help="seconds per step")
    ap.add_argument("--followed", type=int, default=200, help="runs the watcher follows at once")
    ap.add_argument("--out", default=str(REPO / "bench" / "RESULTS-recovery.md"))
    args = ap.parse_args()

    base = Path(tempfile.mkdtemp(prefix="tx-failover-bench-"))
    port = free_ports(6)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SLURM_", "SBATCH_", "SQUEUE_"))}
    env.update(SLURM_BASE=str(base), SLURM_NODES="2", SLURM_CLUSTER_NAME="txfobench",
               SLURM_CTLD_PORT=str(port), SLURMD_PORT_BASE=str(port))
    p = subprocess.run(["bash", str(SCRIPTS / "start-slurm.sh")], env=env, capture_output=True, text=True,
                       timeout=180)
    if p.returncode != 0:
        raise SystemExit(f"start-slurm.sh failed: {p.stderr[-2000:]}")
    for k in [k for k in os.environ if k.startswith(("SLURM_", "SBATCH_", "SQUEUE_"))]:
        del os.environ[k]
    os.environ["SLURM_CONF"] = str(base / "etc" / "slurm.conf")
    os.environ["TX_STATE_DIR"] = str(base / "tx-state")
    podman_base = str(base / "podman")
    engine: Dict[str, str] = {}
    rows: List[Dict[str, Any]] = []
    lost: List[Dict[str, Any]] = []
    loads = {"start": load()}
    rng = random.Random(28)
    try:
        engine = start_engine(podman_base)
        os.environ.update(engine)
        from tx.runner import Runner
        from tx.runner.failover import load_record
        from tx.specs import AppDef, Resource, Role

        slurm_down = ("slurm", {"job_dir": str(base / "jobs"), "partition": "down"})
        res = Resource(cpu=1, gpu=0, memMB=64)
        with Runner("bench") as runner:
            for i in range(args.runs):
                for target in ("local_cwd", "local_docker"):
                    role = Role("w", image=IMAGE if target == "local_docker" else "", entrypoint="sh",
                                args=["-c", STARTED], resource=res)
                    handle = runner.run_with_fallback(AppDef(f"{target.replace('_', '')}{i}", [role]),
                                                      [slurm_down, (target, {})], pending_timeout=args.timeout)
                    rec = load_record(handle)
                    ran = float(wait_file(ckpt_dir(rec) / "started")) + uptime_offset()
                    status = runner.wait(handle, wait_interval=0.2, timeout=60)
                    assert status is not None and status.state.name == "SUCCEEDED", status
                    rec = load_record(handle)
                    slurm, nxt = rec.hops
                    due = slurm.submitted + args.timeout
                    rows.append({"target": target, "handover": ran - due, "cancelled": slurm.ended - due,
                                 "submitted": ran - nxt.submitted, "why": slurm.why})
            loads["after handover"] = load()

            steps = 6 * args.every
            script = STEPS.format(steps=steps, step=args.step, every=args.every)
            debug = ("slurm", {"job_dir": str(base / "jobs"), "infra_retries": 0})
            for i in range(args.lost_runs):
                role = Role("w", image=IMAGE, entrypoint="sh", args=["-c", script], resource=res)
                handle = runner.run_with_fallback(AppDef(f"lost{i}", [role]), [debug, ("local_docker", {})])
                rec = load_record(handle)
                progress = ckpt_dir(rec) / "progress"
                at = rng.randint(args.every + 1, 3 * args.every)
                deadline = time.monotonic() + 120
                while f"step {at} slurm" not in (progress.read_text() if progress.exists() else ""):
                    assert time.monotonic() < deadline, f"run {i}: step {at} not reached on Slurm"
                    time.sleep(0.02)
                slurm_id = rec.hops[0].app_id
                node = subprocess.run(["squeue", "-h", "-j", slurm_id, "-o", "%N"], capture_output=True, text=True,
                                      timeout=30).stdout.strip()
                downed = time.time()
                subprocess.run(["scontrol", "update", f"nodename={node}", "state=down", "reason=tx-bench"],
                               check=True, timeout=30)
                status = runner.wait(handle, wait_interval=0.2, timeout=180)
                # back in service (slurmd, alive, registers again: then "resume" is refused)
                subprocess.run(["scontrol", "update", f"nodename={node}", "state=resume"], capture_output=True,
                               timeout=30)
                rec = load_record(handle)
                assert status is not None and status.state.name == "SUCCEEDED", (status, rec)
                offset = uptime_offset()
                lines = [ln.split() for ln in progress.read_text().splitlines()]
                slurm_steps = [int(w[1]) for w in lines if w[0] == "step" and w[2] == "slurm"]
                resumed = [(int(w[1]), float(w[3])) for w in lines if w[0] == "resume" and w[2] == "docker"]
                docker_steps = [(int(w[1]), float(w[3])) for w in lines if w[0] == "step" and w[2] == "docker"]
                first_docker = resumed[0][1]
                late = [w for w in lines if w[2] == "slurm" and float(w[3]) > first_docker]
                lost.append({"down_at_step": at, "slurm_last": max(slurm_steps), "resumed_from": resumed[0][0],
                             "redone": max(slurm_steps) - resumed[0][0], "slurm_after_docker": len(late),
                             "docker_first_step": docker_steps[0][0], "final_step": docker_steps[-1][0],
                             "down_to_container": first_docker + offset - downed,
                             "why": rec.hops[0].why, "hops": [h.scheduler for h in rec.hops]})
                for _ in range(100):  # the node back in service before the next run
                    st = subprocess.run(["sinfo", "-h", "-n", node, "-o", "%t"], capture_output=True, text=True,
                                        timeout=30).stdout.strip()
                    if st == "idle":
                        break
                    time.sleep(0.2)
            loads["after work lost"] = load()

            # the watcher's cost: M pending runs, one poll over all (after a first that
            # records their state)
            from tx.runner.failover import list_records, poll
            from tx_scheduler_slurm import _client

            role = Role("w", image="", entrypoint="true", resource=res)
            for i in range(args.followed):
                runner.run_with_fallback(AppDef(f"followed{i}", [role]), [slurm_down, "local_cwd"],
                                         pending_timeout=3600, watch=False)
            records = list_records(unfinished=True)
            assert len(records) == args.followed, len(records)
            poll(runner, records)
            real, calls = _client.run, []

            def counted(argv, *a, **kw):  # type: ignore[no-untyped-def]
                calls.append(argv[0])
                return real(argv, *a, **kw)

            _client.run = counted
            try:
                cpu, t = time.process_time(), time.perf_counter()
                poll(runner, list_records(unfinished=True))
                cost = {"wall": time.perf_counter() - t, "cpu": time.process_time() - cpu,
                        "calls": {c: calls.count(c) for c in sorted(set(calls))},
                        "rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}
            finally:
                _client.run = real
            loads["end"] = load()
    finally:
        subprocess.run(["scancel", "--user", "root"], capture_output=True, timeout=60)
        subprocess.run(["bash", str(SCRIPTS / "stop-slurm.sh")], env=env, capture_output=True, timeout=120)
        if engine:
            stop_engine(podman_base, engine)

    def stats(xs: List[float], unit: str = " s", fmt: str = ".2f") -> str:
        return (f"{statistics.median(xs):{fmt}}{unit} | {min(xs):{fmt}}{unit} | {max(xs):{fmt}}{unit} | "
                f"{statistics.stdev(xs) if len(xs) > 1 else 0:{fmt}}{unit}")

    def col(target: str, key: str) -> str:
        return stats([r[key] for r in rows if r["target"] == target])

    worst = {t: max(r["handover"] for r in rows if r["target"] == t) for t in ("local_cwd", "local_docker")}
    n = {t: sum(r["target"] == t for r in rows) for t in ("local_cwd", "local_docker")}
    whys = sorted({r["why"] for r in rows})
    redone = [r["redone"] for r in lost]
    text = [
        "# Recovery: failover handover time, work lost, the watcher's cost",
        "",
        f"`python bench/failover_bench.py --runs {args.runs} --timeout {args.timeout:g} --lost-runs {args.lost_runs} "
        f"--every {args.every} --step {args.step:g} --followed {args.followed}` on {platform.node()} "
        f"({os.cpu_count()} CPUs, Python {platform.python_version()}, shared with other work: load average "
        f"1/5/15 min {', '.join(f'{k} {v}' for k, v in loads.items())}), "
        f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}: a private Slurm cluster "
        "(scripts/start-slurm.sh, 2 nodes) and a private podman engine (scripts/start-podman.sh). "
        "The machine is shared: times vary by tens of percent.",
        "",
        "## Handover: PENDING on a cluster whose nodes are down",
        "",
        "Each run an app submitted to Slurm's partition `down` (its only node is down: the app stays "
        f"PENDING) with `--fallback TARGET --pending_timeout {args.timeout:g}s`, followed by the detached "
        "watcher (1 s polls), TARGET local_cwd and local_docker in turn. The replica writes the kernel's "
        f"uptime when it starts. n={n['local_cwd']} per target. Budget (issue 28): the timeout plus 5 s, "
        f"so at most 5 s after the timeout: worst local_cwd {worst['local_cwd']:.2f} s, worst local_docker "
        f"{worst['local_docker']:.2f} s ({'within' if max(worst.values()) <= 5 else 'OVER'} budget).",
        "",
        "| from the timeout's end until | target | median | min | max | stdev |",
        "| --- | --- | --- | --- | --- | --- |",
        f"| the replica runs (**handover**) | local_docker | {col('local_docker', 'handover')} |",
        f"| the replica runs (**handover**) | local_cwd | {col('local_cwd', 'handover')} |",
        f"| the Slurm hop is confirmed cancelled | local_docker | {col('local_docker', 'cancelled')} |",
        f"| the Slurm hop is confirmed cancelled | local_cwd | {col('local_cwd', 'cancelled')} |",
        "",
        "| from the target's submission until | target | median | min | max | stdev |",
        "| --- | --- | --- | --- | --- | --- |",
        f"| the replica runs | local_docker | {col('local_docker', 'submitted')} |",
        f"| the replica runs | local_cwd | {col('local_cwd', 'submitted')} |",
        "",
        "Why the Slurm hop was left (every distinct text): " + "; ".join(f"`{w}`" for w in whys) + ".",
        "",
        "The handover is the watcher's poll (up to 1 s after the timeout), `scancel` and the",
        "confirmation that Slurm ended the job (a `describe` every 0.5 s), then the target's",
        "dryrun and submission (local_docker: a network and a container on podman) and the",
        "replica's start. Until 2026-11-26 this bench held the app with a dependency on a held job",
        "and its replica wrote the time from a Python interpreter (local_cwd only: handover median",
        "1.54 s, 0.91-2.60 s, n=10); the shell's start here is shorter.",
        "",
        "## Work lost to a failover",
        "",
        f"Each run an app on Slurm (partition `debug`, `infra_retries=0`, `--fallback local_docker`) does a step "
        f"every {args.step:g} s, {6 * args.every} in all, and checkpoints its step every **K={args.every}** steps "
        "(written under a temporary name in `$TX_CHECKPOINT_DIR`, then moved into place). After a random "
        f"step between {args.every + 1} and {3 * args.every} its node is set down (`scontrol update "
        "nodename=... state=down`): the job ends NODE_FAIL, tx's infrastructure failure, and the watcher fails "
        f"the run over to local_docker, which resumes from the checkpoint. n={len(lost)}.",
        "",
        "| | median | min | max | stdev |",
        "| --- | --- | --- | --- | --- |",
        f"| steps done twice (last step on Slurm minus the step resumed from) | {stats(redone, '', '.1f')} |",
        f"| node down until the container's first line | {stats([r['down_to_container'] for r in lost])} |",
        "",
        f"Steps done twice: at most {max(redone)}, against one checkpoint interval of {args.every} steps "
        f"({'within' if max(redone) <= args.every else 'OVER'} the budget: at most one interval). Slurm steps "
        f"logged after the container's first line (the run on two backends at once): "
        f"{sum(r['slurm_after_docker'] for r in lost)}. Every run ended SUCCEEDED on "
        f"`{' -> '.join(lost[0]['hops'])}` at step {lost[0]['final_step']}; why the Slurm hop was left: "
        + "; ".join(f"`{w}`" for w in sorted({r['why'] for r in lost})) + ".",
        "",
        f"## The watcher's cost at {args.followed} followed runs",
        "",
        f"{args.followed} runs, each PENDING on Slurm (partition `down`) under a 1 h timeout, one poll over all "
        "of them (the watcher polls every second):",
        "",
        "| Slurm commands per poll | wall | CPU | peak memory of the process |",
        "| --- | --- | --- | --- |",
        f"| {', '.join(f'{n} {c}' for c, n in cost['calls'].items()) or 'none'} | {cost['wall']:.2f} s | "
        f"{cost['cpu']:.2f} s | {cost['rss_mb']:.0f} MB |",
        "",
        "One `squeue` lists every live hop on Slurm; a run is described further only when it may",
        "fail over (pending past its timeout, or FAILED). Each run's step also takes its record's",
        "lock and reads its record (a file per run under the state directory).",
        "",
        "Raw, handover (seconds): " + json.dumps([{k: round(v, 3) if isinstance(v, float) else v
                                                   for k, v in r.items()} for r in rows]),
        "",
        "Raw, work lost: " + json.dumps([{k: round(v, 3) if isinstance(v, float) else v for k, v in r.items()}
                                         for r in lost]),
        "",
    ]
    Path(args.out).write_text("\n".join(text))
    print("\n".join(text))


if __name__ == "__main__":
    sys.exit(main())
