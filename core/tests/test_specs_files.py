"""AppDef <-> dict (tx.specs._convert) and AppDef files (tx.specs.files)."""
import io
import re
import json
from pathlib import Path

import pytest
import yaml

from tx.specs import (
    AppDef,
    AppDefFormatError,
    AppState,
    BindMount,
    DeviceMount,
    Resource,
    RetryPolicy,
    Role,
    VolumeMount,
    macros,
)
from tx.specs._convert import get_converter, structure, structure_appdef, unstructure_appdef
from tx.specs.files import (
    appdef_from_dict,
    appdef_from_stored,
    appdef_to_dict,
    appdef_to_json,
    appdef_to_stored,
    appdef_to_yaml,
    dump_appdef,
    read_stored_appdef,
    read_stored_appdef_and_options,
    stored_run_options,
    load_appdef,
    parse_appdef,
)


def full_app() -> AppDef:
    return AppDef(
        "trainer",
        [
            Role(
                "worker",
                image="/opt/app",
                entrypoint="python",
                args=["-m", "train", "--id", macros.app_id, "1", "on", "yes", "null", "2.0"],
                env={"OMP_NUM_THREADS": "1", "FLAG": "true", "EMPTY": ""},
                num_replicas=2,
                min_replicas=1,
                max_retries=3,
                retry_policy=RetryPolicy.ROLE,
                resource=Resource(
                    cpu=4, gpu=1, memMB=8192,
                    capabilities={"node.kubernetes.io/instance-type": "p4d.24xlarge", "n": 1},
                    devices={"vpc.amazonaws.com/efa": 4},
                    tags={"team": "ml", "list": [1, 2]},
                ),
                port_map={"tensorboard": 6006},
                metadata={"slurm/partition": "gpu", "nested": {"a": [1, "b"]}},
                mounts=[
                    BindMount("/data", "/mnt/data", read_only=True),
                    VolumeMount("myvol", "/vol"),
                    DeviceMount("/dev/fuse", "/dev/fuse", "rw"),
                ],
            ),
            Role("ps", image="img", retry_policy=RetryPolicy.HOT_SPARE, base_image="base"),
        ],
        metadata={"owner": "me"},
    )


# -- dicts ---------------------------------------------------------------------------------
def test_to_dict_writes_every_field_with_tags_and_enum_values():
    d = appdef_to_dict(full_app())
    assert list(d) == ["name", "roles", "metadata"]
    worker = d["roles"][0]
    assert list(worker) == [
        "name", "image", "min_replicas", "base_image", "entrypoint", "args", "env", "num_replicas",
        "max_retries", "retry_policy", "resource", "port_map", "metadata", "mounts",
    ]
    assert worker["retry_policy"] == "ROLE" and type(worker["retry_policy"]) is str
    assert worker["resource"] == {
        "cpu": 4, "gpu": 1, "memMB": 8192,
        "capabilities": {"node.kubernetes.io/instance-type": "p4d.24xlarge", "n": 1},
        "devices": {"vpc.amazonaws.com/efa": 4}, "tags": {"team": "ml", "list": [1, 2]},
    }
    assert worker["mounts"] == [
        {"type": "bind", "src_path": "/data", "dst_path": "/mnt/data", "read_only": True},
        {"type": "volume", "src": "myvol", "dst_path": "/vol", "read_only": False},
        {"type": "device", "src_path": "/dev/fuse", "dst_path": "/dev/fuse", "permissions": "rw"},
    ]
    ps = d["roles"][1]
    assert ps["resource"] == {"cpu": -1, "gpu": -1, "memMB": -1, "capabilities": {}, "devices": {}, "tags": {}}
    assert ps["min_replicas"] is None and ps["entrypoint"] == "<MISSING>"
    json.dumps(d)  # JSON-ready


def test_dict_round_trip():
    app = full_app()
    assert appdef_from_dict(appdef_to_dict(app)) == app
    assert structure_appdef(unstructure_appdef(app)) == app


def test_minimal_dict_fills_defaults():
    app = appdef_from_dict({"name": "a", "roles": [{"name": "r"}]})
    assert app == AppDef("a", [Role("r")])
    assert appdef_from_dict({"name": "a"}) == AppDef("a")


def test_retry_policy_any_case_on_input():
    app = appdef_from_dict({"name": "a", "roles": [{"name": "r", "retry_policy": "replica"}]})
    assert app.roles[0].retry_policy is RetryPolicy.REPLICA


