// Development entry for the replay worker when the project runs from TypeScript sources (vitest, tsx).
import { register } from "tsx/esm/api";

register();
await import("./replay-worker.ts");
