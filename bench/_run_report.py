"""bench/run.py's verdicts and its page: the budgets of the issues checked against a run's
results (``budgets``), and RESULTS.md rendered from RESULTS.json (``render``; ``python
bench/run.py --render RESULTS.json`` re-renders it alone). Not a bench: run.py imports it.
"""
from __future__ import annotations

import statistics
from typing import Any, Dict, List, Optional, Tuple

from _common import stamp_text
from _reasons import reasons

# modules that `tx --version` / `tx --help` must not import (prefix match on dotted names)
FORBIDDEN = ["pluggy", "importlib.metadata", "importlib_metadata", "structlog", "cattrs",
             "yaml", "tx_scheduler_*", "boto3", "kubernetes", "ray", "docker"]

#: a ratio verdict this close to its limit (relative) is measured again before it is written
NEAR = 0.10

WHAT = {
    "floor_echo": "`echo hi` (process spawn floor)",
    "floor_python": "`python -c pass` (interpreter floor)",
    "cli_version": "`CLI --version`",
    "cli_help": "`CLI --help`",
    "cli_builtins": "`CLI builtins`",
    "cli_runopts": "`CLI runopts` (all schedulers)",
    "cli_runopts_local": "`CLI runopts local_cwd`",
    "import_specs": "`python -c 'import PKG.specs'`",
    "import_runner": "`python -c 'import PKG.runner'`",
    "run_echo": "`CLI run -s local_cwd utils.echo --msg hi`",
    "run_echo_cold": "the same with empty launcher caches (a fresh XDG_CACHE_HOME each run)",
    "api_first_call": "API, fresh interpreter: import the runner, first `run()` of an echo app, "
                      "its end",
    "api_status_fresh": "API: `status()` of a RUNNING local_cwd app from 5 fresh "
                        "interpreters (as `status` from another shell)",
    "ddp_torchx_1x2": "`CLI run -s local_cwd dist.ddp -j 1x2 --script train.py`",
    "ddp_torchrun": "`torchrun --nproc_per_node 2 train.py` (no launcher)",
    "ddp_torchrun_c10d": "`torchrun --rdzv_backend c10d ... --tee 3 train.py` "
                         "(what TorchX's dist.ddp runs)",
    "dryrun_k8s_64x8": "`CLI run --dryrun -s kubernetes dist.ddp -j 64x8`",
    "dryrun_k8s_512x8": "`CLI run --dryrun -s kubernetes dist.ddp -j 512x8`",
    "dryrun_local_64x8": "`CLI run --dryrun -s local_cwd dist.ddp -j 64x8`",
    "dryrun_local_512x8": "`CLI run --dryrun -s local_cwd dist.ddp -j 512x8`",
    "api_dryrun_1000x4": "API: AppDef of 1,000 roles x 4 replicas, `runner.dryrun` + `str(info)`",
    "log_direct": "the 200,000-line generator run directly",
    "log_cli": "`CLI run -s local_cwd --log utils.python --script gen_lines.py` (200,000 lines)",
    "log_cli_default": "tx only: the same without `--log` (tx relays on local by default)",
    "log_api": "API: run + `log_lines(should_tail=True)` of 200,000 lines, then re-read",
    "replicas_api": "API: `run()` of 64 replicas of `true`, `wait()`, 200x `status()`",
    "replicas_cli": "`CLI run -s local_cwd utils.sh --num_replicas 64 true`",
    "status_cli": "`CLI status` of a nonexistent app (rc 1 expected)",
    "list_cli": "`CLI list -s local_cwd`",
}
EXPECT_FAIL = {"status_cli"}  # a nonexistent app: rc != 0 is the right answer
# why tx is slower where it is (shown in RESULTS.md beside the numbers)
SLOWER_WHY = {
    "api_first_call": "tx's local scheduler forks a supervisor per app and waits for its "
                      "handshake, and imports what the first call needs then (imports are "
                      "deferred from `import tx.runner`); TorchX starts the replica processes "
                      "from the caller and keeps the app only in memory",
    "api_status_fresh": "each fresh process builds a runner and reads the app's state from disk; "
                        "TorchX's fresh processes answer faster because they do not find the app",
    "ddp_torchrun": "the same torchrun under a supervisor; within the run-to-run noise of DDP here",
    "ddp_torchrun_c10d": "the same torchrun under a supervisor; within the run-to-run noise of DDP here",
    "floor_python": "the interpreter floor of each side's venv (more .pth files in tx's)",
    "log_direct": "no tx code runs: the same generator in each side's interpreter (noise)",
}
K8S_CASES = {"dryrun_k8s_64x8", "dryrun_k8s_512x8"}


