import { once } from "node:events";
import type { ServerResponse } from "node:http";
import type { JournalEntry, RunJournal } from "../runs/journal/port.js";
import { outcomeOf } from "../runs/journal/run-summary.js";
import type { Redactor } from "../util/redact.js";
import { ansiSegments } from "./ansi.js";
import { SECURITY_HEADERS } from "./html.js";
import { stepHeading, stepUpdate } from "./run-view.js";

export interface RunEventsOptions {
  redactor: Redactor;
  /** Comment lines sent this often keep proxies from closing a quiet stream, in ms. */
  heartbeatMs?: number;
  /** Shared by every stream of one page handler: viewers of one run render each entry once. */
  cache?: MessageCache;
}

/**
 * Server-sent events for one run: replays the entries after the client's cursor
 * (`Last-Event-ID` when the browser reconnects, else `?after=`), then sends new ones as the run
 * appends them, and closes once the run has ended. Each message carries its entry's sequence
 * number as its id. A slow client is not buffered for: the next entry is read only once the
 * last one was taken by the socket.
 */
export async function streamRunEvents(
  res: ServerResponse,
  journal: RunJournal,
  runId: string,
  afterSeq: number,
  options: RunEventsOptions,
): Promise<void> {
  const controller = new AbortController();
  const stop = (): void => {
    controller.abort();
  };
  // The response's close, not the request's: a request closes once its (empty) body was read,
  // while the response closes when the client goes away.
  res.on("close", stop);
  res.writeHead(200, {
    ...SECURITY_HEADERS,
    "content-type": "text/event-stream; charset=utf-8",
    connection: "keep-alive",
    // Reverse proxies (nginx) would otherwise hold the stream back in their buffers.
    "x-accel-buffering": "no",
  });
  res.write("retry: 3000\n\n");
  const heartbeat = setInterval(() => {
    res.write(": ping\n\n");
  }, options.heartbeatMs ?? 15_000);
  try {
    for await (const entry of journal.follow(runId, afterSeq, controller.signal)) {
      const message = cachedMessage(runId, entry, options);
      if (message.length === 0) continue;
      if (!res.write(message)) {
        // A closed socket aborts the controller (see `stop`), which ends this wait too.
        await once(res, "drain", { signal: controller.signal }).catch(() => undefined);
      }
      if (controller.signal.aborted) break;
    }
  } finally {
    clearInterval(heartbeat);
    res.off("close", stop);
    controller.abort();
    if (!res.writableEnded) res.end();
  }
}

/** The entry's message as bytes: encoded once, and the same buffer written to every viewer. */
function cachedMessage(runId: string, entry: JournalEntry, options: RunEventsOptions): Buffer {
  const key = `${runId}:${String(entry.seq)}`;
  const cached = options.cache?.get(key);
  if (cached !== undefined) return cached;
  const message = Buffer.from(encodeEntry(entry, options.redactor), "utf8");
  options.cache?.set(key, message);
  return message;
}

/** One entry as an SSE message for the run page's script ("" for entries it does not need). */
export function encodeEntry(entry: JournalEntry, redactor: Redactor): string {
  const { event } = entry;
  switch (event.type) {
    case "run.started":
      return sse(entry.seq, "plan", {
        steps: event.nodes.map((node) => ({
          id: node.id,
          title: node.title,
          state: "pending",
          attempt: 1,
          onFailureOnly: node.onFailureOnly,
        })),
      });
    case "node.started":
      return sse(entry.seq, "step", {
        id: event.nodeId,
        title: event.title,
        state: "running",
        attempt: event.attempt,
        heading: stepHeading(event.title, event.attempt),
      });
    case "node.log":
      return sse(entry.seq, "output", { segments: ansiSegments(redactor(event.text)) });
    case "node.finished": {
      const { report } = event;
      const update = stepUpdate(report);
      return sse(entry.seq, "step", {
        id: report.nodeId,
        title: report.title,
        ...update,
        ...(update.error ? { error: redactor(update.error) } : {}),
        ...(update.summary ? { summary: redactor(update.summary) } : {}),
        ...(report.outputTail
          ? {
              tail: ansiSegments(
                redactor(report.outputTail.endsWith("\n") ? report.outputTail : `${report.outputTail}\n`),
              ),
            }
          : {}),
      });
    }
    case "run.finished": {
      const outcome = outcomeOf(event.report);
      return sse(entry.seq, "end", {
        state: outcome.state,
        durationMs: event.report.durationMs,
        ...(outcome.prUrl ? { prUrl: outcome.prUrl } : {}),
        ...(outcome.error ? { error: redactor(outcome.error) } : {}),
        ...(outcome.errorKind ? { errorKind: outcome.errorKind } : {}),
        ...(outcome.remedy ? { remedy: redactor(outcome.remedy) } : {}),
      });
    }
    case "run.ended":
      return sse(entry.seq, "end", { state: event.state, ...(event.error ? { error: redactor(event.error) } : {}) });
    case "sandbox.ready":
    case "node.output":
    case "node.progress":
    case "commit.finished":
    case "push.finished":
    case "run.notice":
      return "";
  }
}

function sse(id: number, event: string, data: unknown): string {
  // JSON never holds a raw newline, so the payload is one `data:` line.
  return `id: ${String(id)}\nevent: ${event}\ndata: ${JSON.stringify(data)}\n\n`;
}

/**
 * The newest rendered messages, by run and sequence number: the viewers of a live run all want
 * the entry just appended, so it is redacted and rendered once, not per viewer. Kept only for a
 * few entries: long enough for every viewer to take it, short enough that the buffers die young
 * (a cache that outlived a garbage collection or two would move them to the old generation,
 * where they linger until a full collection).
 */
export class MessageCache {
  private readonly entries = new Map<string, Buffer>();

  constructor(private readonly maxEntries = 8) {}

  get(key: string): Buffer | undefined {
    return this.entries.get(key);
  }

  set(key: string, message: Buffer): void {
    if (this.entries.has(key)) return;
    this.entries.set(key, message);
    // Maps iterate oldest first: evict from the front.
    for (const oldKey of this.entries.keys()) {
      if (this.entries.size <= this.maxEntries) break;
      this.entries.delete(oldKey);
    }
  }
}
