"""The plugin snapshot cache: a second `tx` process knows what installed plugins
registered without importing them or pluggy, and notices edits and new installs."""
from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
import time

import pytest

from tx.testing.backends import backends_required

HOOKS = '''
from tx import hookimpl

@hookimpl
def tx_register_schedulers(register):
    register({name!r}, "fake_sched:create", description="a fake")

@hookimpl
def tx_on_event(event):
    with open({events!r}, "a") as f:
        f.write(str(event) + "\\n")
'''

PROBE = (
    "import json, sys\n"
    "from tx.plugins import get_registry\n"
    "r = get_registry()\n"
    "r.call_event('ping') if r.has_event_hooks and len(sys.argv) > 1 else None\n"
    "print(json.dumps({'schedulers': r.names('schedulers'), 'hooks': 'fake_hooks' in sys.modules,\n"
    "                  'pluggy': 'pluggy' in sys.modules, 'meta': 'importlib.metadata' in sys.modules,\n"
    "                  'dists': {n: r.get('schedulers', n).distribution for n in r.names('schedulers')}}))\n"
)


@pytest.fixture
def site(tmp_path):
    site = tmp_path / "site"
    dist = site / "fakeplug-1.2.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: fakeplug\nVersion: 1.2\n")
    (dist / "entry_points.txt").write_text("[tx]\nfake = fake_hooks\n")
    (site / "fake_hooks.py").write_text(HOOKS.format(name="fake", events=str(tmp_path / "events.txt")))
    return site


#: the probes write no bytecode: the first import of the fake plugin would otherwise create
#: ``site/__pycache__`` and so change the site directory's mtime, which the snapshot reads as
#: "something was installed" (a real site-packages gets its ``__pycache__`` once); the tests
#: then depended on the caller's PYTHONDONTWRITEBYTECODE (set in CI, unset on a developer's shell)
_NO_BYTECODE = {"PYTHONDONTWRITEBYTECODE": "1"}


def _probe(site, tmp_path, *args):
    env = dict(os.environ, **_NO_BYTECODE, PYTHONPATH=str(site), XDG_CACHE_HOME=str(tmp_path / "cache"))
    env.pop("TX_NO_CACHE", None)
    env.pop("TX_PLUGINS", None)
    env.pop("TX_DISABLE_PLUGINS", None)
    out = subprocess.run([sys.executable, "-c", PROBE, *args], env=env, capture_output=True,
                         text=True, cwd=tmp_path, check=True)
    return json.loads(out.stdout)


def test_second_process_imports_neither_the_plugin_nor_pluggy(site, tmp_path):
    first = _probe(site, tmp_path)
    assert "fake" in first["schedulers"] and first["hooks"] and first["pluggy"]
    second = _probe(site, tmp_path)
    assert second["schedulers"] == first["schedulers"]
    assert second["dists"]["fake"] == "fakeplug"
    assert not second["hooks"] and not second["pluggy"] and not second["meta"]


def test_event_listeners_are_loaded_when_an_event_fires(site, tmp_path):
    _probe(site, tmp_path)
    out = _probe(site, tmp_path, "fire")
    assert out["hooks"] and out["pluggy"]
    assert (tmp_path / "events.txt").read_text() == "ping\n"


def test_an_edited_hooks_module_is_read_again(site, tmp_path):
    _probe(site, tmp_path)
    dir_mtime = os.stat(site).st_mtime_ns
    time.sleep(0.01)
    (site / "fake_hooks.py").write_text(HOOKS.format(name="fake2", events=str(tmp_path / "e.txt")))
    assert os.stat(site).st_mtime_ns == dir_mtime  # only the file changed, not sys.path's dirs
    out = _probe(site, tmp_path)
    assert "fake2" in out["schedulers"] and "fake" not in out["schedulers"] and out["hooks"]


def test_a_new_distribution_is_seen(site, tmp_path):
    _probe(site, tmp_path)
    dist = site / "otherplug-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: otherplug\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text("[tx]\nother = other_hooks\n")
    (site / "other_hooks.py").write_text(
        "from tx import hookimpl\n\n@hookimpl\ndef tx_register_schedulers(register):\n"
        "    register('zz_other', 'other_sched:create')\n"
    )
    out = _probe(site, tmp_path)
    assert out["dists"]["zz_other"] == "otherplug" and out["dists"]["fake"] == "fakeplug"


