import { readFileSync } from "node:fs";
import { createRequire } from "node:module";
import { Octokit } from "@octokit/core";
import { afterEach, describe, expect, test } from "vitest";
import { checkRunToCheck, statusToCheck, type CiCheck } from "../../../src/pulls/ci/checks.js";
import { startFakeGitHub, type Permissions } from "../../fakes/github/server.js";

/** GitHub's own examples from its API description, as the REST answers look. */
function githubExample(name: string): Record<string, unknown> {
  const path = createRequire(import.meta.url).resolve("@octokit/openapi/generated/api.github.com.json");
  const description = JSON.parse(readFileSync(path, "utf8")) as {
    components: { examples: Record<string, { value: Record<string, unknown> }> };
  };
  const example = description.components.examples[name];
  if (!example) throw new Error(`no example ${name}`);
  return example.value;
}

/** A GitHub Actions job's check run as github.com lists it (trimmed of the pull requests). */
const ACTIONS_RUN = {
  id: 33_470_181_211,
  name: "test (20.x)",
  node_id: "CR_kwDOAbcdefgh8AAAAHyV1Kmw",
  head_sha: "4f1e2d3c4b5a69788796a5b4c3d2e1f0a9b8c7d6",
  external_id: "d2a6c59f-6a0c-5f0b-9a55-6f2c3f3b9c0e",
  url: "https://api.github.com/repos/acme/widgets/check-runs/33470181211",
  html_url: "https://github.com/acme/widgets/actions/runs/11940217153/job/33470181211",
  details_url: "https://github.com/acme/widgets/actions/runs/11940217153/job/33470181211",
  status: "completed",
  conclusion: "failure",
  started_at: "2026-11-26T10:00:00Z",
  completed_at: "2026-11-26T10:03:12Z",
  output: {
    title: null,
    summary: null,
    text: null,
    annotations_count: 1,
    annotations_url: "https://api.github.com/repos/acme/widgets/check-runs/33470181211/annotations",
  },
  check_suite: { id: 31_234_567_890 },
  app: { id: 15368, slug: "github-actions", node_id: "MDM6QXBwMTUzNjg=", name: "GitHub Actions" },
  pull_requests: [],
};

