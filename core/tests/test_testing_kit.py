"""tx.testing: the tx_registry fixture, register_plugin, and the pytest plugin itself."""
import types

import pytest

from tx import hookimpl
from tx.plugins import PluginConflictError, PluginError, PluginRegistry, get_registry, set_registry
from tx.specs import Resource
from tx.testing import (  # noqa: F401 - tx_registry is a fixture
    is_subsequence, isolated_registry, recording_workspace, register_plugin, tx_registry,
)
from tx.testing._conformance import _wrong_value
from tx.specs.runopts import runopts

pytest_plugins = ["pytester"]


class KitPlugin:
    @hookimpl
    def tx_register_schedulers(register):  # noqa: N805 - pluggy calls it unbound
        register("kit-sched", "kit_pkg.scheduler:create", description="a test scheduler")

    @hookimpl
    def tx_register_named_resources(register):  # noqa: N805
        register("kit.tiny", lambda: Resource(cpu=1, gpu=0, memMB=64))


class RivalPlugin:
    @hookimpl
    def tx_register_schedulers(register):  # noqa: N805
        register("kit-sched", "rival_pkg.scheduler:create")


class MisspeltPlugin:
    @hookimpl
    def tx_register_schedulerz(register):  # noqa: N805 - the typo is the point
        register("never", "x:y")


def test_tx_registry_is_isolated(tx_registry: PluginRegistry) -> None:
    assert get_registry() is tx_registry
    assert list(tx_registry.plugins) == ["tx-core"]
    assert tx_registry.names("schedulers") == []
    assert "gpu.small" in tx_registry.names("named_resources")


def test_isolated_registry_restores_the_previous_one() -> None:
    outer = PluginRegistry(entry_points=[], builtins=False)
    previous = set_registry(outer)
    try:
        with isolated_registry() as inner:
            assert get_registry() is inner and inner is not outer
        assert get_registry() is outer
    finally:
        set_registry(previous)


def test_register_plugin_for_the_duration(tx_registry: PluginRegistry) -> None:
    with register_plugin(KitPlugin, name="kit") as info:
        assert info.error is None
        assert info.registered == {"schedulers": ["kit-sched"], "named_resources": ["kit.tiny"]}
        reg = tx_registry.get("schedulers", "kit-sched")
        assert (reg.target, reg.distribution, reg.plugin, reg.description) == (
            "kit_pkg.scheduler:create", "test", "kit", "a test scheduler",
        )
        assert tx_registry.get("named_resources", "kit.tiny").load()() == Resource(cpu=1, gpu=0, memMB=64)
    assert "kit-sched" not in tx_registry.names("schedulers")
    assert "kit.tiny" not in tx_registry.names("named_resources")
    assert "kit" not in tx_registry.plugins
    assert tx_registry.pm.get_plugin("kit") is None
    with register_plugin(KitPlugin, name="kit"):  # the name is free again
        pass


def test_register_a_module_object(tx_registry: PluginRegistry) -> None:
    mod = types.ModuleType("my_plugin_hooks")

    @hookimpl
    def tx_register_schedulers(register):  # type: ignore[no-untyped-def]
        register("mod-sched", "my_pkg:create")

    mod.tx_register_schedulers = tx_register_schedulers
    with register_plugin(mod, name="mod", distribution="my-dist", version="1.2"):
        reg = tx_registry.get("schedulers", "mod-sched")
        assert (reg.distribution, reg.version) == ("my-dist", "1.2")
    assert tx_registry.names("schedulers") == []


def test_nested_plugins_conflict_then_unwind(tx_registry: PluginRegistry) -> None:
    with register_plugin(KitPlugin, name="kit"):
        with register_plugin(RivalPlugin, name="rival"):
            with pytest.raises(PluginConflictError, match="both test 0 \\(plugin 'kit'\\) and test 0 \\(plugin 'rival'\\)"):
                tx_registry.get("schedulers", "kit-sched")
        assert tx_registry.get("schedulers", "kit-sched").plugin == "kit"
    assert tx_registry.get("schedulers", "kit-sched") is None


