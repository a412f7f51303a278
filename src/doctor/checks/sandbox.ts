import { probeLocalIsolation } from "../../runtime/local-isolation.js";
import { daytonaApiUrl } from "../../sandbox/daytona/client.js";
import {
  DEFAULT_DOCKER_HOST,
  dockerClient,
  engineMessage,
  statusOf as engineStatus,
} from "../../sandbox/docker/client.js";
import { remapsUserNamespaces } from "../../sandbox/docker/user-namespaces.js";
import { sandboxUserFor } from "../../sandbox/local/sandbox-user.js";
import { describeError } from "../../util/errors.js";
import { failed, passed, skipped, type Check } from "../check.js";
import { appSettings, type DoctorContext } from "../context.js";

/**
 * The local sandbox, proved the way a worker proves it at start: a trivial command run under
 * bubblewrap as the sandbox user (when Harness is root), with the seccomp filter, reaching the
 * read-only paths and the repository cache.
 */
export function localSandboxCheck(): Check<DoctorContext> {
  return {
    id: "local-sandbox",
    name: "local sandbox",
    needs: ["settings"],
    // The probe holds its own 10 s limit on bwrap; this one is above it.
    timeoutMs: 20_000,
    fixWhenStuck: () => "run `bwrap --unshare-all --ro-bind / / true` by hand to see where it hangs",
    async run(context) {
      const settings = appSettings(context);
      if (!settings.allowedSandboxes.includes("local"))
        return skipped(`not used (runs go to ${settings.allowedSandboxes.join(", ")})`);
      if (settings.concurrency === 0) return skipped("not used: this process runs no work (HARNESS_ROLE=web)");
      const { isolation, probe } = await probeLocalIsolation(settings);
      if (isolation.mode === "none")
        return passed("runs NOT isolated (HARNESS_UNISOLATED_LOCAL=1): only for repositories you fully trust");
      if (!probe) return skipped("not probed: this process runs no local sandbox");
      if (!probe.available)
        return failed(probe.reason, `${probe.fix}; or run on Daytona (DAYTONA_API_KEY, HARNESS_SANDBOX=daytona)`);
      // Resolved already by the probe, which would have failed on a setting that cannot work.
      const user = sandboxUserFor(isolation.sandboxUser);
      const as = user ? `, as uid ${String(user.uid)} (the sandbox user)` : "";
      return passed(`bubblewrap ${probe.version} at ${probe.bwrapPath} ran a command isolated${as}`);
    },
  };
}

/**
 * Daytona's API key, tried with the real SDK on a call that costs nothing (the first page of
 * this key's sandboxes), and the snapshot runs start from, when one is named.
 */
export function daytonaCheck(): Check<DoctorContext> {
  return {
    id: "daytona",
    name: "Daytona",
    needs: ["settings"],
    timeoutMs: 15_000,
    fixWhenStuck: (context) =>
      `check that this machine reaches ${daytonaApiUrl(appSettings(context).daytona, context.env)} (DAYTONA_API_URL)`,
    async run(context, signal) {
      const settings = appSettings(context);
      if (!settings.allowedSandboxes.includes("daytona"))
        return skipped(`not used (runs go to ${settings.allowedSandboxes.join(", ")})`);
      const options = settings.daytona;
      if (!options.apiKey)
        return failed("DAYTONA_API_KEY is not set", "set DAYTONA_API_KEY to a key from the Daytona dashboard (Keys)");
      const url = daytonaApiUrl(options, context.env);
      const daytona = context.daytona(options, 10_000);
      const stop = (): void => {
        void daytona[Symbol.asyncDispose]();
      };
      signal.addEventListener("abort", stop, { once: true });
      try {
        try {
          await daytona.list({ limit: 1 }).next();
        } catch (error) {
          const status = statusOf(error);
          if (status === 401 || status === 403)
            return failed(
              `${url} refused the API key (${String(status)})`,
              "set DAYTONA_API_KEY to a valid key from the Daytona dashboard (Keys), for this API URL",
            );
          return failed(
            `${url} did not answer: ${describeError(error)}`,
            `check DAYTONA_API_URL and that this machine reaches it`,
          );
        }
        if (!options.snapshot) return passed(`the API key works at ${url}; default snapshot`);
        try {
          const snapshot = await daytona.snapshot.get(options.snapshot);
          return snapshot.state === "active"
            ? passed(`the API key works at ${url}; snapshot ${options.snapshot} is active`)
            : failed(
                `snapshot ${options.snapshot} is ${snapshot.state}, not active`,
                "wait for it to build, or build it again with `harness daytona snapshot create`",
              );
        } catch (error) {
          return failed(
            `snapshot ${options.snapshot} (DAYTONA_SNAPSHOT): ${describeError(error)}`,
            "create it with `harness daytona snapshot create`, or correct DAYTONA_SNAPSHOT",
          );
        }
      } finally {
        signal.removeEventListener("abort", stop);
        await daytona[Symbol.asyncDispose]();
      }
    },
  };
}

