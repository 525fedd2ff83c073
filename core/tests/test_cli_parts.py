"""Pieces of the CLI that need no scheduler: log relay, identifiers, times, errors, commands,
the line `tx run` ends with and its durations."""
from __future__ import annotations

import io
import sys
import threading
from datetime import datetime, timedelta

import pytest

from tx import hookimpl
from tx.cli._relay import Relay, prefix_block
from tx.cli.cmd_run import format_duration, summary
from tx.cli.cmd_log import parse_identifier, parse_time
from tx.cli.command import Argument, Command
from tx.cli.errors import CLIError, describe_error
from tx.cli.main import main
from tx.specs import AppState, InvalidRunConfigException, MalformedAppHandleException
from tx.specs.status import AppStatus
from tx.testing import register_plugin


def test_prefix_block_whole_and_partial_lines():
    out, at_start = prefix_block(b"a\nb\n", b"r/0 ", True)
    assert (out, at_start) == (b"r/0 a\nr/0 b\n", True)
    out, at_start = prefix_block(b"x\npart", b"r/0 ", True)
    assert (out, at_start) == (b"r/0 x\nr/0 part", False)
    out, at_start = prefix_block(b"ial\r50%\n", b"r/0 ", False)
    assert (out, at_start) == (b"ial\r50%\n", True)


def test_relay_never_interleaves_mid_line():
    buf = io.BytesIO()
    relay = Relay(buf, color=False)
    n = 2000

    def gen(tag: str):
        def blocks():
            for i in range(0, n, 100):
                yield "".join(f"{tag} line {j}\n" for j in range(i, i + 100)).encode()
        return blocks

    for r in range(4):
        relay.add(f"w/{r}", gen(f"w{r}"))
    relay.join()
    lines = buf.getvalue().decode().splitlines()
    assert len(lines) == 4 * n
    for r in range(4):
        mine = [ln for ln in lines if ln.startswith(f"w/{r} ")]
        assert mine == [f"w/{r} w{r} line {j}" for j in range(n)]


def test_relay_never_writes_a_line_before_its_end():
    """The losing order, forced: replica a/0's last block ends mid-line ("tail", as a log
    archive's last block does) and replica b/0 writes a whole line before a/0's stream ends.
    The unfinished line waits for its end: b/0's line never lands in the middle of it (the
    full run's `tx log` of a Slurm job once printed "talker/0 tail, no newlinetalker/1 r1 ...")."""
    buf = io.BytesIO()
    relay = Relay(buf, color=False)
    a_sent, b_written = threading.Event(), threading.Event()

    def a_blocks():
        yield b"r0 line 1\nr0 tail"
        a_sent.set()  # the relay asks for the next block: it has handled the first
        assert b_written.wait(10)

    def b_blocks():
        assert a_sent.wait(10)
        yield b"r1 line 1\n"
        b_written.set()  # the relay asks for the next block: it has written the line

    relay.add("a/0", a_blocks)
    relay.add("b/0", b_blocks)
    relay.join(timeout=20)
    assert buf.getvalue() == b"a/0 r0 line 1\nb/0 r1 line 1\na/0 r0 tail\n"

    # an unfinished line continued by the next block is one line, prefixed once
    buf = io.BytesIO()
    relay = Relay(buf, color=False)
    relay.add("a/0", lambda: iter([b"x\npar", b"tial\r50%", b"\r100%\nnext\n"]))
    relay.join()
    assert buf.getvalue() == b"a/0 x\na/0 partial\r50%\r100%\na/0 next\n"


def test_relay_terminates_a_last_partial_line_and_reports_errors():
    buf = io.BytesIO()
    relay = Relay(buf, color=False)
    relay.add("a/0", lambda: iter([b"no newline"]))
    relay.join()
    assert buf.getvalue() == b"a/0 no newline\n"

    def broken():
        yield b"ok\n"
        raise RuntimeError("backend went away")

    relay = Relay(io.BytesIO(), color=False)
    relay.add("a/0", broken)
    with pytest.raises(RuntimeError, match="backend went away"):
        relay.join()
    assert threading.active_count() >= 1


@pytest.mark.parametrize(
    "text, expected",
    [
        ("local_cwd://tx/app-1", ("local_cwd://tx/app-1", None, None)),
        ("local_cwd://tx/app-1/trainer", ("local_cwd://tx/app-1", "trainer", None)),
        ("local_cwd://tx/app-1/trainer/0,2", ("local_cwd://tx/app-1", "trainer", [0, 2])),
        ("kubernetes://tx/default:job-x/w/1", ("kubernetes://tx/default:job-x", "w", [1])),
        ("slurm:///123", ("slurm:///123", None, None)),
    ],
)
def test_parse_identifier(text, expected):
    assert parse_identifier(text) == expected


