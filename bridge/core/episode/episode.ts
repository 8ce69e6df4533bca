import { MAX_CALLS_PER_ACTION } from "../sandbox/limits.js";
import { bundleStateBase } from "../state/bundle-state.js";
import { toolObservationText } from "../../../protocol/step-wire.js";
import type { ToolSchema, Scenario } from "../../../envs/format/bundle-schema.js";
import type { EnvBundle } from "../../../envs/format/load-bundle.js";
import type { SandboxLimits } from "../sandbox/limits.js";
import { SandboxFault } from "../sandbox/sandbox-fault.js";
import type { SandboxHost } from "../sandbox/sandbox-host.js";
import type { PatchOp } from "../state/json-patch.js";
import type { StateView } from "../state/state-base.js";
import { parseAction, type ParsedCall } from "./action-parser.js";
import type { ActionRecord, CheckInputs, CheckResult } from "./checker.js";
import { scoreEnd, viewData, type ScoreJob } from "./score-job.js";
import { EnvLoadError, EnvSession, limitsFor, type EnvSnapshot } from "./env-session.js";
import { openingTools } from "./opening-tools.js";
import { ToolValidator } from "./tool-validator.js";
import { STOP_MARKER, UserSimulatorError, type UserSimulator } from "./user-simulator.js";

export interface ToolResult {
  tool_call_id: string;
  name: string;
  /** The tool's return value as JSON text, or an error object as JSON text. */
  content: string;
  ok: boolean;
}

/** What the agent sees after a step: tool results, or the (simulated) user's message. */
export interface Observation {
  role: "tool" | "user";
  content: string;
  tool_results?: ToolResult[];
}

export type EndReason = "text_reply" | "user_stop" | "terminating_tool" | "max_steps" | "turn_step_limit" | "client" | "env_fault" | "no_user";

/**
 * The closing observation of a conversation played with no simulated user (serve without
 * --user-model): the agent's first text reply ends it, scored, with `end_reason: "no_user"`, so it
 * can never run on to the step cap waiting for a user who is not there. Not a user's words: the
 * SFT export leaves such episodes out.
 */
export const NO_USER_OBSERVATION = "(no simulated user is attached; the conversation ends at the agent's reply: serve --user-model to talk to one)";

/** A typed episode-ending error: the env (or its user simulator) failed, not the agent. */
export interface EpisodeError {
  code: "env_timeout" | "env_oom" | "env_crashed" | "env_output_invalid" | "env_load_failed" | "user_simulator_failed";
  message: string;
}

export interface RewardInfo {
  checks: CheckResult[];
  passed: number;
  total: number;
  /** True when the scenario has no checks: the reward is 0 by definition, not a failure of the agent. */
  no_checks: boolean;
  /** How the checks became the reward: their share (`fraction`) or all-or-nothing (`all`). */
  mode: "fraction" | "all";
}

/** A call as the step reply lists it: what was asked and, when it did not run or threw, why. */
export interface CallRecord {
  id: string;
  name: string;
  arguments: Record<string, unknown>;
  error?: string;
}

export interface StepInfo {
  step: number;
  episode_id: string;
  /** The calls as parsed, and why any did not run (`error`); their outputs are in observation.tool_results, once. */
  tool_calls: CallRecord[];
  diff: PatchOp[];
  state_hash: string;
  end_reason?: EndReason;
  /** With end_reason `text_reply`: the agent's text that ended the task episode (so a parse miss is visible). */
  end_text?: string;
  reward_info?: RewardInfo;
  error?: EpisodeError;
  /** Multi-turn scenarios: the user turn now under way (0-based), and what the env said when the last one ended. */
  turn?: { index: number; ended?: unknown };
  /** Multi-turn scenarios: the tool list from this step on, when it changed (held-out tools were added). */
  tools?: ToolSchema[];
}

export interface StepResult {
  observation: Observation;
  reward: number;
  terminated: boolean;
  truncated: boolean;
  info: StepInfo;
}

export interface ResetInfo {
  episode_id: string;
  env_id: string;
  scenario_id: string;
  mode: Scenario["mode"];
  seed: number;
  introduction: string;
  rules: string[];
  tools: ToolSchema[];
  max_steps: number;
  state_hash: string;
  env_hash: string;
  scenario_hash: string;
  /** `user_stop` when the simulated user ended the conversation in its opening message: the next step or finish returns the scored end. */
  end_reason?: "user_stop";
  /** Multi-turn scenarios: how many user turns the task has (a reply without tool calls ends each). */
  turns?: number;
}

