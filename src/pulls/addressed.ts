import { parseCommand } from "../triggers/command.js";

/**
 * Whether review text calls on Harness: it starts with the command (`/harness`, alone or with a
 * request) or mentions the app's bot (`@harness`, `@harness[bot]`). Other commands (`cancel`,
 * `approve`) are issue-comment business, not review feedback.
 */
export function addressesHarness(body: string, command: string, botLogin: string | undefined): boolean {
  const parsed = parseCommand(body, command);
  if (parsed?.kind === "run" || parsed?.kind === "empty") return true;
  if (botLogin === undefined) return false;
  const slug = botLogin.replace(/\[bot\]$/i, "");
  const escaped = slug.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
  return new RegExp(`(^|[^A-Za-z0-9_/-])@${escaped}(\\[bot\\])?(?![A-Za-z0-9_-])`, "i").test(body);
}