def med(c: Dict[str, Any], name: str) -> Optional[float]:
    return c[name]["wall_med"] if name in c else None


def ok_rc(c: Dict[str, Any], name: str) -> bool:
    return name in c and c[name]["rcs"] == [0] and not c[name]["timed_out"]


def budgets(res: Dict[str, Any], lines: int) -> List[Dict[str, Any]]:
    tx = res["sides"].get("tx", {}).get("cases", {})
    tv = res["sides"].get("torchx", {}).get("cases", {})
    it = res["sides"].get("tx", {}).get("importtime", {})
    out: List[Dict[str, Any]] = []

    def add(budget: str, measured: str, limit: str, verdict: str, basis: str = "",
            **extra: Any) -> None:
        # extra: ratio and limit_x (a ratio budget), cases (what a rerun must measure again)
        out.append({"budget": budget, "measured": measured, "limit": limit,
                    "verdict": verdict, "basis": basis, **extra})

    def ratio_budget(budget: str, a: str, b_cases: Dict[str, Any], b: str, limit: float,
                     basis: str, **extra: Any) -> None:
        ma, mb = med(tx, a), med(b_cases, b)
        if ma is None or mb is None:
            add(budget, "not run", f"<= {limit:g}x", "NOT RUN", basis)
            return
        r = ma / mb
        verdict = "PASS" if r <= limit else "FAIL"
        if not ok_rc(tx, a):
            verdict = f"ERROR (tx rc={tx[a]['rcs']})"
        wa, wb = tx[a]["walls"], b_cases[b]["walls"]
        paired, straddles = "", False
        if len(wa) == len(wb) > 1:  # runs of the same round, back to back
            pr = sorted(x / y for x, y in zip(wa, wb))
            straddles = pr[0] <= limit < pr[-1]
            paired = (f" (per-round ratios: median {statistics.median(pr):.2f}x, "
                      f"{pr[0]:.2f}-{pr[-1]:.2f}x)")
        # CPU of the processes waited for; not where tx's replicas run under its detached
        # supervisor (ddp, the relay: their work is outside tx's figure)
        ca, cb = tx[a].get("cpu_med"), b_cases[b].get("cpu_med")
        cpu = (f"; CPU {ca * 1000:.0f} / {cb * 1000:.0f} ms = {ca / cb:.2f}x"
               if ca and cb and extra.get("speed37") not in ("ddp", "relay") else "")
        add(budget, f"{ma:.3f} s / {mb:.3f} s = **{r:.2f}x**{paired}{cpu}", f"<= {limit:g}x",
            verdict, basis, ratio=r, limit_x=limit, cases=sorted({a, b}), straddles=straddles,
            **extra)

    for case, label in (("cli_version", "--version"), ("cli_help", "--help")):
        ratio_budget(f"`tx {label}` vs `python -c pass`", case, tx, "floor_python", 3.0,
                     "tx side's own interpreter")
    for label in ("--version", "--help"):
        e = it.get(label)
        if e is None:
            add(f"`tx {label}` imports no plugin / backend SDK", "not run", "none of the list",
                "NOT RUN")
            continue
        hits = e["forbidden_beyond_python"]
        add(f"`tx {label}` imports no plugin / backend SDK",
            f"{e['modules']} modules ({e.get('beyond_python', '?')} beyond `python -c pass`); "
            f"forbidden: {', '.join(hits) if hits else 'none'}",
            "none of: " + ", ".join(FORBIDDEN),
            "PASS" if not hits and e["rc"] == 0 else "FAIL")
    ratio_budget("`tx run -s local_cwd utils.echo --msg hi` vs TorchX", "run_echo", tv,
                 "run_echo", 0.3, "TorchX's same case, same run")
    if "run_echo" in tx and "run_echo" in tv:
        ma, mb = med(tx, "run_echo"), tv["run_echo"]["wall_min"]
        ok = ma / mb <= 0.3 and ok_rc(tx, "run_echo")
        add("`tx run ... utils.echo` vs TorchX's fastest run",
            f"{ma:.3f} s / {mb:.3f} s = **{ma / mb:.2f}x**", "<= 0.3x",
            "PASS" if ok else "FAIL",
            "issue 37. TorchX's `run` polls status once a second, so its times are bimodal (done "
            "before the first poll, or about 1 s later): its fastest run has no poll wait",
            ratio=ma / mb, limit_x=0.3, cases=["run_echo"], speed37="fastest")
    if "run_echo" in tx and "floor_python" in tx:
        ma, mf = med(tx, "run_echo"), med(tx, "floor_python")
        ca, cf = tx["run_echo"].get("cpu_med"), tx["floor_python"].get("cpu_med")
        cpu = f"; CPU {ca * 1000:.0f} - {cf * 1000:.0f} = {(ca - cf) * 1000:.0f} ms" if ca and cf else ""
        add("`tx run ... utils.echo` above the interpreter floor (`python -c pass`)",
            f"{ma:.3f} s - {mf:.3f} s = **{(ma - mf) * 1000:.0f} ms**{cpu}", "<= 60 ms",
            "PASS" if ma - mf <= 0.060 and ok_rc(tx, "run_echo") else "FAIL",
            "issue 37; tx side's own interpreter, same run", speed37="floor")
    ratio_budget("`tx run -s local_cwd dist.ddp -j 1x2` vs plain torchrun", "ddp_torchx_1x2",
                 tx, "ddp_torchrun", 1.05,
                 "plain `torchrun --nproc_per_node 2 train.py` (tx venv's torchrun); "
                 "vs the c10d/tee variant: see the case table", speed37="ddp")
    # log relay: time and correctness
    ratio_budget("`tx run --log` of 200,000 lines vs the generator directly", "log_cli", tx,
                 "log_direct", 1.2, "issue 37; tx side's own interpreter runs the generator",
                 speed37="relay")
    if "log_cli" in tx:
        ex = tx["log_cli"]["extras"]
        good = min(e.get("good_lines", 0) for e in ex)
        mang = max(e.get("mangled_lines", 0) for e in ex)
        dis = max(e.get("out_of_order_lines", 0) for e in ex)
        lost = lines - good
        ok = lost == 0 and mang == 0 and dis == 0
        add("`tx run --log`: no line lost, split, interleaved or out of order",
            f"worst of {len(ex)} runs: {good} good, {lost} lost, {mang} mangled, "
            f"{dis} out of order", "0 / 0 / 0", "PASS" if ok else "FAIL",
            "bench.py count_prefixed_lines (+ order check)")
        if not ok_rc(tx, "log_cli"):
            out[-1]["verdict"] = f"ERROR (tx rc={tx['log_cli']['rcs']})"
    if "log_cli_default" in tx:  # informational: the default relay path, no --log
        ma, mb = med(tx, "log_cli_default"), med(tx, "log_direct")
        ex = tx["log_cli_default"]["extras"]
        good = min(e.get("good_lines", 0) for e in ex)
        bad = max(e.get("mangled_lines", 0) + e.get("out_of_order_lines", 0) for e in ex)
        if ma is not None and mb is not None:
            ok = ma / mb <= 1.2 and good == lines and bad == 0 and ok_rc(tx, "log_cli_default")
            add("`tx run` without `--log` (default relay) vs the generator directly",
                f"{ma:.3f} s / {mb:.3f} s = **{ma / mb:.2f}x**; worst run: {good} good, "
                f"{lines - good} lost, {bad} mangled or out of order",
                "<= 1.2x, 0 / 0 / 0", ("PASS" if ok else "FAIL") + " (info)",
                "not a budget of the issue: shown because it is the same relay")
    # replicas
    a = [e.get("to_terminal_s") for e in tx.get("replicas_api", {}).get("extras", [])]
    b = [e.get("to_terminal_s") for e in tv.get("replicas_api", {}).get("extras", [])]
    if a and b and None not in a and None not in b:
        ma, mb = statistics.median(a), statistics.median(b)
        add("64 replicas of `true`: run() to terminal state vs TorchX",
            f"{ma:.3f} s / {mb:.3f} s = **{ma / mb:.2f}x**", "<= 0.5x",
            "PASS" if ma / mb <= 0.5 else "FAIL", "in-process medians, same run",
            ratio=ma / mb, limit_x=0.5, cases=["replicas_api"])
    else:
        add("64 replicas of `true`: run() to terminal state vs TorchX",
            "not run or failed", "<= 0.5x", "NOT RUN" if not a else "ERROR")
    s = [e.get("status_call_us") for e in tx.get("replicas_api", {}).get("extras", [])]
    if s and None not in s:
        ms = statistics.median(s)
        add("status() of a finished app, in the process that ran it",
            f"**{ms:.1f} us** (median of medians of 200 calls)", "<= 100 us",
            "PASS" if ms <= 100 else "FAIL")
    else:
        add("status() of a finished app, in the process that ran it", "not run or failed",
            "<= 100 us", "NOT RUN" if not s else "ERROR")
    # status of a running app from a fresh process (another shell), both sides
    fa = tx.get("api_status_fresh", {}).get("extras", [])
    fb = tv.get("api_status_fresh", {}).get("extras", [])
    if fa and all("fresh_next_status_us" in e for e in fa):
        nxt = statistics.median(e["fresh_next_status_us"] for e in fa)
        first = statistics.median(e["fresh_first_status_s"] for e in fa)
        found = min(e.get("found", 0) for e in fa)
        tvtext = "TorchX: not run"
        if fb and all("fresh_first_status_s" in e for e in fb):
            tfound = min(e.get("found", 0) for e in fb)
            tfirst = statistics.median(e["fresh_first_status_s"] for e in fb)
            tvtext = (f"TorchX: first call {tfirst:.3f} s, found the app in {tfound} of 5 probes"
                      + ("; **NOT COMPARABLE** with TorchX: its local scheduler keeps apps in "
                         "memory, so another process cannot see them and did not do the same "
                         "work (no ratio)" if tfound < 5 else ""))
        add("status() of a RUNNING app from a fresh process: later calls (tx alone)",
            f"**{nxt:.0f} us** (first call, import included: {first:.3f} s); tx found the app "
            f"in {found} of 5 probes; {tvtext}", "<= 1000 us, found 5 of 5",
            "PASS" if nxt <= 1000 and found == 5 else "FAIL", "api_status_fresh")
    else:
        add("status() of a RUNNING app from a fresh process", "not run or failed",
            "<= 1000 us, found 5 of 5", "NOT RUN" if not fa else "ERROR")
    # import + first call (tx defers imports to the first call, so import alone flatters it)
    ea = [e.get("first_call_s") for e in tx.get("api_first_call", {}).get("extras", [])]
    eb = [e.get("first_call_s") for e in tv.get("api_first_call", {}).get("extras", [])]
    if ea and eb and None not in ea and None not in eb:
        ma, mb = statistics.median(ea), statistics.median(eb)
        add("import the runner + first `run()` (fresh interpreter) vs TorchX",
            f"{ma:.3f} s / {mb:.3f} s = **{ma / mb:.2f}x**", "<= 0.5x",
            "PASS" if ma / mb <= 0.5 else "FAIL", "api_first_call, in-process times, same run",
            ratio=ma / mb, limit_x=0.5, cases=["api_first_call"], speed37="first_call")
    else:
        add("import the runner + first `run()` (fresh interpreter) vs TorchX", "not run or failed",
            "<= 0.5x", "NOT RUN" if not ea or not eb else "ERROR")
    ratio_budget("`import tx.runner` alone (whole process) vs `import torchx.runner`",
                 "import_runner", tv, "import_runner", 0.5, "TorchX's same case, same run")
    out[-1]["verdict"] += " (info)"
    # cold start: empty caches
    ratio_budget("`tx run ... utils.echo` with empty caches vs TorchX (same)", "run_echo_cold", tv,
                 "run_echo_cold", 0.3, "a fresh XDG_CACHE_HOME per run, both sides",
                 speed37="cold")
    # API dryrun: the same schedulers on both sides
    da = tx.get("api_dryrun_1000x4", {}).get("extras", [])
    db = tv.get("api_dryrun_1000x4", {}).get("extras", [])
    for sched in ("local_cwd", "kubernetes"):
        key = f"{sched}_dryrun_s"
        va = [e[key] + e.get(f"{sched}_format_s", 0.0) for e in da if key in e]
        vb = [e[key] + e.get(f"{sched}_format_s", 0.0) for e in db if key in e]
        label = f"API dryrun + format of 1,000 roles x 4 replicas on {sched} vs TorchX"
        if va and vb:
            ma, mb = statistics.median(va), statistics.median(vb)
            add(label, f"{ma:.3f} s / {mb:.3f} s = **{ma / mb:.2f}x**", "<= 0.5x",
                "PASS" if ma / mb <= 0.5 else "FAIL", "api_dryrun_1000x4, same schedulers",
                ratio=ma / mb, limit_x=0.5, cases=["api_dryrun_1000x4"])
        else:
            missing = "tx" if not va else "TorchX"
            errs = [e.get(f"{sched}_error") for e in (da if not va else db) if e.get(f"{sched}_error")]
            add(label, f"not run on {missing}: {(errs[0] if errs else '')[:120]}".replace("|", "/"),
                "<= 0.5x", "NOT RUN")
    return out


