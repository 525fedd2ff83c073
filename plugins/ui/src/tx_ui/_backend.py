"""What the page asks tx, on worker threads and bounded by a timeout: a scheduler that hangs
never blocks the page (its call goes on in its thread; the page says it gave no answer).

Every call is keyed (``("list", "slurm")``, ``("status", handle)``), and a request gets the
answer of a call that started after it arrived (what it shows is never older than the
request): a call of the same key still running is waited for, then one is started anew if
that one had started earlier; requests that arrive together share one call. So a hanging
backend holds one thread, not one per page view, and a page shows the app a `tx run` just
made.
"""
from __future__ import annotations

import asyncio
import threading
import time
import queue
from concurrent.futures import Future
from typing import AbstractSet, Any, Callable, Dict, Hashable, List, Optional, Sequence, Tuple

from tx import UserError
from tx.runner import (
    DEFAULT_SESSION, Runner, RunRef, TrialRef, UnknownSweepError, collapse_runs, list_runs, list_sweeps,
    load_run, load_sweep, newest_first, parse_handle)
from tx.schedulers import DescribeAppResponse, ListAppResponse, PartialListError, get_scheduler_factories
from tx.specs import make_app_handle, parse_app_handle
from tx_ui._sweeps import list_apps

__all__ = ["Backend", "NoAnswer", "PAGE_SIZE", "describe_problem", "record"]

#: apps on one page of the apps table (``?page=N`` shows the N-th, newest first)
PAGE_SIZE = 100


class NoAnswer(UserError):
    """A backend call did not return within the timeout (it goes on in its thread)."""


def describe_problem(e: BaseException) -> str:
    """One line for an exception raised by a backend call: the message of a user error
    (``UserError``, a scheduler's error), else the type and the message."""
    if isinstance(e, UserError):
        return " ".join(str(e).split()) or type(e).__name__
    return f"{type(e).__name__}: {' '.join(str(e).split())}"


