"""Listing many finished apps reads one file: the summaries of finished apps are kept in the
hidden index ``.listed.jsonl`` (a header line, one line per app) with each summary's
modification time and size; a summary that changed is read again, and a damaged index is
only a cache (the listing is the same). A page of them keeps only the page."""
from __future__ import annotations

import json
import os
from pathlib import Path

from tx_scheduler_local import _listing, _store
from tx_scheduler_local._clone import clone_finished_app
from tx_scheduler_local.scheduler import create_cwd_scheduler


def _indexed(apps_dir: Path) -> list:
    """The app ids in the index (checks its header)."""
    lines = (apps_dir / _listing.INDEX).read_text().splitlines()
    assert json.loads(lines[0]) == {"version": 2}
    return sorted(json.loads(ln)[0] for ln in lines[1:])


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

    first = listed()  # records each final state in its summary, and writes the index
    assert sorted(a[0] for a in first) == sorted(ids) and {a[1] for a in first} == {"SUCCEEDED"}
    assert _indexed(apps_dir) == sorted(ids)
    written = (apps_dir / _listing.INDEX).stat().st_mtime_ns
    reads = []
    real = _store.read_json
    monkeypatch.setattr(_store, "read_json", lambda path: reads.append(path) or real(path))
    assert listed() == first
    assert reads == []  # the index alone (streamed) for three finished apps
    assert (apps_dir / _listing.INDEX).stat().st_mtime_ns == written  # nothing changed: not rewritten

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
    assert _indexed(apps_dir) == sorted(ids)
    # a damaged line: that app is read from its files, the others from the index
    text = (apps_dir / _listing.INDEX).read_text().splitlines()
    (apps_dir / _listing.INDEX).write_text("\n".join([text[0], "[not json", *text[2:]]) + "\n")
    assert listed() == again and _indexed(apps_dir) == sorted(ids)
    # an app that is gone leaves the index; the index is never listed as an app
    os.rename(apps_dir / ids[1], apps_dir / f".gc-{ids[1]}-1")
    assert sorted(a[0] for a in listed()) == sorted([ids[0], ids[2]])
    assert _indexed(apps_dir) == sorted([ids[0], ids[2]])


def test_a_page_of_many_apps_keeps_only_the_page(tx, tx_env, monkeypatch):
    """300 finished apps (copies of one real run, as the scheduler writes them): a page is
    the same as the whole list's slice, newest first, filtered by state and name, with the
    count of all that match; it builds only its own apps (memory bounded by the page)."""
    p = tx("run", "-s", "local_cwd", "utils.echo", "--msg", "hi")
    assert p.returncode == 0, p.stderr
    s = create_cwd_scheduler("tx", state_dir=tx_env["TX_STATE_DIR"])
    first = p.stdout.splitlines()[0].rsplit("/", 1)[1]
    t0 = 1_700_000_000.0
    clone_finished_app(s.apps_dir, first, 299, submitted=lambda i: t0 + i,
                       state=lambda i: "FAILED" if i % 3 == 0 else "SUCCEEDED")
    whole = s.list()
    assert len(whole) == 300 and whole[0].app_id == first  # the real run is the newest
    assert [a.app_id for a in whole[1:4]] == ["clone-000298", "clone-000297", "clone-000296"]
    built = []
    real = _listing._from_row
    monkeypatch.setattr(_listing, "_from_row", lambda row: built.append(row[0]) or real(row))
    page = s.list_page(limit=20, offset=40)
    assert [a.app_id for a in page.apps] == [a.app_id for a in whole[40:60]] and page.total == 300
    assert len(built) == 20  # of 300 indexed apps, the page's 20 are built
    failed = s.list_page(limit=5, states={"FAILED"})
    assert failed.total == 100 and [a.app_id for a in failed.apps] == [
        a.app_id for a in whole if a.state.name == "FAILED"][:5]
    named = s.list_page(limit=50, name="CLONE-00012")  # part of the handle, any case
    assert named.total == 10 and {a.app_id for a in named.apps} == {f"clone-00012{d}" for d in range(10)}
    assert s.list_page(limit=0).apps == [] and s.list_page(limit=10, offset=300).apps == []
