"""Why a torchrun replica failed, in one line: :func:`root_cause` and :func:`why_failed`.

Every scheduler feeds these pure functions what its backend gives about one failed replica
(role ``train``, replica ``0``) and puts :attr:`tx.specs.RootCause.text` in
``structured_error_msg`` (and the :class:`~tx.specs.RootCause` itself in ``root_cause``)::

    train/0 rank 1: RuntimeError: CUDA out of memory (simulated) at train.py:41 (exit code 1)

What it reads (text or bytes; bytes are decoded as UTF-8, undecodable bytes replaced):

* ``error_file``: the JSON TorchElastic writes (``torch.distributed.elastic.multiprocessing
  .errors``): a worker whose entry point is decorated with ``@record`` writes
  ``{"message": {"message": "RuntimeError: boom", "extraInfo": {"py_callstack":
  "Traceback ...", "timestamp": "..."}, "errorCode": 1}}`` to its ``TORCHELASTIC_ERROR_FILE``
  (torchrun gives each worker ``<log_dir>/<run_id>/attempt_<n>/<local_rank>/error.json``),
  and torchrun, itself under ``@record``, copies the first failed worker's file to *its*
  ``TORCHELASTIC_ERROR_FILE`` (the one the scheduler sets for the replica). A script
  without ``@record`` writes none. A file that is not this JSON is read as plain text.
* ``log_tail``: the end of the replica's output (stderr, or stdout and stderr together;
  64 KiB to 256 KiB is plenty). In it:

  - torchrun's ChildFailedError report (``torch.distributed.elastic.multiprocessing.errors
    .ChildFailedError.format_msg``), printed when a worker failed: its ``Root Cause (first
    observed failure):`` block names the worker (``rank : 1 (local_rank: 1)``), how it ended
    (``exitcode : -9 (pid: 77)  (SIGKILL)``), its ``error_file`` and, where it wrote one,
    its traceback;
  - the failed worker's own traceback: after ``init_process_group`` torch's excepthook
    prefixes every line of an uncaught exception's traceback with ``[rank<global rank>]: ``,
    and ``torchrun --tee`` prefixes a worker's lines with ``[<role><local rank>]:``
    (``[default1]:``); lines of other workers, interleaved, are told apart by these prefixes.
    Without prefixes (a failure before ``init_process_group``, a plain Python program) the
    last traceback that is not torchrun's own is taken. Of chained exceptions (``During
    handling of the above exception ...``) the last one is taken.
* ``exit_code``: the replica's own exit status as the scheduler knows it (negative: killed
  by that signal), used when the report does not give the worker's.

What the result holds: see :class:`tx.specs.RootCause`. Without any exception the result
still names how the worker (or replica) ended and the last line it wrote, as schedulers did
before; :func:`names_cause` tells whether anything beyond that was found, so that a
scheduler with a better message of its own (an OOM kill it detected) can keep it.

Which failed replica is the app's cause: :func:`first_cause` (the one that failed first,
unless it only saw a peer go: :data:`PEER_LOST`).

Where each scheduler finds these: the local scheduler sets ``TORCHELASTIC_ERROR_FILE`` in the
replica's directory and reads its ``stderr.log``; a scheduler that can read only logs passes
the tail of the replica's log and no error file.
"""
from __future__ import annotations

import json
import re
import signal
from typing import Any, Callable, Dict, Hashable, Iterable, List, NamedTuple, Optional, Tuple, TypeVar, Union

from tx.specs.status import RootCause

__all__ = ["LATE_CAUSE_S", "ONE_FAILURE_S", "PEER_LOST", "RootCause", "failure_once", "first_cause", "lost_peer", "names_cause",
           "parse_error_file", "parse_failures", "parse_report", "parse_traceback", "root_cause", "signal_text", "telling_line",
           "why_failed"]

Text = Union[str, bytes, None]

#: at most this many characters of a message are kept in :attr:`RootCause.message`
MAX_MESSAGE_CHARS = 4000

