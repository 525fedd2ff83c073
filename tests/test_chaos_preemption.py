"""The preemption chaos benchmark's judge (bench/chaos_check.py, issue 39). The benchmark itself
(bench/chaos_preemption.py: seeded preemptions of examples/train.py's two-rank DDP loop, each
judged from the checkpoint directory and the job's phase log) runs from bench/regen.py, not in
CI: two injections took 36-180 s, and the real-backend preemption cases it repeats are CI's
already (tests/test_preemption.py, the plugins' test_*_preemption.py). Its full counts are
bench/RESULTS-preemption.md's."""
from __future__ import annotations

import json
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def test_the_judge_counts_an_event_for_an_attempt_only_within_its_lifetime(tmp_path):
    """A rank of a later attempt may reuse an earlier attempt's pid: its steps are not the
    earlier attempt's (a false "no checkpoint at the last step" before the fix)."""
    sys.path.insert(0, str(REPO / "bench"))
    from chaos_check import judge_runs

    ckpt = tmp_path / "ck"
    for step, done in ((5, 10.5), (7, 20.5)):
        (ckpt / f"step-{step:09d}").mkdir(parents=True)
        (ckpt / f"step-{step:09d}" / ".tx-complete").write_text(json.dumps(
            {"step": step, "seconds": 0.1, "completed": done}))
    ev = [(9.0, 1, "resumed", 0), (10.0, 1, "stepped", 5), (10.2, 1, "preempt", 5), (10.5, 1, "saved", 5),
          (12.0, 2, "resumed", 5), (20.0, 2, "stepped", 7), (20.5, 2, "saved", 7),
          (22.0, 1, "resumed", 7), (30.0, 1, "stepped", 99)]  # pid 1 again, two attempts later
    phases = tmp_path / "p.jsonl"
    phases.write_text("".join(json.dumps({"t": t, "rank": 0, "pid": p, "phase": ph, "step": s,
                                          "why": "preempt", "digest": "d"}) + "\n" for t, p, ph, s in ev))
    runs = [{"phases": str(phases), "ckpt": str(ckpt), "inj": [
        {"i": 0, "chosen": "mid-step", "t": 10.1, "pids": [1], "ends": {"1": 10.6}, "next_pids": [2]},
        {"i": 1, "chosen": "mid-step", "t": 20.1, "pids": [2], "ends": {"2": 20.6}, "next_pids": [1]}]}]
    first, second = judge_runs(runs, grace=5.0)
    assert (first["last_step"], first["saved_at_last_step"], first["resumed"], first["miss"]) == (5, True, 5, "")
    assert (second["last_step"], second["resumed"], second["miss"]) == (7, 7, ""), second


def test_in_a_container_the_next_attempt_starts_when_the_preempted_ranks_were_seen_gone(tmp_path):
    """In a container every attempt's ranks log the same pids (their own namespace's): the
    preempted attempt's last lines after the injection (preempt, saved, exit) are not the next
    attempt's, which a warning in its start-up hits (it was judged "leaving" before)."""
    sys.path.insert(0, str(REPO / "bench"))
    from chaos_check import judge_runs

    ckpt = tmp_path / "ck"
    (ckpt / "step-000000005").mkdir(parents=True)
    (ckpt / "step-000000005" / ".tx-complete").write_text(json.dumps({"step": 5, "seconds": 0.1, "completed": 10.5}))
    ev = [(9.0, "fresh", 0), (10.0, "stepped", 5), (10.2, "preempt", 5), (10.5, "saved", 5), (10.55, "exit", 5),
          (13.0, "start", 0), (14.0, "resumed", 5)]  # the next attempt, pid 11 again
    phases = tmp_path / "p.jsonl"
    phases.write_text("".join(json.dumps({"t": t, "rank": 0, "pid": 11, "phase": ph, "step": s, "why": "preempt",
                                          "digest": "d"}) + "\n" for t, ph, s in ev))
    runs = [{"phases": str(phases), "ckpt": str(ckpt), "inj": [
        {"i": 0, "chosen": "mid-step", "t": 10.1, "pids": [11], "ends": {"11": 10.6}, "next_pids": [11]},
        {"i": 1, "chosen": "start-up", "t": 12.0, "pids": [11], "ends": {"11": 12.1}, "next_pids": [11]}]}]
    first, second = judge_runs(runs, grace=5.0)
    assert (first["phase"], first["last_step"], first["resumed"], first["miss"]) == ("mid-step", 5, 5, "")
    assert (second["phase"], second["last_step"], second["resumed"]) == ("start-up", 5, 5), second
