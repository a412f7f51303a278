import type { NodeReport } from "../contracts/types.js";
import { neutraliseImages, neutraliseMentions, neutralText } from "./neutral-text.js";

/** GitHub's limit on a pull request title, in characters. */
export const MAX_PR_TITLE = 256;

/** `[harness] <first line of the intent>`, at most 256 characters. */
export function pullRequestTitle(intent: string): string {
  const firstLine = neutraliseMentions(neutraliseImages(intent.trim().split("\n")[0]?.trim() ?? ""));
  const title = `[harness] ${firstLine}`;
  return title.length <= MAX_PR_TITLE ? title : `${title.slice(0, MAX_PR_TITLE - 1)}…`;
}

export interface PullRequestBodyInput {
  intent: string;
  blueprint: string;
  branch: string;
  runId: string;
  /** The issue the run came from; adds `Fixes #N` so merging closes it. */
  issueNumber?: number;
  /** The steps that ran, for a short checklist. */
  nodes?: readonly NodeReport[];
  /** The agent's own summary of its change (already redacted). */
  summary?: string;
  /** Link to the run's page, when the App serves one. */
  runUrl?: string;
  /** Login of the person who asked, mentioned so they are notified. */
  requester?: string;
}

/** The pull request description: what was asked, what ran, and a footer naming the run. */
export function pullRequestBody(input: PullRequestBodyInput): string {
  const parts: string[] = [];
  parts.push(quote(neutraliseClosingKeywords(neutralText(input.intent.trim()))));
  if (input.issueNumber !== undefined) parts.push(`Fixes #${String(input.issueNumber)}`);
  if (input.requester)
    parts.push(
      `Requested by @${input.requester}${input.issueNumber !== undefined ? ` in #${String(input.issueNumber)}` : ""}.`,
    );
  if (input.summary?.trim())
    parts.push(
      `### What the agent did\n\n${neutraliseClosingKeywords(neutralText(input.summary.trim().slice(0, 4000)))}`,
    );
  if (input.nodes && input.nodes.length > 0) {
    const lines = input.nodes.map(
      (node) =>
        `- [${node.status === "succeeded" ? "x" : " "}] ${node.title}` +
        `${node.attempt > 1 ? ` (attempt ${String(node.attempt)})` : ""} — ${node.status}`,
    );
    parts.push(`### Steps\n\n${lines.join("\n")}`);
  }
  const footer = [`Blueprint: ${input.blueprint}`, `Branch: ${input.branch}`, `Run: ${input.runId}`];
  if (input.runUrl) footer.push(`Run page: ${input.runUrl}`);
  parts.push(footer.join("\n"));
  return parts.join("\n\n");
}

function quote(text: string): string {
  return text
    .split("\n")
    .map((line) => `> ${line}`)
    .join("\n");
}

/**
 * GitHub closes any issue named after "fixes"/"closes"/"resolves" in a merged PR's body. Only
 * the harness's own `Fixes #N` may do that, not words quoted from the request or the agent.
 */
export function neutraliseClosingKeywords(text: string): string {
  return text.replace(/\b(close[sd]?|fix(?:e[sd])?|resolve[sd]?)(\s*:?\s+)((?:[\w.-]+\/[\w.-]+)?#\d+)/gi, "$1$2`$3`");
}
