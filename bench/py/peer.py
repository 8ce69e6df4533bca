"""Load generator for the OpenEnv reference rows of `npm run bench`: drives our bridge (pyzmq +
msgpack, the wire protocol) or the OpenEnv server of openenv_library.py (its WebSocket protocol,
as EnvClient speaks it) through the same library tool calls, and prints one JSON result line.
Both are spoken to at the wire level with the same kind of client (sync for one session, one
request in flight per session for many), so client-side costs are alike.

Modes (--system ours|openenv):
  verify   play the same calls on both (--ours EP --openenv URL) and compare every tool result
  rtt      1 session, N steps cycling four read tools: p50/p99 in microseconds
  pipe     S sessions, one step in flight per session, for D seconds: env-steps/s
  reset    1 session reset N times in place: p50 in milliseconds
  burst    S open sessions all reset at once: resets/s
  memory   S live sessions: the server process's RSS growth per session (--server-pid)
  (pipe with --server-pid also reports the server process's CPU time per step)
  long     1 session, L steps cycling checkout/get_member/return/search: p50 at step ~10 vs ~L

With --client, rtt/reset/pipe/burst go through each system's own Python client instead of the
wire: ours through the envscaler package (python-client/, installed into the bench venv) (EnvScalerEnv for one session, EnvScalerVectorEnv for
many), OpenEnv through its EnvClient (openenv_library.LibraryClient). EnvClient is asyncio-only
(its `.sync()` wrapper runs the same coroutines on a loop thread of its own, one thread hop per
call), so one session is driven with `await client.step(...)` in one event loop and many with
one EnvClient per session under `asyncio.gather`, as its docs show.
  rtt      EnvScalerEnv.step vs `await LibraryClient.step`
  reset    EnvScalerEnv.reset() of the episode the previous reset started (a live episode) vs
           `await LibraryClient.reset(...)`
  pipe     EnvScalerVectorEnv(num_envs=S).step for D seconds vs S EnvClients stepping under gather
  burst    EnvScalerVectorEnv(num_envs=S).reset() of S live episodes vs S EnvClients' resets under gather
"""
import argparse
import asyncio
import json
import os
import time

import msgpack
import zmq

PROTOCOL_VERSION = 2  # docs/protocol.md; the bench speaks it raw, without the client package

# four read tools on the library's real state (no writes: the state stays the same forever)
READS = [
    {"name": "get_member", "arguments": {"member_id": "M013"}},
    {"name": "search_books", "arguments": {"query": "the"}},
    {"name": "list_member_loans", "arguments": {"member_id": "M013"}},
    {"name": "get_book", "arguments": {"book_id": "B006"}},
]
MEMBER, BOOK = "M009", "B003"  # an active member below the loan limit, a book with copies and no queue


def long_action(i, last_loan):
    """The i-th call of the long episode: a loan is made and returned every 4 calls, so records pile up."""
    k = i % 4
    if k == 0:
        return {"name": "checkout_book", "arguments": {"member_id": MEMBER, "book_id": BOOK}}
    if k == 1:
        return {"name": "get_member", "arguments": {"member_id": MEMBER}}
    if k == 2:
        return {"name": "return_book", "arguments": {"loan_id": last_loan}}
    return {"name": "search_books", "arguments": {"query": "the"}}


def pct(xs, p):
    s = sorted(xs)
    return s[min(len(s) - 1, int(len(s) * p))]


def cpu_s(pid):
    """User + system CPU seconds the process (all its threads) has used."""
    if not pid:
        return 0.0
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) * 1024
    raise RuntimeError("no VmRSS")


# ---------------------------------------------------------------- our bridge


