"""tx.plugins: isolated registries built from fake entry points (modules under tmp_path)."""
import os
import itertools
import sys
import textwrap

import pytest

from tx import hookimpl
from tx.plugins import (
    CORE_PLUGIN,
    PluginInfo,
    KINDS,
    PluginConflictError,
    PluginError,
    PluginRegistry,
    Registration,
    get_registry,
    import_object,
    set_registry,
)
from tx.version import PLUGIN_API_VERSION

_ids = itertools.count()


@pytest.fixture
def make_module(tmp_path, monkeypatch):
    """Write a module under tmp_path (on sys.path) and return its unique name."""
    monkeypatch.syspath_prepend(str(tmp_path))
    created = []

    def make(source: str, stem: str = "txtestplug") -> str:
        name = f"{stem}_{next(_ids)}_{tmp_path.name.replace('-', '_')}"
        (tmp_path / f"{name}.py").write_text(textwrap.dedent(source))
        created.append(name)
        return name

    yield make
    for name in created:
        sys.modules.pop(name, None)


@pytest.fixture(autouse=True)
def _no_env(monkeypatch):
    monkeypatch.delenv("TX_PLUGINS", raising=False)
    monkeypatch.delenv("TX_DISABLE_PLUGINS", raising=False)


SCHED = """
from tx import hookimpl

@hookimpl
def tx_register_schedulers(register):
    register({name!r}, {target!r}, description="test scheduler", requires={requires!r}, install={install!r})
"""


def sched_plugin(make_module, name="mysched", target="os.path:join", requires=(), install=""):
    return make_module(SCHED.format(name=name, target=target, requires=tuple(requires), install=install))


def ep(name, module, dist="tx-test", version="0.1"):
    return (name, module, dist, version)


# -- loading -------------------------------------------------------------------------------
def test_isolated_registry_has_only_builtins():
    reg = PluginRegistry(entry_points=[])
    assert list(reg.plugins) == [CORE_PLUGIN]
    assert reg.names("schedulers") == []
    assert "gpu.small" in reg.names("named_resources")
    assert reg.names("components") == [""]
    assert reg.get("workspaces", "dir").distribution == "tx-core"
    assert set(reg.registrations) == set(KINDS)


def test_no_builtins():
    reg = PluginRegistry(entry_points=[], builtins=False)
    assert reg.plugins == {} and reg.names("named_resources") == []


def test_plugin_from_entry_point(make_module):
    mod = sched_plugin(make_module)
    reg = PluginRegistry(entry_points=[ep("mine", mod, "tx-scheduler-mine", "1.2")])
    info = reg.plugins["mine"]
    assert info.error is None
    assert (info.module, info.distribution, info.version) == (mod, "tx-scheduler-mine", "1.2")
    assert info.registered == {"schedulers": ["mysched"]}
    r = reg.get("schedulers", "mysched")
    assert (r.kind, r.name, r.plugin, r.distribution, r.version, r.description) == (
        "schedulers", "mysched", "mine", "tx-scheduler-mine", "1.2", "test scheduler")
    assert reg.get("schedulers", "other") is None


def test_entry_point_with_attribute(make_module):
    mod = make_module("""
        from tx import hookimpl

        class Hooks:
            @staticmethod
            @hookimpl
            def tx_register_trackers(register):
                register("mytracker", "os.path:join")
        """)
    reg = PluginRegistry(entry_points=[ep("t", f"{mod}:Hooks")])
    assert reg.plugins["t"].error is None
    assert reg.names("trackers") == ["file", "mytracker"]  # tx-core's file tracker first


def test_broken_plugin_is_recorded_and_others_load(make_module):
    broken = make_module("import surely_not_installed_sdk_xyz\n")
    good = sched_plugin(make_module)
    reg = PluginRegistry(entry_points=[ep("broken", broken, "tx-broken", "0.3"), ep("good", good)])
    info = reg.plugins["broken"]
    assert info.error == "ModuleNotFoundError: No module named 'surely_not_installed_sdk_xyz'"
    assert (info.distribution, info.version) == ("tx-broken", "0.3")
    assert reg.plugins["good"].error is None
    assert reg.names("schedulers") == ["mysched"]