_TB_HEADER = "Traceback (most recent call last):"
_FRAME = re.compile(r'^\s*File "(?P<file>.+)", line (?P<line>\d+)')
_EXC_LINE = re.compile(r"^(?P<type>[A-Za-z_][\w.]*)(?::\s?(?P<msg>.*))?$")
# one torchrun/torch prefix: ``[rank1]: `` (the excepthook, global rank) or ``[default1]:``
# or ``[1]:`` (--tee, role and local rank; tx's dist.ddp passes an empty --role)
_PREFIX = re.compile(r"^\[(?P<name>[A-Za-z_][\w.-]*?)?(?P<num>\d+)\]: ?")
# library log lines that end a multi-line message: glog (``W1125 12:34:08.300000 ...``),
# torch's C++ warnings (``[W1125 12:34:08 ...]``)
_LOG_LINE = re.compile(r"^\[?[IWEF]\d{4} \d\d:\d\d:\d\d")
# installed packages and the standard library: frames skipped when naming where it was raised
_LIBRARY = re.compile(r"[/\\](site|dist)-packages[/\\]|[/\\]lib[/\\]python\d+(\.\d+)?[/\\]|^<")
_CHILD_FAILED = "ChildFailedError"
_ROOT_HEADER = "Root Cause (first observed failure):"


class PyError(NamedTuple):
    """An exception read from a traceback or an error file."""

    exception_type: str
    message: str
    file: str
    line: Optional[int]


class Report(NamedTuple):
    """The root-cause block of torchrun's ChildFailedError report."""

    rank: Optional[int]
    local_rank: Optional[int]
    exit_code: Optional[int]
    signal: str
    error_file: str
    traceback: List[str]


class _Line(NamedTuple):
    rank: Optional[int]  # from [rankN]
    local: Optional[int]  # from [roleN] (--tee)
    text: str


def _text(data: Text) -> str:
    if data is None:
        return ""
    if isinstance(data, bytes):
        return data.decode("utf-8", "replace")
    return data


def _cap(msg: str) -> str:
    return msg if len(msg) <= MAX_MESSAGE_CHARS else msg[: MAX_MESSAGE_CHARS - 3] + "..."


def _where(frames: List[Tuple[str, int]]) -> Tuple[str, Optional[int]]:
    for file, line in reversed(frames):
        if not _LIBRARY.search(file):
            return file, line
    return frames[-1] if frames else ("", None)


def _split_exception(line: str) -> Tuple[str, str]:
    m = _EXC_LINE.match(line.strip())
    if m and (m.group("msg") is not None or "." in m.group("type") or m.group("type").endswith(("Error", "Exception",
                                                                                               "Interrupt", "Exit"))):
        return m.group("type"), m.group("msg") or ""
    return "", line.strip()


def parse_traceback(lines: List[str], skip_child_failed: bool = True) -> Optional[PyError]:
    """The exception of the last Python traceback in ``lines`` (without torch's prefixes):
    its type, message (the lines after ``Type:`` up to a blank line, a library log line or
    the next traceback), and the innermost frame outside installed packages and the
    standard library. With ``skip_child_failed``, torchrun's own ChildFailedError is passed
    over for the traceback before it. None if there is no traceback."""
    found = _last_traceback(lines, skip_child_failed)
    return found[0] if found else None


def _last_traceback(lines: List[str], skip_child_failed: bool = True) -> Optional[Tuple[PyError, int]]:
    """:func:`parse_traceback`, with the index of the line after the exception's message."""
    starts = [i for i, ln in enumerate(lines) if ln.strip() == _TB_HEADER]
    for n in range(len(starts) - 1, -1, -1):
        start = starts[n]
        end = starts[n + 1] if n + 1 < len(starts) else len(lines)
        found = _one_traceback(lines[start + 1:end])
        if found is None or (skip_child_failed and found[0].exception_type.endswith(_CHILD_FAILED)):
            continue
        return found[0], start + 1 + found[1]
    return None


