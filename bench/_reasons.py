"""The "Measured reasons" section of RESULTS.md: for every speed budget of issue 37 that a run
did not meet, what the remaining time is, phase by phase, computed from that same run's
numbers (the cases of both sides and bench/_phases.py's breakdown of ``tx run``). Nothing
here is typed by hand: a rerun rewrites every figure. Not a bench: _run_report.py imports it.
"""
from __future__ import annotations

import statistics
from typing import Any, Dict, List, Optional

#: the phases of bench/_phases.py that are imports (the rest is work: settings, dryrun, the
#: supervisor's start, waiting and relaying)
IMPORT_PHASES = ("import ", "load the scheduler plugin", "find and call the component")


def _med(c: Dict[str, Any], name: str, key: str = "wall_med") -> Optional[float]:
    return c[name][key] if name in c and key in c[name] else None


def _extra_med(c: Dict[str, Any], name: str, key: str) -> Optional[float]:
    vals = [e[key] for e in c.get(name, {}).get("extras", []) if e.get(key) is not None]
    return statistics.median(vals) if vals else None


def phase_table(ph: Dict[str, Any]) -> List[str]:
    """The phase table of ``tx run -s local_cwd utils.echo`` (bench/_phases.py)."""
    if not ph or "rows" not in ph:
        return [f"(the phase breakdown did not run: {ph.get('error', 'not selected') if ph else 'not selected'})", ""]
    L = [f"`tx run -s local_cwd utils.echo --msg hi` in-process, phase by phase (bench/_phases.py "
         f"in {ph['n']} fresh interpreters of the tx side, run after the cases at load "
         f"{ph['load']}): CPU is this process's user + system time (children excluded), "
         "median (min-max); wall is the median; modules are those the phase imported.", "",
         "| phase | CPU ms | wall ms | modules |", "| --- | --- | --- | --- |",
         f"| interpreter start-up, before tx's first line (site, .pth files) | "
         f"{ph['interpreter_cpu_ms']:.1f} | - | - |"]
    for r in ph["rows"]:
        L.append(f"| {r['phase']} | {r['cpu_ms_med']:.1f} ({r['cpu_ms_min']:.1f}-{r['cpu_ms_max']:.1f}) "
                 f"| {r['wall_ms_med']:.1f} | {r['modules']:.0f} |")
    imp = sum(r["cpu_ms_med"] for r in ph["rows"] if r["phase"].startswith(IMPORT_PHASES))
    L.append(f"| **total after start-up** (imports: {imp:.1f} ms CPU) | **{ph['cpu_ms'] - ph['interpreter_cpu_ms']:.1f}** "
             f"| **{ph['wall_ms']:.1f}** | {ph['modules']:.0f} ({ph['attrs_classes']:.0f} attrs classes built) |")
    L.append("")
    return L


