"""Offline: the bsubs the lsf scheduler builds for each kind of cluster (never an LSF 10
option for a cluster that would misread it), the capability probe's parsing, and bjobs's
output parsing. No cluster needed."""
from pathlib import Path

import pytest

from tx.specs import AppDef, InvalidRunConfigException, Resource, Role
from tx_scheduler_lsf._client import Capabilities, parse_lsid
from tx_scheduler_lsf._parse import appstate_from_lsf, parse_bjobs_l, parse_bjobs_w, split_job_name
from tx_scheduler_lsf.options import runopts_markdown
from tx_scheduler_lsf.scheduler import create_scheduler

OPENLAVA = parse_lsid("OpenLava 4.0dev4, Nov 28 2026\n\nMy cluster name is tx\nMy master name is vm\n")
LSF10 = parse_lsid("IBM Spectrum LSF Standard 10.1.0.13, Jun 08 2022\nCopyright International Business Machines "
                   "Corp. 1992, 2016.\n\nMy cluster name is c\nMy master name is m\n")
#: LSF 10 options OpenLava's getopt silently misreads (scripts/start-openlava.sh)
MISREAD = ("-oo", "-eo", "-outdir", "-env", "-cwd", "-gpu")


def app(gpu: int = 0) -> AppDef:
    res = Resource(cpu=2, gpu=gpu, memMB=1500)
    return AppDef("My App", roles=[
        Role("trainer", image="", entrypoint="python", args=["-c", "print('a b')", "${app_id}"], num_replicas=2,
             resource=res, env={"FOO": "x y"}),
        Role("ps", image="", entrypoint="sleep", args=["1"], resource=res),
    ])


def test_lsid_tells_openlava_from_lsf10() -> None:
    assert OPENLAVA == Capabilities(product="OpenLava 4.0dev4, Nov 28 2026", major=4, modern=False)
    assert LSF10.modern and LSF10.major == 10 and LSF10.name == "IBM LSF 10"
    assert not parse_lsid("IBM Platform LSF Standard 9.1.3.0, Jul 04 2014").modern
    assert not parse_lsid("").modern


def test_openlava_gets_the_portable_subset(tmp_path: Path) -> None:
    sched = create_scheduler("tx", caps=OPENLAVA)
    req = sched.submit_dryrun(app(), {"jobdir": str(tmp_path), "lsf_queue": "short", "time": "1:30",
                                      "select": "mem>100"}).request
    assert req.app_id.startswith("my-app-")
    names = [r.job_name for r in req.replicas.values()]
    assert names == [f"{req.app_id}-trainer-0", f"{req.app_id}-trainer-1", f"{req.app_id}-ps-0"]
    first, second, ps = req.replicas.values()
    for r in req.replicas.values():
        assert not set(r.bsub) & set(MISREAD), r.bsub
        assert r.bsub[:5] == ["bsub", "-P", req.app_id, "-J", r.job_name]
        assert r.bsub[r.bsub.index("-n") + 1] == "2"
        assert r.bsub[r.bsub.index("-M") + 1] == str(1500 * 1024)  # KB: LSF_UNIT_FOR_LIMITS unset
        assert r.bsub[r.bsub.index("-R") + 1] == "span[hosts=1] rusage[mem=1500] select[mem>100]"
        assert r.bsub[r.bsub.index("-q") + 1] == "short" and r.bsub[r.bsub.index("-W") + 1] == "1:30"
        assert r.bsub[r.bsub.index("-o") + 1] == f"{tmp_path}/{r.job_name}.%J.lsf.out"
    assert "-w" not in first.bsub  # rank 0
    assert second.bsub[second.bsub.index("-w") + 1] == f"started({first.job_name})"
    assert ps.bsub[ps.bsub.index("-w") + 1] == f"started({first.job_name})"
    script = second.script
    assert f"export TX_APP_ID={req.app_id}" in script and "export TX_REPLICA_ID=1" in script
    assert "export TX_ROLE_IDX=0" in script and "export FOO='x y'" in script
    assert f"tx_argv=(python -c 'print('\"'\"'a b'\"'\"')' {req.app_id})" in script  # ${app_id} filled in
    text = repr(req)
    assert "for OpenLava 4" in text and text.count("<<'TX_SCRIPT'") == 3


def test_lsf10_gets_its_own_forms(tmp_path: Path) -> None:
    req = create_scheduler("tx", caps=LSF10).submit_dryrun(app(gpu=2), {"jobdir": str(tmp_path)}).request
    r = next(iter(req.replicas.values()))
    assert r.bsub[r.bsub.index("-M") + 1] == "1500MB"
    assert r.bsub[r.bsub.index("-R") + 1] == "span[hosts=1] rusage[mem=1500MB]"
    assert r.bsub[r.bsub.index("-gpu") + 1] == "num=2"


def test_gpu_on_openlava_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="only IBM LSF 10 has"):
        create_scheduler("tx", caps=OPENLAVA).submit_dryrun(app(gpu=1), {"jobdir": str(tmp_path)})


@pytest.mark.parametrize("key,value", [("time", "soon"), ("lsf_queue", "a b"), ("select", "mem>1] rusage[x"),
                                       ("host", ""), ("jobdir", " ")])
def test_bad_run_options(key: str, value: str, tmp_path: Path) -> None:
    with pytest.raises(InvalidRunConfigException, match=key):
        create_scheduler("tx", caps=OPENLAVA).submit_dryrun(app(), {"jobdir": str(tmp_path), key: value})


