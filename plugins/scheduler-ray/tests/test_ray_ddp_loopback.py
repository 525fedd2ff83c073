"""A two-replica gloo DDP run on a Ray node whose host name resolves to loopback.

Debian's default ``/etc/hosts`` maps the machine's name to 127.0.1.1 while Ray hands out
the node's network address: ``TX_RANK0_HOST`` is that address, torchrun's guess of whether
it hosts the rendezvous store (endpoint == its host name or one of the addresses the name
resolves to) fails on every replica, and without ``dist.ddp``'s ``is_host`` nobody hosts
the store: both replicas time out connecting to ``(ADDRESS, PORT)`` after 60 s.

The test builds that machine in private namespaces, touching nothing outside them
(``unshare --net --mount --pid``, killed with the test): a network with only ``lo``, which
carries the node address :data:`NODE_ADDR` besides 127.0.0.1, an ``/etc/hosts`` bind-mounted
over with ``127.0.1.1 <hostname>``, a Ray head started with ``--node-ip-address=NODE_ADDR``,
and ``tx run -s ray dist.ddp -j 2x1 --script train.py`` against it. Everything in the
namespace dies with its first process (the pid namespace's init). The workers' store address
(``master_addr``, what the rendezvous-rank-0 agent advertises) must be the node address too:
the driver passes it as ``PET_LOCAL_ADDR``, else it is the host name, loopback elsewhere.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from tx.testing.backends import backend_unavailable, require_module

REPO = Path(__file__).resolve().parents[3]
BIN = Path(sys.executable).parent
#: the node's address inside the namespace (TEST-NET-2 benchmark range, never routed)
NODE_ADDR = "198.18.0.7"

pytestmark = pytest.mark.slow

#: builds the namespace's network and /etc/hosts, checks that the host name resolves to
#: loopback only, then runs "$@"
SETUP = r"""
set -eu
ip link set lo up
ip addr add "$NODE_ADDR/32" dev lo
printf '127.0.0.1 localhost\n127.0.1.1 %s\n' "$(hostname)" > "$WORK/hosts"
mount --bind "$WORK/hosts" /etc/hosts
"$PY" - <<'EOF'
import json, os, socket
name = socket.gethostname()
addrs = sorted({a[4][0] for a in socket.getaddrinfo(name, None)})
print("TX-NAMES " + json.dumps({"hostname": name, "resolves_to": addrs, "fqdn": socket.getfqdn()}))
EOF
"$@"
"""

#: starts the private head on NODE_ADDR, waits for its job API, runs the DDP job
RUN = r"""
export RAY_USAGE_STATS_ENABLED=0 RAY_ENABLE_WINDOWS_OR_OSX_CLUSTER=0
"$BIN/ray" start --head --block --node-ip-address="$NODE_ADDR" --num-cpus=4 --include-dashboard=true \
  --dashboard-host=127.0.0.1 --dashboard-port=8265 --temp-dir="$RAY_TMP" --disable-usage-stats \
  > "$WORK/ray-start.log" 2>&1 < /dev/null &
for _ in $(seq 240); do
  "$PY" -c "import urllib.request as u; u.urlopen('http://127.0.0.1:8265/api/jobs/', timeout=2)" 2>/dev/null && break
  sleep 0.5
done
export RAY_ADDRESS=http://127.0.0.1:8265
set +e
cd "$WORK"
LOGLEVEL=INFO "$BIN/tx" run --log -s ray --workspace "$REPO/examples" dist.ddp -j 2x1 --cpu 1 --memMB 1024 \
  --script train.py -- --epochs 1 > "$WORK/run.out" 2> "$WORK/run.err"