class Backend:
    """Calls into :class:`tx.runner.Runner` on a pool of worker threads, each worker with a
    runner of its own (a runner's schedulers are made lazily and are not shared between
    threads).

    Args:
        schedulers: the schedulers whose apps the apps page lists.
        timeout: seconds a page waits for a backend call before saying it gave no answer.
        session: the session name of the runners (the part of new handles after ``://``).
        workers: threads in the pool.
    """

    def __init__(self, schedulers: Sequence[str], timeout: float = 10.0, session: Optional[str] = None,
                 workers: int = 16) -> None:
        self.schedulers: List[str] = list(dict.fromkeys(schedulers))
        self.timeout = timeout
        self._session = session
        # daemon threads, not a ThreadPoolExecutor: the interpreter joins an executor's
        # threads at exit, and one stuck in a hanging backend would keep `tx ui` from ending
        self._queue: "queue.Queue[Any]" = queue.Queue()
        self._workers = [threading.Thread(target=self._work, name=f"tx-ui-{i}", daemon=True)
                         for i in range(workers)]
        for worker in self._workers:
            worker.start()
        self._local = threading.local()
        self._runners: List[Runner] = []
        self._schedulers: List[Any] = []
        self._lock = threading.Lock()
        self._calls: Dict[Hashable, Tuple[Future, float]] = {}
        #: the last apps each scheduler listed, with when: shown while it gives no answer
        self._last_apps: Dict[str, Tuple[float, List[ListAppResponse]]] = {}

    # -- threads ---------------------------------------------------------------------------
    def runner(self) -> Runner:
        """The calling worker thread's runner (made on first use)."""
        runner = getattr(self._local, "runner", None)
        if runner is None:
            runner = Runner(self._session) if self._session else Runner()
            self._local.runner = runner
            with self._lock:
                self._runners.append(runner)
        return runner

    def _work(self) -> None:
        while True:
            item = self._queue.get()
            if item is None:
                return
            future, fn, args = item
            if not future.set_running_or_notify_cancel():
                continue
            try:
                future.set_result(fn(self.runner(), *args))
            except BaseException as e:  # noqa: BLE001 - handed to the caller through the future
                future.set_exception(e)

    def _current(self, key: Hashable, fn: Callable[..., Any], args: Tuple[Any, ...],
                 since: float) -> Tuple[Future, float]:
        """The call of ``key`` to wait for: the one running, else the last one if it started
        at ``since`` or later, else a new one."""
        with self._lock:
            entry = self._calls.get(key)
            if entry is None or (entry[0].done() and entry[1] < since):
                future: Future = Future()
                entry = (future, time.monotonic())
                self._calls[key] = entry
                self._queue.put((future, fn, args))
                if key[0] == "list":
                    future.add_done_callback(lambda f, s=key[1]: self._remember_list(s, f))
            return entry

    def _remember_list(self, scheduler: str, future: Future) -> None:
        if not future.cancelled() and future.exception() is None:
            self._last_apps[scheduler] = (time.monotonic(), future.result())

    async def call(self, key: Hashable, fn: Callable[..., Any], *args: Any, timeout: Optional[float] = None) -> Any:
        """``fn(runner, *args)`` on a worker thread, from a call that started after this
        one did (module docstring); its result, or its exception.

        Args:
            key: a tuple; calls with the same key share runs. Its first item names the kind
                of call (``"list"``: its scheduler's apps are kept as the last known).
            timeout: seconds to wait in all (default: the backend's timeout).

        Raises:
            NoAnswer: no result within the timeout.
        """
        arrived = time.monotonic()
        limit = self.timeout if timeout is None else timeout
        while True:
            future, started = self._current(key, fn, args, arrived)
            left = arrived + limit - time.monotonic()
            try:
                if left <= 0:
                    raise asyncio.TimeoutError
                result = await asyncio.wait_for(asyncio.shield(asyncio.wrap_future(future)), left)
            except asyncio.TimeoutError:
                raise NoAnswer(f"no answer within {limit:g} s") from None
            except Exception:
                if started >= arrived:
                    raise
                continue  # an older call's failure: ask again
            if started >= arrived:
                return result

    def scheduler(self, name: str) -> Any:
        """The calling worker thread's scheduler ``name`` (made on first use, closed with the
        runners)."""
        schedulers = getattr(self._local, "schedulers", None)
        if schedulers is None:
            schedulers = self._local.schedulers = {}
        if name not in schedulers:
            sched = get_scheduler_factories()[name](self._session or "tx")
            schedulers[name] = sched
            with self._lock:
                self._schedulers.append(sched)
        return schedulers[name]

    def prefetch(self) -> None:
        """Start listing the first page of every scheduler now (at start-up: the first page
        view finds the scheduler plugins imported and the backends warm)."""
        now = time.monotonic()
        for scheduler in self.schedulers:
            self._current(("page", scheduler, PAGE_SIZE, None, ""), _page, (scheduler, PAGE_SIZE, None, ""), now)

    # -- what the pages show -----------------------------------------------------------------
    async def apps(self, schedulers: Optional[Sequence[str]] = None) -> Tuple[List[ListAppResponse], List[str]]:
        """The apps of ``schedulers`` (default: all of this backend's), listed at once, and
        one line for each scheduler that could not be read in whole (what it could list, or
        listed last, is kept and said so)."""
        names = list(schedulers or self.schedulers)
        results = await asyncio.gather(*(self._apps_of(s) for s in names))
        apps: List[ListAppResponse] = []
        problems: List[str] = []
        for got, problem in results:
            apps.extend(got)
            if problem:
                problems.append(problem)
        return await asyncio.to_thread(self._with_runs, apps, names), problems

    async def page(self, schedulers: Optional[Sequence[str]], states: Optional[AbstractSet[str]], name: str,
                   limit: int) -> Optional[Tuple[List[ListAppResponse], int]]:
        """The newest ``limit`` apps of ``schedulers`` (default: all) whose state name is in
        ``states`` (None: any) and whose name or handle holds ``name``, asking each scheduler
        for its first ``limit`` only (:meth:`tx.runner.engine.Engine.list_page`: the local
        schedulers keep only those in memory), and how many match in all. None where the whole
        list is needed (:meth:`apps`): runs with failover or sweeps recorded here (their rows
        fold many apps into one), a scheduler that gives no ages, or one that did not answer
        in whole (the whole list says what could not be read)."""
        names = list(schedulers or self.schedulers)
        if await asyncio.to_thread(list_runs, self._session or DEFAULT_SESSION):
            return None
        key_states = frozenset(states) if states is not None else None
        try:
            pages = await asyncio.gather(*(self.call(("page", s, limit, key_states, name), _page, s, limit,
                                                     key_states, name) for s in names))
        except Exception:  # noqa: BLE001 - the whole list says what failed, scheduler by scheduler
            return None
        if any(p is None or not p.ordered for p in pages):
            return None
        apps = [a for p in pages for a in p.apps]
        return newest_first(apps)[0][:limit], sum(p.total for p in pages)

    def _with_runs(self, apps: List[ListAppResponse], schedulers: Sequence[str]) -> List[ListAppResponse]:
        """``apps`` with each run with failover of this session as one row under its run
        handle (its hops inside: :func:`tx.runner.collapse_runs`), as ``tx list``
        shows it, once whichever of its schedulers are listed."""
        records = list_runs(self._session or DEFAULT_SESSION)
        return collapse_runs(apps, records, schedulers) if records else apps

    async def _apps_of(self, scheduler: str) -> Tuple[List[ListAppResponse], Optional[str]]:
        try:
            apps = await self.call(("list", scheduler), _list, scheduler)
        except NoAnswer as e:
            last = self._last_apps.get(scheduler)
            if last is None:
                return [], f"{scheduler}: {e} (none of its apps are shown)"
            age = int(time.monotonic() - last[0])
            return list(last[1]), f"{scheduler}: {e} (its apps as listed {age} s ago are shown)"
        except PartialListError as e:
            return list(e.apps), f"{scheduler}: {describe_problem(e)} (the apps it could list are shown)"
        except Exception as e:  # noqa: BLE001 - one scheduler's failure is one line, the rest shows
            return [], f"{scheduler}: {describe_problem(e)} (none of its apps are shown)"
        return list(apps), None

    def close(self) -> None:
        """Stop taking calls and close every runner (calls still running are not waited for)."""
        for _ in self._workers:
            self._queue.put(None)
        with self._lock:
            runners, self._runners = self._runners, []
            schedulers, self._schedulers = self._schedulers, []
        for runner in [*runners, *schedulers]:
            try:
                runner.close()
            except Exception:  # noqa: BLE001 - closing is best effort at exit
                pass


