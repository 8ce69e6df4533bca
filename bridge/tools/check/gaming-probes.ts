import type { Scenario, ToolCall, ToolSchema } from "../../../envs/format/bundle-schema.js";
import type { EnvBundle } from "../../../envs/format/load-bundle.js";
import type { ReferenceCache } from "../../core/episode/reference-state.js";
import { ToolValidator } from "../../core/episode/tool-validator.js";
import { bundleInitialState } from "../../core/state/bundle-state.js";
import { runScenario } from "./run-scenario.js";

// Probes of whether a scenario's checks can be gamed (`envscaler check`, synth's scenario gate).
// A check list that still scores 1.0 when a needed step is skipped, or that an agent calling tools
// at random can satisfy, rewards the wrong thing. Both probes are bounded in time per scenario.

/** Random-agent episodes per scenario. @default 16 */
export const RANDOM_EPISODES = 16;
/** Wall-time budget for both probes of one scenario; what is left undone is reported. @unit ms */
export const PROBE_BUDGET_MS = 4_000;

export interface MutationFinding {
  /** 0-based index into reference_actions. */
  index: number;
  name: string;
  /** Whether the action changed the state in the full reference run (a write). */
  wrote: boolean;
}

export interface GamingProbe {
  /** Reference actions whose removal leaves the reward at 1.0. */
  droppable: MutationFinding[];
  /** Reference actions tried by the mutation probe (all of them unless the budget ran out). */
  dropped: number;
  /** The best reward a random agent reached, and in how many episodes. */
  randomBest: number;
  randomEpisodes: number;
  /** The calls of the first random episode that reached 1.0, if one did. */
  randomWinner?: ToolCall[];
  /** The budget ran out before every probe ran. */
  cutShort: boolean;
}

/** A small seeded PRNG (mulberry32): the probes are the same on every run. */
function rng(seed: number): () => number {
  let a = seed >>> 0;
  return () => {
    a = (a + 0x6d2b79f5) >>> 0;
    let t = a;
    t = Math.imul(t ^ (t >>> 15), t | 1);
    t ^= t + Math.imul(t ^ (t >>> 7), t | 61);
    return ((t ^ (t >>> 14)) >>> 0) / 4294967296;
  };
}

/** Every primitive value in the state, by the field name it is held under (and record keys under `<collection>`). */
export function valuesByField(state: unknown): Map<string, unknown[]> {
  const out = new Map<string, Set<unknown>>();
  const add = (k: string, v: unknown) => {
    let set = out.get(k);
    if (!set) out.set(k, (set = new Set()));
    if (set.size < 200) set.add(v);
  };
  const walk = (v: unknown, key: string | null, depth: number) => {
    if (depth > 12) return;
    if (v === null || typeof v !== "object") {
      if (key !== null) add(key, v);
      return;
    }
    if (Array.isArray(v)) {
      for (const x of v) walk(x, key, depth + 1);
      return;
    }
    for (const [k, x] of Object.entries(v)) {
      if (key !== null && x !== null && typeof x === "object" && !Array.isArray(x)) add(`${key}[]`, k); // a record's key in its collection
      walk(x, k, depth + 1);
    }
  };
  walk(state, null, 0);
  return new Map([...out].map(([k, s]) => [k, [...s]]));
}

type Schema = Record<string, unknown>;

/**
 * A value that fits `schema`, drawn at random: enums and consts as given; a field whose name the
 * state also uses (`member_id`) gets one of the state's values for it, or a record key of a
 * collection whose name it ends with (`book_id` → a key of `books`), so the calls reach real
 * records; otherwise a small random value of the type.
 */
function randomValue(schema: Schema, name: string, pool: Map<string, unknown[]>, rand: () => number, depth = 0): unknown {
  const pick = <T>(xs: readonly T[]): T => xs[Math.floor(rand() * xs.length)]!;
  if (Array.isArray(schema.enum) && schema.enum.length) return pick(schema.enum);
  if ("const" in schema) return schema.const;
  for (const k of ["anyOf", "oneOf"] as const) if (Array.isArray(schema[k]) && schema[k].length) return randomValue(pick(schema[k] as Schema[]), name, pool, rand, depth + 1);
  const type: unknown = Array.isArray(schema.type) ? pick(schema.type as unknown[]) : schema.type;
  const fromState = (want: string) => {
    const direct = (pool.get(name) ?? []).filter((v) => typeof v === want);
    if (direct.length && rand() < 0.9) return pick(direct);
    const stem = name.replace(/_?ids?$/i, "").toLowerCase();
    if (want === "string" && stem && stem !== name.toLowerCase()) {
      const keys = [...pool].filter(([k]) => k.endsWith("[]") && k.toLowerCase().startsWith(stem)).flatMap(([, v]) => v);
      if (keys.length && rand() < 0.9) return pick(keys);
    }
    return undefined;
  };
  switch (type) {
    case "string":
      return fromState("string") ?? pick(["x", "test", "1", "", name]);
    case "integer":
    case "number": {
      const v = fromState("number");
      if (v !== undefined) return v;
      const lo = typeof schema.minimum === "number" ? schema.minimum : 0;
      const hi = typeof schema.maximum === "number" ? schema.maximum : lo + 10;
      const x = lo + rand() * (hi - lo);
      return type === "integer" ? Math.round(x) : Math.round(x * 100) / 100;
    }
    case "boolean":
      return rand() < 0.5;
    case "null":
      return null;
    case "array": {
      if (depth > 4) return [];
      const min = typeof schema.minItems === "number" ? schema.minItems : 0;
      const n = min + Math.floor(rand() * 3);
      return Array.from({ length: n }, () => randomValue((schema.items as Schema | undefined) ?? {}, name, pool, rand, depth + 1));
    }
    default: {
      if (depth > 4) return {};
      const props = (schema.properties ?? {}) as Record<string, Schema>;
      const required = new Set((schema.required as string[] | undefined) ?? []);
      const out: Record<string, unknown> = {};
      for (const [k, p] of Object.entries(props)) if (required.has(k) || rand() < 0.5) out[k] = randomValue(p, k, pool, rand, depth + 1);
      return out;
    }
  }
}

