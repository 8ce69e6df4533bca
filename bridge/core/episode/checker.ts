import type { Check } from "../../../envs/format/bundle-schema.js";
import { DEFAULT_LIMITS, type SandboxLimits } from "../sandbox/limits.js";
import { OncePerKey } from "../sandbox/once-per-key.js";
import { GuestEvalError, Sandbox, type SandboxConfig, type SandboxImage } from "../sandbox/sandbox.js";
import { SandboxFault } from "../sandbox/sandbox-fault.js";
import type { SandboxHost } from "../sandbox/sandbox-host.js";
import { canonicalJson } from "../../../protocol/canonical-json.js";
import type { StateBase, StateView } from "../state/state-base.js";
import { CHECK_BASE_IMAGE_BYTES, PostInitImages, stateBaseId } from "./post-init-images.js";
import { sameStateUpToNewIds } from "../state/same-state-up-to-new-ids.js";
import { sameState } from "../state/state-tracker.js";

/** One tool call as checks see it. */
export interface ActionRecord {
  name: string;
  arguments: Record<string, unknown>;
  /** The tool's return value (parsed JSON), when it returned. */
  result?: unknown;
  /** Why the call did not run or threw. */
  error?: string;
}

export interface CheckResult {
  index: number;
  kind: Check["kind"];
  description: string;
  passed: boolean;
  error?: string;
}

export interface CheckInputs {
  initial: StateView;
  final: StateView;
  actions: ActionRecord[];
  /** The agent's text messages to the user, in order. */
  messages: string[];
  /** The state the scenario's reference actions produce; needed by `reference_state` checks. */
  reference?: () => Promise<StateView | { error: string }>;
}

/** Checks get less time and memory than envs: they only read state. */
export const CHECK_LIMITS: SandboxLimits = { ...DEFAULT_LIMITS, memoryBytes: 128 * 1024 * 1024, callTimeoutMs: 1000 };

/** Per thread and limits: a hardened check-mode sandbox with nothing but the prelude, captured once (built once per burst, as env images are). */
const checkImages = new OncePerKey<SandboxImage>();

function checkImage(sandboxes: SandboxHost, limits: SandboxLimits): Promise<SandboxImage> {
  return checkImages.get(JSON.stringify(limits), async () => {
    const builder = await Sandbox.create(sandboxes, { mode: "check", limits, seed: [0, 0, 0, 0], clockMs: 0, tickMs: 0, hostRead: () => undefined });
    try {
      const hardened = builder.dispatch("harden");
      if (!hardened.ok) throw new Error(`hardening the check realm failed: ${hardened.error.name}: ${hardened.error.message}`);
      return builder.capture(true);
    } finally {
      builder.dispose();
    }
  });
}

/**
 * Per thread, the check image with a scenario's initial state preloaded (the prelude's `preload`:
 * every record parsed and frozen), captured on a state's second scoring: a scoring then parses
 * only the records its episode changed. Bounded by CHECK_BASE_IMAGE_BYTES, least recently used out.
 */
export const checkBaseImages = new PostInitImages<SandboxImage>(CHECK_BASE_IMAGE_BYTES);

/** A hardened check sandbox for scoring states over `base`: from its preloaded image when there is one. */
async function checkSandbox(sandboxes: SandboxHost, limits: SandboxLimits, base: StateBase | null, config: SandboxConfig): Promise<Sandbox> {
  const key = base === null ? null : `${stateBaseId(base)}:${JSON.stringify(limits)}`;
  const plan = key === null ? null : checkBaseImages.plan(key);
  if (plan?.image) return Sandbox.restore(sandboxes, plan.image, config, config.hostRead);
  const plain = async () => Sandbox.restore(sandboxes, await checkImage(sandboxes, limits), config, config.hostRead);
  const sandbox = await plain();
  if (!plan?.capture || base === null) return sandbox;
  try {
    const loaded = sandbox.dispatch("preload", JSON.stringify(base.layout().collections));
    if (loaded.ok) {
      const image = sandbox.capture(true);
      checkBaseImages.keep(key!, image, image.machine.bytes);
      return sandbox;
    }
  } catch (e) {
    if (!(e instanceof SandboxFault) && !(e instanceof GuestEvalError)) throw e;
  }
  // a state too large for the check realm's memory or deadline: its checks read it lazily, as before
  sandbox.dispose();
  checkBaseImages.varies(key!);
  return plain();
}

export type CheckVerdict = { passed: boolean; error?: string };

/**
 * Runs JS checks one after another in a sandbox of their own: restored from an image of a hardened
 * check-mode machine that never held env code (in an instance whose every byte the restore
 * overwrites), with read-only lazy views of the initial and final states built once for all of
 * them. Each check gets the seed and clock a fresh realm would have; the realm's built-ins and
 * global object are frozen, so nothing an env did to its own realm, and nothing an earlier check
 * did, can change a verdict. A check that faults (deadline, memory) fails alone: the checks after
 * it run in a newly restored sandbox.
 */
