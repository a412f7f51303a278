import type { IncomingMessage, ServerResponse } from "node:http";
import type { AuditLog, AuditRecord } from "../audit/audit-log.js";
import { isFinal, type RunJournal, type RunSummary } from "../runs/journal/port.js";
import { describeError } from "../util/errors.js";
import { silentLog, type Log } from "../util/log.js";
import { createRedactor, type Redactor } from "../util/redact.js";
import { serveAsset } from "./assets.js";
import type { Viewer, WebAuth } from "./auth/types.js";
import { html, layout, SECURITY_HEADERS, sendHtml } from "./html.js";
import { runListPage } from "./run-list-page.js";
import { runPage } from "./run-page.js";
import { MessageCache, streamRunEvents } from "./run-events-stream.js";
import { foldRun } from "./run-view.js";

export interface RunPagesOptions {
  journal: RunJournal;
  auth: WebAuth;
  now?: () => Date;
  /**
   * Applied once more to everything shown, on top of the redaction events had when recorded
   * (defence in depth). Build it from the process's secrets: `createRedactor(secretsFromEnv(env))`.
   * Default: token shapes only.
   */
  redactor?: Redactor;
  log?: Log;
  /** Runs on one page of the list. */
  pageSize?: number;
  /** Keep-alive comments on the event stream, in ms. */
  heartbeatMs?: number;
  /** The audit trail: when given, a run's page shows its entries in an "Audit" section. */
  audit?: AuditLog;
}

/** Runs examined for one list page at most, however few of them the viewer may see. */
const LIST_SCAN_LIMIT = 1_000;
const RUN_ID = "[A-Za-z0-9_-]{1,100}";
const RUN_PAGE = new RegExp(`^/runs/(${RUN_ID})/?$`);
const RUN_EVENTS = new RegExp(`^/runs/(${RUN_ID})/events$`);

/**
 * The run pages: `/runs` (recent runs the viewer can see), `/runs/<id>` (one run), and
 * `/runs/<id>/events` (its live event stream), plus their script and stylesheet.
 *
 * Access: a signed-out viewer is sent to sign in and brought back. A run is shown only to a
 * viewer GitHub says can read its repository; to anyone else it is answered exactly like a run
 * that does not exist (404, same page), so run ids cannot be used to learn which private
 * repositories use Harness.
 *
 * Returns a handler that answers and resolves true for these paths, and false for any other.
 */
