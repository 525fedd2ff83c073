"""One scheduler call in a fresh interpreter, as ``tx status``/``tx log``/``tx cancel``
from another shell would make it: ``python -m tx.testing._fresh OP BACKEND SESSION APP_ID
[ROLE K STREAM]``. The scheduler is created by name through the plugin registry (or, with
``TX_KIT_FACTORY=pkg.module:factory``, by that factory) and the result is printed as one
line of JSON. Used by :class:`tx.testing.SchedulerConformance`, which runs this file itself
(``runpy.run_path``) so that a fresh process imports what ``tx status`` imports, not the
``tx.testing`` package and pytest: this module imports nothing of ``tx.testing``."""
from __future__ import annotations

import json
import os
import sys
from typing import Any, Dict, List

from tx.plugins import get_registry, import_object
from tx.specs.files import appdef_to_dict


def _scheduler(backend: str, session: str) -> Any:

    factory = os.environ.get("TX_KIT_FACTORY")
    if factory:
        return import_object(factory)(session)
    reg = get_registry().get("schedulers", backend)
    if reg is None:
        raise SystemExit(f"scheduler {backend!r} is not registered in a fresh process (is its plugin installed?)")
    return reg.load()(session)


def _describe(sched: Any, app_id: str) -> Dict[str, Any]:
    desc = sched.describe(app_id)
    if desc is None:
        return {"found": False}
    return {
        "found": True,
        "state": desc.state.name,
        "msg": desc.msg,
        "replicas": {
            rs.role: {str(r.id): [r.state.name, r.exit_code] for r in rs.replicas} for rs in desc.roles_statuses
        },
        "app": appdef_to_dict(desc.app) if desc.app is not None else None,
    }


def main(argv: List[str]) -> int:
    op, backend, session, app_id, *rest = argv
    sched = _scheduler(backend, session)
    out: Any
    if op == "describe":
        out = _describe(sched, app_id)
    elif op == "log":
        role, k, stream = rest
        out = {"lines": list(sched.log_iter(app_id, role, int(k), streams=stream or None))}
    elif op == "cancel":
        sched.cancel(app_id)
        out = {"cancelled": True}
    elif op == "list":
        out = {"app_ids": [a.app_id for a in sched.list()]}
    else:
        raise SystemExit(f"unknown op {op!r}")
    sched.close()
    sys.stdout.write(json.dumps(out) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
