import type { OctokitLike } from "./octokit-client.js";
import type { RepositoryName } from "./repository.js";

/*
 * What CI says about a commit, as GitHub's REST API answers it: check runs (GitHub Actions' jobs
 * among them), commit statuses, an Actions job's log and re-running a run's failed jobs. Rows
 * are handed back as GitHub's JSON; making sense of them is the caller's.
 */

/**
 * Pages read at most, 100 rows each. A commit with more check runs (or status contexts) than
 * that is judged on the first 500 GitHub lists; the rest go unseen rather than cost more calls.
 */
const MAX_PAGES = 5;
const PER_PAGE = 100;

/** The latest check run of each name on the commit, of every app. */
export async function checkRunsFor(
  octokit: OctokitLike,
  repo: RepositoryName,
  sha: string,
): Promise<Record<string, unknown>[]> {
  const rows: Record<string, unknown>[] = [];
  for (let page = 1; page <= MAX_PAGES; page += 1) {
    const response = await octokit.request("GET /repos/{owner}/{repo}/commits/{ref}/check-runs", {
      owner: repo.owner,
      repo: repo.name,
      ref: sha,
      filter: "latest",
      per_page: PER_PAGE,
      page,
    });
    const data = response.data as unknown as { total_count: number; check_runs: Record<string, unknown>[] };
    rows.push(...data.check_runs);
    if (data.check_runs.length < PER_PAGE || rows.length >= data.total_count) break;
  }
  return rows;
}

/** The newest status of each context on the commit (the combined status's `statuses`), newest first. */
export async function commitStatusesFor(
  octokit: OctokitLike,
  repo: RepositoryName,
  sha: string,
): Promise<Record<string, unknown>[]> {
  const rows: Record<string, unknown>[] = [];
  for (let page = 1; page <= MAX_PAGES; page += 1) {
    const response = await octokit.request("GET /repos/{owner}/{repo}/commits/{ref}/status", {
      owner: repo.owner,
      repo: repo.name,
      ref: sha,
      per_page: PER_PAGE,
      page,
    });
    const data = response.data as unknown as { total_count: number; statuses: Record<string, unknown>[] };
    rows.push(...data.statuses);
    if (data.statuses.length < PER_PAGE || rows.length >= data.total_count) break;
  }
  return rows;
}

/**
 * The end of a job's log, or why there is none: `expired` when GitHub no longer has it (logs are
 * kept for the repository's retention period, and can be deleted), `forbidden` when the
 * installation lacks `actions: read`, which the operator can grant.
 */
export type JobLog =
  | {
      tail: string;
      /** True when bytes before the tail were left out. */
      truncated: boolean;
      /** False when reading stopped at the read limit, so the tail is not the log's end. */
      reachedEnd: boolean;
    }
  | { missing: "expired" | "forbidden" };

/** Fetches a log's download link; it must send no credentials of its own, for the link is signed. */
export type LogDownload = (url: string, signal: AbortSignal) => Promise<Response>;

/**
 * Logs are read this far at most: beyond it the download is cut and the tail so far is kept, so a
 * runaway log costs bounded time and bandwidth as well as bounded memory.
 */
const DEFAULT_READ_LIMIT_BYTES = 64 * 1024 * 1024;

/**
 * The last `maxBytes` bytes of an Actions job's log, cut at a character boundary. GitHub answers
 * the log route with a redirect to a short-lived link on another host; the redirect is taken by
 * hand so the installation token is never sent there. The link is fetched with `download`,
 * default the global fetch: it streams, where the server's Octokit fetch buffers whole answers.
 */
export async function jobLogTail(
  octokit: OctokitLike,
  repo: RepositoryName,
  jobId: number,
  maxBytes: number,
  options: { download?: LogDownload; readLimitBytes?: number } = {},
): Promise<JobLog> {
  let response: { status: number; headers: Record<string, unknown>; data: unknown };
  try {
    response = await octokit.request("GET /repos/{owner}/{repo}/actions/jobs/{job_id}/logs", {
      owner: repo.owner,
      repo: repo.name,
      job_id: jobId,
      request: { redirect: "manual" },
    });
  } catch (error) {
    const missing = missingLog(error);
    if (missing) return { missing };
    throw error;
  }
  // A fetch that follows redirects whatever it is asked has already read the whole log.
  if (response.status === 200 && (typeof response.data === "string" || response.data instanceof ArrayBuffer)) {
    const bytes = typeof response.data === "string" ? Buffer.from(response.data) : new Uint8Array(response.data);
    return tailOf([bytes], maxBytes, true, 0);
  }
  const location = response.headers["location"];
  if (typeof location !== "string") {
    throw new Error(`GitHub answered the job log request with ${String(response.status)} and no location`);
  }
  const download = options.download ?? ((url, signal) => globalThis.fetch(url, { signal }));
  return downloadTail(download, location, maxBytes, options.readLimitBytes ?? DEFAULT_READ_LIMIT_BYTES);
}

