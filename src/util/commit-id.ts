/** A git object id as git prints it: SHA-1 or SHA-256, lower-case hex. */
const COMMIT_ID = /^(?:[0-9a-f]{40}|[0-9a-f]{64})$/;

/** Whether `text` is exactly one commit id (nothing around it). */
export function isCommitId(text: string): boolean {
  return COMMIT_ID.test(text);
}
