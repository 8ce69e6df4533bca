import { Ajv } from "ajv";
import type { EnvBundle } from "../../../envs/format/load-bundle.js";
import type { StepResult } from "../../core/episode/episode.js";
import { EnvLoadError, EnvSession } from "../../core/episode/env-session.js";
import { ReferenceCache } from "../../core/episode/reference-state.js";
import { ToolValidator } from "../../core/episode/tool-validator.js";
import { SandboxFault } from "../../core/sandbox/sandbox-fault.js";
import { SandboxHost } from "../../core/sandbox/sandbox-host.js";
import { bundleInitialState, bundleStateBase } from "../../core/state/bundle-state.js";
import { type GamingProbe, probeGaming } from "./gaming-probes.js";
import { CHECK_SEED, runScenario } from "./run-scenario.js";
import { syntaxErrorLocation } from "./syntax-error-location.js";
import { PROGRAMMING_ERRORS, probeValue } from "./tool-probe.js";

export interface CheckReport {
  envId: string;
  dir: string;
  tools: number;
  scenarios: number;
  problems: string[];
  warnings: string[];
  /** The gaming probes of each scenario whose reference solution scores 1.0 (gaming-probes.ts). */
  probes: Record<string, GamingProbe>;
}

export interface CheckOptions {
  /** Told what is being checked before each stage that runs env code (for error messages). */
  onProgress?: (stage: string) => void;
  /** Run the gaming probes (gaming-probes.ts) on each scenario. @default true */
  probes?: boolean;
  /** The sandbox host the check's sandboxes take instances from (the check worker's); none: one of its own, disposed when the check ends. */
  sandboxes?: SandboxHost;
}

/** A random agent's 1.0, or a reference solution none of whose steps is needed, is a problem; a write whose effect is unchecked, a warning. */
function reportProbe(label: string, steps: number, probe: GamingProbe, report: CheckReport): void {
  if (probe.randomWinner) {
    const calls = probe.randomWinner.map((c) => `${c.name}(${JSON.stringify(c.arguments)})`).join(", ");
    report.problems.push(`${label}: a random agent reached reward 1.0 (best of ${probe.randomEpisodes} seeded episodes of schema-valid calls), so the checks do not tell a solution from chance; its calls: ${calls}`);
  }
  if (steps > 1 && probe.dropped === steps && probe.droppable.length === steps) {
    report.problems.push(`${label}: leaving out any one reference action still scores 1.0, so the checks test none of them`);
  } else {
    for (const d of probe.droppable.filter((x) => x.wrote)) {
      report.warnings.push(`${label}: reference action #${d.index + 1} ${d.name} changes the state, yet leaving it out still scores 1.0: its effect is unchecked, or it is not needed`);
    }
  }
  if (probe.cutShort) report.warnings.push(`${label}: the gaming probes ran out of their time budget (${probe.dropped} of ${steps} actions dropped, ${probe.randomEpisodes} random episodes)`);
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
async function probeUncalledTools(sandboxes: SandboxHost, bundle: EnvBundle, report: CheckReport, progress: (stage: string) => void): Promise<void> {
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
    const session = await EnvSession.open(bundle, bundleStateBase(bundle), { seed: CHECK_SEED, sandboxes });
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
  if (options.sandboxes) return checkWith(options.sandboxes, bundle, options);
  using sandboxes = new SandboxHost({ label: "checkBundle" });
  return await checkWith(sandboxes, bundle, options);
}

async function checkWith(sandboxes: SandboxHost, bundle: EnvBundle, options: CheckOptions): Promise<CheckReport> {
  const progress = options.onProgress ?? (() => {});
  const report: CheckReport = { envId: bundle.id, dir: bundle.dir, tools: bundle.manifest.tools.length, scenarios: bundle.scenarios.size, problems: [], warnings: [], probes: {} };
  const m = bundle.manifest;

  progress(`${m.source_file}: loading class ${m.class_name}`);
  try {
    const session = await EnvSession.open(bundle, bundleStateBase(bundle), { seed: CHECK_SEED, sandboxes });
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

  const refs = new ReferenceCache(sandboxes);
  for (const scenario of bundle.scenarios.values()) {
    const label = `scenarios.json ${scenario.id}`;
    if (scenario.checks.length === 0) report.warnings.push(`${label}: no checks, so every episode scores 0`);

    progress(`${label}: doing nothing`);
    const nothing = await runScenario(bundle, scenario, refs, [], false);
    for (const c of nothing.result.info.reward_info?.checks ?? []) {
      if (c.error && /SyntaxError/.test(c.error)) report.problems.push(`${label}: check #${c.index} does not compile: ${c.error}`);
    }
    if (nothing.result.info.error) report.problems.push(`${label}: ending the episode untouched failed: ${describeFailures(nothing.result)}`);
    else if (scenario.checks.length && nothing.result.reward >= 1) report.problems.push(`${label}: doing nothing already scores 1.0, so the checks test nothing`);

    if (!scenario.reference_actions) {
      report.warnings.push(`${label}: no reference_actions, so solvability is not checked`);
      if (options.probes !== false && scenario.checks.length && !nothing.result.info.error) {
        // nothing to leave out, but a random agent can still be tried against the checks
        progress(`${label}: probing whether a random agent passes the checks`);
        const probe = await probeGaming(bundle, scenario, refs, []);
        report.probes[scenario.id] = probe;
        reportProbe(label, 0, probe, report);
      }
      continue;
    }
    progress(`${label}: the reference solution`);
    const solved = await runScenario(bundle, scenario, refs, scenario.reference_actions, true);
    for (const err of solved.toolErrors) report.problems.push(`${label}: reference action rejected: ${err}`);
    if (solved.refusals.length) report.warnings.push(`${label}: reference actions the env refused ({success: false}): ${solved.refusals.join(", ")}`);
    if (solved.result.truncated) report.problems.push(`${label}: the reference solution needs more than max_steps steps`);
    if (scenario.checks.length && solved.result.reward < 1) {
      report.problems.push(`${label}: the reference solution scores ${solved.result.reward}, not 1.0: ${describeFailures(solved.result)}`);
    } else if (options.probes !== false && scenario.checks.length && !solved.toolErrors.length) {
      progress(`${label}: probing whether the checks can be gamed`);
      const probe = await probeGaming(bundle, scenario, refs, solved.wrote);
      report.probes[scenario.id] = probe;
      reportProbe(label, scenario.reference_actions.length, probe, report);
    }
  }
  // last: a probe may hit a tool that hangs, and the scenarios' own findings come first
  await probeUncalledTools(sandboxes, bundle, report, progress);
  return report;
}
