import { Daytona } from "@daytonaio/sdk";
import { afterAll, afterEach, beforeAll, beforeEach, describe, expect, test } from "vitest";
import { createDaytonaSandbox } from "../../src/sandbox/daytona.js";
import type { Sandbox, SandboxOptions } from "../../src/sandbox/types.js";
import { startFakeDaytona, type FakeDaytona } from "../fakes/daytona/server.js";
import { startGitHttpServer, type GitHttpServer } from "../fakes/git-http-server.js";
import { makeBareRepo, scratchDir } from "../helpers/git.js";
import { fakeToken } from "../helpers/fake-secrets.js";

// Contract tests (real @daytonaio/sdk against the fake Daytona): a retried attempt of a run
// deletes the sandbox an earlier, dead attempt of the same run left behind, and nothing else.
const token = fakeToken("ghs_", 37);
let daytona: FakeDaytona;
let gitServer: GitHttpServer;
let root: { path: string; cleanup: () => Promise<void> };
const open: Sandbox[] = [];

beforeAll(async () => {
  root = await scratchDir("harness-remote-");
  await makeBareRepo(root.path, "acme", "widgets");
  gitServer = await startGitHttpServer({ projectRoot: root.path, token });
});

afterAll(async () => {
  await gitServer.close();
  await root.cleanup();
});

beforeEach(async () => {
  daytona = await startFakeDaytona();
});

afterEach(async () => {
  await Promise.all(open.splice(0).map((sandbox) => sandbox.teardown().catch(() => undefined)));
  await daytona.close();
});

function options(overrides: Partial<SandboxOptions> = {}): SandboxOptions {
  return {
    repo: "acme/widgets",
    branch: "harness/issue-7-run7",
    runId: "run-7",
    githubToken: token,
    githubServerUrl: gitServer.url,
    labels: { "harness-issue": "7" },
    ...overrides,
    daytona: { apiKey: daytona.apiKey, apiUrl: daytona.apiUrl, ...overrides.daytona },
  };
}

/** What a worker that died mid-run leaves: its sandbox, with its agent still running in it. */
async function deadAttempt(runId: string): Promise<string> {
  const left = await createDaytonaSandbox(options({ runId }));
  const client = new Daytona({ apiKey: daytona.apiKey, apiUrl: daytona.apiUrl, target: "us", useDeprecatedPolling: true });
  try {
    const remote = await client.get(left.id);
    await remote.process.createSession("agent");
    await remote.process.executeSessionCommand("agent", { command: "sleep 600", runAsync: true });
  } finally {
    await client[Symbol.asyncDispose]();
  }
  expect(daytona.liveProcesses(left.id)).not.toEqual([]);
  return left.id;
}

const live = () => [...daytona.sandboxes.values()].filter((sandbox) => sandbox.state !== "destroyed").map((sandbox) => sandbox.id);

describe("a retried attempt replaces the sandbox of the dead one", () => {
  test("the earlier attempt's sandbox is deleted (its agent killed), other runs' sandboxes are left alone", async () => {
    const dead = await deadAttempt("run-7");
    const otherRun = await deadAttempt("run-8");
    const retry = await createDaytonaSandbox(options({ replaceEarlierAttempts: true }));
    open.push(retry);
    expect(live().sort()).toEqual([retry.id, otherRun].sort());
    expect(daytona.sandbox(dead).state).toBe("destroyed");
    expect(daytona.liveProcesses(dead)).toEqual([]);
    expect(daytona.liveProcesses(otherRun)).not.toEqual([]);
    expect(daytona.sandbox(retry.id).labels).toMatchObject({ app: "harness", "harness-run": "run-7" });
  });

  test("the lookup runs beside the create, not before it: no extra round trip on the way to a sandbox", async () => {
    await deadAttempt("run-7");
    daytona.setLatency(40);
    const before = daytona.requests.length;
    open.push(await createDaytonaSandbox(options({ replaceEarlierAttempts: true })));
    const requests = daytona.requests.slice(before);
    const create = requests.find((request) => request.method === "POST" && request.path === "/api/sandbox");
    const lookup = requests.find((request) => request.method === "GET" && request.path === "/api/sandbox");
    expect(lookup?.query["labels"]).toBe(JSON.stringify({ app: "harness", "harness-run": "run-7" }));
    // Both were sent before either was answered.
    expect(lookup?.time).toBeLessThan(create?.respondedAt ?? 0);
    expect(create?.time).toBeLessThan(lookup?.respondedAt ?? 0);
  });

  test("without the option (a CLI run) nothing is looked up and nothing deleted", async () => {
    const dead = await deadAttempt("run-7");
    const before = daytona.requests.length;
    open.push(await createDaytonaSandbox(options()));
    expect(daytona.requests.slice(before).filter((request) => request.method === "GET" && request.path === "/api/sandbox")).toEqual([]);
    expect(daytona.sandbox(dead).state).not.toBe("destroyed");
  });

  test("a lookup Daytona refuses does not fail the run: the new sandbox is made, the leftover waits for the reaper", async () => {
    const dead = await deadAttempt("run-7");
    daytona.injectFault({ method: "GET", pathPattern: /^\/api\/sandbox$/, times: 1 }, { status: 500 });
    const retry = await createDaytonaSandbox(options({ replaceEarlierAttempts: true }));
    open.push(retry);
    expect(live().sort()).toEqual([dead, retry.id].sort());
  });

  test("a create that fails still deletes the earlier attempt's sandbox", async () => {
    const dead = await deadAttempt("run-7");
    await expect(createDaytonaSandbox(options({ replaceEarlierAttempts: true, daytona: { snapshot: "nope" } }))).rejects.toThrow("snapshot 'nope' does not exist");
    expect(daytona.sandbox(dead).state).toBe("destroyed");
    expect(live()).toEqual([]);
  });
});
