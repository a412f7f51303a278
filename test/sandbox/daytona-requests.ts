import type { RecordedRequest } from "../fakes/daytona/http-util.js";

/** Requests of a run that served its commands, from the fake Daytona's log. */
export interface ExecRequestTally {
  /** Short commands: synchronous, without env, in a shared session. */
  shortExecs: number;
  /** Every request those cost: their sessions' create, exec and delete, and stdin uploads. */
  shortExecRequests: number;
  /** Streaming commands and commands with env, each in a session of its own. */
  otherExecs: number;
  /** Their sessions' requests, env updates and stdin uploads. */
  otherExecRequests: number;
}

const SESSION = /\/process\/session\/([^/]+)/;

function sessionOf(request: RecordedRequest): string | undefined {
  if (request.method === "POST" && /\/process\/session$/.test(request.path)) {
    const body = request.body as { sessionId?: unknown } | undefined;
    return typeof body?.sessionId === "string" ? body.sessionId : undefined;
  }
  return SESSION.exec(request.path)?.[1];
}

const isExec = (request: RecordedRequest): boolean =>
  request.method === "POST" && /\/process\/session\/[^/]+\/exec$/.test(request.path);
const isAsync = (request: RecordedRequest): boolean => {
  const body = request.body as { runAsync?: unknown; async?: unknown } | undefined;
  return body?.runAsync === true || body?.async === true;
};
const commandText = (request: RecordedRequest): string => {
  const command = (request.body as { command?: unknown } | undefined)?.command;
  return typeof command === "string" ? command : "";
};

/**
 * Splits the requests that ran commands into those of short commands and the rest. A session
 * counts as short when it ran only synchronous commands and was not opened while an env was set
 * (the harness opens env sessions between setting and unsetting it, and nothing else meanwhile).
 */
export function tallyExecRequests(requests: readonly RecordedRequest[]): ExecRequestTally {
  const bySession = new Map<string, RecordedRequest[]>();
  const envSessions = new Set<string>();
  let envSet = false;
  let envRequests = 0;
  const stdinUploads: Array<{ destination: string }> = [];
  for (const request of requests) {
    if (request.method === "POST" && /\/env$/.test(request.path)) {
      envRequests += 1;
      const body = request.body as { set?: Record<string, unknown> } | undefined;
      envSet = Object.keys(body?.set ?? {}).length > 0;
      continue;
    }
    if (request.path.endsWith("/files/bulk-upload")) {
      for (const file of request.multipart?.files ?? [])
        if (/\/\.harness\/stdin-[0-9a-f]+$/.test(file.destination))
          stdinUploads.push({ destination: file.destination });
      continue;
    }
    const session = sessionOf(request);
    if (session === undefined) continue;
    if (request.method === "POST" && /\/process\/session$/.test(request.path) && envSet) envSessions.add(session);
    bySession.set(session, [...(bySession.get(session) ?? []), request]);
  }
  const tally: ExecRequestTally = {
    shortExecs: 0,
    shortExecRequests: 0,
    otherExecs: 0,
    otherExecRequests: envRequests,
  };
  const shortCommands: string[] = [];
  const otherCommands: string[] = [];
  for (const [session, made] of bySession) {
    const execs = made.filter(isExec);
    const short = !envSessions.has(session) && !execs.some(isAsync);
    if (short) {
      tally.shortExecs += execs.length;
      tally.shortExecRequests += made.length;
      shortCommands.push(...execs.map(commandText));
    } else {
      tally.otherExecs += execs.length;
      tally.otherExecRequests += made.length;
      otherCommands.push(...execs.map(commandText));
    }
  }
  for (const upload of stdinUploads) {
    if (shortCommands.some((command) => command.includes(upload.destination))) tally.shortExecRequests += 1;
    else if (otherCommands.some((command) => command.includes(upload.destination))) tally.otherExecRequests += 1;
  }
  return tally;
}
