"""tx.testing.backends: skip-or-fail for missing backends, and service processes."""
import os
import sys

import pytest

from tx.testing.backends import (
    REQUIRE_BACKENDS_ENV,
    ServiceProcess,
    backend_unavailable,
    environ,
    free_port,
    port_open,
    script_backend,
    wait_for,
)


def test_missing_backend_skips_with_its_reason(monkeypatch):
    monkeypatch.delenv(REQUIRE_BACKENDS_ENV, raising=False)
    with pytest.raises(pytest.skip.Exception, match="podman cannot run here: not installed"):
        backend_unavailable("podman", "not installed")


def test_missing_backend_fails_when_backends_are_required(monkeypatch):
    monkeypatch.setenv(REQUIRE_BACKENDS_ENV, "1")
    with pytest.raises(pytest.fail.Exception, match="podman cannot run here: not installed.*must run"):
        backend_unavailable("podman", "not installed")


def test_service_process_listens_then_stops_with_its_group(tmp_path):
    port = free_port()
    assert not port_open(port)
    svc = ServiceProcess.start([sys.executable, "-m", "http.server", "-b", "127.0.0.1", str(port)],
                               log=tmp_path / "http.log")
    try:
        wait_for(lambda: port_open(port), timeout=30, what="http.server", service=svc)
        assert svc.alive()
    finally:
        svc.stop()
    assert not svc.alive() and not port_open(port)
    svc.stop()  # idempotent


def test_wait_for_reports_an_exited_service_with_its_log(tmp_path):
    svc = ServiceProcess.start([sys.executable, "-c", "print('boom: bad config'); raise SystemExit(3)"],
                               log=tmp_path / "x.log")
    with pytest.raises(RuntimeError, match=r"(?s)exited \(3\).*boom: bad config"):
        wait_for(lambda: False, timeout=30, what="x", service=svc)
    with pytest.raises(RuntimeError, match="timed out after 0.2 s waiting for nothing"):
        wait_for(lambda: False, timeout=0.2, what="nothing")


def test_environ_sets_unsets_and_restores_exactly(monkeypatch):
    monkeypatch.setenv("TX_T_KEEP", "old")
    monkeypatch.setenv("TX_T_GONE", "there")
    monkeypatch.delenv("TX_T_NEW", raising=False)
    with pytest.raises(RuntimeError):
        with environ({"TX_T_KEEP": "new", "TX_T_NEW": "1"}, unset=["TX_T_GONE"]):
            assert (os.environ["TX_T_KEEP"], os.environ["TX_T_NEW"]) == ("new", "1")
            assert "TX_T_GONE" not in os.environ
            raise RuntimeError("the block failed")
    assert (os.environ["TX_T_KEEP"], os.environ["TX_T_GONE"]) == ("old", "there")
    assert "TX_T_NEW" not in os.environ


def test_script_backend_yields_exports_and_always_runs_stop(tmp_path):
    start = tmp_path / "start.sh"
    start.write_text('echo "starting" >&2\necho "export TX_T_HOST=unix:///x TX_T_CONF=$BASE/c"\necho other\n'
                     '[ -z "$FAIL" ] || { echo "no engine" >&2; exit 3; }\n')
    stop = tmp_path / "stop.sh"
    stop.write_text('echo "$TX_T_HOST $PURGE" >> "$BASE/stopped"\n')
    env = {**os.environ, "BASE": str(tmp_path), "PURGE": "1"}
    with script_backend(["sh", str(start)], ["sh", str(stop)], env) as exports:
        assert exports == {"TX_T_HOST": "unix:///x", "TX_T_CONF": f"{tmp_path}/c"}
        assert not (tmp_path / "stopped").exists()
    assert (tmp_path / "stopped").read_text() == "unix:///x 1\n"
    with pytest.raises(RuntimeError, match=r"start.sh exited with 3:\nstarting\nno engine"):
        with script_backend(["sh", str(start)], ["sh", str(stop)], {**env, "FAIL": "1"}):
            pass  # pragma: no cover
    assert (tmp_path / "stopped").read_text() == "unix:///x 1\n 1\n"  # stopped, without the exports
