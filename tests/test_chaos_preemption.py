"""The preemption chaos benchmark works (bench/chaos_preemption.py, issue 39): two preemptions
of examples/train.py's two-rank DDP loop on local_cwd (SIGTERM to the app's supervisor, at
seeded random moments), each judged from the checkpoint directory and the job's phase log,
and the results file it writes: every criterion holds, and the backends not run are listed
without numbers. The full counts are bench/RESULTS-preemption.md's."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from tx.testing.backends import require_module

REPO = Path(__file__).resolve().parent.parent
pytestmark = pytest.mark.slow
require_module("torch", "the main job trains with torch: pip install torch==2.13.0")
require_module("sklearn", "the main job reads its data set with scikit-learn: pip install scikit-learn")


def test_two_preemptions_on_local_cwd_meet_every_criterion(tx_env, tmp_path):
    p = subprocess.run([sys.executable, str(REPO / "bench" / "chaos_preemption.py"), "--backend", "local_cwd",
                        "--warning", "supervisor", "-n", "2", "--seed", "7", "--out-dir", str(tmp_path)],
                       env=tx_env, cwd=tmp_path, capture_output=True, text=True, timeout=600)
    assert p.returncode == 0, p.stdout[-3000:] + p.stderr[-3000:]
    rows = {e["backend"]: e for e in json.loads((tmp_path / "RESULTS-preemption.json").read_text())["backends"]}
    e = rows["local_cwd"]
    assert (e["injected"], e["saved_at_last_step"], e["resumed_below_last_save"], e["outlived_grace"],
            e["torn_reads"], e["not_resumed"], e["real_backend"], e["holds"]) == (2, 2, 0, 0, 0, 0, True, True), e
    assert sum(e["phases"].values()) == 2 and e["misses"] == [], e
    assert 0 < e["end_after_warning_s"]["max"] < e["grace_s"], e  # the ranks saved and left well inside it
    # each injection: the step its attempt completed is the step the next one resumed from
    (work,) = (tmp_path / ".work" / "chaos").iterdir()
    judged = json.loads((work / "injections.json").read_text())
    assert [j["resumed"] for j in judged] == [j["last_step"] for j in judged], judged
    for other in ("local_docker", "ray", "kubernetes", "gcp_batch", "aws_batch"):
        assert rows[other]["injected"] == 0 and rows[other]["saved_at_last_step"] is None, rows[other]
    md = (tmp_path / "RESULTS-preemption.md").read_text()
    assert "| local_cwd | SIGTERM to the app's supervisor | 2 | 2 | 0 | 0 | 0 | 0 | true | yes |" in md, md


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
