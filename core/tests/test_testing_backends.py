"""tx.testing.backends: skip-or-fail for missing backends, and service processes."""
import os
import sys

import pytest

from tx.testing.backends import (
    REQUIRE_BACKENDS_ENV,
    UNAVAILABLE_ENV,
    ServiceProcess,
    backend_unavailable,
    environ,
    free_port,
    port_open,
    require_module,
    script_backend,
    wait_for,
)

pytest_plugins = ["pytester"]


def test_missing_backend_skips_with_its_reason(monkeypatch):
    monkeypatch.delenv(REQUIRE_BACKENDS_ENV, raising=False)
    with pytest.raises(pytest.skip.Exception, match="podman cannot run here: not installed"):
        backend_unavailable("podman", "not installed")


def test_missing_backend_fails_when_backends_are_required(monkeypatch):
    monkeypatch.setenv(REQUIRE_BACKENDS_ENV, "1")
    with pytest.raises(pytest.fail.Exception, match="podman cannot run here: not installed.*must run"):
        backend_unavailable("podman", "not installed")


def test_a_backend_the_machine_declares_unavailable_skips_even_when_required(monkeypatch):
    """``TX_TEST_UNAVAILABLE`` (set by ``.ci/run`` for what the machine cannot run) names
    backends that skip, saying so, under ``TX_TEST_REQUIRE_BACKENDS=1``; the others still fail."""
    monkeypatch.setenv(REQUIRE_BACKENDS_ENV, "1")
    monkeypatch.setenv(UNAVAILABLE_ENV, "unshare, tmux")
    with pytest.raises(pytest.skip.Exception, match=f"unshare cannot run here: refused .{UNAVAILABLE_ENV} names unshare"):
        backend_unavailable("unshare", "refused")
    with pytest.raises(pytest.fail.Exception, match="podman cannot run here"):
        backend_unavailable("podman", "not installed")


def test_require_module_returns_an_installed_module(monkeypatch):
    monkeypatch.setenv(REQUIRE_BACKENDS_ENV, "1")
    assert require_module("json", "never missing").dumps([1]) == "[1]"
    assert require_module("os.path", "never missing") is os.path


def test_require_module_skips_a_missing_module_with_its_reason(monkeypatch):
    monkeypatch.delenv(REQUIRE_BACKENDS_ENV, raising=False)
    with pytest.raises(pytest.skip.Exception, match="module tx_no_such_mod is not installed: pip install it"):
        require_module("tx_no_such_mod", "pip install it")
    with pytest.raises(pytest.skip.Exception, match="module tx_no_such_pkg.sub is not installed"):
        require_module("tx_no_such_pkg.sub", "pip install it")


def test_require_module_fails_a_missing_module_when_backends_are_required(monkeypatch):
    monkeypatch.setenv(REQUIRE_BACKENDS_ENV, "1")
    with pytest.raises(pytest.fail.Exception, match="tx_no_such_mod is not installed: pip install it.*must be installed"):
        require_module("tx_no_such_mod", "pip install it")


def test_require_module_raises_for_an_installed_module_that_breaks(monkeypatch, tmp_path):
    """A module that is there but fails to import is a failure, never a skip."""
    monkeypatch.delenv(REQUIRE_BACKENDS_ENV, raising=False)
    (tmp_path / "tx_broken_mod.py").write_text("import tx_no_such_dependency\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ModuleNotFoundError, match="tx_no_such_dependency"):
        require_module("tx_broken_mod", "pip install it")


def test_require_module_skips_a_whole_module_at_module_level(pytester, monkeypatch):
    pytester.makepyfile(test_needs_mod="""
        from tx.testing.backends import require_module
        require_module("tx_no_such_mod", "pip install it")

        def test_never_runs():
            assert False
    """)
    monkeypatch.delenv(REQUIRE_BACKENDS_ENV, raising=False)
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-rs")
    result.assert_outcomes(skipped=1)
    result.stdout.fnmatch_lines(["*module tx_no_such_mod is not installed: pip install it*"])
    monkeypatch.setenv(REQUIRE_BACKENDS_ENV, "1")
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider")
    result.assert_outcomes(errors=1)
    result.stdout.fnmatch_lines(["*module tx_no_such_mod is not installed*must be installed*"])


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


def test_a_port_another_process_took_is_not_the_services_and_the_next_port_is_tried(tmp_path, monkeypatch):
    """CI (stop 46): moto's first request was reset: free_port's port had been taken by
    another worker's process before moto bound it, and port_open answered for that one."""
    import socket

    import tx.testing.backends as backends

    squatter = socket.socket()
    squatter.bind(("127.0.0.1", 0))
    squatter.listen()
    taken = squatter.getsockname()[1]
    ports = iter([taken])
    real = backends.free_port
    monkeypatch.setattr(backends, "free_port", lambda: next(ports, None) or real())
    argv = lambda port: [sys.executable, "-m", "http.server", "-b", "127.0.0.1", str(port)]  # noqa: E731
    try:
        port, svc = ServiceProcess.start_listening(argv, log=tmp_path / "http.log", what="http.server")
        try:
            assert port != taken and svc.listens(port)
            assert port_open(taken) and not svc.listens(taken)  # open, but not this service's
            assert "in use" in (tmp_path / "http.log").read_text()  # the first start could not bind
        finally:
            svc.stop()
        ports = iter([taken] * 3)
        with pytest.raises(RuntimeError, match=r"http.server to listen on \d+: the process exited"):
            ServiceProcess.start_listening(argv, log=tmp_path / "http2.log", what="http.server")
    finally:
        squatter.close()


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


def test_free_port_is_below_the_ephemeral_range_and_each_worker_has_its_own(monkeypatch):
    """Ports the OS gives to outgoing connections are never handed out (one took a
    rendezvous port before torchrun bound it); workers' ports never meet; a port in use is
    passed over."""
    import socket

    from tx.testing import backends

    top = backends._ephemeral_from()
    seen = {}
    for worker in ("gw0", "gw1", "gw2"):
        monkeypatch.setenv("PYTEST_XDIST_WORKER", worker)
        monkeypatch.setenv("PYTEST_XDIST_WORKER_COUNT", "3")
        seen[worker] = [backends.free_port() for _ in range(40)]
        assert all(backends.PORTS_FROM <= p < top for p in seen[worker])
        assert len(set(seen[worker])) == 40
    assert not set(seen["gw0"]) & set(seen["gw1"]) and not set(seen["gw1"]) & set(seen["gw2"])
    assert max(seen["gw0"]) < min(seen["gw1"]) and max(seen["gw1"]) < min(seen["gw2"])
    # the next port of gw2's turn, held by someone else: passed over
    monkeypatch.setenv("PYTEST_XDIST_WORKER", "gw2")
    size = (top - backends.PORTS_FROM) // 3
    start = backends.PORTS_FROM + 2 * size
    held = start + backends._port_next[(start, size)]
    after = held + 1 if held + 1 < start + size else start
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", held))
        s.listen()
        assert backends.free_port() == after