class Ours:
    def __init__(self, endpoint, scenario):
        self.ctx = zmq.Context()
        self.sock = self.ctx.socket(zmq.DEALER)
        self.sock.setsockopt(zmq.LINGER, 0)
        self.sock.connect(endpoint)
        self.scenario = scenario
        self.rid = 0

    def send(self, op, **f):
        self.rid += 1
        self.sock.send(msgpack.packb({"v": PROTOCOL_VERSION, "id": self.rid, "op": op, **f}, use_bin_type=True))
        return self.rid

    def recv(self):
        raw = self.sock.recv()
        self.last_bytes = len(raw)
        r = msgpack.unpackb(raw, raw=False)
        if not r.get("ok", True):
            raise SystemExit(f"bridge error: {r['error']}")
        return r

    def call(self, op, **f):
        self.send(op, **f)
        return self.recv()["result"]

    def reset(self, sid=None):
        extra = {"session_id": sid} if sid else {}
        return self.call("reset", scenario_id=self.scenario, seed=0, **extra)["session_id"]

    def step(self, sid, action):
        """The tool's result, parsed (on the wire a tool step's text is in tool_results, once)."""
        r = self.call("step", session_id=sid, action=action)
        return json.loads(r["observation"]["tool_results"][0]["content"])

    def close(self, sid):
        self.call("close", session_id=sid)

    def open_many(self, n):
        for _ in range(n):
            self.send("reset", scenario_id=self.scenario, seed=0)
        return [self.recv()["result"]["session_id"] for _ in range(n)]

    def reset_many(self, sids):
        for sid in sids:
            self.send("reset", scenario_id=self.scenario, seed=0, session_id=sid)
        for _ in sids:
            self.recv()

    def close_many(self, sids):
        for sid in sids:
            self.send("close", session_id=sid)
        for _ in sids:
            self.recv()

    def pipe(self, sessions, seconds, pid=None):
        sids = self.open_many(sessions)
        by_id, done = {}, 0
        c0 = cpu_s(pid)
        for i, sid in enumerate(sids):
            by_id[self.send("step", session_id=sid, action=READS[0])] = (i, 1)
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            if not self.sock.poll(1000):
                continue
            while True:
                try:
                    raw = self.sock.recv(zmq.NOBLOCK)
                except zmq.Again:
                    break
                r = msgpack.unpackb(raw, raw=False)
                if not r.get("ok", True):
                    raise SystemExit(f"bridge error: {r['error']}")
                i, k = by_id.pop(r["id"])
                done += 1
                by_id[self.send("step", session_id=sids[i], action=READS[k % 4])] = (i, k + 1)
        el = time.perf_counter() - t0
        c1 = cpu_s(pid)
        for _ in by_id:
            self.recv()
        self.close_many(sids)
        return done / el, (c1 - c0) / done


# ---------------------------------------------------------------- OpenEnv (its WebSocket protocol)


class OpenEnvSync:
    def __init__(self, url, scenario):
        from websockets.sync.client import connect

        self.ws = connect(url.replace("http://", "ws://") + "/ws", max_size=None)
        self.scenario = scenario

    def call(self, msg):
        self.ws.send(json.dumps(msg))
        r = json.loads(self.ws.recv())
        if r.get("type") == "error":
            raise SystemExit(f"openenv error: {r['data']}")
        return r["data"]

    def reset(self):
        return self.call({"type": "reset", "data": {"seed": 0, "scenario_id": self.scenario}})

    def step(self, action):
        d = self.call({"type": "step", "data": {"tool": action["name"], "arguments": action["arguments"]}})
        return json.loads(d["observation"]["content"])

    def close(self):
        try:
            self.ws.send(json.dumps({"type": "close"}))
        finally:
            self.ws.close()


async def oe_open(url, scenario, n):
    from websockets.asyncio.client import connect

    conns = []
    for _ in range(n):  # one connection (one server-side session) each, opened one by one as EnvClient does
        ws = await connect(url.replace("http://", "ws://") + "/ws", max_size=None)
        conns.append(ws)
    await asyncio.gather(*(oe_call(ws, {"type": "reset", "data": {"seed": 0, "scenario_id": scenario}}) for ws in conns))
    return conns


