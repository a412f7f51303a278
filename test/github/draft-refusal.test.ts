import { RequestError } from "@octokit/request-error";
import { describe, expect, test } from "vitest";
import { isDraftRefusal } from "../../src/github/draft-refusal.js";

const REASON = "Draft pull requests are not supported in this repository.";
const DOCS = "https://docs.github.com/rest/pulls/pulls#create-a-pull-request";

/** An error as Octokit throws it for a GitHub answer with this status and body. */
function answered(status: number, data: Record<string, unknown>): RequestError {
  return new RequestError(String(data["message"]), status, {
    request: { method: "POST", url: "https://api.github.com/repos/acme/widgets/pulls", headers: {} },
    response: { status, url: "https://api.github.com/repos/acme/widgets/pulls", headers: {}, data },
  });
}

const validationFailed = (...errors: Record<string, unknown>[]) =>
  answered(422, { message: "Validation Failed", errors, documentation_url: DOCS, status: "422" });

describe("a refused draft is recognised in both shapes GitHub answers with", () => {
  test("the reason as the top-level message", () => {
    expect(isDraftRefusal(answered(422, { message: REASON, documentation_url: DOCS, status: "422" }))).toBe(true);
  });

  test("Validation Failed with the reason as a custom error's message", () => {
    expect(isDraftRefusal(validationFailed({ resource: "PullRequest", code: "custom", message: REASON }))).toBe(true);
  });

  test("the reason among other errors, in any letter case", () => {
    const error = validationFailed(
      { resource: "PullRequest", code: "invalid", field: "maintainer_can_modify" },
      { resource: "PullRequest", code: "custom", message: REASON.toUpperCase() },
    );
    expect(isDraftRefusal(error)).toBe(true);
  });

  test("an error without GitHub's body, whose message is the reason", () => {
    expect(isDraftRefusal(Object.assign(new Error(REASON), { status: 422 }))).toBe(true);
  });
});

describe("other refusals are not draft refusals", () => {
  test.each([
    [
      "a pull request that already exists",
      validationFailed({
        resource: "PullRequest",
        code: "custom",
        message: "A pull request already exists for acme:x.",
      }),
    ],
    [
      "no commits between the branches",
      validationFailed({ resource: "PullRequest", code: "custom", message: "No commits between main and x" }),
    ],
    ["a missing title", validationFailed({ resource: "PullRequest", code: "missing_field", field: "title" })],
    ["an invalid head", validationFailed({ resource: "PullRequest", code: "invalid", field: "head" })],
    ["Validation Failed with no errors", answered(422, { message: "Validation Failed" })],
    ["a 422 that names drafts otherwise", answered(422, { message: "draft is not a boolean" })],
    ["the reason with another status", answered(403, { message: REASON })],
    ["the reason in errors with another status", answered(400, { message: "Bad", errors: [{ message: REASON }] })],
  ])("%s", (_name, error) => {
    expect(isDraftRefusal(error)).toBe(false);
  });

  test("things that are not HTTP errors", () => {
    expect(isDraftRefusal(new Error(REASON))).toBe(false);
    expect(isDraftRefusal(REASON)).toBe(false);
    expect(isDraftRefusal(null)).toBe(false);
    expect(isDraftRefusal({ status: 422, response: { data: { errors: [null, 7, "x"] } } })).toBe(false);
  });
});
