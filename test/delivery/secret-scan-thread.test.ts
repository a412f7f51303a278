import { mkdtempSync, rmSync, writeFileSync } from "node:fs";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { pathToFileURL } from "node:url";
import { afterAll, describe, expect, test } from "vitest";
import { scanForSecrets, type KnownSecret } from "../../src/delivery/secret-scan.js";
import { scanForSecretsInWorker } from "../../src/delivery/secret-scan-thread.js";
import { fakeToken } from "../helpers/fake-secrets.js";

const key = fakeToken("sk-ant-api03-", 80, "url-safe");
const SECRETS: KnownSecret[] = [{ name: "ANTHROPIC_API_KEY", value: key }];

function newFile(path: string, lines: readonly string[]): string {
  return (
    `diff --git a/${path} b/${path}\nnew file mode 100644\n--- /dev/null\n+++ b/${path}\n` +
    `@@ -0,0 +1,${String(lines.length)} @@\n${lines.map((line) => `+${line}\n`).join("")}`
  );
}

/** About `megabytes` of ordinary added lines, the key on the last. */
function largePatch(megabytes: number): string {
  const line = "  const value = compute(request, options); // ordinary code, nothing to find here";
  const count = Math.ceil((megabytes * 1024 * 1024) / (line.length + 2));
  return newFile("src/big.ts", [...Array.from({ length: count }, () => line), `const k = "${key}";`]);
}

describe("scanForSecretsInWorker", () => {
  const dir = mkdtempSync(join(tmpdir(), "harness-scan-thread-"));
  afterAll(() => {
    rmSync(dir, { recursive: true, force: true });
  });
  const entry = (name: string, code: string): URL => {
    const path = join(dir, name);
    writeFileSync(path, code);
    return pathToFileURL(path);
  };

  test("gives the same findings as the scan itself, from its own thread", async () => {
    const patch = newFile("a.txt", [`KEY=${key}`, Buffer.from(key).toString("base64")]);
    const input = { patch, messages: ["Add a"], secrets: SECRETS };
    expect(await scanForSecretsInWorker(input)).toEqual({ ok: true, findings: scanForSecrets(input) });
    expect(
      await scanForSecretsInWorker({ patch: newFile("b.txt", ["nothing"]), messages: [], secrets: SECRETS }),
    ).toEqual({ ok: true, findings: [] });
  });

  test("the event loop keeps turning while a large change is scanned", async () => {
    const input = { patch: largePatch(8), messages: [], secrets: SECRETS };
    let ticks = 0;
    const ticker = setInterval(() => {
      ticks++;
    }, 5);
    try {
      const verdict = await scanForSecretsInWorker(input);
      expect(verdict.ok && verdict.findings.map((finding) => finding.kind)).toEqual(["ANTHROPIC_API_KEY"]);
      expect(ticks).toBeGreaterThan(0);
      // The same scan in this thread: nothing else runs until it returns.
      const before = ticks;
      scanForSecrets(input);
      expect(ticks).toBe(before);
    } finally {
      clearInterval(ticker);
    }
  });

  test("a scan past its time limit refuses the push", async () => {
    const verdict = await scanForSecretsInWorker(
      { patch: largePatch(4), messages: [], secrets: SECRETS },
      { timeoutMs: 1 },
    );
    expect(verdict).toEqual({
      ok: false,
      error: "the change could not be checked for secrets (it took longer than 1 ms), so Harness did not push it",
      remedy: expect.stringContaining("Nothing was pushed") as unknown,
    });
  });

  test("a thread that throws, exits without a verdict or runs out of memory refuses the push", async () => {
    const input = { patch: newFile("a.txt", ["x"]), messages: [], secrets: SECRETS };
    const throws = await scanForSecretsInWorker(input, { entry: entry("throws.mjs", "throw new TypeError('boom');") });
    expect(throws).toMatchObject({ ok: false, error: expect.stringContaining("(it failed: TypeError)") as unknown });
    const exits = await scanForSecretsInWorker(input, { entry: entry("exits.mjs", "process.exit(0);") });
    expect(exits).toMatchObject({ ok: false, error: expect.stringContaining("(it stopped early, code 0)") as unknown });
    const hungry = await scanForSecretsInWorker(input, {
      entry: entry("hungry.mjs", "const keep = []; for (;;) keep.push(new Array(1e6).fill(keep.length));"),
      heapMb: 32,
    });
    expect(hungry).toMatchObject({ ok: false, error: expect.stringContaining("(it ran out of memory)") as unknown });
  });
});
