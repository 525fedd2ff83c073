"""tx.components.system.finder: built-in, registered-namespace, file and module components."""
import sys
import textwrap

import pytest

from tx import hookimpl
from tx.components import dist, utils
from tx.plugins import PluginRegistry, set_registry
from tx.components.system import finder
from tx.components.system.builders import materialize_appdef
from tx.components.system.finder import (
    Component,
    ComponentNotFoundException,
    ComponentValidationException,
    get_builtin_source,
    get_component,
    get_components,
)

BUILTINS = {
    "utils.echo", "utils.touch", "utils.sh", "utils.python", "utils.binary", "utils.copy", "utils.booth",
    "dist.ddp", "dist.spmd", "serve.torchserve", "metrics.tensorboard",
}


def write(path, text):
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text))
    return path


@pytest.fixture
def isolated_registry():
    """A registry without installed plugins (tx-core's built-ins only)."""
    reg = PluginRegistry(entry_points=[])
    old = set_registry(reg)
    try:
        yield reg
    finally:
        set_registry(old)


# -- built-ins ------------------------------------------------------------------------
def test_builtins_listed(isolated_registry):
    comps = get_components()
    assert set(comps) == BUILTINS
    assert list(comps) == sorted(comps)
    echo = comps["utils.echo"]
    assert isinstance(echo, Component)
    assert (echo.fn, echo.fn_name, echo.validation_errors) == (utils.echo, "echo", [])
    assert echo.description.startswith("Echoes a message to stdout")
    assert (echo.source, echo.distribution) == ("tx.components.utils", "tx-core")
    assert get_component("dist.ddp").fn is dist.ddp
    assert get_components() is not comps and get_components() == comps


def test_not_found_suggests(isolated_registry):
    with pytest.raises(ComponentNotFoundException) as info:
        get_component("utils.ech")
    msg = str(info.value)
    assert msg.startswith("component 'utils.ech' not found (did you mean utils.echo") and "?;" not in msg
    assert "tx builtins" in msg and "\n" not in msg
    with pytest.raises(ComponentNotFoundException, match="a file component is named path/to/file.py:FUNCTION"):
        get_component("train.py")


def test_builtin_source_runs_standalone(isolated_registry):
    src = get_builtin_source("utils.echo")
    assert "import tx.specs as specs" in src and "def _small()" in src and "def echo(" in src
    assert "def touch(" not in src
    ns = {}
    exec(compile(src, "<echo>", "exec"), ns)
    assert ns["echo"](msg="x").roles[0].args == ["x"]

    src = get_builtin_source("dist.ddp")
    assert "TORCH_DEBUG_FLAGS" in src and "class _Unquoted" in src and "def spmd(" not in src
    ns = {}
    exec(compile(src, "<ddp>", "exec"), ns)
    app = ns["ddp"](script="t.py", j="2x1")
    assert app.roles[0].entrypoint == "bash"


# -- file components --------------------------------------------------------------------
COMPONENT_FILE = '''
import os

import tx.specs as specs
from helpers import IMAGE, greeting


def hello(name: str = "world", n: int = 1) -> specs.AppDef:
    """Says hello.

    Args:
        name: who to greet
        n: replicas
    """
    here = os.path.dirname(__file__)
    return specs.AppDef(name="hello", roles=[specs.Role(
        name="hello", image=IMAGE, entrypoint="echo", args=[greeting(name), here], num_replicas=n)])


def invalid(name) -> specs.AppDef:
    """Not annotated.

    Args:
        name: who
    """
    return specs.AppDef(name="x")
'''


def test_file_component_with_sibling_import(tmp_path):
    write(tmp_path / "a" / "helpers.py", "IMAGE = 'img-a'\ndef greeting(n):\n    return 'hello ' + n\n")
    path = write(tmp_path / "a" / "comp.py", COMPONENT_FILE)
    comp = get_component(f"{path}:hello")
    assert comp.name == f"{path}:hello" and comp.fn_name == "hello" and comp.source == str(path)
    assert comp.description == "Says hello."
    app = materialize_appdef(comp.fn, ["--name", "you", "--n", "2"], name=comp.name)
    (role,) = app.roles
    assert role.args == ["hello you", str(tmp_path / "a")] and role.image == "img-a" and role.num_replicas == 2
    module = sys.modules[comp.fn.__module__]
    assert module.__file__ == str(path) and comp.fn.__module__.startswith("_tx_component_comp_")