/** Everything needed to re-execute an episode exactly: its inputs, never its outputs. */
export interface EpisodeInputs {
  env_id: string;
  scenario_id: string;
  seed: number;
  actions: unknown[];
  user_replies: string[];
}

/**
 * An episode frozen between steps: its sandbox image and every host-side part of it (tracked
 * state, step count, actions, messages, inputs, the simulated user's conversation). Immutable:
 * each restore or fork from it starts an independent copy at exactly this point.
 */
export interface EpisodeSnapshot {
  readonly env: EnvSnapshot;
  readonly steps: number;
  readonly actions: readonly ActionRecord[];
  readonly messages: readonly string[];
  readonly inputs: EpisodeInputs;
  readonly user?: UserSimulator;
  readonly scenarioId: string;
  readonly seed: number;
  /** Memory this snapshot holds (the sandbox image; host-side parts are small). */
  readonly bytes: number;
  readonly stateHash: string;
  /** Where a multi-turn scenario is (its turn, that turn's steps, the tools shown so far) and whether the user stopped at its opening. */
  readonly progress: { turn: number; turnSteps: number; visibleTools: ToolSchema[]; stoppedAtOpening: boolean };
}

export class EpisodeStateError extends Error {
  override readonly name = "EpisodeStateError";
  constructor(
    readonly code: "reset_needed" | "episode_done" | "closed",
    message: string,
  ) {
    super(message);
  }
}

export { MAX_CALLS_PER_ACTION };

export interface EpisodeOptions {
  bundle: EnvBundle;
  scenario: Scenario;
  seed: number;
  episodeId: string;
  /** Required for conversation scenarios, unless the client ends them with finish(). */
  user?: UserSimulator;
  limits?: Partial<SandboxLimits>;
  /** The sandbox host of the engine running the episode: its sandbox (and its checks' sandboxes) take instances there. */
  sandboxes: SandboxHost;
  /** The state the reference actions produce, for `reference_state` checks (usually cached by the caller). */
  reference?: () => Promise<StateView | { error: string }>;
}

/** The path of the first NaN or ±Infinity in a value (msgpack can carry them, JSON Schema's "number" accepts them), or null. */
function nonFinite(v: unknown, path: string): string | null {
  if (typeof v === "number") return Number.isFinite(v) ? null : path || "(the value)";
  if (v === null || typeof v !== "object") return null;
  for (const [k, x] of Object.entries(v)) {
    const found = nonFinite(x, `${path}${Array.isArray(v) ? `[${k}]` : path ? `.${k}` : k}`);
    if (found) return found;
  }
  return null;
}

/**
 * The names a call to an unlisted name may have to be handed to the env's unlisted_call_method
 * (Python identifiers in ASCII, as long as a tool name may be); any other is `unknown_tool`.
 */
const UNLISTED_NAME_RE = /^[A-Za-z_][A-Za-z0-9_]{0,63}$/;

/** The env's action end hook misbehaved: its episode ends (env_output_invalid). */
class ActionHookError extends Error {}

function errorContent(type: string, message: string): string {
  return JSON.stringify({ error: { type, message } });
}

/**
 * One episode of one scenario, with EnvScaler's semantics: tool calls run in the env's sandbox; a
 * bad call becomes an observation and the episode goes on; a text-only reply ends a `task` episode
 * and goes to the simulated user in a `conversation` one; at the end the reward is the fraction of
 * checks that pass. Owns its EnvSession.
 */
export class Episode {
  private session: EnvSession | null = null;
  private steps = 0;
  private done = false;
  private closed = false;
  /** The simulated user said the stop marker in its opening: the episode is over, scored at the next step/finish. */
  private stoppedAtOpening = false;
  private readonly validator: ToolValidator;
  private actions: ActionRecord[] = [];
  private messages: string[] = [];
  /** Multi-turn scenarios (user_turns): the turn under way and its tool-calling steps so far. */
  private turn = 0;
  private turnSteps = 0;
  private visibleTools: ToolSchema[];
  inputs: EpisodeInputs;
  readonly maxSteps: number;

