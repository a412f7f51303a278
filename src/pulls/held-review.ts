import type { PullReview, ReviewComment } from "../github/reviews.js";
import { where } from "./review-feedback.js";

/** Which review (or stand-alone line comment) is held, and whose words count in it. */
export interface HeldReviewTarget {
  /** The review's id; a line comment GitHub filed under no review is `-commentId`. */
  reviewId: number;
  reviewer: string;
  /** The text calls on Harness: its command, or a mention of its bot. */
  addressed(body: string): boolean;
}

const STATES: Readonly<Record<string, string>> = {
  CHANGES_REQUESTED: "changes requested",
  COMMENTED: "commented",
  APPROVED: "approved",
};

/**
 * The words of one review by one reviewer, as a follow-up would address them: the review's own
 * text when it asks for something (changes requested, or it calls on Harness) with every line
 * comment filed under it, else only its line comments that call on Harness. This exact text is
 * what a maintainer approves and what the run then reads, so it is assembled once, here.
 */
export function heldReviewText(
  reviews: readonly PullReview[],
  comments: readonly ReviewComment[],
  target: HeldReviewTarget,
): string {
  const byReviewer = (author: { login: string } | null): boolean =>
    author !== null && author.login.toLowerCase() === target.reviewer.toLowerCase();
  const review = reviews.find((candidate) => candidate.id === target.reviewId && byReviewer(candidate.author));
  const asks = review !== undefined && (review.state === "CHANGES_REQUESTED" || target.addressed(review.body));
  const mine = comments
    .filter((comment) => (target.reviewId < 0 ? comment.id === -target.reviewId : comment.reviewId === target.reviewId))
    .filter((comment) => byReviewer(comment.author) && (asks || target.addressed(comment.body)));
  const parts: string[] = [];
  if (review && asks && review.body.trim() !== "")
    parts.push(`Review (${STATES[review.state] ?? review.state.toLowerCase()}):\n${review.body.trim()}`);
  for (const comment of mine) parts.push(`Comment on ${where(comment)}:\n${comment.body.trim()}`);
  return parts.join("\n\n");
}
