import { SANDBOX_NAME_LABEL, type SandboxInventory, type SandboxRecord } from "../inventory.js";
import { dockerClient, dockerHost, statusOf, translateDockerError } from "./client.js";
import { DOCKER_APP_LABEL, DOCKER_REPO_LABEL, DOCKER_RUN_LABEL } from "./sandbox.js";

/** Containers on the engine carrying this app's label, running, paused or stopped. */
export function dockerInventory(options: { host?: string } = {}): SandboxInventory {
  const host = dockerHost(options.host);
  // Made on first use: an engine that is down is then a failed reaper pass (logged), not a
  // process that cannot start.
  let client: ReturnType<typeof dockerClient> | undefined;
  const docker = (): ReturnType<typeof dockerClient> => (client ??= dockerClient(host));
  return {
    async list() {
      let found;
      try {
        found = await docker().listContainers({
          all: true,
          filters: { label: [`${DOCKER_APP_LABEL.key}=${DOCKER_APP_LABEL.value}`] },
        });
      } catch (error) {
        throw translateDockerError(error, { host, during: "listing sandboxes" });
      }
      return found.map((info): SandboxRecord => {
        const labels = info.Labels;
        const name = info.Names[0]?.replace(/^\//, "");
        return {
          kind: "docker",
          id: name ?? info.Id,
          ...(labels[DOCKER_RUN_LABEL] ? { runId: labels[DOCKER_RUN_LABEL] } : {}),
          ...(labels[DOCKER_REPO_LABEL] ? { repo: labels[DOCKER_REPO_LABEL] } : {}),
          ...(labels[SANDBOX_NAME_LABEL] ? { name: labels[SANDBOX_NAME_LABEL] } : {}),
          createdAt: new Date(info.Created * 1000).toISOString(),
        };
      });
    },
    async remove(record) {
      try {
        // Its anonymous volume (the checkout) goes with it.
        await docker().getContainer(record.id).remove({ force: true, v: true });
      } catch (error) {
        if (statusOf(error) === 404) return;
        throw translateDockerError(error, { host, during: `removing the sandbox ${record.id}` });
      }
    },
  };
}
