"""tx.specs.mounts (parse_mounts) and tx.specs.handles (app handles)."""
import os

import pytest

from tx.specs import (
    BindMount,
    DeviceMount,
    MalformedAppHandleException,
    MountType,
    ParsedAppHandle,
    VolumeMount,
    make_app_handle,
    parse_app_handle,
    parse_mounts,
)


# -- parse_mounts --------------------------------------------------------------------------
def test_bind_mount_comma_joined_with_flag():
    assert parse_mounts(["type=bind,src=/data,dst=/mnt/data,readonly"]) == [
        BindMount("/data", "/mnt/data", read_only=True)
    ]


def test_bind_mount_expands_home():
    (m,) = parse_mounts(["type=bind,src=~/data,dst=/data"])
    assert m == BindMount(os.path.expanduser("~/data"), "/data", False)
    assert not m.src_path.startswith("~")


def test_tokens_as_separate_list_items():
    assert parse_mounts(["type=bind", "src=/a", "dst=/b"]) == [BindMount("/a", "/b")]


@pytest.mark.parametrize("spec", [
    "type=bind,source=/a,destination=/b,read_only",
    "type=bind,src=/a,target=/b,readonly=true",
    "TYPE=BIND,Src=/a,Dst=/b,ReadOnly=1",
    " type = bind , src = /a , dst = /b , readonly = yes ",
])
def test_key_aliases_and_case(spec):
    assert parse_mounts([spec]) == [BindMount("/a", "/b", True)]


def test_readonly_false_value():
    assert parse_mounts(["type=bind,src=/a,dst=/b,readonly=false"]) == [BindMount("/a", "/b", False)]


def test_volume_mount():
    assert parse_mounts(["type=volume,src=myvol,dst=/data"]) == [VolumeMount("myvol", "/data", False)]
    assert parse_mounts(["type=volume,src=fs-1234,dst=/efs,readonly"]) == [VolumeMount("fs-1234", "/efs", True)]


def test_device_mount_defaults_and_perm():
    assert parse_mounts(["type=device,src=/dev/fuse"]) == [DeviceMount("/dev/fuse", "/dev/fuse", "rwm")]
    assert parse_mounts(["type=device,src=/dev/fuse,dst=/dev/f,perm=rw"]) == [DeviceMount("/dev/fuse", "/dev/f", "rw")]


def test_several_mounts_in_order():
    mounts = parse_mounts([
        "type=bind,src=/a,dst=/b,type=volume,src=v,dst=/v",
        "type=device,src=/dev/x",
    ])
    assert mounts == [BindMount("/a", "/b"), VolumeMount("v", "/v"), DeviceMount("/dev/x", "/dev/x")]


def test_empty():
    assert parse_mounts([]) == []
    assert parse_mounts([""]) == []


@pytest.mark.parametrize("opts,msg", [
    (["src=/a,dst=/b"], "comes before type="),
    (["type=bind,src=/a,dst=/b,color=red"], "unknown mount option 'color'"),
    (["type=nfs,src=/a,dst=/b"], "unknown mount type 'nfs': expected bind, volume or device"),
    (["type=bind,dst=/b"], "bind mount needs src="),
    (["type=bind,src=/a"], "bind mount needs dst="),
    (["type=bind,src,dst=/b"], "bind mount needs src="),
    (["type=volume,dst=/b"], "volume mount needs src="),
    (["type=device"], "device mount needs src="),
    (["type=device,src=/dev/x,perm=rwx"], "device permissions must be a subset of 'rwm', got 'rwx'"),
])
def test_parse_mounts_errors(opts, msg):
    with pytest.raises(ValueError, match=msg.replace("(", r"\(")):
        parse_mounts(opts)


def test_mount_type_values():
    assert [t.value for t in MountType] == ["bind", "volume", "device"]


def test_device_permissions_validated_at_construction():
    with pytest.raises(ValueError, match="subset of 'rwm'"):
        DeviceMount("/dev/a", "/dev/a", permissions="x")
    assert DeviceMount("/dev/a", "/dev/a", permissions="").permissions == ""


# -- app handles ---------------------------------------------------------------------------
def test_make_and_parse_round_trip():
    h = make_app_handle("local_cwd", "tx", "echo-abc123")
    assert h == "local_cwd://tx/echo-abc123"
    parsed = parse_app_handle(h)
    assert parsed == ParsedAppHandle("local_cwd", "tx", "echo-abc123")
    assert (parsed.scheduler_backend, parsed.session_name, parsed.app_id) == ("local_cwd", "tx", "echo-abc123")


def test_app_id_may_hold_colons():
    assert parse_app_handle("kubernetes://tx/default:trainer-x1") == ParsedAppHandle(
        "kubernetes", "tx", "default:trainer-x1"
    )
    assert parse_app_handle("ray://tx/127.0.0.1:8265-raysubmit_1") == ParsedAppHandle(
        "ray", "tx", "127.0.0.1:8265-raysubmit_1"
    )


def test_app_id_is_after_last_slash_and_the_session_is_not_empty():
    assert parse_app_handle("kubernetes://s/ns:job") == ParsedAppHandle("kubernetes", "s", "ns:job")
    assert parse_app_handle("slurm://a/b/1234") == ParsedAppHandle("slurm", "a/b", "1234")
    with pytest.raises(MalformedAppHandleException, match="the session name is empty"):
        parse_app_handle("kubernetes:///ns:job")


@pytest.mark.parametrize("bad", [
    "", "echo-123", "local_cwd://", "local_cwd://tx", "local_cwd://tx/", "://tx/id",
    "local_cwd:/tx/id", "local cwd://tx/id", "local_cwd://tx/id/",
])
def test_malformed_handles(bad):
    with pytest.raises(MalformedAppHandleException) as ei:
        parse_app_handle(bad)
    assert ei.value.app_handle == bad
    assert str(ei.value) == (
        f"malformed app handle {bad!r}: expected {{scheduler}}://{{session_name}}/{{app_id}}"
    )


def test_parse_none_is_malformed():
    with pytest.raises(MalformedAppHandleException):
        parse_app_handle(None)


def test_without_mounts_and_mount_text() -> None:
    from tx.specs import AppDef, BindMount, DeviceMount, Role, VolumeMount
    from tx.specs.mounts import mount_text, without_mounts

    app = AppDef("a", roles=[
        Role("train", image="i", entrypoint="e", mounts=[VolumeMount("nas-pvc", "/mnt/data"),
                                                         BindMount("/d", "/d", read_only=True)]),
        Role("ps", image="i", entrypoint="e"),
        Role("dev", image="i", entrypoint="e", mounts=[DeviceMount("/dev/fuse", "/dev/fuse")]),
    ])
    new, dropped = without_mounts(app)
    assert dropped == ("role 'train': volume nas-pvc -> /mnt/data, bind /d -> /d (read-only); "
                       "role 'dev': device /dev/fuse -> /dev/fuse")
    assert [r.mounts for r in new.roles] == [[], [], []] and len(app.roles[0].mounts) == 2
    plain = AppDef("b", roles=[Role("r", image="i", entrypoint="e")])
    assert without_mounts(plain) == (plain, "")
    assert mount_text(VolumeMount("v", "/x", read_only=True)) == "volume v -> /x (read-only)"
