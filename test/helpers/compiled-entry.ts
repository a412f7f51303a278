import { readdirSync, statSync } from "node:fs";
import { join, relative } from "node:path";
import { fileURLToPath } from "node:url";

/*
 * Tests that start Harness as a process of its own (the app, `harness mcp`, the CLI) start its
 * compiled twin in dist/ when that is current: loading the sources through tsx costs a second of
 * CPU more per start, which dozens of starts turn into minutes of a two-core machine. `npm ci`
 * builds dist/ (the `prepare` script), so a fresh clone runs the compiled code; a checkout whose
 * sources changed since the last build runs the sources, so a test never runs stale code.
 */

const ROOT = fileURLToPath(new URL("../..", import.meta.url));
const SOURCE = join(ROOT, "src");
const BUILT = join(ROOT, "dist");

let current: boolean | undefined;

/** Whether every source file has a compiled twin at least as new as itself. */
export function compiledIsCurrent(): boolean {
  current ??= everySourceCompiled(SOURCE);
  return current;
}

function everySourceCompiled(dir: string): boolean {
  for (const entry of readdirSync(dir, { withFileTypes: true })) {
    const path = join(dir, entry.name);
    if (entry.isDirectory()) {
      if (!everySourceCompiled(path)) return false;
      continue;
    }
    if (!entry.name.endsWith(".ts") || entry.name.endsWith(".d.ts")) continue;
    const twin = join(BUILT, relative(SOURCE, path)).replace(/\.ts$/, ".js");
    try {
      if (statSync(twin).mtimeMs < statSync(path).mtimeMs) return false;
    } catch {
      return false;
    }
  }
  return true;
}

/**
 * Node's arguments that run `src/<entry>.ts`: its compiled twin when current, else the source
 * through tsx. `entry` is relative to src/, e.g. `main.ts` or `cli.ts`.
 */
export function harnessEntryArgs(entry: string): string[] {
  return compiledIsCurrent() ? [join(BUILT, entry.replace(/\.ts$/, ".js"))] : ["--import", "tsx", join(SOURCE, entry)];
}

/** Where a module of Harness's is loaded from by a test's own entry script: dist/ when current, else src/. */
export function harnessModuleUrl(module: string): string {
  return compiledIsCurrent()
    ? new URL(`../../dist/${module}`, import.meta.url).href
    : new URL(`../../src/${module}`, import.meta.url).href;
}