describe("checkRunToCheck", () => {
  test("GitHub's example check run (another app's, neutral) passes and keeps its output for a person", () => {
    const example = githubExample("check-run-paginated") as { check_runs: unknown[] };
    const check = checkRunToCheck(example.check_runs[0]);
    expect(check).toEqual<CiCheck>({
      kind: "check_run",
      id: "4",
      name: "mighty_readme",
      app: { id: 1, slug: "octoapp" },
      suiteId: 5,
      state: "passed",
      detail: "neutral",
      url: "https://github.com/github/hello-world/runs/4",
      output:
        "Mighty Readme report\n\nThere are 0 failures, 2 warnings, and 1 notice.\n\n" +
        "You may have some misspelled words on lines 2 and 4. You also may want to add a section in your " +
        "README about how to install your app.",
    });
  });

  test("a GitHub Actions job's check run carries the job id, and its empty output is left out", () => {
    const check = checkRunToCheck(ACTIONS_RUN);
    expect(check).toEqual<CiCheck>({
      kind: "check_run",
      id: "33470181211",
      name: "test (20.x)",
      app: { id: 15368, slug: "github-actions" },
      suiteId: 31_234_567_890,
      state: "failed",
      detail: "failure",
      url: "https://github.com/acme/widgets/actions/runs/11940217153/job/33470181211",
      actionsJobId: 33_470_181_211,
    });
  });

  test("another app's run has no job id even when its id is a number", () => {
    const check = checkRunToCheck({ ...ACTIONS_RUN, app: { id: 99, slug: "circleci-checks" } });
    expect(check).not.toHaveProperty("actionsJobId");
    expect(check?.app).toEqual({ id: 99, slug: "circleci-checks" });
  });

  test.each([
    ["queued", null, "pending", "queued"],
    ["in_progress", null, "pending", "in_progress"],
    ["pending", null, "pending", "pending"],
    ["waiting", null, "pending", "waiting"],
    ["requested", null, "pending", "requested"],
    ["completed", "success", "passed", "success"],
    ["completed", "neutral", "passed", "neutral"],
    ["completed", "skipped", "passed", "skipped"],
    ["completed", "failure", "failed", "failure"],
    ["completed", "timed_out", "failed", "timed_out"],
    ["completed", "cancelled", "failed", "cancelled"],
    ["completed", "action_required", "failed", "action_required"],
    ["completed", "startup_failure", "failed", "startup_failure"],
    ["completed", "stale", "failed", "stale"],
    ["completed", "a_word_github_adds_later", "failed", "a_word_github_adds_later"],
    ["completed", null, "failed", "completed"],
    // A status GitHub adds later, or none at all: a conclusion means it finished.
    ["a_new_status", "success", "passed", "success"],
    ["a_new_status", null, "pending", "a_new_status"],
    [undefined, "failure", "failed", "failure"],
    [undefined, undefined, "pending", "pending"],
  ])("status %s, conclusion %s → %s (%s)", (status, conclusion, state, detail) => {
    const check = checkRunToCheck({ ...ACTIONS_RUN, status, conclusion });
    expect(check?.state).toBe(state);
    expect(check?.detail).toBe(detail);
  });

  test("the page on GitHub is preferred to the app's own details page, which stands in when it is missing", () => {
    const other = { id: 7, name: "deploy", status: "completed", conclusion: "failure" };
    expect(
      checkRunToCheck({ ...other, html_url: "https://github.com/a/b/runs/7", details_url: "https://x.test/7" })?.url,
    ).toBe("https://github.com/a/b/runs/7");
    expect(checkRunToCheck({ ...other, html_url: null, details_url: "https://x.test/7" })?.url).toBe(
      "https://x.test/7",
    );
    expect(checkRunToCheck({ ...other, html_url: "", details_url: "" })).not.toHaveProperty("url");
  });

  test("partial or odd JSON never throws: what cannot be read is left out or given a fallback", () => {
    for (const raw of [null, undefined, 42, "check", [], {}, { name: "no id" }, { id: {} }, { id: Number.NaN }]) {
      expect(checkRunToCheck(raw)).toBeUndefined();
    }
    const bare = checkRunToCheck({ id: 12 });
    expect(bare).toEqual<CiCheck>({ kind: "check_run", id: "12", name: "12", state: "pending", detail: "pending" });
    const odd = checkRunToCheck({
      id: "node-12",
      name: 5,
      status: "completed",
      conclusion: 3,
      app: { id: "15368", slug: "github-actions" },
      check_suite: null,
      output: { title: 1, summary: "", text: "only text" },
      html_url: ["x"],
    });
    expect(odd).toEqual<CiCheck>({
      kind: "check_run",
      id: "node-12",
      name: "node-12",
      state: "failed",
      detail: "completed",
      output: "only text",
    });
  });
});

describe("statusToCheck", () => {
  test("GitHub's example combined status: each status by its context, described and linked", () => {
    const example = githubExample("combined-commit-status") as { statuses: unknown[] };
    expect(example.statuses.map(statusToCheck)).toEqual<CiCheck[]>([
      {
        kind: "status",
        id: "continuous-integration/jenkins",
        name: "continuous-integration/jenkins",
        state: "passed",
        detail: "success",
        url: "https://ci.example.com/1000/output",
        output: "Build has completed successfully",
      },
      {
        kind: "status",
        id: "security/brakeman",
        name: "security/brakeman",
        state: "passed",
        detail: "success",
        url: "https://ci.example.com/2000/output",
        output: "Testing has completed successfully",
      },
    ]);
  });

  test.each([
    ["pending", "pending"],
    ["success", "passed"],
    ["failure", "failed"],
    ["error", "failed"],
    ["a_word_github_adds_later", "pending"],
  ])("state %s → %s, GitHub's word kept as the detail", (state, expected) => {
    const check = statusToCheck({ context: "ci/build", state });
    expect(check?.state).toBe(expected);
    expect(check?.detail).toBe(state);
  });

  test("partial or odd JSON never throws; a status without a context is not a check", () => {
    for (const raw of [null, 7, "ci", [], {}, { context: "" }, { context: 3, state: "failure" }]) {
      expect(statusToCheck(raw)).toBeUndefined();
    }
    expect(statusToCheck({ context: "ci/build", state: null, target_url: null, description: null })).toEqual<CiCheck>({
      kind: "status",
      id: "ci/build",
      name: "ci/build",
      state: "pending",
      detail: "unknown",
    });
  });
});