def _one_traceback(body: List[str]) -> Optional[Tuple[PyError, int]]:
    frames: List[Tuple[str, int]] = []
    for i, ln in enumerate(body):
        m = _FRAME.match(ln)
        if m:
            frames.append((m.group("file"), int(m.group("line"))))
            continue
        if not ln.strip() or ln[:1].isspace():
            continue
        exc_type, first = _split_exception(ln)
        rest: List[str] = []
        for more in body[i + 1:]:
            if not more.strip() or _LOG_LINE.match(more) or more.startswith("====="):
                break
            rest.append(more.rstrip())
        file, line = _where(frames)
        return PyError(exc_type, _cap("\n".join([first, *rest]).strip()), file, line), i + 1 + len(rest)
    return None


def parse_error_file(data: Text) -> Tuple[Optional[PyError], Optional[int]]:
    """The exception in a TorchElastic error file (see the module docstring) and its
    ``errorCode`` (the worker's exit code, None if absent). A file that is not that JSON
    gives its first non-empty line as the message; an empty one ``(None, None)``."""
    text = _text(data).strip()
    if not text:
        return None, None
    try:
        doc: Any = json.loads(text)
    except ValueError:
        first = next((ln.strip() for ln in text.splitlines() if ln.strip()), "")
        return PyError("", _cap(first), "", None), None
    msg = doc.get("message") if isinstance(doc, dict) else doc
    code: Optional[int] = None
    if isinstance(msg, dict):
        raw = msg.get("errorCode")
        code = raw if isinstance(raw, int) and not isinstance(raw, bool) else None
        stack = (msg.get("extraInfo") or {}).get("py_callstack") if isinstance(msg.get("extraInfo"), dict) else None
        frames: List[Tuple[str, int]] = []
        if isinstance(stack, str):
            err = parse_traceback(stack.splitlines())
            if err is not None:
                return err, code
            frames = [(m.group("file"), int(m.group("line"))) for m in map(_FRAME.match, stack.splitlines()) if m]
        file, line = _where(frames)
        msg = msg.get("message")
    else:
        file, line = "", None
    if msg is None:
        return None, code
    lines = str(msg).strip().splitlines() or [""]
    exc_type, message = _split_exception(lines[0])
    return PyError(exc_type, _cap("\n".join([message, *lines[1:]]).strip()), file, line), code


def _int(text: str) -> Optional[int]:
    m = re.match(r"\s*(-?\d+)", text)
    return int(m.group(1)) if m else None


def _signal_name(num: int) -> str:
    try:
        return signal.Signals(num).name
    except ValueError:
        return f"signal {num}"


def parse_report(lines: List[str]) -> Optional[Report]:
    """The ``Root Cause (first observed failure):`` block of the last ChildFailedError
    report torchrun printed in ``lines``: the global and local rank of the worker, its exit
    code (negative: a signal, named in ``signal``), its error file (``""`` for ``<N/A>``)
    and the lines of its traceback field. None if there is no report. Text before the
    fields on each line (a label a backend adds) is allowed."""
    failures = parse_failures(lines)
    return failures[0] if failures else None


_BLOCK_START = re.compile(r"(?:^|\s)\[\d+\]:\s*$")


def parse_failures(lines: List[str]) -> List[Report]:
    """Every failed worker of the last ChildFailedError report in ``lines``: the root cause
    block first (:func:`parse_report`), then the report's other ``Failures:``, in its order.
    Empty if there is no report. torchrun's root cause is the worker whose failure it
    observed first (by its error file's timestamp, else its own order): of two ranks that
    end together, the one that only lost its peer may be named (see :func:`root_cause`)."""
    start = max((i for i, ln in enumerate(lines) if _ROOT_HEADER in ln), default=-1)
    if start < 0:
        return []
    root = _parse_block(lines[start + 1:])
    head = max((i for i, ln in enumerate(lines[:start]) if ln.strip().endswith("Failures:")), default=start)
    blocks: List[List[str]] = []
    for ln in lines[head + 1:start]:
        if _BLOCK_START.search(ln):
            blocks.append([])
        elif blocks and not ln.strip().strip("-").strip() == "":
            blocks[-1].append(ln)
    return [root, *(_parse_block(b) for b in blocks)]


