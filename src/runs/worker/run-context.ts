import type { TokenMinter } from "../../github/tokens.js";
import { bindLog, type Log } from "../../util/log.js";
import { createRedactor, secretsFromEnv } from "../../util/redact.js";
import type { RunRequest } from "../request.js";
import { RunAudit } from "./audit-reporter.js";
import type { WorkerDeps } from "./deps.js";
import { RunStatusComment } from "./status.js";

/** One run as the worker's phases share it: the request, and what the worker keeps for it. */
export interface RunContext {
  readonly request: RunRequest;
  readonly signal: AbortSignal;
  readonly deps: WorkerDeps;
  /** The worker's log with the run id, repository and issue bound. */
  readonly log: Log;
  readonly redact: (text: string) => string;
  /** The run's page, when run pages are served. */
  readonly runUrl?: string;
  readonly audit?: RunAudit;
  /** The worker's minter, recording every token it mints in the audit trail when there is one. */
  readonly tokens: TokenMinter;
  readonly status: RunStatusComment;
}

/** The run's context, made before anything can fail, so every failure can still be reported. */
export function startRun(request: RunRequest, signal: AbortSignal, deps: WorkerDeps): RunContext {
  const log = bindLog(deps.log, {
    runId: request.runId,
    repo: `${request.repo.owner}/${request.repo.name}`,
    issue: request.issue.number,
  });
  const redact = createRedactor(secretsFromEnv(deps.environment));
  const runUrl = deps.publicUrl ? `${deps.publicUrl.replace(/\/+$/, "")}/runs/${request.runId}` : undefined;
  const audit = deps.audit ? new RunAudit(deps.audit, request, log) : undefined;
  return {
    request,
    signal,
    deps,
    log,
    redact,
    ...(runUrl ? { runUrl } : {}),
    ...(audit ? { audit } : {}),
    tokens: audit ? audit.tokens(deps.tokens) : deps.tokens,
    status: new RunStatusComment(request, redact, runUrl),
  };
}
