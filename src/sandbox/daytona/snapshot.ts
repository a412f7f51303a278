import { Image } from "@daytonaio/sdk";
import { createRedactor } from "../../util/redact.js";
import { daytonaApiUrl, daytonaClient } from "./client.js";
import { translateError } from "./sandbox.js";
import type { DaytonaOptions } from "../types.js";

/** The snapshot name `harness daytona snapshot create` uses unless told otherwise. */
export const RECOMMENDED_SNAPSHOT = "harness-node22";

/**
 * The image Harness runs best in: Node 22 with git, and the three agent CLIs installed globally,
 * so no run spends minutes installing them. Pinned to the versions whose flags the drivers were
 * checked against (see src/agents/*.ts).
 */
export function recommendedImage(): Image {
  return Image.base("node:22-bookworm-slim")
    .runCommands(
      "apt-get update && apt-get install -y --no-install-recommends git ca-certificates && rm -rf /var/lib/apt/lists/*",
      "npm install -g @anthropic-ai/claude-code@2.1.330 @openai/codex@0.169.0 @mariozechner/pi-coding-agent@0.73.1",
    )
    .workdir("/home/daytona");
}

export interface CreateSnapshotRequest {
  name: string;
  daytona: DaytonaOptions;
  /** Receives build progress (log lines) as Daytona builds the image. */
  onProgress: (line: string) => void;
}

/** Builds the recommended snapshot in Daytona, streaming the build log to `onProgress`. */
export async function createRecommendedSnapshot(
  request: CreateSnapshotRequest,
): Promise<{ name: string; state: string }> {
  const daytona = daytonaClient(request.daytona);
  try {
    const snapshot = await daytona.snapshot.create(
      { name: request.name, image: recommendedImage(), resources: { cpu: 2, memory: 4, disk: 10 } },
      {
        onLogs: (chunk) => {
          for (const line of chunk.split("\n")) if (line.trim() !== "") request.onProgress(line);
        },
      },
    );
    return { name: snapshot.name, state: snapshot.state };
  } catch (error) {
    throw translateError(error, {
      apiUrl: daytonaApiUrl(request.daytona),
      redact: createRedactor([request.daytona.apiKey ?? process.env["DAYTONA_API_KEY"]]),
      during: `building snapshot '${request.name}'`,
    });
  } finally {
    await daytona[Symbol.asyncDispose]().catch(() => undefined);
  }
}
