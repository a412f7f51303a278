/**
 * The entry to the issue triggers, kept so the app and the runtime import one place: each
 * trigger lives in a file of its own (issue-comment, cancel, approval, issue-labeled), what they
 * share in context, authorise and start-run.
 */
export { onIssueComment } from "./issue-comment.js";
export { onIssueLabeled } from "./issue-labeled.js";
export type { HandlerDeps, WebhookContext } from "./context.js";
