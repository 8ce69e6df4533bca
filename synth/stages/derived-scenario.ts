import { existsSync, readFileSync, rmSync } from "node:fs";
import { join } from "node:path";
import { z } from "zod";
import { EnvRuntime } from "../../bridge/core/engine/env-runtime.js";
import type { PatchOp } from "../../bridge/core/state/json-patch.js";
import { canonicalJson } from "../../protocol/canonical-json.js";
import type { Scenario, ToolCall } from "../../envs/format/bundle-schema.js";
import { LlmError, type LlmClient } from "../llm/llm-client.js";
import { derivedTaskPrompt } from "../prompts.js";
import { stageBundle } from "./stage-bundle.js";

/** The most checks a derived scenario gets from its call's state change (besides reference_state). */
const MAX_DIFF_CHECKS = 5;

const TaskText = z.object({ task: z.string().min(10) });

/** Other records a verified call is tried on (each that runs and changes the state costs one task-text ask). */
const MAX_VARIANTS_PER_CALL = 4;
/** Two-call solutions tried after the one-call ones (each that runs and changes the state costs one task-text ask). */
const MAX_PAIRS = 4;

/**
 * The calls a derived scenario can be made of: the dual-agent test's positive calls that changed
 * the state and that its judge did not fail (the env's own `build-report.json`), once each; then,
 * given the initial state, the same calls on other records (recordVariants).
 */
export function derivedCandidates(bundleDir: string, initial?: Record<string, unknown>): ToolCall[] {
  const file = join(bundleDir, "build-report.json");
  if (!existsSync(file)) return [];
  const report = JSON.parse(readFileSync(file, "utf8")) as { cases?: { tool: string; arguments: Record<string, unknown>; case_type: string; result: string; diff: unknown[] }[] };
  const seen = new Set<string>();
  const out: ToolCall[] = [];
  for (const c of report.cases ?? []) {
    if (c.case_type !== "positive" || c.result === "fail" || c.diff.length === 0) continue;
    const key = `${c.tool} ${canonicalJson(c.arguments)}`;
    if (seen.has(key)) continue;
    seen.add(key);
    out.push({ name: c.tool, arguments: c.arguments });
  }
  return initial ? [...out, ...recordVariants(out, initial)] : out;
}

/**
 * The verified calls on other records (the 1.5B's dual-agent test verified one writing call, so
 * one scenario came of it, 2026-12-07): an argument naming a record of the initial state (a key of
 * one of its collections) is set, one argument at a time, to the collection's other keys, at most
 * MAX_VARIANTS_PER_CALL per call. Only candidates: a variant must still run without an error and
 * change the state on the initial state (deriveScenario), and pass vetting with its probes.
 */
export function recordVariants(calls: readonly ToolCall[], initial: Record<string, unknown>): ToolCall[] {
  const collections = Object.values(initial).filter((v): v is Record<string, unknown> => isRecordMap(v));
  const seen = new Set(calls.map((c) => `${c.name} ${canonicalJson(c.arguments)}`));
  const out: ToolCall[] = [];
  for (const call of calls) {
    let made = 0;
    for (const [arg, value] of Object.entries(call.arguments)) {
      if (typeof value !== "string") continue;
      const home = collections.find((c) => Object.hasOwn(c, value));
      for (const other of home ? Object.keys(home) : []) {
        if (made >= MAX_VARIANTS_PER_CALL) break;
        const variant = { name: call.name, arguments: { ...call.arguments, [arg]: other } };
        const key = `${variant.name} ${canonicalJson(variant.arguments)}`;
        if (seen.has(key)) continue;
        seen.add(key);
        out.push(variant);
        made++;
      }
    }
  }
  return out;
}

/**
 * The solutions derived scenarios are tried with, in order: each candidate call alone, then pairs
 * of them (the first MAX_PAIRS, in candidate order), a task that needs two writes. A pair whose
 * second call undoes or repeats the first is rejected by vetting's probes (a step that can be
 * left out at 1.0). The 1.5B's clinical-trials env had one write tool and two patients: two
 * one-call scenarios, and none of the model's own passed (2026-12-07).
 */