def _parse_block(lines: List[str]) -> Report:
    rank = local = code = None
    sig, error_file = "", ""
    tb: List[str] = []
    lead: Optional[str] = None
    for ln in lines:
        body = ln.strip()
        if body.startswith("=====") or body.endswith("====="):
            break
        if lead is not None:  # inside the traceback field: lines indented past its label
            if ln.startswith(lead):
                tb.append(ln[len(lead):])
                continue
            lead = None
        m = re.search(r"\brank\s*:\s*(-?\d+)\s*\(local_rank:\s*(-?\d+)\)", ln)
        if m:
            rank, local = int(m.group(1)), int(m.group(2))
            continue
        m = re.search(r"\bexitcode\s*:\s*(-?\d+)", ln)
        if m:
            code = int(m.group(1))
            named = re.search(r"\((SIG[A-Z0-9]+)\)\s*$", ln)
            sig = named.group(1) if named else (_signal_name(-code) if code < 0 else "")
            continue
        m = re.search(r"\berror_file\s*:\s*(.*)$", ln)
        if m:
            value = m.group(1).strip()
            error_file = "" if value in ("<N/A>", "") else value
            continue
        m = re.search(r"^(.*?)traceback\s*:\s?(.*)$", ln)
        if m:
            tb.append(m.group(2))
            lead = m.group(1)
    return Report(rank, local, code, sig, error_file, tb)


def _strip_prefixes(line: str) -> _Line:
    if not line.startswith("["):
        return _Line(None, None, line)
    rank = local = None
    while True:
        m = _PREFIX.match(line)
        if not m:
            break
        if m.group("name") == "rank":
            rank = int(m.group("num"))
        else:
            local = int(m.group("num"))
        line = line[m.end():]
    return _Line(rank, local, line.rstrip("\r"))


def _is_torchrun_line(text: str) -> bool:
    return bool(_LOG_LINE.match(text))


def _last_line(lines: List[str]) -> str:
    for ln in reversed(lines):
        if ln.strip() and not _is_torchrun_line(ln) and not ln.strip().startswith(("=====", "-----")):
            return ln.strip()
    return ""


def _lines_of(parsed: List[_Line], rank: Optional[int], local: Optional[int]) -> List[str]:
    if rank is not None:
        mine = [p.text for p in parsed if p.rank == rank]
        if mine:
            return mine
    if local is not None:
        return [p.text for p in parsed if p.local == local]
    return []


def _unprefixed_before_report(parsed: List[_Line]) -> List[str]:
    """Lines without prefixes, up to torchrun's own traceback and report."""
    out = [p.text for p in parsed if p.rank is None and p.local is None]
    cut = next((i for i, ln in enumerate(out) if ln.strip().endswith(_CHILD_FAILED + ":")), None)
    if cut is None:
        return out
    header = max((i for i, ln in enumerate(out[:cut]) if ln.strip() == _TB_HEADER), default=cut)
    return out[:header]


