"""tx.specs.api and tx.specs.status: validation at construction, macros, states, status text."""
import pytest

from tx.specs import (
    NULL_RESOURCE,
    AppDef,
    AppDryRunInfo,
    AppState,
    AppStatus,
    AppStatusError,
    Attempt,
    BindMount,
    FailureKind,
    ReplicaState,
    ReplicaStatus,
    Resource,
    RetryPolicy,
    Role,
    RoleStatus,
    is_started,
    is_terminal,
    macros,
)


# -- Role / AppDef validation -------------------------------------------------------------
def test_role_defaults_follow_torchx():
    r = Role("trainer")
    assert r.image == ""
    assert r.entrypoint == "<MISSING>"
    assert r.args == [] and r.env == {} and r.port_map == {} and r.metadata == {}
    assert r.num_replicas == 1 and r.max_retries == 0 and r.min_replicas is None
    assert r.retry_policy is RetryPolicy.APPLICATION
    assert r.resource == NULL_RESOURCE
    assert r.mounts == []


@pytest.mark.parametrize("n", [0, -1, True, "2", 1.0])
def test_num_replicas_must_be_positive_int(n):
    with pytest.raises(ValueError, match=r"num_replicas must be an integer >= 1"):
        Role("r", num_replicas=n)


def test_num_replicas_checked_on_assignment():
    r = Role("r", num_replicas=3)
    with pytest.raises(ValueError, match="num_replicas"):
        r.num_replicas = 0
    assert r.num_replicas == 3


@pytest.mark.parametrize("n", [-1, False, "1"])
def test_max_retries_must_be_non_negative_int(n):
    with pytest.raises(ValueError, match=r"max_retries must be an integer >= 0"):
        Role("r", max_retries=n)


def test_min_replicas():
    assert Role("r", num_replicas=4, min_replicas=2).min_replicas == 2
    assert Role("r", min_replicas=0).min_replicas == 0
    for bad in (-1, "1", True):
        with pytest.raises(ValueError, match="min_replicas must be an integer >= 0"):
            Role("r", min_replicas=bad)


@pytest.mark.parametrize("name", ["", None, 3])
def test_role_name_must_be_non_empty(name):
    with pytest.raises(ValueError, match="name must be a non-empty string"):
        Role(name)


def test_app_name_must_be_non_empty():
    with pytest.raises(ValueError, match="name must be a non-empty string"):
        AppDef("")


def test_role_names_unique():
    with pytest.raises(ValueError, match=r"roles\[1\]: duplicate role name 'a'"):
        AppDef("app", [Role("a"), Role("a")])
    assert [r.name for r in AppDef("app", [Role("a"), Role("b")]).roles] == ["a", "b"]


def test_roles_must_be_roles():
    with pytest.raises(TypeError, match=r"roles\[0\] must be a Role, got dict"):
        AppDef("app", [{"name": "a"}])


def test_roles_accepts_any_iterable():
    app = AppDef("app", (Role("a"), Role("b")))
    assert isinstance(app.roles, list) and len(app.roles) == 2


@pytest.mark.parametrize("value,expected", [
    ("REPLICA", RetryPolicy.REPLICA),
    ("replica", RetryPolicy.REPLICA),
    ("Application", RetryPolicy.APPLICATION),
    ("role", RetryPolicy.ROLE),
    ("hot_spare", RetryPolicy.HOT_SPARE),
    (RetryPolicy.ROLE, RetryPolicy.ROLE),
])
def test_retry_policy_strings(value, expected):
    assert Role("r", retry_policy=value).retry_policy is expected


def test_retry_policy_bad():
    with pytest.raises(ValueError, match="retry_policy must be one of REPLICA, APPLICATION, ROLE, HOT_SPARE, got 'sometimes'"):
        Role("r", retry_policy="sometimes")


def test_retry_policy_str_is_value():
    assert str(RetryPolicy.HOT_SPARE) == "HOT_SPARE"
    assert RetryPolicy.REPLICA == "REPLICA"


def test_args_must_be_list_not_string():
    with pytest.raises(TypeError, match="expected a list of strings"):
        Role("r", args="--lr 0.1")
    assert Role("r", args=("a", "b")).args == ["a", "b"]


def test_env_none_is_empty_and_non_mapping_rejected():
    assert Role("r", env=None).env == {}
    with pytest.raises(TypeError, match="expected a mapping"):
        Role("r", env=["A=1"])


def test_resource_requires_int_fields():
    with pytest.raises(TypeError, match="cpu must be an int"):
        Resource(cpu="2", gpu=0, memMB=1)
    with pytest.raises(TypeError, match="memMB must be an int"):
        Resource(cpu=1, gpu=0, memMB=True)


