"""`tx list` (newest first, bounded, age, state filter, not parsing every request) and
`tx gc` (finished apps' state and logs deleted after a retention; never a running app)."""
from __future__ import annotations

import json
import re
import shutil
import time
from pathlib import Path

import pytest

from tx.testing.backends import backend_unavailable

N_OLD = 30


def _apps_dir(tx_env) -> Path:
    return Path(tx_env["TX_STATE_DIR"]) / "local" / "apps"


@pytest.fixture
def apps(tx, tx_env, tmp_path):
    """A succeeded app, a failed one, a running one, and N_OLD copies of the succeeded one
    that "ended" days ago (their request.json is garbage: listing must not read it)."""
    ok = tx("run", "-s", "local_cwd", "utils.echo", "--msg", "hi")
    assert ok.returncode == 0, ok.stderr
    bad = tx("run", "-s", "local_cwd", "utils.sh", "sh", "-c", "exit 3")
    assert bad.returncode == 1
    running = tx("run", "--detach", "-s", "local_cwd", "utils.sh", "sleep", "120")
    assert running.returncode == 0, running.stderr
    ok_id = ok.stdout.splitlines()[0].rsplit("/", 1)[1]
    d = _apps_dir(tx_env)
    now = time.time()
    for i in range(N_OLD):
        new_id = f"old-{i:03d}"
        shutil.copytree(d / ok_id, d / new_id)
        summary = json.loads((d / new_id / "summary.json").read_text())
        summary.update(app_id=new_id, app_name=f"old{i}", submitted=now - 86400 * 3 - 60 * i, log_dir=None)
        (d / new_id / "summary.json").write_text(json.dumps(summary))
        state = json.loads((d / new_id / "state.json").read_text())
        state.update(app_id=new_id, ended=now - 86400 * 3 - 60 * i + 1)
        (d / new_id / "state.json").write_text(json.dumps(state))
        (d / new_id / "request.json").write_text("{ not json")
    yield {"ok": ok.stdout.splitlines()[0], "bad": bad.stdout.splitlines()[0], "running": running.stdout.splitlines()[0]}
    tx("cancel", running.stdout.splitlines()[0])


def _handles(text: str):
    return [ln.split()[0] for ln in text.splitlines()[2:] if ln.strip()]


def test_list_is_newest_first_bounded_with_age(tx, apps):
    p = tx("list", "-s", "local_cwd")
    assert p.returncode == 0, p.stderr
    assert p.stdout.splitlines()[0].split() == ["APP", "HANDLE", "APP", "STATUS", "AGE", "DURATION", "APP", "NAME"]
    handles = _handles(p.stdout)
    assert len(handles) == 20
    assert handles[:3] == [apps["running"], apps["bad"], apps["ok"]]
    assert handles[3:] == [f"local_cwd://tx/old-{i:03d}" for i in range(17)]
    row = {ln.split()[0]: ln.split() for ln in p.stdout.splitlines()[2:]}
    assert row["local_cwd://tx/old-000"][1:3] == ["SUCCEEDED", "3d"]
    assert re.fullmatch(r"\d+s", row[apps["ok"]][2])
    assert p.stderr == f"tx list: showing the newest 20 of {N_OLD + 3} apps (--limit N or --all for more)\n"
    assert len(_handles(tx("list", "--all").stdout)) == N_OLD + 3
    assert len(_handles(tx("list", "-n", "5").stdout)) == 5


def test_list_state_filter_and_json(tx, apps):
    assert _handles(tx("list", "--state", "failed").stdout) == [apps["bad"]]
    assert _handles(tx("list", "--state", "active").stdout) == [apps["running"]]
    assert _handles(tx("list", "--state", "RUNNING,FAILED").stdout) == [apps["running"], apps["bad"]]
    rows = [json.loads(ln) for ln in tx("list", "--json", "--state", "succeeded", "-n", "2").stdout.splitlines()]
    assert [r["app_handle"] for r in rows] == [apps["ok"], "local_cwd://tx/old-000"]
    assert rows[1]["age_s"] > 3 * 86400 and rows[1]["state"] == "SUCCEEDED"
    bad = tx("list", "--state", "bogus")
    assert bad.returncode == 2 and "unknown state 'BOGUS'" in bad.stderr


