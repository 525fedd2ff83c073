"""What a new user meets from the CLI: `tx --help` naming the installed schedulers, a
one-line hint for a known scheduler that is not installed, and `tx configure` writing a
template of every installed scheduler's run options."""
from __future__ import annotations

import json

import pytest


def test_help_names_the_installed_schedulers_only(tx):
    p = tx("--help")
    assert p.returncode == 0
    desc = p.stdout.splitlines()[2]
    assert "installed: " in desc and "local_cwd" in desc, desc
    assert "Kubernetes" not in p.stdout


@pytest.mark.parametrize("name,plugin,dist", [("kubernetes_mcad", "kubernetes", "tx-scheduler-k8s"),
                                              ("ray", "ray", "tx-scheduler-ray")])
def test_known_scheduler_not_installed_is_one_line(tx, tx_env, one_line_error, name, plugin, dist,
                                                   tmp_path, monkeypatch):
    """Runs in every environment: where the plugin is installed, ``TX_DISABLE_PLUGINS``
    hides it, so ``tx`` meets a known scheduler whose plugin it cannot load."""
    from tx.plugins import pip_install

    # the hint names the plugin's directory relative to the current directory when under it:
    # computed here in the directory `tx` runs in (the test's own, not the repository)
    monkeypatch.chdir(tmp_path)
    env = {**tx_env, "TX_DISABLE_PLUGINS": plugin}
    desc = tx("--help", env=env).stdout.splitlines()[2]
    installed = desc.partition("installed: ")[2].partition(")")[0].split(", ")
    assert "local_cwd" in installed and name not in installed, desc
    one_line_error(tx("run", "-s", name, "utils.echo", env=env),
                   f"scheduler {name!r} is not installed: {pip_install(dist)}", 1)
    one_line_error(tx("list", "-s", name, env=env), pip_install(dist), 1)


def test_configure_writes_a_template_of_every_installed_scheduler(tx, tmp_path):
    proj = tmp_path / "proj"
    sub = proj / "src"
    sub.mkdir(parents=True)
    p = tx("configure", cwd=proj)
    assert p.returncode == 0, p.stderr
    text = (proj / ".txconfig").read_text()
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