EXITING = {
    "exits": "import sys\nsys.exit(3)\n",
    "argparses": "import argparse\np = argparse.ArgumentParser()\np.add_argument('--mine', required=True)\np.parse_args()\n",
    "raises": "raise RuntimeError('boom at import')\n",
    "hook_exits": "from tx import hookimpl\nimport sys\n@hookimpl\ndef tx_register_schedulers(register):\n    sys.exit(1)\n",
}


@pytest.mark.parametrize("kind", sorted(EXITING))
def test_a_plugin_that_exits_or_raises_is_reported_and_skipped(tmp_path, kind):
    site = tmp_path / "site"
    dist = site / "badplug-1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: badplug\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text("[tx]\nbad = bad_hooks\n")
    (site / "bad_hooks.py").write_text(EXITING[kind])
    env = dict(os.environ, **_NO_BYTECODE, PYTHONPATH=str(site), XDG_CACHE_HOME=str(tmp_path / "cache"))
    tx = os.path.join(os.path.dirname(sys.executable), "tx")
    p = subprocess.run([tx, "plugins"], env=env, capture_output=True, text=True, timeout=60, cwd=tmp_path)
    assert p.returncode == 0, p.stderr
    assert "bad" in p.stdout and ("sys.exit" in p.stdout or "boom at import" in p.stdout), p.stdout
    assert "usage:" not in p.stderr, p.stderr
    for _ in range(2):  # and again, from the cache: other commands work
        q = subprocess.run([tx, "run", "--dryrun", "-s", "local_cwd", "utils.echo"], env=env,
                           capture_output=True, text=True, timeout=60, cwd=tmp_path)
        assert q.returncode == 0 and "=== SCHEDULER REQUEST ===" in q.stdout, q.stderr


def test_a_cache_file_of_another_layout_is_ignored(site, tmp_path):
    first = _probe(site, tmp_path)
    assert "fake" in first["schedulers"]
    for f in (tmp_path / "cache" / "tx").iterdir():  # as an older tx wrote them: no layout
        data = json.loads(f.read_text())
        data.pop("layout", None)
        if "entry_points" in data:
            data["entry_points"] = []
        else:
            data["plugins"] = []
        f.write_text(json.dumps(data))
    again = _probe(site, tmp_path)
    assert "fake" in again["schedulers"], again


# -- a damaged cache is a miss ---------------------------------------------------------------
def _first_row(data):
    return next(p["registrations"] for p in data["plugins"] if p["registrations"])


def _set(obj, key, value):
    obj[key] = value
    return obj


#: snapshot damage: name -> function of the parsed file returning what is written back (a
#: str is written as it is); key and layout are kept, so that only the shape is wrong
SNAPSHOT_DAMAGE = {
    "a plugin lacks a field": lambda d: (d["plugins"][0].pop("module"), d)[1],
    "a short registration row": lambda d: (_first_row(d).__setitem__(0, _first_row(d)[0][:1]), d)[1],
    "a list where a plugin mapping belongs": lambda d: _set(d, "plugins", [list(p.values()) for p in d["plugins"]]),
    "a list where the file's mapping belongs": lambda d: [d],
    "registrations of the wrong type": lambda d: (_set(d["plugins"][0], "registrations", 5), d)[1],
    "a mtime of the wrong type": lambda d: (_set(d["plugins"][0], "mtime", "yesterday"), d)[1],
    "an events flag of the wrong type": lambda d: (_set(d["plugins"][0], "events", "no"), d)[1],
    "an unknown registry kind": lambda d: (_first_row(d)[0].__setitem__(0, "gizmos"), d)[1],
    "a plugin missing": lambda d: _set(d, "plugins", d["plugins"][1:]),
    "a number where a registration row belongs": lambda d: (_first_row(d).__setitem__(0, 7), d)[1],
    "a number where a plugin belongs": lambda d: _set(d, "plugins", [7 for _ in d["plugins"]]),
    "selected not a list": lambda d: _set(d, "selected", "fake"),
    "not JSON": lambda d: "{not json",
    "an empty file": lambda d: "",
}

#: entry-point cache damage, as SNAPSHOT_DAMAGE
ENTRY_POINT_DAMAGE = {
    "a short row": lambda d: _set(d, "entry_points", [ep[:1] for ep in d["entry_points"]]),
    "a mapping where a row belongs": lambda d: _set(d, "entry_points", [{"name": ep[0]} for ep in d["entry_points"]]),
    "a list where the file's mapping belongs": lambda d: [d],
    "rows of the wrong type": lambda d: _set(d, "entry_points", [[1, 2, 3, 4] for _ in d["entry_points"]]),
    "a number where a row belongs": lambda d: _set(d, "entry_points", [7 for _ in d["entry_points"]]),
    "not JSON": lambda d: "[[",
}