  constructor(private readonly options: EpisodeOptions) {
    this.validator = ToolValidator.for(options.bundle.manifest.tools);
    this.maxSteps = options.scenario.max_steps ?? options.bundle.manifest.max_steps;
    this.inputs = { env_id: options.bundle.id, scenario_id: options.scenario.id, seed: options.seed, actions: [], user_replies: [] };
    this.visibleTools = openingTools(options.bundle, options.scenario);
  }

  private get multiTurn(): boolean {
    return this.options.scenario.user_turns !== undefined;
  }

  private get pythonText(): boolean {
    return this.options.bundle.manifest.observation_format === "python";
  }

  /**
   * Ends the user turn under way (multi-turn scenarios): tells the env (turn_end_method) and, when
   * another turn follows, returns its user message; undefined when it was the last turn.
   */
  private endTurn(session: EnvSession, info: StepInfo): Observation | undefined {
    const { scenario } = this.options;
    let ended: unknown;
    if (scenario.turn_end_method) {
      const out = session.call(scenario.turn_end_method, {}); // a SandboxFault propagates: it ends the episode
      info.diff.push(...out.diff);
      ended = out.kind === "result" ? JSON.parse(out.json) : { error: out.error };
    }
    const next = scenario.user_turns![this.turn];
    this.turn++;
    this.turnSteps = 0;
    info.turn = { index: this.turn, ended };
    if (!next) return undefined;
    if (next.add_tools?.length) {
      const add = new Set(next.add_tools);
      this.visibleTools = [...this.visibleTools, ...this.options.bundle.manifest.tools.filter((t) => add.has(t.function.name))];
      info.tools = this.visibleTools;
    }
    this.inputs.user_replies.push(next.content);
    return { role: "user", content: next.content };
  }

  get id(): string {
    return this.options.episodeId;
  }

  get isDone(): boolean {
    return this.done;
  }

  /** Starts the episode. Throws EnvLoadError when the env cannot be set up at all. */
  async reset(): Promise<{ observation: Observation; info: ResetInfo }> {
    if (this.closed) throw new EpisodeStateError("closed", "the episode is closed");
    if (this.session) throw new EpisodeStateError("episode_done", "an episode is reset once; create a new one");
    const { bundle, scenario, seed } = this.options;
    this.session = await EnvSession.open(bundle, bundleStateBase(bundle, scenario.id), { seed, limits: this.options.limits, sandboxes: this.options.sandboxes });
    const missing = this.validator.names.filter((n) => !this.session!.methods.includes(n));
    if (missing.length) {
      this.close();
      throw new EnvLoadError(`the env class has no method for tools: ${missing.join(", ")}`);
    }
    const unlisted = bundle.manifest.unlisted_call_method;
    if (unlisted && !this.session.methods.includes(unlisted)) {
      this.close();
      throw new EnvLoadError(`the env class has no method ${unlisted} (the manifest's unlisted_call_method)`);
    }
    for (const [k, name] of Object.entries(bundle.manifest.action_methods ?? {})) {
      if (this.session.methods.includes(name)) continue;
      this.close();
      throw new EnvLoadError(`the env class has no method ${name} (the manifest's action_methods.${k})`);
    }
    let content = scenario.task;
    if (scenario.mode === "conversation" && this.options.user) {
      content = await this.userSays(() => this.options.user!.start());
      this.stoppedAtOpening = content.includes(STOP_MARKER);
    }
    return {
      observation: { role: "user", content },
      info: {
        episode_id: this.id,
        env_id: bundle.id,
        scenario_id: scenario.id,
        mode: scenario.mode,
        seed,
        introduction: bundle.manifest.introduction,
        rules: bundle.manifest.rules,
        tools: this.visibleTools,
        max_steps: this.maxSteps,
        state_hash: this.session.stateHash(),
        env_hash: bundle.contentHash,
        scenario_hash: bundle.scenarioHash(scenario.id),
        ...(this.stoppedAtOpening ? { end_reason: "user_stop" as const } : {}),
        ...(scenario.user_turns ? { turns: scenario.user_turns.length + 1 } : {}),
      },
    };
  }

