import { existsSync } from "node:fs";

/*
 * Debian's `chromium` when it is installed, otherwise the headless Chromium that the
 * `@sparticuz/chromium` dev dependency ships inside the npm package, unpacked on first use — so
 * `npm ci && npm test` needs no apt-get for the browser. HARNESS_TEST_CHROMIUM chooses: a path,
 * or `bundled` for the npm one.
 */
const SYSTEM_CHROMIUM = "/usr/bin/chromium";

/** The Chromium binary the tests launch. */
export async function chromiumPath(): Promise<string> {
  const chosen = process.env["HARNESS_TEST_CHROMIUM"];
  if (chosen && chosen !== "bundled") {
    if (!existsSync(chosen)) throw new Error(`HARNESS_TEST_CHROMIUM points to ${chosen}, which does not exist`);
    return chosen;
  }
  if (!chosen && existsSync(SYSTEM_CHROMIUM)) return SYSTEM_CHROMIUM;
  const { default: bundled } = await import("@sparticuz/chromium");
  return bundled.executablePath();
}
