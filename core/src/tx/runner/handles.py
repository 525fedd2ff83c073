"""Handles, parsed once, by their syntax, into what they name: an app, a run (a chain of
hops, :mod:`tx.runner.failover`), a sweep (a set of trials, :mod:`tx.runner.sweep`) or one
trial of a sweep.

Every handle is ``{scheduler}://{session}/{id}``; the id says the kind (docs/architecture.md,
"Handles"):

- ``run-<name>-<8 hex>``: a run, the id :func:`new_run_id` makes (its scheduler is the
  chain's first);
- ``sweep-<name>-<8 hex>``: a sweep (:func:`new_sweep_id`);
- ``{scheduler}://{session}/sweep-<name>-<8 hex>/<index>``: trial ``index`` of a sweep;
- anything else: an app, the id its scheduler gave it.

An app's id never takes a run's or a sweep's form: every scheduler makes an app's id from
its name (``name-<random>``, or a number), and :func:`check_not_reserved` refuses, before
anything is submitted, an app name that starts with ``run`` or ``sweep`` and a separator
(``-``, ``_`` or ``.``; Kubernetes ids turn ``_`` and ``.`` into ``-``). So the kind follows
from the text alone: no record file is read and no scheduler is asked to learn it. Handles
written by earlier versions read as before (their ids have these forms already).
"""
from __future__ import annotations

import re
import os
from typing import Tuple, Union

import attrs

from tx.specs.api import MalformedAppHandleException
from tx.schedulers.ids import RESERVED_NAME
from tx.specs.handles import make_app_handle, parse_app_handle

__all__ = [
    "AppRef", "Ref", "RunRef", "SweepRef", "TrialRef", "check_not_reserved", "new_run_id", "new_sweep_id",
    "parse", "split", "RUN_ID", "SWEEP_ID",
]

#: the form of a run's id
RUN_ID = re.compile(r"^run-[a-z0-9-]*[0-9a-f]{8}$")
#: the form of a sweep's id
SWEEP_ID = re.compile(r"^sweep-[a-z0-9-]*[0-9a-f]{8}$")
_TRIAL = re.compile(r"^(?P<sweep>.+://.*/sweep-[a-z0-9-]*[0-9a-f]{8})/(?P<index>[0-9]+)$")
# a run's or a sweep's handle and what follows it: SWEEP/4/train/0, RUN/train
_PREFIX = re.compile(r"^(?P<handle>[A-Za-z0-9_.\-]+://[^/]*/(?:run|sweep)-[a-z0-9-]*[0-9a-f]{8})/(?P<rest>.*)$")


@attrs.frozen
class AppRef:
    """One app on one scheduler: ``{scheduler}://{session}/{app_id}``."""

    scheduler: str
    session: str
    app_id: str

    @property
    def handle(self) -> str:
        """The handle text."""
        return make_app_handle(self.scheduler, self.session, self.app_id)

    def __str__(self) -> str:
        return self.handle


@attrs.frozen
class RunRef:
    """A run with failover: ``{first scheduler}://{session}/run-<name>-<8 hex>``."""

    scheduler: str
    session: str
    run_id: str

    @property
    def handle(self) -> str:
        """The handle text."""
        return make_app_handle(self.scheduler, self.session, self.run_id)

    def __str__(self) -> str:
        return self.handle


@attrs.frozen
class SweepRef:
    """A sweep: ``{scheduler}://{session}/sweep-<name>-<8 hex>``."""

    scheduler: str
    session: str
    sweep_id: str

    @property
    def handle(self) -> str:
        """The handle text."""
        return make_app_handle(self.scheduler, self.session, self.sweep_id)

    def __str__(self) -> str:
        return self.handle


@attrs.frozen
class TrialRef:
    """Trial ``index`` of a sweep: ``{sweep handle}/{index}``."""

    sweep: SweepRef
    index: int

    @property
    def handle(self) -> str:
        """The handle text."""
        return f"{self.sweep.handle}/{self.index}"

    def __str__(self) -> str:
        return self.handle


#: what :func:`parse` returns
Ref = Union[AppRef, RunRef, SweepRef, TrialRef]


