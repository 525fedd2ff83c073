#!/usr/bin/env python3
"""Preemption chaos benchmark (issue 39): preemptions at seeded random moments of a two-rank
DDP training loop, each checked against the four criteria.

    python bench/chaos_preemption.py -n 100                        # every backend runnable here
    python bench/chaos_preemption.py --backend local_cwd --warning rank -n 100 --seed 1
    python bench/chaos_preemption.py --backend slurm -n 30
    python bench/chaos_preemption.py --backend kubernetes,gcp_batch,aws_batch,local_docker,ray -n 100
    python bench/chaos_preemption.py --backend local_cwd -n 2 --out-dir /tmp/x   # a smoke run

The job is examples/train.py under ``dist.ddp -j 1x2`` (two ranks over gloo, short steps,
a periodic save every 6 steps, an evaluation every 8 steps with a collective, every
checkpoint kept, ``--phase-log``). One run takes many preemptions in turn (``infra_retries``
high): for each, a seeded RNG picks the phase to aim at (start-up, mid-step, periodic save,
evaluation) and a delay into it; the driver waits for the attempt to enter that phase (its
ranks' phase log), waits the delay, and warns: ``local_cwd`` SIGTERM to one rank (chosen
by the RNG) or to the app's supervisor (then ``tx status`` starts it again, as after a
reboot); ``slurm`` submits an exclusive job to partition ``high`` on the private cluster
(scripts/start-slurm.sh: partition ``low`` has ``GraceTime=5``), which preempts the job;
``local_docker``, ``kubernetes``, ``gcp_batch``, ``aws_batch`` and ``ray``: the mechanism of
the backend's own preemption test, on a backend started privately (:mod:`chaos_drivers`). It
records when, which processes were the ranks, when each was seen gone, and the next
attempt's ranks; :mod:`chaos_check` judges each injection from the checkpoint directory and
the phase log (the phase actually hit is the job's, not the one aimed at) and writes
bench/RESULTS-preemption.md and .json (entries of backends not run are kept; those never run
are listed as not yet run, with no numbers). ``--backend`` takes any of them; by default
local_cwd, and slurm where it can run.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any, Dict, List, Optional

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from _common import REPO, git_state, load_avg, start_slurm, stop_slurm  # noqa: E402
from chaos_check import BACKENDS, attempt_start, judge_runs, read_events, summary, write_results  # noqa: E402
from chaos_drivers import DRIVERS, Driver, rank_procs, tx_run_argv, until  # noqa: E402

TRAIN = REPO / "examples" / "train.py"
PHASES = ("start-up", "mid-step", "periodic save", "evaluation")
JOB = ("--epochs", "100000", "--step-sleep", "0.05", "--save-every", "6", "--eval-every", "8",
       "--eval-sleep", "0.3", "--keep", "1000000", "--output-dir", "out")
TERMINAL = ("SUCCEEDED", "FAILED", "CANCELLED")


def ranks_of(app_id: str) -> Dict[int, int]:
    """``{rank: pid}`` of the app's live training processes (``TX_APP_ID`` and ``RANK`` in
    their environment; torchrun's own process has no ``RANK``)."""
    out = {}
    for name in os.listdir("/proc"):
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/environ", "rb") as f:
                env = f.read().split(b"\0")
        except OSError:
            continue
        if f"TX_APP_ID={app_id}".encode() in env:
            rank = [e for e in env if e.startswith(b"RANK=")]
            if rank and alive(int(name)):
                out[int(rank[0][5:])] = int(name)
    return out


def alive(pid: int) -> bool:
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] != "Z"
    except OSError:
        return False