# --------------------------------------------------------------------------
# rendering
# --------------------------------------------------------------------------
def fmt_s(c: Optional[Dict[str, Any]]) -> str:
    if c is None:
        return "-"
    return f"{c['wall_min']:.3f} / **{c['wall_med']:.3f}** / {c['wall_max']:.3f}"


def fmt_extra(c: Optional[Dict[str, Any]], skip: Tuple[str, ...] = ()) -> str:
    if c is None:
        return ""
    parts = []
    for k in sorted(c):
        if k in ("n", "wall_min", "wall_med", "wall_max", "cpu_med", "rss_med_mb", "tree_rss_med_mb", "rcs",
                 "leftovers", "timed_out", "argv", "walls", "rss_max_mb", "extras",
                 "stderr_tail") or k in skip:
            continue
        v = c[k]
        if isinstance(v, float):
            v = f"{v:.4g}"
        elif isinstance(v, str) and len(v) > 90:
            v = v[:90] + "..."
        parts.append(f"{k}={v}")
    return ", ".join(parts)


def case_note(c: Optional[Dict[str, Any]], name: str) -> str:
    if c is None:
        return ""
    notes = []
    if c["rcs"] != [0]:
        notes.append(f"rc={c['rcs']}" + (" (expected)" if name in EXPECT_FAIL else ""))
    if c["leftovers"]:
        notes.append("LEFTOVER PROCESSES")
    if c["timed_out"]:
        notes.append("TIMEOUT")
    return "; ".join(notes)