def test_entry_point_to_missing_module():
    reg = PluginRegistry(entry_points=[ep("ghost", "no_such_module_txtest")])
    assert reg.plugins["ghost"].error.startswith("ModuleNotFoundError")


def test_plugin_raising_at_import(make_module):
    mod = make_module("raise RuntimeError('boom at import')\n")
    reg = PluginRegistry(entry_points=[ep("bad", mod)])
    assert reg.plugins["bad"].error == "RuntimeError: boom at import"


def test_hook_that_raises_is_recorded(make_module):
    mod = make_module("""
        from tx import hookimpl

        @hookimpl
        def tx_register_schedulers(register):
            register("ok", "os.path:join")
            raise RuntimeError("half done")

        @hookimpl
        def tx_register_trackers(register):
            register("t", "os.path:join")
        """)
    reg = PluginRegistry(entry_points=[ep("p", mod)])
    assert reg.plugins["p"].error == "tx_register_schedulers failed: RuntimeError: half done"
    assert reg.names("schedulers") == ["ok"] and reg.names("trackers") == ["file", "t"]


def test_empty_name_is_an_error_of_the_plugin(make_module):
    mod = sched_plugin(make_module, name="")
    reg = PluginRegistry(entry_points=[ep("p", mod)])
    assert reg.plugins["p"].error == (
        "tx_register_schedulers failed: ValueError: schedulers names must be non-empty strings, got ''"
    )
    assert reg.names("schedulers") == []


def test_misspelt_hook_caught_by_check_pending(make_module):
    bad = make_module("""
        from tx import hookimpl

        @hookimpl
        def tx_register_scheduler(register):
            register("never", "os.path:join")
        """)
    good = sched_plugin(make_module)
    reg = PluginRegistry(entry_points=[ep("typo", bad), ep("good", good)])
    err = reg.plugins["typo"].error
    assert err.startswith("PluginValidationError: ") and "tx_register_scheduler" in err
    assert not reg.pm.has_plugin("typo")
    assert reg.names("schedulers") == ["mysched"]


def test_wrong_hook_argument_name(make_module):
    bad = make_module("""
        from tx import hookimpl

        @hookimpl
        def tx_register_schedulers(reg):
            reg("x", "os.path:join")
        """)
    reg = PluginRegistry(entry_points=[ep("bad", bad)])
    assert reg.plugins["bad"].error.startswith("PluginValidationError: ")
    assert "reg" in reg.plugins["bad"].error
    assert reg.names("schedulers") == []


def test_newer_plugin_api_is_refused(make_module):
    mod = make_module(SCHED.format(name="s", target="os:sep", requires=(), install="")
                      + f"\nTX_PLUGIN_API = {PLUGIN_API_VERSION + 1}\n")
    reg = PluginRegistry(entry_points=[ep("future", mod)])
    assert reg.plugins["future"].error.startswith(f"needs plugin API {PLUGIN_API_VERSION + 1}")
    assert "pip install -U tx-core" in reg.plugins["future"].error
    assert reg.names("schedulers") == []


def test_same_plugin_name_twice():
    reg = PluginRegistry(entry_points=[])
    with pytest.raises(PluginError, match="a plugin named 'tx-core' is already registered"):
        reg.add_plugin(object(), CORE_PLUGIN)


# -- conflicts -----------------------------------------------------------------------------
def test_two_plugins_one_name_is_a_conflict(make_module):
    a = sched_plugin(make_module, target="os.path:join")
    b = sched_plugin(make_module, target="os.path:split")
    c = sched_plugin(make_module, name="other")
    reg = PluginRegistry(entry_points=[
        ep("a", a, "tx-scheduler-a", "1.0"), ep("b", b, "tx-scheduler-b", "2.0"), ep("c", c)])
    assert reg.names("schedulers") == ["other", "mysched"]
    with pytest.raises(PluginConflictError) as ei:
        reg.get("schedulers", "mysched")
    msg = str(ei.value)
    assert msg == (
        "scheduler 'mysched' is registered by both tx-scheduler-a 1.0 (plugin 'a') and "
        "tx-scheduler-b 2.0 (plugin 'b'); uninstall one, or skip one with TX_DISABLE_PLUGINS=<plugin>"
    )
    assert reg.get("schedulers", "other") is not None  # unaffected


