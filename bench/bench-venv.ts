import { execFileSync } from "node:child_process";
import { existsSync } from "node:fs";
import { join } from "node:path";

/**
 * The bench's own venv (bench/.venv): the peer's many dependencies stay out of the test venv. It
 * holds the Python client of the checkout at `root` (editable), which every Python row drives.
 */
export function benchPython(root: string): string {
  const venv = join(root, "bench", ".venv");
  const py = join(venv, "bin", "python");
  if (!existsSync(py)) execFileSync("python3", ["-m", "venv", venv], { stdio: "inherit" });
  execFileSync(py, ["-m", "pip", "install", "-q", "pyzmq", "msgpack", "-e", join(root, "python-client")], { stdio: "inherit" });
  return py;
}
