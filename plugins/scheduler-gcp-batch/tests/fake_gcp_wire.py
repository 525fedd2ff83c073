"""fake_gcp's wire: the constants, errors and JSON/proto helpers of the Batch and Cloud
Logging REST APIs it serves, and the Cloud Logging filter language it evaluates
(``entries:list``). Kept apart from :mod:`fake_gcp` so that each reads in one sitting."""
from __future__ import annotations

import datetime as dt
import json
import os
import re
import time
from typing import Any, Callable, Dict, List, Optional

from google.cloud import batch_v1
from google.protobuf import json_format
from werkzeug.wrappers import Request

PREEMPTED_EXIT_CODE = 50001  # https://cloud.google.com/batch/docs/troubleshooting#reserved-exit-codes
DENIED_PROJECT = "denied-project"
UNAUTHENTICATED_PROJECT = "unauthenticated-project"
QUOTA_PROJECT = "quota-project"
_JOB_ID = re.compile(r"^[a-z]([a-z0-9-]{0,61}[a-z0-9])?$")
_PARENT = r"/v1/projects/(?P<project>[^/:]+)/locations/(?P<location>[^/:]+)"
_SEVERITY = {"DEFAULT": 0, "DEBUG": 100, "INFO": 200, "NOTICE": 300, "WARNING": 400, "ERROR": 500,
             "CRITICAL": 600, "ALERT": 700, "EMERGENCY": 800}
JobState = batch_v1.JobStatus.State
TaskState = batch_v1.TaskStatus.State
LIST_PAGE_SIZE = 100  # jobs.list and tasks.list without pageSize (Batch v1 documents no default)
LIST_MAX_PAGE_SIZE = 1000  # a larger pageSize is coerced to this (AIP-158; Batch v1 documents no maximum)

class ApiError(Exception):
    def __init__(self, code: int, status: str, message: str) -> None:
        super().__init__(message)
        self.code, self.status, self.message = code, status, message