def test_three_way_conflict_names_all(make_module):
    mods = [sched_plugin(make_module) for _ in range(3)]
    reg = PluginRegistry(entry_points=[ep(f"p{i}", m, f"dist{i}") for i, m in enumerate(mods)])
    with pytest.raises(PluginConflictError, match="dist0 .* and dist1 .* and dist2"):
        reg.get("schedulers", "mysched")


def test_disabling_one_resolves_conflict(make_module, monkeypatch):
    a = sched_plugin(make_module)
    b = sched_plugin(make_module)
    monkeypatch.setenv("TX_DISABLE_PLUGINS", "b")
    reg = PluginRegistry(entry_points=[ep("a", a, "dist-a"), ep("b", b, "dist-b")])
    assert reg.get("schedulers", "mysched").distribution == "dist-a"
    assert "b" not in reg.plugins


# -- environment knobs ---------------------------------------------------------------------
def test_tx_plugins_loads_only_named(make_module, monkeypatch):
    a = sched_plugin(make_module, name="sa")
    b = sched_plugin(make_module, name="sb")
    c = sched_plugin(make_module, name="sc")
    monkeypatch.setenv("TX_PLUGINS", " a , c ")
    reg = PluginRegistry(entry_points=[ep("a", a), ep("b", b), ep("c", c)])
    assert set(reg.plugins) == {CORE_PLUGIN, "a", "c"}
    assert reg.names("schedulers") == ["sa", "sc"]
    assert b not in sys.modules  # not even imported


def test_tx_plugins_empty_loads_none(make_module, monkeypatch):
    a = sched_plugin(make_module)
    monkeypatch.setenv("TX_PLUGINS", "")
    reg = PluginRegistry(entry_points=[ep("a", a)])
    assert list(reg.plugins) == [CORE_PLUGIN]


def test_tx_disable_plugins(make_module, monkeypatch):
    a = sched_plugin(make_module, name="sa")
    b = sched_plugin(make_module, name="sb")
    monkeypatch.setenv("TX_DISABLE_PLUGINS", "a,zzz")
    reg = PluginRegistry(entry_points=[ep("a", a), ep("b", b)])
    assert reg.names("schedulers") == ["sb"]
    assert a not in sys.modules


def test_disable_wins_over_only(make_module, monkeypatch):
    a = sched_plugin(make_module)
    monkeypatch.setenv("TX_PLUGINS", "a")
    monkeypatch.setenv("TX_DISABLE_PLUGINS", "a")
    assert "a" not in PluginRegistry(entry_points=[ep("a", a)]).plugins


# -- lazy loading --------------------------------------------------------------------------
def test_dotted_path_imported_on_first_use(make_module):
    target = make_module("""
        LOADED = True

        def create_scheduler(session_name, **kwargs):
            return ("scheduler", session_name, kwargs)
        """, stem="txtestimpl")
    mod = sched_plugin(make_module, target=f"{target}:create_scheduler")
    reg = PluginRegistry(entry_points=[ep("p", mod)])
    assert target not in sys.modules
    r = reg.get("schedulers", "mysched")
    factory = r.load()
    assert target in sys.modules
    assert factory("sess", x=1) == ("scheduler", "sess", {"x": 1})
    assert r.load() is factory and r.target is factory  # cached


def test_object_target_returned_as_is():
    fn = lambda: 1  # noqa: E731
    r = Registration("trackers", "t", fn, "p", "d", "1")
    assert r.load() is fn