async def oe_call(ws, msg):
    await ws.send(json.dumps(msg))
    r = json.loads(await ws.recv())
    if r.get("type") == "error":
        raise SystemExit(f"openenv error: {r['data']}")
    return r["data"]


async def oe_close(conns):
    for ws in conns:
        try:
            await ws.send(json.dumps({"type": "close"}))
        except Exception:
            pass
        await ws.close()


async def oe_pipe(url, scenario, sessions, seconds, pid=None):
    conns = await oe_open(url, scenario, sessions)
    done = 0
    c0 = cpu_s(pid)
    stop = time.perf_counter() + seconds

    async def loop(ws):
        nonlocal done
        k = 0
        while time.perf_counter() < stop:
            a = READS[k % 4]
            await oe_call(ws, {"type": "step", "data": {"tool": a["name"], "arguments": a["arguments"]}})
            k += 1
            done += 1

    t0 = time.perf_counter()
    await asyncio.gather(*(loop(ws) for ws in conns))
    el = time.perf_counter() - t0
    c1 = cpu_s(pid)
    await oe_close(conns)
    return done / el, (c1 - c0) / done


async def oe_burst(url, scenario, sessions):
    conns = await oe_open(url, scenario, sessions)
    t0 = time.perf_counter()
    await asyncio.gather(*(oe_call(ws, {"type": "reset", "data": {"seed": 0, "scenario_id": scenario}}) for ws in conns))
    el = time.perf_counter() - t0
    await oe_close(conns)
    return sessions / el


async def oe_memory(url, scenario, sessions, pid):
    warm = await oe_open(url, scenario, 1)
    await oe_close(warm)
    await asyncio.sleep(0.3)
    before = rss(pid)
    conns = await oe_open(url, scenario, sessions)
    for ws in conns:  # one step each: the session is live, its state touched
        await oe_call(ws, {"type": "step", "data": {"tool": READS[0]["name"], "arguments": READS[0]["arguments"]}})
    await asyncio.sleep(0.3)
    after = rss(pid)
    await oe_close(conns)
    return (after - before) / sessions


# ---------------------------------------------------------------- through the clients users call


def ours_client_rtt(endpoint, scenario, n):
    from envscaler import EnvScalerEnv

    env = EnvScalerEnv(endpoint, scenario_ids=[scenario])
    env.reset(seed=0)
    try:
        for i in range(200):  # warm-up
            env.step(READS[i % 4])
        lat = []
        c0 = time.process_time()
        for i in range(n):
            t0 = time.perf_counter_ns()
            env.step(READS[i % 4])
            lat.append((time.perf_counter_ns() - t0) / 1000)
        cpu = (time.process_time() - c0) / n
    finally:
        env.close()
    return lat, cpu


def ours_client_reset(endpoint, scenario, n):
    from envscaler import EnvScalerEnv

    env = EnvScalerEnv(endpoint, scenario_ids=[scenario])
    env.reset(seed=0)
    try:
        for _ in range(20):
            env.reset()
        lat = []
        for _ in range(n):
            t0 = time.perf_counter_ns()
            env.reset()  # the episode the previous reset started is live: a Gymnasium user's reset
            lat.append((time.perf_counter_ns() - t0) / 1e6)
    finally:
        env.close()
    return lat


def ours_client_pipe(endpoint, scenario, sessions, seconds, pid=None):
    from envscaler import EnvScalerVectorEnv

    vec = EnvScalerVectorEnv(endpoint, sessions, scenario_ids=[scenario])
    try:
        vec.reset(seed=0)
        k, rounds = 0, 0
        c0, m0 = cpu_s(pid), time.process_time()
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            vec.step([READS[(k + i) % 4] for i in range(sessions)])
            k += 1
            rounds += 1
        el = time.perf_counter() - t0
        c1, m1 = cpu_s(pid), time.process_time()
    finally:
        vec.close()
    done = rounds * sessions
    return done / el, (c1 - c0) / done, (m1 - m0) / done


