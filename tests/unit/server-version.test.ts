import { mkdtempSync, mkdirSync, readFileSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { expect, test } from "vitest";
import { packageVersion, SERVER_VERSION } from "../../protocol/server-version.js";

const pkg = JSON.parse(readFileSync(new URL("../../package.json", import.meta.url), "utf8")) as { version: string };

test("the server version is package.json's, not a copy", () => {
  expect(SERVER_VERSION).toBe(pkg.version);
});

test("the version is found from any depth below the package (the source tree and dist/ differ by one level), and never from another package's package.json", () => {
  const root = mkdtempSync(join(tmpdir(), "pkgver-"));
  try {
    writeFileSync(join(root, "package.json"), JSON.stringify({ name: "envscaler", version: "9.8.7" }));
    mkdirSync(join(root, "dist", "protocol", "inner"), { recursive: true });
    writeFileSync(join(root, "dist", "protocol", "package.json"), JSON.stringify({ name: "other", version: "1.0.0" }));
    expect(packageVersion(join(root, "dist", "protocol", "inner"))).toBe("9.8.7");
    expect(packageVersion(join(root, "dist"))).toBe("9.8.7");
  } finally {
    rmSync(root, { recursive: true, force: true });
  }
});