def first_error_line(c: Dict[str, Any]) -> str:
    tail = c.get("stderr_tail", "").strip().splitlines()
    return tail[-1][:160] if tail else ""


def not_comparable(name: str, a: Optional[Dict[str, Any]], b: Optional[Dict[str, Any]]) -> str:
    """Why tx's and TorchX's runs of case ``name`` did not do the same work ("" if they did):
    a side exited differently (TorchX's ``list`` exits 1), or TorchX's fresh processes did
    not find the app that tx's found.  Such a case gets no ratio."""
    if a is None or b is None:
        return ""
    if a["rcs"] != b["rcs"]:
        return f"tx rc={a['rcs']}, TorchX rc={b['rcs']}"
    found = [e.get("found") for e in b.get("extras", []) if "found" in e]
    mine = [e.get("found") for e in a.get("extras", []) if "found" in e]
    if found and mine and min(found) != min(mine):
        return f"TorchX found the app in {min(found)} of 5 probes, tx in {min(mine)}"
    return ""


def _rss(c: Dict[str, Any]) -> float:
    """The tree's peak RSS (MB), else the largest process's (results of older runs)."""
    return max(c.get("tree_rss_med_mb", 0.0), c["rss_med_mb"])


def render(res: Dict[str, Any]) -> str:
    meta = res["meta"]
    sides = res["sides"]
    tx = sides.get("tx", {}).get("cases", {})
    tv = sides.get("torchx", {}).get("cases", {})
    L: List[str] = []
    L.append("# tx benchmark results")
    L.append("")
    L.append(f"Generated by `bench/run.py` on {meta['started']} ({meta['elapsed_s']:.0f} s). "
             f"**n = {meta['n']}** counted runs per case and side (+{meta['warmup']} warmup), "
             "tx and TorchX interleaved round by round (alternating which goes first). "
             "Times are wall seconds of the whole process as "
             "**min / median / max**; RSS is the median of the peak RSS summed over the "
             "whole process tree, detached processes (a supervisor) included, sampled every "
             "50 ms (MB).  Ratios are of medians from this one run.")
    L.append("")
    L.append(f"Machine: {meta['machine']}.  Command: `{meta['command']}`.")
    L.append("")
    if "commit" in meta:
        L.append(stamp_text(meta, meta["started"], meta["load_before"], meta["load_after"],
                            meta["n"], meta["command"]))
        L.append("")
    for sname, s in sides.items():
        p = s.get("probe", {})
        d = ", ".join(f"{k} {v}" for k, v in sorted(p.get("dists", {}).items()))
        sch = ", ".join(p.get("schedulers", [])) or p.get("schedulers_error", "?")
        L.append(f"- **{sname}**: `{s['python']}` (Python {p.get('python', '?')}); {d}; "
                 f"schedulers: {sch}")
    L.append("")

    L.append("## Budgets")
    L.append("")
    L.append("| budget | measured (tx / reference) | limit | verdict | reference |")
    L.append("| --- | --- | --- | --- | --- |")
    for b in res["budgets"]:
        L.append(f"| {b['budget']} | {b['measured']} | {b['limit']} | **{b['verdict']}** "
                 f"| {b['basis']} |")
    real = [b for b in res["budgets"] if not b["verdict"].endswith("(info)")]
    n_pass = sum(b["verdict"] == "PASS" for b in real)
    L.append("")
    L.append(f"{n_pass} of {len(real)} budgets pass (rows marked (info) are not budgets).")
    L.append("")
    if res.get("rerun"):
        L.append(f"Verdicts within {NEAR:.0%} of their limit, or whose per-round ratios lie on "
                 "both sides of it, were measured again at once "
                 f"(another n = {meta['n']} rounds of their cases): "
                 + "; ".join(f"{r['budget']}: {r['first']:.2f}x then {r['second']:.2f}x"
                             for r in res["rerun"])
                 + ". A verdict that differs between the two is FLIPPED, not PASS.")
        L.append("")
    slower = [b for b in real if b["verdict"] != "PASS" and not b["verdict"].startswith("NOT RUN")]
    cases = [n for n in tx if n in tv and tv[n]["wall_med"] and not not_comparable(n, tx[n], tv[n])
             and tx[n]["wall_med"] / tv[n]["wall_med"] > 1.0]
    if slower or cases:
        L.append("## Where tx is slower")
        L.append("")
        for b in slower:
            L.append(f"- budget **{b['budget']}**: {b['measured']} (limit {b['limit']}).")
        for n in cases:
            r = tx[n]["wall_med"] / tv[n]["wall_med"]
            why = SLOWER_WHY.get(n, "")
            L.append(f"- case `{n}`: {r:.2f}x TorchX's median" + (f": {why}." if why else "."))
        L.append("")

    L.extend(reasons(res))
    L.append("## All cases")
    L.append("")
    L.append("| case | what | tx s (min / med / max) | tx RSS | TorchX s (min / med / max) "
             "| TorchX RSS | tx / TorchX | notes |")
    L.append("| --- | --- | --- | --- | --- | --- | --- | --- |")
    names = list(dict.fromkeys([*tx, *tv]))
    for name in names:
        a, b = tx.get(name), tv.get(name)
        ratio = f"{a['wall_med'] / b['wall_med']:.2f}x" if a and b else "-"
        why_not = not_comparable(name, a, b)
        if why_not:
            ratio = f"**NOT COMPARABLE** ({why_not})"
        notes = []
        if name in K8S_CASES and a is not None and a["rcs"] != [0]:
            ratio = "n/a"
            notes.append("tx: **n/a** (no kubernetes scheduler plugin installed yet): "
                         + first_error_line(a).replace("|", "\\|"))
        else:
            if case_note(a, name):
                notes.append("tx: " + case_note(a, name))
                if a is not None and a["rcs"] != [0] and name not in EXPECT_FAIL:
                    notes.append("`" + first_error_line(a).replace("|", "\\|") + "`")
        if case_note(b, name):
            notes.append("TorchX: " + case_note(b, name))
        row = f"| {name} | {WHAT.get(name, '')} | "
        row += f"{fmt_s(a)} | {_rss(a):.0f} | " if a else "- | - | "
        row += f"{fmt_s(b)} | {_rss(b):.0f} | " if b else "- | - | "
        L.append(row + f"{ratio} | {'; '.join(notes)} |")
    L.append("")

    L.append("### Ratios within one side (medians)")
    L.append("")
    L.append("| ratio | tx | TorchX |")
    L.append("| --- | --- | --- |")
    for a, b in (("ddp_torchx_1x2", "ddp_torchrun"), ("ddp_torchx_1x2", "ddp_torchrun_c10d"),
                 ("log_cli", "log_direct"), ("run_echo", "floor_python"),
                 ("cli_version", "floor_python"), ("cli_help", "floor_python")):
        cells = []
        for c in (tx, tv):
            cells.append(f"{c[a]['wall_med'] / c[b]['wall_med']:.2f}"
                         if a in c and b in c else "-")
        L.append(f"| {a} / {b} | {cells[0]} | {cells[1]} |")
    L.append("")

    L.append("### Case details (medians of what the case reports)")
    L.append("")
    L.append("| case | tx | TorchX |")
    L.append("| --- | --- | --- |")
    for name in names:
        ea, eb = fmt_extra(tx.get(name)), fmt_extra(tv.get(name))
        if ea or eb:
            L.append(f"| {name} | {ea.replace('|', '/')} | {eb.replace('|', '/')} |")
    L.append("")
    if "api_dryrun_1000x4" in tx and "kubernetes_error" in tx["api_dryrun_1000x4"]:
        L.append("API dryrun on kubernetes for tx: **n/a** (no kubernetes scheduler "
                 "plugin installed yet).")
        L.append("")

    L.append("## Imports (`python -X importtime`, tx-only extra; TorchX for reference)")
    L.append("")
    L.append("| side | command | rc | modules | beyond `python -c pass` | sum of self times "
             "ms (median) | forbidden modules (beyond `python -c pass`) |")
    L.append("| --- | --- | --- | --- | --- | --- | --- |")
    for sname, s in sides.items():
        for label, e in s.get("importtime", {}).items():
            fb = ", ".join(e.get("forbidden_beyond_python", e["forbidden"])) or "none"
            if len(fb) > 200:
                fb = fb[:200] + "..."
            L.append(f"| {sname} | `{label}` | {e['rc']} | {e['modules']} | "
                     f"{e.get('beyond_python', '-')} | {e['self_ms_med']:.1f} | {fb} |")
    L.append("")
    L.append("Forbidden list: " + ", ".join(f"`{f}`" for f in FORBIDDEN) + ".")
    L.append("")
    for sname, s in sides.items():
        for label, e in s.get("importtime", {}).items():
            if label == "python -c pass":
                continue
            top = ", ".join(f"{m} {ms:.1f}" for m, ms in e["top_cumulative_ms"])
            L.append(f"- {sname} `{label}`, top cumulative import ms: {top}")
    L.append("")
    return "\n".join(L)


# --------------------------------------------------------------------------