def test_mount_tag_order_does_not_matter():
    role = structure({"name": "r", "mounts": [{"dst_path": "/b", "src_path": "/a", "type": "bind"}]}, Role)
    assert role.mounts == [BindMount("/a", "/b")]


def test_converter_is_built_once():
    assert get_converter() is get_converter()


def test_app_state_by_value():
    conv = get_converter()
    assert conv.unstructure(AppState.FAILED) == 5
    assert conv.structure(5, AppState) is AppState.FAILED
    assert conv.structure("running", AppState) is AppState.RUNNING
    with pytest.raises(ValueError, match="expected an app state"):
        conv.structure(9, AppState)


def test_unstructure_rejects_non_appdef():
    with pytest.raises(TypeError, match="expected an AppDef, got dict"):
        unstructure_appdef({"name": "a"})


def _err(data) -> str:
    with pytest.raises(AppDefFormatError) as ei:
        appdef_from_dict(data)
    msg = str(ei.value)
    assert "\n" not in msg
    return msg


def _role(**kw):
    return {"name": "a", "roles": [{"name": "r", **kw}]}


@pytest.mark.parametrize("data,msg", [
    ({"name": "a", "roles": [{"name": "x"}, {"name": "y", "num_replicas": "two"}]},
     "roles[1].num_replicas: expected int, got 'two'"),
    (_role(entrypiont="python"), "roles[0]: unknown key 'entrypiont' (did you mean 'entrypoint'?)"),
    (_role(num_replicas=0), "roles[0].num_replicas: must be an integer >= 1, got 0"),
    ({"roles": []}, "name: missing"),
    ({"name": ""}, "name: must be a non-empty string, got ''"),
    (_role(num_replicas="2"), "roles[0].num_replicas: expected int, got '2'"),
    (_role(num_replicas=True), "roles[0].num_replicas: expected int, got True"),
    (_role(num_replicas=2.0), "roles[0].num_replicas: expected int, got 2.0"),
    (_role(max_retries=-1), "roles[0].max_retries: must be an integer >= 0, got -1"),
    (_role(min_replicas="1"), "roles[0].min_replicas: expected int, got '1'"),
    (_role(image=3), "roles[0].image: expected str, got 3"),
    (_role(args="--lr 1"), "roles[0].args: expected a list, got '--lr 1'"),
    (_role(args=["a", 1]), "roles[0].args[1]: expected str, got 1"),
    (_role(env={"A": 1}), "roles[0].env['A']: expected str, got 1"),
    (_role(env=["A=1"]), "roles[0].env: expected a mapping, got ['A=1']"),
    (_role(port_map={"http": "80"}), "roles[0].port_map['http']: expected int, got '80'"),
    (_role(retry_policy="sometimes"),
     "roles[0].retry_policy: expected one of REPLICA, APPLICATION, ROLE, HOT_SPARE, got 'sometimes'"),
    (_role(resource={"cpu": 1}), "roles[0].resource.gpu: missing; roles[0].resource.memMB: missing"),
    (_role(resource={"cpu": 1, "gpu": 0, "memMB": 1, "devices": {"efa": "4"}}),
     "roles[0].resource.devices['efa']: expected int, got '4'"),
    (_role(resource={"cpu": 1, "gpu": 0, "mem": 2}),
     "roles[0].resource.memMB: missing; roles[0].resource: unknown key 'mem' (did you mean 'memMB'?)"),
    (_role(resource={"cpu": 1, "gpu": 0, "memMB": 1, "mem": 2}), "roles[0].resource: unknown key 'mem'"),
    (_role(comand="x"), "roles[0]: unknown key 'comand'"),
    (_role(mounts=[{"src_path": "/a", "dst_path": "/b"}]),
     "roles[0].mounts[0].type: missing (one of bind, volume, device)"),
    (_role(mounts=[{"type": "nfs"}]), "roles[0].mounts[0].type: expected one of bind, volume, device, got 'nfs'"),
    (_role(mounts=[{"type": "bind", "src_path": "/a"}]), "roles[0].mounts[0].dst_path: missing"),
    (_role(mounts=[{"type": "bind", "src_path": "/a", "dst_path": "/b", "read_only": "yes"}]),
     "roles[0].mounts[0].read_only: expected true or false, got 'yes'"),
    (_role(mounts=[{"type": "volume", "src_path": "/a", "dst_path": "/b"}]),
     "roles[0].mounts[0].src: missing; roles[0].mounts[0]: unknown key 'src_path' (did you mean 'src'?)"),
    (_role(mounts=[{"type": "device", "src_path": "/a", "dst_path": "/b", "permissions": "x"}]),
     "roles[0].mounts[0]: device permissions must be a subset of 'rwm', got 'x'"),
    (_role(mounts="type=bind"), "roles[0].mounts: expected a list, got 'type=bind'"),
    ({"name": "a", "roles": [{"name": "x"}, {"name": "x"}]}, "roles[1]: duplicate role name 'x'"),
    ({"name": "a", "roles": "worker"}, "roles: expected a list, got 'worker'"),
    ({"name": "a", "roles": ["worker"]}, "roles[0]: expected a mapping, got 'worker'"),
    ({"name": "a", "metadata": {"k": 1}}, "metadata['k']: expected str, got 1"),
    ({"name": "a", "rolse": [], "x": 1}, "unknown keys 'rolse', 'x'"),
    ({"name": "a", "rolse": []}, "unknown key 'rolse' (did you mean 'roles'?)"),
    ([{"name": "a"}], "expected a mapping with name and roles, got [{'name': 'a'}]"),
    (None, "expected a mapping with name and roles, got nothing (empty document)"),
])
def test_format_errors(data, msg):
    assert _err(data) == msg