def root_cause(role: str, replica: int, log_tail: Text = None, error_file: Text = None,
               exit_code: Optional[int] = None) -> RootCause:
    """Why replica ``replica`` of ``role`` failed, from the end of its output
    (``log_tail``), the TorchElastic error file torchrun or its worker left (``error_file``)
    and the replica's own exit status (``exit_code``, negative: a signal); see the module
    docstring for what is read. Never raises on bad input: what cannot be read is left out.

    The exception comes from, in order: the error file, the failing worker's traceback in
    the output (told by torch's prefixes; the worker the report names as root cause, else
    the first that printed one), the report's traceback field, the last traceback without
    prefixes. Without any, ``message`` is the last line the worker (or replica) wrote.
    Where that exception only says the worker lost a peer (:data:`PEER_LOST`: gloo's
    "Connection closed by peer" when another rank died), the first other failed worker
    whose own exception is not that is the cause instead: of two ranks that end together,
    which one torchrun observed first is a race.
    """
    lines = _text(log_tail).splitlines()
    failures = parse_failures(lines)
    report = failures[0] if failures else None
    parsed = [_strip_prefixes(ln) for ln in lines]
    rank = report.rank if report else None
    local = report.local_rank if report else None
    code = exit_code
    sig = _signal_name(-exit_code) if exit_code is not None and exit_code < 0 else ""
    if report and report.exit_code is not None:
        code, sig = report.exit_code, report.signal

    err: Optional[PyError] = None
    source = ""
    file_err, file_code = parse_error_file(error_file)
    if file_err is not None:
        err, source = file_err, "error_file"
        if file_code is not None and not (report and report.exit_code is not None):
            code = file_code
    if rank is None and local is None:  # no report: the first worker that printed a traceback
        first = next((p for p in parsed if p.text.strip() == _TB_HEADER and (p.rank, p.local) != (None, None)), None)
        if first is not None:
            rank, local = first.rank, first.local
    worker_lines = _lines_of(parsed, rank, local)
    if err is None and worker_lines:
        err = parse_traceback(worker_lines)
        source = "traceback" if err else source
    if err is None and report and report.traceback:
        err = parse_traceback(report.traceback)
        source = "report" if err else source
    if err is None:
        plain = _unprefixed_before_report(parsed)
        found = _last_traceback(plain)
        # without torchrun's report, only a traceback that ends the output of a program that
        # exited as an uncaught exception makes Python exit (status 1) is why it failed, not
        # one it logged before going on
        uncaught = exit_code in (None, 1) and not any(ln.strip() and not _LOG_LINE.match(ln)
                                                      for ln in plain[found[1]:]) if found else False
        if found is not None and (report or uncaught):
            err, source = found[0], "traceback"
    if err is None:
        last = _last_line(worker_lines) or (_last_line(_unprefixed_before_report(parsed)) if not worker_lines else "")
        if last:
            err, source = PyError("", _cap(last), "", None), "output"
    if err is not None and _says_peer_lost(err):  # a symptom: another worker's own exception is the cause
        other = _other_worker(failures[1:], parsed, (rank, local))
        if other is not None:
            (rank, local, block), err, source = other
            if block is not None and block.exit_code is not None:
                code, sig = block.exit_code, block.signal
            else:
                code, sig = exit_code, _signal_name(-exit_code) if exit_code is not None and exit_code < 0 else ""
    if err is not None and source == "error_file" and not err.file and report and report.traceback:
        tb = parse_traceback(report.traceback)  # the error file's message alone: where from the report
        if tb is not None:
            err = err._replace(file=tb.file, line=tb.line)
    return RootCause(
        role=role, replica=replica, rank=rank, local_rank=local,
        exception_type=err.exception_type if err else "", message=err.message if err else "",
        file=err.file if err else "", line=err.line if err else None,
        exit_code=code, signal=sig, source=source,
    )


def _says_peer_lost(err: PyError) -> bool:
    return PEER_LOST.search(f"{err.exception_type}: {err.message}") is not None


def _other_worker(others: List[Report], parsed: List[_Line], skip: Tuple[Optional[int], Optional[int]]
                  ) -> Optional[Tuple[Tuple[Optional[int], Optional[int], Optional[Report]], PyError, str]]:
    """The first other failed worker (the report's other failures ``others``, then any rank
    that printed a traceback) whose exception is not a lost peer: ``((rank, local rank, its
    report block or None), exception, source)``; None if there is none."""
    workers: List[Tuple[Optional[int], Optional[int], Optional[Report]]] = [
        (b.rank, b.local_rank, b) for b in others]
    workers += [(p.rank, p.local, None) for p in parsed if p.text.strip() == _TB_HEADER and (p.rank, p.local) != (None, None)]
    seen = {skip}
    for rank, local, block in workers:
        if (rank, local) in seen:
            continue
        seen.add((rank, local))
        mine = _lines_of(parsed, rank, local)
        found = [(parse_traceback(mine) if mine else None, "traceback"),
                 (parse_traceback(block.traceback) if block and block.traceback else None, "report")]
        for err, source in found:
            if err is not None and not _says_peer_lost(err):
                return (rank, local, block), err, source
    return None


