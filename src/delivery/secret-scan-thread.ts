import { extname } from "node:path";
import { fileURLToPath } from "node:url";
import { Worker } from "node:worker_threads";
import type { SecretFinding, SecretScanInput } from "./secret-scan.js";

/** How long a scan may take before the push is refused: a 32 MiB diff takes seconds, not minutes. */
export const SECRET_SCAN_TIMEOUT_MS = 120_000;
/** The scan thread's heap: the largest diff read (32 MiB), what it decodes, and the tables over both. */
export const SECRET_SCAN_HEAP_MB = 2048;

export type SecretScanVerdict =
  | { ok: true; findings: SecretFinding[] }
  /** The scan did not finish: nothing may be pushed on its word. */
  | { ok: false; error: string; remedy: string };

export interface SecretScanThreadOptions {
  timeoutMs?: number;
  heapMb?: number;
  /** The thread's entry; the scan's own by default. A test gives one that fails. */
  entry?: URL;
}

/** The entry beside this module, with its extension: `.js` compiled (dist/), `.ts` in development and tests. */
const OWN_EXTENSION = extname(fileURLToPath(import.meta.url));
const ENTRY = new URL(`./secret-scan-worker${OWN_EXTENSION}`, import.meta.url);

/*
 * Running TypeScript (through tsx, or vitest), the thread needs tsx's loader, and on Node 20 tsx
 * registers it in the main thread only (`--import tsx` in a thread's execArgv is ignored): the
 * thread starts from a two-line module that registers it and then imports the entry.
 */
function entryUrl(): URL {
  if (OWN_EXTENSION !== ".ts") return ENTRY;
  const loader = import.meta.resolve("tsx/esm/api");
  const code = [
    `import { register } from ${JSON.stringify(loader)};`,
    "register();",
    `await import(${JSON.stringify(ENTRY.href)});`,
  ].join("\n");
  return new URL(`data:text/javascript,${encodeURIComponent(code)}`);
}

const REMEDY =
  "Nothing was pushed. Ask again; if it repeats, make the change smaller, and tell the operator " +
  "if a small change cannot be checked";

/**
 * `scanForSecrets` on a thread of its own, off the event loop, with a time limit and a bounded
 * heap. Fails closed: a thread that throws, runs out of memory, exits early or outlives the limit
 * is a verdict of "not checked", never an empty list of findings.
 */
export function scanForSecretsInWorker(
  input: SecretScanInput,
  options: SecretScanThreadOptions = {},
): Promise<SecretScanVerdict> {
  const timeoutMs = options.timeoutMs ?? SECRET_SCAN_TIMEOUT_MS;
  return new Promise((resolve) => {
    let settled = false;
    const settle = (verdict: SecretScanVerdict): void => {
      if (settled) return;
      settled = true;
      clearTimeout(timer);
      resolve(verdict);
    };
    const notChecked = (why: string): SecretScanVerdict => ({
      ok: false,
      error: `the change could not be checked for secrets (${why}), so Harness did not push it`,
      remedy: REMEDY,
    });
    let worker: Worker;
    try {
      worker = new Worker(options.entry ?? entryUrl(), {
        workerData: { patch: input.patch, messages: [...input.messages], secrets: [...input.secrets] },
        execArgv: [],
        env: {}, // the scan reads no environment; the process's secrets stay out of the thread
        resourceLimits: { maxOldGenerationSizeMb: options.heapMb ?? SECRET_SCAN_HEAP_MB },
      });
    } catch (error) {
      resolve(notChecked(`its thread did not start: ${error instanceof Error ? error.message : String(error)}`));
      return;
    }
    const timer = setTimeout(() => {
      const limit = timeoutMs < 1000 ? `${String(timeoutMs)} ms` : `${String(Math.round(timeoutMs / 1000))} s`;
      settle(notChecked(`it took longer than ${limit}`));
      void worker.terminate();
    }, timeoutMs);
    worker.once("message", (findings: SecretFinding[]) => {
      settle({ ok: true, findings });
      void worker.terminate();
    });
    worker.once("error", (error: Error & { code?: string }) => {
      // The error's name, not its message: a message could quote what was being scanned.
      const why = error.code === "ERR_WORKER_OUT_OF_MEMORY" ? "it ran out of memory" : `it failed: ${error.name}`;
      settle(notChecked(why));
    });
    worker.once("exit", (code) => {
      settle(notChecked(`it stopped early, code ${String(code)}`));
    });
  });
}