@pytest.mark.parametrize("text", ["app-1", "local_cwd:/tx/app", "local_cwd://tx/app/r/x", "://tx/a"])
def test_parse_identifier_rejects(text):
    with pytest.raises(CLIError, match="malformed log identifier"):
        parse_identifier(text)


def test_parse_time():
    now = datetime(2026, 1, 2, 10, 0, 0)
    assert parse_time("30s", now) == now - timedelta(seconds=30)
    assert parse_time("1.5h", now) == now - timedelta(hours=1.5)
    assert parse_time("2026-01-02T09:00", now) == datetime(2026, 1, 2, 9, 0)
    assert parse_time(None) is None
    with pytest.raises(CLIError, match="bad time"):
        parse_time("yesterday")


def test_describe_error_is_one_line():
    assert describe_error(MalformedAppHandleException("x")).startswith("malformed app handle 'x'")
    assert describe_error(InvalidRunConfigException("bad\nthing", "k")).endswith("(see `tx runopts <scheduler>`)")
    assert "\n" not in describe_error(InvalidRunConfigException("bad\nthing", "k"))
    assert describe_error(KeyError("unknown named resource 'x'")) == "unknown named resource 'x'"
    assert describe_error(FileNotFoundError(2, "No such file or directory", "/nope")) .startswith("[Errno 2]")
    assert "unexpected" in describe_error(RuntimeError("boom"))


def _interrupt(args):
    raise KeyboardInterrupt


def _tree(parser):
    sub = parser.add_subparsers(dest="what", required=True)
    sub.add_parser("leaf").add_argument("--n", type=int, default=1)


class _CommandsPlugin:
    @hookimpl
    def tx_register_commands(self, register):
        register("interrupt", Command(run=_interrupt), help="raises KeyboardInterrupt")
        register("leave", Command(run=lambda args: sys.exit(3)), help="calls sys.exit(3)")
        register("tree", Command(run=lambda args: print(args.what, args.n, args.v), configure=_tree,
                                 arguments=(Argument("-v", action="store_true"),)), help="a configured parser")


def test_command_records_run_in_process(capsys):
    with register_plugin(_CommandsPlugin(), "commands-plugin"):
        assert main(["interrupt"]) == 130
        assert capsys.readouterr().err == "tx: interrupted\n"
        with pytest.raises(SystemExit) as e:  # main(argv) leaves SystemExit to its caller
            main(["leave"])
        assert e.value.code == 3
        assert main(["tree", "-v", "leaf", "--n", "4"]) == 0
        assert capsys.readouterr().out == "leaf 4 True\n"
        with pytest.raises(SystemExit) as e:
            main(["tree", "leaf", "--n", "x"])
        assert e.value.code == 2
        assert capsys.readouterr().err == (
            "tx tree leaf: error: argument --n: invalid int value: 'x' (see `tx tree leaf --help`)\n")


def test_summary_shows_the_stderr_tail_once_when_not_relayed():
    err = "replica t/0 exited with code 2: boom"
    st = AppStatus(AppState.FAILED, msg="replica t/0 exited with code 2; last lines of stderr:\nline a\nboom",
                   structured_error_msg=err, ui_url="file:///logs/x")
    text = summary("local_cwd://tx/x", st, 75.2, logs_shown=False)
    assert text == ("  line a\n  boom\n"
                    "tx run: FAILED after 1 min 15 s: local_cwd://tx/x (replica t/0 exited with code 2: boom); "
                    "logs: /logs/x\n")
    # relayed already: only the line
    assert summary("local_cwd://tx/x", st, 75.2, logs_shown=True).count("\n") == 1
    # no file URL: how to read them
    st = AppStatus(AppState.CANCELLED, ui_url=None)
    assert summary("slurm://tx/12", st, 3, logs_shown=False) == (
        "tx run: CANCELLED after 3.0 s: slurm://tx/12; logs: `tx log slurm://tx/12`\n")


@pytest.mark.parametrize("seconds,text", [(0.04, "0.0 s"), (59.94, "59.9 s"), (59.96, "1 min 00 s"),
                                          (61, "1 min 01 s"), (3599.4, "59 min 59 s"), (3599.6, "1 h 00 min"),
                                          (7380, "2 h 03 min"), (-0.5, "0.0 s"), (None, "-")])
