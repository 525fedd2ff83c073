"""What a new user sees from the CLI: the line `tx run` ends with, `tx --help` naming what
is installed, one-line hints for known schedulers that are not installed."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from tx.cli.cmd_run import format_duration, summary
from tx.specs import AppState
from tx.specs.status import AppStatus


def test_run_ends_with_one_line_state_duration_handle_logs(tx, tmp_path):
    p = tx("run", "-s", "local_cwd", "utils.echo", "--msg", "hi")
    assert p.returncode == 0, p.stderr
    handle = p.stdout.strip()
    lines = p.stderr.splitlines()
    assert lines[0] == "echo/0 hi"
    m = re.fullmatch(rf"tx run: SUCCEEDED after (\d+\.\d) s: {re.escape(handle)}; logs: (/\S+)", lines[-1])
    assert m and len(lines) == 2, p.stderr
    # the logs are where the line says
    assert "hi" in "".join(f.read_text() for f in Path(m.group(2)).rglob("stdout*"))


def test_summary_shows_the_stderr_tail_once_when_not_relayed():
    err = "replica t/0 exited with code 2: boom"
    st = AppStatus(AppState.FAILED, msg="replica t/0 exited with code 2; last lines of stderr:\nline a\nboom",
                   structured_error_msg=err, ui_url="file:///logs/x")
    text = summary("local_cwd://tx/x", st, 75.2, logs_shown=False)
    assert text == ("  line a\n  boom\n"
                    "tx run: FAILED after 1 min 15 s: local_cwd://tx/x (replica t/0 exited with code 2: boom); "
                    "logs: /logs/x\n")
    # relayed already: only the line
    assert summary("local_cwd://tx/x", st, 75.2, logs_shown=True).count("\n") == 1
    # no file URL: how to read them
    st = AppStatus(AppState.CANCELLED, ui_url=None)
    assert summary("slurm://tx/12", st, 3, logs_shown=False) == (
        "tx run: CANCELLED after 3.0 s: slurm://tx/12; logs: `tx log slurm://tx/12`\n")


@pytest.mark.parametrize("seconds,text", [(0.04, "0.0 s"), (59.94, "59.9 s"), (61, "1 min 01 s"),
                                          (3599.4, "59 min 59 s"), (7380, "2 h 03 min")])
def test_format_duration(seconds, text):
    assert format_duration(seconds) == text


def test_help_names_the_installed_schedulers_only(tx):
    p = tx("--help")
    assert p.returncode == 0
    desc = p.stdout.splitlines()[2]
    assert "installed: " in desc and "local_cwd" in desc, desc
    assert "Kubernetes" not in p.stdout


@pytest.mark.parametrize("name,dist", [("kubernetes_mcad", "tx-scheduler-k8s"), ("ray", "tx-scheduler-ray")])
def test_known_scheduler_not_installed_is_one_line(tx, one_line_error, name, dist):
    from tx.plugins import get_registry

    if name in get_registry().names("schedulers"):
        pytest.skip(f"{dist} is installed in this environment")
    one_line_error(tx("run", "-s", name, "utils.echo"), f"scheduler {name!r} is not installed: pip install {dist}", 1)
    one_line_error(tx("list", "-s", name), f"pip install {dist}", 1)


def test_configure_writes_a_template_of_every_installed_scheduler(tx, tmp_path):
    proj = tmp_path / "proj"
    sub = proj / "src"
    sub.mkdir(parents=True)
    p = tx("configure", cwd=proj)
    assert p.returncode == 0, p.stderr
    text = (proj / ".txconfig").read_text()
    import json

    listed = [json.loads(ln) for ln in tx("runopts", "--format", "json").stdout.splitlines() if ln.strip()]
    assert {"local_cwd", "local_dir"} <= {s["scheduler"] for s in listed}
    for sched in listed:
        assert f"\n[{sched['scheduler']}]\n" in text
        for opt in sched["runopts"]:
            assert f"\n# {opt['name']} = " in text or f"\n# {opt['name']} =\n" in text, opt
    # uncommented, an option applies from a subdirectory of the project (the file is found
    # walking up); a bad value names the file
    (proj / ".txconfig").write_text(text.replace("# log_dir =\n", f"log_dir = {tmp_path / 'logs'}\n", 1))
    (tmp_path / "logs").mkdir()
    p = tx("run", "-s", "local_cwd", "utils.echo", "--msg", "x", cwd=sub)
    assert p.returncode == 0, p.stderr
    assert f"logs: {tmp_path / 'logs'}/" in p.stderr.splitlines()[-1]
