import { fork, type ChildProcess } from "node:child_process";
import { chmodSync, renameSync, rmSync, writeFileSync } from "node:fs";
import type { Logger } from "pino";
import { curveKeyPair } from "zeromq";
import { PROTOCOL_VERSION } from "../../../protocol/messages.js";
import type { UserSimulatorConfig } from "../../core/episode/user-simulator.js";
import type { ServerLimits } from "./bridge-server.js";
import type { EpisodeLimits, ReplicaConfig, ReplicaMessage } from "./replica-config.js";

export interface SupervisorOptions {
  envs: string[];
  /** Replica 0's endpoint; replica i uses the port + i (tcp) or the path + `.i` (ipc). A `*` or 0 port picks free ports. */
  endpoint: string;
  replicas: number;
  /** Engine worker threads per replica; 0: episodes run on the replica's serving thread (no thread hop). @default 0 */
  workers?: number;
  connectionFile?: string;
  limits?: Partial<ServerLimits>;
  user?: UserSimulatorConfig | null;
  /** Force CurveZMQ even on loopback. Non-loopback endpoints always use it. */
  curve?: boolean;
  /** Extra client public keys (Z85) allowed to connect under CurveZMQ. */
  curveAllow?: string[];
  /** Record every episode into per-replica files here; null or unset: no recording. */
  recordDir?: string | null;
  /** What a replica does when it cannot write a record. @default "refuse" */
  recordFailure?: "refuse" | "continue";
  /** Restarts of one replica (and, inside it, of one engine worker) within a minute before giving up on it. @default 10 */
  maxRestartsPerMinute?: number;
  /** How long past its own deadline a guest call may run before the watchdog stops its worker. @unit ms @default 1000 */
  hardStopGraceMs?: number;
  /** Episodes each replica readies sandboxes for before it serves (see RuntimeOptions.warmSessions). @default 0 */
  warmSessions?: number;
  /** Per-episode limits of every replica's runtime (snapshots, action sizes; see RuntimeOptions). */
  episodeLimits?: EpisodeLimits;
  /** Called when a replica is given up on (`envscaler serve` then stops and exits non-zero). */
  onGiveUp?: (replica: number) => void;
  logger: Logger;
}

export interface ConnectionInfo {
  protocol_version: number;
  endpoints: string[];
  replicas: number;
  pid: number;
  curve: { server_public_key: string; client_public_key: string; client_secret_key: string } | null;
}

interface Slot {
  index: number;
  endpoint: string;
  child: ChildProcess | null;
  instances: string[];
  restarts: number[];
}

function replicaEntry(): { path: string; execArgv: string[] } {
  const ts = import.meta.url.endsWith(".ts");
  return { path: new URL(ts ? "./replica-main.ts" : "./replica-main.js", import.meta.url).pathname, execArgv: ts ? ["--import", "tsx"] : inheritedNodeFlags(process.execArgv) };
}

/**
 * The node flags a replica takes from the command that started it, so `node --cpu-prof
 * dist/cli/main.js serve` profiles the replicas (where the serving happens) and a heap limit given
 * to the command holds for them too. Node refuses `--cpu-prof` in NODE_OPTIONS, so this is the only
 * way in. Inspector flags stay behind: a second process on the same debug port would fail to start.
 */
export function inheritedNodeFlags(execArgv: readonly string[]): string[] {
  return execArgv.filter((flag) => !/^--inspect(-brk|-port|-wait)?(=|$)/.test(flag) && !/^--debug-port(=|$)/.test(flag));
}

/** The endpoint of replica i, derived from replica 0's. */
export function replicaEndpoint(endpoint: string, i: number): string {
  const tcp = /^tcp:\/\/(.+):(\*|\d+)$/.exec(endpoint);
  if (tcp) {
    const port = tcp[2] === "*" || tcp[2] === "0" ? "*" : String(Number(tcp[2]) + i);
    return `tcp://${tcp[1]}:${port}`;
  }
  if (endpoint.startsWith("ipc://")) return i === 0 ? endpoint : `${endpoint}.${i}`;
  throw new Error(`unsupported endpoint ${endpoint}: use tcp://host:port or ipc://path`);
}

/** True when only this machine can reach the endpoint. */
export function isLocalEndpoint(endpoint: string): boolean {
  if (endpoint.startsWith("ipc://")) return true;
  const host = /^tcp:\/\/(.+):(\*|\d+)$/.exec(endpoint)?.[1] ?? "";
  return host === "localhost" || host === "[::1]" || host === "::1" || /^127\.\d+\.\d+\.\d+$/.test(host);
}

/**
 * `envscaler serve`: runs N replica processes, restarts one that dies (its sessions are lost and
 * say so; the others are untouched), writes the connection file once all serve, and on stop()
 * terminates them and removes the file.
 */
export class Supervisor {
  private readonly slots: Slot[] = [];
  private stopping = false;
  private curve: ReplicaConfig["curve"] = null;
  private clientKeys: { publicKey: string; secretKey: string } | null = null;
  readonly log: Logger;
  private exited: Promise<void> = Promise.resolve();

  constructor(private readonly options: SupervisorOptions) {
    this.log = options.logger;
  }

  get endpoints(): string[] {
    return this.slots.map((s) => s.endpoint);
  }

