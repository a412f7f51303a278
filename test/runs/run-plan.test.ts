import { describe, expect, test } from "vitest";
import { planRun, type PlanDeps } from "../../src/runs/worker/run-plan.js";
import { request } from "./queue-conformance.js";

/*
 * A run's plan is made from the repository's files read afresh: what goes wrong there is the
 * repository's to fix, but GitHub not answering is not, and the status comment must not say so.
 */

const deps: PlanDeps = { defaultSandbox: "local", allowedSandboxes: ["local"], environment: {} };

function octokitAnswering(answer: (path: string) => Promise<{ data: unknown }>) {
  return {
    request: (_route: string, params?: Record<string, unknown>) => {
      const path = params?.["path"];
      return answer(typeof path === "string" ? path : "");
    },
  };
}

describe("planRun: whose problem a failed plan is", () => {
  test("an invalid .github/harness.yml: fix the file", async () => {
    const octokit = octokitAnswering((path) =>
      path === ".github/harness.yml"
        ? Promise.resolve({
            data: {
              type: "file",
              size: 14,
              encoding: "base64",
              content: Buffer.from("timeout: nope\n").toString("base64"),
            },
          })
        : Promise.reject(Object.assign(new Error("Not Found"), { status: 404 })),
    );
    const outcome = await planRun(request(1), deps, octokit);
    expect(outcome).toMatchObject({
      ok: false,
      remedy: "Fix .github/harness.yml on the default branch, then ask again",
    });
  });

  test("GitHub hanging up while the file is read: ask again, not fix the file", async () => {
    const octokit = octokitAnswering(() =>
      Promise.reject(Object.assign(new Error("socket hang up"), { code: "ECONNRESET" })),
    );
    const outcome = await planRun(request(1), deps, octokit);
    expect(outcome.ok).toBe(false);
    if (outcome.ok) return;
    expect(outcome.error).toMatch(
      /^Harness could not read the repository's configuration from GitHub: .*socket hang up/,
    );
    expect(outcome.remedy).toMatch(/^Ask again in a minute/);
  });
});

describe("planRun: the operator's allowed Docker images", () => {
  const dockerDeps: PlanDeps = {
    defaultSandbox: "docker",
    allowedSandboxes: ["docker"],
    dockerImages: ["acme/runner:1", "ghcr.io/acme/*"],
    environment: {},
  };
  const configAsking = (yaml: string) =>
    octokitAnswering((path) =>
      path === ".github/harness.yml"
        ? Promise.resolve({
            data: {
              type: "file",
              size: Buffer.byteLength(yaml),
              encoding: "base64",
              content: Buffer.from(yaml).toString("base64"),
            },
          })
        : Promise.reject(Object.assign(new Error("Not Found"), { status: 404 })),
    );

  test("an image on the list is the run's; one off it ends the run before it starts, naming the list", async () => {
    const listed = await planRun(
      request(1),
      dockerDeps,
      configAsking('agent: command\nagent_command: ["true"]\nsandbox:\n  image: ghcr.io/acme/node:22\n'),
    );
    expect(listed.ok).toBe(true);
    const refused = await planRun(
      request(1),
      dockerDeps,
      configAsking('agent: command\nagent_command: ["true"]\nsandbox:\n  image: ghcr.io/evil/miner:1\n'),
    );
    expect(refused).toEqual({
      ok: false,
      error:
        ".github/harness.yml asks for the Docker image ghcr.io/evil/miner:1 (`sandbox.image`), which this Harness " +
        "does not run: its operator allows only `acme/runner:1`, `ghcr.io/acme/*`",
      remedy:
        "Choose one of those for `sandbox.image` in .github/harness.yml on the default branch (or leave it out " +
        "for the operator's image), or ask the operator to add yours to HARNESS_DOCKER_IMAGES, then ask again",
    });
  });

  test("a run that does not go to Docker is not held to the list", async () => {
    const local = await planRun(
      request(1),
      { ...dockerDeps, defaultSandbox: "local", allowedSandboxes: ["local"] },
      configAsking('agent: command\nagent_command: ["true"]\nsandbox:\n  image: ghcr.io/evil/miner:1\n'),
    );
    expect(local).toMatchObject({ ok: true, plan: { sandboxKind: "local" } });
  });
});
