import type Docker from "dockerode";
import { SandboxError } from "../../util/errors.js";
import { engineMessage, isMissingImage, statusOf, translateDockerError } from "./client.js";
import { imageReferenceProblem, parseImageReference } from "./image-reference.js";

/** How much of the engine's reason a pull failure quotes: registries can answer at length. */
const MAX_REASON_CHARS = 300;

/**
 * Creates the container from `spec`, pulling its image first when the engine does not have it
 * (an image a repository chose, say, that no run has used on this engine yet). An image that
 * cannot be pulled either ends it with one error naming the image, the engine's reason and what
 * to do; the pull gives up after `timeoutMs`.
 */
export async function createContainerPulling(
  client: Docker,
  spec: Docker.ContainerCreateOptions,
  context: { host: string; image: string; timeoutMs: number },
): Promise<Docker.Container> {
  const during = "creating the sandbox's container";
  try {
    return await client.createContainer(spec);
  } catch (error) {
    if (!isMissingImage(error)) throw translateDockerError(error, { host: context.host, during, image: context.image });
  }
  await pullImage(client, context);
  try {
    return await client.createContainer(spec);
  } catch (error) {
    throw translateDockerError(error, { host: context.host, during, image: context.image });
  }
}

async function pullImage(client: Docker, context: { host: string; image: string; timeoutMs: number }): Promise<void> {
  const { image, host } = context;
  const cannot = (reason: string): SandboxError =>
    new SandboxError(
      `The Docker image "${image}" is not on the Docker Engine at ${host}, and it could not be pulled: ${reason}. ` +
        `Check the image's name and tag; an image from a private registry, or from one the engine cannot reach, ` +
        `must be pulled (after docker login) or built on the engine's host first (docker pull ${image}); ` +
        `or choose an image the engine has`,
    );
  const shape = imageReferenceProblem(image);
  if (shape !== undefined) throw cannot(`the name ${shape}`);
  const ref = parseImageReference(image);
  // A tag (or digest) always: a bare name would pull every tag of the repository.
  const tag = ref.digest ?? ref.tag ?? "latest";
  let lastError: string | undefined;
  try {
    const stream = await client.createImage({
      fromImage: `${ref.domain}/${ref.path}`,
      tag,
      abortSignal: AbortSignal.timeout(context.timeoutMs),
    });
    // The engine says a failure mid-pull as a progress line with `error`, not as a status.
    let pending = "";
    for await (const chunk of stream as AsyncIterable<Buffer>) {
      pending += chunk.toString("utf8");
      const lines = pending.split("\n");
      pending = lines.pop() ?? "";
      for (const line of lines) lastError = progressError(line) ?? lastError;
    }
    lastError = progressError(pending) ?? lastError;
  } catch (error) {
    if (error instanceof Error && (error.name === "TimeoutError" || error.name === "AbortError"))
      throw cannot(`the pull did not finish within ${String(Math.round(context.timeoutMs / 1000))} s`);
    // No answer at all is the engine's problem, said as such; an answer is the image's.
    if (statusOf(error) === undefined)
      throw translateDockerError(error, { host, during: `pulling the image ${image}` });
    throw cannot(cut(engineMessage(error)));
  }
  if (lastError !== undefined) throw cannot(cut(lastError));
}

/** The error a progress line carries, if any. */
function progressError(line: string): string | undefined {
  if (line.trim() === "") return undefined;
  try {
    const event = JSON.parse(line) as { error?: unknown };
    return typeof event.error === "string" ? event.error : undefined;
  } catch {
    return undefined;
  }
}

function cut(text: string): string {
  const trimmed = text.trim().replace(/\.$/, "");
  return trimmed.length > MAX_REASON_CHARS ? `${trimmed.slice(0, MAX_REASON_CHARS)}…` : trimmed;
}
