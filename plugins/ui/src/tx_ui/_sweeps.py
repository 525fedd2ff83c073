"""Sweeps on the page: the apps list with each sweep's trials as one row (as ``tx list``
shows them), the metrics the trials recorded in the configured trackers (as ``tx sweep
best`` reads them), and the plot of one metric against one parameter. Called on the
backend's worker threads.

The plot is an SVG rendered on the server by pygal (https://www.pygal.org/, pure Python, no
dependency): the page shows it without script and without network, and ``curl`` reads its
points. Its tooltip script (a CDN URL by default) is turned off.
"""
from __future__ import annotations

import math
from typing import Any, Dict, List, Mapping, Optional, Sequence, Tuple

import pygal
from pygal.style import Style

from tx.config import configured_trackers
from tx.runner import Runner, collapse_sweeps, list_sweeps, load_sweep
from tx.schedulers import ListAppResponse, PartialListError
from tx.specs import format_value, make_app_handle
from tx.tracker import build_trackers

__all__ = ["TRIAL_KEYS", "list_apps", "plot_points", "plot_svg", "trial_metrics"]

#: metadata tx itself records on a trial's run (not metrics)
TRIAL_KEYS = frozenset({"sweep", "trial_index"})


def list_apps(runner: Runner, scheduler: str) -> List[ListAppResponse]:
    """``runner.list(scheduler)`` with each sweep recorded on this host for the runner's
    session as one row (its handle, state and ``name [sweep of N: 4 succeeded, 2 failed]``),
    as ``tx list`` shows it; a :class:`PartialListError` keeps its message, with its apps
    collapsed the same way."""
    try:
        apps = runner.list(scheduler)
    except PartialListError as e:
        records = list_sweeps(scheduler, runner.name())
        raise PartialListError(str(e), collapse_sweeps(e.apps, records) if records else e.apps) from None
    records = list_sweeps(scheduler, runner.name())
    return collapse_sweeps(apps, records) if records else apps


def _number(value: Any) -> Optional[float]:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return None
    return float(value) if math.isfinite(value) else None


def trial_metrics(_runner: Any, handle: str) -> Dict[str, Any]:
    """``{"tracker": name or "", "metrics": {trial index: {metric: value}}}``: the numbers
    each trial's last attempt recorded as metadata in the first configured tracker (the one
    ``tx sweep best`` reads), its parameters and tx's own keys left out. No tracker
    configured: ``tracker`` is "" and ``metrics`` empty.

    Raises:
        tx.runner.UnknownSweepError: no such sweep on this host.
    """
    rec = load_sweep(handle)
    configured = configured_trackers()
    trackers = build_trackers(configured)
    if not trackers:
        return {"tracker": "", "metrics": {}}
    tracker = trackers[0]
    out: Dict[int, Dict[str, float]] = {}
    for t in rec.trials:
        if t.pending or not t.attempts:
            continue
        recorded = tracker.metadata(make_app_handle(rec.scheduler, rec.session, t.attempts[-1]))
        numbers = {k: n for k, v in recorded.items()
                   if k not in TRIAL_KEYS and k not in t.params and (n := _number(v)) is not None}
        if numbers:
            out[t.index] = numbers
    return {"tracker": next(iter(configured)), "metrics": out}


#: the page's colours (ui.css)
_STYLE = Style(background="#ffffff", plot_background="#ffffff", foreground="#1d232a",
               foreground_strong="#1d232a", foreground_subtle="#6a737d", colors=("#0366d6",),
               font_family="system-ui, sans-serif")


def plot_svg(points: Sequence[Tuple[int, Any, float]], param: str, metric: str) -> str:
    """An inline SVG: ``metric`` (y) against ``param`` (x), one dot per trial.

    Args:
        points: ``(trial index, parameter value, metric value)``. Numeric parameter values
            go on a linear axis (logarithmic when all are positive and span 100x or more,
            as a loguniform parameter does); others each get a place on the axis, in order
            of first appearance.
        param, metric: the axis titles.
    """
    xs = [x for _i, x, _y in points]
    numeric = all(_number(x) is not None for x in xs)
    labels: List[str] = []
    if numeric:
        positive = [float(x) for x in xs if float(x) > 0]
        log_x = len(positive) == len(xs) and len(xs) > 1 and max(positive) / min(positive) >= 100
        place = {}
    else:
        log_x = False
        labels = list(dict.fromkeys(format_value(x) for x in xs))
        place = {label: n for n, label in enumerate(labels)}
    chart = pygal.XY(
        js=[], style=_STYLE, stroke=False, show_legend=False, width=720, height=300, dots_size=5,
        x_title=param + (" (log scale)" if log_x else ""), y_title=metric, disable_xml_declaration=True,
        explicit_size=True, print_values=False, show_x_guides=False)
    if log_x:  # positions are log10 of the values: labels and values say the values
        chart.x_value_formatter = lambda v: f"{10 ** v:.3g}"
    if labels:
        chart.x_labels = list(range(len(labels)))
        chart.x_value_formatter = lambda v: labels[int(round(v))] if 0 <= round(v) < len(labels) else ""
    values = []
    for index, x, y in points:
        at = (math.log10(float(x)) if log_x else float(x)) if numeric else place[format_value(x)]
        values.append({"value": (at, y), "label": f"trial {index}: {param}={format_value(x)}"})
    chart.add(metric, values)
    return chart.render(is_unicode=True)


def plot_points(trials: Sequence[Any], metrics: Mapping[int, Mapping[str, float]], param: str,
                metric: str) -> List[Tuple[int, Any, float]]:
    """``(index, value of param, value of metric)`` of each trial (a
    :class:`tx.runner.sweep.TrialStatus`) that recorded ``metric`` and has ``param``."""
    return [(t.index, t.params[param], metrics[t.index][metric]) for t in trials
            if param in t.params and metric in metrics.get(t.index, {})]