export async function runJsChecks(sandboxes: SandboxHost, sources: readonly string[], inputs: CheckInputs, seed: [number, number, number, number], limits = CHECK_LIMITS, pause?: () => Promise<void>): Promise<CheckVerdict[]> {
  // both states over one base (an episode's): its records can come preloaded (see checkBaseImages)
  const base = inputs.initial.base === inputs.final.base ? inputs.final.base : null;
  const hostRead = (op: string, scoped: string, id: string) => {
    const slash = scoped.indexOf("/");
    const scope = scoped.slice(0, slash);
    const view = scope === "base" ? base : scope === "initial" ? inputs.initial : inputs.final;
    return view?.read(op, scoped.slice(slash + 1), id);
  };
  const layouts = JSON.stringify({
    initial: { ...inputs.initial.layout(), changed: inputs.initial.changedIds() },
    final: { ...inputs.final.layout(), changed: inputs.final.changedIds() },
  });
  const extras = JSON.stringify({ actions: inputs.actions, messages: inputs.messages });
  const config = JSON.stringify({ seed, clockMs: 0, tickMs: 0 });
  const verdicts: CheckVerdict[] = [];
  let sandbox: Sandbox | undefined;
  try {
    for (const [i, source] of sources.entries()) {
      // between two checks, never inside one: the sandbox is left as the check left it
      if (pause && i > 0) await pause();
      try {
        let fresh = false;
        if (!sandbox) {
          sandbox = await checkSandbox(sandboxes, limits, base, { seed, clockMs: 0, tickMs: 0, hostRead });
          const built = sandbox.dispatch("inputs", layouts, extras);
          if (!built.ok) throw new SandboxFault("env_crashed", `building the check inputs: ${built.error.name}: ${built.error.message}`);
          fresh = true;
        }
        // after the first check of a sandbox, the check op first re-sets the seed and clock a fresh realm starts with
        const out = fresh ? sandbox.dispatch("check", source) : sandbox.dispatch("check", source, config);
        if (!out.ok) {
          verdicts.push({ passed: false, error: `${out.error.name}: ${out.error.message}` });
          continue;
        }
        const { verdict, type } = out.value as { verdict: boolean | null; type: string };
        verdicts.push(verdict === null ? { passed: false, error: `the check returned ${type}, not a boolean` } : { passed: verdict });
      } catch (e) {
        if (!(e instanceof SandboxFault) && !(e instanceof GuestEvalError)) throw e;
        verdicts.push({ passed: false, error: e instanceof SandboxFault ? `${e.code}: ${e.message}` : e.message });
        sandbox?.dispose(); // poisoned: the next check starts over in a new one
        sandbox = undefined;
      }
    }
    return verdicts;
  } finally {
    sandbox?.dispose();
  }
}

/** One JS check (see runJsChecks). */
export async function runJsCheck(sandboxes: SandboxHost, source: string, inputs: CheckInputs, seed: [number, number, number, number], limits = CHECK_LIMITS): Promise<CheckVerdict> {
  return (await runJsChecks(sandboxes, [source], inputs, seed, limits))[0]!;
}

/** tau-bench's rule: an output counts as said when it appears, case-insensitively and ignoring commas, in a message. */
export function outputSaid(output: string, messages: string[]): boolean {
  const needle = output.toLowerCase();
  return messages.some((m) => m.toLowerCase().replace(/,/g, "").includes(needle));
}

/** Lists up to `limit` top-level paths where two views over the same base differ. */
export function stateDifferences(a: StateView, b: StateView, limit = 5): string[] {
  const out: string[] = [];
  const keys = new Set<string>();
  for (const v of [a, b]) for (const [coll, recs] of v.records) for (const id of recs.keys()) keys.add(`${coll}\u0000${id}`);
  for (const k of keys) {
    const [coll, id] = k.split("\u0000") as [string, string];
    const x = a.record(coll, id);
    const y = b.record(coll, id);
    const cx = x === undefined ? "absent" : canonicalJson(JSON.parse(x));
    const cy = y === undefined ? "absent" : canonicalJson(JSON.parse(y));
    if (cx !== cy) out.push(`/${coll}/${id}`);
    if (out.length >= limit) return out;
  }
  for (const key of new Set([...a.top.keys(), ...b.top.keys()])) {
    const x = a.top.get(key);
    const y = b.top.get(key);
    const cx = typeof x === "string" ? canonicalJson(JSON.parse(x)) : x ? "*" : "absent";
    const cy = typeof y === "string" ? canonicalJson(JSON.parse(y)) : y ? "*" : "absent";
    if (cx !== cy) out.push(`/${key}`);
    if (out.length >= limit) break;
  }
  return out;
}

/**
 * Runs every check of a scenario. Never throws for a bad check: its result carries the error.
 * `pause`, when given, is awaited between two JS checks (see Episode.finishLater).
 */
export async function runChecks(sandboxes: SandboxHost, checks: readonly Check[], inputs: CheckInputs, seed: [number, number, number, number], pause?: () => Promise<void>): Promise<CheckResult[]> {
  const results: CheckResult[] = [];
  const js = checks.flatMap((c) => (c.kind === "js" ? [c.source] : []));
  const verdicts = js.length > 0 ? await runJsChecks(sandboxes, js, inputs, seed, CHECK_LIMITS, pause) : [];
  let nextJs = 0;
  for (const [index, check] of checks.entries()) {
    const base = { index, kind: check.kind, description: check.description };
    if (check.kind === "js") {
      results.push({ ...base, ...verdicts[nextJs++]! });
    } else if (check.kind === "outputs") {
      const missing = check.outputs.filter((o) => !outputSaid(o, inputs.messages));
      results.push({ ...base, passed: missing.length === 0, ...(missing.length ? { error: `not said to the user: ${missing.map((m) => JSON.stringify(m)).join(", ")}` } : {}) });
    } else {
      const ref = inputs.reference ? await inputs.reference() : { error: "the scenario has no reference actions" };
      if ("error" in ref) {
        results.push({ ...base, passed: false, error: ref.error });
      } else {
        const same = check.match_new_ids ? sameStateUpToNewIds(inputs.final, ref) : sameState(inputs.final, ref);
        results.push({ ...base, passed: same, ...(same ? {} : { error: `final state differs from the reference at ${stateDifferences(inputs.final, ref).join(", ")}` }) });
      }
    }
  }
  return results;
}
