"""Plain output of the CLI: component help and `tx builtins` without reStructuredText markup,
`tx builtins --json`, colors only where wanted (NO_COLOR, FORCE_COLOR, pipes)."""
from __future__ import annotations

import json


def test_component_help_and_builtins_have_no_markup(tx):
    for comp in ("dist.ddp", "dist.spmd", "utils.python", "utils.sh"):
        h = tx("run", comp, "--help")
        assert h.returncode == 0 and "usage:" in h.stdout, h.stderr
        assert "``" not in h.stdout and ":func:" not in h.stdout, h.stdout
    spmd = tx("run", "dist.spmd", "--help").stdout
    assert "(-j 2 -h gpu.xlarge = 2 nodes x 8 processes)" in " ".join(spmd.split())
    b = tx("builtins")
    assert "``" not in b.stdout and "dist.ddp" in b.stdout


def test_component_help_says_defaults_that_mean_something(tx):
    h = " ".join(tx("run", "dist.ddp", "--help").stdout.split())
    assert "--name str EXPERIMENT/RUN, EXPERIMENT/, /RUN or RUN; the run name defaults to the script or module name -h" in h
    assert "(default: /)" not in h and "(default: None)" not in h
    assert ("--image str the image to run in: container schedulers pull it; local_cwd ignores it and runs in "
            "the current directory (default: ghcr.io/pytorch/torchx:0.7.0)") in h


def test_plugins_text_leaves_out_the_placeholder_named_resources(tx):
    text = tx("plugins").stdout
    assert "gpu.small" in text and "NULL" not in text and "MISSING" not in text
    data = json.loads(tx("plugins", "--json").stdout)
    core = next(p for p in data["plugins"] if p["plugin"] == "tx-core")
    assert {"NULL", "MISSING"} <= set(core["registered"]["named_resources"])


def test_builtins_json(tx):
    p = tx("builtins", "--json")
    assert p.returncode == 0, p.stderr
    rows = [json.loads(ln) for ln in p.stdout.splitlines()]
    by = {r["name"]: r for r in rows}
    assert [r["name"] for r in rows] == sorted(by)
    assert by["dist.ddp"]["fn_name"] == "ddp" and by["dist.ddp"]["source"] == "tx.components.dist"
    assert by["dist.ddp"]["distribution"] == "tx-core"
    assert by["utils.echo"]["description"].startswith("Echoes a message")
    assert len(rows) == len([ln for ln in tx("builtins").stdout.splitlines()[1:] if ln.strip()])


def _colored(tx, tx_env, **env) -> bool:
    e = {k: v for k, v in tx_env.items() if k not in ("NO_COLOR", "FORCE_COLOR", "TERM")}
    e.update(env)
    p = tx("run", "-s", "local_cwd", "utils.echo", "--msg", "hi", env=e)
    assert p.returncode == 0, p.stderr
    assert "hi" in p.stdout
    return "\x1b[" in p.stdout


def test_colors_only_where_wanted(tx, tx_env):
    assert not _colored(tx, tx_env)  # a pipe: no color
    assert _colored(tx, tx_env, FORCE_COLOR="1")
    assert not _colored(tx, tx_env, FORCE_COLOR="1", NO_COLOR="1")