def test_errors_listed_and_capped():
    roles = [{"name": f"r{i}", "num_replicas": "x"} for i in range(8)]
    with pytest.raises(AppDefFormatError) as ei:
        appdef_from_dict({"name": "a", "roles": roles})
    assert len(ei.value.errors) == 8
    assert ei.value.errors[0] == ("roles[0].num_replicas", "expected int, got 'x'")
    assert str(ei.value).endswith("roles[4].num_replicas: expected int, got 'x'; and 3 more")


def test_structure_other_classes():
    assert structure({"cpu": 1, "gpu": 0, "memMB": 2}, Resource) == Resource(1, 0, 2)
    with pytest.raises(AppDefFormatError, match=r"^cpu: expected int, got '1'$"):
        structure({"cpu": "1", "gpu": 0, "memMB": 2}, Resource)


# -- files ---------------------------------------------------------------------------------
@pytest.mark.parametrize("fname", ["app.yaml", "app.yml", "app.json", "app.txt"])
def test_file_round_trip(tmp_path, fname):
    app = full_app()
    path = tmp_path / fname
    dump_appdef(app, path)
    assert load_appdef(path) == app
    assert load_appdef(str(path)) == app
    assert load_appdef(str(path)) == app


def test_dump_format_follows_extension(tmp_path):
    app = full_app()
    dump_appdef(app, tmp_path / "a.json")
    assert json.loads((tmp_path / "a.json").read_text()) == appdef_to_dict(app)
    dump_appdef(app, tmp_path / "a.yaml")
    assert yaml.safe_load((tmp_path / "a.yaml").read_text()) == appdef_to_dict(app)
    dump_appdef(app, tmp_path / "forced.yaml", fmt="json")
    assert (tmp_path / "forced.yaml").read_text().startswith("{")
    assert load_appdef(tmp_path / "forced.yaml") == app  # YAML reads JSON


@pytest.mark.parametrize("fmt", ["yaml", "json"])
def test_dump_to_stream_and_parse(fmt):
    buf = io.StringIO()
    dump_appdef(full_app(), buf, fmt=fmt)
    assert parse_appdef(buf.getvalue(), fmt) == full_app()


def test_dump_to_stream_defaults_to_yaml():
    buf = io.StringIO()
    dump_appdef(full_app(), buf)
    assert buf.getvalue() == appdef_to_yaml(full_app())


def test_dump_bad_fmt():
    with pytest.raises(ValueError, match="fmt must be 'yaml' or 'json', got 'toml'"):
        dump_appdef(full_app(), io.StringIO(), fmt="toml")
    with pytest.raises(ValueError, match="fmt must be 'yaml' or 'json'"):
        parse_appdef("{}", fmt="xml")


def test_yaml_text_is_block_style_and_quotes_ambiguous_strings():
    text = appdef_to_yaml(full_app())
    assert text.startswith("name: trainer\nroles:\n- name: worker\n  image: /opt/app\n")
    assert "retry_policy: ROLE\n" in text
    assert "- type: bind\n" not in text  # fields in declaration order, the tag last
    assert "    type: bind\n" in text
    for quoted in ("'1'", "'on'", "'yes'", "'null'", "'2.0'", "'true'"):
        assert quoted in text


