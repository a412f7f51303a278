import { describe, expect, test } from "vitest";
import {
  MAX_PR_TITLE,
  neutraliseClosingKeywords,
  pullRequestBody,
  pullRequestTitle,
} from "../../src/github/pull-request-text.js";

describe("pull request text", () => {
  test("title is [harness] and the intent's first line, at most 256 characters", () => {
    expect(pullRequestTitle("Fix the login bug\nmore detail")).toBe("[harness] Fix the login bug");
    const long = pullRequestTitle("x".repeat(1000));
    expect(long.length).toBe(MAX_PR_TITLE);
    expect(long.endsWith("…")).toBe(true);
  });

  test("body quotes the intent, closes the issue, and ends with the run footer", () => {
    const body = pullRequestBody({
      intent: "Fix it",
      blueprint: "default",
      branch: "harness/9",
      runId: "r1",
      issueNumber: 9,
    });
    expect(body).toBe("> Fix it\n\nFixes #9\n\nBlueprint: default\nBranch: harness/9\nRun: r1");
  });

  test("only the harness's own Fixes line can close an issue", () => {
    expect(neutraliseClosingKeywords("this fixes #12 and closes acme/other#3")).toBe(
      "this fixes `#12` and closes `acme/other#3`",
    );
    const body = pullRequestBody({
      intent: "resolves #1",
      blueprint: "d",
      branch: "b",
      runId: "r",
      summary: "Fixed: #2",
    });
    expect(body).not.toMatch(/resolves #1|Fixed: #2/);
  });
});
