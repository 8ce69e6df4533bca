// Development entry of every worker thread when the project runs from its TypeScript sources
// (vitest, tsx): registers tsx inside this thread, then runs the bootstrap. The built package
// starts dist/bridge/core/engine/worker-bootstrap.js directly.
import { register } from "tsx/esm/api";

register();
await import("./worker-bootstrap.ts");