def test_json_text():
    text = appdef_to_json(full_app())
    assert text.endswith("}\n") and text.startswith('{\n  "name": "trainer",\n')


def test_handwritten_yaml(tmp_path):
    path = tmp_path / "app.yaml"
    path.write_text(
        "name: trainer\n"
        "roles:\n"
        "  - name: worker\n"
        "    image: /opt/app\n"
        "    entrypoint: python\n"
        "    args: [-m, train]\n"
        "    num_replicas: 2\n"
        "    retry_policy: replica\n"
        "    resource: {cpu: 2, gpu: 0, memMB: 1024}\n"
        "    mounts:\n"
        "      - {type: bind, src_path: /data, dst_path: /data}\n"
    )
    app = load_appdef(path)
    assert app == AppDef("trainer", [Role(
        "worker", image="/opt/app", entrypoint="python", args=["-m", "train"], num_replicas=2,
        retry_policy=RetryPolicy.REPLICA, resource=Resource(2, 0, 1024), mounts=[BindMount("/data", "/data")],
    )])


def _load_err(path) -> str:
    with pytest.raises(AppDefFormatError) as ei:
        load_appdef(path)
    msg = str(ei.value)
    assert "\n" not in msg
    return msg


def test_missing_file(tmp_path):
    p = tmp_path / "nope.yaml"
    assert _load_err(p) == f"{p}: cannot read: No such file or directory"


def test_directory(tmp_path):
    assert _load_err(tmp_path) == f"{tmp_path}: cannot read: Is a directory"


def test_not_utf8(tmp_path):
    p = tmp_path / "bin.yaml"
    p.write_bytes(b"name: \xff\xfe\n")
    assert _load_err(p).startswith(f"{p}: cannot read: 'utf-8' codec can't decode")


def test_bad_yaml_has_line(tmp_path):
    p = tmp_path / "app.yaml"
    p.write_text("name: a\nroles:\n  - name: r\n    args: [a, b\n    env: {}\n")
    msg = _load_err(p)
    # libyaml (CSafeLoader) reports where it stopped (line 5), pure PyYAML one line later
    assert re.match(rf"{re.escape(str(p))}:[56]: invalid YAML: did not find expected ',' or ']'", msg)
    assert msg.endswith("(while parsing a flow sequence started on line 4)")


def test_bad_yaml_indent(tmp_path):
    p = tmp_path / "app.yml"
    p.write_text("name: a\n roles: []\n")
    assert _load_err(p).startswith(f"{p}:2: invalid YAML: mapping values are not allowed")


def test_bad_json_has_line(tmp_path):
    p = tmp_path / "app.json"
    p.write_text('{\n  "name": "a",\n  "roles": [,]\n}\n')
    assert _load_err(p) == f"{p}:3: invalid JSON: Expecting value (column 13)"


def test_bad_field_names_file(tmp_path):
    p = tmp_path / "app.yaml"
    p.write_text("name: a\nroles:\n  - name: r\n    num_replicas: two\n")
    with pytest.raises(AppDefFormatError) as ei:
        load_appdef(p)
    assert str(ei.value) == f"{p}: roles[0].num_replicas: expected int, got 'two'"
    assert ei.value.errors == [("roles[0].num_replicas", "expected int, got 'two'")]


def test_yaml_11_bools_are_not_strings(tmp_path):
    p = tmp_path / "app.yaml"
    p.write_text("name: a\nroles:\n  - name: r\n    env: {DEBUG: yes}\n")
    assert _load_err(p) == f"{p}: roles[0].env['DEBUG']: expected str, got True"


def test_empty_file(tmp_path):
    p = tmp_path / "app.yaml"
    p.write_text("")
    assert _load_err(p) == f"{p}: expected a mapping with name and roles, got nothing (empty document)"


def test_sniffing_unknown_extension(tmp_path):
    js = tmp_path / "app.conf"
    js.write_text('  {"name": "a", "roles": [{"name": "r"}]}')
    assert load_appdef(js) == AppDef("a", [Role("r")])
    bad = tmp_path / "bad.conf"
    bad.write_text('{"name": "a",}')
    assert _load_err(bad).startswith(f"{bad}:1: invalid JSON: ")  # sniffed as JSON
    ym = tmp_path / "app"
    ym.write_text("name: a\n")
    assert load_appdef(ym) == AppDef("a")


def test_unstructure_by_hand_is_the_converters():
    """``unstructure_appdef`` does not build the cattrs converter; it must give what the
    converter gives, key order included."""
    app = full_app()
    by_hand = unstructure_appdef(app)
    assert by_hand == get_converter().unstructure(app, AppDef)
    assert json.dumps(by_hand) == json.dumps(get_converter().unstructure(app, AppDef))