def ours_client_burst(endpoint, scenario, sessions):
    from envscaler import EnvScalerVectorEnv

    vec = EnvScalerVectorEnv(endpoint, sessions, scenario_ids=[scenario])
    try:
        vec.reset(seed=0)  # opens the sessions; each now holds a live episode
        t0 = time.perf_counter()
        vec.reset()
        el = time.perf_counter() - t0
    finally:
        vec.close()
    return sessions / el


def _oe_action(a):
    from openenv_library import LibraryAction

    return LibraryAction(tool=a["name"], arguments=a["arguments"])


async def oe_client_rtt(url, scenario, n):
    from openenv_library import LibraryClient

    async with LibraryClient(base_url=url) as c:
        await c.reset(seed=0, scenario_id=scenario)
        for i in range(200):
            await c.step(_oe_action(READS[i % 4]))
        lat = []
        c0 = time.process_time()
        for i in range(n):
            t0 = time.perf_counter_ns()
            await c.step(_oe_action(READS[i % 4]))
            lat.append((time.perf_counter_ns() - t0) / 1000)
        cpu = (time.process_time() - c0) / n
    return lat, cpu


async def oe_client_reset(url, scenario, n):
    from openenv_library import LibraryClient

    async with LibraryClient(base_url=url) as c:
        for _ in range(21):
            await c.reset(seed=0, scenario_id=scenario)
        lat = []
        for _ in range(n):
            t0 = time.perf_counter_ns()
            await c.reset(seed=0, scenario_id=scenario)
            lat.append((time.perf_counter_ns() - t0) / 1e6)
    return lat


async def oe_clients_open(url, scenario, n):
    from openenv_library import LibraryClient

    clients = []
    for _ in range(n):  # connected one by one, as oe_open does
        clients.append(await LibraryClient(base_url=url).connect())
    await asyncio.gather(*(c.reset(seed=0, scenario_id=scenario) for c in clients))
    return clients


async def oe_clients_close(clients):
    for c in clients:
        await c.close()


async def oe_client_pipe(url, scenario, sessions, seconds, pid=None):
    clients = await oe_clients_open(url, scenario, sessions)
    done = 0
    c0 = cpu_s(pid)
    stop = time.perf_counter() + seconds

    async def loop(c, i):
        nonlocal done
        k = 0
        while time.perf_counter() < stop:
            await c.step(_oe_action(READS[(k + i) % 4]))
            k += 1
            done += 1

    m0 = time.process_time()
    t0 = time.perf_counter()
    await asyncio.gather(*(loop(c, i) for i, c in enumerate(clients)))
    el = time.perf_counter() - t0
    c1, m1 = cpu_s(pid), time.process_time()
    await oe_clients_close(clients)
    return done / el, (c1 - c0) / done, (m1 - m0) / done


async def oe_client_burst(url, scenario, sessions):
    clients = await oe_clients_open(url, scenario, sessions)
    t0 = time.perf_counter()
    await asyncio.gather(*(c.reset(seed=0, scenario_id=scenario) for c in clients))
    el = time.perf_counter() - t0
    await oe_clients_close(clients)
    return sessions / el