def test_unimportable_target_gives_helpful_error(make_module):
    mod = sched_plugin(make_module, target="no_such_sdk_txtest.scheduler:create",
                       install="pip install tx-scheduler-acme[sdk]")
    reg = PluginRegistry(entry_points=[ep("acme", mod, "tx-scheduler-acme", "0.9")])
    assert reg.plugins["acme"].error is None  # registering does not import the target
    with pytest.raises(PluginError) as ei:
        reg.get("schedulers", "mysched").load()
    assert str(ei.value) == (
        "scheduler 'mysched' from tx-scheduler-acme cannot be loaded: No module named "
        "'no_such_sdk_txtest'; fix: pip install tx-scheduler-acme[sdk]"
    )


def test_missing_attribute_defaults_to_installing_the_distribution():
    r = Registration("trackers", "t", "os.path:no_such_fn", "p", "tx-tracker-x", "1")
    with pytest.raises(PluginError, match=r"tracker 't' from tx-tracker-x cannot be loaded: 'os.path' has no "
                                          r"attribute 'no_such_fn'; fix: pip install tx-tracker-x"):
        r.load()


def test_import_object_forms():
    import os.path

    assert import_object("os.path:join") is os.path.join
    assert import_object("os.path.join") is os.path.join
    assert import_object("os:path.join") is os.path.join
    with pytest.raises(ImportError, match="'os' has no attribute 'nope'"):
        import_object("os:nope")
    with pytest.raises(ImportError):
        import_object("no_such_module_txtest:x")


def test_missing_requirements_does_not_import(make_module):
    sdk = make_module("raise RuntimeError('must not be imported')\n", stem="txtestsdk")
    r = Registration("schedulers", "s", "x:y", "p", "d", "1", requires=("json", sdk, "no_such_sdk_txtest"))
    assert r.missing_requirements() == ["no_such_sdk_txtest"]
    assert sdk not in sys.modules
    assert Registration("schedulers", "s", "x:y", "p", "d", "1").missing_requirements() == []


def test_requires_and_install_recorded(make_module):
    mod = sched_plugin(make_module, requires=["boto3_txtest_missing"], install="pip install tx-scheduler-aws-batch")
    r = PluginRegistry(entry_points=[ep("p", mod)]).get("schedulers", "mysched")
    assert r.requires == ("boto3_txtest_missing",) and r.install == "pip install tx-scheduler-aws-batch"
    assert r.missing_requirements() == ["boto3_txtest_missing"]


def test_help_is_an_alias_of_description(make_module):
    mod = make_module("""
        from tx import hookimpl

        @hookimpl
        def tx_register_commands(register):
            register("quota", "os.path:join", help="show quota")
        """)
    reg = PluginRegistry(entry_points=[ep("p", mod)])
    assert reg.get("commands", "quota").description == "show quota"


# -- events --------------------------------------------------------------------------------
def test_events_reach_every_hook_even_if_one_raises(make_module):
    bad = make_module("""
        from tx import hookimpl

        @hookimpl
        def tx_on_event(event):
            raise RuntimeError("listener broke")
        """)
    good = make_module("""
        from tx import hookimpl
        SEEN = []

        @hookimpl
        def tx_on_event(event):
            SEEN.append(event)
        """)
    reg = PluginRegistry(entry_points=[ep("bad", bad), ep("good", good)])
    assert reg.has_event_hooks
    reg.call_event("ev1")
    assert sys.modules[good].SEEN == ["ev1"]


def test_no_event_hooks():
    assert not PluginRegistry(entry_points=[]).has_event_hooks


# -- process-wide registry -----------------------------------------------------------------
def test_set_registry_and_get_registry():
    mine = PluginRegistry(entry_points=[])
    old = set_registry(mine)
    try:
        assert get_registry() is mine
        assert set_registry(None) is mine
        built = get_registry()
        assert built is not mine and get_registry() is built
    finally:
        set_registry(old)


# -- the typed register objects, pluggy calls, tracing -------------------------------------
def module_level_factory(session_name, **kwargs):  # registered as an object: kept as a dotted path
    return None


