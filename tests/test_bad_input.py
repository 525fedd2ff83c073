"""A corpus of bad inputs: each gives exactly one line on stderr with the expected message,
the expected exit code, and no traceback. Nothing is left running or half-created."""
from __future__ import annotations

import json
import textwrap

import pytest

COMPONENTS = '''
from tx import specs


def ok(msg: str = "hi") -> specs.AppDef:
    """A fine component.

    Args:
        msg: what to echo
    """
    return specs.AppDef("ok", [specs.Role("echo", image=".", entrypoint="echo", args=[msg])])


def unannotated(msg) -> specs.AppDef:
    """No annotation."""
    return ok(msg)


def raises(n: int = 1) -> specs.AppDef:
    """Raises on bad values.

    Args:
        n: a positive number
    """
    if n < 1:
        raise ValueError(f"n must be positive, got {n}")
    return ok()


def returns_str() -> specs.AppDef:
    """Returns the wrong type."""
    return "not an app"
'''

APP = {"name": "app", "roles": [{"name": "r", "image": ".", "entrypoint": "echo", "args": ["x"]}]}


def _appdef(**role_changes):
    role = {**APP["roles"][0], **role_changes}
    return {"name": "app", "roles": [role]}


@pytest.fixture
def workdir(tmp_path):
    (tmp_path / "comps.py").write_text(COMPONENTS)
    (tmp_path / "broken.py").write_text("def broken(:\n    pass\n")
    (tmp_path / "bad.yaml").write_text("name: app\nroles: [\n  {name: r\n")
    (tmp_path / "bad.json").write_text('{"name": "app",\n "roles": [}\n')
    (tmp_path / "two.yaml").write_text(
        textwrap.dedent("name: app\nroles:\n- name: r\n  image: .\n  entrypoint: echo\n  num_replicas: two\n"))
    (tmp_path / "typo.json").write_text(json.dumps({"name": "app", "roles": [{"name": "r", "entrypiont": "echo"}]}))
    (tmp_path / "zero.json").write_text(json.dumps(_appdef(num_replicas=0)))
    (tmp_path / "noname.json").write_text(json.dumps({"roles": APP["roles"]}))
    (tmp_path / "dup.json").write_text(json.dumps({"name": "a", "roles": APP["roles"] * 2}))
    (tmp_path / "noroles.json").write_text(json.dumps({"name": "a", "roles": []}))
    (tmp_path / "noentry.json").write_text(json.dumps({"name": "a", "roles": [{"name": "r", "image": "."}]}))
    (tmp_path / "policy.json").write_text(json.dumps(_appdef(retry_policy="SOMETIMES")))
    (tmp_path / "mount.json").write_text(json.dumps(_appdef(mounts=[{"type": "nfs", "src": "a"}])))
    (tmp_path / "good.json").write_text(json.dumps(APP))
    (tmp_path / "list.yaml").write_text("- a\n- b\n")
    return tmp_path