def test_resource_copy_merges_capabilities_deeply():
    orig = Resource(cpu=1, gpu=0, memMB=128, capabilities={"a": 1, "nested": {"x": 1}}, devices={"d": 1})
    cp = Resource.copy(orig, b=2, a=3)
    assert cp.capabilities == {"a": 3, "b": 2, "nested": {"x": 1}}
    assert orig.capabilities == {"a": 1, "nested": {"x": 1}}
    cp.capabilities["nested"]["x"] = 2
    cp.devices["d"] = 5
    assert orig.capabilities["nested"]["x"] == 1 and orig.devices == {"d": 1}


def test_null_resource():
    assert (NULL_RESOURCE.cpu, NULL_RESOURCE.gpu, NULL_RESOURCE.memMB) == (-1, -1, -1)


def test_default_resource_is_not_shared():
    a, b = Role("a"), Role("b")
    assert a.resource == NULL_RESOURCE and a.resource is not NULL_RESOURCE
    a.resource.cpu = 4
    a.resource.capabilities["x"] = 1
    assert b.resource == NULL_RESOURCE and Role("c").resource == NULL_RESOURCE
    assert NULL_RESOURCE == Resource(cpu=-1, gpu=-1, memMB=-1)


def test_pre_proc_returns_request_unchanged():
    info = AppDryRunInfo("req")
    assert Role("r").pre_proc("local_cwd", info) is info


def test_dryrun_info_str_uses_fmt():
    info = AppDryRunInfo({"a": 1}, fmt=lambda r: f"REQUEST {sorted(r)}")
    assert str(info) == "REQUEST ['a']" and repr(info) == "REQUEST ['a']"
    assert str(AppDryRunInfo([1, 2])) == "[1, 2]"


# -- macros --------------------------------------------------------------------------------
def _values(**kw):
    base = dict(img_root="/img", app_id="app-123", replica_id="2", rank0_env="MASTER_ADDR")
    base.update(kw)
    return macros.Values(**base)


def test_macro_literals():
    assert macros.img_root == "${img_root}"
    assert macros.app_id == "${app_id}"
    assert macros.replica_id == "${replica_id}"
    assert macros.rank0_env == "${rank0_env}"
    assert macros.base_img_root == "${base_img_root}"
    assert _values().base_img_root == "DEPRECATED"


def test_substitute_known_unknown_and_escape():
    v = _values()
    assert v.substitute(f"{macros.img_root}/bin --id={macros.app_id}") == "/img/bin --id=app-123"
    assert v.substitute("$app_id and ${replica_id}") == "app-123 and 2"
    assert v.substitute("$$HOME $x ${y} $") == "$HOME $x ${y} $"
    assert v.substitute("$${app_id}") == "${app_id}"


def test_apply_substitutes_args_env_metadata_only():
    role = Role(
        "r",
        image=macros.img_root,
        entrypoint=f"{macros.img_root}/main",
        args=["--id", macros.app_id, "--rank0=${rank0_env}", "$$PATH", "$unknown"],
        env={"REPLICA": macros.replica_id, "PLAIN": "x"},
        metadata={"k": macros.app_id, "nested": {"l": [macros.replica_id, 3]}, "n": 1},
        resource=Resource(1, 0, 64),
        mounts=[BindMount("/a", "/b")],
    )
    out = _values().apply(role)
    assert out.args == ["--id", "app-123", "--rank0=MASTER_ADDR", "$PATH", "$unknown"]
    assert out.env == {"REPLICA": "2", "PLAIN": "x"}
    assert out.metadata == {"k": "app-123", "nested": {"l": ["2", 3]}, "n": 1}
    # image and entrypoint are not substituted (TorchX)
    assert out.image == "${img_root}" and out.entrypoint == "${img_root}/main"
    # the original is untouched, and the copy does not share mutable state
    assert role.args[1] == "${app_id}" and role.env["REPLICA"] == "${replica_id}"
    assert role.metadata["nested"]["l"][0] == "${replica_id}"
    out.resource.capabilities["x"] = 1
    out.mounts.append(BindMount("/c", "/d"))
    assert role.resource.capabilities == {} and len(role.mounts) == 1


# -- AppState --------------------------------------------------------------------------------
def test_app_state_values_str_repr():
    expected = ["UNSUBMITTED", "SUBMITTED", "PENDING", "RUNNING", "SUCCEEDED", "FAILED", "CANCELLED", "UNKNOWN"]
    assert [s.name for s in sorted(AppState)] == expected
    assert [int(s) for s in sorted(AppState)] == list(range(8))
    assert str(AppState.RUNNING) == "RUNNING"
    assert repr(AppState.FAILED) == "FAILED (5)"
    assert ReplicaState is AppState
    assert AppState(4) is AppState.SUCCEEDED


@pytest.mark.parametrize("state", list(AppState))
def test_is_terminal_and_started(state):
    terminal = state in (AppState.SUCCEEDED, AppState.FAILED, AppState.CANCELLED)
    assert is_terminal(state) is terminal
    assert is_started(state) is (terminal or state == AppState.RUNNING)


