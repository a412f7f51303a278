import Docker from "dockerode";
import { describeError, SandboxBackendUnreachableError, SandboxError } from "../../util/errors.js";

/** The engine a host string names: `unix:///path`, `tcp://host:port` or `http://host:port`. */
export const DEFAULT_DOCKER_HOST = "unix:///var/run/docker.sock";

/** `host`, else DOCKER_HOST, else the local socket. */
export function dockerHost(host?: string): string {
  return host ?? process.env["DOCKER_HOST"] ?? DEFAULT_DOCKER_HOST;
}

/**
 * A client for the engine at `host`. Plain TCP only: an engine reached over TLS is configured
 * by the operator with a socket (or an SSH tunnel to one), not through this adapter.
 */
export function dockerClient(host: string): Docker {
  if (host.startsWith("unix://")) return new Docker({ socketPath: host.slice("unix://".length) });
  if (host.startsWith("/")) return new Docker({ socketPath: host });
  let url: URL;
  try {
    url = new URL(host.replace(/^tcp:/, "http:"));
  } catch {
    throw new SandboxError(`DOCKER_HOST "${host}" is not an address: use unix:///path/docker.sock or tcp://host:port`);
  }
  if (url.protocol !== "http:")
    throw new SandboxError(`DOCKER_HOST "${host}": only unix:// and tcp:// engines are supported`);
  return new Docker({ host: url.hostname, port: Number(url.port || 2375), protocol: "http" });
}

/** What the engine answered, when it answered. */
export function statusOf(error: unknown): number | undefined {
  if (error !== null && typeof error === "object" && "statusCode" in error && typeof error.statusCode === "number")
    return error.statusCode;
  return undefined;
}

/** The engine's own message for a refused request, without docker-modem's "(HTTP code …)" prefix. */
export function engineMessage(error: unknown): string {
  if (error !== null && typeof error === "object" && "json" in error) {
    const json = (error as { json?: unknown }).json;
    if (json !== null && typeof json === "object" && "message" in json && typeof json.message === "string")
      return json.message;
  }
  // A streamed answer (a pull's) keeps its reason only in the text, after the same prefix.
  return describeError(error).replace(/^\(HTTP code \d+\) [^-]*- /, "");
}

/** The engine's answer to a container asked of an image it does not have. */
export function isMissingImage(error: unknown): boolean {
  return statusOf(error) === 404 && /no such image|not found|pull access/i.test(engineMessage(error));
}

const UNREACHABLE = new Set(["ECONNREFUSED", "ENOENT", "EACCES", "ECONNRESET", "EHOSTUNREACH", "ETIMEDOUT", "EPIPE"]);

/**
 * One error that says what went wrong and what to do: an engine that does not answer, an
 * image it does not have, or the engine's own words for anything else.
 */
export function translateDockerError(
  error: unknown,
  context: { host: string; during: string; image?: string },
): SandboxError {
  if (error instanceof SandboxError) return error;
  const code = (error as NodeJS.ErrnoException | undefined)?.code;
  if (code !== undefined && UNREACHABLE.has(code)) {
    return new SandboxBackendUnreachableError(
      "docker",
      `The Docker Engine at ${context.host} is not reachable (${code}) while ${context.during}: ` +
        `start it (systemctl start docker, or dockerd) or point DOCKER_HOST at a running one`,
    );
  }
  const message = engineMessage(error);
  if (context.image !== undefined && isMissingImage(error)) {
    return new SandboxError(
      `The Docker image "${context.image}" is not on the Docker Engine at ${context.host}: ` +
        `build or pull it there first (docker build -t ${context.image} …, or docker pull ${context.image}), ` +
        `or configure an image the engine has`,
    );
  }
  return new SandboxError(`Docker refused ${context.during}: ${message}`);
}
