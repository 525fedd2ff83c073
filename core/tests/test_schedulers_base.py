"""tx.schedulers: the Scheduler base class (with an in-memory subclass), ids and streams."""
import re
from typing import Dict, Iterable, List, Mapping, Optional

import attrs
import pytest

from tx import hookimpl
from tx.plugins import PluginRegistry, set_registry
from tx.schedulers import (
    DescribeAppResponse,
    ListAppResponse,
    Scheduler,
    Stream,
    filter_regex,
    get_default_scheduler_name,
    get_scheduler_factories,
    split_lines,
    split_lines_iterator,
)
from tx.schedulers.ids import get_len_random_id, make_unique, random_id
from tx.specs import (
    AppDef,
    AppDryRunInfo,
    AppState,
    CfgVal,
    InvalidRunConfigException,
    Resource,
    Role,
    runopts,
)


class MemScheduler(Scheduler[Dict]):
    """Apps live in a dict; each describe() advances an app along ``script``."""

    def __init__(self, session_name: str = "test", script: Optional[List[AppState]] = None, logs: str = "") -> None:
        super().__init__("mem", session_name)
        self.apps: Dict[str, Dict] = {}
        self.script = script or [AppState.RUNNING]
        self.describes = 0
        self.cancelled: List[str] = []
        self.logs = logs
        self.log_calls: List[dict] = []
        self.closed = 0

    def _run_opts(self) -> runopts:
        opts = runopts()
        opts.add("queue", type_=str, help="queue name", required=True)
        opts.add("priority", type_=int, help="priority", default=5)
        return opts

    def _submit_dryrun(self, app: AppDef, cfg: Mapping[str, CfgVal]) -> AppDryRunInfo[Dict]:
        req = {"name": app.name, "queue": cfg["queue"], "priority": cfg["priority"],
               "roles": [r.name for r in app.roles]}
        return AppDryRunInfo(req, fmt=lambda r: f"MEM {r['name']} on {r['queue']}")

    def schedule(self, dryrun_info: AppDryRunInfo[Dict]) -> str:
        app_id = make_unique(dryrun_info.request["name"])
        self.apps[app_id] = {"request": dryrun_info.request, "step": 0, "state": None}
        return app_id

    def describe(self, app_id: str) -> Optional[DescribeAppResponse]:
        self.describes += 1
        app = self.apps.get(app_id)
        if app is None:
            return None
        if app["state"] is None:
            state = self.script[min(app["step"], len(self.script) - 1)]
            app["step"] += 1
        else:
            state = app["state"]
        return DescribeAppResponse(app_id=app_id, state=state)

    def list(self) -> List[ListAppResponse]:
        return [ListAppResponse(app_id=i, state=AppState.RUNNING) for i in self.apps]

    def _cancel_existing(self, app_id: str) -> None:
        self.cancelled.append(app_id)
        self.apps[app_id]["state"] = AppState.CANCELLED

    def log_iter(self, app_id, role_name, k=0, regex=None, since=None, until=None,
                 should_tail=False, streams=None) -> Iterable[str]:
        self.log_calls.append({"app_id": app_id, "role": role_name, "k": k, "should_tail": should_tail,
                               "streams": streams})
        return iter(split_lines(self.logs))

    def close(self) -> None:
        self.closed += 1


class NoLogs(MemScheduler):
    log_iter = Scheduler.log_iter


def _app(*roles: Role) -> AppDef:
    return AppDef("job", list(roles) or [Role("trainer", "img", resource=Resource(1, 0, 128))])


# -- submit_dryrun -------------------------------------------------------------------------
def test_dryrun_resolves_cfg_and_records_context():
    s = MemScheduler()
    app = _app()
    info = s.submit_dryrun(app, {"queue": "q"})
    assert info.request == {"name": "job", "queue": "q", "priority": 5, "roles": ["trainer"]}
    assert str(info) == "MEM job on q"
    assert info._cfg == {"queue": "q", "priority": 5}
    assert info._app is app and info._scheduler == "mem"
    assert s.apps == {}  # no side effects


