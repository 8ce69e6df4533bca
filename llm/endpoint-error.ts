/** An endpoint that failed for good: after every retry, or with an error that is not retried. */
export class EndpointError extends Error {
  override readonly name = "EndpointError";
  constructor(
    message: string,
    /** The HTTP status of the last answer; null: no answer (connection error, timeout, cancelled). */
    readonly status: number | null,
    /** Requests made (retries + 1). */
    readonly attempts: number,
    /** The last error's own words, without where and how often (callers that phrase their own message use it). */
    readonly detail: string = message,
    /** Of the attempts, those cancelled at the timeout. */
    readonly timeouts = 0,
  ) {
    super(message);
  }
}