describe("against the fake GitHub's answers", () => {
  const cleanups: (() => Promise<void>)[] = [];
  afterEach(async () => {
    for (const cleanup of cleanups.splice(0).reverse()) await cleanup();
  });

  test("an Actions job, another app's run and commit statuses, read over REST, convert as on github.com", async () => {
    const fake = await startFakeGitHub();
    cleanups.push(() => fake.close());
    const permissions: Permissions = { metadata: "read", contents: "read", checks: "read", statuses: "read" };
    const repo = await fake.addRepo({ owner: "acme", name: "widgets", files: { "README.md": "hi\n" } });
    const app = fake.addApp({ id: 777, slug: "lint-bot", permissions });
    const installation = fake.addInstallation({ account: "acme", permissions });
    const sha = await fake.setFile("acme", "widgets", "README.md", "hello\n", { branch: "topic" });
    const { jobs } = fake.addWorkflowRun("acme", "widgets", {
      headSha: sha,
      jobs: [{ name: "test", conclusion: "failure" }, { name: "build" }],
    });
    fake.addCheckRun("acme", "widgets", {
      headSha: sha,
      appId: app.id,
      name: "lint",
      conclusion: "failure",
      output: { title: "2 problems", summary: "Lint failed" },
      detailsUrl: "https://lint.example.com/1",
    });
    fake.addCommitStatus("acme", "widgets", sha, {
      state: "error",
      context: "ci/legacy",
      description: "The build machine went away",
      targetUrl: "https://legacy.example.com/9",
    });
    const octokit = new Octokit({ baseUrl: fake.apiUrl, auth: fake.mintToken(installation.id, {}) });
    const base = { owner: "acme", repo: "widgets", ref: sha };

    const runs = await octokit.request("GET /repos/{owner}/{repo}/commits/{ref}/check-runs", base);
    const checks = runs.data.check_runs.map(checkRunToCheck);
    const [testJob, buildJob] = jobs;
    expect(checks).toEqual(
      expect.arrayContaining([
        expect.objectContaining({
          name: "test",
          id: String(testJob?.id),
          actionsJobId: testJob?.id,
          state: "failed",
          detail: "failure",
          url: `${repo.htmlUrl}/actions/runs/${String(testJob?.runId)}/job/${String(testJob?.id)}`,
        }),
        expect.objectContaining({ name: "build", actionsJobId: buildJob?.id, state: "pending", detail: "queued" }),
        expect.objectContaining({
          name: "lint",
          app: { id: 777, slug: "lint-bot" },
          state: "failed",
          output: "2 problems\n\nLint failed",
        }),
      ]),
    );
    expect(checks.find((check) => check?.name === "lint")).not.toHaveProperty("actionsJobId");

    const combined = await octokit.request("GET /repos/{owner}/{repo}/commits/{ref}/status", base);
    expect(combined.data.statuses.map(statusToCheck)).toEqual<CiCheck[]>([
      {
        kind: "status",
        id: "ci/legacy",
        name: "ci/legacy",
        state: "failed",
        detail: "error",
        url: "https://legacy.example.com/9",
        output: "The build machine went away",
      },
    ]);
  });
});
