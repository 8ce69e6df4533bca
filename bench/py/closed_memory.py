"""What a replica keeps after its sessions close (README, "Limits"): opens N sessions of library-1
at once on a fresh `envscaler serve` (each stepped once), closes them all, waits, and prints the
replica process's RSS at each point as one JSON line.

    .venv/bin/python bench/py/closed_memory.py [--sessions 1023] [--idle 30]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import time

from envscaler import BridgeClient


def rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status", encoding="utf-8") as f:
        for line in f:
            if line.startswith("VmRSS"):
                return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmRSS for {pid}")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--sessions", type=int, default=1023)
    ap.add_argument("--idle", type=float, default=30.0)
    a = ap.parse_args()
    serve = subprocess.Popen(
        ["node", "dist/cli/main.js", "serve", "--envs", "envs/library", "--endpoint", "tcp://127.0.0.1:*", "--no-record", "--max-sessions", str(a.sessions + 1)],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )
    try:
        endpoint = json.loads(serve.stdout.readline())["serving"][0]  # type: ignore[union-attr]
        time.sleep(1)
        replica = int(open(f"/proc/{serve.pid}/task/{serve.pid}/children", encoding="utf-8").read().split()[0])
        with BridgeClient(endpoint, timeout=60) as c:
            c.close_session(c.reset(scenario_id="library-1", seed=0)["session_id"])  # envs loaded, one instance made
            start = rss_mb(replica)
            sids = []
            for i in range(a.sessions):
                sid = c.reset(scenario_id="library-1", seed=i)["session_id"]
                c.step(sid, {"name": "get_book", "arguments": {"book_id": "B001"}})
                sids.append(sid)
            held = rss_mb(replica)
            for sid in sids:
                c.close_session(sid)
            closed = rss_mb(replica)
            time.sleep(a.idle)
            idle = rss_mb(replica)
        print(json.dumps({"sessions": a.sessions, "rss_start_mb": round(start), "all_open_mb": round(held), "after_closing_mb": round(closed), f"after_{a.idle:g}s_idle_mb": round(idle)}))
    finally:
        serve.terminate()
        serve.wait()


if __name__ == "__main__":
    main()