def through_client(a, out):
    """The --client modes: the same measures as the wire modes, through each system's client."""
    ours = a.system == "ours"
    if a.mode == "rtt":
        lat, cpu = ours_client_rtt(a.endpoint, a.scenario, a.n) if ours else asyncio.run(oe_client_rtt(a.endpoint, a.scenario, a.n))
        out.update(p50_us=pct(lat, 0.5), p99_us=pct(lat, 0.99), n=a.n, client_cpu_us_per_step=cpu * 1e6)
    elif a.mode == "reset":
        lat = ours_client_reset(a.endpoint, a.scenario, a.n) if ours else asyncio.run(oe_client_reset(a.endpoint, a.scenario, a.n))
        # the mean too: ours scores the ended episode after replying, and in this loop (no think
        # time between resets) the scoring can fall behind, when resets score in line (p90, mean)
        out.update(p50_ms=pct(lat, 0.5), p90_ms=pct(lat, 0.9), p99_ms=pct(lat, 0.99), mean_ms=sum(lat) / len(lat), n=a.n)
    elif a.mode == "pipe":
        args = (a.endpoint, a.scenario, a.sessions, a.seconds, a.server_pid)
        rate, cpu, mine = ours_client_pipe(*args) if ours else asyncio.run(oe_client_pipe(*args))
        out.update(steps_per_s=rate, server_cpu_us_per_step=cpu * 1e6 if a.server_pid else None, client_cpu_us_per_step=mine * 1e6)
    elif a.mode == "burst":
        out["resets_per_s"] = ours_client_burst(a.endpoint, a.scenario, a.sessions) if ours else asyncio.run(oe_client_burst(a.endpoint, a.scenario, a.sessions))
    else:
        raise SystemExit(f"--client does not apply to {a.mode}")
    out["client"] = True


# ---------------------------------------------------------------- modes


def run_long(step, steps):
    lat, loan, fails = [], None, 0
    for i in range(steps):
        a = long_action(i, loan)
        t0 = time.perf_counter_ns()
        r = step(a)
        lat.append((time.perf_counter_ns() - t0) / 1000)
        if not r.get("success"):
            fails += 1
        if a["name"] == "checkout_book" and r.get("success"):
            loan = r["data"]["loan_id"]
    early, late = lat[:20], lat[-20:]
    return {"early_p50_us": pct(early, 0.5), "late_p50_us": pct(late, 0.5), "steps": steps, "failed_calls": fails}


