"""Makes tests/data/flight/gloo-3ranks/ from a real run: `.venv/bin/python tests/data/flight/make_dumps.py`.

torchrun (the venv's) starts hang_gloo.py on 3 local ranks with gloo, rank 2 stuck before all-reduce #5, with the
environment `launch --flight-recorder` gives (jobs/environment.flight_recorder_env) and the stacks hook
(stacks/sitecustomize.py) first on PYTHONPATH. Once every rank is at step 5 it asks each rank's hook for its dump the
way stacks_node.sh does (live/fr-rank-<rank>.<pid>.request) and each rank's pickle (hang_gloo.py's PICKLE_DIR), copies
them here, and stops the job. See INDEX.md.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
sys.path.insert(0, str(ROOT))

from ascendctl.jobs.environment import flight_recorder_env  # noqa: E402
from ascendctl.stacks.hook import hook_source  # noqa: E402


def main() -> None:
    out = HERE / "gloo-3ranks"
    with tempfile.TemporaryDirectory() as tmp:
        node = Path(tmp) / "node"
        (node / "pyhook").mkdir(parents=True)
        (node / "pyhook" / "sitecustomize.py").write_text(hook_source())
        live = node / "stacks" / "live"
        ready, pickles = Path(tmp) / "ready", Path(tmp) / "pickles"
        ready.mkdir()
        pickles.mkdir()
        env = {**os.environ, **flight_recorder_env(str(live)), "PYTHONPATH": str(node / "pyhook"),
               "READY_DIR": str(ready), "PICKLE_DIR": str(pickles)}
        torchrun = Path(sys.executable).parent / "torchrun"
        job = subprocess.Popen([str(torchrun), "--nproc-per-node", "3", "--master-port", "29731",
                                str(HERE / "hang_gloo.py")], env=env, start_new_session=True)
        try:
            deadline = time.monotonic() + 120
            while len(list(ready.iterdir())) < 3:
                assert time.monotonic() < deadline and job.poll() is None, "the job did not reach step 5"
                time.sleep(0.2)
            time.sleep(1)  # ranks 0 and 1 enqueue all-reduce #5 right after touching their ready file
            ranks = [m.groups() for m in (re.match(r"rank-(\d+)\.(\d+)\.txt$", p.name) for p in live.iterdir()) if m]
            for rank, pid in ranks:
                (live / f"fr-rank-{rank}.{pid}.request").touch()
            while any((live / f"fr-rank-{r}.{p}.request").exists() for r, p in ranks):
                assert time.monotonic() < deadline, "no dump came"
                time.sleep(0.2)
            (pickles / "request").touch()
            while len(list(pickles.glob("torch-fr-rank-?"))) < 3:
                assert time.monotonic() < deadline, "no pickle came"
                time.sleep(0.2)
            shutil.rmtree(out, ignore_errors=True)
            out.mkdir()
            for rank, pid in ranks:  # the name stacks_node.sh keeps them under, pid made stable
                shutil.copy(live / f"fr-rank-{rank}.{pid}.json", out / f"rank-{rank}.{1000 + int(rank)}.fr.json")
            for path in pickles.glob("torch-fr-rank-?"):
                shutil.copy(path, out / path.name)
        finally:
            os.killpg(job.pid, signal.SIGKILL)
            for path in live.glob("rank-*.txt"):  # torchrun starts each worker in a session of its own
                try:
                    os.kill(int(path.name.split(".")[1]), signal.SIGKILL)
                except (ProcessLookupError, ValueError):
                    pass
            job.wait()
    print("\n".join(sorted(p.name for p in out.iterdir())))


if __name__ == "__main__":
    main()