export function createRunPages(
  options: RunPagesOptions,
): (req: IncomingMessage, res: ServerResponse) => Promise<boolean> {
  const { journal, auth } = options;
  const now = options.now ?? (() => new Date());
  const redactor = options.redactor ?? createRedactor();
  const log = options.log ?? silentLog;
  const pageSize = options.pageSize ?? 50;
  const cache = new MessageCache();

  const visibleRun = async (viewer: Viewer, runId: string): Promise<RunSummary | undefined> => {
    const summary = await journal.get(runId);
    if (!summary) return undefined;
    return (await auth.canRead(viewer, summary.repo)) ? summary : undefined;
  };

  const listPage = async (res: ServerResponse, viewer: Viewer, url: URL): Promise<void> => {
    const readable = new Map<string, Promise<boolean>>();
    const canRead = (run: RunSummary): Promise<boolean> => {
      const key = `${run.repo.owner}/${run.repo.name}`.toLowerCase();
      let answer = readable.get(key);
      if (!answer) {
        answer = auth.canRead(viewer, run.repo);
        readable.set(key, answer);
      }
      return answer;
    };
    const shown: RunSummary[] = [];
    let cursor = url.searchParams.get("before") ?? undefined;
    let scanned = 0;
    let more = true;
    while (shown.length < pageSize && scanned < LIST_SCAN_LIMIT) {
      const batch = await journal.list({ limit: 100, ...(cursor ? { before: cursor } : {}) });
      const allowed = await Promise.all(batch.map(canRead));
      for (const [index, run] of batch.entries()) {
        cursor = run.runId;
        scanned += 1;
        if (allowed[index]) shown.push(run);
        if (shown.length >= pageSize) break;
      }
      if (batch.length < 100 && shown.length < pageSize) {
        more = false;
        break;
      }
    }
    sendHtml(
      res,
      200,
      runListPage(shown, {
        now: now(),
        redactor,
        viewer: viewer.login,
        ...(more && cursor ? { olderThan: cursor } : {}),
      }),
    );
  };

  /** The run's audit entries; a trail that cannot be read costs the page its Audit section only. */
  const auditOf = async (runId: string): Promise<readonly AuditRecord[] | "unavailable" | undefined> => {
    if (!options.audit) return undefined;
    try {
      return await options.audit.forRun(runId);
    } catch (error) {
      log.warn({ err: redactor(describeError(error)), runId }, "the audit trail could not be read for the run page");
      return "unavailable";
    }
  };

  const detailPage = async (res: ServerResponse, viewer: Viewer, runId: string): Promise<void> => {
    let summary = await visibleRun(viewer, runId);
    if (!summary) {
      notFound(res);
      return;
    }
    const [entries, audit] = await Promise.all([journal.events(runId, 0), auditOf(runId)]);
    const last = entries.at(-1);
    // The run may have moved on between the two reads: the page must agree with what it shows.
    if (last && (last.seq > summary.lastSeq || isFinal(last.event))) summary = (await journal.get(runId)) ?? summary;
    sendHtml(
      res,
      200,
      runPage({ ...summary, lastSeq: last?.seq ?? 0 }, foldRun(entries), {
        now: now(),
        redactor,
        viewer: viewer.login,
        ...(audit ? { audit } : {}),
      }),
    );
  };

  const eventStream = async (
    req: IncomingMessage,
    res: ServerResponse,
    viewer: Viewer | undefined,
    runId: string,
    url: URL,
  ): Promise<void> => {
    if (!viewer) {
      plain(res, 401, "Sign in again: your session has ended.\n");
      return;
    }
    if (!(await visibleRun(viewer, runId))) {
      plain(res, 404, "No such run.\n");
      return;
    }
    if (req.method === "HEAD") {
      res.writeHead(200, { ...SECURITY_HEADERS, "content-type": "text/event-stream; charset=utf-8" }).end();
      return;
    }
    const after = cursorOf(req.headers["last-event-id"]) ?? cursorOf(url.searchParams.get("after")) ?? 0;
    await streamRunEvents(res, journal, runId, after, {
      redactor,
      cache,
      ...(options.heartbeatMs !== undefined ? { heartbeatMs: options.heartbeatMs } : {}),
    });
  };

  return async (req, res) => {
    const url = new URL(req.url ?? "/", "http://localhost");
    const path = url.pathname;
    if (path !== "/runs" && !path.startsWith("/runs/")) return false;
    if (req.method !== "GET" && req.method !== "HEAD") {
      res
        .writeHead(405, { ...SECURITY_HEADERS, allow: "GET, HEAD", "content-type": "text/plain; charset=utf-8" })
        .end("Method not allowed\n");
      return true;
    }
    try {
      if (serveAsset(path, res)) return true;
      const events = RUN_EVENTS.exec(path);
      const viewer = await auth.viewer(req);
      if (events?.[1]) {
        await eventStream(req, res, viewer, events[1], url);
        return true;
      }
      if (!viewer) {
        res.writeHead(302, { ...SECURITY_HEADERS, location: auth.loginUrl(req.url ?? "/runs") }).end();
        return true;
      }
      const page = RUN_PAGE.exec(path);
      if (path === "/runs" || path === "/runs/") await listPage(res, viewer, url);
      else if (page?.[1]) await detailPage(res, viewer, page[1]);
      else notFound(res);
    } catch (error) {
      log.error({ err: redactor(describeError(error)), path }, "run page failed");
      if (!res.headersSent) {
        sendHtml(
          res,
          500,
          layout({
            title: "Something went wrong",
            body: html`<h1>Something went wrong</h1>
              <p>This page could not be loaded just now. Try again in a moment;
              if it keeps failing, the operator will find the details in the server's log.</p>`,
          }),
        );
      } else if (!res.writableEnded) {
        res.end();
      }
    }
    return true;
  };
}

function notFound(res: ServerResponse): void {
  sendHtml(
    res,
    404,
    layout({
      title: "Run not found",
      body: html`<h1>Run not found</h1>
        <p>There is no run here that you can see. Either the run does not exist,
        or it belongs to a repository your GitHub account cannot read.</p>
        <p><a href="/runs">See the runs you can see</a></p>`,
    }),
  );
}

function plain(res: ServerResponse, status: number, text: string): void {
  res.writeHead(status, { ...SECURITY_HEADERS, "content-type": "text/plain; charset=utf-8" }).end(text);
}

function cursorOf(value: string | string[] | null | undefined): number | undefined {
  const text = Array.isArray(value) ? value[0] : value;
  if (text === undefined || text === null || !/^\d{1,15}$/.test(text)) return undefined;
  return Number(text);
}