def verify(ours_ep, oe_url, scenario):
    """Same calls on both, every tool result compared (as parsed JSON: 23 and 23.0 are equal)."""
    from openenv_library import LibraryAction, LibraryClient

    with open(os.path.join(os.path.dirname(__file__), "..", "..", "envs", "library", "scenarios.json")) as f:
        ref = next(s for s in json.load(f) if s["id"] == scenario)["reference_actions"]
    seqs = [ref, READS * 2]
    o = Ours(ours_ep, scenario)
    compared, mismatches = 0, []

    async def peer(seq, long_steps):
        out = []
        async with LibraryClient(base_url=oe_url) as c:  # the documented client, to prove it works here
            await c.reset(scenario_id=scenario)
            for a in seq:
                out.append(json.loads((await c.step(LibraryAction(tool=a["name"], arguments=a["arguments"]))).observation.content))
            loan = None
            for i in range(long_steps):
                a = long_action(i, loan)
                r = json.loads((await c.step(LibraryAction(tool=a["name"], arguments=a["arguments"]))).observation.content)
                if a["name"] == "checkout_book" and r.get("success"):
                    loan = r["data"]["loan_id"]
                out.append(r)
        return out

    for seq, long_steps in ((seqs[0], 0), (seqs[1], 12)):
        sid = o.reset()
        mine = [o.step(sid, a) for a in seq]
        loan = None
        for i in range(long_steps):
            a = long_action(i, loan)
            r = o.step(sid, a)
            if a["name"] == "checkout_book" and r.get("success"):
                loan = r["data"]["loan_id"]
            mine.append(r)
        o.close(sid)
        theirs = asyncio.run(peer(seq, long_steps))
        for i, (x, y) in enumerate(zip(mine, theirs)):
            compared += 1
            if x != y:
                mismatches.append({"call": i, "ours": x, "openenv": y})
    return {"compared": compared, "identical": compared - len(mismatches), "mismatches": mismatches[:3]}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("mode", choices=["verify", "rtt", "pipe", "reset", "burst", "memory", "long"])
    p.add_argument("--system", choices=["ours", "openenv"])
    p.add_argument("--endpoint", help="our bridge's zmq endpoint, or the OpenEnv server's http://host:port")
    p.add_argument("--ours")
    p.add_argument("--openenv")
    p.add_argument("--scenario", default="library-1")
    p.add_argument("--n", type=int, default=1000)
    p.add_argument("--sessions", type=int, default=64)
    p.add_argument("--seconds", type=float, default=3.0)
    p.add_argument("--steps", type=int, default=1000)
    p.add_argument("--server-pid", type=int)
    p.add_argument("--client", action="store_true", help="through each system's own Python client (see above)")
    a = p.parse_args()
    out = {"mode": a.mode, "system": a.system}
    if a.mode == "verify":
        out.update(verify(a.ours, a.openenv, a.scenario))
        print(json.dumps(out))
        return
    if a.client:
        through_client(a, out)
        print(json.dumps(out))
        return
    ours = a.system == "ours"
    if a.mode in ("rtt", "reset", "long"):
        if ours:
            o = Ours(a.endpoint, a.scenario)
            sid = o.reset()
            step, reset, close = (lambda x: o.step(sid, x)), (lambda: o.reset(sid)), (lambda: o.close(sid))
        else:
            w = OpenEnvSync(a.endpoint, a.scenario)
            w.reset()
            step, reset, close = w.step, w.reset, w.close
        if a.mode == "rtt":
            for i in range(200):  # warm-up
                step(READS[i % 4])
            lat = []
            for i in range(a.n):
                t0 = time.perf_counter_ns()
                step(READS[i % 4])
                lat.append((time.perf_counter_ns() - t0) / 1000)
            out.update(p50_us=pct(lat, 0.5), p99_us=pct(lat, 0.99), n=a.n)
            if ours:
                out["reply_bytes"] = o.last_bytes
        elif a.mode == "reset":
            for _ in range(20):
                reset()
            lat = []
            for _ in range(a.n):
                t0 = time.perf_counter_ns()
                reset()
                lat.append((time.perf_counter_ns() - t0) / 1e6)
            out.update(p50_ms=pct(lat, 0.5), p99_ms=pct(lat, 0.99), n=a.n)
        else:
            reset()
            out.update(run_long(step, a.steps))
        close()
    elif a.mode == "pipe":
        rate, cpu = Ours(a.endpoint, a.scenario).pipe(a.sessions, a.seconds, a.server_pid) if ours else asyncio.run(oe_pipe(a.endpoint, a.scenario, a.sessions, a.seconds, a.server_pid))
        out.update(steps_per_s=rate, server_cpu_us_per_step=cpu * 1e6 if a.server_pid else None)
    elif a.mode == "burst":
        if ours:
            o = Ours(a.endpoint, a.scenario)
            sids = o.open_many(a.sessions)
            t0 = time.perf_counter()
            o.reset_many(sids)
            out["resets_per_s"] = a.sessions / (time.perf_counter() - t0)
            o.close_many(sids)
        else:
            out["resets_per_s"] = asyncio.run(oe_burst(a.endpoint, a.scenario, a.sessions))
    elif a.mode == "memory":
        if ours:
            o = Ours(a.endpoint, a.scenario)
            o.close(o.reset())
            time.sleep(0.3)
            before = rss(a.server_pid)
            sids = o.open_many(a.sessions)
            for sid in sids:
                o.send("step", session_id=sid, action=READS[0])
            for _ in sids:
                o.recv()
            time.sleep(0.3)
            out["bytes_per_session"] = (rss(a.server_pid) - before) / a.sessions
            o.close_many(sids)
        else:
            out["bytes_per_session"] = asyncio.run(oe_memory(a.endpoint, a.scenario, a.sessions, a.server_pid))
    print(json.dumps(out))


if __name__ == "__main__":
    main()
