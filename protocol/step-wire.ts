/**
 * How a step result crosses the wire (docs/protocol.md §4 `step`, protocol version 2): each tool
 * output appears once. A tool observation's text is derived from its parts, so the reply carries
 * the parts (`tool_results[].content`) and leaves `observation.content` out; a client puts it back
 * with `expandStep`. Pure functions: the server and both clients share this one rule.
 */

interface ToolResultLike {
  content: string;
}
interface ObservationLike {
  role: string;
  content?: string;
  tool_results?: ToolResultLike[];
}

/** The observation text of a tool step: the one result's text, or the results' texts as a JSON-style list. */
export function toolObservationText(results: readonly ToolResultLike[]): string {
  return results.length === 1 ? results[0]!.content : `[${results.map((r) => r.content).join(",")}]`;
}

/** The wire form of a step result: `observation.content` left out when the tool results give it back exactly. */
export function compactStep<T extends { observation: ObservationLike }>(result: T): T {
  const o = result.observation;
  if (!o.tool_results?.length || o.content !== toolObservationText(o.tool_results)) return result;
  const { content: _derived, ...rest } = o;
  return { ...result, observation: rest };
}

/** Puts back what compactStep left out (results of step, finish and step_batch entries; others pass through). */
export function expandStep<T>(result: T): T {
  const r = result as { observation?: ObservationLike; results?: { ok: boolean; result?: unknown }[] };
  if (r && typeof r === "object") {
    const o = r.observation;
    if (o && o.content === undefined && o.tool_results) o.content = toolObservationText(o.tool_results);
    if (Array.isArray(r.results)) for (const entry of r.results) if (entry.ok) expandStep(entry.result);
  }
  return result;
}
