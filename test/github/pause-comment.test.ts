import { describe, expect, test } from "vitest";
import { renderPauseEnded } from "../../src/github/pause-comment.js";
import type { PausedRun } from "../../src/runs/paused/port.js";
import { markdown } from "../helpers/rendered-markdown.js";

function pausedRun(overrides: Partial<PausedRun> = {}): PausedRun {
  return {
    runId: "run-7",
    issueKey: "1#7",
    state: "ending",
    request: {
      runId: "run-7",
      key: "1:comment:5",
      deliveryId: "d-1",
      installationId: 2,
      repo: {
        id: 1,
        owner: "acme",
        name: "widgets",
        htmlUrl: "https://github.com/acme/widgets",
        defaultBranch: "main",
      },
      issue: { number: 7, title: "t", body: "", htmlUrl: "https://github.com/acme/widgets/issues/7" },
      trigger: { kind: "comment", commentId: 5 },
      requester: { login: "reporter", id: 3 },
      intent: "make it work",
      intentTrusted: true,
      requestedAt: "2026-11-29T03:00:00.000Z",
    },
    nodeId: "implement",
    spentUsd: 4.5,
    limitUsd: 4,
    baseSha: "0123456789abcdef0123456789abcdef01234567",
    pausedAt: "2026-11-29T03:10:00.000Z",
    expiresAt: "2026-12-06T03:10:00.000Z",
    ...overrides,
  };
}

describe("the status comment of a paused run that was ended", () => {
  test("keeps the change in collapsed blocks, with the spend and the reason", () => {
    const body = renderPauseEnded(
      pausedRun({ patch: "--- a/x\n+++ b/x\n@@ -0,0 +1 @@\n+hi\n", diffstat: " x | 1 +" }),
      "Expired after 7 days without an answer",
    );
    expect(body).toMatch(/^<!-- harness:run=run-7 -->\n### ⏹ Harness run ended while paused/);
    expect(body).toContain("Expired after 7 days without an answer. It had spent $4.50 of its $4.00 allowance.");
    expect(body).toContain("as a change on `0123456789ab`");
    const html = markdown.render(body);
    expect(html).toMatch(/<details><summary>The change so far \(diffstat\)<\/summary>\s*<pre><code> x \| 1 \+/);
    expect(html).toMatch(
      /<pre><code class="language-diff">--- a\/x\n\+\+\+ b\/x\n@@ -0,0 \+1 @@\n\+hi\n<\/code><\/pre>/,
    );
  });

  test("the agent's patch cannot close its fence, and the request mentions nobody and loads nothing", () => {
    const patch = "+```\n+@acme/everyone <img src=https://x.example/beacon>\n+````\n";
    const body = renderPauseEnded(
      pausedRun({
        patch,
        diffstat: " a | 3 +++",
        request: { ...pausedRun().request, intent: "ping @acme/all ![x](https://x.example/b.png)" },
      }),
      "Ended by @maintainer",
    );
    const html = markdown.render(body);
    // The whole patch stays inside one code block: nothing of it becomes markup.
    expect(html).not.toMatch(/<img/);
    expect(html).toContain("+@acme/everyone &lt;img src=https://x.example/beacon&gt;");
    expect(body).toContain("ping @\u200Bacme/all [image: x](https://x.example/b.png)");
    expect(body).toContain("Ended by @\u200Bmaintainer.");
  });

  test("a patch too long to show is said so; a dropped one leaves the diffstat; no work says there is none", () => {
    const long = renderPauseEnded(pausedRun({ patch: "+x\n".repeat(10_000), diffstat: " x | 10000 +" }), "Ended");
    expect(long).toContain("The patch is 30,000 characters, too long to show here (at most 12,000).");
    expect(long).not.toContain("+x\n+x");
    expect(renderPauseEnded(pausedRun({ diffstat: " big | 99999 +" }), "Ended")).toContain(
      "The patch was too large to keep; the diffstat above is what remains.",
    );
    expect(renderPauseEnded(pausedRun(), "Ended")).toContain(
      "It had not changed any files yet: there is no work to keep.",
    );
  });
});
