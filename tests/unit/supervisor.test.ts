import { readFileSync, statSync, existsSync, mkdtempSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pino } from "pino";
import { expect, test } from "vitest";
import { curveKeyPair } from "zeromq";
import { isLocalEndpoint, replicaEndpoint, Supervisor, type ConnectionInfo } from "../../bridge/fronts/zmq/supervisor.js";
import { BridgeClient, BridgeError } from "../../agent/bridge-client.js";
import { PROTOCOL_VERSION } from "../../protocol/messages.js";
import { FIXTURES } from "../helpers.js";

const silent = pino({ level: "silent" });
const ref = [
  { name: "add_note", arguments: { user_id: "u2", title: "todo", body: "call mom" } },
  { name: "delete_note", arguments: { note_id: "n1" } },
];

/** The replica at `endpoint` once it answers as an instance other than `before` (undefined after ~10 s). */
async function restarted(endpoint: string, before: string): Promise<{ instance: string } | undefined> {
  for (let i = 0; i < 100; i++) {
    // a fresh short-timeout probe: a request sent into the dying connection is simply lost
    const probe = new BridgeClient(endpoint, { timeoutMs: 1000 });
    const hello = (await probe.request("hello").catch(() => undefined)) as { instance: string } | undefined;
    probe.close();
    if (hello && hello.instance !== before) return hello;
    await new Promise((r) => setTimeout(r, 100));
  }
  return undefined;
}

test("replica endpoints and which ones need CurveZMQ", () => {
  expect(replicaEndpoint("tcp://127.0.0.1:5555", 2)).toBe("tcp://127.0.0.1:5557");
  expect(replicaEndpoint("tcp://127.0.0.1:*", 1)).toBe("tcp://127.0.0.1:*");
  expect(replicaEndpoint("ipc:///tmp/b.sock", 1)).toBe("ipc:///tmp/b.sock.1");
  expect(isLocalEndpoint("tcp://127.0.0.1:5555")).toBe(true);
  expect(isLocalEndpoint("tcp://0.0.0.0:5555")).toBe(false);
  expect(isLocalEndpoint("tcp://10.1.2.3:5555")).toBe(false);
  expect(() => replicaEndpoint("udp://x:1", 0)).toThrow(/unsupported endpoint/);
});

test("a killed replica is restarted; its sessions are lost with a typed error, the other replica's are untouched", async () => {
  const file = join(mkdtempSync(join(tmpdir(), "envscaler-sup-")), "bridge.json");
  const sup = new Supervisor({ envs: [FIXTURES], endpoint: "tcp://127.0.0.1:*", replicas: 2, connectionFile: file, logger: silent });
  const info = await sup.start();
  const clients = info.endpoints.map((e) => new BridgeClient(e, { timeoutMs: 30_000 }));
  try {
    const onFile = JSON.parse(readFileSync(file, "utf8")) as ConnectionInfo;
    expect(onFile).toEqual(info);
    expect(statSync(file).mode & 0o777).toBe(0o600);
    expect(info.endpoints).toHaveLength(2);
    const [a, b] = await Promise.all(clients.map((c) => c.request<{ session_id: string }>("reset", { scenario_id: "notes-1", seed: 1 })));
    await Promise.all(clients.map((c, i) => c.request("step", { session_id: [a, b][i]!.session_id, action: ref[0] })));
    const before = await clients[0]!.request<{ instance: string }>("hello");

    process.kill(sup.pids()[0]!, "SIGKILL");
    // the survivor keeps stepping while replica 0 is down
    const end = await clients[1]!.request("step", { session_id: b!.session_id, action: ref[1] });
    expect(end).toMatchObject({ terminated: false });
    // replica 0 comes back on the same endpoint with a new instance
    const after = await restarted(info.endpoints[0]!, before.instance);
    expect(after?.instance).toBeDefined();
    expect(after!.instance).not.toBe(before.instance);
    const lost = await clients[0]!.request("step", { session_id: a!.session_id, action: ref[1] }).catch((e: BridgeError) => e);
    expect(lost).toBeInstanceOf(BridgeError);
    expect((lost as BridgeError).code).toBe("session_lost");
    // the replica itself reports the restart: a watcher that never saw the first instance still counts it
    expect(await clients[0]!.request("stats")).toMatchObject({ instance: after!.instance, restarts: 1 });
    expect(await clients[1]!.request("stats")).toMatchObject({ restarts: 0 });
    // closing what the restart already ended is not an error
    expect(await clients[0]!.request("close", { session_id: a!.session_id })).toEqual({ closed: true });
    const done = await clients[1]!.request("step", { session_id: b!.session_id, action: "Done." });
    expect(done).toMatchObject({ reward: 1, terminated: true });
    // and the restarted replica serves new episodes
    expect(await clients[0]!.request("reset", { scenario_id: "notes-1" })).toHaveProperty("session_id");
  } finally {
    for (const c of clients) c.close();
    await sup.stop();
  }
  expect(existsSync(file)).toBe(false);
});