def test_dryrun_rejects_bad_cfg():
    s = MemScheduler()
    with pytest.raises(InvalidRunConfigException, match="required run option 'queue'") as ei:
        s.submit_dryrun(_app(), {})
    assert ei.value.cfg_key == "queue"
    with pytest.raises(InvalidRunConfigException, match="run option 'priority' must be int, got str '1'"):
        s.submit_dryrun(_app(), {"queue": "q", "priority": "1"})


def test_dryrun_rejects_null_resource():
    app = _app(Role("ok", resource=Resource(1, 0, 1)), Role("bare"))
    with pytest.raises(ValueError, match="role 'bare' has no resource; mem needs cpu, gpu and memMB"):
        MemScheduler().submit_dryrun(app, {"queue": "q"})


def test_validate_can_be_overridden():
    class Lenient(MemScheduler):
        def _validate(self, app, scheduler, cfg):
            pass

    info = Lenient().submit_dryrun(_app(Role("bare")), {"queue": "q"})
    assert info.request["roles"] == ["bare"]


def test_validate_is_called_with_cfg():
    seen = []

    class Recording(MemScheduler):
        def _validate(self, app, scheduler, cfg):
            seen.append((scheduler, dict(cfg)))

    Recording().submit_dryrun(_app(Role("bare")), {"queue": "q"})
    assert seen == [("mem", {"queue": "q", "priority": 5})]


def test_subclass_adapters_see_every_scheduler_class(monkeypatch):
    """``add_subclass_adapter``: the subclasses that exist (parents first), then each new one
    as its class statement runs; adding the same adapter twice calls it once per class."""
    import tx.schedulers.api as api

    monkeypatch.setattr(api, "_subclass_adapters", [])

    class Before(MemScheduler):
        pass

    class BeforeChild(Before):
        pass

    seen: List[str] = []

    def adapter(cls):
        if cls.__qualname__.startswith("test_subclass_adapters"):
            seen.append(cls.__name__)
            cls.adapted = True

    api.add_subclass_adapter(adapter)
    assert seen == ["Before", "BeforeChild"]

    class After(BeforeChild):
        pass

    assert seen == ["Before", "BeforeChild", "After"] and After.adapted
    api.add_subclass_adapter(adapter)
    assert seen == ["Before", "BeforeChild", "After"]
    assert not hasattr(MemScheduler, "adapted")


@attrs.define
class TaggingRole(Role):
    def pre_proc(self, scheduler, dryrun_info):
        dryrun_info.request.setdefault("pre_proc", []).append((scheduler, self.name))
        return dryrun_info


def test_pre_proc_called_per_role_in_order():
    app = _app(TaggingRole("a", resource=Resource(1, 0, 1)), Role("b", resource=Resource(1, 0, 1)),
               TaggingRole("c", resource=Resource(1, 0, 1)))
    info = MemScheduler().submit_dryrun(app, {"queue": "q"})
    assert info.request["pre_proc"] == [("mem", "a"), ("mem", "c")]


def test_run_opts_include_workspace_opts():
    class WithWorkspace(MemScheduler):
        def workspace_opts(self):
            o = runopts()
            o.add("image_repo", type_=str, help="where to push")
            return o

    assert [k for k, _ in WithWorkspace().run_opts()] == ["queue", "priority", "image_repo"]
    assert [k for k, _ in MemScheduler().run_opts()] == ["queue", "priority"]


def test_submit_schedules():
    s = MemScheduler()
    app_id = s.submit(_app(), {"queue": "q"})
    assert re.fullmatch(r"job-[a-z0-9]+", app_id)
    assert s.exists(app_id) and not s.exists("job-nope")
    assert [r.app_id for r in s.list()] == [app_id]


# -- cancel / wait -------------------------------------------------------------------------
def test_cancel_unknown_app_is_a_no_op():
    s = MemScheduler()
    s.cancel("job-unknown")
    assert s.cancelled == []


def test_cancel_is_idempotent():
    s = MemScheduler()
    app_id = s.submit(_app(), {"queue": "q"})
    s.cancel(app_id)
    s.cancel(app_id)
    assert s.describe(app_id).state == AppState.CANCELLED
    assert set(s.cancelled) == {app_id}