@pytest.fixture(scope="module")
def warm_cache(tmp_path_factory):
    """A plugin (``fake``) on PYTHONPATH and the cache files a first `tx plugins` wrote."""
    base = tmp_path_factory.mktemp("warm")
    site = base / "site"
    dist = site / "fakeplug-1.2.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: fakeplug\nVersion: 1.2\n")
    (dist / "entry_points.txt").write_text("[tx]\nfake = fake_hooks\n")
    (site / "fake_hooks.py").write_text(HOOKS.format(name="fake", events=str(base / "events.txt")))
    cache = base / "cache"
    _tx(site, cache, base, "plugins")
    files = {f.name: f.read_text() for f in (cache / "tx").iterdir()}
    assert len(files) == 2, files
    return site, files


def _tx(site, cache, cwd, *args):
    env = dict(os.environ, **_NO_BYTECODE, PYTHONPATH=os.pathsep.join([str(site), os.environ.get("PYTHONPATH", "")]),
               XDG_CACHE_HOME=str(cache))
    for var in ("TX_NO_CACHE", "TX_PLUGINS", "TX_DISABLE_PLUGINS", "TX_TRACE_PLUGINS"):
        env.pop(var, None)
    tx = os.path.join(os.path.dirname(sys.executable), "tx")
    return subprocess.run([tx, *args], env=env, capture_output=True, text=True, timeout=120, cwd=cwd)


def _damaged_run(warm_cache, tmp_path, suffix, damage):
    """Write the warm cache with the file ending in ``suffix`` damaged, run `tx plugins` and
    return the damaged text and the cache directory afterwards."""
    site, files = warm_cache
    cache = tmp_path / "cache" / "tx"
    cache.mkdir(parents=True)
    for name, text in files.items():
        if name.endswith(suffix) and not (suffix == ".json" and name.endswith(".plugins.json")):
            new = damage(json.loads(text))
            text = new if isinstance(new, str) else json.dumps(new)
            damaged = (name, text)
        (cache / name).write_text(text)
    p = _tx(site, tmp_path / "cache", tmp_path, "plugins")
    assert p.returncode == 0, p.stderr
    assert "fake (fakeplug 1.2): ok" in p.stdout and "fake" in p.stdout, p.stdout
    assert p.stderr == "", p.stderr
    return damaged, cache


@pytest.mark.parametrize("damage", sorted(SNAPSHOT_DAMAGE))
def test_a_damaged_snapshot_is_a_miss_rebuilt(warm_cache, tmp_path, damage):
    from tx._plugin_cache import _snapshot_shape_ok
    from tx.plugins import KINDS

    (name, text), cache = _damaged_run(warm_cache, tmp_path, ".plugins.json", SNAPSHOT_DAMAGE[damage])
    after = (cache / name).read_text()
    assert after != text
    data = json.loads(after)
    assert _snapshot_shape_ok(data, data["key"], KINDS), after
    assert after == warm_cache[1][name]  # rebuilt as the first run wrote it


@pytest.mark.parametrize("damage", sorted(ENTRY_POINT_DAMAGE))
def test_a_damaged_entry_point_cache_is_a_miss_rebuilt(warm_cache, tmp_path, damage):
    from tx._plugin_cache import _entry_points_shape_ok

    (name, text), cache = _damaged_run(warm_cache, tmp_path, ".json", ENTRY_POINT_DAMAGE[damage])
    after = (cache / name).read_text()
    assert after != text
    data = json.loads(after)
    assert _entry_points_shape_ok(data, data["key"]) and after == warm_cache[1][name]


@pytest.mark.skipif(importlib.util.find_spec("tx_scheduler_local") is None and not backends_required(),
                    reason="tx-scheduler-local is not installed: pip install -e plugins/scheduler-local")
@pytest.mark.parametrize("damage", ["a short registration row", "a plugin lacks a field",
                                    "a list where a plugin mapping belongs", "registrations of the wrong type"])
def test_tx_run_dryrun_with_a_damaged_snapshot(warm_cache, tmp_path, damage):
    """The failures the issue reported (`tx run: error: module`, `not enough values to
    unpack`, `'list' object has no attribute 'get'`) are gone: the run works and the file
    is rewritten."""
    site, files = warm_cache
    cache = tmp_path / "cache" / "tx"
    cache.mkdir(parents=True)
    for name, text in files.items():
        if name.endswith(".plugins.json"):
            text = json.dumps(SNAPSHOT_DAMAGE[damage](json.loads(text)))
            snap = cache / name
        (cache / name).write_text(text)
    q = _tx(site, tmp_path / "cache", tmp_path, "run", "--dryrun", "-s", "local_cwd", "utils.echo")
    assert q.returncode == 0 and "=== SCHEDULER REQUEST ===" in q.stdout, q.stderr
    assert snap.read_text() == files[snap.name]


