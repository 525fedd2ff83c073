"""docs/hooks.md documents every hook in tx.hookspecs (datasette's pattern)."""
import inspect
import re
from pathlib import Path

import pytest

from tx import hookspecs
from tx.plugins import PluginInfo, PluginRegistry

DOC = Path(__file__).resolve().parents[2] / "docs" / "hooks.md"


def _doc() -> str:
    return DOC.read_text(encoding="utf-8")


def _spec_functions():
    return sorted(
        name for name, obj in vars(hookspecs).items()
        if inspect.isfunction(obj) and hasattr(obj, f"{hookspecs.PROJECT}_spec")
    )


def test_hook_names_match_the_hookspecs():
    assert sorted(hookspecs.HOOK_NAMES) == _spec_functions()
    assert len(set(hookspecs.HOOK_NAMES)) == len(hookspecs.HOOK_NAMES)


@pytest.mark.parametrize("hook", sorted(set(hookspecs.HOOK_NAMES) | set(_spec_functions())))
def test_hook_is_documented(hook):
    headings = re.findall(r"^### (\w+)\s*$", _doc(), re.MULTILINE)
    assert hook in headings, f"{hook} has no '### {hook}' section in {DOC}"


def test_no_documented_hook_that_does_not_exist():
    headings = re.findall(r"^### (\w+)\s*$", _doc(), re.MULTILINE)
    assert sorted(headings) == sorted(hookspecs.HOOK_NAMES)


@pytest.mark.parametrize("hook", hookspecs.HOOK_NAMES)
def test_hook_arguments_documented(hook):
    section = _doc().split(f"### {hook}", 1)[1].split("\n### ", 1)[0]
    for arg in inspect.signature(getattr(hookspecs, hook)).parameters:
        assert f"`{arg}`" in section or f"{hook}({arg})" in section, f"{hook}: argument {arg!r} undocumented"
    assert "@hookimpl" in section, f"{hook}: no example"


def test_register_signature_matches_the_implementation():
    reg = PluginRegistry(entry_points=[], builtins=False)
    register = reg._register_callback("schedulers", PluginInfo("p", "m", "d", "1"))
    params = inspect.signature(register).parameters
    doc = _doc()
    assert 'register(name, target, *, description="", requires=(), install="")' in doc
    for name, p in params.items():
        if p.kind is p.KEYWORD_ONLY:
            assert f"`{name}`" in doc or f"{name}=" in doc, f"register keyword {name!r} undocumented"


def test_entry_point_example():
    doc = _doc()
    assert "[project.entry-points.tx]" in doc
    assert "from tx import hookimpl" in doc
