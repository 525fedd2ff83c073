"""The preemption chaos benchmark's judge and report (bench/chaos_preemption.py runs the
injections): each injected preemption checked against issue 39's four criteria from the
checkpoint directory itself (the completion markers ``step-N/.tx-complete``) and the job's
phase log (examples/train.py ``--phase-log``: which step each attempt completed, saved and
resumed from, with a digest of the model saved and loaded), and the rank process end times
the driver saw; then bench/RESULTS-preemption.md and .json.

Not a bench on its own: chaos_preemption.py imports it.
"""
from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any, Dict, List, Optional

#: the backends issue 39 names, and how this benchmark warns on each (a row of one not run yet)
BACKENDS = {
    "local_cwd": "built: SIGTERM from outside to a rank, or to the supervisor",
    "local_docker": "built: the engine stops the container (podman's Docker API; StopTimeout = preempt_grace)",
    "ray": "built: ray stop's signals to the replica's actor on a private head, then tx's watchdog warns",
    "kubernetes": "built: eviction on tx's test API server (fakekube; terminationGracePeriodSeconds)",
    "gcp_batch": "built: Spot preemption with a 30 s notice on tx's local Batch server (fake_gcp)",
    "aws_batch": "built: the ECS stop of a Spot reclaim (engine stop -t, TerminateJob) on moto in Docker "
                 "mode; the next attempt is tx run --resume (moto runs no retry attempts)",
    "slurm": "built: a high-priority job preempts the low partition's job (GraceTime)",
}
#: seconds a rank may be seen alive past the grace before it counts as outliving it: the
#: driver's polling interval and the SIGKILL's delivery on a loaded host
END_SLACK = 1.0


def markers(ckpt: Path) -> Dict[int, Dict[str, float]]:
    """``{step: marker}`` of every complete checkpoint under ``ckpt``."""
    out = {}
    for m in ckpt.glob("step-*/.tx-complete"):
        try:
            out[int(m.parent.name.split("-")[1])] = json.loads(m.read_text())
        except (ValueError, OSError):
            continue
    return out


def read_events(path: Path) -> List[Dict[str, Any]]:
    """The phase log's events in time order (a torn last line skipped)."""
    out = []
    if path.exists():
        for line in path.read_text().splitlines():
            try:
                out.append(json.loads(line))
            except ValueError:
                continue
    return sorted(out, key=lambda e: e["t"])


def phase_at(events: List[Dict[str, Any]], pids: List[int], t: float) -> str:
    """The loop's phase at wall-clock ``t`` in the attempt whose ranks are ``pids``: rank 0's
    (else any rank's) last transition before ``t``."""
    mine = [e for e in events if e["pid"] in pids and e["t"] <= t]
    if not mine:
        return "start-up"
    r0 = [e for e in mine if e["rank"] == 0] or mine
    last = r0[-1]
    return {"start": "start-up", "fresh": "start-up", "resumed": "start-up", "step": "mid-step",
            "stepped": "mid-step", "saved": "mid-step", "evaled": "mid-step",
            "save": "periodic save" if last.get("why") != "preempt" else "preempt save",
            "eval": "evaluation", "preempt": "preempt save", "exit": "leaving",
            "warned": "mid-step"}.get(last["phase"], last["phase"])


