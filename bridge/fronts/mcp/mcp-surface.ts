import { Server } from "@modelcontextprotocol/sdk/server/index.js";
import { z } from "zod";
import {
  GetPromptRequestSchema,
  ListPromptsRequestSchema,
  ListResourcesRequestSchema,
  ListToolsRequestSchema,
  ReadResourceRequestSchema,
  McpError,
  ErrorCode,
  type CallToolResult,
  type Tool,
} from "@modelcontextprotocol/sdk/types.js";
import type { StepResult } from "../../core/episode/episode.js";
import { typedError } from "./mcp-error.js";
import type { McpEpisode } from "./mcp-episode.js";
import type { ScenarioPicker } from "./scenario-picker.js";
import { taskText } from "./task-text.js";

export const START_TOOL = "start_episode";
export const MESSAGE_TOOL = "message_user";
export const TASK_URI = "envscaler://task";
export const SERVER_INFO = { name: "envscaler", version: "0.1.0" };

/**
 * tools/call with its params left loose: the SDK parses a request with the handler's schema before
 * anything else and answers a failure as -32603 with a raw schema dump; with this one its own
 * tools/call check runs instead and answers a malformed call (`arguments` not an object) as
 * -32602 invalid params, naming the field.
 */
const ToolCallRequest = z.looseObject({ method: z.literal("tools/call"), params: z.looseObject({ name: z.string(), arguments: z.unknown().optional() }) });

/** Most scenario ids a start_episode schema lists as an enum (beyond that it is a plain string). */
const MAX_ENUM = 500;

/** A typed error the agent can read, in the env's own error-observation shape. */
export function toolError(code: string, message: string): CallToolResult {
  return { content: [{ type: "text", text: JSON.stringify({ error: { type: code, message } }) }], isError: true };
}

function stepResult(r: StepResult, toolCall: boolean): CallToolResult {
  const results = r.observation.tool_results;
  // an env fault (env_timeout, env_oom, …) ends the episode: its observation names the code
  const isError = Boolean(r.info.error) || (results ? results.some((t) => !t.ok) : toolCall);
  const meta: Record<string, unknown> = { "envscaler/step": r.info.step };
  if (r.terminated || r.truncated) meta["envscaler/episode_ended"] = r.info.end_reason ?? "ended";
  return { content: [{ type: "text", text: r.observation.content }], isError, _meta: meta };
}

function envTools(episode: McpEpisode): Tool[] {
  const s = episode.started!;
  const tools: Tool[] = s.tools.map((t) => ({ name: t.function.name, description: t.function.description, inputSchema: t.function.parameters as Tool["inputSchema"] }));
  if (messageTool(episode)) {
    tools.push({
      name: MESSAGE_TOOL,
      description: "Send a message to the user you are helping. The result is the user's reply; the conversation ends when the user ends it.",
      inputSchema: { type: "object", properties: { message: { type: "string", description: "what you say to the user" } }, required: ["message"] },
    });
  }
  return tools;
}

/**
 * The message tool exists in conversation episodes and in multi-turn tasks (where a reply to the
 * user ends the turn and the next request arrives), unless the env has a tool of that name itself.
 */
function messageTool(episode: McpEpisode): string | null {
  const s = episode.started;
  const talks = s && (s.mode === "conversation" || (s.turns ?? 1) > 1);
  return talks && !s.tools.some((t) => t.function.name === MESSAGE_TOOL) ? MESSAGE_TOOL : null;
}

function startTool(picker: ScenarioPicker): Tool {
  const scenario: Record<string, unknown> = { type: "string", description: "the scenario to play" };
  if (picker.ids.length <= MAX_ENUM) scenario.enum = picker.ids;
  return {
    name: START_TOOL,
    description: "Start this session's episode on a scenario (once per session). The result is the task; the env's tools replace this one.",
    inputSchema: { type: "object", properties: { scenario_id: scenario, seed: { type: "integer", description: "the episode's seed (random if omitted)" } }, required: ["scenario_id"] },
  };
}

/**
 * The MCP face of one session's episode (low-level SDK Server: the env's tools come with their own
 * JSON Schemas). Before the episode starts the only tool is start_episode; after it, the env's
 * tools (and message_user in a conversation), announced with tools/list_changed.
 */