  async start(): Promise<ConnectionInfo> {
    const n = Math.max(1, this.options.replicas);
    const endpoints = Array.from({ length: n }, (_, i) => replicaEndpoint(this.options.endpoint, i));
    if (this.options.curve || !endpoints.every(isLocalEndpoint)) {
      const server = curveKeyPair();
      this.clientKeys = curveKeyPair();
      this.curve = { ...server, allow: [this.clientKeys.publicKey, ...(this.options.curveAllow ?? [])] };
      this.log.info({ allowed: this.curve.allow.length }, "CurveZMQ on");
    }
    for (let i = 0; i < n; i++) this.slots.push({ index: i, endpoint: endpoints[i]!, child: null, instances: [], restarts: [] });
    try {
      await Promise.all(this.slots.map((s) => this.launch(s)));
    } catch (e) {
      await this.stop();
      throw e;
    }
    // stopped (a signal, the launcher's end) while the replicas started: no connection file then
    if (this.stopping) throw new Error("the bridge was stopped while it started");
    const info = this.connectionInfo();
    if (this.options.connectionFile) writeConnectionFile(this.options.connectionFile, info);
    return info;
  }

  connectionInfo(): ConnectionInfo {
    return {
      protocol_version: PROTOCOL_VERSION,
      endpoints: this.endpoints,
      replicas: this.slots.length,
      pid: process.pid,
      curve: this.curve && this.clientKeys ? { server_public_key: this.curve.publicKey, client_public_key: this.clientKeys.publicKey, client_secret_key: this.clientKeys.secretKey } : null,
    };
  }

  /** Starts the slot's replica and resolves when it serves. */
  private launch(slot: Slot): Promise<void> {
    const { path, execArgv } = replicaEntry();
    const child = fork(path, [], { execArgv, stdio: ["ignore", "inherit", "inherit", "ipc"], serialization: "json" });
    slot.child = child;
    const config: ReplicaConfig = {
      replica: slot.index,
      endpoint: slot.endpoint,
      envs: this.options.envs,
      workers: this.options.workers ?? 0,
      limits: this.options.limits ?? {},
      previousInstances: slot.instances,
      user: this.options.user ?? null,
      curve: this.curve,
      recordDir: this.options.recordDir ?? null,
      recordFailure: this.options.recordFailure ?? "refuse",
      maxRestartsPerMinute: this.options.maxRestartsPerMinute ?? 10,
      hardStopGraceMs: this.options.hardStopGraceMs ?? 1000,
      episodeLimits: this.options.episodeLimits ?? {},
      warmSessions: this.options.warmSessions ?? 0,
    };
    child.send(config);
    return new Promise<void>((resolve, reject) => {
      let ready = false;
      child.on("message", (m: ReplicaMessage) => {
        if ("ready" in m) {
          ready = true;
          slot.endpoint = m.endpoint; // a `*` port is now a real one, kept across restarts
          slot.instances.push(m.instance);
          resolve();
        } else reject(new Error(`replica ${slot.index} failed to start: ${m.failed}`));
      });
      child.on("exit", (code, signal) => {
        if (slot.child === child) slot.child = null;
        if (!ready) return reject(new Error(`replica ${slot.index} exited before serving (code ${code}, signal ${signal})`));
        if (this.stopping) return;
        this.log.error({ replica: slot.index, code, signal }, "replica died; restarting it");
        this.restart(slot);
      });
    });
  }

  private restart(slot: Slot): void {
    const now = Date.now();
    slot.restarts = [...slot.restarts.filter((t) => now - t < 60_000), now];
    if (slot.restarts.length > (this.options.maxRestartsPerMinute ?? 10)) {
      this.log.fatal({ replica: slot.index }, "replica keeps dying; not restarting it again");
      // a connection file listing a dead endpoint would make clients time out forever: fail loudly
      this.options.onGiveUp?.(slot.index);
      return;
    }
    const delay = Math.min(5000, 100 * 2 ** (slot.restarts.length - 1));
    setTimeout(() => {
      if (this.stopping) return;
      this.launch(slot).then(
        () => this.log.info({ replica: slot.index, endpoint: slot.endpoint }, "replica restarted"),
        (e: unknown) => {
          // e.g. the port is briefly still taken: try again, within the restart budget
          this.log.error({ err: e, replica: slot.index }, "replica restart failed; retrying");
          this.restart(slot);
        },
      );
    }, delay);
  }

  /** The replica processes' pids (tests kill them to exercise restarts). */
  pids(): (number | undefined)[] {
    return this.slots.map((s) => s.child?.pid);
  }

  async stop(timeoutMs = 15_000): Promise<void> {
    if (this.stopping) return this.exited;
    this.stopping = true;
    this.exited = Promise.all(
      this.slots.map(
        (s) =>
          new Promise<void>((resolve) => {
            const child = s.child;
            if (!child || child.exitCode !== null || child.signalCode !== null) return resolve();
            const kill = setTimeout(() => child.kill("SIGKILL"), timeoutMs);
            child.once("exit", () => {
              clearTimeout(kill);
              resolve();
            });
            child.kill("SIGTERM");
          }),
      ),
    ).then(() => {
      if (this.options.connectionFile) rmSync(this.options.connectionFile, { force: true });
    });
    return this.exited;
  }
}

/** Written atomically and readable only by its owner: it may hold a client secret key. */
function writeConnectionFile(path: string, info: ConnectionInfo): void {
  const tmp = `${path}.${process.pid}.tmp`;
  writeFileSync(tmp, `${JSON.stringify(info, null, 2)}\n`, { mode: 0o600 });
  chmodSync(tmp, 0o600);
  renameSync(tmp, path);
}