def record(backend: Backend, handle: str) -> Optional[DescribeAppResponse]:
    """What the handle's scheduler keeps of the app (its ``describe``: metadata such as the
    log directory and, on the local schedulers, each replica's attempts), on a worker thread;
    of a run handle, its live hop's (None while a hop is being submitted); of a trial's
    (``SWEEP/4``), its last attempt's (None before it is submitted). Raises UnknownRunError,
    UnknownSweepError: no such run or sweep recorded here."""
    ref = parse_handle(handle)
    if isinstance(ref, RunRef):
        rec = load_run(handle)
        live = rec.live.handle(rec.session) if rec.live is not None else None
        if live is None:
            return None
        handle = live
    elif isinstance(ref, TrialRef):
        rec = load_sweep(ref.sweep.handle)
        if ref.index >= len(rec.trials):
            raise UnknownSweepError(f"no trial {ref.index} of {ref.sweep.handle}")
        if not rec.trials[ref.index].attempts:  # not submitted yet
            return None
        handle = make_app_handle(rec.scheduler, rec.session, rec.trials[ref.index].attempts[-1])
    parsed = parse_app_handle(handle)
    return backend.scheduler(parsed.scheduler_backend).describe(parsed.app_id)


def _page(runner: Runner, scheduler: str, limit: int, states: Optional[AbstractSet[str]], name: str) -> Any:
    """The scheduler's first ``limit`` apps that match (a ListPage), or None where sweeps are
    recorded for it (each sweep's trials are one row: the whole list is folded)."""
    if list_sweeps(scheduler, runner.name()):
        return None
    return runner.engine.list_page(scheduler, limit, 0, states, name)


def _list(runner: Runner, scheduler: str) -> List[ListAppResponse]:
    return list_apps(runner, scheduler)  # each sweep's trials as one row, as `tx list`
