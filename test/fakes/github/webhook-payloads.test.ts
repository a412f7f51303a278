import { describe, expect, test } from "vitest";
import { issueCommentCreated as fixtureComment, issuesLabeled as fixtureLabeled } from "../../fixtures/payloads.js";
import { assertValidWebhookPayload, webhookPayloadProblem } from "./webhook-payloads.js";
import { issueCommentCreated, ping, type PayloadRepo } from "./webhooks.js";

const repo: PayloadRepo = {
  id: 42,
  owner: "acme",
  name: "widgets",
  private: true,
  defaultBranch: "main",
  serverUrl: "http://127.0.0.1:9",
};

function comment(): Record<string, unknown> {
  return issueCommentCreated({
    repo,
    issue: { number: 1, title: "t" },
    comment: { id: 5, body: "/harness go", user: { login: "maintainer" } },
    installationId: 7,
  });
}

describe("webhook payloads are held to GitHub's webhook description", () => {
  test("the builders' payloads and the fixtures pass", () => {
    expect(webhookPayloadProblem("issue_comment", comment())).toBeUndefined();
    expect(webhookPayloadProblem("ping", ping(repo))).toBeUndefined();
    expect(webhookPayloadProblem("issue_comment", fixtureComment("/harness go", { pullRequest: true }))).toBe(
      undefined,
    );
    expect(webhookPayloadProblem("issues", fixtureLabeled("harness"))).toBeUndefined();
  });

  test("a payload missing a required field fails, naming the event, action and path", () => {
    const payload = comment();
    delete ((payload["comment"] as Record<string, unknown>)["user"] as Record<string, unknown>)["login"];
    expect(() => {
      assertValidWebhookPayload("issue_comment", payload);
    }).toThrow(/issue_comment\.created: \/comment\/user must have required property 'login'/);
  });

  test("a null comment author is refused by @octokit/webhooks-schemas (GitHub's OpenAPI description allows it)", () => {
    const payload = comment();
    (payload["comment"] as Record<string, unknown>)["user"] = null;
    expect(webhookPayloadProblem("issue_comment", payload)).toContain("/comment/user must be object");
  });

  test("an event or action GitHub does not send fails loudly", () => {
    expect(() => webhookPayloadProblem("issue_comment", { ...comment(), action: "exploded" })).toThrow(
      "issue_comment.exploded: GitHub's webhook description has no such event and action",
    );
    expect(() => webhookPayloadProblem("flux_capacitor", {})).toThrow(/flux_capacitor: GitHub's webhook description/);
  });
});