def test_trusted_read_of_tx_own_copies_needs_no_converter():
    app = full_app()
    assert appdef_from_dict(appdef_to_dict(app), trusted=True) == app
    # anything else falls back to the checking converter and its one-line errors
    with pytest.raises(AppDefFormatError, match="num_replicas"):
        appdef_from_dict({"name": "a", "roles": [{"name": "r", "num_replicas": "two"}]}, trusted=True)


def test_stored_appdef_round_trips_plain_and_compressed_and_says_when_too_large():
    app = AppDef("a", metadata={"k": "v"}, roles=[
        Role("r", image="i", entrypoint="python", args=["-c", "x" * 5000], env={"A": "1"},
             resource=Resource(cpu=1, gpu=0, memMB=64), max_retries=2,
             mounts=[BindMount(src_path="/a", dst_path="/b")]),
        Role("s", image="j", num_replicas=2)])
    plain = appdef_to_stored(app)
    assert plain.startswith('{"tx_appdef":1,"app":') and appdef_from_stored(plain) == app
    packed = appdef_to_stored(app, limit=2000)
    assert '"zlib"' in packed and len(packed) <= 2000 and appdef_from_stored(packed) == app
    assert appdef_to_stored(app, limit=50) is None
    with pytest.raises(AppDefFormatError, match="version 2; this tx reads up to 1"):
        appdef_from_stored('{"tx_appdef": 2, "app": {}}')
    with pytest.raises(AppDefFormatError, match="not a stored AppDef"):
        appdef_from_stored('{"name": "a"}')
    assert read_stored_appdef(packed, "x") == (app, "")
    assert read_stored_appdef(None, "the label L", 100) == (None, (
        "no copy of the AppDef in the label L (compressed, it exceeds the 100 bytes that holds,"
        " or the job was not submitted by tx); roles rebuilt from the job"))
    assert read_stored_appdef("{", "the label L")[1].startswith("the label L: stored AppDef is not JSON")


def test_stored_appdef_keeps_the_json_safe_run_options_and_old_copies_still_read():
    app = AppDef("a", roles=[Role("r", image="i", args=["x" * 3000])])
    cfg = {"queue": "q", "n": 2, "on": True, "none": None, "tags": ("a", "b"), "env": {"K": "v"},
           "path": Path("/p"), "fn": print}
    want = {"queue": "q", "n": 2, "on": True, "none": None, "tags": ["a", "b"], "env": {"K": "v"}}
    plain = appdef_to_stored(app, cfg=cfg)
    assert appdef_from_stored(plain) == app and stored_run_options(plain) == want
    packed = appdef_to_stored(app, limit=1000, cfg=cfg)
    assert '"zlib"' in packed and appdef_from_stored(packed) == app and stored_run_options(packed) == want
    # too long with the options: the AppDef is kept without them
    bare = appdef_to_stored(app, limit=len(packed.encode()) - 1, cfg=cfg)
    assert appdef_from_stored(bare) == app and stored_run_options(bare) is None
    # a copy of a tx before run options (and one without cfg) reads as before, with none
    old = '{"tx_appdef":1,"app":{"name":"a","roles":[{"name":"r","image":"i"}]}}'
    assert appdef_from_stored(old).name == "a" and stored_run_options(old) is None
    assert stored_run_options(appdef_to_stored(app)) is None
    assert stored_run_options(None) is None and stored_run_options("{") is None


def test_one_read_gives_what_the_two_readers_give():
    app = AppDef("a", roles=[Role("r", image="i", args=["x" * 3000])])
    packed = appdef_to_stored(app, limit=1000, cfg={"queue": "q"})
    newer = '{"tx_appdef":2,"app":{},"run_options":{"queue":"q"}}'
    for text in (appdef_to_stored(app, cfg={"queue": "q"}), packed, appdef_to_stored(app), newer, "{", "[]", "", None):
        got = read_stored_appdef_and_options(text, "the label L", 100)
        assert got == (*read_stored_appdef(text, "the label L", 100), stored_run_options(text)), text
    assert read_stored_appdef_and_options(packed, "L") == (app, "", {"queue": "q"})
    assert read_stored_appdef_and_options(newer, "L") == (
        None, "L: stored AppDef has version 2; this tx reads up to 1; roles rebuilt from the job", {"queue": "q"})