class TypedPlugin:
    seen = []

    @hookimpl
    def tx_register_schedulers(self, register):
        TypedPlugin.seen.append(type(register).__name__)
        register("typed-dotted", module_level_factory, description="by object")
        register("typed-lambda", lambda session_name: None)

    @hookimpl
    def tx_register_named_resources(self, register):
        TypedPlugin.seen.append(type(register).__name__)

    @hookimpl(hookwrapper=True)
    def tx_register_components(self, register):
        TypedPlugin.seen.append("wrapper-before")
        yield
        TypedPlugin.seen.append("wrapper-after")


def test_hooks_get_typed_register_objects_through_pluggy():
    from tx.plugins import NamedResourceRegister, SchedulerRegister

    TypedPlugin.seen = []
    reg = PluginRegistry(entry_points=[])
    info = reg.add_plugin(TypedPlugin(), "typed", "tx-typed", "1")
    assert info.error is None
    assert TypedPlugin.seen == [SchedulerRegister.__name__, NamedResourceRegister.__name__,
                                "wrapper-before", "wrapper-after"]
    assert reg.get("schedulers", "typed-dotted").target == f"{__name__}:module_level_factory"
    assert callable(reg.get("schedulers", "typed-lambda").target)
    # a snapshot of a plugin that registered an object without a dotted path re-runs it
    snap = reg._snapshot([("typed", "m", "tx-typed", "1")])
    (plugin,) = snap["plugins"]
    assert plugin["live"] is True
    assert [r[1] for r in plugin["registrations"]] == ["typed-dotted"]


def test_register_rejects_a_missing_factory_in_one_line():
    reg = PluginRegistry(entry_points=[], builtins=False)
    register = reg._register_callback("schedulers", PluginInfo("p", "m", "d", "1"))
    with pytest.raises(ValueError, match="^scheduler 'x': the factory is None$"):
        register("x", None)


def test_trace_plugins_prints_hook_calls(tmp_path):
    import subprocess
    import sys

    env = dict(os.environ, TX_TRACE_PLUGINS="1", XDG_CACHE_HOME=str(tmp_path))
    p = subprocess.run([sys.executable, "-c", "from tx.plugins import get_registry; get_registry()"],
                       env=env, capture_output=True, text=True, timeout=60)
    assert p.returncode == 0, p.stderr
    assert "tx_register_named_resources" in p.stderr and "tx_register_schedulers" in p.stderr, p.stderr


# -- install hints for tx's own plugins: package data -----------------------------------------
def test_install_hints_are_read_from_the_package_data_file():
    """The table lives in tx-core's data file ``tx/known_plugins.json`` (read on first use),
    with the hint texts the CLI prints."""
    import json
    from importlib import resources

    from tx import plugins

    raw = json.loads(resources.files("tx").joinpath("known_plugins.json").read_text())
    table = plugins.known_plugins()
    assert table == {k: v for k, v in raw.items() if k in plugins.KINDS}
    assert set(table) == {"schedulers", "workspaces", "trackers"}
    # each hint installs from where tx-core came from (plugins.pip_install; here a checkout)
    assert plugins.not_installed_hint("schedulers", "slurm") == plugins.pip_install("tx-scheduler-slurm")
    assert plugins.not_installed_hint("schedulers", "kubernetes_mcad") == plugins.pip_install("tx-scheduler-k8s")
    assert plugins.not_installed_hint("workspaces", "docker") == plugins.pip_install("tx-scheduler-docker")
    assert plugins.not_installed_hint("trackers", "mlflow") == plugins.pip_install("tx-tracker-mlflow")
    assert plugins.not_installed_hint("schedulers", "no_such") is None
    assert plugins.not_installed_hint("gizmos", "slurm") is None
    assert plugins.KNOWN_PLUGINS == table  # the old name still answers


def test_a_damaged_hint_table_gives_no_hint():
    from tx._install_hints import _parse_known_plugins

    assert _parse_known_plugins("{not json") == {} and _parse_known_plugins("[1, 2]") == {}
    assert _parse_known_plugins('{"schedulers": ["slurm"], "trackers": {"mlflow": 3, "x": "tx-x"}}') == {
        "trackers": {"x": "tx-x"}
    }