export function createMcpServer(episode: McpEpisode, picker: ScenarioPicker): Server {
  const s = episode.started;
  const server = new Server(SERVER_INFO, {
    capabilities: { tools: { listChanged: true }, resources: { listChanged: true }, prompts: { listChanged: true } },
    instructions: s ? taskText(s, messageTool(episode)) : `No episode yet: call ${START_TOOL} with a scenario id (or connect with the X-EnvScaler-Scenario header).`,
  });

  server.setRequestHandler(ListToolsRequestSchema, () => ({ tools: episode.started ? envTools(episode) : [startTool(picker)] }));

  /** A step that changed the tool list (a multi-turn benchmark's held-out tools arriving): list it and tell the client. */
  const followTools = (r: StepResult): StepResult => {
    if (r.info.tools && episode.started) {
      episode.started.tools = r.info.tools;
      void server.sendToolListChanged().catch(() => undefined);
    }
    return r;
  };

  server.setRequestHandler(ToolCallRequest, async (request): Promise<CallToolResult> => {
    // the SDK has checked the call against its own schema by now: arguments, when given, are an object
    const { name } = request.params;
    const args = (request.params.arguments ?? {}) as Record<string, unknown>;
    try {
      const started = episode.started;
      if (!started) {
        if (name !== START_TOOL) return toolError("no_episode", `no episode yet: call ${START_TOOL} first`);
        const scenarioId = typeof args.scenario_id === "string" ? picker.check(args.scenario_id) : picker.implicit;
        if (!scenarioId) return toolError("bad_request", `${START_TOOL} needs scenario_id (a string)`);
        const seed = args.seed;
        if (seed !== undefined && !Number.isSafeInteger(seed)) return toolError("bad_request", "seed must be an integer");
        const st = await episode.start(scenarioId, seed as number | undefined);
        // the env's tools replace start_episode; the task is now a resource and a prompt
        void server.sendToolListChanged().catch(() => undefined);
        void server.sendResourceListChanged().catch(() => undefined);
        void server.sendPromptListChanged().catch(() => undefined);
        return { content: [{ type: "text", text: taskText(st, messageTool(episode)) }] };
      }
      const isEnvTool = started.tools.some((t) => t.function.name === name);
      if (!isEnvTool && name === MESSAGE_TOOL && messageTool(episode)) {
        const message = args.message;
        if (typeof message !== "string" || message.trim() === "") return toolError("invalid_arguments", `${MESSAGE_TOOL}: message must be a non-empty string`);
        // a message is text, never parsed for tool calls
        if (/<\/?tool_call>/i.test(message)) return toolError("invalid_arguments", `${MESSAGE_TOOL}: a message may not contain <tool_call> tags; call the tools directly`);
        return stepResult(followTools(await episode.step({ role: "assistant", content: message })), false);
      }
      if (!isEnvTool && name === START_TOOL) return toolError("bad_request", "this session's episode has started already (one episode per MCP session)");
      // unknown tools and bad arguments are the env's to judge: they become error observations
      return stepResult(followTools(await episode.step({ name, arguments: args })), true);
    } catch (e) {
      const { code, message } = typedError(e);
      return toolError(code, message);
    }
  });

  server.setRequestHandler(ListResourcesRequestSchema, () => ({
    resources: episode.started ? [{ uri: TASK_URI, name: "task", title: "The episode's task", mimeType: "text/markdown" }] : [],
  }));
  server.setRequestHandler(ReadResourceRequestSchema, (request) => {
    const st = episode.started;
    if (request.params.uri !== TASK_URI) throw new McpError(ErrorCode.InvalidParams, `no resource ${request.params.uri}; there is ${TASK_URI}`);
    if (!st) throw new McpError(ErrorCode.InvalidParams, `no episode yet: call ${START_TOOL} first`);
    return { contents: [{ uri: TASK_URI, mimeType: "text/markdown", text: taskText(st, messageTool(episode)) }] };
  });

  server.setRequestHandler(ListPromptsRequestSchema, () => ({
    prompts: episode.started ? [{ name: "task", description: "The episode's task (and in a conversation, the user's first message) as a user message" }] : [],
  }));
  server.setRequestHandler(GetPromptRequestSchema, (request) => {
    const st = episode.started;
    if (request.params.name !== "task") throw new McpError(ErrorCode.InvalidParams, `no prompt ${request.params.name}; there is "task"`);
    if (!st) throw new McpError(ErrorCode.InvalidParams, `no episode yet: call ${START_TOOL} first`);
    return { description: `scenario ${st.scenario_id}`, messages: [{ role: "user", content: { type: "text", text: taskText(st, messageTool(episode)) } }] };
  });

  return server;
}