def test_mounts_are_refused(tmp_path: Path) -> None:
    from tx.specs import BindMount

    a = app()
    a.roles[0].mounts = [BindMount("/a", "/b")]
    with pytest.raises(ValueError, match="supports no mounts"):
        create_scheduler("tx", caps=OPENLAVA).submit_dryrun(a, {"jobdir": str(tmp_path)})


BJOBS_L = """
Job Id <104>, Job Name <app-x-a-2>, User <root>, Project <app-x>, Status <PEND>
                     , Queue <normal>, Command <sleep 30>
Sat Nov 28 17:58:30: Submitted from host <vm>, CWD </tmp/h-lsf-exp>, Output Fil
                     e </dev/null>, Requested Resources <select[mem>100000000]>
                     ;
 PENDING REASONS:
 Job's resource requirements not satisfied: 1 host;

 SCHEDULING PARAMETERS:
           r15s   r1m  r15m   ut      pg    io   ls    it    tmp    swp    mem
------------------------------------------------------------------------------

Job Id <102>, Job Name <app-x-a-0>, User <root>, Project <app-x>, Status <EXIT>
                     , Queue <normal>, Command <sleep 30>
Sat Nov 28 17:58:30: Submitted from host <vm>, CWD </tmp/h-lsf-exp/a-very-long-d
                     irectory>, Output File </dev/null>;
Sat Nov 28 17:58:31: Started on <vm>, Execution Home </root>, Execution CWD </t
                     mp/h-lsf-exp>;
Sat Nov 28 17:58:35: Exited with exit code 130. The CPU time used is 0.0 second
                     s.
"""


def test_bjobs_l_parsing_joins_wrapped_lines() -> None:
    jobs = parse_bjobs_l(BJOBS_L)
    assert jobs["104"].pending == ["Job's resource requirements not satisfied: 1 host"]
    assert jobs["104"].project == "app-x" and jobs["104"].stat == "PEND" and jobs["104"].exit_code is None
    assert jobs["102"].cwd == "/tmp/h-lsf-exp/a-very-long-directory"
    assert jobs["102"].exit_code == 130 and jobs["102"].exec_host == "vm"


def _prt_line(line: str) -> str:
    """``line`` as OpenLava's ``bjobs -l`` prints it (lsbatch/cmd/cmd.misc.c ``prtLine``): at
    column 80 a newline and 21 spaces, and a space that comes next is skipped (not printed)."""
    out, cursor, i = [], 0, 0
    while i < len(line):
        if cursor == 80:
            out.append("\n" + " " * 21)
            cursor = 22
            if line[i] == " ":
                i += 1
        out.append(line[i])
        cursor = 1 if line[i] == "\n" else cursor + 1
        i += 1
    return "".join(out)


def test_bjobs_l_fields_wrapped_at_any_column() -> None:
    """The wrap falls wherever the app's name puts it, also at the space before ``<`` of
    ``Project <...>`` (then dropped): every field is still read, for every name length. A
    ``tx list`` lost a finished app that way (c21: its jobs, ids of 3 digits, read without a
    project, in TestLsfConformance.test_fresh_process_sees_the_app)."""
    for n in range(1, 70):
        app = "p" * n
        text = "".join(_prt_line("\n" + ln) for ln in (  # prtHeader (cmd.job.c): "\nJob Id <%s>," ...
            f"Job Id <7>, Job Name <{app}-alpha-0>, User <root>, Project <{app}>, Status <EXIT>, Queue <normal>, "
            "Command <sleep 1>",
            "Sat Nov 28 17:58:30: Submitted from host <vm>, CWD </tmp/x>, Output File </dev/null>;",
            f"Sat Nov 28 17:58:31: Started on <vm{'m' * (n % 9)}>, Execution Home </root>, Execution CWD </tmp/x>;",
            f"Sat Nov 28 17:58:35: {'x' * (n % 40)} Exited with exit code 3. The CPU time used is unknown; "
            "TERM_OWNER: job killed by owner."))
        job = parse_bjobs_l(text)["7"]
        assert (job.name, job.project, job.stat, job.queue, job.cwd, job.exit_code, job.exec_host) == (
            f"{app}-alpha-0", app, "EXIT", "normal", "/tmp/x", 3, f"vm{'m' * (n % 9)}"), (n, text)
        # a space of a value's own text, dropped at the wrap, cannot be told apart: the words stay
        assert job.term_reason.replace(" ", "") == "TERM_OWNER:jobkilledbyowner", (n, job.term_reason)


def test_bjobs_w_parsing_and_states() -> None:
    jobs = parse_bjobs_w("107     root    RUN   normal     vm          vm:vm       pz-a-0     Nov 28 17:59\n"
                         "108     root    PEND  normal     vm             -        pz-a-1     Nov 28 17:59\n"
                         "No job found in project nosuch\n")
    assert [(j.job_id, j.stat, j.exec_host, j.name) for j in jobs] == [
        ("107", "RUN", "vm", "pz-a-0"), ("108", "PEND", "", "pz-a-1")]
    assert split_job_name("pz", "pz-a-b-1") == ("a-b", 1) and split_job_name("pz", "other-a-1") is None
    assert [appstate_from_lsf(s).name for s in ("PEND", "PSUSP", "RUN", "USUSP", "SSUSP", "DONE", "EXIT", "ZOMBI",
                                                 "UNKWN", "???")] == [
        "PENDING", "PENDING", "RUNNING", "RUNNING", "RUNNING", "SUCCEEDED", "FAILED", "UNKNOWN", "UNKNOWN", "UNKNOWN"]


def test_readme_has_the_run_options_table() -> None:
    readme = Path(__file__).resolve().parent.parent / "README.md"
    assert runopts_markdown() in readme.read_text(), "README.md run options table is stale:\n" + runopts_markdown()