# -- AppStatus -----------------------------------------------------------------------------
def _status(state=AppState.FAILED, **kw):
    replicas = [
        ReplicaStatus(1, AppState.FAILED, "trainer", hostname="node1", exit_code=3),
        ReplicaStatus(0, AppState.SUCCEEDED, "trainer", exit_code=0),
    ]
    ps = [ReplicaStatus(0, AppState.CANCELLED, "ps", exit_code=-15)]
    return AppStatus(
        state, num_restarts=2, msg="replica 1 failed", ui_url="file:///tmp/app",
        roles=[RoleStatus("trainer", replicas), RoleStatus("ps", ps)], **kw,
    )


def test_status_format_shape():
    text = _status().format()
    assert text == (
        "AppStatus:\n"
        "  State: FAILED\n"
        "  Num Restarts: 2\n"
        "  Roles:\n"
        "  *trainer[0]:SUCCEEDED\n"
        "   trainer[1]:FAILED (exit code 3) on node1\n"
        "  *ps[0]:CANCELLED (signal 15)\n"
        "  Msg: replica 1 failed\n"
        "  Structured Error Msg: <NONE>\n"
        "  UI URL: file:///tmp/app\n"
    )


def test_attempts_say_whose_failure_ended_each():
    attempts = [
        Attempt(0, AppState.FAILED, FailureKind.INFRA, "NODE_FAIL: a node of the job failed", retried=True),
        Attempt(1, AppState.FAILED, FailureKind.USER, "exit code 3", retried=True),
        Attempt(2, AppState.SUCCEEDED),
    ]
    text = _status(attempts=attempts).format()
    assert text.endswith(
        "  UI URL: file:///tmp/app\n"
        "  Attempts:\n"
        "    #0 FAILED (infra: NODE_FAIL: a node of the job failed), retried\n"
        "    #1 FAILED (user: exit code 3), retried\n"
        "    #2 SUCCEEDED\n"
    ), text
    assert _status(attempts=attempts).to_json()["attempts"][0] == {
        "index": 0, "state": "FAILED", "kind": "infra", "reason": "NODE_FAIL: a node of the job failed",
        "retried": True, "saved_step": None, "save_seconds": None, "resumed_step": None}
    # no failed attempt: the text is TorchX's, unchanged
    assert "Attempts" not in _status(attempts=[Attempt(0, AppState.RUNNING)]).format()
    assert FailureKind("infra") is FailureKind.INFRA and str(FailureKind.USER) == "user"


def test_status_format_filter_roles():
    text = _status().format(filter_roles=["ps"])
    assert "*ps[0]:CANCELLED" in text and "trainer[" not in text


def test_status_format_renders_torchelastic_error():
    err = '{"message": {"message": "RuntimeError: boom", "extraInfo": {"timestamp": "1700000000"}}, "exitcode": 1}'
    st = AppStatus(AppState.FAILED, structured_error_msg=err)
    text = st.format()
    assert "  Structured Error Msg: exitcode: 1\ntimestamp: 1700000000\nerror: RuntimeError: boom\n" in text
    plain = AppStatus(AppState.FAILED, structured_error_msg="Traceback: x").format()
    assert "  Structured Error Msg: Traceback: x\n" in plain


def test_failed_replica_shows_its_error_indented():
    st = AppStatus(AppState.FAILED, roles=[RoleStatus("r", [
        ReplicaStatus(0, AppState.FAILED, "r", structured_error_msg="oops", exit_code=1)])])
    assert "  *r[0]:FAILED (exit code 1)\n      oops\n" in st.format()


def test_raise_for_status():
    AppStatus(AppState.SUCCEEDED).raise_for_status()
    for state in (AppState.FAILED, AppState.RUNNING, AppState.CANCELLED):
        with pytest.raises(AppStatusError, match=f"app did not succeed: AppStatus:\n  State: {state}") as ei:
            AppStatus(state).raise_for_status()
        assert ei.value.app_status.state is state


def test_status_is_terminal_and_json():
    st = _status()
    assert st.is_terminal() and not AppStatus(AppState.PENDING).is_terminal()
    js = st.to_json(filter_roles=["ps"])
    assert js["state"] == "FAILED" and js["url"] == "file:///tmp/app"
    assert js["roles"] == [{"role": "ps", "replicas": [{
        "id": 0, "state": "CANCELLED", "role": "ps", "hostname": "",
        "structured_error_msg": "<NONE>", "exit_code": -15, "root_cause": None}]}]
    assert js["root_cause"] is None


def test_status_repr_is_yaml():
    text = repr(AppStatus(AppState.RUNNING, msg="ok"))
    assert text.startswith("AppStatus:\n  state: RUNNING\n")
    assert "  msg: ok\n" in text
