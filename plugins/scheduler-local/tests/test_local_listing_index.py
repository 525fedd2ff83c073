"""Listing many finished apps reads one file: the summaries of finished apps are kept in the
hidden index ``.listed.json`` with each summary's modification time and size; a summary that
changed is read again, and a damaged index is only a cache (the listing is the same)."""
from __future__ import annotations

import json
import os
from pathlib import Path

from tx_scheduler_local import _listing, _store
from tx_scheduler_local.scheduler import create_cwd_scheduler


def test_finished_apps_are_listed_from_one_file_until_their_summary_changes(tx, tx_env, monkeypatch):
    ids = []
    for i in range(3):
        p = tx("run", "-s", "local_cwd", "utils.echo", "--msg", f"hi{i}")
        assert p.returncode == 0, p.stderr
        ids.append(p.stdout.splitlines()[0].rsplit("/", 1)[1])
    s = create_cwd_scheduler("tx", state_dir=tx_env["TX_STATE_DIR"])
    apps_dir = Path(s.apps_dir)

    def listed():
        return [(a.app_id, a.state.name, a.name, a.submitted, a.ended) for a in _listing.list_apps(s.apps_dir, s.describe)]

    first = listed()  # records each final state in its summary
    assert sorted(a[0] for a in first) == sorted(ids) and {a[1] for a in first} == {"SUCCEEDED"}
    assert listed() == first  # writes the index
    assert sorted(json.loads((apps_dir / _listing.INDEX).read_text())["finished"]) == sorted(ids)
    reads = []
    real = _store.read_json
    monkeypatch.setattr(_store, "read_json", lambda path: reads.append(path) or real(path))
    assert listed() == first
    assert reads == [str(apps_dir / _listing.INDEX)]  # one file for three finished apps

    # a summary that changed is read again
    summary = apps_dir / ids[0] / _listing.SUMMARY
    data = json.loads(summary.read_text())
    summary.write_text(json.dumps({**data, "app_name": "renamed-by-hand"}))
    reads.clear()
    assert dict((a[0], a[2]) for a in listed())[ids[0]] == "renamed-by-hand"
    assert str(summary) in reads
    monkeypatch.undo()
    # a damaged index: the same listing, and a good index again
    (apps_dir / _listing.INDEX).write_text("{not json")
    again = listed()
    assert again == listed() and len(again) == 3
    assert sorted(json.loads((apps_dir / _listing.INDEX).read_text())["finished"]) == sorted(ids)
    # an app that is gone leaves the index; the index is never listed as an app
    os.rename(apps_dir / ids[1], apps_dir / f".gc-{ids[1]}-1")
    assert sorted(a[0] for a in listed()) == sorted([ids[0], ids[2]])
    assert sorted(json.loads((apps_dir / _listing.INDEX).read_text())["finished"]) == sorted([ids[0], ids[2]])
