import type { AgentGame, AgentHooks, AgentOutcome, AgentPlayer, EpisodeOps } from "../bridge/fronts/ui/agent-player.js";
import { ModelClient, type AgentMessage, type ModelReply } from "./model-client.js";
import { ABORTING_KINDS, runEpisode, type AgentBridge } from "./run-episode.js";

/** The agent's model client, its calls cancellable and announced to the page. */
class AnnouncedModel extends ModelClient {
  private step = 0;
  constructor(
    options: ConstructorParameters<typeof ModelClient>[0],
    private readonly hooks: AgentHooks,
  ) {
    super(options);
  }

  override async chat(messages: AgentMessage[], tools: unknown[] | undefined, salt: string): Promise<ModelReply> {
    const step = ++this.step;
    this.hooks.onThinking(step);
    const r = await super.chat(messages, tools, salt, this.hooks.signal);
    this.hooks.onReply(step, { latency_ms: Math.round(r.latency_ms), attempts: r.attempts, usage: r.usage });
    return r;
  }
}

/**
 * The playground's agent: the same loop as `envscaler rollout` (runEpisode) over an
 * OpenAI-compatible endpoint, with the page's episode as its bridge. The CLI gives it to the UI.
 */
export class ModelAgentPlayer implements AgentPlayer {
  async play(episode: EpisodeOps, game: AgentGame, hooks: AgentHooks): Promise<AgentOutcome> {
    const model = new AnnouncedModel(
      {
        baseURL: game.base_url,
        apiKey: game.api_key || undefined,
        model: game.model,
        timeoutMs: game.timeout_s * 1000,
        maxRetries: game.max_retries,
        backoffMs: 500,
        sampling: game.temperature === undefined ? {} : { temperature: game.temperature },
      },
      hooks,
    );
    const bridge: AgentBridge = { request: episode as AgentBridge["request"] };
    const o = await runEpisode(bridge, model, { key: game.key, scenario_id: game.scenario_id, trial: 0, seed: game.seed }, { agentMode: game.agent_mode, maxSteps: game.max_steps });
    // what stopping does to the loop (a cancelled call, refused requests) is not the model's failure
    const failures = hooks.signal.aborted ? o.failures.filter((f) => !ABORTING_KINDS.includes(f.kind)) : o.failures;
    const { episode_id, reward, success, end_reason, steps, usage, model_calls, model_ms, wall_ms } = o;
    return { episode_id, reward, success, end_reason, steps, failures, usage, model_calls, model_ms: Math.round(model_ms), wall_ms: Math.round(wall_ms) };
  }
}
