"""bench/: every RESULTS file has an owner in bench/regen.py, stamps are written and read
back, and run.py gives no ratio between sides that did not do the same work.

The bench scripts are not tests (nothing under bench/ is collected); these check the code that
writes their verdicts and stamps, on results shaped as run.py records them.
"""
from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BENCH = REPO / "bench"


def _load(name: str):
    if str(BENCH) not in sys.path:
        sys.path.insert(0, str(BENCH))
    spec = importlib.util.spec_from_file_location(f"_bench_{name}", BENCH / f"{name}.py")
    mod = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = mod  # dataclasses look their module up there
    spec.loader.exec_module(mod)
    return mod


def _case(walls, rcs, extras=None):
    return {"n": len(walls), "wall_min": min(walls), "wall_med": sorted(walls)[len(walls) // 2],
            "wall_max": max(walls), "walls": walls, "rcs": rcs, "timed_out": False,
            "leftovers": [], "rss_med_mb": 10.0, "extras": extras or [{} for _ in walls]}


def _res(tx, torchx):
    return {"meta": {"started": "2026-11-28 15:00:00 UTC", "elapsed_s": 1.0, "n": 3,
                     "warmup": 0, "machine": "m", "command": "python bench/run.py",
                     "commit": "a" * 40, "dirty": "no", "load_before": "1.00/1.00/1.00",
                     "load_after": "2.00/1.00/1.00"},
            "sides": {"tx": {"python": "p", "cases": tx}, "torchx": {"python": "q", "cases": torchx}}}


def test_every_results_file_has_an_owner():
    regen = _load("regen")
    owned = {f for t in regen.TOPICS for f in t.files} | set(regen.BY_HAND)
    files = {p.name for p in BENCH.glob("RESULTS*")}
    assert files - owned == set(), "RESULTS files no topic of bench/regen.py writes"


def test_list_cli_where_torchx_exits_1_is_not_a_ratio():
    run = _load("run")
    tx = {"list_cli": _case([0.07, 0.08, 0.09], [0])}
    tv = {"list_cli": _case([0.14, 0.15, 0.16], [1])}
    res = _res(tx, tv)
    res["budgets"] = run.budgets(res, 200000)
    md = run.render(res)
    row = next(ln for ln in md.splitlines() if ln.startswith("| list_cli |"))
    assert "NOT COMPARABLE" in row and "0.53x" not in row
    # nor is a case that TorchX failed listed as one where tx is slower
    tx["list_cli"] = _case([0.2, 0.2, 0.2], [0])
    md = run.render(res)
    assert "case `list_cli`" not in md


def test_fresh_status_where_torchx_finds_no_app_is_not_compared():
    run = _load("run")
    fx = [{"found": 5, "fresh_next_status_us": 150.0, "fresh_first_status_s": 0.05}] * 3
    fb = [{"found": 0, "fresh_first_status_s": 0.07}] * 3
    res = _res({"api_status_fresh": _case([1.0, 1.0, 1.0], [0], fx)},
               {"api_status_fresh": _case([2.0, 2.0, 2.0], [0], fb)})
    res["budgets"] = run.budgets(res, 200000)
    b = next(b for b in res["budgets"] if b["budget"].startswith("status() of a RUNNING"))
    assert "NOT COMPARABLE" in b["measured"] and "ratio" not in b
    row = next(ln for ln in run.render(res).splitlines() if ln.startswith("| api_status_fresh |"))
    assert "NOT COMPARABLE" in row and "0.50x" not in row


def test_stamp_is_added_under_the_title_replaced_and_read_back(tmp_path):
    regen = _load("regen")
    common = _load("_common")
    f = tmp_path / "RESULTS-x.md"
    f.write_text("# Title\n\nWritten on 2026-11-23 20:20 UTC.\n")
    assert regen.file_date(f) == "2026-11-23 20:20 UTC"
    git = {"commit": "b" * 40, "dirty": "yes"}
    regen.put_stamp(f, common.stamp_text(git, "2026-11-28 15:00 UTC", "5.00/4.00/3.00",
                                         "6.00/4.00/3.00", 5, "python bench/x.py"))
    regen.put_stamp(f, common.stamp_text(git, "2026-11-28 16:00 UTC", "1", "2", 5, "c"))
    text = f.read_text()
    assert text.count("Stamp: ") == 1 and text.splitlines()[2].startswith("Stamp: commit bbbbbbbbbbbb")
    assert "(tree dirty: yes)" in text
    assert regen.file_date(f) == "2026-11-28 16:00 UTC"


def test_regen_refuses_an_unknown_topic_and_lists_every_file():
    p = subprocess.run([sys.executable, str(BENCH / "regen.py"), "--only", "nosuch"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 2 and "unknown topic nosuch" in p.stderr and "Traceback" not in p.stderr
    p = subprocess.run([sys.executable, str(BENCH / "regen.py"), "--list"],
                       capture_output=True, text=True, timeout=60)
    assert p.returncode == 0
    for f in BENCH.glob("RESULTS*"):
        assert f"  {f.name}: " in p.stdout


def test_a_ratio_whose_rounds_lie_on_both_sides_of_its_limit_is_marked_for_a_rerun():
    run = _load("run")
    tx = {"ddp_torchx_1x2": _case([0.7, 1.0, 1.6], [0])}
    tx["ddp_torchrun"] = _case([1.0, 1.0, 1.0], [0])
    res = _res(tx, {})
    b = next(b for b in run.budgets(res, 200000) if "dist.ddp" in b["budget"])
    assert b["verdict"] == "PASS" and b["straddles"] is True
    assert b["cases"] == ["ddp_torchrun", "ddp_torchx_1x2"]


def _phases(import_ms, work_ms):
    rows = [{"phase": "import attrs", "cpu_ms_med": import_ms, "cpu_ms_min": import_ms,
             "cpu_ms_max": import_ms, "wall_ms_med": import_ms, "modules": 30},
            {"phase": "wait: relay the logs to their end, final status", "cpu_ms_med": work_ms,
             "cpu_ms_min": work_ms, "cpu_ms_max": work_ms, "wall_ms_med": work_ms, "modules": 1}]
    return {"n": 5, "rows": rows, "rcs": [0], "interpreter_cpu_ms": 20.0,
            "cpu_ms": 20.0 + import_ms + work_ms, "wall_ms": import_ms + work_ms, "modules": 31,
            "attrs_classes": 32, "load": "1.00/1.00/1.00"}


def test_issue_37_budgets_and_their_measured_reasons_come_from_the_run():
    """The echo run is judged against TorchX's fastest and 60 ms over the interpreter floor,
    the relay against 1.2x; a budget not met gets its reason, its figures computed from the
    same results (a rerun rewrites them); a run that meets them all gets no reason section."""
    run = _load("run")
    tx = {"run_echo": _case([0.20, 0.20, 0.20], [0]), "floor_python": _case([0.02, 0.02, 0.02], [0]),
          "log_direct": _case([0.20, 0.20, 0.20], [0]), "log_cli": _case([0.40, 0.40, 0.40], [0],
                                                                          [{"good_lines": 200000}] * 3)}
    tv = {"run_echo": _case([0.50, 1.50, 1.50], [0])}
    res = _res(tx, tv)
    res["meta"]["lines"] = 200000
    res["sides"]["tx"]["phases"] = _phases(120.0, 30.0)
    res["budgets"] = run.budgets(res, 200000)
    by = {b["budget"]: b for b in res["budgets"]}
    assert by["`tx run ... utils.echo` vs TorchX's fastest run"]["verdict"] == "FAIL"  # 0.40x
    floor = by["`tx run ... utils.echo` above the interpreter floor (`python -c pass`)"]
    assert floor["verdict"] == "FAIL" and "**180 ms**" in floor["measured"]
    relay = by["`tx run --log` of 200,000 lines vs the generator directly"]
    assert relay["limit"] == "<= 1.2x" and relay["verdict"] == "FAIL"  # 2.00x
    md = run.render(res)
    section = md.split("## Measured reasons", 1)[1].split("\n## ", 1)[0]
    assert "| import attrs | 120.0 (120.0-120.0) |" in section
    assert "takes 180 ms of wall more than `python -c pass`" in section
    assert "1.2x allows tx 40 ms" in section and "fixed cost for any local app" in section
    # every budget met: no section
    tx["run_echo"] = _case([0.06, 0.06, 0.06], [0])
    tx["log_cli"] = _case([0.22, 0.22, 0.22], [0], [{"good_lines": 200000}] * 3)
    res["budgets"] = run.budgets(res, 200000)
    assert "## Measured reasons" not in run.render(res)
