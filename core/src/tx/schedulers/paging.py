"""One page of a scheduler's apps, newest first, filtered, without holding every app.

``Scheduler.list()`` (TorchX's signature) returns every app; at 10,000 apps that is 10,000
objects built, sorted and kept for a page of 20. :func:`list_page` asks the scheduler for
only the page: a scheduler that can (the local schedulers stream their on-disk index) has a
``list_page(limit, offset, states, name)`` method returning a :class:`ListPage`; any other
is listed whole and paged here (:func:`page_of`), with the same answer.
"""
from __future__ import annotations

import heapq
from typing import AbstractSet, Any, Iterable, List, Optional

import attrs

from tx.schedulers.api import ListAppResponse

__all__ = ["ListPage", "list_page", "matches", "page_of"]


@attrs.define(frozen=True)
class ListPage:
    """A page of listed apps.

    Attributes:
        apps: at most ``limit`` apps after the first ``offset``, newest first
            (``List[ListAppResponse]``).
        total: how many apps match the filters in all (the page is ``apps`` of these).
        ordered: False where the scheduler gives no submit time and no numeric ids: ``apps``
            are then in the scheduler's order, not newest first.
    """

    apps: List[ListAppResponse]
    total: int
    ordered: bool = True


def matches(app: ListAppResponse, states: Optional[AbstractSet[str]], name: Optional[str]) -> bool:
    """Whether ``app`` passes the filters: its state's name in ``states`` (None: any) and
    ``name`` (case-insensitive) part of its name or handle (None or "": any)."""
    if states is not None and app.state.name not in states:
        return False
    if name:
        needle = name.lower()
        return needle in (app.name or "").lower() or needle in (app.app_handle or "").lower()
    return True


def _submitted(app: Any) -> Optional[float]:
    t = getattr(app, "submitted", None)
    return float(t) if isinstance(t, (int, float)) and not isinstance(t, bool) else None


def page_of(apps: Iterable[ListAppResponse], limit: Optional[int] = None, offset: int = 0,
            states: Optional[AbstractSet[str]] = None, name: Optional[str] = None) -> ListPage:
    """The page of ``apps`` (any order) that :func:`list_page` describes, newest first by
    submit time where the apps give one, else by numeric id (Slurm), else in their order
    (``ordered`` False), as :func:`tx.views.newest_first` orders them. Memory: the matching
    apps are kept only while they are within the first ``offset + limit``.

    Raises:
        ValueError: ``limit`` < 0 or ``offset`` < 0.
    """
    if (limit is not None and limit < 0) or offset < 0:
        raise ValueError(f"limit and offset must be >= 0, got {limit} and {offset}")
    kept = [a for a in apps if matches(a, states, name)]
    if any(_submitted(a) is not None for a in kept):
        key: Any = lambda a: _submitted(a) or 0.0  # noqa: E731 - one sort key of two
        ordered = True
    elif kept and all(str(a.app_id).isdigit() for a in kept):
        key, ordered = (lambda a: int(a.app_id)), True
    else:
        key, ordered = None, False
    if limit is None:
        top = sorted(kept, key=key, reverse=True) if ordered else kept
    else:
        top = heapq.nlargest(offset + limit, kept, key=key) if ordered else kept[:offset + limit]
    return ListPage(apps=list(top[offset:] if limit is None else top[offset:offset + limit]),
                    total=len(kept), ordered=ordered)


def list_page(scheduler: Any, limit: Optional[int] = None, offset: int = 0,
              states: Optional[AbstractSet[str]] = None, name: Optional[str] = None) -> ListPage:
    """The apps of ``scheduler`` (a :class:`tx.schedulers.Scheduler`) that match ``states``
    (state names; None: any) and ``name`` (part of the name or handle, any case), newest
    first: ``limit`` of them (None: all) after the first ``offset``, and how many match in
    all. Uses the scheduler's own ``list_page`` where it has one (the local schedulers:
    memory bounded by the page, not the apps), else its ``list()``.

    Raises:
        PartialListError, SchedulerError: as the scheduler's ``list``.
        ValueError: ``limit`` or ``offset`` < 0.
    """
    own = getattr(scheduler, "list_page", None)
    if own is not None:
        return own(limit=limit, offset=offset, states=states, name=name)
    return page_of(scheduler.list(), limit, offset, states, name)