  private async userSays(ask: () => Promise<string>): Promise<string> {
    const reply = await ask();
    this.inputs.user_replies.push(reply);
    return reply;
  }

  private live(): EnvSession {
    if (this.closed) throw new EpisodeStateError("closed", "the episode is closed");
    if (!this.session) throw new EpisodeStateError("reset_needed", "call reset() before step()");
    if (this.done) throw new EpisodeStateError("episode_done", "the episode has ended; reset a new one");
    return this.session;
  }

  /** Freezes the episode now (between steps). `sparse` for snapshots kept; a fork's is used once. */
  snapshot(sparse = true): EpisodeSnapshot {
    const session = this.live();
    const env = session.snapshot(sparse);
    return {
      env,
      steps: this.steps,
      actions: structuredClone(this.actions),
      messages: [...this.messages],
      inputs: structuredClone(this.inputs),
      user: this.options.user?.fork(),
      scenarioId: this.options.scenario.id,
      seed: this.options.seed,
      bytes: env.image.machine.bytes,
      stateHash: session.stateHash(),
      progress: { turn: this.turn, turnSteps: this.turnSteps, visibleTools: [...this.visibleTools], stoppedAtOpening: this.stoppedAtOpening },
    };
  }

  /** A new episode continuing from a snapshot (same scenario, seed, state, RNG, clock, history). */
  static async fromSnapshot(options: Omit<EpisodeOptions, "user" | "seed">, snap: EpisodeSnapshot): Promise<Episode> {
    if (options.scenario.id !== snap.scenarioId) throw new Error(`snapshot of ${snap.scenarioId} restored as ${options.scenario.id}`);
    const episode = new Episode({ ...options, seed: snap.seed, user: snap.user?.fork() });
    episode.session = await EnvSession.fromSnapshot(snap.env, options.sandboxes);
    episode.steps = snap.steps;
    episode.actions = structuredClone(snap.actions) as ActionRecord[];
    episode.messages = [...snap.messages];
    episode.inputs = structuredClone(snap.inputs);
    episode.turn = snap.progress.turn;
    episode.turnSteps = snap.progress.turnSteps;
    episode.visibleTools = [...snap.progress.visibleTools];
    episode.stoppedAtOpening = snap.progress.stoppedAtOpening;
    return episode;
  }

  /** An independent copy of this episode under a new id, at this step. */
  async fork(episodeId: string): Promise<Episode> {
    return Episode.fromSnapshot({ ...this.options, episodeId }, this.snapshot(false));
  }

  get stepCount(): number {
    return this.steps;
  }

