import type Docker from "dockerode";
import { SANDBOX_NAME_LABEL } from "../../src/sandbox/inventory.js";

/**
 * The named sandboxes' containers on the engine whose names start with `prefix` (each test file
 * names its own sandboxes with a random prefix, so it never touches another's), whatever state.
 */
export async function sandboxContainers(docker: Docker, prefix: string): Promise<string[]> {
  const containers = await docker.listContainers({ all: true, filters: { label: [SANDBOX_NAME_LABEL] } });
  return containers
    .map((container) => container.Labels[SANDBOX_NAME_LABEL] ?? "")
    .filter((name) => name.startsWith(prefix))
    .sort();
}

/** Deletes every container `sandboxContainers` finds, for an `afterAll` that must leave none behind. */
export async function removeSandboxContainers(docker: Docker, prefix: string): Promise<void> {
  const containers = await docker.listContainers({ all: true, filters: { label: [SANDBOX_NAME_LABEL] } });
  for (const container of containers)
    if ((container.Labels[SANDBOX_NAME_LABEL] ?? "").startsWith(prefix))
      await docker.getContainer(container.Id).remove({ force: true, v: true });
}
