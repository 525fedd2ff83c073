#!/usr/bin/env python3
"""aws_batch against a private moto_server (simple mode): what a user waits for.

    python bench/aws_batch_bench.py            # -n 5 rounds
    python bench/aws_batch_bench.py -n 3 --jobs 50 --lines 20000

The interpreter running this file needs tx-core, tx-scheduler-aws-batch and
``moto[server,batch,logs]`` (its ``moto_server`` is found next to it). moto runs on a free
port of 127.0.0.1 with its own queue; the environment points at it the way users configure
AWS (``AWS_ENDPOINT_URL``, ``AWS_DEFAULT_REGION``, keys), and it is stopped at the end.
Numbers are medians (min-max) of ``-n`` rounds in seconds; moto answers in-process in
microseconds, so they are tx's and boto3's own costs plus one local HTTP round trip per call,
not AWS's latency.

Cases:

* ``import_scheduler``: a fresh interpreter importing the scheduler module (boto3 included).
* ``cli_status``: ``tx status <handle>`` as a fresh process (registry, boto3, 2-3 calls).
* ``dryrun_5x100``: ``submit_dryrun`` of 5 roles x 100 replicas (no AWS call).
* ``submit``: ``register_job_definition`` + ``submit_job`` of a 2-role app.
* ``describe``: ``describe`` of a finished app (list_jobs by name, describe_jobs, node jobs).
* ``list_<jobs>``: ``list()`` with that many tx jobs in the queue.
* ``logs_<lines>``: ``log_iter`` of a replica whose stream holds that many lines (paged).
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request
from typing import Callable, Dict, List

from _common import free_port  # the benches' shared helpers (this directory is sys.path[0])



def timed(fn: Callable[[], object], n: int) -> List[float]:
    out = []
    for _ in range(n):
        t0 = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t0)
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=5)
    ap.add_argument("--jobs", type=int, default=50)
    ap.add_argument("--lines", type=int, default=20000)
    args = ap.parse_args()

    exe = shutil.which("moto_server", path=os.path.dirname(sys.executable) + os.pathsep + os.environ.get("PATH", ""))
    if exe is None:
        sys.exit("moto_server not found: pip install 'moto[server,batch,logs]'")
    port = free_port()
    work = tempfile.mkdtemp(prefix="tx-aws-bench-")
    log = open(os.path.join(work, "moto.log"), "wb")
    proc = subprocess.Popen([exe, "-H", "127.0.0.1", "-p", str(port)], stdout=log, stderr=subprocess.STDOUT,
                            start_new_session=True)
    endpoint = f"http://127.0.0.1:{port}"
    try:
        for _ in range(200):
            try:
                urllib.request.urlopen(f"{endpoint}/moto-api/", timeout=1).read()
                break
            except OSError:
                time.sleep(0.1)
        req = urllib.request.Request(f"{endpoint}/moto-api/config", data=json.dumps({"batch": {"use_docker": False}}).encode(),
                                     headers={"Content-Type": "application/json"}, method="POST")
        urllib.request.urlopen(req, timeout=10).read()
        os.environ.update({"AWS_ENDPOINT_URL": endpoint, "AWS_DEFAULT_REGION": "us-east-1",
                           "AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                           "AWS_CONFIG_FILE": os.path.join(work, "none"),
                           "AWS_SHARED_CREDENTIALS_FILE": os.path.join(work, "none")})
        return run(args, endpoint)
    finally:
        os.killpg(proc.pid, 15)
        proc.wait(timeout=10)
        log.close()
        shutil.rmtree(work, ignore_errors=True)


def run(args: argparse.Namespace, endpoint: str) -> int:
    import boto3

    from tx.specs import AppDef, Resource, Role
    from tx_scheduler_aws_batch.scheduler import create_scheduler

    iam, batch, logs = (boto3.client(s) for s in ("iam", "batch", "logs"))
    role_arn = iam.create_role(RoleName="bench", AssumeRolePolicyDocument="{}")["Role"]["Arn"]
    ce = batch.create_compute_environment(computeEnvironmentName="bench", type="UNMANAGED", state="ENABLED",
                                          serviceRole=role_arn)
    batch.create_job_queue(jobQueueName="bench", state="ENABLED", priority=1,
                           computeEnvironmentOrder=[{"order": 1, "computeEnvironment": ce["computeEnvironmentArn"]}])
    cfg = {"queue": "bench"}
    res = Resource(cpu=1, gpu=0, memMB=128)
    app = AppDef("bench", roles=[Role("a", image="i", entrypoint="echo", args=["a"], num_replicas=2, resource=res),
                                 Role("b", image="i", entrypoint="echo", args=["b"], resource=res)])
    big = AppDef("big", roles=[Role(f"r{i}", image="i", entrypoint="echo", num_replicas=100, resource=res) for i in range(5)])
    sched = create_scheduler("tx")
    results: Dict[str, List[float]] = {}
    n = args.n

    results["import_scheduler"] = timed(lambda: subprocess.run(
        [sys.executable, "-c", "import tx_scheduler_aws_batch.scheduler, boto3"], check=True), n)
    app_id = sched.submit(app, cfg)
    handle = f"aws_batch://tx/{app_id}"
    results["cli_status"] = timed(lambda: subprocess.run(
        [sys.executable, "-m", "tx.cli.main", "status", handle], check=True, capture_output=True), n)
    results["dryrun_5x100"] = timed(lambda: sched.submit_dryrun(big, cfg), n)
    results["submit"] = timed(lambda: sched.submit(app, cfg), n)
    results["describe"] = timed(lambda: sched.describe(app_id), n)
    while len(sched.list()) < args.jobs:
        sched.submit(app, cfg)
    results[f"list_{args.jobs}"] = timed(sched.list, n)

    # a replica's log stream with --lines lines, written as the awslogs driver would
    name = app_id.rsplit(":", 1)[1]
    job_id = batch.list_jobs(jobQueue="bench", filters=[{"name": "JOB_NAME", "values": [name]}])["jobSummaryList"][0]["jobId"]
    stream = batch.describe_jobs(jobs=[job_id])["jobs"][0]["container"]["logStreamName"]
    try:
        logs.create_log_group(logGroupName="/aws/batch/job")
    except logs.exceptions.ResourceAlreadyExistsException:
        pass
    logs.create_log_stream(logGroupName="/aws/batch/job", logStreamName=stream)
    t = int(time.time() * 1000)
    for i in range(0, args.lines, 10000):
        logs.put_log_events(logGroupName="/aws/batch/job", logStreamName=stream, logEvents=[
            {"timestamp": t + j, "message": f"line {j} " + "x" * 60} for j in range(i, min(args.lines, i + 10000))])
    count = []
    results[f"logs_{args.lines}"] = timed(lambda: count.append(sum(1 for _ in sched.log_iter(app_id, "a", 0))), n)
    assert count[-1] == args.lines, count

    print(f"aws_batch on moto_server (simple mode), n={n}, python {sys.version.split()[0]}")
    print("| case | median s | min-max s |")
    print("| --- | --- | --- |")
    for case, xs in results.items():
        print(f"| {case} | {statistics.median(xs):.3f} | {min(xs):.3f}-{max(xs):.3f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