# (args, expected text in the one stderr line, exit code)
CORPUS = [
    # app handles
    (["status", "foo"], "malformed app handle 'foo'", 1),
    (["status", "local_cwd:/tx/x"], "malformed app handle", 1),
    (["status", "://tx/x"], "malformed app handle", 1),
    (["describe", "local_cwd://tx"], "malformed app handle", 1),
    (["cancel", "no handle"], "malformed app handle", 1),
    (["status", "nosuch://tx/x-1"], "unknown scheduler 'nosuch'", 1),
    (["status", "local_cwdd://tx/x-1"], "did you mean 'local_cwd'", 1),
    (["status", "local_cwd://tx/nonexistent-0000"], "does not exist", 1),
    (["describe", "local_cwd://tx/nonexistent-0000"], "does not exist", 1),
    (["cancel", "local_cwd://tx/nonexistent-0000"], "does not exist", 1),
    (["log", "local_cwd://tx/nonexistent-0000"], "does not exist", 1),
    (["log", "local_cwd://tx/nonexistent-0000/r/0"], "unknown app", 1),
    (["log", "foo"], "malformed log identifier", 2),
    (["log"], "the following arguments are required: IDENTIFIER", 2),
    (["log", "--tail", "0", "local_cwd://tx/a"], "the number of lines must be >= 1, got 0", 2),
    (["log", "-f", "--tail", "3", "local_cwd://tx/a"], "--tail 3 prints the last 3 lines; -f follows", 2),
    (["log", "local_cwd://tx/a/r/x"], "malformed log identifier", 2),
    (["log", "--since", "yesterday", "local_cwd://tx/a"], "bad time 'yesterday'", 2),
    # schedulers and run options
    (["run", "-s", "nosuch", "utils.echo"], "unknown scheduler 'nosuch'", 1),
    (["run", "-s", "local_cwdd", "utils.echo"], "did you mean 'local_cwd'", 1),
    (["runopts", "nosuch"], "unknown scheduler 'nosuch'", 1),
    (["list", "-s", "nosuch"], "unknown scheduler 'nosuch'", 1),
    (["configure", "--print", "-s", "nosuch"], "unknown scheduler 'nosuch'", 1),
    (["run", "-cfg", "log_dir", "utils.echo"], "bad run config 'log_dir'", 1),
    (["run", "-cfg", "=x", "utils.echo"], "empty key", 1),
    (["run", "-cfg", "nosuch=1", "utils.echo"], "unknown run option 'nosuch'", 1),
    (["run", "-cfg", "log_dri=/tmp", "utils.echo"], "did you mean 'log_dir'", 1),
    (["run", "-cfg", "prepend_cwd=maybe", "utils.echo"], "run option 'prepend_cwd' must be bool", 1),
    (["run", "-cfg", "log_dir=/dev/null/x", "utils.echo"], "'/dev/null' is not a directory", 1),
    (["run", "-s", "local_dir", "utils.echo"], "is not an existing directory (local_dir runs each replica in its "
     "image directory): pass the component --image DIR", 1),
    # components and their arguments
    (["run"], "missing component name", 2),
    (["run", "--", "-x"], "missing component name", 2),
    (["run", "nosuch.comp"], "component 'nosuch.comp' not found", 1),
    (["run", "utils.nope"], "not found", 1),
    (["builtins", "--print", "nosuch"], "component 'nosuch' not found", 1),
    (["run", "utils.touch"], "required: --file", 2),
    (["run", "utils.echo", "--nosuch", "1"], "unrecognized arguments: --nosuch 1 (put the program's own", 2),
    (["run", "utils.echo", "--mgs", "hi"], "unrecognized arguments: --mgs hi (did you mean --msg?)", 2),
    (["run", "--dryrun", "dist.ddp", "--script", "t.py", "-h"],
     "-h is this component's h argument, the named resource of a node as in TorchX, e.g. -h gpu.small; "
     "for help: tx run dist.ddp --help", 2),
    (["run", "utils.python"], "exactly one of -m, -c and --script", 2),
    (["run", "utils.sh", "--num_replicas", "two", "echo"], "invalid int value: 'two'", 2),
    (["run", "utils.sh", "--num_replicas", "0", "echo"], "num_replicas must be an integer >= 1", 2),
    # absurd sizes and durations: refused before anything expands or starts
    (["run", "--dryrun", "utils.sh", "--num_replicas", "100000000", "echo"], "num_replicas must be at most 65536", 2),
    (["run", "utils.sh", "--num_replicas", "100000000", "echo"], "num_replicas must be at most 65536", 2),
    (["run", "--dryrun", "dist.ddp", "-j", "100000000x8", "--script", "t.py"], "at most 65536", 2),
    (["run", "-cfg", "cancel_timeout=nan", "utils.echo"], "'cancel_timeout' must be a finite number, got nan", 1),
    (["run", "-cfg", "cancel_timeout=inf", "utils.echo"], "must be a finite number, got inf", 1),
    (["run", "-cfg", "cancel_timeout=-1", "utils.echo"], "'cancel_timeout' must be >= 0 seconds", 1),
    (["run", "dist.ddp", "-j", "1x2"], "exactly one of --script and -m", 2),
    (["run", "dist.ddp", "-j", "abc", "--script", "t.py"], "Invalid format for `-j` 'abc'", 2),
    (["run", "dist.ddp", "-j", "0x2", "--script", "t.py"], "at least 1", 2),
    (["run", "dist.ddp", "--script", "t.py", "-m", "mod"], "exactly one of --script and -m", 2),
    (["run", "dist.ddp", "-h", "nosuch.size", "--script", "t.py"], "unknown named resource 'nosuch.size'", 2),
    (["run", "dist.ddp", "--mounts", "type=foo,src=a,dst=b", "--script", "t.py"], "unknown mount type 'foo'", 2),
    (["run", "dist.ddp", "--mounts", "src=a", "--script", "t.py"], "before type=", 2),
    (["run", "dist.ddp", "--env", "A", "--script", "t.py"], "argument --env", 2),
    (["run", "dist.ddp", "--max_retries", "-1", "--script", "t.py"], "max_retries", 2),
    # component files
    (["run", "missing.py:fn"], "no such file", 1),
    (["run", "broken.py:broken"], "broken.py", 1),
    (["run", "comps.py:nosuch"], "nosuch", 1),
    (["run", "comps.py:unannotated"], "unannotated", 1),
    (["run", "comps.py:raises", "--n", "0"], "n must be positive, got 0", 2),
    (["run", "comps.py:returns_str"], "returns_str", 1),
    (["run", "comps.py:ok", "--msg"], "expected one argument", 2),
    (["lint", "missing.py"], "no such file", 2),
    # AppDef files
    (["run", "app.yaml"], "app.yaml: cannot read", 1),
    (["run", "bad.yaml"], "bad.yaml:", 1),
    (["run", "bad.json"], "bad.json:", 1),
    (["run", "two.yaml"], "roles[0].num_replicas: expected int, got 'two'", 1),
    (["run", "typo.json"], "unknown key 'entrypiont'", 1),
    (["run", "zero.json"], "roles[0].num_replicas: must be an integer >= 1, got 0", 1),
    (["run", "noname.json"], "name: missing", 1),
    (["run", "dup.json"], "duplicate role name 'r'", 1),
    (["run", "noroles.json"], "has no roles", 1),
    (["run", "noentry.json"], "has no entrypoint", 1),
    (["run", "policy.json"], "retry_policy", 1),
    (["run", "mount.json"], "nfs", 1),
    (["run", "list.yaml"], "list.yaml", 1),
    (["run", "good.json", "extra"], "an AppDef file takes no arguments", 2),
    # the command line itself
    (["nosuchcmd"], "invalid choice: 'nosuchcmd'", 2),
    (["--log_level", "LOUD", "plugins"], "unknown log level 'LOUD'", 2),
    (["status"], "required: APP_HANDLE", 2),
    (["run", "-cfg", "a=1", "-s"], "expected one argument", 2),
]