class Bench:
    """One backend and warning: runs, injections, and what was seen of each."""

    def __init__(self, args: argparse.Namespace, backend: str, warning: str, work: Path,
                 driver: Optional[Driver] = None) -> None:
        self.args, self.backend, self.warning, self.work = args, backend, warning, work
        self.driver = driver
        if driver is not None:
            driver.bind(work)
        self.rng = random.Random(f"{args.seed}-{backend}-{warning}")
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("TX_")}
        self.env.update(TX_STATE_DIR=str(work / "state"), HOME=str(work / "home"), TMPDIR=str(work / "tmp"))
        self.env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{self.env['PATH']}"
        for d in ("state", "home", "tmp"):
            (work / d).mkdir(parents=True, exist_ok=True)
        self.grace = args.grace if backend == "local_cwd" else driver.grace if driver else 5.0
        self.hosts: Dict[int, int] = {}  # a rank's pid in the phase log -> its pid on this host (containers)
        self.runs: List[Dict[str, Any]] = []
        self.deadline = time.monotonic() + args.budget
        self.est = {"start-up": 4.0, "mid-step": 0.06, "periodic save": 0.1, "evaluation": 0.3}

    def tx(self, *argv: str, timeout: float = 120) -> subprocess.CompletedProcess:
        return subprocess.run(["tx", *argv], cwd=getattr(self.driver, "cwd", self.work), env=self.env,
                              capture_output=True, text=True, timeout=timeout)

    def launch(self) -> Dict[str, Any]:
        k = len(self.runs)
        ph = self.work / f"phases-{k}.jsonl"
        ph.touch()
        cfg = (f"preempt_grace={self.grace:g},infra_retries=100000" if self.backend == "local_cwd"
               else "partition=low,infra_retries=100000")
        argv = ["run", "-s", self.backend, "-cfg", cfg, "dist.ddp", "-j", "1x2", "--script", str(TRAIN), "--",
                *JOB, "--phase-log", str(ph)]
        if self.backend == "local_cwd":
            argv.insert(1, "--detach")
        if self.driver is not None:
            argv = tx_run_argv(self.driver, TRAIN, JOB, ph)
        p = self.tx(*argv, timeout=600)
        if p.returncode != 0:
            raise SystemExit(f"tx run failed: {p.stderr[-2000:]}")
        handle = p.stdout.strip().splitlines()[-1]
        desc = self.tx("describe", handle).stdout
        ckpt = Path(re.search(r"TX_CHECKPOINT_DIR: (\S+)", desc).group(1))
        run = {"handle": handle, "app_id": handle.rsplit("/", 1)[1], "ckpt": ckpt, "phases": ph, "inj": [],
               "handles": [handle]}
        self.runs.append(run)
        return run

    def resume(self, run: Dict[str, Any]) -> None:
        """The next attempt as a new app continuing the run's checkpoints (``tx run --resume``:
        aws_batch on moto, which runs no retry attempts); the run's handle becomes its."""
        assert self.driver is not None
        p = self.tx(*tx_run_argv(self.driver, TRAIN, JOB, run["phases"], resume=run["handle"]), timeout=600)
        if p.returncode != 0:
            raise SystemExit(f"tx run --resume failed: {p.stderr[-2000:]}")
        run["handle"] = p.stdout.strip().splitlines()[-1]
        run["app_id"] = run["handle"].rsplit("/", 1)[1]
        run["handles"].append(run["handle"])

    def status(self, run: Dict[str, Any]) -> str:
        p = self.tx("status", "--json", run["handle"])
        try:
            return json.loads(p.stdout)["state"]
        except (ValueError, KeyError):
            return "?"

    def new_ranks(self, run: Dict[str, Any], old: List[int], timeout: float = 180) -> Dict[int, int]:
        """The next attempt's two ranks (pids not in ``old``), started again by tx where it
        must be (local_cwd after a warning to its supervisor: the next look starts it)."""
        state = Path(self.env["TX_STATE_DIR"]) / "local" / "apps" / run["app_id"] / "state.json"

        if self.driver is not None:
            return self._driver_ranks(run, old)

        def look():
            r = ranks_of(run["app_id"])
            if len(r) == 2 and not set(r.values()) & set(old):
                return r
            if self.backend == "local_cwd":  # ended for good: no next attempt will come
                try:
                    return "ended" if json.loads(state.read_text())["state"] in TERMINAL else None
                except (OSError, ValueError, KeyError):
                    return None
            return None
        got = until(look, 20, 0.2)
        if got is None and self.backend == "local_cwd":
            self.status(run)  # the next look starts an app whose supervisor left after a warning
        got = got or until(look, timeout, 0.3)
        return got if isinstance(got, dict) else {}

    def _driver_ranks(self, run: Dict[str, Any], old: List[int]) -> Dict[int, int]:
        """:meth:`new_ranks` on a driver's backend: the ranks by the phase log named in their
        command line, known by the pid they log (``self.hosts``: their pid on this host);
        ``tx status`` every ``look_every`` s where a look starts the next attempt."""
        assert self.driver is not None
        oldhost = {self.hosts.get(p, p) for p in old}
        deadline = time.monotonic() + self.driver.start_timeout
        last_look = time.monotonic()
        while time.monotonic() < deadline:
            r = rank_procs(str(run["phases"]))
            if len(r) == 2 and not {h for h, _ in r.values()} & oldhost:
                self.hosts.update({ns: h for h, ns in r.values()})
                return {k: ns for k, (h, ns) in r.items()}
            if self.driver.look_every and time.monotonic() - last_look > self.driver.look_every:
                last_look = time.monotonic()
                if self.status(run) in TERMINAL:
                    return {}
            time.sleep(0.2)
        return {}

    def aim(self, run: Dict[str, Any], pids: List[int], chosen: str, u: float, seen_at: float) -> None:
        """Wait until rank 0 of ``pids`` enters ``chosen`` (from the phase log), then ``u`` of
        that phase's typical length. Only lines after the previous attempt ended count (in a
        container every attempt's ranks have the same pids)."""
        since = attempt_start(run["inj"][-1]) if run["inj"] else 0.0
        want = {"mid-step": ("step",), "periodic save": ("save",), "evaluation": ("eval",)}.get(chosen)
        if want is None:  # start-up: from when the ranks were seen
            time.sleep(max(0.0, seen_at + u * self.est["start-up"] - time.time()))
            return
        fd, pos = open(run["phases"], "rb"), 0
        deadline = time.monotonic() + 60
        try:
            while time.monotonic() < deadline:
                fd.seek(pos)
                chunk = fd.read()
                for line in chunk.splitlines(keepends=True):
                    if not line.endswith(b"\n"):
                        break
                    pos += len(line)
                    e = json.loads(line)
                    if e["pid"] in pids and e["rank"] == 0 and e["phase"] in want and e["t"] >= since:
                        time.sleep(max(0.0, e["t"] + u * self.est[chosen] - time.time()))
                        return
                time.sleep(0.01)
        finally:
            fd.close()

    def inject(self, run: Dict[str, Any], ranks: Dict[int, int], seen_at: float) -> Dict[str, Any]:
        """One preemption of the attempt whose ranks are ``ranks`` (seen at ``seen_at``); the
        driver's record."""
        i = sum(len(r["inj"]) for r in self.runs)
        chosen, u = self.rng.choice(PHASES), round(self.rng.random(), 4)
        pids = sorted(ranks.values())
        self.aim(run, pids, chosen, u, seen_at)
        rec: Dict[str, Any] = {"i": i, "chosen": chosen, "u": u, "pids": pids, "exact_time": True}
        if self.driver is not None:
            rec.update(self.driver.warn(self, run))
        elif self.backend == "local_cwd" and self.warning == "rank":
            target = self.rng.choice(sorted(ranks))
            rec["t"] = time.time()
            os.kill(ranks[target], signal.SIGTERM)
            rec["target"] = f"rank {target}"
        elif self.backend == "local_cwd":
            state = Path(self.env["TX_STATE_DIR"]) / "local" / "apps" / run["app_id"] / "state.json"
            sup = json.loads(state.read_text())["pid"]
            rec["t"] = time.time()
            os.kill(sup, signal.SIGTERM)
            rec["target"] = f"supervisor {sup}"
        else:  # slurm: a job of partition high needs the node
            rec["t"], rec["exact_time"], rec["target"] = time.time(), False, "sbatch -p high --exclusive"
            p = subprocess.run(["sbatch", "-p", "high", "--exclusive", "-o", "/dev/null", "--wrap", "true"],
                               env=self.env, cwd=self.work, capture_output=True, text=True, timeout=60)
            if p.returncode != 0:
                raise SystemExit(f"sbatch failed: {p.stderr}")
        ends: Dict[int, Optional[float]] = {pid: None for pid in pids}

        def gone() -> bool:
            for pid in pids:
                if ends[pid] is None and not alive(self.hosts.get(pid, pid)):
                    ends[pid] = time.time()
            return all(v is not None for v in ends.values())
        until(gone, self.grace + 60, 0.02)
        rec["ends"] = ends
        if self.driver is not None:
            self.driver.after(self, run, rec)
        if self.warning == "supervisor":  # it leaves once the ranks are gone; a look starts it again
            until(lambda: not alive(sup), 60, 0.05)
            self.status(run)
        run["inj"].append(rec)
        return rec

    def one_run(self, todo: int) -> int:
        """A run taking up to ``todo`` preemptions; returns how many it took."""
        run = self.launch()
        try:
            return self._injections(run, todo)
        except BaseException:
            self.tx("cancel", run["handle"])  # never leave a run training when the driver fails
            raise

    def _injections(self, run: Dict[str, Any], todo: int) -> int:
        old: List[int] = []
        done = 0
        if self.driver is not None:
            todo = min(todo, self.driver.per_run)
        while done < todo and time.monotonic() < self.deadline:
            ranks = self.new_ranks(run, old)
            if not ranks:
                if run["inj"]:
                    run["inj"][-1]["after"] = f"no next attempt; the app is {self.status(run)}"
                break
            if run["inj"]:
                run["inj"][-1]["next_pids"] = sorted(ranks.values())
            self.learn(run)
            seen_at = time.time()
            rec = self.inject(run, ranks, seen_at)
            rec["seen_at"] = seen_at
            old = rec["pids"]
            (self.work / "driver.json").write_text(json.dumps(self.runs, indent=1, default=str))
            done += 1
            print(f"[chaos] {self.backend}/{self.warning} #{rec['i']}: aimed {rec['chosen']} "
                  f"(u={rec['u']}), {rec['target']}", flush=True)
        if run["inj"] and "next_pids" not in run["inj"][-1] and "after" not in run["inj"][-1]:
            nxt = self.new_ranks(run, old)  # the last one's next attempt must load too
            run["inj"][-1]["next_pids"] = sorted(nxt.values())
            if not nxt:
                run["inj"][-1]["after"] = f"no next attempt; the app is {self.status(run)}"
            until(lambda: not nxt or any(e["pid"] in run["inj"][-1]["next_pids"] and e["phase"] in ("resumed", "fresh")
                              and e["t"] > run["inj"][-1]["t"] for e in read_events(run["phases"])), 120, 0.3)
        (self.work / "driver.json").write_text(json.dumps(self.runs, indent=1, default=str))
        self.tx("cancel", run["handle"])
        until(lambda: self.status(run) in TERMINAL, 120, 1.0)
        return done

    def learn(self, run: Dict[str, Any]) -> None:
        """Typical phase lengths from what the job logged so far (rank 0)."""
        ev = [e for e in read_events(run["phases"]) if e["rank"] == 0]
        ups = [min(e["t"] for e in ev if e["pid"] in inj["pids"] and e["phase"] == "step") - inj["seen_at"]
               for inj in run["inj"] if any(e["pid"] in inj["pids"] and e["phase"] == "step" for e in ev)]
        if ups:
            self.est["start-up"] = sorted(ups)[len(ups) // 2]
        for a, b, name in (("save", "saved", "periodic save"), ("eval", "evaled", "evaluation"),
                           ("step", "stepped", "mid-step")):
            starts = {e["pid"] * 10**9 + e["step"]: e["t"] for e in ev if e["phase"] == a}
            lens = [e["t"] - starts[k] for e in ev if e["phase"] == b
                    and (k := e["pid"] * 10**9 + e["step"]) in starts]
            if lens:
                self.est[name] = sorted(lens)[len(lens) // 2]

    def judged(self) -> List[Dict[str, Any]]:
        return judge_runs(self.runs, self.grace)


def run_backend(args: argparse.Namespace, backend: str, warning: str,
                driver: Optional[Driver] = None) -> Dict[str, Any]:
    work = Path(args.out_dir) / ".work" / "chaos" / f"{backend}-{warning}-{int(time.time())}"
    work.mkdir(parents=True, exist_ok=True)
    b = Bench(args, backend, warning, work, driver)
    load0, t0 = load_avg(), time.monotonic()
    while sum(len(r["inj"]) for r in b.runs) < args.n and len(b.runs) < args.n + 3 and \
            time.monotonic() < b.deadline:
        b.one_run(args.n - sum(len(r["inj"]) for r in b.runs))
    judged = b.judged()
    (work / "injections.json").write_text(json.dumps(judged, indent=1, default=str) + "\n")
    real = backend in ("local_cwd", "slurm") or bool(driver and driver.real)
    what = driver.warning if driver else {
        "rank": "SIGTERM to one rank (random)", "supervisor": "SIGTERM to the app's supervisor",
        "high": "a job of partition high preempts (REQUEUE, GraceTime)"}[warning]
    extra = {"seed": args.seed, "runs": len(b.runs), "seconds": round(time.monotonic() - t0),
             "load": f"{load0} -> {load_avg()}", "work": str(work)}
    if driver is not None:
        extra["note"] = driver.note
    return summary(backend, what, judged, real, b.grace, extra)


def merge(args: argparse.Namespace) -> int:
    """Merge the run entries of several results files (runs made apart, each with its own
    stamp) into --out-dir's, with the analysis of their misses."""
    notes = json.loads(Path(args.analysis).read_text()) if args.analysis else {}
    entries, stamps = [], []
    for f in args.merge:
        doc = json.loads(Path(f).read_text())
        stamps.append(doc["stamp"].replace("Stamp: ", ""))
        for e in doc["backends"]:
            if e.get("injected"):
                driver = Path(e.get("work", ""), "driver.json")
                if driver.is_file():  # judged again from the run's records, with this judge
                    runs = json.loads(driver.read_text())
                    old = Path(e["work"], "injections.json")  # the records as they ended
                    done = {j["i"]: j for j in json.loads(old.read_text())} if old.is_file() else {}
                    for inj in (x for r in runs for x in r["inj"]):
                        for k in ("next_pids", "after"):
                            if k not in inj and k in done.get(inj["i"], {}):
                                inj[k] = done[inj["i"]][k]
                    judged = judge_runs(runs, e["grace_s"])
                    e = summary(e["backend"], e["warning"], judged, e["real_backend"],
                                e["grace_s"], {k: e[k] for k in ("seed", "runs", "seconds", "load", "work", "note")
                                               if k in e})
                kind = {"SIGTERM to one rank (random)": "rank", "SIGTERM to the app's supervisor": "supervisor"}
                e["analysis"] = notes.get(f"{e['backend']}/{kind.get(e['warning'], 'high' if e['backend'] == 'slurm' else 'stop')}", e.get("analysis", ""))
                entries.append(e)
    out = Path(args.out_dir)
    write_results(out / "RESULTS-preemption.json", out / "RESULTS-preemption.md", entries,
                  "Stamp: runs made apart, merged: " + notes.get("_stamp", " / ".join(stamps)))
    return 0


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--backend", default="", help=f"comma list of {', '.join(BACKENDS)} (default: runnable here)")
    ap.add_argument("--warning", default="", help="local_cwd: rank, supervisor (default both)")
    ap.add_argument("-n", type=int, default=100, help="injections per backend and warning (default 100)")
    ap.add_argument("--seed", type=int, default=39)
    ap.add_argument("--grace", type=float, default=10.0, help="local_cwd preempt_grace (s, default 10)")
    ap.add_argument("--budget", type=float, default=3 * 3600,
                    help="seconds per backend and warning: no new injection after it (default 3 h)")
    ap.add_argument("--out-dir", default=str(HERE), help="where RESULTS-preemption.{md,json} go")
    ap.add_argument("--merge", nargs="*", default=[],
                    help="run nothing: merge these RESULTS-preemption.json files (runs made apart) into --out-dir's")
    ap.add_argument("--analysis", default="",
                    help="with --merge: a JSON file {\"BACKEND/WARNING\": \"what the misses were\"} added to the entries "
                         "(\"_stamp\": the stamp, where the runs' own are not right)")
    args = ap.parse_args()
    if args.merge:
        return merge(args)
    names = [b for b in args.backend.split(",") if b] or ["local_cwd"] + (
        ["slurm"] if shutil.which("slurmctld") and os.geteuid() == 0 else [])
    for b in names:
        if b not in BACKENDS:
            print(f"chaos: unknown backend {b} (one of {', '.join(BACKENDS)})", file=sys.stderr)
            return 2
        if BACKENDS[b].startswith("not yet"):
            print(f"chaos: {b}: {BACKENDS[b]}", file=sys.stderr)
            return 2
    git = git_state()  # the code measured: the commit when the run started
    entries = []
    for b in names:
        warnings = ([w for w in args.warning.split(",") if w] or ["rank", "supervisor"]) if b == "local_cwd" \
            else ["high"] if b == "slurm" else ["stop"]
        driver = DRIVERS[b]() if b in DRIVERS else None
        if b == "slurm":
            slurm_env = start_slurm(Path(args.out_dir) / ".work" / "chaos-slurm")
        elif driver is not None:
            driver.start(Path(args.out_dir) / ".work" / f"chaos-{b}")
        try:
            entries += [run_backend(args, b, w, driver) for w in warnings]
        finally:
            if b == "slurm":
                stop_slurm(slurm_env)
            elif driver is not None:
                driver.stop()
    stamp = (f"Stamp: commit {git['commit'][:12]} (tree dirty: {git['dirty']}), "
             f"{time.strftime('%Y-%m-%d %H:%M UTC', time.gmtime())}, load average now {load_avg()}, "
             f"n={args.n}, `python bench/chaos_preemption.py {' '.join(sys.argv[1:])}`.")
    out = Path(args.out_dir)
    write_results(out / "RESULTS-preemption.json", out / "RESULTS-preemption.md", entries, stamp)
    for e in entries:
        print(f"[chaos] {e['backend']} ({e['warning']}): {e['injected']} injected, {e['saved_at_last_step']} "
              f"saved at the last step, {e['resumed_below_last_save']} resumed below, {e['outlived_grace']} "
              f"outlived the grace, {e['torn_reads']} torn; holds: {e['holds']}", flush=True)
    return 0 if all(e["holds"] for e in entries) else 1


if __name__ == "__main__":
    sys.exit(main())