def judge(inj: Dict[str, Any], events: List[Dict[str, Any]], marks: Dict[int, Dict[str, float]],
          grace: float, later: Optional[List[Dict[str, Any]]] = None, since: float = 0.0) -> Dict[str, Any]:
    """One injection against the four criteria. ``inj`` is the driver's record: ``t`` (when
    it was injected), ``pids`` (the attempt's ranks), ``ends`` ({pid: when it was seen
    gone}), ``next_pids`` (the next attempt's ranks, [] when none started); ``later``: the
    run's injections after this one (a next attempt preempted before it loaded anything: the
    one after it is the one that resumes); ``since``: when the attempt before this one ended
    (:func:`attempt_start`; the run's pids are reused, in a container every attempt has the
    same: an event counts for an attempt only within its lifetime).

    Returns the record with: ``t_warn``, ``phase``, ``last_step`` (the last step the attempt
    completed), ``saved_at_last_step``, ``save_seconds`` (the preemption save's, None when
    no save was needed), ``resumed`` (the next attempt's step), ``last_save`` (the newest
    complete save before that attempt loaded), ``resumed_below``, ``outlived`` (seconds past
    the grace, 0 when none), ``torn`` and ``miss`` (why, "" when every criterion held)."""
    pids, nxt = inj["pids"], inj.get("next_pids") or []
    ends = [v for v in inj.get("ends", {}).values() if v is not None]
    end = max(ends) if ends else None
    until = (end if end is not None else inj["t"] + grace) + END_SLACK
    mine = [e for e in events if e["pid"] in pids and since <= e["t"] <= until]
    warned = [e["t"] for e in mine if e["phase"] == "warned"]
    t_warn = inj["t"] if inj.get("exact_time", True) or not warned else min(warned)
    out = dict(inj, t_warn=t_warn, phase=phase_at([e for e in events if e["t"] >= since], pids, t_warn))
    stepped = [e["step"] for e in mine if e["phase"] == "stepped"]
    start = [e["step"] for e in mine if e["phase"] in ("resumed", "fresh")]
    if stepped:
        last = max(stepped)
    elif start:
        last = max(start)
    else:  # the attempt died before loading: it had resumed nothing, the newest save stands
        last = max([s for s, m in marks.items() if m["completed"] <= t_warn], default=0)
    out["last_step"] = last
    m = marks.get(last)
    out["saved_at_last_step"] = last == 0 or (m is not None and (end is None or m["completed"] <= end + END_SLACK))
    pre = [e for e in mine if e["phase"] == "saved" and e.get("why") == "preempt" and e["step"] == last]
    out["save_seconds"] = m["seconds"] if (m is not None and pre) else None
    out["outlived"] = round(max(0.0, (end - t_warn) - grace - END_SLACK), 3) if end is not None else None
    out["end_after_warning"] = round(end - t_warn, 3) if end is not None else None
    # the next attempt: what it loaded, when, and what was complete then
    def loads(pids: List[int], after: float, before: Optional[float]) -> List[Dict[str, Any]]:
        return [e for e in events if e["pid"] in pids and e["phase"] in ("resumed", "fresh")
                and after < e["t"] and (before is None or e["t"] <= before)]

    seq = list(later or [])
    load = loads(nxt, inj["t"], seq[0]["t"] if seq else None)
    after = inj.get("after") or "none started"
    for k, follow in enumerate(seq):  # that attempt was preempted before it loaded: the next one
        if load:
            break
        after = f"the attempts after it were preempted before they loaded (up to #{follow['i']}); then: " + (
            follow.get("after") or "none started")
        if not follow.get("next_pids"):
            break
        load = loads(follow["next_pids"], follow["t"], seq[k + 1]["t"] if k + 1 < len(seq) else None)
    load0 = [e for e in load if e["rank"] == 0] or load
    why = []
    if not out["saved_at_last_step"]:
        why.append(f"no complete checkpoint at step {last} (the last step the attempt completed)")
    if out["outlived"] is None:
        why.append("the ranks' end was not seen")
    elif out["outlived"] > 0:
        why.append(f"a rank ended {out['end_after_warning']} s after the warning (grace {grace:g} s)")
    out["resumed"] = out["last_save"] = None
    out["resumed_below"] = out["torn"] = False
    if not load0:
        why.append(f"no next attempt loaded a checkpoint ({after})")
    else:
        e = load0[0]
        out["resumed"] = e["step"]
        out["last_save"] = max([s for s, mk in marks.items() if mk["completed"] <= e["t"]], default=0)
        out["resumed_below"] = e["step"] < out["last_save"]
        if out["resumed_below"]:
            why.append(f"resumed at step {e['step']} below the last complete save {out['last_save']}")
        if e["phase"] == "resumed":
            mk = marks.get(e["step"])
            saved = [x.get("digest") for x in events if x["phase"] == "saved" and x["step"] == e["step"]
                     and x["rank"] == e["rank"] and x["t"] < e["t"]]
            if mk is None or mk["completed"] > e["t"]:
                out["torn"] = True
                why.append(f"step {e['step']} was loaded before its completion marker was written")
            elif saved and saved[-1] != e.get("digest"):
                out["torn"] = True
                why.append(f"step {e['step']} loaded a model (digest {e.get('digest')}) that is not the "
                           f"one saved ({saved[-1]})")
    out["miss"] = "; ".join(why)
    return out