@pytest.mark.parametrize("args, needle, code", CORPUS, ids=[" ".join(c[0]) or "-" for c in CORPUS])
def test_bad_input(tx, workdir, one_line_error, args, needle, code):
    proc = tx(*args, cwd=workdir)
    one_line_error(proc, needle, code)
    assert proc.stdout == ""


def test_corpus_is_big_enough():
    assert len(CORPUS) >= 50


def test_bad_txconfig(tx, tx_env, workdir, one_line_error):
    (workdir / ".txconfig").write_text("[local_cwd]\nlog_dri = /tmp\n")
    one_line_error(tx("run", "utils.echo", cwd=workdir), "unknown run option 'log_dri'", 1)
    (workdir / ".txconfig").write_text("not an ini file\n")
    one_line_error(tx("run", "utils.echo", cwd=workdir), ".txconfig", 1)
    env = dict(tx_env, TXCONFIG=str(workdir / "missing.ini"))
    (workdir / ".txconfig").unlink()
    one_line_error(tx("run", "utils.echo", cwd=workdir, env=env), "no such file", 1)


def test_txconfig_not_utf8_is_named(tx, tmp_path, one_line_error):
    (tmp_path / ".txconfig").write_bytes(b"[local_cwd]\nlog_dir = caf\xe9\n")
    p = tx("run", "-s", "local_cwd", "utils.echo", "--msg", "hi")
    one_line_error(p, f"{tmp_path / '.txconfig'}: not UTF-8 text (byte 0xe9 on line 2, offset 25)")
    assert "unexpected" not in p.stderr


@pytest.mark.parametrize("handle", ["local_cwd://tx/a\nFORGED: b", "local_cwd://tx/a\x1b[2Jx", "local_cwd://tx/a\rX"])
def test_echoed_text_cannot_forge_lines(tx, handle):
    for cmd in (["status", handle], ["cancel", handle], ["log", handle + "/r/0"], ["describe", handle]):
        p = tx(*cmd)
        assert p.returncode != 0
        assert len(p.stderr.splitlines()) == 1 and "\x1b" not in p.stderr and "\r" not in p.stderr, repr(p.stderr)
        assert "FORGED" not in p.stderr or "\\nFORGED" in p.stderr, repr(p.stderr)
