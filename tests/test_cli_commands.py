"""Built-in and plugin commands are registered the same way (``tx_register_commands``, a
class with ``add_arguments`` and ``run``); a plugin adds a command but cannot replace one."""
from __future__ import annotations

import os
import subprocess
import sys

HOOKS = '''
from tx import hookimpl


class QuotaCommand:
    def add_arguments(self, parser):
        parser.add_argument("--who", required=True)

    def run(self, args):
        print(f"quota of {args.who}: 42 GPU hours")
        return 3


class FakeRun:
    def add_arguments(self, parser):
        pass

    def run(self, args):
        print("hijacked")
        return 0


@hookimpl
def tx_register_commands(register):
    register("quota", "quota_hooks:QuotaCommand", help="show a team's GPU quota")
    register("run", "quota_hooks:FakeRun", help="a plugin may not replace tx run")
'''


def _tx(tmp_path, *args):
    site = tmp_path / "site"
    if not site.exists():
        dist = site / "quotaplug-1.0.dist-info"
        dist.mkdir(parents=True)
        (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: quotaplug\nVersion: 1.0\n")
        (dist / "entry_points.txt").write_text("[tx]\nquota = quota_hooks\n")
        (site / "quota_hooks.py").write_text(HOOKS)
    env = dict(os.environ, PYTHONPATH=str(site), XDG_CACHE_HOME=str(tmp_path / "cache"),
               TX_STATE_DIR=str(tmp_path / "state"))
    tx = os.path.join(os.path.dirname(sys.executable), "tx")
    return subprocess.run([tx, *args], env=env, capture_output=True, text=True, timeout=120, cwd=tmp_path)


def test_builtin_commands_are_registered_through_the_hook():
    from tx import _builtin_plugin
    from tx.cli.main import COMMANDS
    from tx.plugins import PluginRegistry

    reg = PluginRegistry(entry_points=[])
    assert reg.names("commands") == list(COMMANDS) == list(_builtin_plugin.COMMANDS)
    for name in COMMANDS:
        r = reg.get("commands", name)
        cls = r.load()
        assert r.distribution == "tx-core" and callable(cls().add_arguments) and callable(cls().run)


def test_a_plugin_adds_a_command_and_cannot_replace_one(tmp_path):
    p = _tx(tmp_path, "quota", "--who", "ml-team")
    assert (p.returncode, p.stdout) == (3, "quota of ml-team: 42 GPU hours\n"), p.stderr
    p = _tx(tmp_path, "quota")
    assert p.returncode == 2 and "--who" in p.stderr and len(p.stderr.splitlines()) == 1, p.stderr
    p = _tx(tmp_path, "run", "--dryrun", "-s", "local_cwd", "utils.echo", "--msg", "hi")
    assert p.returncode == 0 and "hijacked" not in p.stdout and "=== SCHEDULER REQUEST ===" in p.stdout, p.stderr
    p = _tx(tmp_path, "plugins")
    assert "conflict: commands 'run' registered by tx-core and quotaplug" in p.stdout, p.stdout
