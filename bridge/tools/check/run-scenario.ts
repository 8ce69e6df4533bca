import type { Scenario, ToolCall } from "../../../envs/format/bundle-schema.js";
import type { EnvBundle } from "../../../envs/format/load-bundle.js";
import { Episode, type StepResult } from "../../core/episode/episode.js";
import type { ReferenceCache } from "../../core/episode/reference-state.js";
import { isRefusal } from "./is-refusal.js";
import { PROGRAMMING_ERRORS } from "./tool-probe.js";

/** The seed every run of `envscaler check` uses (a scenario's checks must pass under it). */
export const CHECK_SEED = 0;

export interface ScenarioRun {
  /** The episode's last step: its reward and checks. */
  result: StepResult;
  /** Per action played: whether it changed the env's state (a non-empty diff). */
  wrote: boolean[];
  /** Actions whose tool failed for a reason that is not the input's (a TypeError in the tool, a refused schema). */
  toolErrors: string[];
  /** Actions the env refused with {success: false}. */
  refusals: string[];
}

/**
 * Plays `actions` in a fresh episode of `scenario` (then, with `say`, the scenario's reference
 * messages, as the reference agent would) and scores it. `actions` is the reference solution, a
 * part of it, nothing, or a probe's calls.
 */
export async function runScenario(bundle: EnvBundle, scenario: Scenario, refs: ReferenceCache, actions: readonly ToolCall[], say: boolean, seed = CHECK_SEED): Promise<ScenarioRun> {
  const episode = new Episode({
    bundle,
    scenario,
    seed,
    episodeId: `check-${scenario.id}`,
    reference: () => refs.get(bundle, scenario.id, CHECK_SEED),
    // the check's sandbox host, the one its reference replays use
    sandboxes: refs.sandboxes,
  });
  const toolErrors: string[] = [];
  const refusals: string[] = [];
  const wrote: boolean[] = [];
  try {
    await episode.reset();
    let last: StepResult | undefined;
    for (const a of actions) {
      last = await episode.step({ name: a.name, arguments: a.arguments });
      wrote.push(last.info.diff.length > 0);
      for (const r of last.observation.tool_results ?? []) {
        const type = r.ok ? undefined : (JSON.parse(r.content) as { error: { type: string; message: string } }).error;
        // a deliberate exception is allowed (tau-bench ground truths contain some); a TypeError is a bug in the tool
        const bug = type?.type === "tool_exception" && [...PROGRAMMING_ERRORS].some((n) => type.message.startsWith(`${a.name} raised ${n}:`));
        if (type && (type.type !== "tool_exception" || bug)) toolErrors.push(`${a.name}: ${type.message}`);
        // allowed (tau-bench ground truths contain refused calls), but worth a look
        // a python-format env's result text need not be JSON ("Error: order not found")
        if (r.ok && isRefusal(r.content)) refusals.push(`${a.name}(${JSON.stringify(a.arguments)})`);
      }
      if (last.terminated || last.truncated) break;
    }
    const messages = say ? (scenario.reference_messages ?? []) : [];
    if (!episode.isDone && messages.length) {
      if (scenario.mode === "task") last = await episode.step(messages.join("\n"));
      else {
        // without a simulated user a conversation ends at the agent's first reply (docs/protocol.md)
        for (const m of messages) {
          if (episode.isDone) break;
          last = await episode.step(m);
        }
      }
    }
    const result = episode.isDone && last ? last : await episode.finish();
    return { result, wrote, toolErrors, refusals };
  } finally {
    episode.close();
  }
}