echo "TX-RC $?"
"$BIN/tx" status --json "$(head -n 1 "$WORK/run.out")" > "$WORK/status.json" 2>> "$WORK/run.err"
"$PY" - "$(head -n 1 "$WORK/run.out")" > "$WORK/rank0.json" 2>> "$WORK/run.err" <<'EOF'
import json, sys
from tx_scheduler_ray.scheduler import create_scheduler
desc = create_scheduler("tx").describe(sys.argv[1].split("/", 3)[3])
print(json.dumps(desc.metadata["rank0"]))
EOF
"""


def _unshare(work: Path, *script: str, timeout: float, ray_tmp: str = "") -> subprocess.CompletedProcess:
    root = [] if os.geteuid() == 0 else ["--user", "--map-root-user"]
    env = {k: v for k, v in os.environ.items() if not k.startswith(("TX_", "RAY_"))}
    env.update(PATH=f"{BIN}{os.pathsep}{env.get('PATH', '')}", HOME=str(work / "home"), WORK=str(work),
               NODE_ADDR=NODE_ADDR, PY=sys.executable, BIN=str(BIN), REPO=str(REPO),
               RAY_TMP=ray_tmp)
    argv = ["unshare", *root, "--net", "--mount", "--pid", "--fork", "--mount-proc", "--kill-child",
            "bash", "-c", SETUP, "setup", *script]
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout)


def test_ddp_2x1_on_a_host_name_that_resolves_to_loopback(tmp_path: Path) -> None:
    require_module("torch", "the DDP app runs torchrun: pip install torch==2.13.0")
    require_module("sklearn", "examples/train.py trains on its digits: pip install scikit-learn")
    if not (BIN / "ray").exists():
        backend_unavailable("ray", "the ray command is not installed: pip install 'ray[default]'")
    for tool in ("unshare", "ip", "mount"):
        if shutil.which(tool) is None:
            backend_unavailable("ray", f"{tool} is not installed (util-linux, iproute2): it builds the test's namespaces")
    probe = _unshare(tmp_path, "true", timeout=60)
    if probe.returncode != 0:
        backend_unavailable("ray", f"cannot make private network and mount namespaces: {probe.stderr.strip()[-300:]}")
    names = json.loads(next(ln for ln in probe.stdout.splitlines() if ln.startswith("TX-NAMES "))[9:])
    assert names["resolves_to"] == ["127.0.1.1"], names  # the case under test: the name is loopback only

    ray_tmp = Path(tempfile.mkdtemp(prefix="txray-", dir="/tmp"))  # Ray's socket paths stay short
    try:
        p = _unshare(tmp_path, "bash", "-c", RUN, "run", timeout=280, ray_tmp=str(ray_tmp))
    finally:
        shutil.rmtree(ray_tmp, ignore_errors=True)
    out, err = (tmp_path / "run.out").read_text(), (tmp_path / "run.err").read_text()
    where = f"\n--- run.out\n{out}\n--- run.err\n{err[-6000:]}\n--- unshare\n{p.stdout[-2000:]}{p.stderr[-2000:]}"
    assert "TX-RC 0" in p.stdout, where
    status = json.loads((tmp_path / "status.json").read_text())
    assert status["state"] == "SUCCEEDED", status
    # the rendezvous endpoint was the node address, which the host name does not resolve to
    assert json.loads((tmp_path / "rank0.json").read_text())["host"] == NODE_ADDR
    lines = err.splitlines()
    # (the job's stdout is tx's stdout: run.out after the handle)
    acc = [ln for ln in out.splitlines() + lines if "world_size=2 test_accuracy=" in ln]
    assert len(acc) == 1 and acc[0].startswith("train/0 "), where
    assert "timed out" not in err, where
    # the workers' store address (torchrun's agent logs it at INFO): the node address the
    # Ray driver gave as PET_LOCAL_ADDR, not the host name, which other hosts cannot reach
    masters = [ln.split()[0] + " " + ln.split("master_addr=")[1] for ln in lines if "master_addr=" in ln]
    assert sorted(masters) == [f"train/0 {NODE_ADDR}", f"train/1 {NODE_ADDR}"], where