  /** One agent action. Agent mistakes are observations; only env faults end the episode early. */
  async step(action: unknown): Promise<StepResult> {
    const session = this.live();
    this.steps++;
    this.inputs.actions.push(action);
    const info: StepInfo = { step: this.steps, episode_id: this.id, tool_calls: [], diff: [], state_hash: "" };
    if (this.stoppedAtOpening) {
      // the user already ended the conversation: the action is not run, the episode is scored as it stands
      info.state_hash = session.stateHash();
      return this.end({ role: "user", content: STOP_MARKER }, info, "user_stop", false);
    }
    const parsed = parseAction(action, this.steps);
    let observation: Observation;
    let endReason: EndReason | undefined;

    try {
      if (this.multiTurn && parsed.kind !== "tool_calls") {
        // BFCL's loop: a reply without tool calls (or one it cannot decode) ends the user turn
        if (parsed.kind === "text") this.messages.push(parsed.text);
        const next = this.endTurn(session, info);
        if (next) observation = next;
        else {
          observation = { role: "user", content: "Task finished" };
          endReason = "text_reply";
        }
      } else if (this.options.scenario.text_reply && parsed.kind !== "tool_calls" && !(parsed.kind === "text" && parsed.text.includes(this.options.scenario.text_reply.end_marker))) {
        // the scenario's loop answers anything but calls or its end marker with its own message (ACEBench multi-step)
        if (parsed.kind === "text") this.messages.push(parsed.text);
        observation = { role: "user", content: this.options.scenario.text_reply.otherwise };
      } else if (parsed.kind === "invalid") {
        observation = { role: "user", content: errorContent("invalid_action", parsed.message) };
      } else if (parsed.kind === "tool_calls" && parsed.calls.length > MAX_CALLS_PER_ACTION) {
        observation = { role: "user", content: errorContent("invalid_action", `an action may make at most ${MAX_CALLS_PER_ACTION} tool calls (MAX_CALLS_PER_ACTION); this one makes ${parsed.calls.length}, so none ran`) };
      } else if (parsed.kind === "text") {
        this.messages.push(parsed.text);
        if (this.options.scenario.mode === "task") {
          observation = { role: "user", content: "Task finished" };
          endReason = "text_reply";
          info.end_text = parsed.text;
        } else if (!this.options.user) {
          observation = { role: "user", content: NO_USER_OBSERVATION };
          endReason = "no_user";
          info.end_text = parsed.text;
        } else {
          const reply = await this.userSays(() => this.options.user!.reply(parsed.text));
          observation = { role: "user", content: reply };
          if (reply.includes(STOP_MARKER)) endReason = "user_stop";
        }
      } else {
        // one step's tool outputs together stay within the per-call output limit: once they reach it,
        // the rest of the step's calls are not run (an observation says so, the episode goes on)
        const cap = limitsFor(this.options.bundle, this.options.limits).maxOutputBytes;
        const hooks = this.options.bundle.manifest.action_methods;
        // an env whose original runs a message's calls as one batch is told where the action starts
        // (raising there refuses all its calls) and ends (where it may give the texts rendered then)
        const refused = hooks ? this.startAction(session, hooks.start, parsed.calls, info) : undefined;
        const reached: number[] = [];
        const skipped = new Set<number>();
        let total = 0;
        let results = parsed.calls.map((c, i) => {
          if (refused !== undefined) return this.refuseCall(c, info, refused);
          if (total >= cap) {
            skipped.add(i);
            return this.skipCall(c, info, `not run: this step's tool outputs reached ${cap} bytes (maxOutputBytes)`);
          }
          const r = this.runCall(session, c, info, () => reached.push(i));
          total += r.content.length;
          return r;
        });
        if (hooks && refused === undefined) results = this.endAction(session, hooks.end, results, reached, info);
        // one step's tool outputs together stay within the per-call output limit (the texts shown)
        total = 0;
        results = results.map((r, i) => {
          if (skipped.has(i)) return r;
          total += r.content.length;
          if (total <= cap) return r;
          return { ...r, ok: false, content: errorContent("output_limit", `the result of ${r.name} (${r.content.length} bytes) took this step's tool outputs over ${cap} bytes (maxOutputBytes): it ran, but its result is not shown`) };
        });
        observation = { role: "tool", content: toolObservationText(results), tool_results: results };
        if (parsed.calls.some((c) => this.options.bundle.manifest.terminating_tools.includes(c.name))) endReason = "terminating_tool";
        const perTurn = this.options.scenario.max_steps_per_turn;
        if (this.multiTurn && perTurn !== undefined && ++this.turnSteps > perTurn && endReason === undefined) {
          // past the cap the original force-quits: this turn still counts, later ones are never played
          this.endTurn(session, info);
          endReason = "turn_step_limit";
        }
      }
    } catch (e) {
      if (e instanceof SandboxFault) return this.fail(info, { code: e.code, message: e.message });
      if (e instanceof ActionHookError) return this.fail(info, { code: "env_output_invalid", message: e.message });
      if (e instanceof UserSimulatorError) return this.fail(info, { code: "user_simulator_failed", message: e.message });
      throw e;
    }

    info.state_hash = session.stateHash();
    const truncated = endReason === undefined && this.steps >= this.maxSteps;
    if (endReason === undefined && !truncated) return { observation, reward: 0, terminated: false, truncated: false, info };
    return this.end(observation, info, endReason ?? "max_steps", truncated);
  }

  private skipCall(call: ParsedCall, info: StepInfo, why: string): ToolResult {
    info.tool_calls.push({ id: call.id, name: call.name, arguments: call.arguments, error: why });
    this.actions.push({ name: call.name, arguments: call.arguments, error: why });
    return { tool_call_id: call.id, name: call.name, content: errorContent("output_limit", why), ok: false };
  }