# -- the working directory's distributions ----------------------------------------------------
def test_a_distribution_in_the_working_directory_is_seen_in_any_order(site, tmp_path):
    """With the working directory on sys.path (``python -c``: ``""``), a plugin installed
    there is seen from there and only from there, whichever directory ran first."""
    other = tmp_path / "elsewhere"
    other.mkdir()
    env = dict(os.environ, **_NO_BYTECODE, XDG_CACHE_HOME=str(tmp_path / "cache"))
    for var in ("TX_NO_CACHE", "TX_PLUGINS", "TX_DISABLE_PLUGINS"):
        env.pop(var, None)
    probe = "from tx.plugins import get_registry; print('fake' in get_registry().names('schedulers'))"

    def seen(cwd):
        out = subprocess.run([sys.executable, "-c", probe], env=env, capture_output=True, text=True,
                             cwd=cwd, check=True)
        return out.stdout.strip() == "True"

    assert [seen(other), seen(site), seen(other), seen(site)] == [False, True, False, True]
    for f in (tmp_path / "cache" / "tx").iterdir():
        f.unlink()
    assert [seen(site), seen(other), seen(site), seen(other)] == [True, False, True, False]


def test_the_direct_scan_finds_what_importlib_metadata_finds(tmp_path, monkeypatch):
    """The cache-miss scan reads the distributions' metadata directories itself (no
    importlib.metadata: ~70 ms); it gives the same entry points as importlib.metadata, here
    and on a site with a duplicate distribution, comments, other groups and an egg-info."""
    from tx import _plugin_cache as pc

    assert sorted(pc._scan_entry_points()) == sorted(pc._metadata_entry_points())
    first, second = tmp_path / "a", tmp_path / "b"
    for site, value in ((first, "one.hooks"), (second, "two.hooks")):
        d = site / "tx_scheduler_dup-1.0.dist-info"
        d.mkdir(parents=True)
        (d / "METADATA").write_text("Metadata-Version: 2.1\nName: tx-scheduler-dup\nVersion: 1.0\n\nName: not a header\n")
        (d / "entry_points.txt").write_text(f"# comment\n[console_scripts]\nx = y:z\n\n[tx]\n# other\ndup = {value}\n")
    egg = second / "tx_egg.egg-info"
    egg.mkdir()
    (egg / "PKG-INFO").write_text("Name: tx-egg\nVersion: 0.2\n")
    (egg / "entry_points.txt").write_text("[tx]\negg=tx_egg.hooks\n")
    monkeypatch.setattr(sys, "path", [str(first), str(second)])
    scanned = list(pc._scan_entry_points())
    assert scanned == [("dup", "one.hooks", "tx-scheduler-dup", "1.0"), ("egg", "tx_egg.hooks", "tx-egg", "0.2")]
    assert sorted(scanned) == sorted(pc._metadata_entry_points())


def test_every_group_is_read_as_importlib_metadata_reads_it(tmp_path, monkeypatch):
    """tx.plugins.entry_points(group) (one scan for every group, kept while no distribution
    is installed or removed: tx-torchx-compat asks for four of TorchX's groups on a cache
    miss) gives what importlib.metadata gives for each group of this environment, and sees a
    distribution installed after the first call in the same process."""
    from importlib.metadata import entry_points as md_entry_points

    from tx import _plugin_cache as pc
    from tx.plugins import entry_points

    groups = sorted(set(md_entry_points().groups) | {"torchx.schedulers", "no.such.group"})
    for group in groups:
        assert sorted(entry_points(group)) == sorted(pc._metadata_entry_points(group)), group
    site = tmp_path / "site"
    site.mkdir()
    monkeypatch.setattr(sys, "path", [str(site)])
    assert entry_points("torchx.schedulers") == []
    d = site / "late-1.0.dist-info"
    d.mkdir()
    (d / "METADATA").write_text("Name: late\nVersion: 1.0\n")
    (d / "entry_points.txt").write_text("[torchx.schedulers]\nlate = late.sched:create\n[tx]\nlate = late.hooks\n")
    assert entry_points("torchx.schedulers") == [("late", "late.sched:create", "late", "1.0")]
    assert entry_points("tx") == [("late", "late.hooks", "late", "1.0")]
