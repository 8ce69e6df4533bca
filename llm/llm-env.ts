/**
 * The one environment-variable scheme of every model endpoint the project calls. A caller has a
 * role (`USER`: the simulated user; `AGENT`: the rollout agent; `SYNTH`, or `SYNTH_<STAGE>` for one
 * synth stage); a setting of it is read from
 *
 *   ENVSCALER_<ROLE>_<SETTING>   (e.g. ENVSCALER_USER_MODEL, ENVSCALER_SYNTH_CODE_BASE_URL)
 *   then, for a synth stage, ENVSCALER_SYNTH_<SETTING>
 *   then, for how hard a call is tried (TIMEOUT, MAX_RETRIES, MAX_TOKENS, JSON_MODE,
 *     REASK_TEMPERATURE_STEP), ENVSCALER_LLM_<SETTING>, shared by every role
 *   then, for the endpoint and its key, OPENAI_BASE_URL / OPENAI_API_KEY (the OpenAI SDK's own)
 *
 * Where a call goes (BASE_URL, API_KEY, MODEL, TEMPERATURE, CACHE) has no shared fallback besides
 * OPENAI_*: one role's model must not silently become another's. A command-line flag wins over the
 * variables (synth's per-stage variables excepted: they are more specific than its all-stage
 * --model / --base-url). TIMEOUT is in seconds. Which settings a role reads is up to its client.
 *
 * Aliases kept for compatibility (older docs and launchers set them): USER_OPENAI_BASE_URL for
 * ENVSCALER_USER_BASE_URL, USER_OPENAI_API_KEY for ENVSCALER_USER_API_KEY.
 */
export type LlmSetting = "BASE_URL" | "API_KEY" | "MODEL" | "TEMPERATURE" | "TIMEOUT" | "MAX_RETRIES" | "CACHE" | "MAX_TOKENS" | "JSON_MODE" | "REASK_TEMPERATURE_STEP";

/** The settings every role takes from ENVSCALER_LLM_<SETTING> when its own is unset. */
const SHARED: ReadonlySet<LlmSetting> = new Set(["TIMEOUT", "MAX_RETRIES", "MAX_TOKENS", "JSON_MODE", "REASK_TEMPERATURE_STEP"]);

/** Older names still read, each standing for one name of the scheme (read after it). */
export const LLM_ENV_ALIASES: Readonly<Record<string, string>> = {
  ENVSCALER_USER_BASE_URL: "USER_OPENAI_BASE_URL",
  ENVSCALER_USER_API_KEY: "USER_OPENAI_API_KEY",
};

/** Why a setting's value cannot be used (a number that is not one); the caller wraps it in its own error type. */
export class LlmEnvError extends Error {
  override readonly name = "LlmEnvError";
}

const set = (v: string | undefined): string | undefined => (v === undefined || v.trim() === "" ? undefined : v);

/** The names a setting of a role is read from, first match wins. */
export function llmEnvNames(role: string, setting: LlmSetting): string[] {
  const own = `ENVSCALER_${role}_${setting}`;
  const names = [own];
  if (LLM_ENV_ALIASES[own]) names.push(LLM_ENV_ALIASES[own]);
  // a synth stage's setting falls back to synth's, then to every role's
  const stage = /^SYNTH_[A-Z]+$/.test(role);
  if (stage) names.push(`ENVSCALER_SYNTH_${setting}`);
  if (SHARED.has(setting)) names.push(`ENVSCALER_LLM_${setting}`);
  if (setting === "BASE_URL") names.push("OPENAI_BASE_URL");
  if (setting === "API_KEY") names.push("OPENAI_API_KEY");
  return names;
}

/** A text setting of a role: the first of its names that is set (and not blank). */
export function llmEnv(role: string, setting: LlmSetting, env: NodeJS.ProcessEnv = process.env): string | undefined {
  for (const name of llmEnvNames(role, setting)) {
    const v = set(env[name]);
    if (v !== undefined) return v;
  }
  return undefined;
}

/** A number setting of a role; a value that is not a non-negative number is an error naming the variable. */
export function llmEnvNumber(role: string, setting: LlmSetting, env: NodeJS.ProcessEnv = process.env): number | undefined {
  for (const name of llmEnvNames(role, setting)) {
    const raw = set(env[name]);
    if (raw === undefined) continue;
    const n = Number(raw);
    if (!Number.isFinite(n) || n < 0) throw new LlmEnvError(`${name} must be a non-negative number; got '${raw}'`);
    return n;
  }
  return undefined;
}
