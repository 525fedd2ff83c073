"""docs/portability.md's document module (tests/portability_matrix.py): what it renders
reads back, and every explanation in tests/portability_explained.json names a cell that
exists. The matrix itself runs in tests/test_portability.py."""
from __future__ import annotations

from portability_matrix import (  # tests/portability_matrix.py (pytest.ini: pythonpath)
    APPS, ASPECTS, BACKEND_ASPECTS, BACKENDS, REFERENCE, load_explained, parse, render,
)


def test_explanations_name_real_cells() -> None:
    """Every explanation names a backend, an app (or ``backend``) and an aspect that exist,
    and says something."""
    explained = load_explained()
    for b, apps in explained.get("not_run", {}).items():
        assert b in BACKENDS and set(apps) <= set(APPS) and all(len(w) > 20 for w in apps.values()), (b, apps)
    for b, groups in explained.get("differences", {}).items():
        assert b in BACKENDS and b != REFERENCE, b
        for g, aspects in groups.items():
            assert g in (*APPS, "backend"), g
            for a, e in aspects.items():
                assert a in (*ASPECTS, *BACKEND_ASPECTS) and e["cell"] and len(e["why"]) > 20, (b, g, a, e)


def test_parse_reads_back_what_render_writes() -> None:
    rows = {"local_cwd": {"ddp": {a: f"v {a} |x" for a in ASPECTS}, "backend": {a: "ok" for a in BACKEND_ASPECTS}},
            "ray": {"logs": {a: "w" for a in ASPECTS}}, "gcp_batch": {"retry": {a: "g" for a in ASPECTS}}}
    text = render(rows, {})
    assert parse(text) == rows
    # a column measured against tx's own test server is marked in every cell it has, and named
    assert "| gcp_batch | g * † | g * † |" in text  # differs from local_cwd (*), not a real backend (†)
    assert "| gcp_batch | fake_gcp:" in text and "| ray | a private Ray head (pinned ray[default]) | real |" in text
