import type { IncomingMessage, ServerResponse } from "node:http";
import { describeError } from "../util/errors.js";
import { isAdmin } from "./auth/settings.js";
import type { WebAuth } from "./auth/types.js";
import { html, layout, sendHtml, SECURITY_HEADERS } from "./html.js";

/** One check's answer as the page shows it (the shape `harness doctor --json` prints). */
export interface CheckReport {
  name: string;
  status: "ok" | "fail" | "skip";
  detail: string;
  fix?: string;
  durationMs: number;
}

export interface DoctorPageOptions {
  auth: WebAuth;
  /** HARNESS_ADMINS, as `adminsFrom` reads it. */
  admins: readonly string[];
  /** `harness doctor`'s checks, answered redacted. */
  check: () => Promise<CheckReport[]>;
  now?: () => Date;
  /**
   * How long one answer is shown before a look runs the checks again: each run calls GitHub and
   * the sandbox, so reloading the page must not turn into a stream of those calls.
   */
  freshForMs?: number;
  log?: { error(object: object, message: string): void };
}

const MARK = { ok: "✓", fail: "✗", skip: "–" } as const;

/**
 * `/doctor`: the checks `harness doctor` prints, for the operators listed in HARNESS_ADMINS. A
 * signed-out viewer is sent to sign in; a signed-in one who is not an admin gets the page any
 * unknown path gets, so the page does not tell strangers it exists. Concurrent looks share one
 * run of the checks, and an answer is reused for `freshForMs`.
 */
export function createDoctorPage(
  options: DoctorPageOptions,
): (req: IncomingMessage, res: ServerResponse) => Promise<boolean> {
  const now = options.now ?? (() => new Date());
  const freshForMs = options.freshForMs ?? 30_000;
  let latest: { at: Date; reports: Promise<CheckReport[]> } | undefined;

  const reports = (): { at: Date; reports: Promise<CheckReport[]> } => {
    const at = now();
    if (latest && at.getTime() - latest.at.getTime() < freshForMs) return latest;
    const running = { at, reports: options.check() };
    latest = running;
    // A run that failed is not kept: the next look tries again.
    running.reports.catch(() => {
      if (latest === running) latest = undefined;
    });
    return running;
  };

  return async (req, res) => {
    const path = new URL(req.url ?? "/", "http://localhost").pathname;
    if (path !== "/doctor" && path !== "/doctor/") return false;
    if (req.method !== "GET" && req.method !== "HEAD") {
      res
        .writeHead(405, { ...SECURITY_HEADERS, allow: "GET, HEAD", "content-type": "text/plain; charset=utf-8" })
        .end("Method not allowed\n");
      return true;
    }
    const viewer = await options.auth.viewer(req);
    if (!viewer) {
      res.writeHead(302, { ...SECURITY_HEADERS, location: options.auth.loginUrl("/doctor") }).end();
      return true;
    }
    if (!isAdmin(options.admins, viewer)) {
      res.writeHead(404, { ...SECURITY_HEADERS, "content-type": "text/plain; charset=utf-8" }).end("Not found\n");
      return true;
    }
    const answer = reports();
    try {
      sendHtml(res, 200, doctorPage(await answer.reports, answer.at, viewer.login));
    } catch (error) {
      options.log?.error({ err: describeError(error) }, "the doctor page's checks failed");
      sendHtml(
        res,
        500,
        layout({
          title: "Set-up checks",
          body: html`<h1>Set-up checks</h1>
            <p>The checks could not be run just now. Run <code>harness doctor</code> on the server,
            or look for this error in its log.</p>`,
        }),
      );
    }
    return true;
  };
}

function doctorPage(reports: readonly CheckReport[], at: Date, viewer: string) {
  const failures = reports.filter((report) => report.status === "fail").length;
  const rows = reports.map(
    (report) => html`<tr class="check-${report.status}">
<td>${MARK[report.status]}</td><th scope="row">${report.name}</th>
<td>${report.detail}${report.fix && report.status !== "ok" ? html`<br><strong>Fix:</strong> ${report.fix}` : ""}</td>
<td class="muted">${String(report.durationMs)} ms</td>
</tr>`,
  );
  return layout({
    title: "Set-up checks",
    body: html`<p class="crumbs"><a href="/runs">All runs</a> · signed in as ${viewer}</p>
<h1>Set-up checks</h1>
<p>${
      failures === 0
        ? `All ${String(reports.length)} checks passed or do not apply.`
        : `${String(failures)} of ${String(reports.length)} checks failed.`
    } Checked ${at.toISOString().slice(0, 19).replace("T", " ")} UTC; the same checks as
<code>harness doctor</code>.</p>
<table class="checks">
<thead><tr><th></th><th scope="col">Check</th><th scope="col">Found</th><th scope="col">Took</th></tr></thead>
<tbody>
${rows}
</tbody>
</table>`,
  });
}