test("a native hang on a replica's serving thread ends only its episode; without the fuel checks the replica's watchdog exits it and it is restarted", async () => {
  const envs = [FIXTURES, join(FIXTURES, "..", "hostile")];
  // with the fuel checks (the default): the hang is stopped at its deadline in its own sandbox
  const sup = new Supervisor({ envs, endpoint: "tcp://127.0.0.1:*", replicas: 1, hardStopGraceMs: 300, logger: silent });
  const info = await sup.start();
  const c = new BridgeClient(info.endpoints[0]!, { timeoutMs: 30_000 });
  try {
    const by = await c.request<{ session_id: string }>("reset", { scenario_id: "notes-1", seed: 1 });
    const h = await c.request<{ session_id: string }>("reset", { scenario_id: "hostile-1", seed: 1 });
    const hung = await c.request("step", { session_id: h.session_id, action: { name: "native_hang", arguments: {} } });
    expect(hung).toMatchObject({ terminated: true, info: { error: { code: "env_timeout" } } });
    expect(await c.request("step", { session_id: by.session_id, action: ref[0] })).toMatchObject({ terminated: false });
    expect(await c.request("stats")).toMatchObject({ restarts: 0, hard_stops: 0, lost: 0 });
  } finally {
    c.close();
    await sup.stop();
  }
  // without them (ENVSCALER_NO_FUEL=1, which the replica processes inherit): the builtin overruns
  // its deadline on the serving thread, and the main thread's watchdog exits the replica
  process.env.ENVSCALER_NO_FUEL = "1";
  const bare = new Supervisor({ envs, endpoint: "tcp://127.0.0.1:*", replicas: 1, hardStopGraceMs: 300, logger: silent });
  const binfo = await bare.start().finally(() => delete process.env.ENVSCALER_NO_FUEL);
  const client = new BridgeClient(binfo.endpoints[0]!, { timeoutMs: 3000 });
  try {
    const before = await client.request<{ instance: string }>("hello");
    const by = await client.request<{ session_id: string }>("reset", { scenario_id: "notes-1", seed: 1 });
    const h = await client.request<{ session_id: string }>("reset", { scenario_id: "hostile-1", seed: 1 });
    const pid = bare.pids()[0];
    // the reply is lost with the process (the client's own timeout ends the wait)
    await expect(client.request("step", { session_id: h.session_id, action: { name: "native_hang", arguments: {} } })).rejects.toBeInstanceOf(Error);
    expect((await restarted(binfo.endpoints[0]!, before.instance))?.instance).toBeDefined();
    expect(bare.pids()[0]).not.toBe(pid);
    // that replica's sessions are lost, with the typed error
    const fresh = new BridgeClient(binfo.endpoints[0]!, { timeoutMs: 10_000 });
    try {
      await expect(fresh.request("step", { session_id: by.session_id, action: ref[0] })).rejects.toMatchObject({ code: "session_lost" });
      expect(await fresh.request("reset", { scenario_id: "notes-1" })).toHaveProperty("session_id");
    } finally {
      fresh.close();
    }
  } finally {
    client.close();
    await bare.stop();
  }
}, 60_000);

test("CurveZMQ: the connection file's client key is served; unlisted keys and plaintext clients get nothing", async () => {
  const file = join(mkdtempSync(join(tmpdir(), "envscaler-sup-")), "bridge.json");
  const sup = new Supervisor({ envs: [FIXTURES], endpoint: "tcp://127.0.0.1:*", replicas: 1, curve: true, connectionFile: file, logger: silent });
  const info = await sup.start();
  const endpoint = info.endpoints[0]!;
  const curve = info.curve!;
  expect(curve.server_public_key).toHaveLength(40);
  const allowed = new BridgeClient(endpoint, { timeoutMs: 10_000, curve: { serverPublicKey: curve.server_public_key, publicKey: curve.client_public_key, secretKey: curve.client_secret_key } });
  const stranger = new BridgeClient(endpoint, { timeoutMs: 1500, curve: { serverPublicKey: curve.server_public_key, ...curveKeyPair() } });
  const plain = new BridgeClient(endpoint, { timeoutMs: 1500 });
  try {
    expect(await allowed.request("hello")).toMatchObject({ protocol_version: PROTOCOL_VERSION });
    expect(await stranger.request("hello").catch((e: BridgeError) => e.code)).toBe("timeout");
    expect(await plain.request("hello").catch((e: BridgeError) => e.code)).toBe("timeout");
    expect(await allowed.request("reset", { scenario_id: "notes-1" })).toHaveProperty("session_id");
  } finally {
    for (const c of [allowed, stranger, plain]) c.close();
    await sup.stop();
  }
});