export function derivedSolutions(candidates: readonly ToolCall[]): ToolCall[][] {
  const pairs: ToolCall[][] = [];
  for (let i = 0; i < candidates.length && pairs.length < MAX_PAIRS; i++) {
    for (let j = i + 1; j < candidates.length && pairs.length < MAX_PAIRS; j++) pairs.push([candidates[i]!, candidates[j]!]);
  }
  return [...candidates.map((c) => [c]), ...pairs];
}

/** A collection of the state: an object (not an array) whose values are all objects (its records). */
function isRecordMap(v: unknown): boolean {
  if (v === null || typeof v !== "object" || Array.isArray(v)) return false;
  const records = Object.values(v);
  return records.length > 0 && records.every((r) => r !== null && typeof r === "object" && !Array.isArray(r));
}

/** A JSON pointer's segments as a property access (`/loans/L1/status` → `["loans"]["L1"]["status"]`). */
function access(path: string): string {
  return path
    .split("/")
    .slice(1)
    .map((s) => `[${JSON.stringify(s.replace(/~1/g, "/").replace(/~0/g, "~"))}]`)
    .join("");
}

/** Checks that the final state holds what `diff` changed, one per op (at most MAX_DIFF_CHECKS). */
export function checksFromDiff(diff: readonly PatchOp[]): { description: string; source: string }[] {
  return diff.slice(0, MAX_DIFF_CHECKS).map((op) => {
    const at = `final${access(op.path)}`;
    // optional chaining: a check reading a record the agent never made fails, it does not throw
    const safe = at.replace(/\]\[/g, "]?.[");
    if (op.op === "remove") return { description: `${op.path} is removed`, source: `({final}) => ${safe} === undefined` };
    const json = JSON.stringify(op.value);
    return { description: `${op.path} is ${json.length > 60 ? `${json.slice(0, 57)}...` : json}`, source: `({final}) => JSON.stringify(${safe}) === ${JSON.stringify(json)}` };
  });
}

/** Every string and number in a call's arguments (array items too): what the task text must give the agent. */
export function argumentValues(v: unknown): string[] {
  if (typeof v === "string" || typeof v === "number") return [String(v)];
  if (Array.isArray(v)) return v.flatMap(argumentValues);
  if (v !== null && typeof v === "object") return Object.values(v).flatMap(argumentValues);
  return [];
}

/** Two solutions are the same when they make the same calls in the same order (the 1.5B wrote one task three times over). */
export function sameSolution(a: readonly { name: string; arguments: Record<string, unknown> }[], b: readonly { name: string; arguments: Record<string, unknown> }[]): boolean {
  return canonicalJson(a.map((x) => [x.name, x.arguments])) === canonicalJson(b.map((x) => [x.name, x.arguments]));
}

/** A task text put together from kept scenarios' texts, and the ids of those scenarios. */
export interface ComposedTask {
  task: string;
  from: string[];
}

/**
 * The task text of a multi-call solution made of the kept task scenarios that each solve one of
 * its calls alone, in call order ("First: … Then: …"), or null when a call has none. Their texts
 * were the model's own and passed its gates, so each states what its call needs; for the 1.5B's
 * clinical-trials pair the model wrote good texts for each patient alone but never named the
 * second in the pair's text (3 asks, 2026-12-07 run 11). Deterministic: no model call.
 */
export function composedTask(calls: readonly ToolCall[], kept: readonly Scenario[]): ComposedTask | null {
  if (calls.length < 2) return null;
  const parts = calls.map((c) => kept.find((s) => s.mode === "task" && sameSolution(s.reference_actions ?? [], [c])));
  if (parts.some((p) => p === undefined)) return null;
  const found = parts as Scenario[];
  return { task: found.map((s, i) => `${i === 0 ? "First" : "Then"}: ${asSentence(s.task)}`).join(" "), from: found.map((s) => s.id) };
}

/** A task text as one sentence to join to others: trimmed, ending with a full stop unless it ends a sentence already. */
function asSentence(text: string): string {
  const t = text.trim();
  return /[.!?]$/.test(t) ? t : `${t}.`;
}

/** Why a task text cannot be given to an agent making `needed`'s call(s): the values it does not say; null when it says them all. */
function unsaid(task: string, needed: readonly string[]): string | null {
  const missing = needed.filter((v) => !task.toLowerCase().includes(v.toLowerCase()));
  return missing.length ? `the task does not say ${missing.map((m) => JSON.stringify(m)).join(", ")}: an agent reading it could not make this call; state every value` : null;
}