def test_file_component_with_postponed_annotations(tmp_path):
    path = write(tmp_path / "future.py", """
        from __future__ import annotations

        from typing import Optional

        import tx.specs as specs


        def f(n: Optional[int] = None, tags: list[str] | None = None) -> specs.AppDef:
            \"\"\"Future annotations.

            Args:
                n: n
                tags: tags
            \"\"\"
            return specs.AppDef(name="f", metadata={"n": str(n), "tags": ",".join(tags or [])})
        """)
    comp = get_component(f"{path}:f")
    app = materialize_appdef(comp.fn, ["--n", "3", "--tags", "a,b"])
    assert app.metadata == {"n": "3", "tags": "a,b"}


def test_file_components_with_same_name_do_not_collide(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    write(tmp_path / "x" / "comp.py", "import tx.specs as specs\ndef f() -> specs.AppDef:\n    return specs.AppDef(name='x')\n")
    write(tmp_path / "y" / "comp.py", "import tx.specs as specs\ndef f() -> specs.AppDef:\n    return specs.AppDef(name='y')\n")
    fx = get_component("x/comp.py:f").fn
    fy = get_component("y/comp.py:f").fn
    assert fx().name == "x" and fy().name == "y"
    assert fx.__module__ != fy.__module__


def test_file_component_reloads_when_changed(tmp_path):
    path = tmp_path / "c.py"
    path.write_text("import tx.specs as specs\ndef f() -> specs.AppDef:\n    return specs.AppDef(name='one')\n")
    assert get_component(f"{path}:f").fn().name == "one"
    path.write_text("import tx.specs as specs\ndef f() -> specs.AppDef:\n    return specs.AppDef(name='two-2')\n")
    assert get_component(f"{path}:f").fn().name == "two-2"


def test_file_component_errors(tmp_path):
    write(tmp_path / "helpers.py", "IMAGE = 'i'\ndef greeting(n):\n    return n\n")
    path = write(tmp_path / "comp.py", COMPONENT_FILE)
    with pytest.raises(ComponentNotFoundException, match=r"has no function 'helo'; did you mean hello\?"):
        get_component(f"{path}:helo")
    with pytest.raises(ComponentNotFoundException, match="no such file"):
        get_component(f"{tmp_path}/missing.py:f")
    with pytest.raises(ComponentValidationException) as info:
        get_component(f"{path}:invalid")
    assert str(info.value) == (
        f"component {path}:invalid is invalid: missing type annotation for argument 'name' in function "
        "'invalid' (line 20)"
    )
    bad = write(tmp_path / "bad.py", "def f(:\n")
    with pytest.raises(ComponentValidationException, match="syntax error"):
        get_component(f"{bad}:f")
    boom = write(tmp_path / "boom.py", "import tx.specs as specs\nraise RuntimeError('boom\\nline2')\n"
                 "def f() -> specs.AppDef:\n    return specs.AppDef(name='x')\n")
    with pytest.raises(ComponentValidationException, match=r"RuntimeError: boom line2$"):
        get_component(f"{boom}:f")
    exits = write(tmp_path / "exits.py", "import sys\nimport tx.specs as specs\nsys.exit(3)\n"
                  "def f() -> specs.AppDef:\n    return specs.AppDef(name='x')\n")
    with pytest.raises(ComponentValidationException, match="SystemExit"):
        get_component(f"{exits}:f")
    with pytest.raises(ComponentNotFoundException, match="malformed component name"):
        get_component(f"{path}:")


# -- pkg.module:fn ------------------------------------------------------------------------
def test_module_component(tmp_path, monkeypatch):
    write(tmp_path / "mypkg_tx_test" / "__init__.py", "")
    write(tmp_path / "mypkg_tx_test" / "helpers.py", "IMAGE = 'img-pkg'\ndef greeting(n):\n    return 'hi ' + n\n")
    write(tmp_path / "mypkg_tx_test" / "comps.py", COMPONENT_FILE.replace("from helpers", "from mypkg_tx_test.helpers"))
    monkeypatch.syspath_prepend(str(tmp_path))
    comp = get_component("mypkg_tx_test.comps:hello")
    assert comp.source == str(tmp_path / "mypkg_tx_test" / "comps.py")
    assert comp.fn(name="x").roles[0].args[0] == "hi x"
    with pytest.raises(ComponentValidationException, match="missing type annotation"):
        get_component("mypkg_tx_test.comps:invalid")
    with pytest.raises(ComponentNotFoundException, match="has no function 'nope'; it defines hello, invalid"):
        get_component("mypkg_tx_test.comps:nope")
    with pytest.raises(ComponentNotFoundException, match="no module named 'no_such_pkg_xyz'"):
        get_component("no_such_pkg_xyz.mod:f")


def test_module_component_builtin_path(isolated_registry):
    assert get_component("tx.components.utils:echo").fn is utils.echo


# -- registered namespaces ------------------------------------------------------------------
class _ComponentsPlugin:
    def __init__(self, namespaces):
        self.namespaces = namespaces

    @hookimpl
    def tx_register_components(self, register):
        for ns, module in self.namespaces.items():
            register(ns, module)


VALID = '''
import tx.specs as specs


def {name}(msg: str = "x") -> specs.AppDef:
    """{name} component.

    Args:
        msg: a message
    """
    return specs.AppDef(name="{name}")
'''


@pytest.fixture
def plugin_package(tmp_path, monkeypatch):
    root = tmp_path / "txtest_plugin_comps"
    write(root / "__init__.py", "")
    write(root / "train.py", VALID.format(name="trainer") + "\ndef bad(x) -> specs.AppDef:\n    '''Bad.'''\n")
    write(root / "sub" / "__init__.py", "")
    write(root / "sub" / "deep.py", VALID.format(name="deeper"))
    write(root / "_private.py", VALID.format(name="hidden"))
    write(root / "broken.py", "import no_such_module_for_tx_tests\n")
    write(tmp_path / "txtest_dup" / "__init__.py", "")
    write(tmp_path / "txtest_dup" / "dupmod.py", VALID.format(name="echo"))
    monkeypatch.syspath_prepend(str(tmp_path))
    return root


def test_registered_namespace(isolated_registry, plugin_package):
    isolated_registry.add_plugin(_ComponentsPlugin({"foo": "txtest_plugin_comps"}), "test", "txtest-dist", "1.0")
    comps = get_components()
    assert BUILTINS <= set(comps)
    assert {"foo.train.trainer", "foo.sub.deep.deeper"} <= set(comps)
    assert not any("hidden" in n or "bad" in n or "broken" in n for n in comps)
    comp = comps["foo.train.trainer"]
    assert (comp.distribution, comp.source) == ("txtest-dist", "txtest_plugin_comps.train")
    assert materialize_appdef(comp.fn, ["--msg", "hi"]).name == "trainer"
    with pytest.raises(ComponentValidationException, match="missing type annotation for argument 'x'"):
        get_component("foo.train.bad")
    with pytest.raises(ComponentNotFoundException) as info:
        get_component("foo.broken.x")
    assert "cannot import txtest_plugin_comps.broken: ModuleNotFoundError" in str(info.value)


def test_registered_namespace_at_top_level_and_duplicates(isolated_registry, plugin_package):
    isolated_registry.add_plugin(_ComponentsPlugin({"utils": "txtest_dup"}), "test", "txtest-dist", "1.0")
    comps = get_components()
    assert "utils.dupmod.echo" in comps and "utils.echo" in comps  # namespaces prefix their names

    reg = PluginRegistry(entry_points=[])
    set_registry(reg)
    reg.add_plugin(_ComponentsPlugin({"": "txtest_dup"}), "test2", "dup-dist", "2.0")
    assert "dupmod.echo" in get_components()


def test_duplicate_names_are_refused(isolated_registry, plugin_package):
    write(plugin_package.parent / "txtest_dup2" / "__init__.py", "")
    write(plugin_package.parent / "txtest_dup2" / "utils.py", VALID.format(name="echo"))
    isolated_registry.add_plugin(_ComponentsPlugin({"": "txtest_dup2"}), "test", "dup-dist", "1.0")
    assert "utils.echo" not in get_components() and "utils.touch" in get_components()
    with pytest.raises(ComponentValidationException) as info:
        get_component("utils.echo")
    assert str(info.value).startswith(
        "component utils.echo is defined by both tx.components.utils (tx-core) and txtest_dup2.utils (dup-dist)"
    )


def test_broken_namespace_does_not_hide_builtins(isolated_registry):
    isolated_registry.add_plugin(_ComponentsPlugin({"nope": "no_such_namespace_module_xyz"}), "test", "d", "1")
    assert BUILTINS <= set(get_components())
    with pytest.raises(ComponentNotFoundException, match="no_such_namespace_module_xyz"):
        get_component("nope.x")


def test_cache_follows_registry(isolated_registry, plugin_package):
    first = get_components()
    assert "foo.train.trainer" not in first
    reg = PluginRegistry(entry_points=[])
    reg.add_plugin(_ComponentsPlugin({"foo": "txtest_plugin_comps"}), "test", "txtest-dist", "1.0")
    set_registry(reg)
    assert "foo.train.trainer" in get_components()
    assert finder._index is not None and finder._index.registry is reg