def names_cause(cause: RootCause) -> bool:
    """Whether ``cause`` names more than the exit status and a last line: an exception, or
    the worker torchrun's report named."""
    return bool(cause.exception_type) or cause.rank is not None or cause.source in ("error_file", "report",
                                                                                      "traceback")


def why_failed(role: str, replica: int, log_tail: Text = None, error_file: Text = None,
               exit_code: Optional[int] = None) -> str:
    """:func:`root_cause`'s one line (:attr:`tx.specs.RootCause.text`)."""
    return root_cause(role, replica, log_tail, error_file, exit_code).text


def signal_text(code: int) -> str:
    """A replica's exit status in words: ``exit code 7``, or for a shell's 129..159 (128 +
    the signal that killed it) ``killed by SIGKILL (exit code 137)``."""
    if 128 < code < 160:
        try:
            return f"killed by {signal.Signals(code - 128).name} (exit code {code})"
        except ValueError:
            pass
    return f"exit code {code}"


_TELLING = re.compile(r"\b\w*(?:Error|Exception|Interrupt)\b:")


def telling_line(text: Text) -> str:
    """The line of a log's tail that says most: the last ``SomeError: ...`` line (Python
    exceptions, also behind torchrun's ``[rank]:`` prefix), else the last line with a
    letter or digit (not a ``=====`` rule); "" where there is none. Bytes are decoded as
    UTF-8 (undecodable bytes replaced)."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", "replace")
    lines = [ln.strip() for ln in (text or "").splitlines() if any(c.isalnum() for c in ln)]
    for ln in reversed(lines):
        if _TELLING.search(ln):
            return ln
    return lines[-1] if lines else ""


def failure_once(cache: Dict[Any, Tuple[str, Optional[RootCause]]], key: Hashable, statuses: List[Any],
                 compute: Callable[[], Tuple[str, Optional[RootCause]]]) -> Tuple[str, Optional[RootCause]]:
    """``(structured_error_msg, root cause)`` of an ended app, computed by ``compute()`` once per
    ``key`` (a failed app's logs do not change: following 1,000 failed apps reads their logs
    once, not every status tick) and kept in ``cache``. ``compute`` sets the cause on its
    replica in ``statuses`` (a list of :class:`tx.specs.RoleStatus`); on a cached answer the
    same is done here, since each look builds new statuses. Raises what ``compute`` raises."""
    if key not in cache:
        cache[key] = compute()
        return cache[key]
    text, cause = cache[key]
    if cause is not None:
        for rs in statuses:
            for rep in rs.replicas:
                if (rs.role, rep.id) == (cause.role, cause.replica):
                    rep.structured_error_msg, rep.root_cause = cause.text, cause
    return text, cause


#: what a rank says when another rank died first (gloo, NCCL, torch.distributed's store): a
#: symptom of the failure, never its cause (searched in a cause's ``exception_type: message``)
PEER_LOST = re.compile(
    r"typically caused by a remote worker crashing|remote process exited or there was a network error"
    r"|DistNetworkError"
    # torchrun's agent whose rendezvous store (hosted by another replica's agent) went away
    r"|RendezvousConnectionError|RendezvousClosedError"
    # a socket error counts only in a collective's message (gloo's pair.cc, NCCL, c10d): a
    # program's own BrokenPipeError or reset HTTP connection is its cause
    r"|(?:gloo|nccl|NCCL|c10d|ProcessGroup|pair\.cc)[^\n]*(?:Connection closed by peer|Connection reset by peer|Broken pipe)")
#: seconds within which the replicas of one failure end: each notices its own workers' end
#: and exits on its own, so the one whose rank died of a peer's failure may end first
ONE_FAILURE_S = 10.0
#: seconds after the first failure's end within which the rank that raised may still end,
#: where every failure within :data:`ONE_FAILURE_S` only lost its peer: torchrun's agent of
#: a replica whose rank raised closes its rendezvous on the store that another replica's
#: agent hosts, and where that agent has exited already it waits out the store client's
#: timeout (60 s) before it ends
LATE_CAUSE_S = 120.0

_F = TypeVar("_F")


def lost_peer(cause: Optional[RootCause]) -> bool:
    """Whether ``cause`` only says that its rank lost a peer (:data:`PEER_LOST` in its
    ``exception_type: message``): a symptom of another rank's failure. False for None."""
    if cause is None:
        return False
    return PEER_LOST.search(f"{cause.exception_type}: {cause.message or ''}") is not None


