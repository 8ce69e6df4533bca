import { McpHttpError } from "./mcp-error.js";

/** Counts tool calls being run over all sessions of a process, so one more than the limit is refused before any work. */
export class InFlightGate {
  inFlight = 0;

  constructor(readonly max: number) {}

  async run<T>(fn: () => Promise<T>): Promise<T> {
    if (this.inFlight >= this.max) throw new McpHttpError("overloaded", `${this.inFlight} tool calls are running (the limit, --max-in-flight); retry later`);
    this.inFlight++;
    try {
      return await fn();
    } finally {
      this.inFlight--;
    }
  }
}