@pytest.mark.parametrize("plugins", [None, ""], ids=["installed plugins", "no plugin"])
def test_help_and_version_do_not_read_the_hint_file(tmp_path, plugins):
    """The hint file is read only where a name is missing: not by `tx --version` or
    `tx --help` (with or without installed schedulers)."""
    import subprocess

    code = (
        "import sys\n"
        "opened = []\n"
        "sys.addaudithook(lambda event, args: opened.append(str(args[0])) if event == 'open' else None)\n"
        "from tx.cli.main import main\n"
        "for argv in (['--version'], ['--help']):\n"
        "    try:\n"
        "        main(argv)\n"
        "    except SystemExit:\n"
        "        pass\n"
        "print('READ' if any(p.endswith('known_plugins.json') for p in opened) else 'NOT READ')\n"
    )
    env = dict(os.environ, XDG_CACHE_HOME=str(tmp_path / "cache"))
    env.pop("TX_PLUGINS", None)
    if plugins is not None:
        env["TX_PLUGINS"] = plugins
    for _ in range(2):  # without, then with the plugin cache
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                             cwd=tmp_path, timeout=60)
        assert out.returncode == 0, out.stderr
        assert out.stdout.strip().splitlines()[-1] == "NOT READ"
    if plugins == "":  # the check sees a read: a known scheduler that is not installed
        code = code.replace("(['--version'], ['--help'])", "(['run', '-s', 'kubernetes_mcad', 'utils.echo'],)")
        out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                             cwd=tmp_path, timeout=60)
        assert out.stdout.strip().splitlines()[-1] == "READ", out.stderr


def test_install_commands_follow_where_tx_core_came_from(tmp_path, monkeypatch):
    """A checkout: the plugin's directory (editable when tx-core is); a wheel: the plugin's
    wheel beside it; an index (or anything unknown): the distribution's name."""
    from tx import _install_hints as plugins  # where pip_install and _core_source live (tx.plugins re-exports)

    checkout = tmp_path / "clone"
    (checkout / "core").mkdir(parents=True)
    (checkout / "plugins" / "scheduler-slurm").mkdir(parents=True)
    (checkout / "plugins" / "scheduler-slurm" / "pyproject.toml").write_text(
        '[project]\nname = "tx-scheduler-slurm"\nversion = "0.1.0"\n')
    wheels = tmp_path / "dist"
    wheels.mkdir()
    (wheels / "tx_scheduler_slurm-0.1.0-py3-none-any.whl").write_bytes(b"")
    monkeypatch.chdir(tmp_path)
    cases = [
        (("dir", str(checkout / "core"), False), "pip install ./clone/plugins/scheduler-slurm"),
        (("dir", str(checkout / "core"), True), "pip install -e ./clone/plugins/scheduler-slurm"),
        (("wheel", str(wheels / "tx_core-0.1.0-py3-none-any.whl"), False),
         "pip install ./dist/tx_scheduler_slurm-0.1.0-py3-none-any.whl"),
        (None, "pip install tx-scheduler-slurm"),
    ]
    for source, want in cases:
        monkeypatch.setattr(plugins, "_core_source", lambda source=source: source)
        plugins._located.cache_clear()
        assert plugins.pip_install("tx-scheduler-slurm") == want
    # a distribution the checkout does not have: its name
    monkeypatch.setattr(plugins, "_core_source", lambda: ("dir", str(checkout / "core"), False))
    plugins._located.cache_clear()
    assert plugins.pip_install("tx-scheduler-nosuch") == "pip install tx-scheduler-nosuch"
    # where the plugin is is found once; how it is shown follows the current directory (a
    # hint cached with the first directory's relative path was wrong after a chdir: CI c14)
    plugins._located.cache_clear()
    assert plugins.pip_install("tx-scheduler-slurm") == "pip install ./clone/plugins/scheduler-slurm"
    monkeypatch.chdir(checkout)
    assert plugins.pip_install("tx-scheduler-slurm") == "pip install ./plugins/scheduler-slurm"
    monkeypatch.chdir(wheels)
    assert plugins.pip_install("tx-scheduler-slurm") == f"pip install {checkout / 'plugins' / 'scheduler-slurm'}"
    plugins._located.cache_clear()
