import { rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { z } from "zod";
import { checkBundleIsolated } from "../../bridge/tools/check/check-isolated.js";
import { EnvRuntime } from "../../bridge/core/engine/env-runtime.js";
import type { StepResult } from "../../bridge/core/episode/episode.js";
import { Scenario, type ToolCall } from "../../envs/format/bundle-schema.js";
import { loadBundle } from "../../envs/format/load-bundle.js";
import { bundleInitialState } from "../../bridge/core/state/bundle-state.js";
import { LlmError, type LlmClient } from "../llm/llm-client.js";
import { scenarioPrompt } from "../prompts.js";
import { checkExamples, checkHints } from "./check-hints.js";
import { argumentValues, composedTask, deriveScenario, derivedCandidates, derivedSolutions, sameSolution } from "./derived-scenario.js";
import { stageBundle } from "./stage-bundle.js";
import type { Rejection } from "./mine.js";

const JsonObject = z.record(z.string(), z.unknown());

export const ScenarioDraft = z.object({
  task: z.string().min(10),
  user_instructions: z.string().optional(),
  state_overrides: JsonObject.default({}),
  checklist: z.array(z.object({ description: z.string().min(1), source: z.string().min(1) })).min(1).max(10),
  reference_actions: z.array(z.object({ name: z.string(), arguments: JsonObject.default({}) })).min(1).max(40),
});

export interface ScenarioOptions {
  /** Scenarios per env. @default 3 */
  perEnv?: number;
  /** Every n-th scenario is a conversation (0: none). @default 3 */
  conversationEvery?: number;
  /**
   * When the model's own task scenario fails vetting after its re-asks: "derived" builds one around
   * a verified state-changing call of the env's dual-agent test (derived-scenario.ts: the model
   * writes only the task text), "none" gives up. @default "derived"
   */
  fallback?: "derived" | "none";
  onProgress?: (done: number, total: number) => void;
}

export interface ScenarioResult {
  /** env id → scenario ids kept */
  kept: Record<string, string[]>;
  rejected: Rejection[];
}

/**
 * Runs one candidate scenario for real and says what is wrong with it, or null: it must fit the
 * bundle format and state schema, its checks compile and its reference solution scores 1.0
 * (`envscaler check`), no check already passes on the untouched episode, and every check gives
 * the same result for the reference solution under two different seeds.
 */
export async function vetScenario(bundleDir: string, scenario: Scenario, workDir: string): Promise<string | null> {
  const dir = join(workDir, scenario.id);
  stageBundle(bundleDir, dir, [scenario]);
  try {
    const report = await checkBundleIsolated(dir);
    if (report.problems.length) return `${report.problems.join("; ")}${await writesNothing(dir, scenario)}`;
    const rt = await EnvRuntime.start({ envs: [dir], hardStopGraceMs: 500 });
    try {
      const untouched = await rt.reset(scenario.id, 1);
      const nothing = await rt.finish(untouched.episode_id);
      const trivial = (nothing.info.reward_info?.checks ?? []).filter((c) => c.passed);
      if (trivial.length) return `checks that already pass before the agent does anything: ${trivial.map((c) => `#${c.index} "${c.description}"`).join(", ")}; every check must test something the task changes`;
      const results: boolean[][] = [];
      for (const seed of [1, 2]) {
        const { episode_id } = await rt.reset(scenario.id, seed);
        let last: StepResult | undefined;
        for (const a of scenario.reference_actions ?? []) last = await rt.step(episode_id, a);
        const end = last && (last.terminated || last.truncated) ? last : await rt.finish(episode_id);
        results.push((end.info.reward_info?.checks ?? []).map((c) => c.passed));
      }
      const flaky = results[0]!.map((p, i) => (p !== results[1]![i] ? i : -1)).filter((i) => i >= 0);
      if (flaky.length) return `checks #${flaky.join(", #")} give different results under different seeds (nondeterministic)`;
      return null;
    } finally {
      await rt.close();
    }
  } finally {
    rmSync(dir, { recursive: true, force: true });
  }
}

/**
 * A hint for a scenario whose reference solution only reads (the 1.5B's clinical-trials scenario
 * called `search_trials` alone, with checks on records it expected to change): no check can see
 * such a task done. Empty when some action wrote, or when the actions cannot be played at all
 * (the report says why).
 */
async function writesNothing(dir: string, scenario: Scenario): Promise<string> {
  const actions = scenario.reference_actions ?? [];
  if (actions.length === 0) return "";
  try {
    const rt = await EnvRuntime.start({ envs: [dir], hardStopGraceMs: 500 });
    try {
      const { episode_id } = await rt.reset(scenario.id, 1);
      for (const a of actions) {
        const r = await rt.step(episode_id, a);
        if (r.info.diff.length > 0) return "";
        if (r.terminated || r.truncated) break;
      }
    } finally {
      await rt.close();
    }
  } catch {
    return "";
  }
  return `. None of the reference_actions (${[...new Set(actions.map((a) => a.name))].join(", ")}) changes the state, so no check can tell the task was done: the task must need a tool that changes records, the reference_actions must call it, and the checks must test that change`;
}

/**
 * Stage 3 for one built env: scenarios written, vetted (re-asked with the problem), and saved into
 * its bundle. `derived`: the ids of kept scenarios built around tested calls; `composed`: of those,
 * the ones whose task text was put together from kept scenarios' texts (id → their ids).
 */
export async function generateScenarios(llm: LlmClient, bundleDir: string, options: ScenarioOptions = {}): Promise<{ kept: Scenario[]; rejected: Rejection[]; derived: string[]; composed: Record<string, string[]> }> {
  const bundle = loadBundle(bundleDir);
  const m = bundle.manifest;
  const prefix = bundle.id.replace(/-v\d+$/, "");
  const kept: Scenario[] = [];
  const rejected: Rejection[] = [];
  const workDir = join(bundleDir, ".vetting");
  const n = options.perEnv ?? 3;
  const every = options.conversationEvery ?? 3;
  const initial = bundleInitialState(bundle);
  const candidates = derivedSolutions(derivedCandidates(bundleDir, initial));
  const used = new Set<number>();
  const derivedIds: string[] = [];
  const composed: Record<string, string[]> = {};
  const examples = checkExamples(initial);
  for (let i = 0; i < n; i++) {
    const mode = every > 0 && (i + 1) % every === 0 ? "conversation" : "task";
    const id = `${prefix}-${i + 1}`;
    try {
      const draft = await llm.askJson(
        "scenario",
        scenarioPrompt({ introduction: m.introduction, rules: m.rules, tools: m.tools, state: JSON.stringify(initial), mode, taken: kept.map((s) => s.task), examples }),
        ScenarioDraft,
        async (d) => {
          if (mode === "conversation" && !d.user_instructions) return "a conversation scenario needs user_instructions";
          const same = kept.find((k) => sameSolution(k.reference_actions ?? [], d.reference_actions));
          if (same) return `its reference_actions are those of scenario ${same.id} ("${same.task}"): a scenario with the same solution is the same task; write one that needs other calls or other records`;
          const silent = silentTask(d);
          if (silent) return silent;
          const parsed = Scenario.safeParse(toScenario(d, id, bundle.id, mode));
          if (!parsed.success) return `not a valid scenario: ${parsed.error.issues.map((x) => `${x.path.join(".")}: ${x.message}`).join("; ")}`;
          const problem = await vetScenario(bundleDir, parsed.data, workDir);
          const hints = problem === null ? [] : checkHints(d.checklist.map((c) => c.source), initial);
          return problem === null ? null : `${problem}${hints.length ? `. Likely cause: ${hints.join(" ")}` : ""}`;
        },
        { echo: false },
      );
      kept.push(Scenario.parse(toScenario(draft, id, bundle.id, mode)));
    } catch (e) {
      if (!(e instanceof LlmError)) throw e;
      const derived = mode === "task" && (options.fallback ?? "derived") === "derived" ? await deriveOne(llm, bundleDir, workDir, { id, envId: bundle.id, introduction: m.introduction, taken: kept.map((s) => s.task) }, candidates, used, kept) : null;
      if (derived && "scenario" in derived) {
        kept.push(derived.scenario);
        derivedIds.push(derived.scenario.id);
        if (derived.composedFrom) composed[derived.scenario.id] = derived.composedFrom;
      } else rejected.push({ item: `${bundle.id} scenario ${i + 1}`, reason: `${e.message}${derived ? `; derived from a tested call: ${derived.reason}` : ""}` });
    } finally {
      options.onProgress?.(i + 1, n);
    }
  }
  rmSync(workDir, { recursive: true, force: true });
  writeFileSync(join(bundleDir, "scenarios.json"), `${JSON.stringify(kept, null, 1)}\n`);
  return { kept, rejected, derived: derivedIds, composed };
}

/** The next derived scenario that passes vetting (each candidate solution tried once per stage), or why none did. */
async function deriveOne(
  llm: LlmClient,
  bundleDir: string,
  workDir: string,
  meta: { id: string; envId: string; introduction: string; taken: string[] },
  solutions: readonly ToolCall[][],
  used: Set<number>,
  kept: readonly Scenario[],
): Promise<{ scenario: Scenario; composedFrom?: string[] } | { reason: string } | null> {
  const reasons: string[] = [];
  for (const [k, calls] of solutions.entries()) {
    if (used.has(k)) continue;
    used.add(k);
    if (kept.some((s) => sameSolution(s.reference_actions ?? [], calls))) continue;
    const named = calls.map((c) => c.name).join(" + ");
    // a small model may write good one-call texts yet never name a pair's second record (the 1.5B,
    // 2026-12-07 run 11): the pair's text then falls back to the kept one-call tasks' texts
    const composed = composedTask(calls, kept) ?? undefined;
    try {
      const derived = await deriveScenario(llm, bundleDir, calls, { ...meta, composed });
      if (!derived) {
        reasons.push(`${named}: changes nothing on the initial state, or fails there`);
        continue;
      }
      const scenario = Scenario.parse(derived.scenario);
      const problem = await vetScenario(bundleDir, scenario, workDir);
      if (problem === null) return { scenario, ...(derived.composedFrom ? { composedFrom: derived.composedFrom } : {}) };
      reasons.push(`${named}${derived.composedFrom ? ` (its task text composed from ${derived.composedFrom.join(", ")})` : ""}: ${problem}`);
    } catch (e) {
      if (!(e instanceof LlmError)) throw e;
      reasons.push(`${named}: ${e.message}`);
    }
  }
  return reasons.length ? { reason: reasons.join("; ") } : null;
}

/**
 * Why a task names none of the values its reference solution uses, or null: an agent reading it
 * could not know which records or values to use (the 1.5B's "Add eligibility to patient records",
 * whose solution set two patients' eligibility, passed every other gate, 2026-12-07). One value
 * named is enough: the rest may be for the agent to look up.
 */
function silentTask(d: { task: string; user_instructions?: string; reference_actions: { arguments: Record<string, unknown> }[] }): string | null {
  const values = [...new Set(d.reference_actions.flatMap((a) => argumentValues(a.arguments)))].filter((v) => v.trim() !== "");
  const text = `${d.task}\n${d.user_instructions ?? ""}`.toLowerCase();
  if (values.length === 0 || values.some((v) => text.includes(v.toLowerCase()))) return null;
  return `the task names none of the values its reference_actions use (${values.slice(0, 6).map((v) => JSON.stringify(v)).join(", ")}): an agent reading it could not know which records or values to use; say them in the task`;
}

function toScenario(d: z.infer<typeof ScenarioDraft>, id: string, envId: string, mode: "task" | "conversation"): unknown {
  return {
    id,
    env_id: envId,
    mode,
    task: d.task,
    ...(mode === "conversation" ? { user_instructions: d.user_instructions } : {}),
    ...(Object.keys(d.state_overrides).length ? { state_overrides: d.state_overrides } : {}),
    checks: [...d.checklist.map((c) => ({ kind: "js", description: c.description, source: c.source })), { kind: "reference_state" }],
    reference_actions: d.reference_actions,
  };
}
