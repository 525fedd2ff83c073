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