def parse(handle: Union[str, "Ref"]) -> "Ref":
    """The reference ``handle`` names, by its syntax alone (no file, no scheduler call); a
    reference is returned as it is.

    Raises:
        tx.specs.MalformedAppHandleException: not ``{scheduler}://{session}/{id}`` (or a
            trial's ``{sweep handle}/{index}``).
    """
    if isinstance(handle, (AppRef, RunRef, SweepRef, TrialRef)):
        return handle
    m = _TRIAL.match(handle or "")
    if m:
        sweep = parse(m.group("sweep"))
        if isinstance(sweep, SweepRef):
            return TrialRef(sweep, int(m.group("index")))
    if _PREFIX.match(handle or ""):  # RUN/x, SWEEP/x: never an app of session "s/RUN"
        ref, rest = split(handle)
        if rest.strip("/"):
            raise MalformedAppHandleException(handle, f"{rest!r} follows {ref.handle}, which names a "
                                              f"{'trial' if isinstance(ref, TrialRef) else 'run'}")
        return ref
    scheduler, session, ident = parse_app_handle(handle)
    if RUN_ID.match(ident):
        return RunRef(scheduler, session, ident)
    if SWEEP_ID.match(ident):
        return SweepRef(scheduler, session, ident)
    return AppRef(scheduler, session, ident)


def split(text: str) -> Tuple["Ref", str]:
    """The reference ``text`` starts with and what follows it after a ``/`` (``""`` if
    nothing), by syntax alone: ``SWEEP/4/train/0`` is (trial 4 of the sweep, ``"train/0"``),
    ``APP/train`` is (the app, ``"train"``), ``RUN`` is (the run, ``""``). What follows a
    sweep's handle is a trial's number first.

    Raises:
        tx.specs.MalformedAppHandleException: no ``{scheduler}://{session}/{id}`` at the
            start, or a sweep's handle followed by something other than a trial's number.
    """
    m = _PREFIX.match(text or "")
    head, rest = (m.group("handle"), m.group("rest")) if m else (text, "")
    if not m:
        m2 = re.match(r"^(?P<handle>[A-Za-z0-9_.\-]+://[^/]*/[^/]+)(?:/(?P<rest>.*))?$", text or "")
        if m2 is None:
            raise MalformedAppHandleException(text)
        head, rest = m2.group("handle"), m2.group("rest") or ""
    scheduler, session, ident = parse_app_handle(head)
    if RUN_ID.match(ident):
        return RunRef(scheduler, session, ident), rest
    if not SWEEP_ID.match(ident):
        return AppRef(scheduler, session, ident), rest
    sweep = SweepRef(scheduler, session, ident)
    if not rest.strip("/"):
        return sweep, ""
    index, _, tail = rest.partition("/")
    if not index.isdigit():
        raise MalformedAppHandleException(text, f"a sweep's trial is {sweep.handle}/TRIAL, TRIAL a number "
                                          f"(see `tx status {sweep.handle}`)")
    return TrialRef(sweep, int(index)), tail


def _stem(name: str) -> str:
    stem = re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-")[:24]
    return stem + "-" if stem else ""


def new_run_id(name: str) -> str:
    """A new run id for an app named ``name``: ``run-<name, lowercased, at most 24>-<8 hex>``."""
    return f"run-{_stem(name)}{os.urandom(4).hex()}"


def new_sweep_id(name: str) -> str:
    """A new sweep id for a sweep named ``name``: ``sweep-<name>-<8 hex>``."""
    return f"sweep-{_stem(name)}{os.urandom(4).hex()}"


def check_not_reserved(name: str) -> str:
    """``name`` if an app may have it: one whose ids could take a run's or a sweep's form
    (``run`` or ``sweep``, any case, alone or then ``-``, ``_`` or ``.``:
    :data:`tx.schedulers.ids.RESERVED_NAME`) is refused.

    Raises:
        ValueError: a reserved name (one line that says why and what to do).
    """
    m = RESERVED_NAME.match(name or "")
    if m:
        what = f"starts with {m.group(0)!r}, which" if m.group(2) else "is a name"
        raise ValueError(f"app name {name!r} {what} tx keeps for run and sweep "
                         "handles: give the app another name (--name)")
    return name