def judge_runs(runs: List[Dict[str, Any]], grace: float) -> List[Dict[str, Any]]:
    """Every injection of the driver's ``runs`` (each ``{"phases", "ckpt", "inj": [...]}``)
    judged."""
    out = []
    for run in runs:
        events, marks = read_events(Path(run["phases"])), markers(Path(run["ckpt"]))
        for k, inj in enumerate(run["inj"]):
            inj = dict(inj, ends={int(p): t for p, t in inj.get("ends", {}).items()})
            out.append(judge(inj, events, marks, grace, run["inj"][k + 1:],
                             attempt_start(run["inj"][k - 1]) if k else 0.0))
    return out


def attempt_start(before: Dict[str, Any]) -> float:
    """When the attempt after the injection ``before`` can have begun: once every rank of
    the preempted one was seen gone (its own last lines, ``preempt``, ``saved``, ``exit``,
    come after the injection and are not the next attempt's, whose ranks have the same pids
    in a container), else at the injection."""
    ends = [v for v in (before.get("ends") or {}).values() if v is not None]
    return max(ends) if len(ends) == len(before.get("ends") or {}) and ends else before["t"]


def summary(backend: str, warning: str, judged: List[Dict[str, Any]], real: bool, grace: float,
            extra: Dict[str, Any]) -> Dict[str, Any]:
    """The per-backend entry of RESULTS-preemption.json (issue 39's fields first)."""
    secs = [j["save_seconds"] for j in judged if j["save_seconds"] is not None]
    phases: Dict[str, int] = {}
    for j in judged:
        phases[j["phase"]] = phases.get(j["phase"], 0) + 1
    ends = [j["end_after_warning"] for j in judged if j["end_after_warning"] is not None]
    return {
        "backend": backend, "injected": len(judged),
        "saved_at_last_step": sum(1 for j in judged if j["saved_at_last_step"]),
        "resumed_below_last_save": sum(1 for j in judged if j["resumed_below"]),
        "outlived_grace": sum(1 for j in judged if j["outlived"] is None or j["outlived"] > 0),
        "torn_reads": sum(1 for j in judged if j["torn"]), "real_backend": real,
        "not_resumed": sum(1 for j in judged if j["resumed"] is None),
        "warning": warning, "grace_s": grace, "phases": phases,
        "save_seconds": _spread(secs), "end_after_warning_s": _spread(ends),
        "holds": holds(judged),
        "misses": [{k: j.get(k) for k in ("i", "phase", "chosen", "last_step", "resumed", "last_save",
                                          "end_after_warning", "miss")} for j in judged if j["miss"]],
        **extra,
    }


def holds(judged: List[Dict[str, Any]]) -> bool:
    """Issue 39's bar: >= 99 % saved at the last step, none resumed below the last complete
    save, none outlived the grace, no torn read."""
    n = len(judged)
    return bool(n) and sum(j["saved_at_last_step"] for j in judged) >= 0.99 * n and not any(
        j["resumed_below"] or j["torn"] or j["outlived"] is None or j["outlived"] > 0 or j["resumed"] is None
        for j in judged)


def _spread(xs: List[float]) -> Optional[Dict[str, float]]:
    if not xs:
        return None
    q = statistics.quantiles(xs, n=20, method="inclusive") if len(xs) > 1 else [xs[0]] * 19
    return {"n": len(xs), "min": min(xs), "median": statistics.median(xs), "p95": round(q[18], 3),
            "max": max(xs)}


def _fmt(s: Optional[Dict[str, float]]) -> str:
    return "-" if not s else f"median {s['median']:.3f} s, p95 {s['p95']:.3f}, {s['min']:.3f}-{s['max']:.3f} (n={s['n']})"