/** What the calls did when played in order on the initial state: the last change of each path, and each call's observation. */
interface Played {
  last: PatchOp[];
  observations: string[];
}

/** The calls played on the bundle's default state; null when one fails there. */
async function playCalls(bundleDir: string, calls: readonly ToolCall[], meta: { id: string; envId: string }): Promise<Played | null> {
  // played in a copy of the bundle holding one bare scenario on the default state (the bundle's
  // own scenarios.json is what this stage is replacing)
  const dir = join(bundleDir, ".vetting", `${meta.id}-derive`);
  stageBundle(bundleDir, dir, [{ id: "derive", env_id: meta.envId, task: "Play the calls.", max_steps: calls.length + 1 }]);
  const diff: PatchOp[] = [];
  const observations: string[] = [];
  try {
    const rt = await EnvRuntime.start({ envs: [dir], hardStopGraceMs: 500 });
    try {
      const { episode_id } = await rt.reset("derive", 1);
      for (const call of calls) {
        const r = await rt.step(episode_id, call);
        if (r.info.error || (r.observation.tool_results ?? []).some((t) => !t.ok)) return null;
        diff.push(...r.info.diff);
        observations.push(r.observation.content);
      }
    } finally {
      await rt.close();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
  // what the final state holds: the last change of each path (a later call may change it again)
  return { last: [...new Map(diff.map((op) => [op.path, op])).values()], observations };
}

/**
 * A task scenario built around verified calls (see derivedSolutions), for a model that cannot
 * write a whole scenario whose checks work (the 1.5B: none in 12 tries on 2026-12-07): the calls
 * are played on the scenario's initial state, the checks come from the state change they make (plus
 * `reference_state`), and the model writes only the task text, re-asked until it states every
 * value the calls need. When it never does and `meta.composed` is given (composedTask), that text
 * is used instead if it states them all (`composedFrom` says so). Null when a call fails there or
 * together they change nothing.
 */
export async function deriveScenario(
  llm: LlmClient,
  bundleDir: string,
  calls: readonly ToolCall[],
  meta: { id: string; envId: string; introduction: string; taken: string[]; composed?: ComposedTask },
): Promise<{ scenario: Scenario; composedFrom?: string[] } | null> {
  const played = await playCalls(bundleDir, calls, meta);
  if (!played || played.last.length === 0) return null;
  const needed = [...new Set(calls.flatMap((c) => argumentValues(c.arguments)))];
  const text = await taskText(llm, calls, played, needed, meta);
  return {
    scenario: {
      id: meta.id,
      env_id: meta.envId,
      mode: "task",
      task: text.task,
      checks: [...checksFromDiff(played.last).map((c) => ({ kind: "js" as const, ...c })), { kind: "reference_state" as const }],
      reference_actions: [...calls],
    } as Scenario,
    ...(text.from ? { composedFrom: text.from } : {}),
  };
}

/**
 * The model's task text for the calls; when none of its replies passes (still incomplete after
 * its re-asks, or the endpoint failed), the composed one if that says every value: it costs no
 * model call, and the values gate is the same one the model's text had to pass.
 */
async function taskText(llm: LlmClient, calls: readonly ToolCall[], played: Played, needed: readonly string[], meta: { introduction: string; taken: string[]; composed?: ComposedTask }): Promise<{ task: string; from?: string[] }> {
  const shown = (f: (c: ToolCall, i: number) => string) => calls.map(f).join("\nthen ");
  try {
    const { task } = await llm.askJson(
      "scenario",
      derivedTaskPrompt({ introduction: meta.introduction, call: shown((c) => `${c.name}(${JSON.stringify(c.arguments)})`), result: shown((_c, i) => played.observations[i]!), diff: JSON.stringify(played.last), taken: meta.taken }),
      TaskText,
      (t) => unsaid(t.task, needed),
      { echo: false },
    );
    return { task };
  } catch (e) {
    if (!(e instanceof LlmError) || !meta.composed) throw e;
    const gap = unsaid(meta.composed.task, needed);
    if (gap) throw new LlmError(`${e.message}; composed from the task texts of ${meta.composed.from.join(", ")}: ${gap}`);
    return meta.composed;
  }
}