def test_wait_polls_until_terminal():
    s = MemScheduler(script=[AppState.PENDING, AppState.RUNNING, AppState.RUNNING, AppState.SUCCEEDED])
    app_id = s.submit(_app(), {"queue": "q"})
    desc = s.wait(app_id, poll_interval=0)
    assert desc.state == AppState.SUCCEEDED and desc.app_id == app_id
    assert s.describes == 4


@pytest.mark.parametrize("final", [AppState.FAILED, AppState.CANCELLED])
def test_wait_stops_on_any_terminal_state(final):
    s = MemScheduler(script=[AppState.RUNNING, final])
    app_id = s.submit(_app(), {"queue": "q"})
    assert s.wait(app_id, poll_interval=0).state == final


def test_wait_unknown_app_is_none():
    assert MemScheduler().wait("job-unknown", poll_interval=0) is None


def test_wait_timeout_returns_last_description():
    s = MemScheduler(script=[AppState.RUNNING])
    app_id = s.submit(_app(), {"queue": "q"})
    desc = s.wait(app_id, timeout=0, poll_interval=0)
    assert desc.state == AppState.RUNNING
    assert s.describes == 1


# -- logs ----------------------------------------------------------------------------------
def test_default_log_iter_not_supported():
    s = NoLogs()
    with pytest.raises(NotImplementedError, match="mem does not support logs"):
        s.log_iter("job-1", "trainer")


def test_log_iter_blocks_small_output_is_one_block():
    s = MemScheduler(logs="a\nb\r progress\nünï\n")
    blocks = list(s.log_iter_blocks("job-1", "trainer", 2, should_tail=False, streams=Stream.STDERR))
    assert blocks == ["a\nb\r progress\nünï\n".encode("utf-8")]
    assert s.log_calls == [{"app_id": "job-1", "role": "trainer", "k": 2, "should_tail": False,
                            "streams": Stream.STDERR}]


def test_log_iter_blocks_tailing_yields_each_line_at_once():
    s = MemScheduler(logs="a\nb\r progress\nünï\n")
    blocks = list(s.log_iter_blocks("job-1", "trainer", 2, should_tail=True, streams=Stream.STDERR))
    assert blocks == [b"a\n", b"b\r progress\n", "ünï\n".encode("utf-8")]


def test_log_iter_blocks_split_on_line_boundaries():
    lines = [f"line {i:05d} " + "x" * 90 + "\n" for i in range(2000)]
    text = "".join(lines) + "tail without newline"
    blocks = list(MemScheduler(logs=text).log_iter_blocks("job-1", "trainer"))
    assert len(blocks) > 1
    assert b"".join(blocks).decode() == text
    for b in blocks[:-1]:
        assert b.endswith(b"\n") and len(b) >= 65536
        assert len(b) < 65536 + 200  # at most one line past the threshold
    assert blocks[-1].endswith(b"tail without newline")


def test_log_iter_blocks_empty():
    assert list(MemScheduler(logs="").log_iter_blocks("job-1", "trainer")) == []


def test_context_manager_closes():
    with MemScheduler() as s:
        assert isinstance(s, MemScheduler)
    assert s.closed == 1


# -- registry helpers ----------------------------------------------------------------------
class MemPlugin:
    @staticmethod
    @hookimpl
    def tx_register_schedulers(register):
        register("mem", MemScheduler)
        register("local_cwd", lambda session_name, **kw: MemScheduler(session_name))


@pytest.fixture
def registry():
    reg = PluginRegistry(entry_points=[])
    old = set_registry(reg)
    yield reg
    set_registry(old)


def test_factories_and_default(registry):
    assert get_scheduler_factories() == {} and get_default_scheduler_name() is None
    registry.add_plugin(MemPlugin, "mem-plugin")
    factories = get_scheduler_factories()
    assert list(factories) == ["mem", "local_cwd"]
    s = factories["mem"]("sess", logs="x\n")
    assert isinstance(s, MemScheduler) and s.session_name == "sess" and s.logs == "x\n"
    assert get_default_scheduler_name() == "local_cwd"


def test_default_is_first_without_local_cwd(registry):
    class Only:
        @staticmethod
        @hookimpl
        def tx_register_schedulers(register):
            register("zeta", MemScheduler)
            register("alpha", MemScheduler)

    registry.add_plugin(Only, "only")
    assert get_default_scheduler_name() == "zeta"