def first_cause(failures: Iterable[_F], when: Callable[[_F], float], cause_of: Callable[[_F], Optional[RootCause]],
                window_s: float = ONE_FAILURE_S, known: Optional[Callable[[_F], bool]] = None,
                late_s: float = LATE_CAUSE_S) -> Tuple[_F, Optional[RootCause]]:
    """The failure that is an app's cause, and its root cause: the replica that failed first,
    except that among the failures that ended within ``window_s`` seconds of the first
    one, the first that names a cause other than a lost peer comes before it. A DDP rank
    that raises makes the other ranks fail in their next collective ("Connection closed by
    peer", :data:`PEER_LOST`), and which replica's end a backend records first is a race.
    Where every failure within ``window_s`` names only a lost peer, the search goes on, in
    time order, through those that ended within ``late_s`` of the first: the replica whose
    rank raised can end that much later (:data:`LATE_CAUSE_S`); it stops at a failure that
    names nothing (an unexplained failure may be the source: the first failure is kept).

    Args:
        failures: the failed replicas, any records (at least one).
        when: a failure's end, in seconds (any epoch, the same for all; ``math.inf`` where
            unknown: such failures come after the others, and count as one failure with
            each other). Ties keep the order of ``failures``.
        cause_of: a failure's :class:`~tx.specs.RootCause`, or None where nothing is named
            beyond how it ended. Called lazily, in time order, only for failures within the
            window, until one names a cause that is not a lost peer (each at most once):
            a backend that must read a replica's log for it reads only those.
        window_s: seconds after the first failure's end within which a failure is part of
            the same failure (:data:`ONE_FAILURE_S`); one ending later is not its cause,
            except as above.
        known: whether the scheduler itself knows why a failure ended without its log
            (an out-of-memory kill, a lost host): such a failure is a cause too, returned
            with None and ``cause_of`` not called for it.
        late_s: seconds after the first failure's end within which a failure may still
            be the cause where every one within ``window_s`` lost a peer (:data:`LATE_CAUSE_S`).

    Returns:
        ``(failure, cause)``: the first failure within the window that is ``known`` or
        whose cause is not a lost peer, with its cause (None for a known one); else, where
        every one in the window lost a peer, the first such failure within ``late_s``
        before any that names nothing; else the first failure and ``cause_of(first)``.

    Raises:
        ValueError: ``failures`` is empty. What ``when``, ``cause_of`` or ``known`` raise.
    """
    ordered = sorted(failures, key=when)
    if not ordered:
        raise ValueError("first_cause: no failures")
    start = when(ordered[0])
    first: Optional[Tuple[_F, Optional[RootCause]]] = None
    all_lost = True  # every failure so far named only a lost peer
    for f in ordered:
        late = when(f) > start + window_s  # inf > inf is False: unknown ends count as one failure
        if late and (not all_lost or when(f) > start + late_s):  # (the first failure is never late)
            break
        if known is not None and known(f):
            return f, None
        cause = cause_of(f)
        if cause is not None and not lost_peer(cause):
            return f, cause
        if cause is None:
            all_lost = False
            if late:
                break
        if first is None:
            first = (f, cause)
    return first if first is not None else (ordered[0], cause_of(ordered[0]))  # (a NaN time)