def write_results(json_path: Path, md_path: Path, entries: List[Dict[str, Any]], stamp: str) -> None:
    """Merge ``entries`` (keyed by backend and warning) into the JSON file, list the backends
    not run yet, and write the Markdown from the merged JSON."""
    old: List[Dict[str, Any]] = []
    if json_path.exists():
        try:
            old = json.loads(json_path.read_text()).get("backends", [])
        except ValueError:
            old = []
    key = lambda e: (e["backend"], e.get("warning", ""))  # noqa: E731
    merged = {key(e): e for e in old if e.get("injected")}
    merged.update({key(e): e for e in entries})
    run = {b for b, _ in merged}
    for b, why in BACKENDS.items():
        if b not in run:
            merged[(b, "")] = {"backend": b, "injected": 0, "saved_at_last_step": None,
                               "resumed_below_last_save": None, "outlived_grace": None, "torn_reads": None,
                               "real_backend": None, "status": why}
    rows = sorted(merged.values(), key=lambda e: (e["backend"] not in run, e["backend"], e.get("warning", "")))
    json_path.write_text(json.dumps({"stamp": stamp, "backends": rows}, indent=1) + "\n")
    md = ["# Preemption chaos benchmark (issue 39): save at the last completed step, resume there", "",
          stamp, "",
          "`bench/chaos_preemption.py` (README: \"Preemption chaos\"): per backend, preemptions injected at "
          "seeded random moments of a two-rank DDP loop (examples/train.py over gloo, periodic saves, "
          "periodic evaluation, `--phase-log`), each judged from the checkpoint directory (completion "
          "markers), the job's phase log and the ranks' end times. Holds when >= 99 % leave a "
          "checkpoint at the last completed step, none resumes below the last complete save, no rank "
          "outlives the grace (+1 s for polling and the kill's delivery), no checkpoint is read torn "
          "(loaded before its marker, or a model digest other than the one saved), and (added here) "
          "every preempted attempt is followed by one that resumes (`not resumed`: the app ended "
          "instead, e.g. FAILED).", "",
          "| backend | warning | injected | saved at last step | resumed below last save | outlived grace "
          "| torn reads | not resumed | real backend | holds | phase hit (from the job's log) | save time (preemption "
          "saves, marker) | ranks gone after the warning |",
          "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |"]
    for e in rows:
        if not e.get("injected"):
            md.append(f"| {e['backend']} | - | 0 | - | - | - | - | - | - | - | not yet run; "
                      f"{e.get('status', '')} | - | - |")
            continue
        ph = ", ".join(f"{k} {v}" for k, v in sorted(e["phases"].items()))
        md.append(f"| {e['backend']} | {e['warning']} | {e['injected']} | {e['saved_at_last_step']} | "
                  f"{e['resumed_below_last_save']} | {e['outlived_grace']} | {e['torn_reads']} | {e['not_resumed']} | "
                  f"{str(e['real_backend']).lower()} | {'yes' if e['holds'] else '**no**'} | {ph} | "
                  f"{_fmt(e['save_seconds'])} | {_fmt(e['end_after_warning_s'])} |")
    for e in rows:
        if not e.get("injected"):
            continue
        md += ["", f"## {e['backend']}: {e['warning']}", "",
               f"Grace {e['grace_s']:g} s; seed {e.get('seed')}; {e.get('runs', '?')} run(s); "
               f"machine load {e.get('load', '?')}; took {e.get('seconds', '?')} s. {e.get('note', '')}", ""]
        if not e["misses"]:
            md.append("No miss." + (f" {e['analysis']}" if e.get("analysis") else ""))
            continue
        md += [f"{len(e['misses'])} miss(es), each with its cause:", "",
               "| # | phase hit | chosen | last step | resumed | last complete save | ranks gone after | cause |",
               "| --- | --- | --- | --- | --- | --- | --- | --- |"]
        for m in e["misses"]:
            md.append(f"| {m['i']} | {m['phase']} | {m['chosen']} | {m['last_step']} | {m['resumed']} | "
                      f"{m['last_save']} | {m['end_after_warning']} | {m['miss']} |")
        if e.get("analysis"):
            md += ["", e["analysis"]]
    md_path.write_text("\n".join(md) + "\n")