  /**
   * The manifest's action_methods.start, before an action's calls: it gets every call's name and
   * the arguments the env would get (null for a call the bridge refuses itself). Returns undefined
   * when the calls may run, else why none runs (the env raised). A SandboxFault propagates.
   */
  private startAction(session: EnvSession, method: string, calls: ParsedCall[], info: StepInfo): string | undefined {
    const unlisted = this.options.bundle.manifest.unlisted_call_method !== undefined;
    const listed = calls.map((c) => {
      // the calls runCall hands to the env (the same tests, in the same order)
      const valid = !c.argumentsError && !nonFinite(c.arguments, "");
      const readable = valid && (this.validator.has(c.name) ? this.pythonText || !this.validator.check(c.name, c.arguments) : unlisted && UNLISTED_NAME_RE.test(c.name));
      return { name: c.name, arguments: readable ? (this.pythonText && c.pyArguments ? c.pyArguments : c.arguments) : null };
    });
    const out = session.call(method, { calls: listed });
    info.diff.push(...out.diff);
    if (out.kind === "error") return `not run: ${method} (the env's action start) raised ${out.error.name}: ${out.error.message}`;
    return undefined;
  }

  /**
   * The manifest's action_methods.end, after an action's calls. It may return, for each call that
   * reached the env (in order), the text to show instead (a string) or null (the call's own text
   * stands; always so for a call that failed); null for all. Anything else, or an exception, ends
   * the episode as env_output_invalid (an ActionHookError, which step() turns into that fault).
   */
  private endAction(session: EnvSession, method: string, results: ToolResult[], reached: number[], info: StepInfo): ToolResult[] {
    const out = session.call(method, {});
    info.diff.push(...out.diff);
    if (out.kind === "error") throw new ActionHookError(`${method} (the env's action end) raised ${out.error.name}: ${out.error.message}`);
    const texts: unknown = JSON.parse(out.json);
    if (texts === null) return results;
    if (!Array.isArray(texts) || texts.length !== reached.length || !texts.every((t) => t === null || typeof t === "string")) {
      throw new ActionHookError(`${method} (the env's action end) must return null or one string or null per call that reached the env (${reached.length}), not ${out.json.slice(0, 200)}`);
    }
    const next = [...results];
    reached.forEach((i, k) => {
      const t = texts[k] as string | null;
      if (t !== null && next[i]!.ok) next[i] = { ...next[i]!, content: t };
    });
    return next;
  }

  private refuseCall(call: ParsedCall, info: StepInfo, why: string): ToolResult {
    info.tool_calls.push({ id: call.id, name: call.name, arguments: call.arguments, error: why });
    this.actions.push({ name: call.name, arguments: call.arguments, error: why });
    return { tool_call_id: call.id, name: call.name, content: errorContent("tool_exception", why), ok: false };
  }

  private runCall(session: EnvSession, call: ParsedCall, info: StepInfo, onEnv?: () => void): ToolResult {
    // the checks read each call's parsed result (ActionRecord); the reply lists the call once and
    // carries its output once, as text in tool_results
    const listed: CallRecord = { id: call.id, name: call.name, arguments: call.arguments };
    const record: ActionRecord = { name: call.name, arguments: call.arguments };
    info.tool_calls.push(listed);
    this.actions.push(record);
    const reject = (type: string, message: string): ToolResult => {
      record.error = message;
      listed.error = message;
      return { tool_call_id: call.id, name: call.name, content: errorContent(type, message), ok: false };
    };
    if (call.argumentsError) return reject("invalid_arguments", call.argumentsError);
    const bad = nonFinite(call.arguments, "");
    if (bad) return reject("invalid_arguments", `${call.name}: argument ${bad} is not a finite number (NaN and Infinity are not JSON)`);
    // python-format envs read numbers as json.loads does (30.0 is a float) when the arguments came as text
    const args = this.pythonText && call.pyArguments ? call.pyArguments : call.arguments;
    let out;
    if (this.validator.has(call.name)) {
      // python-format envs check arguments themselves, as their originals do (Python's own TypeErrors)
      const problem = this.pythonText ? undefined : this.validator.check(call.name, call.arguments);
      if (problem) return reject("invalid_arguments", `${call.name}: ${problem}`);
      onEnv?.();
      out = session.call(call.name, args); // a SandboxFault propagates: it ends the episode
    } else {
      const unlisted = this.options.bundle.manifest.unlisted_call_method;
      const tools = `the tools are: ${this.validator.names.join(", ")}`;
      if (!unlisted) return reject("unknown_tool", `unknown tool '${call.name}'; ${tools}`);
      if (!UNLISTED_NAME_RE.test(call.name)) return reject("unknown_tool", `unknown tool '${call.name}': a name the tool list does not have must be an identifier of at most 64 characters (letters, digits, _) to reach the env; ${tools}`);
      // the env answers it as its original's executor would (ACEBench runs any public method of its classes)
      onEnv?.();
      out = session.call(unlisted, { name: call.name, arguments: args });
    }
    info.diff.push(...out.diff);
    if (out.kind === "error") return reject("tool_exception", `${call.name} raised ${out.error.name}: ${out.error.message}`);
    record.result = JSON.parse(out.json);
    // python-format envs show the agent Python's text (a string verbatim, else json.dumps); an env
    // that renders its own text returns it as a string, which is shown as is
    const content = out.text ?? (this.pythonText && typeof record.result === "string" ? record.result : out.json);
    return { tool_call_id: call.id, name: call.name, content, ok: true };
  }

