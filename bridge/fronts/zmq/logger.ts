import { destination, pino, type Logger } from "pino";

/** JSON lines on stderr (stdout belongs to the CLI's own output); level from ENVSCALER_LOG_LEVEL. */
export function createLogger(name: string, bindings: Record<string, unknown> = {}): Logger {
  return pino({ name, level: process.env.ENVSCALER_LOG_LEVEL ?? "info", base: { pid: process.pid, ...bindings } }, destination(2));
}
