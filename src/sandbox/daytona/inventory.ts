import type { Daytona } from "@daytonaio/sdk";
import type { SandboxInventory, SandboxRecord } from "../inventory.js";
import type { DaytonaOptions } from "../types.js";
import { daytonaClient } from "./client.js";
import { HARNESS_APP_LABEL } from "./sandbox.js";

/** Daytona sandboxes carrying this app's label. */
export function daytonaInventory(options: DaytonaOptions): SandboxInventory & { close(): Promise<void> } {
  // Made on first use: a missing API key is then a failed reaper pass (logged), not a process
  // that cannot start.
  let client: Daytona | undefined;
  const daytona = (): Daytona => (client ??= daytonaClient(options));
  return {
    async list() {
      const records: SandboxRecord[] = [];
      for await (const sandbox of daytona().list({ labels: { [HARNESS_APP_LABEL.key]: HARNESS_APP_LABEL.value } })) {
        const labels = sandbox.labels;
        records.push({
          kind: "daytona",
          id: sandbox.id,
          ...(labels["harness-run"] ? { runId: labels["harness-run"] } : {}),
          ...(labels["harness-repo"] ? { repo: labels["harness-repo"] } : {}),
          ...(sandbox.createdAt ? { createdAt: sandbox.createdAt } : {}),
        });
      }
      return records;
    },
    async remove(record) {
      const sandbox = await daytona().get(record.id);
      await daytona().delete(sandbox);
    },
    close: async () => {
      await client?.[Symbol.asyncDispose]();
    },
  };
}
