import { createHash } from "node:crypto";
import { mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { join } from "node:path";
import { canonicalJson } from "../protocol/canonical-json.js";

export interface CachedCall {
  content: string;
  usage: { prompt_tokens: number; completion_tokens: number };
  /** Why the reply ended ("length": cut at the token cap); absent in entries written before it was kept. */
  finish_reason?: string;
}

/**
 * A content-addressed store of LLM replies: the key is the hash of everything that determines the
 * reply (model, endpoint, messages, sampling), the value is written atomically once the call
 * succeeded. A run killed midway and started again finds every finished call here.
 */
export class CallCache {
  constructor(readonly dir: string) {
    mkdirSync(dir, { recursive: true });
  }

  static key(request: unknown): string {
    return createHash("sha256").update(canonicalJson(request)).digest("hex");
  }

  private path(key: string): string {
    return join(this.dir, key.slice(0, 2), `${key}.json`);
  }

  get(key: string): CachedCall | undefined {
    try {
      return JSON.parse(readFileSync(this.path(key), "utf8")) as CachedCall;
    } catch {
      return undefined;
    }
  }

  put(key: string, value: CachedCall): void {
    const path = this.path(key);
    mkdirSync(join(this.dir, key.slice(0, 2)), { recursive: true });
    const tmp = `${path}.${process.pid}.tmp`;
    writeFileSync(tmp, JSON.stringify(value));
    renameSync(tmp, path);
  }
}
