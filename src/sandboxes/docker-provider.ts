import { posix } from "node:path";
import { SANDBOX_NAME_LABEL } from "../sandbox/inventory.js";
import { dockerClient, dockerHost, statusOf, translateDockerError } from "../sandbox/docker/client.js";
import { SCRATCH_DIR } from "../sandbox/docker/container-spec.js";
import type { DockerOptions } from "../sandbox/docker/options.js";
import {
  createDockerSandbox,
  DOCKER_APP_LABEL,
  DOCKER_BRANCH_LABEL,
  DOCKER_REPO_LABEL,
  openDockerSandbox,
} from "../sandbox/docker/sandbox.js";
import type { Sandbox } from "../sandbox/types.js";
import { InvalidInputError } from "../util/errors.js";
import { sandboxContainerName } from "./names.js";
import type { NamedSandboxInfo, NamedSandboxProvider, NamedSandboxSpec } from "./provider.js";
import { BASE_FILE, parseBase } from "./base-commit.js";

/**
 * Named sandboxes as containers on a Docker Engine: each one `harness-sandbox-<name>`, labelled
 * with its name, kept by the engine until deleted, so any process (the CLI, another MCP server)
 * finds it again. They have no network at all: people and agents drive them from outside.
 */
export function dockerSandboxProvider(
  options: Omit<DockerOptions, "image" | "containerName"> & { image?: string },
): NamedSandboxProvider {
  const host = dockerHost(options.host);
  let client: ReturnType<typeof dockerClient> | undefined;
  const docker = (): ReturnType<typeof dockerClient> => (client ??= dockerClient(host));
  return {
    kind: "docker",
    async create(spec: NamedSandboxSpec): Promise<Sandbox> {
      const image = spec.image ?? options.image;
      if (!image)
        throw new InvalidInputError(
          "A Docker sandbox needs an image: pass one (--image, or `image` to sandbox_create), " +
            "or set HARNESS_DOCKER_IMAGE",
        );
      return createDockerSandbox(
        {
          repo: spec.repo,
          branch: spec.branch,
          labels: spec.labels,
          network: { mode: "none" },
          ...(spec.githubServerUrl ? { githubServerUrl: spec.githubServerUrl } : {}),
        },
        { ...options, image, host, containerName: sandboxContainerName(spec.name) },
      );
    },
    async open(name) {
      const sandbox = await openDockerSandbox(sandboxContainerName(name), { host });
      return sandbox;
    },
    async list() {
      let found;
      try {
        found = await docker().listContainers({
          all: true,
          filters: { label: [`${DOCKER_APP_LABEL.key}=${DOCKER_APP_LABEL.value}`, SANDBOX_NAME_LABEL] },
        });
      } catch (error) {
        throw translateDockerError(error, { host, during: "listing sandboxes" });
      }
      return found.map((info): NamedSandboxInfo => {
        const labels = info.Labels;
        return {
          name: labels[SANDBOX_NAME_LABEL] ?? "",
          provider: "docker",
          state: info.State === "paused" ? "paused" : info.State === "running" ? "running" : "stopped",
          repo: labels[DOCKER_REPO_LABEL],
          branch: labels[DOCKER_BRANCH_LABEL] ?? "",
          createdAt: new Date(info.Created * 1000).toISOString(),
          image: info.Image,
        };
      });
    },
    async readBase(sandbox) {
      const read = await sandbox.exec({
        argv: ["cat", posix.join(SCRATCH_DIR, BASE_FILE)],
        cwd: sandbox.workDir,
        timeout: 10_000,
        maxOutput: 256,
      });
      return read.exitCode === 0 ? parseBase(read.stdout) : undefined;
    },
    async rememberBase(sandbox, base) {
      await sandbox.writeScratchFile(BASE_FILE, base);
    },
    async remove(name) {
      try {
        await docker().getContainer(sandboxContainerName(name)).remove({ force: true, v: true });
        return true;
      } catch (error) {
        if (statusOf(error) === 404) return false;
        throw translateDockerError(error, { host, during: `deleting the sandbox ${name}` });
      }
    },
    close() {
      return Promise.resolve();
    },
  };
}