def test_gc_deletes_finished_apps_after_the_retention_never_a_running_one(tx, tx_env, apps):
    d = _apps_dir(tx_env)
    p = tx("gc")
    assert p.returncode == 2 and "--keep" in p.stderr and "[cli:gc]" in p.stderr
    dry = tx("gc", "--keep", "2d", "--dry-run")
    assert dry.returncode == 0 and len(dry.stdout.split()) == N_OLD and (d / "old-000").is_dir()
    p = tx("gc", "--keep", "2d")
    assert p.returncode == 0 and sorted(p.stdout.split()) == [f"local_cwd://tx/old-{i:03d}" for i in range(N_OLD)]
    assert p.stderr == "tx gc: deleted 30 finished app(s) that ended more than 2d ago\n"
    assert _handles(tx("list").stdout) == [apps["running"], apps["bad"], apps["ok"]]
    # everything finished goes with --keep 0: state and logs; the running app stays and runs
    ok_logs = Path(tx("status", apps["ok"]).stdout.split("UI URL: file://")[1].strip())
    assert ok_logs.is_dir()
    p = tx("gc", "--keep", "0")
    assert sorted(p.stdout.split()) == sorted([apps["ok"], apps["bad"]])
    assert not ok_logs.exists()
    assert tx("status", apps["ok"]).returncode == 1
    assert _handles(tx("list").stdout) == [apps["running"]]
    assert "State: RUNNING" in tx("status", apps["running"]).stdout


def test_txconfig_retention_prunes_after_tx_run(tx, tx_env, apps, tmp_path):
    (tmp_path / ".txconfig").write_text("[cli:gc]\nkeep = 1d\n")
    assert tx("run", "-s", "local_cwd", "utils.echo", "--msg", "x").returncode == 0
    left = _handles(tx("list", "--all").stdout)
    assert len(left) == 4 and not any("/old-" in h for h in left)
    (tmp_path / ".txconfig").write_text("[cli:gc]\nkeep = soon\n")
    p = tx("gc")
    assert p.returncode == 2 and "[cli:gc] keep: bad duration 'soon'" in p.stderr


def test_gc_of_a_scheduler_that_cannot_prune_is_one_line(tx, one_line_error):
    from tx.plugins import get_registry

    if "slurm" not in get_registry().names("schedulers"):
        backend_unavailable("tx-scheduler-slurm", "the test needs a scheduler without prune: pip install -e plugins/scheduler-slurm")
    one_line_error(tx("gc", "-s", "slurm", "--keep", "1d"), "keeps no app state that tx can delete", 1)


def test_a_page_of_many_apps_is_the_head_of_the_whole_list(tx, tx_env):
    """`tx list` asks the local scheduler for its first page only (Engine.list_page): with
    120 finished apps (copies of one real run, as the scheduler writes them) and one running,
    the page is the head of `--all`, newest first, filtered before it is cut, with the count
    of all that match."""
    from tx_scheduler_local._clone import clone_finished_app

    ok = tx("run", "-s", "local_cwd", "utils.echo", "--msg", "hi")
    assert ok.returncode == 0, ok.stderr
    t0 = time.time() - 3600
    clone_finished_app(str(_apps_dir(tx_env)), ok.stdout.splitlines()[0].rsplit("/", 1)[1], 120,
                       submitted=lambda i: t0 + i, state=lambda i: "FAILED" if i % 4 == 0 else "SUCCEEDED")
    running = tx("run", "--detach", "-s", "local_cwd", "utils.sh", "sleep", "120")
    assert running.returncode == 0, running.stderr
    try:
        every = [json.loads(ln) for ln in tx("list", "-s", "local_cwd", "--all", "--json").stdout.splitlines()]
        assert len(every) == 122 and every[0]["app_handle"] == running.stdout.splitlines()[0]
        page = tx("list", "-s", "local_cwd", "-n", "7", "--json")
        assert [json.loads(ln)["app_handle"] for ln in page.stdout.splitlines()] == [a["app_handle"] for a in every[:7]]
        assert "showing the newest 7 of 122 apps" in page.stderr
        failed = [a["app_handle"] for a in every if a["state"] == "FAILED"]
        p = tx("list", "-s", "local_cwd", "--state", "FAILED", "-n", "5")
        assert _handles(p.stdout) == failed[:5] and f"showing the newest 5 of {len(failed)} apps" in p.stderr
        active = tx("list", "-s", "local_cwd", "--state", "active")
        assert _handles(active.stdout) == [running.stdout.splitlines()[0]]
    finally:
        tx("cancel", running.stdout.splitlines()[0])
