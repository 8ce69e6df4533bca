// The limits an action is held to wherever it arrives from (a msgpack map over ZeroMQ, arguments
// sent as a JSON string, a call written in a model's raw text, MCP's JSON-RPC, the UI's JSON).
// They are checked where the work happens (EnvRuntime.step before anything is copied to an engine
// thread, the action parser before any JSON text inside an action is parsed), not at one front's
// decoder: a limit a front checks can be bypassed by the next encoding. Every walk here is
// iterative, so a value nested 100,000 deep costs no host stack.

/**
 * Nesting (maps/objects and arrays) an action may have, counting the action itself; the same
 * number bounds any JSON text inside it (a call in raw text, arguments sent as a string), counted
 * from that text's own top. The wire's frame limit (protocol/codec.ts MAX_DEPTH) is the same 64.
 */
export const MAX_ACTION_DEPTH = 64;

/** The first limit a value breaks, or null: its size as JSON (estimated) and its nesting. */
export interface ValueShape {
  /** Estimated bytes as JSON, counted up to `maxBytes + 1`. */
  bytes: number;
  /** True when some container sits deeper than `maxDepth`. */
  tooDeep: boolean;
}

/**
 * The size of `v` as JSON text (estimated, counted up to `maxBytes + 1`: a huge action costs no
 * more than the limit) and whether it nests deeper than `maxDepth`. Cycles cannot occur in decoded
 * JSON/msgpack; a library caller's cyclic value stops at the byte bound.
 */
export function valueShape(v: unknown, maxBytes: number, maxDepth = MAX_ACTION_DEPTH): ValueShape {
  let bytes = 0;
  let tooDeep = false;
  const stack: { x: unknown; depth: number }[] = [{ x: v, depth: 0 }];
  while (stack.length && bytes <= maxBytes && !tooDeep) {
    const { x, depth } = stack.pop()!;
    if (typeof x === "string") bytes += x.length + 2;
    else if (x === null || typeof x !== "object") bytes += 8;
    else if (depth + 1 > maxDepth) tooDeep = true;
    else if (Array.isArray(x)) {
      bytes += 2 + x.length;
      for (let i = 0; i < x.length && bytes <= maxBytes; i++) stack.push({ x: x[i], depth: depth + 1 });
    } else {
      for (const [k, y] of Object.entries(x as Record<string, unknown>)) {
        bytes += k.length + 4;
        stack.push({ x: y, depth: depth + 1 });
        if (bytes > maxBytes) break;
      }
      bytes += 2;
    }
  }
  return { bytes, tooDeep };
}

/** The size of `v` as JSON text, counted up to `limit` (see valueShape). */
export function jsonSizeUpTo(v: unknown, limit: number): number {
  return valueShape(v, limit, Number.MAX_SAFE_INTEGER).bytes;
}

/**
 * Whether JSON text (or text holding JSON) opens more than `maxDepth` brackets at once, outside
 * strings; scanned without parsing, so nothing deep is ever built. Unbalanced text is the parser's
 * to report.
 */
export function jsonTextTooDeep(text: string, maxDepth = MAX_ACTION_DEPTH): boolean {
  let depth = 0;
  let inString = false;
  for (let i = 0; i < text.length; i++) {
    const c = text.charCodeAt(i);
    if (inString) {
      if (c === 92 /* \ */) i++;
      else if (c === 34 /* " */) inString = false;
    } else if (c === 34) inString = true;
    else if (c === 123 /* { */ || c === 91 /* [ */) {
      if (++depth > maxDepth) return true;
    } else if (c === 125 /* } */ || c === 93 /* ] */) depth = Math.max(0, depth - 1);
  }
  return false;
}

/** What the agent is told when JSON it wrote nests too deep (an observation: the episode goes on). */
export function tooDeepMessage(what: string): string {
  return `JSON nested deeper than ${MAX_ACTION_DEPTH} levels (max_action_depth) in ${what}; it was not run`;
}
