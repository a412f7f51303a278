import { redact } from "../util/redact.js";
import { fence, fitComment, MAX_INLINE_PATCH_CHARS, oneLine } from "./comment-text.js";
import { neutralText } from "./neutral-text.js";
import { statusMarker } from "./status-comment.js";

/**
 * What the comment shows of a paused run: the fields of the paused-run store's `PausedRun` it
 * reads (that type lives above this layer; a `PausedRun` is one of these).
 */
export interface PausedRunSummary {
  runId: string;
  request: { intent: string; requester: { login: string } };
  spentUsd: number;
  limitUsd: number;
  baseSha: string;
  patch?: string;
  diffstat?: string;
}

const MAX_DIFFSTAT_CHARS = 4_000;

/**
 * The status comment of a paused run that was ended without going on (`why`: stopped by someone,
 * expired, its pull request closed): what it had spent and the work it had done so far, which is
 * kept here because no pull request will carry it. `why` is one sentence (`Ended by @alice`).
 * The agent's patch and diffstat are shown in fences no content can close, the request and `why`
 * as neutral text, the whole redacted.
 */
export function renderPauseEnded(run: PausedRunSummary, why: string): string {
  const lines: string[] = [statusMarker(run.runId), "### ⏹ Harness run ended while paused", ""];
  lines.push(
    `> ${neutralText(oneLine(run.request.intent, 300))}`,
    `> — requested by @${run.request.requester.login}`,
    "",
  );
  const reason = neutralText(oneLine(why, 300).replace(/\.$/, ""));
  lines.push(`${reason}. It had spent ${usd(run.spentUsd)} of its ${usd(run.limitUsd)} allowance.`, "");
  lines.push(...keptWork(run), `<sub>Run \`${run.runId}\`</sub>`);
  const body = redact(lines.join("\n"));
  return fitComment(body);
}

/** The work so far in collapsed blocks, or why there is none to show. */
function keptWork(run: PausedRunSummary): string[] {
  const base = `\`${run.baseSha.replace(/[^0-9a-f]/gi, "").slice(0, 12)}\``;
  if (run.patch === undefined && run.diffstat === undefined)
    return ["It had not changed any files yet: there is no work to keep.", ""];
  const lines = [`Its work so far is kept below, as a change on ${base}.`, ""];
  if (run.diffstat !== undefined)
    lines.push(
      "<details><summary>The change so far (diffstat)</summary>",
      "",
      fence(run.diffstat.slice(0, MAX_DIFFSTAT_CHARS)),
      "",
      "</details>",
      "",
    );
  if (run.patch === undefined) lines.push("The patch was too large to keep; the diffstat above is what remains.", "");
  else if (run.patch.length > MAX_INLINE_PATCH_CHARS)
    lines.push(
      `The patch is ${run.patch.length.toLocaleString("en")} characters, ` +
        `too long to show here (at most ${MAX_INLINE_PATCH_CHARS.toLocaleString("en")}).`,
      "",
    );
  else
    lines.push(
      `<details><summary>Patch (apply on ${base} with <code>git apply</code>)</summary>`,
      "",
      fence(run.patch, "diff"),
      "",
      "</details>",
      "",
    );
  return lines;
}

function usd(amount: number): string {
  return `$${amount.toFixed(2)}`;
}