def test_broken_plugin(tx_registry: PluginRegistry) -> None:
    with pytest.raises(PluginError, match="plugin 'typo' failed to register: .*tx_register_schedulerz"):
        with register_plugin(MisspeltPlugin, name="typo"):
            pass  # pragma: no cover
    assert "typo" not in tx_registry.plugins
    with register_plugin(MisspeltPlugin, name="typo", strict=False) as info:
        assert "tx_register_schedulerz" in info.error
    with register_plugin(KitPlugin, name="kit"):
        with pytest.raises(PluginError, match="already registered"):
            with register_plugin(RivalPlugin, name="kit"):
                pass  # pragma: no cover
        assert tx_registry.get("schedulers", "kit-sched").plugin == "kit"


def test_kit_helpers() -> None:
    assert is_subsequence(["a", "c"], ["a", "b", "c"])
    assert not is_subsequence(["c", "a"], ["a", "b", "c"])
    opts = runopts()
    opts.add("s", type_=str, help="")
    opts.add("b", type_=bool, help="")
    opts.add("i", type_=int, help="")
    opts.add("l", type_=list, help="")
    opts.add("d", type_=dict, help="")
    for key, opt in opts:
        from tx.specs import InvalidRunConfigException

        with pytest.raises(InvalidRunConfigException):
            opts.resolve({key: _wrong_value(opt)})


def test_pytest_plugin_and_conformance_base(pytester: pytest.Pytester) -> None:
    pytester.makeconftest('pytest_plugins = ["tx.testing"]')
    pytester.makepyfile(test_kit_usage='''
        from tx.plugins import get_registry
        from tx.testing import SchedulerConformance, register_plugin

        class Hooks:
            from tx import hookimpl

            @hookimpl
            def tx_register_schedulers(register):
                register("s", "p:f")

        def test_fixture(tx_registry):
            assert get_registry() is tx_registry
            with register_plugin(Hooks):
                assert tx_registry.names("schedulers") == ["s"]

        class TestForgotScheduler(SchedulerConformance):
            pass
    ''')
    result = pytester.runpytest_inprocess("-p", "no:cacheprovider", "-k", "fixture or describe_unknown")
    result.assert_outcomes(passed=1, errors=1)
    result.stdout.fnmatch_lines(["*TestForgotScheduler must define a 'scheduler' fixture*"])


def test_recording_workspace_records_builds_for_the_block(tx_registry: PluginRegistry) -> None:
    from tx.specs import Role
    from tx.workspace import get_workspace

    role = Role("w", image="base:1", entrypoint="true")
    with recording_workspace("docker") as calls:
        built = get_workspace("docker").build(role, "/ws", {"image_repo": "reg/x", "other": 1})
    assert built.image == "reg/x:ws" and role.image == "base:1"
    assert calls == [("/ws", {"image_repo": "reg/x", "other": 1})]
    assert "docker" not in tx_registry.names("workspaces")  # unregistered after the block


def test_the_kits_fresh_process_imports_what_tx_status_imports(tmp_path) -> None:
    """The kit's fresh process (``fresh_call``) runs tx.testing._fresh from its file: it
    answers (here: local_cwd knows no such app) without importing the tx.testing package
    or pytest, which cost each call 1.6 s on a loaded machine."""
    import json
    import subprocess
    import sys

    from tx.testing._conformance_kit import _FRESH_MAIN

    p = subprocess.run([sys.executable, "-X", "importtime", "-c", _FRESH_MAIN, "describe", "local_cwd", "tx",
                        "tx-kit-no-such-app"], capture_output=True, text=True, timeout=120, cwd=str(tmp_path))
    assert p.returncode == 0, p.stderr[-3000:]
    assert json.loads(p.stdout.strip().splitlines()[-1]) == {"found": False}
    imported = {ln.split("|")[-1].strip() for ln in p.stderr.splitlines() if ln.startswith("import time:")}
    assert "tx.plugins" in imported
    assert not {m for m in imported if m == "pytest" or m.startswith(("tx.testing", "_pytest"))}, sorted(
        m for m in imported if "pytest" in m or m.startswith("tx.testing"))
