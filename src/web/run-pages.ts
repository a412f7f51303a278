import type { IncomingMessage, ServerResponse } from "node:http";
import type { AuditLog, AuditRecord } from "../audit/audit-log.js";
import type { PullRequestLedger, TrackedPull } from "../pulls/ledger/port.js";
import { isFinal, type RunJournal, type RunSummary } from "../runs/journal/port.js";
import { describeError } from "../util/errors.js";
import { silentLog, type Log } from "../util/log.js";
import { createRedactor, type Redactor } from "../util/redact.js";
import { serveAsset } from "./assets.js";
import type { Viewer, WebAuth } from "./auth/types.js";
import { html, layout, SECURITY_HEADERS, sendHtml } from "./html.js";
import { PULL_FILTERS, runListPage, type PullFilter } from "./run-list-page.js";
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
  /**
   * The pull-request ledger: when given, a run's page shows what became of the pull request it
   * opened, and `/runs?outcome=merged|closed|open` lists runs by it.
   */
  pulls?: PullRequestLedger;
}

/** Runs examined for one list page at most, however few of them the viewer may see. */
const LIST_SCAN_LIMIT = 1_000;
/** Runs (or pull requests) read from a store at a time while filling a list page. */
const LIST_BATCH = 100;
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
    const filter = url.searchParams.get("outcome") ?? "";
    const before = url.searchParams.get("before") ?? undefined;
    const common = { now: now(), redactor, viewer: viewer.login, filters: options.pulls !== undefined };
    if (filter === "") {
      const page = await visiblePage<RunSummary, string>({
        batch: (cursor) => journal.list({ limit: LIST_BATCH, ...(cursor ? { before: cursor } : {}) }),
        runOf: (run) => Promise.resolve(run),
        cursorOf: (run) => run.runId,
        start: before,
        canRead,
        pageSize,
      });
      sendHtml(res, 200, runListPage(page.runs, { ...common, ...(page.next ? { olderThan: page.next } : {}) }));
      return;
    }
    const pulls = options.pulls;
    if (!pulls || !isPullFilter(filter)) {
      badFilter(res, filter, pulls !== undefined);
      return;
    }
    const page = await visiblePage<TrackedPull, number>({
      batch: (cursor) =>
        pulls.list({ limit: LIST_BATCH, outcome: filter, ...(cursor !== undefined ? { before: cursor } : {}) }),
      // A pull request Harness follows but did not open has no run to list.
      runOf: (pull) => (pull.openedByRunId ? journal.get(pull.openedByRunId) : Promise.resolve(undefined)),
      cursorOf: (pull) => pull.seq,
      start: cursorOf(before),
      canRead,
      pageSize,
    });
    sendHtml(
      res,
      200,
      runListPage(page.runs, {
        ...common,
        outcome: filter,
        ...(page.next !== undefined ? { olderThan: String(page.next) } : {}),
      }),
    );
  };

  /** The pull request this run opened; a ledger that cannot be read costs the page the outcome line only. */
  const pullOf = async (summary: RunSummary): Promise<TrackedPull | "unavailable" | undefined> => {
    if (!options.pulls || !summary.prUrl) return undefined;
    try {
      return await options.pulls.openedBy(summary.runId);
    } catch (error) {
      log.warn(
        { err: redactor(describeError(error)), runId: summary.runId },
        "the pull-request ledger could not be read for the run page",
      );
      return "unavailable";
    }
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
    const pull = await pullOf(summary);
    sendHtml(
      res,
      200,
      runPage({ ...summary, lastSeq: last?.seq ?? 0 }, foldRun(entries), {
        now: now(),
        redactor,
        viewer: viewer.login,
        ...(audit ? { audit } : {}),
        ...(pull ? { pull } : {}),
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

/**
 * Fills one list page with runs the viewer may read, reading `batch`es from a store until the
 * page is full, the store is exhausted, or `LIST_SCAN_LIMIT` items were examined. `next` is
 * where the following page starts, absent when there is nothing older.
 */
async function visiblePage<Item, Cursor>(scan: {
  batch: (cursor: Cursor | undefined) => Promise<Item[]>;
  runOf: (item: Item) => Promise<RunSummary | undefined>;
  cursorOf: (item: Item) => Cursor;
  start: Cursor | undefined;
  canRead: (run: RunSummary) => Promise<boolean>;
  pageSize: number;
}): Promise<{ runs: RunSummary[]; next?: Cursor }> {
  const runs: RunSummary[] = [];
  let cursor = scan.start;
  let scanned = 0;
  while (runs.length < scan.pageSize && scanned < LIST_SCAN_LIMIT) {
    const batch = await scan.batch(cursor);
    const found = await Promise.all(batch.map(scan.runOf));
    const allowed = await Promise.all(found.map((run) => (run ? scan.canRead(run) : Promise.resolve(false))));
    for (const [index, item] of batch.entries()) {
      cursor = scan.cursorOf(item);
      scanned += 1;
      const run = found[index];
      if (run && allowed[index]) runs.push(run);
      if (runs.length >= scan.pageSize) break;
    }
    if (batch.length < LIST_BATCH && runs.length < scan.pageSize) return { runs };
  }
  return cursor !== undefined ? { runs, next: cursor } : { runs };
}

function isPullFilter(value: string): value is PullFilter {
  return (PULL_FILTERS as readonly string[]).includes(value);
}

function badFilter(res: ServerResponse, value: string, ledger: boolean): void {
  const shown = value.length > 60 ? `${value.slice(0, 59)}…` : value;
  sendHtml(
    res,
    400,
    layout({
      title: "Unknown filter",
      body: ledger
        ? html`<h1>Unknown filter</h1>
        <p>Runs can be listed by what became of their pull request: merged, closed, or open.
        “${shown}” is none of these.</p>
        <p><a href="/runs?outcome=merged">Merged</a> · <a href="/runs?outcome=closed">Closed</a> ·
        <a href="/runs?outcome=open">Open</a> · <a href="/runs">All runs</a></p>`
        : html`<h1>Unknown filter</h1>
        <p>This server does not keep track of pull requests, so runs cannot be listed by what became of them.</p>
        <p><a href="/runs">All runs</a></p>`,
    }),
  );
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