def _now() -> str:
    t = time.time_ns()
    return dt.datetime.fromtimestamp(t // 1_000_000_000, dt.timezone.utc).strftime("%Y-%m-%dT%H:%M:%S") + f".{t % 1_000_000_000:09d}Z"


def _ns(ts: str) -> int:
    """RFC 3339 text -> nanoseconds since the epoch (any number of fraction digits)."""
    m = re.match(r"^(\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)$", ts)
    if not m:
        raise ApiError(400, "INVALID_ARGUMENT", f"bad timestamp {ts!r}")
    base = dt.datetime.strptime(m.group(1) + (m.group(3) if m.group(3) != "Z" else "+00:00"), "%Y-%m-%dT%H:%M:%S%z")
    frac = (m.group(2) or "0")[:9].ljust(9, "0")
    return int(base.timestamp()) * 1_000_000_000 + int(frac)


def _to_json(msg: Any) -> str:
    return type(msg).to_json(msg, use_integers_for_enums=False)


def _page(req: Request, resp_type: Any, field: str, items: List[Any]) -> str:
    """A list method's answer as JSON: page ``pageToken`` (an offset) of ``pageSize`` of
    ``items`` (raw protobuf messages) in ``resp_type``'s ``field``, ``nextPageToken`` where
    more follow, only the fields of the ``X-Goog-FieldMask`` header (all without one)."""
    try:
        size = int(req.args.get("pageSize") or 0)
        start = int(req.args.get("pageToken") or 0)
    except ValueError:
        raise ApiError(400, "INVALID_ARGUMENT", "invalid page_size or page_token") from None
    if size < 0 or start < 0:
        raise ApiError(400, "INVALID_ARGUMENT", "page_size and page_token must not be negative")
    size = min(size or LIST_PAGE_SIZE, LIST_MAX_PAGE_SIZE)
    pb = resp_type.pb()
    mask = _mask_tree(req.headers.get("X-Goog-FieldMask", ""), pb.DESCRIPTOR)
    full = pb(**{field: items[start:start + size]})
    if start + size < len(items):
        full.next_page_token = str(start + size)
    resp = full
    if mask is not None:
        resp = pb()
        _masked(full, mask, resp)
    return json_format.MessageToJson(resp, indent=None)


def _mask_tree(header: str, desc: Any) -> Optional[Dict[str, Any]]:
    """An ``X-Goog-FieldMask`` value (comma-separated paths of JSON field names, such as
    ``jobs.name,nextPageToken``; a path through a repeated field applies to each element)
    as a tree of field names {name: subtree}, {} for a whole field; None when empty (every
    field). An unknown field is a 400, as the service answers."""
    paths = [p.strip() for p in header.split(",") if p.strip()]
    if not paths:
        return None
    tree: Dict[str, Any] = {}
    for path in paths:
        node, d = tree, desc
        for part in path.split("."):
            field = None if d is None else d.fields_by_camelcase_name.get(part) or d.fields_by_name.get(part)
            if field is None:
                raise ApiError(400, "INVALID_ARGUMENT", f"Invalid field mask path {path!r}")
            node = node.setdefault(field.name, {})
            d = field.message_type if not (field.message_type and field.message_type.GetOptions().map_entry) else None
    return tree


def _masked(src: Any, tree: Dict[str, Any], dst: Any) -> None:
    """Copies into protobuf message ``dst`` the fields of ``src`` that ``tree``
    (:func:`_mask_tree`) names."""
    for name, sub in tree.items():
        field = src.DESCRIPTOR.fields_by_name[name]
        value = getattr(src, name)
        if field.is_repeated:  # lists and maps
            if sub:
                for item in value:
                    _masked(item, sub, getattr(dst, name).add())
            else:
                getattr(dst, name).MergeFrom(value)
        elif field.message_type is None:
            setattr(dst, name, value)
        elif src.HasField(name) and sub:
            _masked(value, sub, getattr(dst, name))
        elif src.HasField(name):
            getattr(dst, name).CopyFrom(value)


def _public(op: Dict[str, Any]) -> Dict[str, Any]:
    """An operation as the API shows it (without the server's own ``_`` keys)."""
    return {k: v for k, v in op.items() if not k.startswith("_")}


def _signal(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


_CLAUSE = re.compile(r'^\s*(?P<field>[A-Za-z_][\w.]*)\s*(?P<op>>=|<=|!=|=|:|<|>)\s*(?P<value>"(?:[^"\\]|\\.)*"|\S+)\s*$')


def _parse_filter(text: str) -> List[Callable[[Dict[str, Any]], bool]]:
    """The subset of the Logging query language the scheduler uses: clauses joined by AND."""
    out: List[Callable[[Dict[str, Any]], bool]] = []
    for part in [p for p in re.split(r"\s+AND\s+", text.strip()) if p]:
        m = _CLAUSE.match(part)
        if not m:
            raise ApiError(400, "INVALID_ARGUMENT", f"unsupported filter clause: {part!r}")
        field, op, value = m.group("field"), m.group("op"), m.group("value")
        if value.startswith('"'):
            value = json.loads(value)
        out.append(_clause(field, op, value))
    return out


def _clause(field: str, op: str, value: str) -> Callable[[Dict[str, Any]], bool]:
    def get(e: Dict[str, Any]) -> Any:
        cur: Any = e
        for part in field.split("."):
            key = {"logName": "logName"}.get(part, part)
            cur = cur.get(key) if isinstance(cur, dict) else None
        return cur

    if field == "timestamp":
        want = _ns(value)
        key: Callable[[Any], Any] = _ns
    elif field == "severity":
        if value not in _SEVERITY:
            raise ApiError(400, "INVALID_ARGUMENT", f"unknown severity {value!r}")
        want = _SEVERITY[value]
        key = lambda v: _SEVERITY.get(v or "DEFAULT", 0)  # noqa: E731
    else:
        want = value
        key = lambda v: v  # noqa: E731
    ops: Dict[str, Callable[[Any, Any], bool]] = {
        "=": lambda a, b: a == b, "!=": lambda a, b: a != b, "<": lambda a, b: a < b, "<=": lambda a, b: a <= b,
        ">": lambda a, b: a > b, ">=": lambda a, b: a >= b, ":": lambda a, b: str(b) in str(a),
    }
    cmp = ops[op]

    def check(e: Dict[str, Any]) -> bool:
        got = get(e)
        if got is None:
            return op == "!="
        return cmp(key(got), want)

    return check
