import { Ajv } from "ajv";
import type { Scenario } from "../../envs/bundle-schema.js";
import type { EnvBundle } from "../../envs/load-bundle.js";
import { Episode, type StepResult } from "../episode/episode.js";
import { EnvLoadError, EnvSession } from "../episode/env-session.js";
import { ReferenceCache } from "../episode/reference-state.js";
import { ToolValidator } from "../episode/tool-validator.js";
import { SandboxFault } from "../sandbox/sandbox-fault.js";
import { bundleInitialState, bundleStateBase } from "../state/bundle-state.js";
import { syntaxErrorLocation } from "./syntax-error-location.js";
import { PROGRAMMING_ERRORS, probeValue } from "./tool-probe.js";

export interface CheckReport {
  envId: string;
  dir: string;
  tools: number;
  scenarios: number;
  problems: string[];
  warnings: string[];
}

const SEED = 0;

export interface CheckOptions {
  /** Told what is being checked before each stage that runs env code (for error messages). */
  onProgress?: (stage: string) => void;
}

/** Scores one run of a scenario: either its reference solution, or doing nothing. */
async function runScenario(bundle: EnvBundle, scenario: Scenario, refs: ReferenceCache, solve: boolean): Promise<{ result: StepResult; toolErrors: string[]; refusals: string[] }> {
  const episode = new Episode({
    bundle,
    scenario,
    seed: SEED,
    episodeId: `check-${scenario.id}`,
    reference: () => refs.get(bundle, scenario.id, SEED),
  });
  const toolErrors: string[] = [];
  const refusals: string[] = [];
  try {
    await episode.reset();
    let last: StepResult | undefined;
    if (solve) {
      for (const a of scenario.reference_actions ?? []) {
        last = await episode.step({ name: a.name, arguments: a.arguments });
        for (const r of last.observation.tool_results ?? []) {
          const type = r.ok ? undefined : (JSON.parse(r.content) as { error: { type: string; message: string } }).error;
          // a deliberate exception is allowed (tau-bench ground truths contain some); a TypeError is a bug in the tool
          const bug = type?.type === "tool_exception" && [...PROGRAMMING_ERRORS].some((n) => type.message.startsWith(`${a.name} raised ${n}:`));
          if (type && (type.type !== "tool_exception" || bug)) toolErrors.push(`${a.name}: ${type.message}`);
          // allowed (tau-bench ground truths contain refused calls), but worth a look
          // a python-format env's result text need not be JSON ("Error: order not found")
          if (r.ok && (jsonOrNull(r.content) as { success?: unknown } | null)?.success === false) refusals.push(`${a.name}(${JSON.stringify(a.arguments)})`);
        }
        if (last.terminated || last.truncated) break;
      }
      const messages = scenario.reference_messages ?? [];
      if (!episode.isDone && messages.length) {
        if (scenario.mode === "task") last = await episode.step(messages.join("\n"));
        else for (const m of messages) last = await episode.step(m);
      }
    }
    const result = episode.isDone && last ? last : await episode.finish();
    return { result, toolErrors, refusals };
  } finally {
    episode.close();
  }
}

function describeFailures(result: StepResult): string {
  if (result.info.error) return `${result.info.error.code}: ${result.info.error.message}`;
  const failed = (result.info.reward_info?.checks ?? []).filter((c) => !c.passed);
  return failed.map((c) => `#${c.index} "${c.description}"${c.error ? ` (${c.error})` : ""}`).join("; ");
}

/**
 * Every tool runs at least once: the reference solutions call some; each tool none of them calls is
 * called once here, with the simplest arguments its schema accepts, on the default state. A tool
 * whose code is broken (a TypeError on any call, like a synthesized add_to_cart that reads a field
 * of undefined) fails the check instead of passing untested.
 */
async function probeUncalledTools(bundle: EnvBundle, report: CheckReport, progress: (stage: string) => void): Promise<void> {
  const m = bundle.manifest;
  const called = new Set([...bundle.scenarios.values()].flatMap((s) => (s.reference_actions ?? []).map((a) => a.name)));
  const validator = ToolValidator.for(m.tools);
  try {
    validator.compileAll();
  } catch (e) {
    report.problems.push(`manifest.json: ${(e as Error).message}`);
    return;
  }
  const unprobed: string[] = [];
  for (const tool of m.tools) {
    const name = tool.function.name;
    if (called.has(name)) continue;
    const args = probeValue(tool.function.parameters);
    if (args === null || typeof args !== "object" || Array.isArray(args) || validator.check(name, args as Record<string, unknown>)) {
      unprobed.push(name);
      continue;
    }
    progress(`${m.source_file}: probing ${name}, which no reference solution calls`);
    const session = await EnvSession.open(bundle, bundleStateBase(bundle), { seed: SEED });
    try {
      const out = session.call(name, args as Record<string, unknown>);
      if (out.kind === "error" && PROGRAMMING_ERRORS.has(out.error.name)) {
        report.problems.push(`${m.source_file}: tool ${name} throws ${out.error.name} when called with ${JSON.stringify(args)}: ${out.error.message} (no reference solution calls it; a tool answers bad input with {success: false, error})`);
      }
    } catch (e) {
      if (!(e instanceof SandboxFault)) throw e;
      report.problems.push(`${m.source_file}: tool ${name}, called with ${JSON.stringify(args)}, ended its sandbox: ${e.code}: ${e.message}`);
    } finally {
      session.dispose();
    }
  }
  if (unprobed.length) report.warnings.push(`${m.source_file}: tools no reference solution calls and the check could not build arguments for: ${unprobed.join(", ")}`);
}