test("warmSessions: a replica readies sandboxes before it serves; a burst that size is served, and requests are timed to their arrival", async () => {
  const sup = new Supervisor({ envs: [FIXTURES], endpoint: "tcp://127.0.0.1:*", replicas: 1, workers: 2, warmSessions: 6, logger: silent });
  const client = new BridgeClient((await sup.start()).endpoints[0]!, { timeoutMs: 30_000 });
  try {
    const t = performance.now();
    const opened = await Promise.all(Array.from({ length: 6 }, (_, i) => client.requestTimed<{ session_id: string }>("reset", { scenario_id: "notes-1", seed: i })));
    const wall = performance.now() - t;
    for (const o of opened) expect(o.ms > 0 && o.ms <= wall).toBe(true);
    const steps = await Promise.all(opened.map((o) => client.request<{ terminated: boolean }>("step", { session_id: o.value.session_id, action: ref[0] })));
    expect(steps.map((x) => x.terminated)).toEqual(Array(6).fill(false));
  } finally {
    client.close();
    await sup.stop();
  }
});

test("a replica that cannot be kept running is given up on, and the owner is told", async () => {
  let gaveUp = -1;
  const sup = new Supervisor({ envs: [FIXTURES], endpoint: "tcp://127.0.0.1:*", replicas: 1, maxRestartsPerMinute: 0, onGiveUp: (r) => (gaveUp = r), logger: silent });
  await sup.start();
  try {
    process.kill(sup.pids()[0]!, "SIGKILL");
    for (let i = 0; i < 50 && gaveUp < 0; i++) await new Promise((r) => setTimeout(r, 100));
    expect(gaveUp).toBe(0);
    expect(sup.pids()[0]).toBeUndefined();
  } finally {
    await sup.stop();
  }
});

test("`envscaler serve` takes the limits from its flags and exits 1 when a replica cannot be kept running", async () => {
  const { spawn, execFileSync } = await import("node:child_process");
  const cli = join(import.meta.dirname, "..", "..", "cli", "main.ts");
  // node itself, not npx: the child is the supervisor, and its child is the replica
  const serve = spawn(process.execPath, ["--import", "tsx", cli, "serve", "--envs", FIXTURES, "--endpoint", "tcp://127.0.0.1:*", "--no-record", "--max-in-flight", "7", "--max-restarts-per-minute", "0", "--max-snapshots", "5", "--max-action-bytes", "2000", "--quarantine-after", "3", "--max-episode-input-mb", "2", "--max-snapshot-mb", "3"], { stdio: ["ignore", "pipe", "pipe"] });
  let log = "";
  serve.stderr.on("data", (d: Buffer) => (log += d.toString()));
  const exited = new Promise<number | null>((resolve) => serve.once("exit", (code) => resolve(code)));
  try {
    const endpoints = await new Promise<string[]>((resolve, reject) => {
      let out = "";
      serve.stdout.on("data", (d: Buffer) => {
        out += d.toString();
        const line = out.split("\n").find((l) => l.startsWith('{"serving"'));
        if (line) resolve((JSON.parse(line) as { serving: string[] }).serving);
      });
      void exited.then((code) => reject(new Error(`serve exited with ${code} before serving`)));
      setTimeout(() => reject(new Error(`serve did not report serving within 30 s; stdout: ${out}`)), 30_000).unref();
    });
    const client = new BridgeClient(endpoints[0]!, { timeoutMs: 10_000 });
    try {
      const hello = await client.request<{ limits: Record<string, number> }>("hello", {});
      expect(hello.limits).toMatchObject({ max_in_flight: 7, max_snapshots_per_episode: 5, max_action_bytes: 2000, quarantine_after: 3, max_episode_input_bytes: 2 << 20, max_snapshot_bytes: 3 << 20 });
    } finally {
      client.close();
    }
    // the supervisor's replica children (there is one); tsx may also run its esbuild service as a child
    const replicas = execFileSync("pgrep", ["-P", String(serve.pid), "-f", "replica-main"], { encoding: "utf8" }).trim().split("\n").map(Number);
    expect(replicas).toHaveLength(1);
    process.kill(replicas[0]!, "SIGKILL");
    const timeout = new Promise<string>((resolve) => setTimeout(() => resolve("still running 20 s after its replica died"), 20_000).unref());
    expect(await Promise.race([exited, timeout]), log).toBe(1);
  } finally {
    serve.kill("SIGKILL");
  }
}, 60_000);
