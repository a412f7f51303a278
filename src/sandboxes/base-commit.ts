import { isCommitId } from "../util/commit-id.js";

/**
 * A named sandbox's base: the commit its branch started from, which `diff` and `apply` measure
 * against. Kept in the sandbox's scratch folder, which the harness writes and the sandbox's
 * commands can only read.
 */
export const BASE_FILE = "sandbox-base";

/** The commit id read back, or undefined when the text is not one. */
export function parseBase(text: string): string | undefined {
  const id = text.trim();
  return isCommitId(id) ? id : undefined;
}