async function downloadTail(download: LogDownload, url: string, maxBytes: number, readLimit: number): Promise<JobLog> {
  const controller = new AbortController();
  const response = await download(url, controller.signal);
  // The link expires within minutes, and storage refuses an expired or unknown one.
  if (response.status === 403 || response.status === 404 || response.status === 410) {
    await response.body?.cancel();
    return { missing: "expired" };
  }
  if (!response.ok) {
    await response.body?.cancel();
    throw new Error(`Downloading a job log failed: ${String(response.status)} ${response.statusText}`);
  }
  const kept: Uint8Array[] = [];
  let keptBytes = 0;
  let read = 0;
  let reachedEnd = true;
  if (response.body) {
    const reader: ReadableStreamDefaultReader<Uint8Array> = response.body.getReader();
    for (;;) {
      const { done, value } = await reader.read();
      if (done) break;
      read += value.byteLength;
      // A copy of the chunk's end, so a huge chunk's buffer is not kept alive by a small view of it.
      const chunk = value.byteLength > maxBytes ? value.slice(value.byteLength - maxBytes) : value;
      kept.push(chunk);
      keptBytes += chunk.byteLength;
      while (kept.length > 1 && keptBytes - (kept[0]?.byteLength ?? 0) >= maxBytes) {
        keptBytes -= kept.shift()?.byteLength ?? 0;
      }
      if (read >= readLimit) {
        reachedEnd = false;
        controller.abort();
        await reader.cancel().catch(() => undefined);
        break;
      }
    }
  }
  return tailOf(kept, maxBytes, reachedEnd, read - keptBytes);
}

function tailOf(
  chunks: readonly Uint8Array[],
  maxBytes: number,
  reachedEnd: boolean,
  droppedBytes: number,
): { tail: string; truncated: boolean; reachedEnd: boolean } {
  const all = Buffer.concat(chunks);
  let bytes = all.subarray(Math.max(0, all.byteLength - maxBytes));
  // Continuation bytes (10xxxxxx) at the start belong to a character that was cut off.
  let skip = 0;
  while (skip < 3 && skip < bytes.byteLength && ((bytes[skip] ?? 0) & 0xc0) === 0x80) skip += 1;
  bytes = bytes.subarray(skip);
  // Streaming decode holds back a character cut at the end, which only a stopped read leaves.
  const tail = new TextDecoder("utf-8").decode(bytes, { stream: !reachedEnd });
  return { tail, truncated: droppedBytes > 0 || bytes.byteLength < all.byteLength, reachedEnd };
}

function missingLog(error: unknown): "expired" | "forbidden" | undefined {
  const status = statusOf(error);
  if (status === 404 || status === 410) return "expired";
  if (status === 403 && !isRateLimited(error)) return "forbidden";
  return undefined;
}

/**
 * Re-runs the failed jobs of the workflow run `jobId` belongs to. `forbidden`: the installation
 * lacks `actions: write` (or `actions: read`, to find the run). `refused`: GitHub would not, as
 * when the run is still going, nothing in it failed or the job is gone. Server errors are thrown.
 */
export async function rerunFailedJobs(
  octokit: OctokitLike,
  repo: RepositoryName,
  jobId: number,
): Promise<"rerun" | "forbidden" | "refused"> {
  try {
    const job = await octokit.request("GET /repos/{owner}/{repo}/actions/jobs/{job_id}", {
      owner: repo.owner,
      repo: repo.name,
      job_id: jobId,
    });
    await octokit.request("POST /repos/{owner}/{repo}/actions/runs/{run_id}/rerun-failed-jobs", {
      owner: repo.owner,
      repo: repo.name,
      run_id: (job.data as { run_id: number }).run_id,
    });
    return "rerun";
  } catch (error) {
    const status = statusOf(error);
    if (status === undefined || status >= 500 || status < 400 || isRateLimited(error)) throw error;
    // GitHub also answers 403 for a run it will not re-run yet; only this wording is a missing permission.
    return status === 403 && /resource not accessible by integration/i.test(messageOf(error)) ? "forbidden" : "refused";
  }
}

/** What an installation was granted, read with the app's JWT: for telling an operator what is missing. */
export async function installationAccess(
  appOctokit: OctokitLike,
  installationId: number,
): Promise<{ permissions: Record<string, string>; events: string[] }> {
  const response = await appOctokit.request("GET /app/installations/{installation_id}", {
    installation_id: installationId,
  });
  const data = response.data as { permissions?: Record<string, unknown>; events?: unknown[] };
  const permissions: Record<string, string> = {};
  for (const [name, level] of Object.entries(data.permissions ?? {})) {
    if (typeof level === "string") permissions[name] = level;
  }
  return { permissions, events: (data.events ?? []).filter((event): event is string => typeof event === "string") };
}

function statusOf(error: unknown): number | undefined {
  return typeof error === "object" && error !== null && "status" in error && typeof error.status === "number"
    ? error.status
    : undefined;
}

function messageOf(error: unknown): string {
  const response =
    typeof error === "object" && error !== null && "response" in error
      ? (error.response as { data?: { message?: unknown } } | undefined)
      : undefined;
  if (typeof response?.data?.message === "string") return response.data.message;
  return error instanceof Error ? error.message : "";
}

/** A 403 or 429 for spent rate limit is a wait, not a refusal; the caller's retry policy owns it. */
function isRateLimited(error: unknown): boolean {
  const status = statusOf(error);
  if (status === 429) return true;
  const response =
    typeof error === "object" && error !== null && "response" in error
      ? (error.response as { headers?: Record<string, unknown> } | undefined)
      : undefined;
  return (
    status === 403 && (response?.headers?.["x-ratelimit-remaining"] === "0" || /rate limit/i.test(messageOf(error)))
  );
}