# -- ids -----------------------------------------------------------------------------------
_ID = r"[bcdfghjklmnpqrstvwxz][bcdfghjklmnpqrstvwxz0-9]*"


def test_make_unique_format():
    for _ in range(200):
        uid = make_unique("trainer")
        assert re.fullmatch(rf"trainer-{_ID}", uid), uid
        assert 1 < len(uid) - len("trainer-") <= 15


def test_make_unique_with_length():
    for n in (1, 5, 12):
        uid = make_unique("app", string_length=n)
        assert re.fullmatch(rf"app-{_ID}", uid) and len(uid) == len("app-") + n


def test_random_ids_differ_and_are_dns_labels():
    ids = {random_id() for _ in range(500)}
    assert len(ids) == 500
    assert all(re.fullmatch(_ID, i) and len(i) <= 63 for i in ids)


def test_len_random_id_rejects_zero():
    with pytest.raises(ValueError, match="string_length must be >= 1"):
        get_len_random_id(0)


# -- streams -------------------------------------------------------------------------------
def test_split_lines_keeps_newlines_and_carriage_returns():
    assert split_lines("a\nb\r c\n\nlast") == ["a\n", "b\r c\n", "\n", "last"]
    assert split_lines("") == []


def test_split_lines_iterator_rejoins_chunks():
    assert list(split_lines_iterator(["ab", "c\nd", "e\n\nf", ""])) == ["abc\n", "de\n", "\n", "f"]


def test_filter_regex():
    lines = ["error: x\n", "ok\n", "another error\n"]
    assert list(filter_regex("^error", lines)) == ["error: x\n"]
    assert list(filter_regex("error", lines)) == ["error: x\n", "another error\n"]
    assert list(filter_regex(None, lines)) == lines


def test_stream_values():
    assert [str(s) for s in Stream] == ["stdout", "stderr", "combined"]


@pytest.mark.parametrize("name,want", [
    ("Über-run", "Uber-run"), ("(exp)", "exp"), ("日本語", "app"), ("@team", "team"),
    ("-leading", "leading"), ("a b/c", "a-b-c"), ("..x..", "x"), ("ok_name.v2", "ok_name.v2"),
])
def test_clean_name_never_starts_with_a_dash(name, want):
    from tx.schedulers.ids import clean_name, make_unique

    assert clean_name(name) == want
    assert not make_unique(clean_name(name)).startswith("-")


def test_line_blocks_end_on_line_boundaries_and_keep_every_byte() -> None:
    from tx.schedulers import line_blocks

    chunks = [b"a\nb", b"c", b"\xff\nd\n", b"", b"no newline"]
    blocks = list(line_blocks(chunks))
    assert blocks == [b"a\n", b"bc\xff\nd\n", b"no newline"]
    assert b"".join(blocks) == b"".join(chunks)
    assert all(b.endswith(b"\n") for b in blocks[:-1])
    assert list(line_blocks([])) == [] and list(line_blocks([b"x"])) == [b"x"]


def test_follow_file_reads_what_is_written_until_done_and_the_rest_after(tmp_path) -> None:
    """A followed log: lines written while it is followed (here by the done-check itself,
    the one moment the follower is known to be at the end), a partial last line completed
    later, and what was written just before the app ended, are all read, in order."""
    from tx.schedulers.streams import follow_file

    log = tmp_path / "replica.out"
    log.write_bytes(b"one\ntw")
    calls = []

    def done() -> bool:
        calls.append(1)
        with log.open("ab") as f:
            f.write([b"o\nthree\n", b"four, written as the app ends\nno newline"][len(calls) - 1])
        return len(calls) == 2

    blocks = list(follow_file(str(log), done, poll_interval=0.0, check_interval=0.0))
    assert b"".join(blocks) == b"one\ntwo\nthree\nfour, written as the app ends\nno newline"
    assert all(b.endswith(b"\n") for b in blocks[:-1]) and len(calls) == 2
    assert list(follow_file(str(tmp_path / "missing.out"))) == []
    assert list(follow_file(str(tmp_path / "missing.out"), lambda: True, check_interval=0.0)) == []

