"""Built-in and plugin commands are registered the same way (``tx_register_commands``: a
``tx.cli.command.Command``, or a class with ``add_arguments`` and ``run``); a plugin adds a
command but cannot replace one."""
from __future__ import annotations

import os
import subprocess
import sys

HOOKS = '''
from tx import hookimpl
from tx.cli.command import Argument, Command
from tx.cli.errors import CLIError


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


def _usage(args):
    if args.hours < 0:
        raise CLIError("--hours must be >= 0", 2)
    print(f"usage of {args.team}: {args.hours} GPU hours")
    return 0


USAGE = Command(run=_usage, arguments=(Argument("team"), Argument("--hours", type=int, default=0)))


@hookimpl
def tx_register_commands(register):
    register("quota", "quota_hooks:QuotaCommand", help="show a team's GPU quota")
    register("usage", "quota_hooks:USAGE", help="show a team's GPU usage")
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
    from tx.cli.command import Command
    from tx.cli.main import builtin_commands
    from tx.plugins import PluginRegistry

    reg = PluginRegistry(entry_points=[])
    builtins = builtin_commands()
    assert reg.names("commands") == list(builtins)
    for name, (load, help_text) in builtins.items():
        r = reg.get("commands", name)
        cmd = r.load()
        assert r.distribution == "tx-core" and r.description == help_text and help_text
        assert isinstance(cmd, Command) and cmd is load() and callable(cmd.run)


def test_a_plugin_adds_a_command_and_cannot_replace_one(tmp_path):
    p = _tx(tmp_path, "quota", "--who", "ml-team")
    assert (p.returncode, p.stdout) == (3, "quota of ml-team: 42 GPU hours\n"), p.stderr
    p = _tx(tmp_path, "quota")
    assert p.returncode == 2 and "--who" in p.stderr and len(p.stderr.splitlines()) == 1, p.stderr
    p = _tx(tmp_path, "run", "--dryrun", "-s", "local_cwd", "utils.echo", "--msg", "hi")
    assert p.returncode == 0 and "hijacked" not in p.stdout and "=== SCHEDULER REQUEST ===" in p.stdout, p.stderr
    p = _tx(tmp_path, "plugins")
    assert "conflict: commands 'run' registered by tx-core and quotaplug" in p.stdout, p.stdout


def test_a_plugin_registers_a_command_record(tmp_path):
    p = _tx(tmp_path, "usage", "ml-team", "--hours", "7")
    assert (p.returncode, p.stdout, p.stderr) == (0, "usage of ml-team: 7 GPU hours\n", ""), p.stderr
    p = _tx(tmp_path, "usage", "--help")
    assert p.returncode == 0 and p.stdout.startswith("usage: tx usage [-h] [--hours HOURS] team\n"), p.stdout
    assert "show a team's GPU usage" in p.stdout
    p = _tx(tmp_path, "usage")
    assert p.returncode == 2 and p.stderr.startswith("tx usage: error:") and len(p.stderr.splitlines()) == 1
    p = _tx(tmp_path, "usage", "ml-team", "--hours", "-1")
    assert (p.returncode, p.stderr) == (2, "tx usage: error: --hours must be >= 0\n")
