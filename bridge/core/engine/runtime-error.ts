import type { CoreErrorCode } from "../../../protocol/error-codes.js";

/** A request the runtime could not serve; `code` is a protocol error code or one of the core's own (each front maps those with wireCode). */
export class RuntimeError extends Error {
  override readonly name: string = "RuntimeError";
  constructor(
    readonly code: CoreErrorCode,
    message: string,
  ) {
    super(message);
  }
}

/** The error of a request on an episode lost with its engine worker; the first step after the loss turns it into the episode's terminal step. */
export class EpisodeLostError extends RuntimeError {}
