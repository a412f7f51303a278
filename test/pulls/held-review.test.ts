import { describe, expect, test } from "vitest";
import type { PullReview, ReviewComment } from "../../src/github/reviews.js";
import { heldReviewText } from "../../src/pulls/held-review.js";

const reader = { login: "reader", type: "User" };
const other = { login: "other", type: "User" };

function review(id: number, state: string, body: string, author = reader): PullReview {
  return { id, state, body, author, url: `https://github.com/acme/widgets/pull/2#pullrequestreview-${String(id)}` };
}

function comment(id: number, reviewId: number | null, body: string, author = reader): ReviewComment {
  return {
    id,
    reviewId,
    author,
    body,
    path: "src/app.ts",
    line: id,
    startLine: null,
    originalLine: id,
    diffHunk: "@@ -1 +1 @@",
    url: `https://github.com/acme/widgets/pull/2#discussion_r${String(id)}`,
    createdAt: "2026-11-28T10:00:00Z",
  };
}

const addressed = (body: string): boolean => body.includes("@harness");

describe("the text a held review is approved and run by", () => {
  test("a review asking for changes: its body and every line comment under it, by its author only", () => {
    const text = heldReviewText(
      [review(10, "CHANGES_REQUESTED", "Rename the flag."), review(11, "CHANGES_REQUESTED", "Not this one.")],
      [
        comment(1, 10, "Here."),
        comment(2, 10, "And here, by someone else.", other),
        comment(3, 11, "Another review's."),
        comment(4, 10, "Also here."),
      ],
      { reviewId: 10, reviewer: "READER", addressed },
    );
    expect(text).toBe(
      "Review (changes requested):\nRename the flag.\n\n" +
        "Comment on `src/app.ts`, line 1:\nHere.\n\nComment on `src/app.ts`, line 4:\nAlso here.",
    );
  });

  test("a plain comment review: only its line comments that call on Harness", () => {
    const text = heldReviewText(
      [review(20, "COMMENTED", "Looks fine overall.")],
      [comment(5, 20, "A note for people."), comment(6, 20, "@harness drop this line")],
      { reviewId: 20, reviewer: "reader", addressed },
    );
    expect(text).toBe("Comment on `src/app.ts`, line 6:\n@harness drop this line");
  });

  test("a line comment filed under no review is found by its own id", () => {
    const text = heldReviewText([], [comment(7, null, "@harness rename it"), comment(8, null, "@harness not me")], {
      reviewId: -7,
      reviewer: "reader",
      addressed,
    });
    expect(text).toBe("Comment on `src/app.ts`, line 7:\n@harness rename it");
  });

  test("a review that is not the reviewer's, or has no words that ask, holds nothing", () => {
    expect(
      heldReviewText([review(30, "CHANGES_REQUESTED", "x", other)], [], {
        reviewId: 30,
        reviewer: "reader",
        addressed,
      }),
    ).toBe("");
    expect(heldReviewText([review(31, "APPROVED", "LGTM")], [], { reviewId: 31, reviewer: "reader", addressed })).toBe(
      "",
    );
  });
});
