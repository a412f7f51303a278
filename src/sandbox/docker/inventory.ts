import type Docker from "dockerode";
import { SANDBOX_NAME_LABEL, type SandboxInventory, type SandboxRecord } from "../inventory.js";
import { dockerClient, dockerHost, statusOf, translateDockerError } from "./client.js";
import { DOCKER_APP_LABEL, DOCKER_REPO_LABEL, DOCKER_RUN_LABEL } from "./labels.js";
import { claim, danglingSpareVolumes, ownedVolume } from "./spare-container.js";
import { readSpare, staleSpares } from "./spare-labels.js";

/**
 * Containers on the engine carrying this app's label, running, paused or stopped: runs'
 * sandboxes, named sandboxes and spares (each marked, with whether it is stale), and the
 * volumes of spares that no container holds any more.
 */
export function dockerInventory(options: { host?: string } = {}): SandboxInventory {
  const host = dockerHost(options.host);
  // Made on first use: an engine that is down is then a failed reaper pass (logged), not a
  // process that cannot start.
  let client: ReturnType<typeof dockerClient> | undefined;
  const docker = (): ReturnType<typeof dockerClient> => (client ??= dockerClient(host));
  return {
    async list() {
      let found: Docker.ContainerInfo[];
      let dangling: Array<{ name: string; startedAt: number }>;
      try {
        found = await docker().listContainers({
          all: true,
          filters: { label: [`${DOCKER_APP_LABEL.key}=${DOCKER_APP_LABEL.value}`] },
        });
        dangling = await danglingSpareVolumes(docker());
      } catch (error) {
        throw translateDockerError(error, { host, during: "listing sandboxes" });
      }
      const spares = new Map(
        found.flatMap((info) => {
          const record = readSpare(info.Names[0] ?? "", info.Labels);
          return record ? [[info.Id, record] as const] : [];
        }),
      );
      const stale = staleSpares([...spares.values()], Date.now());
      const containers = found.map((info): SandboxRecord => {
        const labels = info.Labels;
        const name = info.Names[0]?.replace(/^\//, "");
        const spare = spares.get(info.Id);
        return {
          kind: "docker",
          id: name ?? info.Id,
          ...(labels[DOCKER_RUN_LABEL] && !spare ? { runId: labels[DOCKER_RUN_LABEL] } : {}),
          ...(labels[DOCKER_REPO_LABEL] ? { repo: labels[DOCKER_REPO_LABEL] } : {}),
          ...(labels[SANDBOX_NAME_LABEL] && !spare ? { name: labels[SANDBOX_NAME_LABEL] } : {}),
          createdAt: new Date(info.Created * 1000).toISOString(),
          ...(spare ? { spare: { stale: stale.has(spare.name) } } : {}),
        };
      });
      const volumes = dangling.map((volume): SandboxRecord => ({
        kind: "docker",
        id: volume.name,
        // When its spare's build began: a volume has no age of its own to the engine's API.
        ...(volume.startedAt > 0 ? { createdAt: new Date(volume.startedAt).toISOString() } : {}),
        spare: { stale: true, volume: true },
      }));
      return [...containers, ...volumes];
    },
    async remove(record) {
      try {
        if (record.spare?.volume) {
          await docker().getVolume(record.id).remove();
          return;
        }
        const container = docker().getContainer(record.id);
        const info = await container.inspect();
        const spare = readSpare(info.Name, info.Config.Labels);
        // A ready spare is claimed first, as a run would: one a run took a moment ago is that run's.
        if (spare?.state === "ready" && !(await claim(docker(), spare))) return;
        // Its anonymous volume (the checkout) goes with it; a named one (a spare's) right after.
        await container.remove({ force: true, v: true });
        const volume = ownedVolume(info.Config.Labels);
        if (volume !== undefined)
          await docker()
            .getVolume(volume)
            .remove()
            .catch(() => undefined);
      } catch (error) {
        if (statusOf(error) === 404) return;
        throw translateDockerError(error, { host, during: `removing the sandbox ${record.id}` });
      }
    },
  };
}
