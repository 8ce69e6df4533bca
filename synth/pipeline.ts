import { cpSync, existsSync, mkdirSync, readdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { checkBundleIsolated } from "../bridge/tools/check/check-isolated.js";
import { isBundleDir } from "../envs/format/load-bundle.js";
import type { LlmClient, StageUsage } from "./llm/llm-client.js";
import { buildEnvs, type BuiltEnv, type CodeWay } from "./stages/build-env.js";
import { mine, readTaskTexts, type MineResult, type Rejection, type TaskFormat } from "./stages/mine.js";
import { generateScenarios } from "./stages/scenarios.js";

export type SynthStage = "mine" | "build" | "scenarios" | "all";

export interface SynthOptions {
  stage: SynthStage;
  /** Output folder: mined.json, build/<env>/, envs/<env>/ (the served bundles), report.json. */
  out: string;
  input?: string;
  format?: TaskFormat;
  limit?: number;
  rounds?: number;
  threshold?: number;
  perEnv?: number;
  /** How the build stage writes each env class first (build-env.ts). @default "whole" */
  codeMode?: CodeWay;
  /** How it writes it when that fails ("none": the env is rejected). @default "methods" */
  codeFallback?: CodeWay | "none";
  /** Every n-th scenario of an env is a conversation (0: none). @default 3 */
  conversationEvery?: number;
  /** When the model's task scenario fails vetting: one built around a tested call ("derived"), or none. @default "derived" */
  scenarioFallback?: "derived" | "none";
  progress?: (stage: string, done: number, total: number) => void;
}

export interface SynthReport {
  mine?: { input: string; envs: number; rejected: Rejection[] };
  build?: { envs: { env_id: string; topic: string; code_mode: BuiltEnv["code_mode"]; pass_rate: number; kept: boolean; cases: number }[]; rejected: Rejection[] };
  /**
   * `derived`: per env, the kept scenarios built around a tested call (--scenario-fallback derived), not written whole by the model;
   * `composed`: per env, those of them whose task text was put together from kept scenarios' texts (scenario id → their ids), not written by the model for them.
   */
  scenarios?: { envs: Record<string, string[]>; derived: Record<string, string[]>; composed: Record<string, Record<string, string[]>>; rejected: Rejection[]; check: Record<string, string[]> };
  usage: Record<string, StageUsage>;
}

const readJson = <T>(path: string): T => JSON.parse(readFileSync(path, "utf8")) as T;

/**
 * Runs synth stages; each reads the previous one's output from `out`, so they can run alone, and
 * the LLM cache makes a rerun after a crash repeat no finished call. The report says what was
 * kept and why everything else was rejected.
 */
export async function runSynth(llm: LlmClient, o: SynthOptions): Promise<SynthReport> {
  mkdirSync(o.out, { recursive: true });
  const reportPath = join(o.out, "report.json");
  const report: SynthReport = existsSync(reportPath) ? readJson<SynthReport>(reportPath) : { usage: {} };
  const save = () => {
    report.usage = llm.usage;
    writeFileSync(reportPath, `${JSON.stringify(report, null, 1)}\n`);
  };
  const all = o.stage === "all";

  if (o.stage === "mine" || all) {
    if (!o.input) throw new Error("the mine stage needs --input (a task text file)");
    const tasks = readTaskTexts(o.input, o.format ?? "jsonl");
    const mined = await mine(llm, tasks, { limit: o.limit, onProgress: (d, t) => o.progress?.("mine", d, t) });
    writeFileSync(join(o.out, "mined.json"), `${JSON.stringify(mined, null, 1)}\n`);
    report.mine = { input: o.input, envs: mined.envs.length, rejected: mined.rejected };
    save();
  }

  if (o.stage === "build" || all) {
    const mined = readJson<MineResult>(join(o.out, "mined.json"));
    const built = await buildEnvs(llm, mined.envs, { outDir: join(o.out, "build"), rounds: o.rounds, threshold: o.threshold, codeMode: o.codeMode, codeFallback: o.codeFallback, onProgress: (d, t) => o.progress?.("build", d, t) });
    report.build = { envs: built.built.map((b: BuiltEnv) => ({ env_id: b.env_id, topic: b.topic, code_mode: b.code_mode, pass_rate: b.pass_rate, kept: b.kept, cases: b.cases.length })), rejected: built.rejected };
    save();
  }

  if (o.stage === "scenarios" || all) {
    const buildDir = join(o.out, "build");
    const keptEnvs = new Set((report.build?.envs ?? []).filter((e) => e.kept).map((e) => e.env_id));
    const dirs = existsSync(buildDir) ? readdirSync(buildDir).map((d) => join(buildDir, d)).filter(isBundleDir) : [];
    const result: NonNullable<SynthReport["scenarios"]> = { envs: {}, derived: {}, composed: {}, rejected: [], check: {} };
    let done = 0;
    o.progress?.("scenarios", 0, keptEnvs.size); // shown before the first env's scenario calls finish
    await Promise.all(
      dirs.map(async (dir) => {
        const envId = (readJson<{ id: string }>(join(dir, "manifest.json"))).id;
        if (!keptEnvs.has(envId)) return;
        const { kept, rejected, derived, composed } = await generateScenarios(llm, dir, { perEnv: o.perEnv, conversationEvery: o.conversationEvery, fallback: o.scenarioFallback });
        result.rejected.push(...rejected);
        const served = join(o.out, "envs", envId.replace(/-v\d+$/, ""));
        rmSync(served, { recursive: true, force: true });
        if (kept.length === 0) {
          result.rejected.push({ item: envId, reason: "no scenario survived vetting" });
        } else {
          mkdirSync(served, { recursive: true });
          for (const f of ["manifest.json", "env.js", "scenarios.json"]) cpSync(join(dir, f), join(served, f));
          // each scenario passed the gaming probes when it was vetted alone; they are seeded, so
          // running them again over the assembled bundle would only repeat that work
          const check = await checkBundleIsolated(served, { probes: false });
          result.check[envId] = check.problems;
          if (check.problems.length) {
            rmSync(served, { recursive: true, force: true });
            result.rejected.push({ item: envId, reason: `the assembled bundle fails envscaler check: ${check.problems.join("; ")}` });
          } else {
            result.envs[envId] = kept.map((s) => s.id);
            if (derived.length) result.derived[envId] = derived;
            if (Object.keys(composed).length) result.composed[envId] = composed;
          }
        }
        o.progress?.("scenarios", ++done, keptEnvs.size);
      }),
    );
    report.scenarios = result;
    save();
  }
  save();
  return report;
}
