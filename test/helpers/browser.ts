import { mkdtemp, rm } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { chromium, type BrowserContext, type Page } from "playwright-core";
import { chromiumPath } from "./chromium-path.js";

/*
 * Real headless Chromium for browser tests (see chromium-path.ts for which one), driven by
 * playwright-core, which downloads no browser of its own. Each launch gets a new, empty profile
 * directory, removed on close, so no cookie or cache crosses tests.
 */

/**
 * Headless without a sandbox (containers run tests as root, where Chromium's sandbox cannot
 * start) and with everything that phones home switched off: tests talk to 127.0.0.1 only.
 */
export const CHROMIUM_ARGS: readonly string[] = [
  "--headless",
  "--no-sandbox",
  "--disable-gpu",
  "--disable-quic",
  "--no-first-run",
  "--disable-background-networking",
  "--disable-component-update",
  "--disable-sync",
];

export interface TestBrowser {
  context: BrowserContext;
  /** The context's first page (a persistent context opens one). */
  page: Page;
  close(): Promise<void>;
}

export async function launchBrowser(options: { timeoutMs?: number } = {}): Promise<TestBrowser> {
  const executablePath = await chromiumPath();
  const profile = await mkdtemp(join(tmpdir(), "harness-chromium-"));
  try {
    const context = await chromium.launchPersistentContext(profile, {
      executablePath,
      headless: true,
      args: [...CHROMIUM_ARGS],
      timeout: options.timeoutMs ?? 30_000,
    });
    const page = context.pages()[0] ?? (await context.newPage());
    return {
      context,
      page,
      async close() {
        await context.close();
        await rm(profile, { recursive: true, force: true });
      },
    };
  } catch (error) {
    await rm(profile, { recursive: true, force: true });
    throw error;
  }
}