/** One random, schema-valid tool call (calls the validator refuses are drawn again, a few times). */
function randomCall(tools: readonly ToolSchema[], validator: ToolValidator, pool: Map<string, unknown[]>, rand: () => number): ToolCall {
  let call: ToolCall = { name: tools[0]!.function.name, arguments: {} };
  for (let attempt = 0; attempt < 8; attempt++) {
    const tool = tools[Math.floor(rand() * tools.length)]!;
    const args = randomValue(tool.function.parameters, "", pool, rand) as Record<string, unknown>;
    call = { name: tool.function.name, arguments: args };
    if (validator.check(tool.function.name, args) === null) return call;
  }
  return call;
}

/**
 * Arguments `tool`'s schema accepts, shown by example in a re-ask (synth's dual-agent test): the
 * caller's `given` values kept where the schema has the field, the rest drawn as the random agent
 * draws them (values the state holds for fields it names), seeded so a rerun shows the same. null
 * when no draw fits in a few tries.
 */
export function exampleArguments(tool: ToolSchema, validator: ToolValidator, state: unknown, given: Record<string, unknown> = {}, seed = 1): Record<string, unknown> | null {
  const pool = valuesByField(state);
  const rand = rng(seed);
  const known = new Set(Object.keys(tool.function.parameters.properties ?? {}));
  const kept = Object.fromEntries(Object.entries(given).filter(([k]) => known.has(k)));
  for (let attempt = 0; attempt < 8; attempt++) {
    const drawn = randomValue(tool.function.parameters, "", pool, rand) as Record<string, unknown>;
    for (const args of [{ ...drawn, ...kept }, drawn]) if (validator.check(tool.function.name, args) === null) return args;
  }
  return null;
}

/**
 * Runs both probes on a scenario whose reference solution scores 1.0.
 * Mutation: the reference solution with each action left out in turn (its messages kept).
 * Random agent: `episodes` seeded episodes of schema-valid calls (twice as many as the reference
 * solution has, at least 3, fewer than max_steps), each scored at its end.
 */
export async function probeGaming(bundle: EnvBundle, scenario: Scenario, refs: ReferenceCache, wrote: readonly boolean[], options: { episodes?: number; budgetMs?: number } = {}): Promise<GamingProbe> {
  const deadline = Date.now() + (options.budgetMs ?? PROBE_BUDGET_MS);
  const reference = scenario.reference_actions ?? [];
  const probe: GamingProbe = { droppable: [], dropped: 0, randomBest: 0, randomEpisodes: 0, cutShort: false };

  for (let i = 0; i < reference.length && reference.length > 1; i++) {
    if (Date.now() > deadline) {
      probe.cutShort = true;
      break;
    }
    const run = await runScenario(bundle, scenario, refs, reference.filter((_, j) => j !== i), true);
    probe.dropped++;
    if (run.result.reward >= 1) probe.droppable.push({ index: i, name: reference[i]!.name, wrote: wrote[i] ?? false });
  }

  const tools = bundle.manifest.tools.filter((t) => !(scenario.user_turns ?? []).some((u) => u.add_tools?.includes(t.function.name)));
  if (!tools.length) return probe;
  const validator = new ToolValidator(tools);
  const pool = valuesByField(bundleInitialState(bundle, scenario.id));
  const calls = Math.max(1, Math.min(Math.max(3, 2 * reference.length), (scenario.max_steps ?? 30) - 1));
  const episodes = options.episodes ?? RANDOM_EPISODES;
  for (let e = 0; e < episodes; e++) {
    if (Date.now() > deadline) {
      probe.cutShort = true;
      break;
    }
    const rand = rng(0x9e3779b1 ^ (e + 1));
    const plan = Array.from({ length: calls }, () => randomCall(tools, validator, pool, rand));
    const run = await runScenario(bundle, scenario, refs, plan, false, e + 1);
    probe.randomEpisodes++;
    if (run.result.reward > probe.randomBest) probe.randomBest = run.result.reward;
    if (run.result.reward >= 1 && !probe.randomWinner) probe.randomWinner = plan;
  }
  return probe;
}
