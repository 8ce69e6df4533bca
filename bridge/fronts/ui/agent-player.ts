import type { Usage } from "../../../llm/chat.js";

/**
 * What the playground needs of an agent to let a model play one of its episodes: the UI defines
 * it, `agent/` implements it (agent/ui-agent-player.ts), and the CLI hands the one to the other
 * where it starts the UI (cli/commands/ui.ts). So bridge/ does not import the agent, and another
 * agent (a different loop, a scripted one in a test) can be played from the page the same way.
 */
export interface AgentPlayer {
  /**
   * Plays one episode through `episode` (the page's play episode: reset, step, finish), and says
   * how it went. Aborting `hooks.signal` stops it: the model call in flight is cancelled and the
   * outcome leaves out what the stop itself caused (a cancelled call is not the model's failure).
   */
  play(episode: EpisodeOps, game: AgentGame, hooks: AgentHooks): Promise<AgentOutcome>;
}

/** The episode operations a player may ask for, answered as the bridge answers them (reset, step, finish, close). */
export type EpisodeOps = (op: string, fields?: Record<string, unknown>) => Promise<unknown>;

/** Which episode to play, and the model to play it with. */
export interface AgentGame {
  /** Tells this run's model calls apart (the call cache key, the outcome's key). */
  key: string;
  scenario_id: string;
  seed: number;
  base_url: string;
  model: string;
  api_key?: string;
  agent_mode: "fc" | "prompt";
  /** Client-side step cap (the scenario's own max_steps applies too). */
  max_steps?: number;
  /** Per model call. @unit s */
  timeout_s: number;
  max_retries: number;
  temperature?: number;
}

/** What the player tells the page while it plays. */
export interface AgentHooks {
  signal: AbortSignal;
  /** The model is asked for its `step`-th reply. */
  onThinking: (step: number) => void;
  /** The model answered. */
  onReply: (step: number, reply: { latency_ms: number; attempts: number; usage: Usage }) => void;
}

/** Why an episode went wrong, as the page shows it. */
export interface AgentFailure {
  kind: string;
  step: number;
  message: string;
  attempts?: number;
}

/** The played episode, as the page's summary shows it. */
export interface AgentOutcome {
  episode_id: string | null;
  reward: number;
  success: boolean;
  end_reason: string | null;
  steps: number;
  failures: AgentFailure[];
  usage: Usage;
  model_calls: number;
  /** @unit ms */
  model_ms: number;
  /** @unit ms */
  wall_ms: number;
}