  /** Ends the episode on the client's request (evaluation harnesses, `envscaler check`) and scores it. */
  async finish(): Promise<StepResult> {
    const { observation, info } = this.clientEnd();
    return this.end(observation, info, info.end_reason!, false);
  }

  /**
   * Ends the episode now, as finish() does, and hands back its scoring to run later: a reset that
   * ends a live episode replies first, and its engine scores the old one when idle. The checks read
   * only the host's views of the two states, the actions and the messages, all captured here, so
   * the env's sandbox can be released at once (the caller closes the episode).
   */
  finishLater(): { step: number; state_hash: string; job: ScoreJob; score: (pause?: () => Promise<void>) => Promise<StepResult> } {
    const { observation, info } = this.clientEnd();
    this.done = true;
    const inputs = this.checkInputs(this.session!);
    const end = { observation, info, truncated: false };
    const { bundle, scenario } = this.options;
    const job: ScoreJob = {
      env_id: bundle.id, env_hash: bundle.contentHash, scenario_id: scenario.id, seed: this.options.seed,
      initial: viewData(inputs.initial), final: viewData(inputs.final), actions: this.actions, messages: this.messages, end,
    };
    return { step: info.step, state_hash: info.state_hash, job, score: (pause) => scoreEnd(this.options.sandboxes, scenario, this.options.seed, inputs, end, pause) };
  }

  private clientEnd(): { observation: Observation; info: StepInfo } {
    const session = this.live();
    const info: StepInfo = { step: this.steps, episode_id: this.id, tool_calls: [], diff: [], state_hash: session.stateHash() };
    if (this.stoppedAtOpening) return { observation: { role: "user", content: STOP_MARKER }, info: { ...info, end_reason: "user_stop" } };
    return { observation: { role: "user", content: "Episode ended by the client" }, info: { ...info, end_reason: "client" } };
  }

  private checkInputs(session: EnvSession): CheckInputs {
    return { initial: session.initial, final: session.tracker.snapshot(), actions: this.actions, messages: this.messages, reference: this.options.reference };
  }

  private async end(observation: Observation, info: StepInfo, reason: EndReason, truncated: boolean): Promise<StepResult> {
    this.done = true;
    info.end_reason = reason;
    return scoreEnd(this.options.sandboxes, this.options.scenario, this.options.seed, this.checkInputs(this.session!), { observation, info, truncated });
  }

  private fail(info: StepInfo, error: EpisodeError): StepResult {
    this.done = true;
    info.error = error;
    info.end_reason = "env_fault";
    info.state_hash = this.session?.stateHash() ?? "";
    this.session?.dispose(); // poisoned or not, this env is finished
    return { observation: { role: "user", content: errorContent(error.code, error.message) }, reward: 0, terminated: true, truncated: false, info };
  }

  /** The current state as JSON text (for debugging; assembled from stored records, no parse). */
  stateJson(): string {
    if (this.closed) throw new EpisodeStateError("closed", "the episode is closed");
    if (!this.session) throw new EpisodeStateError("reset_needed", "call reset() first");
    return this.session.stateJson();
  }

  close(): void {
    if (this.closed) return;
    this.closed = true;
    this.session?.dispose();
  }
}