/**
 * Everything `envscaler check` verifies about one loaded bundle: the class loads in the sandbox,
 * tools match methods, initial states fit the state schema, checks compile, every reference
 * solution scores 1.0 and doing nothing scores below 1.0.
 */
export async function checkBundle(bundle: EnvBundle, options: CheckOptions = {}): Promise<CheckReport> {
  const progress = options.onProgress ?? (() => {});
  const report: CheckReport = { envId: bundle.id, dir: bundle.dir, tools: bundle.manifest.tools.length, scenarios: bundle.scenarios.size, problems: [], warnings: [] };
  const m = bundle.manifest;

  progress(`${m.source_file}: loading class ${m.class_name}`);
  try {
    const session = await EnvSession.open(bundle, bundleStateBase(bundle), { seed: SEED });
    const toolNames = m.tools.map((t) => t.function.name);
    const missing = toolNames.filter((n) => !session.methods.includes(n));
    if (missing.length) report.problems.push(`${m.source_file}: class ${m.class_name} has no method for tools ${missing.join(", ")}`);
    if (m.unlisted_call_method && !session.methods.includes(m.unlisted_call_method)) report.problems.push(`${m.source_file}: class ${m.class_name} has no method ${m.unlisted_call_method} (the manifest's unlisted_call_method)`);
    for (const [k, name] of Object.entries(m.action_methods ?? {})) if (!session.methods.includes(name)) report.problems.push(`${m.source_file}: class ${m.class_name} has no method ${name} (the manifest's action_methods.${k})`);
    // with an unlisted_call_method the env decides what other names do, so unlisted methods are expected
    const untooled = m.unlisted_call_method ? [] : session.methods.filter((n) => !toolNames.includes(n) && !n.startsWith("_"));
    if (untooled.length) report.warnings.push(`${m.source_file}: public methods without a tool schema (not callable by agents): ${untooled.join(", ")}`);
    session.dispose();
  } catch (e) {
    if (e instanceof EnvLoadError || e instanceof SandboxFault) {
      const at = /SyntaxError/.test(e.message) ? await syntaxErrorLocation(bundle.source, m.source_file) : null;
      report.problems.push(
        at
          ? `${m.source_file}:${at.line}:${at.column}: the env does not load in the sandbox: ${at.message}\n      ${at.line} | ${at.text.trim()}`
          : `${m.source_file}: the env does not load in the sandbox: ${e.message}`,
      );
      return report;
    }
    throw e;
  }

  if (report.problems.length) return report; // episodes cannot run on a class that lacks tools

  if (m.state_schema) {
    const validate = new Ajv({ allErrors: true, strict: false }).compile(m.state_schema);
    const fit = (label: string, state: unknown) => {
      if (!validate(state)) report.problems.push(`${label}: initial state does not fit state_schema: ${(validate.errors ?? []).map((e) => `${e.instancePath || "/"} ${e.message}`).join("; ")}`);
    };
    fit("manifest.json default state", bundleInitialState(bundle));
    for (const id of bundle.scenarios.keys()) fit(`scenarios.json ${id}`, bundleInitialState(bundle, id));
  }

  const refs = new ReferenceCache();
  for (const scenario of bundle.scenarios.values()) {
    const label = `scenarios.json ${scenario.id}`;
    if (scenario.checks.length === 0) report.warnings.push(`${label}: no checks, so every episode scores 0`);

    progress(`${label}: doing nothing`);
    const nothing = await runScenario(bundle, scenario, refs, false);
    for (const c of nothing.result.info.reward_info?.checks ?? []) {
      if (c.error && /SyntaxError/.test(c.error)) report.problems.push(`${label}: check #${c.index} does not compile: ${c.error}`);
    }
    if (nothing.result.info.error) report.problems.push(`${label}: ending the episode untouched failed: ${describeFailures(nothing.result)}`);
    else if (scenario.checks.length && nothing.result.reward >= 1) report.problems.push(`${label}: doing nothing already scores 1.0, so the checks test nothing`);

    if (!scenario.reference_actions) {
      report.warnings.push(`${label}: no reference_actions, so solvability is not checked`);
      continue;
    }
    progress(`${label}: the reference solution`);
    const solved = await runScenario(bundle, scenario, refs, true);
    for (const err of solved.toolErrors) report.problems.push(`${label}: reference action rejected: ${err}`);
    if (solved.refusals.length) report.warnings.push(`${label}: reference actions the env refused ({success: false}): ${solved.refusals.join(", ")}`);
    if (solved.result.truncated) report.problems.push(`${label}: the reference solution needs more than max_steps steps`);
    if (scenario.checks.length && solved.result.reward < 1) {
      report.problems.push(`${label}: the reference solution scores ${solved.result.reward}, not 1.0: ${describeFailures(solved.result)}`);
    }
  }
  // last: a probe may hit a tool that hangs, and the scenarios' own findings come first
  await probeUncalledTools(bundle, report, progress);
  return report;
}

function jsonOrNull(text: string): unknown {
  try {
    return JSON.parse(text);
  } catch {
    return null;
  }
}