/** The HTTP status inside a Daytona SDK error, when it carries one. */
function statusOf(error: unknown): number | undefined {
  if (typeof error !== "object" || error === null) return undefined;
  const candidate = error as { statusCode?: unknown; status?: unknown; response?: { status?: unknown } };
  for (const value of [candidate.statusCode, candidate.status, candidate.response?.status])
    if (typeof value === "number") return value;
  const match = /\b(401|403)\b/.exec(error instanceof Error ? error.message : "");
  return match ? Number(match[1]) : undefined;
}

/**
 * The Docker Engine runs go to, and the image they start from: the engine's version, then the
 * image looked up on it (an image the engine does not have fails every run at its start).
 */
export function dockerCheck(): Check<DoctorContext> {
  return {
    id: "docker",
    name: "Docker",
    needs: ["settings"],
    timeoutMs: 15_000,
    fixWhenStuck: (context) => `check that the Docker Engine at ${engineOf(context)} answers (\`docker version\`)`,
    async run(context) {
      const settings = appSettings(context);
      if (!settings.allowedSandboxes.includes("docker"))
        return skipped(`not used (runs go to ${settings.allowedSandboxes.join(", ")})`);
      const image = settings.docker?.image;
      if (!image)
        return failed(
          "HARNESS_DOCKER_IMAGE is not set",
          "set HARNESS_DOCKER_IMAGE to the image runs start from (sh, git and the agent CLIs in it)",
        );
      const host = engineOf(context);
      let client;
      try {
        client = dockerClient(host);
      } catch (error) {
        return failed(describeError(error), "set DOCKER_HOST to unix:///path/to/docker.sock or tcp://host:port");
      }
      try {
        // dockerode takes no signal here: the check's own time limit ends the wait.
        const version = await client.version();
        try {
          await client.getImage(image).inspect();
        } catch (error) {
          if (engineStatus(error) !== 404) throw error;
          return failed(
            `the engine at ${host} (Docker ${version.Version}) has no image ${image}`,
            `build or pull it there (docker build -t ${image} ., or docker pull ${image}), ` +
              "or set HARNESS_DOCKER_IMAGE to an image it has",
          );
        }
        const info = (await client.info()) as { SecurityOptions?: unknown };
        return passed(`Docker ${version.Version} at ${host}, with the image ${image}; ${userNamespaces(info)}`);
      } catch (error) {
        const code = (error as NodeJS.ErrnoException | undefined)?.code;
        if (code !== undefined && engineStatus(error) === undefined)
          return failed(
            `nothing answers at ${host} (${code})`,
            "start the Docker Engine (systemctl start docker, or dockerd) or point DOCKER_HOST at a running one",
          );
        return failed(`the engine at ${host} answered: ${engineMessage(error)}`, "see the Docker Engine's own log");
      }
    },
  };
}

/**
 * Whether the engine maps a container's uids to a subordinate range of the host's. Without it a
 * sandbox's unprivileged uid is that same uid on the host: not root, but whoever holds it there.
 * Remapping is the engine's own setting (daemon.json), not one a container can ask for.
 */
export function userNamespaces(info: { SecurityOptions?: unknown }): string {
  return remapsUserNamespaces(info)
    ? "user namespaces remapped (a sandbox's uids are not the host's)"
    : "no user-namespace remapping: a sandbox's uid is the same uid on the host " +
        `(set "userns-remap": "default" in the engine's daemon.json to map it elsewhere)`;
}

function engineOf(context: DoctorContext): string {
  return appSettings(context).docker?.host ?? context.env["DOCKER_HOST"] ?? DEFAULT_DOCKER_HOST;
}
