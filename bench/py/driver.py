"""Load generator for `npm run bench`: speaks the bridge protocol (or hits the echo floor) with
pyzmq + msgpack, as a Python trainer would, and prints one JSON result line.

Modes:
  rtt      one session, N sequential steps (or N echo round trips): p50/p99 in microseconds
  pipe     S sessions, one step in flight per session, for D seconds: steps/s
  batch    S sessions stepped by one step_batch per round, for D seconds: env-steps/s
"""
import argparse, json, time
import msgpack, zmq

PROTOCOL_VERSION = 2  # docs/protocol.md; the bench speaks it raw, without the client package

def pack(x):
    return msgpack.packb(x, use_bin_type=True)

def main():
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["rtt", "pipe", "batch"])
    p.add_argument("--endpoints", required=True, help="comma-separated")
    p.add_argument("--echo", action="store_true", help="the endpoints are echo servers (the floor)")
    p.add_argument("--scenario", default="library-1")
    p.add_argument("--action", default='{"name": "get_book", "arguments": {"book_id": "B001"}}')
    p.add_argument("--n", type=int, default=2000)
    p.add_argument("--sessions", type=int, default=64)
    p.add_argument("--seconds", type=float, default=3.0)
    a = p.parse_args()
    action = json.loads(a.action)
    ctx = zmq.Context()
    socks = []
    for e in a.endpoints.split(","):
        s = ctx.socket(zmq.DEALER)
        s.setsockopt(zmq.LINGER, 0)
        s.connect(e)
        socks.append(s)
    rid = [0]

    def send(s, op, **f):
        rid[0] += 1
        s.send(pack({"v": PROTOCOL_VERSION, "id": rid[0], "op": op, **f}))
        return rid[0]

    def recv(s):
        r = msgpack.unpackb(s.recv(), raw=False)
        if not r.get("ok", True):
            raise SystemExit(f"bridge error: {r['error']}")
        return r

    # sessions (the echo floor gets the same step frames, with a made-up session id)
    sessions = []  # (socket index, session id)
    n_sessions = 1 if a.mode == "rtt" else a.sessions
    for i in range(n_sessions):
        k = i % len(socks)
        if a.echo:
            sessions.append((k, f"s-echo-{i}"))
        else:
            send(socks[k], "reset", scenario_id=a.scenario, seed=i)
            sessions.append((k, recv(socks[k])["result"]["session_id"]))

    out = {"mode": a.mode, "echo": a.echo, "endpoints": len(socks), "sessions": n_sessions}
    if a.mode == "rtt":
        k, sid = sessions[0]
        s = socks[k]
        for _ in range(200):  # warm-up
            send(s, "step", session_id=sid, action=action); recv(s)
        lat = []
        for _ in range(a.n):
            t0 = time.perf_counter_ns()
            send(s, "step", session_id=sid, action=action)
            r = s.recv()
            lat.append((time.perf_counter_ns() - t0) / 1000)
        lat.sort()
        out.update(p50_us=lat[len(lat) // 2], p99_us=lat[int(len(lat) * 0.99)], n=a.n, reply_bytes=len(r))
    elif a.mode == "pipe":
        poller = zmq.Poller()
        for s in socks:
            poller.register(s, zmq.POLLIN)
        by_id = {}
        for idx, (k, sid) in enumerate(sessions):
            by_id[send(socks[k], "step", session_id=sid, action=action)] = idx
        done, t0 = 0, time.perf_counter()
        while time.perf_counter() - t0 < a.seconds:
            for s, _ in poller.poll(1000):
                while True:
                    try:
                        raw = s.recv(zmq.NOBLOCK)
                    except zmq.Again:
                        break
                    r = msgpack.unpackb(raw, raw=False)
                    idx = by_id.pop(r["id"])
                    done += 1
                    k, sid = sessions[idx]
                    by_id[send(socks[k], "step", session_id=sid, action=action)] = idx
        el = time.perf_counter() - t0
        out.update(steps_per_s=done / el, seconds=el)
    else:
        per = [[sid for (k2, sid) in sessions if k2 == k] for k in range(len(socks))]
        done, rounds, t0 = 0, 0, time.perf_counter()
        while time.perf_counter() - t0 < a.seconds:
            for k, sids in enumerate(per):
                send(socks[k], "step_batch", steps=[{"session_id": sid, "action": action} for sid in sids])
            for k, sids in enumerate(per):
                recv(socks[k])
                done += len(sids)
            rounds += 1
        el = time.perf_counter() - t0
        out.update(steps_per_s=done / el, rounds=rounds, seconds=el)
    if not a.echo:
        for k, sid in sessions:
            send(socks[k], "close", session_id=sid); recv(socks[k])
    print(json.dumps(out))

if __name__ == "__main__":
    main()
