"""Start-up cost: cheap imports must not pull in cattrs, PyYAML, structlog, pluggy, torch or
an entry point scan (importlib.metadata). Each check runs in a fresh interpreter."""
import json
import subprocess
import sys

import pytest

HEAVY = ("cattrs", "yaml", "structlog", "pluggy", "importlib.metadata", "torch", "fsspec", "tabulate")


def loaded_after(code: str) -> set:
    """Top-level names of HEAVY modules in sys.modules after running ``code``."""
    probe = f"{code}\nimport sys, json\nprint(json.dumps(sorted(m for m in sys.modules if m in {HEAVY!r})))"
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return set(json.loads(out.stdout.strip().splitlines()[-1]))


@pytest.mark.parametrize("code", [
    "import tx",
    "import tx.version",
    "import tx.specs",
    "from tx.specs import AppDef, Role, Resource, macros, runopts, parse_app_handle, named_resources",
    "import tx.specs.files",
    "import tx.distributed",
])
def test_cheap_imports(code):
    assert loaded_after(code) == set()


def test_building_specs_stays_cheap():
    code = (
        "from tx.specs import AppDef, Role, Resource, AppState, AppStatus, macros, runopts, parse_mounts\n"
        "app = AppDef('a', [Role('r', 'img', args=[macros.app_id], resource=Resource(1, 0, 1))])\n"
        "macros.Values('/', 'id', '0', 'X').apply(app.roles[0])\n"
        "o = runopts(); o.add('q', type_=str, help='h'); o.cfg_from_str('q=1'); repr(o)\n"
        "parse_mounts(['type=bind,src=/a,dst=/b'])\n"
        "AppStatus(AppState.RUNNING).format()\n"
    )
    assert loaded_after(code) == set()


def test_tx_version_loads_only_the_standard_library():
    code = (
        "import sys; before = set(sys.modules); import tx.version\n"
        "new = {m.split('.')[0] for m in set(sys.modules) - before}\n"
        "print(sorted(m for m in new if m not in sys.stdlib_module_names))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "['tx']"  # not even attrs


def test_hookimpl_is_resolved_lazily():
    assert loaded_after("import tx") == set()
    assert "pluggy" in loaded_after("from tx import hookimpl")


def test_files_load_what_they_need_on_use():
    # writing needs no cattrs (`tx run` stores every AppDef); reading does
    code = "from tx.specs import AppDef\nfrom tx.specs.files import appdef_to_dict\nappdef_to_dict(AppDef('a'))"
    assert loaded_after(code) == set()
    code = "from tx.specs import AppDef\nfrom tx.specs.files import appdef_to_yaml\nappdef_to_yaml(AppDef('a'))"
    assert loaded_after(code) == {"yaml"}
    # positive control: the probe does see lazily imported modules
    code = "from tx.specs.files import appdef_from_dict\nappdef_from_dict({'name': 'a'})"
    assert loaded_after(code) == {"cattrs"}
