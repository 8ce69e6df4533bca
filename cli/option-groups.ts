import type { Argv } from "yargs";
import { BUNDLED_ENVS } from "../envs/bundled.js";
import type { UserSimulatorConfig } from "../bridge/core/episode/user-simulator.js";

// Options that several commands take, each defined once here so that a default (or its meaning)
// cannot differ between commands; tests/unit/cli-options.test.ts holds every command that takes a
// group to the group's defaults. A command adds a group with `group(y)`.

/** Where the envs come from (serve, mcp, ui, rollout, list, replay). */
export function envsOptions<T>(y: Argv<T>) {
  return y.option("envs", { type: "string", array: true, default: [BUNDLED_ENVS], describe: "bundle folders, folders of bundles, bundled env ids (library or library-v1), or synth run folders" });
}

/**
 * Where the engine runs (serve, mcp, rollout, eval). 0 everywhere: the in-thread engine is the
 * fast path (a step never crosses threads; 1.6x faster per step than a worker, README's figures),
 * and every guest call already ends at its deadline by the sandbox's fuel checks. A worker adds a
 * backstop: its watchdog can stop a call that still overran and restore the worker's other
 * episodes. `serve` (and the bridges rollout and eval start) keep a backstop at 0 too: the replica
 * process's main thread kills the replica, which the supervisor restarts. `mcp` runs its engine in
 * its own process with no supervisor: pass `--workers 1` there for the backstop.
 */
export function workersOptions<T>(y: Argv<T>) {
  return y.option("workers", { type: "number", default: 0, describe: "engine worker threads (per replica); 0: episodes run on the serving thread, no thread hop (the sandbox's fuel checks stop a guest call at its deadline); W >= 1: on W worker threads, each watched by a watchdog that stops an overrunning one and restores its other episodes" });
}

/** The watchdog's grace and restart budget (serve, mcp). */
export function watchdogOptions<T>(y: Argv<T>) {
  return y
    .option("hard-stop-grace-ms", { type: "number", default: 1000, describe: "how long past its own deadline a guest call may run before a watchdog acts (a backstop: the fuel checks stop calls at their deadline): with --workers W the engine worker is stopped and its other episodes restored; with serve's --workers 0 the replica process exits and is restarted" })
    .option("max-restarts-per-minute", { type: "number", default: 10, describe: "replica and engine worker restarts allowed per minute before the command stops with exit code 1" });
}

/** What snapshots (undo points, forks, checkpoints) one server may hold (serve, mcp, ui). */
export function snapshotOptions<T>(y: Argv<T>) {
  return y
    .option("max-snapshots", { type: "number", default: 32, describe: "snapshots (undo points) one episode may hold at once; more get `too_large`" })
    .option("max-snapshot-mb", { type: "number", default: 1024, describe: "memory all snapshots of one server (or replica) may hold; more get `too_large`" });
}

/** Sessions a server holds (serve, mcp). */
export function sessionOptions<T>(y: Argv<T>) {
  return y
    .option("max-sessions", { type: "number", default: 1024, describe: "open sessions (per replica); more get too_many_sessions" })
    .option("idle-timeout", { type: "number", default: 600, describe: "close sessions unused this many seconds" })
    .option("max-in-flight", { type: "number", default: 4096, describe: "requests served at once (per replica); more get `overloaded`" });
}

/** Recording every episode (serve, mcp). */
export function recordOptions<T>(y: Argv<T>) {
  return y
    .option("record", { type: "boolean", default: true, describe: "record every episode (--no-record: off)" })
    .option("record-dir", { type: "string", default: "trajectories", describe: "where the trajectory files are written" });
}

/** The address a local HTTP server binds (mcp, ui); each command keeps its own --port (they may run side by side). */
export function hostOptions<T>(y: Argv<T>) {
  return y.option("host", { type: "string", default: "127.0.0.1", describe: "address to bind; any non-loopback one requires a token" });
}

/** The simulated user of conversation scenarios (serve, mcp, ui, rollout, eval): llm/llm-env.ts, role USER. */
export function userOptions<T>(y: Argv<T>) {
  return y
    .option("user-model", { type: "string", describe: "simulated user's model for conversation scenarios (else ENVSCALER_USER_MODEL, else gpt-4.1)" })
    .option("user-base-url", { type: "string", describe: "simulated user's OpenAI-compatible base URL (else ENVSCALER_USER_BASE_URL or its alias USER_OPENAI_BASE_URL, else OPENAI_BASE_URL)" })
    .option("user-api-key", { type: "string", describe: "simulated user's key (else ENVSCALER_USER_API_KEY or its alias USER_OPENAI_API_KEY, else OPENAI_API_KEY)" })
    .option("user-timeout", { type: "number", describe: "seconds one simulated-user request may take (else ENVSCALER_USER_TIMEOUT, else ENVSCALER_LLM_TIMEOUT, else 60)" })
    .option("user-temperature", { type: "number", describe: "simulated user's sampling temperature (else ENVSCALER_USER_TEMPERATURE, else 0.7)" })
    .option("user-cache", { type: "string", describe: "keep the simulated user's finished calls here, per episode (scenario and seed), so a resumed run asks nothing twice (else ENVSCALER_USER_CACHE; default: no cache; rollout: its run folder)" });
}

export interface UserArgs {
  userModel?: string;
  userBaseUrl?: string;
  userApiKey?: string;
  userTimeout?: number;
  userTemperature?: number;
  userCache?: string;
}

/**
 * The simulated user's config from the user options; null (no simulated user) when neither a flag
 * nor an env var names an endpoint or model. Unset fields stay unset: the simulator fills them from
 * the environment (resolveUserConfig), in the process that runs it.
 */
export function userConfigFromArgs(args: UserArgs, env: NodeJS.ProcessEnv = process.env): UserSimulatorConfig | null {
  if (args.userTimeout !== undefined && !(args.userTimeout > 0)) throw new Error(`--user-timeout must be a positive number of seconds; got ${args.userTimeout}`);
  if (args.userTemperature !== undefined && !(args.userTemperature >= 0)) throw new Error(`--user-temperature must be a number >= 0; got ${args.userTemperature}`);
  const wanted = args.userModel || args.userBaseUrl || env.ENVSCALER_USER_BASE_URL || env.USER_OPENAI_BASE_URL || env.OPENAI_BASE_URL || env.ENVSCALER_USER_MODEL;
  if (!wanted) return null;
  return {
    ...(args.userModel ? { model: args.userModel } : {}),
    ...(args.userBaseUrl ? { baseURL: args.userBaseUrl } : {}),
    ...(args.userApiKey ? { apiKey: args.userApiKey } : {}),
    ...(args.userTimeout !== undefined ? { timeoutMs: args.userTimeout * 1000 } : {}),
    ...(args.userTemperature !== undefined ? { temperature: args.userTemperature } : {}),
    ...(args.userCache ? { cacheDir: args.userCache } : {}),
  };
}
