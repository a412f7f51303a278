import { readdir, readFile, rm, stat } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import type { SandboxInventory, SandboxRecord } from "../inventory.js";
import { LOCAL_SANDBOX_MANIFEST, LOCAL_SANDBOX_PREFIX } from "./sandbox.js";
import { processAlive } from "../../util/process-alive.js";

/** Local sandboxes: `harness-*` temp directories carrying the sandbox manifest. */
export function localInventory(root: string = tmpdir()): SandboxInventory {
  return {
    async list() {
      const names = (await readdir(root).catch(() => [])).filter((name) => name.startsWith(LOCAL_SANDBOX_PREFIX));
      const records: SandboxRecord[] = [];
      for (const name of names) {
        const manifest = await readFile(join(root, name, LOCAL_SANDBOX_MANIFEST), "utf8").catch(() => undefined);
        // Only directories with our manifest are ours: other `harness-*` names are left alone.
        if (manifest === undefined) continue;
        const data = safeJson(manifest);
        const info = await stat(join(root, name)).catch(() => undefined);
        const pid = typeof data["pid"] === "number" ? data["pid"] : undefined;
        records.push({
          kind: "local",
          id: name,
          ...(pid !== undefined && pid !== process.pid && processAlive(pid) ? { ownerAlive: true } : {}),
          ...(typeof data["runId"] === "string" ? { runId: data["runId"] } : {}),
          ...(typeof data["repo"] === "string" ? { repo: data["repo"] } : {}),
          ...(typeof data["createdAt"] === "string"
            ? { createdAt: data["createdAt"] }
            : info
              ? { createdAt: info.mtime.toISOString() }
              : {}),
        });
      }
      return records;
    },
    async remove(record) {
      await rm(join(root, record.id), { recursive: true, force: true });
    },
  };
}

function safeJson(text: string): Record<string, unknown> {
  try {
    const value: unknown = JSON.parse(text);
    return value !== null && typeof value === "object" ? (value as Record<string, unknown>) : {};
  } catch {
    return {};
  }
}
