import { mkdir } from "node:fs/promises";
import { dirname } from "node:path";
import { probeIsolation, type IsolationProbe } from "../sandbox/local/isolation.js";
import type { LocalIsolation } from "../sandbox/types.js";
import { type AppSettings } from "./app-settings.js";
import { SettingsError } from "../util/errors.js";

/**
 * The local sandbox's isolation for this process, checked before it takes any work: a worker
 * that may run local sandboxes with namespaces proves bubblewrap works here — as the sandbox
 * user, with the seccomp filter, reaching the operator's read-only paths and the repository
 * cache — and otherwise refuses to start with the reason and the fix, rather than failing every
 * run later (or, worse, running agents unisolated without anyone having chosen that).
 */
export async function localIsolationFor(settings: Extract<AppSettings, { mode: "app" }>): Promise<LocalIsolation> {
  const { isolation, probe } = await probeLocalIsolation(settings);
  if (probe && !probe.available) {
    throw new SettingsError(
      `The local sandbox cannot isolate runs on this host: ${probe.reason}. Fix: ${probe.fix}. ` +
        "Or run on Daytona (set DAYTONA_API_KEY and HARNESS_SANDBOX=daytona), " +
        "or — only for repositories you fully trust — set HARNESS_UNISOLATED_LOCAL=1",
    );
  }
  return isolation;
}

/**
 * The isolation the settings ask for and, when this process would run local sandboxes isolated,
 * the probe's answer: a trivial command run exactly as every run's commands are. No probe when
 * the process runs no local sandbox or the operator turned isolation off.
 */
export async function probeLocalIsolation(
  settings: Extract<AppSettings, { mode: "app" }>,
): Promise<{ isolation: LocalIsolation; probe?: IsolationProbe }> {
  const isolation: LocalIsolation = settings.localSandbox ?? { mode: "namespaces" };
  const runsLocal = settings.concurrency > 0 && settings.allowedSandboxes.includes("local");
  if (!runsLocal || isolation.mode !== "namespaces") return { isolation };
  const cacheRoot = settings.repoCache?.root;
  // Made now rather than at the first run: the probe shows whether the sandbox user reaches it.
  // Only the cache itself is private: folders made above it (HARNESS_DB's data folder, say) keep
  // the usual mode, since the sandbox user must pass through them to its mirrors.
  if (cacheRoot !== undefined) {
    await mkdir(dirname(cacheRoot), { recursive: true });
    await mkdir(cacheRoot, { recursive: true, mode: 0o700 });
  }
  const probe = await probeIsolation({
    ...(isolation.bwrapPath ? { bwrapPath: isolation.bwrapPath } : {}),
    ...(isolation.sandboxUser ? { sandboxUser: isolation.sandboxUser } : {}),
    ...(isolation.readOnlyPaths ? { readOnlyPaths: isolation.readOnlyPaths } : {}),
    ...(cacheRoot !== undefined ? { reachablePaths: [cacheRoot] } : {}),
  });
  return { isolation, probe };
}
