"""The apps table pages and filters on the server: with 250 apps (copies of one real run, as
the local scheduler writes them) a page holds 100, newest first, the same apps and order as
``tx list``; ``?page=``, ``?state=``, ``?scheduler=`` and ``?name=``/``?q=`` are applied by
the server, which says how many match and links the next and previous pages."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from tx_scheduler_local._clone import clone_finished_app
from tx_ui.testing import serve

N = 250


def _rows(page: str):
    return re.findall(r'<tr class="app" data-handle="([^"]+)" data-state="(\w+)">', page)


def _count(page: str) -> str:
    return re.search(r'id="count">([^<]*)<', page).group(1)


@pytest.fixture(scope="module")
def many(ui_env, txm, handle):
    """``tx ui`` over N finished local_cwd apps, a third FAILED; the handles as `tx list --all` orders them."""
    first = handle(txm("run", "-s", "local_cwd", "utils.echo", "--msg", "hi"))
    apps_dir = Path(ui_env["TX_STATE_DIR"]) / "local" / "apps"
    clone_finished_app(str(apps_dir), first.rsplit("/", 1)[1], N - 1, submitted=lambda i: 1_700_000_000.0 + i,
                       state=lambda i: "FAILED" if i % 3 == 0 else "SUCCEEDED")
    listed = [json.loads(line) for line in txm("list", "--all", "--json").stdout.splitlines()]
    assert len(listed) == N
    with serve(ui_env, "-s", "local_cwd,local_dir", "--timeout", "30") as server:
        yield server, [(r["app_handle"], r["state"]) for r in listed]


def test_the_apps_table_pages_on_the_server(many):
    ui, listed = many
    status, page = ui.get("/")
    assert status == 200
    assert _rows(page) == listed[:100] and _count(page) == f"1-100 of {N} apps"
    assert 'id="older" href="/?page=2"' in page and 'id="newer"' not in page
    last = ui.get("/", page=3)[1]
    assert _rows(last) == listed[200:] and _count(last) == f"201-{N} of {N} apps"
    assert 'id="newer" href="/?page=2"' in last and 'id="older"' not in last
    beyond = ui.get("/", page=9)[1]
    assert _rows(beyond) == [] and "no apps" in beyond and _count(beyond) == f"0 of {N} apps"
    # the live table carries the same page
    data = json.loads(ui.events("/events/apps", until="apps", page=2)[-1]["data"])
    assert data["label"] == f"101-200 of {N} apps" and data["count"] == 100 and data["total"] == N


def test_filters_apply_before_paging(many):
    ui, listed = many
    failed = [r for r in listed if r[1] == "FAILED"]
    page = ui.get("/", state="FAILED")[1]
    assert _rows(page) == failed[:100] and _count(page) == f"1-{min(100, len(failed))} of {len(failed)} apps"
    assert len(failed) == 83 and 'id="older"' not in page  # one page holds them all
    named = [r for r in listed if "clone-00012" in r[0]]
    assert len(named) == 10
    assert _rows(ui.get("/", name="CLONE-00012")[1]) == named  # part of the handle, any case
    assert _rows(ui.get("/", q="clone-00012", state="FAILED")[1]) == [r for r in named if r[1] == "FAILED"]
    assert _rows(ui.get("/", scheduler="local_dir")[1]) == []
    assert _rows(ui.get("/", scheduler="local_cwd", page=2)[1]) == listed[100:200]


def test_a_bad_page_number_is_one_line(many):
    ui, _ = many
    for bad in ("0", "-1", "x", "1.5"):
        status, body = ui.get("/", page=bad)
        assert (status, body) == (400, f"tx ui: page must be a whole number >= 1, got {bad!r}\n")