def test_format_duration(seconds, text):
    assert format_duration(seconds) == text


def test_one_formatter_of_durations_for_a_sweeps_trials_tx_list_and_tx_run():
    """`tx status SWEEP`'s trial table and `tx ui`'s print a trial of 2.6 s as `tx list` and
    `tx run` print an app's duration (they once said `3s` and `2s`)."""
    from tx import durations
    from tx.cli import cmd_list
    from tx.runner.sweep import SweepStatus, TrialStatus

    assert format_duration is durations.format_duration and cmd_list.format_age is durations.format_age
    trials = [TrialStatus(0, {"x": 1}, AppState.SUCCEEDED, "local_cwd://tx/a", 1, 2.6),
              TrialStatus(1, {"x": 2}, AppState.SUCCEEDED, "local_cwd://tx/b", 1, 59.96),
              TrialStatus(2, {"x": 3}, AppState.UNSUBMITTED, None, 0, None)]
    text = SweepStatus("local_cwd://tx/sweep-x-0123abcd", trials).format()
    durations_at = text.splitlines()[1].index("DURATION")
    assert [r[durations_at:].strip() for r in text.splitlines()[2:]] == ["2.6 s", "1 min 00 s", "-"]
    assert (durations.format_age(59.9), durations.format_age(60), durations.format_age(None)) == ("59s", "1m", "-")


def test_is_sweep_id_is_the_form_of_the_ids_run_sweep_makes():
    from tx.runner.sweep import is_sweep_id

    assert is_sweep_id("sweep-train-0123abcd") and is_sweep_id("sweep-0123abcd")
    assert not any(is_sweep_id(x) for x in ("train-0123abcd", "sweep-train-0123abc", "sweep-Train-0123abcd",
                                            "sweep-train-0123abcg", "", None))


def test_newest_first_orders_by_time_then_numeric_id():
    from tx.cli.cmd_list import newest_first
    from tx.schedulers.api import ListAppResponse
    from tx.specs import AppState

    jobs = [ListAppResponse(i, AppState.SUCCEEDED) for i in ("9", "10", "2")]
    ordered, known = newest_first(jobs)
    assert [a.app_id for a in ordered] == ["10", "9", "2"] and known
    names = [ListAppResponse(i, AppState.RUNNING) for i in ("b-x", "a-y")]
    assert newest_first(names) == (names, False)  # no ages: the scheduler's order, unbounded


def test_live_line_says_state_elapsed_and_why_pending_and_clears_before_relayed_output(monkeypatch):
    from tx.cli import _live

    monkeypatch.setattr(_live, "QUIET_S", 0.0)
    term = io.BytesIO()
    relay = Relay(term, color=False)
    live = _live.LiveLine(term, relay.lock, "Ctrl-C cancels")
    relay.before_write = live.clear
    live.update(AppStatus(AppState.PENDING, msg="<NONE>"))
    assert live.text() == "tx run: PENDING 0 s  (Ctrl-C cancels)"
    live.update(AppStatus(AppState.PENDING, msg="Resources\nsecond line"))
    live.started -= 75
    assert live.text() == "tx run: PENDING 1 min 15 s: Resources  (Ctrl-C cancels)"
    live.update(AppStatus(AppState.PENDING, msg="PENDING: Dependency: it waits"))  # Slurm's, state first
    assert live.text() == "tx run: PENDING 1 min 15 s: Dependency: it waits  (Ctrl-C cancels)"
    live.update(AppStatus(AppState.PENDING, msg="Resources"))
    live.draw()
    relay.add("w/0", lambda: [b"a line\n"])
    relay.join()
    live.update(AppStatus(AppState.RUNNING, msg="running, no reason to give"))
    live.last_output = 0.0
    live.draw()
    live.stop()
    # drawn, erased before the relayed line, drawn again without a reason once running, erased at the end
    assert term.getvalue() == (b"\r\x1b[Ktx run: PENDING 1 min 15 s: Resources  (Ctrl-C cancels)"
                               b"\r\x1b[Kw/0 a line\n"
                               b"\r\x1b[Ktx run: RUNNING 1 min 15 s  (Ctrl-C cancels)"
                               b"\r\x1b[K")


def test_relay_mutes_after_a_signal():
    buf = io.BytesIO()
    relay = Relay(buf, color=False)
    relay.muted.set()
    relay.add("w/0", lambda: [b"Traceback (most recent call last):\n"])
    relay.join()
    assert buf.getvalue() == b""
