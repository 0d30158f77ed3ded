"""Run several command lines in this one interpreter through the real entry point (``prfaas_plan.cli.app.main``),
each with its own stdout and stderr files (file descriptors 1 and 2 redirected) and an alarm for hangs:
``python -m tests.hostile.cli_driver JOBS.json RESULTS.json`` where JOBS is a list of {argv, cwd}.
One start-up is paid for a whole row of the hostile-reader matrix instead of one per case."""

from __future__ import annotations

import json
import os
import signal
import sys
import tempfile
import traceback
from types import FrameType


class _Hang(BaseException):
    pass


def _alarm(signum: int, frame: FrameType | None) -> None:
    raise _Hang


def _one(argv: list[str], cwd: str, hang_s: int) -> dict[str, object]:
    from prfaas_plan.cli.app import main

    with tempfile.TemporaryFile() as err_file, tempfile.TemporaryFile() as out_file:
        sys.stdout.flush()
        sys.stderr.flush()
        saved = os.dup(1), os.dup(2)
        os.dup2(out_file.fileno(), 1)
        os.dup2(err_file.fileno(), 2)
        os.chdir(cwd)
        sys.argv = ["prfaas-plan", *argv]
        status: int | None = 0
        signal.alarm(hang_s)
        try:
            main()
        except SystemExit as done:
            status = done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
        except _Hang:
            status = None
        except BaseException:  # a traceback the real process would print
            traceback.print_exc()
            status = 1
        finally:
            signal.alarm(0)
            sys.stdout.flush()
            sys.stderr.flush()
            os.dup2(saved[0], 1)
            os.dup2(saved[1], 2)
            os.close(saved[0])
            os.close(saved[1])
        err_file.seek(0)
        stderr = err_file.read().decode("utf-8", "replace")
    return {"status": status, "stderr": stderr[-2000:]}


def main() -> None:
    jobs_path, results_path, hang_s = sys.argv[1], sys.argv[2], int(sys.argv[3])
    signal.signal(signal.SIGALRM, _alarm)
    with open(jobs_path, encoding="utf-8") as handle:
        jobs = json.load(handle)
    results = [_one(job["argv"], job["cwd"], hang_s) for job in jobs]
    with open(results_path, "w", encoding="utf-8") as handle:
        json.dump(results, handle)


if __name__ == "__main__":
    main()