def reasons(res: Dict[str, Any]) -> List[str]:
    """The section's lines (empty when every speed budget of issue 37 passed)."""
    tx = res["sides"].get("tx", {}).get("cases", {})
    tv = res["sides"].get("torchx", {}).get("cases", {})
    ph = res["sides"].get("tx", {}).get("phases", {})
    failed = {b["budget"]: b for b in res.get("budgets", []) if "speed37" in b
              and not b["verdict"].startswith("PASS")}
    if not failed:
        return []
    meta = res["meta"]
    L = ["## Measured reasons (the speed budgets not met)", "",
         f"This run's load average: {meta.get('load_before', '?')} before, {meta.get('load_after', '?')} "
         f"after, on {meta.get('machine', '?')}. Under load a wall time includes waiting for a CPU; "
         "the CPU time beside it (user + system of the processes the bench waited for) does not. "
         "tx's supervisor is a detached process (it outlives `tx run` by design), so its CPU is "
         "not in tx's figures, while TorchX's replicas are its children and are in its figures.",
         ""]
    L += phase_table(ph)
    rows = {r["phase"]: r for r in ph.get("rows", [])} if ph else {}
    imp = sum(r["cpu_ms_med"] for p, r in rows.items() if p.startswith(IMPORT_PHASES))
    work = sum(r["cpu_ms_med"] for p, r in rows.items() if not p.startswith(IMPORT_PHASES))
    echo, floor = _med(tx, "run_echo"), _med(tx, "floor_python")
    cpu_echo, cpu_floor = _med(tx, "run_echo", "cpu_med"), _med(tx, "floor_python", "cpu_med")
    fixed = echo - floor if echo is not None and floor is not None else None
    for name, b in failed.items():
        kind = b["speed37"]
        text = ""
        if kind == "floor" and fixed is not None:
            more_cpu = (f" ({(cpu_echo - cpu_floor) * 1000:.0f} ms more CPU)" if cpu_echo and cpu_floor else "")
            text = (f"`tx run` of an echo app takes {fixed * 1000:.0f} ms of wall more than `python -c pass`"
                    f"{more_cpu}. ")
            if rows:
                text += (f"In-process, after the interpreter's start-up, tx spends {imp:.0f} ms of CPU importing "
                        f"({ph.get('modules', 0):.0f} modules, {ph.get('attrs_classes', 0):.0f} attrs classes "
                        f"built: attrs and the standard library it loads, the model, the runner, the local "
                        f"scheduler plugin, the component) and {work:.0f} ms on the work itself (argparse, "
                        "settings, dryrun, the supervisor's fork and handshake, waiting and relaying). "
                        + ("The imports alone are over the 60 ms budget: meeting it would take a `tx run` "
                           "that launches before it loads attrs, the model and the plugin, not a trim."
                           if imp > 60 else "The time left is the work phases above."))
        elif kind == "fastest":
            fastest, cpu_tv = (tv["run_echo"]["wall_min"] if "run_echo" in tv else None,
                               _med(tv, "run_echo", "cpu_med"))
            if echo is not None and fastest and cpu_echo and cpu_tv:
                text = (f"tx's median {echo:.3f} s against TorchX's fastest {fastest:.3f} s; in CPU "
                        f"tx {cpu_echo * 1000:.0f} ms against TorchX's median {cpu_tv * 1000:.0f} ms "
                        f"(**{cpu_echo / cpu_tv:.2f}x**).")
                if rows:
                    text += (f" The tx time is the phase table's: {imp:.0f} ms CPU of imports and {work:.0f} ms "
                             f"of work over an interpreter start-up of {ph.get('interpreter_cpu_ms', 0):.0f} ms.")
        elif kind == "relay":
            direct, cli = _med(tx, "log_direct"), _med(tx, "log_cli")
            if direct and cli and fixed is not None:
                allowance = 0.2 * direct
                marginal = cli - direct - fixed
                lines = res["meta"].get("lines", 200000)
                per_line = (f"{marginal * 1000:.0f} ms beyond that fixed cost ({marginal / lines * 1e6:.2f} us a line)"
                            if marginal > 0 else f"nothing measurable beyond that fixed cost ({marginal * 1000:+.0f} ms: noise)")
                text = (f"The generator alone takes {direct:.3f} s, so 1.2x allows tx {allowance * 1000:.0f} ms "
                        f"of its own. tx's fixed cost for any local app (`tx run` of an echo app minus "
                        f"`python -c pass`, this run) is {fixed * 1000:.0f} ms: it is spent before the "
                        f"replica starts (the phase table) and cannot overlap the generator. "
                        f"`tx run --log` took {cli:.3f} s, so relaying the {lines:,} lines themselves cost "
                        f"{per_line}.")
        elif kind == "first_call":
            ia, ib = _extra_med(tx, "api_first_call", "import_s"), _extra_med(tv, "api_first_call", "import_s")
            fa, fb = (_extra_med(tx, "api_first_call", "first_call_s"),
                      _extra_med(tv, "api_first_call", "first_call_s"))
            if None not in (ia, ib, fa, fb):
                text = (f"Importing the runner and specs: tx {ia * 1000:.0f} ms, TorchX {ib * 1000:.0f} ms; "
                        f"the first `run()` after it: tx {(fa - ia) * 1000:.0f} ms, TorchX "
                        f"{(fb - ib) * 1000:.0f} ms. tx's `run()` loads the local scheduler plugin "
                        f"({rows.get('load the scheduler plugin (entry points, tx_scheduler_local) + -cfg', {}).get('cpu_ms_med', 0):.0f} ms CPU in the "
                        "phase table) and forks a supervisor that it waits for (its handshake), so that "
                        "the app outlives the caller and other processes can see it; TorchX's `run()` "
                        "starts the replica from the caller and keeps the app in memory.")
        elif kind == "cold":
            ca, wa = _med(tx, "run_echo_cold"), echo
            cb, wb = _med(tv, "run_echo_cold"), _med(tv, "run_echo")
            if None not in (ca, wa, cb, wb):
                text = (f"Empty caches add {(ca - wa) * 1000:.0f} ms to tx's `run` ({wa:.3f} -> {ca:.3f} s) "
                        f"and {(cb - wb) * 1000:.0f} ms to TorchX's ({wb:.3f} -> {cb:.3f} s).")
                cold = res["sides"].get("tx", {}).get("phases_cold", {})
                crow = {r["phase"]: r for r in cold.get("rows", [])}
                key = next((p for p in crow if p.startswith("load the scheduler plugin")), None)
                if rows and key and key in rows:
                    text += (f" In-process (bench/_phases.py with an empty XDG_CACHE_HOME, n={cold['n']}), "
                             f"tx's CPU after start-up is {cold['cpu_ms'] - cold['interpreter_cpu_ms']:.0f} ms "
                             f"against {ph['cpu_ms'] - ph['interpreter_cpu_ms']:.0f} ms warm; loading the "
                             f"scheduler plugin takes {crow[key]['cpu_ms_med']:.0f} ms and imports "
                             f"{crow[key]['modules']:.0f} modules (warm: {rows[key]['cpu_ms_med']:.0f} ms, "
                             f"{rows[key]['modules']:.0f}): with no snapshot of what each plugin provides, tx "
                             "scans the entry points and registers every installed plugin with pluggy to learn "
                             "which one provides local_cwd, then writes the snapshot to $XDG_CACHE_HOME/tx. "
                             "The rest is the warm phase table's.")
        elif kind == "ddp":
            d, t, c10 = _med(tx, "ddp_torchx_1x2"), _med(tx, "ddp_torchrun"), _med(tx, "ddp_torchrun_c10d")
            if None not in (d, t, c10) and fixed is not None:
                text = (f"tx's `dist.ddp` took {(d - t) * 1000:.0f} ms more than plain torchrun "
                        f"({d:.3f} / {t:.3f} s); tx's fixed cost for a local app is {fixed * 1000:.0f} ms "
                        f"of that, and torchrun with the c10d rendezvous and `--tee 3` (what TorchX's "
                        f"dist.ddp runs) took {(c10 - t) * 1000:+.0f} ms against plain torchrun. The budget "
                        f"allows {0.05 * t * 1000:.0f} ms.")
        if text:
            L.append(f"- **{name}** ({b['verdict']}): {text}")
    L.append("")
    return L
