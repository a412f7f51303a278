import { join } from "node:path";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { validateBlueprint } from "../../src/harness/blueprint-file.js";
import { runHarness } from "../../src/harness/run.js";
import { InProcessRunQueue } from "../../src/runs/queue/in-process.js";
import { JournalReporter } from "../../src/runs/journal/reporter.js";
import type { JournalEvent, RunJournal } from "../../src/runs/journal/port.js";
import { RunJournaling } from "../../src/runs/journal/journaled-queue.js";
import { MemoryRunJournal } from "../../src/runs/journal/memory.js";
import type { RunProcessor, RunQueue } from "../../src/runs/queue/port.js";
import { createLocalSandbox } from "../../src/sandbox/local/sandbox.js";
import type { Log } from "../../src/util/log.js";
import { makeRepo, scratchDir } from "../helpers/git.js";
import { finished, log, nodeStarted, runRequest, started } from "./journal-conformance.js";
import { fakeToken } from "../helpers/fake-secrets.js";

/** A journal whose appends wait until the test opens the gate: a stalled Redis, say. */
class GatedJournal extends MemoryRunJournal {
  private gate: Promise<void> = new Promise(() => undefined);
  private openGate: () => void = () => undefined;
  calls = 0;

  constructor() {
    super();
    this.gate = new Promise((resolve) => {
      this.openGate = resolve;
    });
  }

  override async append(runId: string, event: JournalEvent): Promise<void> {
    this.calls += 1;
    await this.gate;
    await super.append(runId, event);
  }

  open(): void {
    this.openGate();
  }
}

function recordingLog(): Log & { lines: string[] } {
  const lines: string[] = [];
  const record = (obj: Record<string, unknown>, msg?: string): void => {
    lines.push(`${msg ?? ""} ${JSON.stringify(obj)}`);
  };
  return { lines, info: record, warn: record, error: record };
}

describe("JournalReporter", () => {
  test("writes a run's events in order, leaves throttled tails out, and settles", async () => {
    const journal = new MemoryRunJournal();
    const request = runRequest();
    await journal.accepted(request);
    const reporter = new JournalReporter(journal);
    const runId = request.runId;
    reporter.emit(started(runId) as Parameters<JournalReporter["emit"]>[0]);
    reporter.emit({
      type: "node.output",
      runId,
      nodeId: "implement",
      attempt: 1,
      tail: "tail\n",
      at: "2026-11-22T10:00:00.000Z",
    });
    for (let i = 0; i < 50; i++)
      reporter.emit(log(runId, `line ${String(i)}\n`) as Parameters<JournalReporter["emit"]>[0]);
    reporter.emit(finished(runId) as Parameters<JournalReporter["emit"]>[0]);
    await reporter.settled(runId);
    const entries = await journal.events(runId, 0);
    expect(entries.map((entry) => entry.event.type)).toEqual([
      "run.started",
      ...Array<string>(50).fill("node.log"),
      "run.finished",
    ]);
    expect(entries.map((entry) => (entry.event.type === "node.log" ? entry.event.text : "")).join("")).toBe(
      Array.from({ length: 50 }, (_, i) => `line ${String(i)}\n`).join(""),
    );
    expect(await journal.get(runId)).toMatchObject({ state: "succeeded" });
  });

  test("when the journal stalls, live output is shed but steps and the outcome are kept", async () => {
    const journal = new GatedJournal();
    const request = runRequest();
    await journal.accepted(request);
    const logger = recordingLog();
    const reporter = new JournalReporter(journal, { maxPending: 10, log: logger });
    const runId = request.runId;
    reporter.emit(started(runId) as Parameters<JournalReporter["emit"]>[0]);
    for (let i = 0; i < 100; i++)
      reporter.emit(log(runId, `line ${String(i)}\n`) as Parameters<JournalReporter["emit"]>[0]);
    reporter.emit(nodeStarted(runId) as Parameters<JournalReporter["emit"]>[0]);
    reporter.emit(finished(runId) as Parameters<JournalReporter["emit"]>[0]);
    journal.open();
    await reporter.close();
    const types = (await journal.events(runId, 0)).map((entry) => entry.event.type);
    expect(types.filter((type) => type === "node.log")).toHaveLength(9);
    expect(types.filter((type) => type !== "node.log")).toEqual(["run.started", "node.started", "run.finished"]);
    expect(logger.lines.filter((line) => line.includes("shedding live output"))).toHaveLength(1);
  });

  test("a journal that fails is logged, never thrown into the run", async () => {
    const journal = new MemoryRunJournal();
    journal.append = () => Promise.reject(new Error("Redis is away"));
    const logger = recordingLog();
    const reporter = new JournalReporter(journal, { log: logger });
    expect(() => {
      reporter.emit(started("r1") as Parameters<JournalReporter["emit"]>[0]);
    }).not.toThrow();
    await reporter.close();
    expect(logger.lines.join("\n")).toContain("Redis is away");
  });
});

describe("RunJournaling", () => {
  const build = (journal: RunJournal, processor: RunProcessor): { queue: RunQueue; journaling: RunJournaling } => {
    const journaling = new RunJournaling(journal, new JournalReporter(journal));
    const queue = journaling.queue(new InProcessRunQueue(journaling.processor(processor), { concurrency: 1 }));
    return { queue, journaling };
  };

  test("an enqueued run is recorded queued; a duplicate or a refused request is not recorded", async () => {
    const journal = new MemoryRunJournal();
    const release: Array<() => void> = [];
    const { queue } = build(
      journal,
      () =>
        new Promise<void>((resolve) => {
          release.push(resolve);
        }),
    );
    const first = runRequest();
    const waiting = runRequest({ issue: first.issue });
    expect((await queue.enqueue(first)).status).toBe("queued");
    expect((await queue.enqueue(waiting)).status).toBe("waiting");
    const duplicate = runRequest({ key: first.key });
    expect((await queue.enqueue(duplicate)).status).toBe("duplicate");
    // A third request on the busy issue is refused by the queue: it is no run, and not recorded.
    const refused = runRequest({ issue: first.issue });
    expect((await queue.enqueue(refused)).status).toBe("refused");
    expect(await journal.get(waiting.runId)).toMatchObject({ state: "queued" });
    expect(await journal.get(duplicate.runId)).toBeUndefined();
    expect(await journal.get(refused.runId)).toBeUndefined();
    // The in-process queue knows no list of live runs, so neither does its decorator (the reaper stays off).
    expect(Reflect.get(queue, "activeRunIds")).toBeUndefined();
    // Everything else is the inner queue's own.
    expect(await queue.activeRun("1#12")).toBe(first.runId);
    expect(await queue.stats()).toEqual({ queued: 1, running: 1 });
    for (const resolve of release) resolve();
    await queue.close(1000);
  });

  test("a run that ends without the harness's outcome is closed: failed, or cancelled when aborted", async () => {
    const journal = new MemoryRunJournal();
    const { queue } = build(journal, () => Promise.resolve());
    const plain = runRequest();
    await queue.enqueue(plain);
    await queue.idle();
    expect(await journal.get(plain.runId)).toMatchObject({
      state: "failed",
      error: expect.stringContaining("status comment") as string,
    });

    const blocking = new MemoryRunJournal();
    // Runs only until cancelled, like a worker that stops at the abort before the harness starts.
    const starts = new Map<string, () => void>();
    const startedRun = (runId: string): Promise<void> =>
      new Promise((resolve) => {
        starts.set(runId, resolve);
      });
    const untilCancelled: RunProcessor = (request, signal) =>
      new Promise<void>((resolve) => {
        starts.get(request.runId)?.();
        if (signal.aborted) resolve();
        signal.addEventListener("abort", () => {
          resolve();
        });
      });
    const { queue: second } = build(blocking, untilCancelled);
    const busy = runRequest();
    const waiting = runRequest({ issue: busy.issue });
    const busyStarted = startedRun(busy.runId);
    const waitingStarted = startedRun(waiting.runId);
    await second.enqueue(busy);
    await second.enqueue(waiting);
    await busyStarted;
    expect(await second.cancel("1#12")).toBe(true);
    await waitingStarted;
    expect(await second.cancel("1#12")).toBe(true);
    await second.idle();
    expect(await blocking.get(busy.runId)).toMatchObject({
      state: "cancelled",
      error: "The run was cancelled before its steps started",
    });
    expect(await blocking.get(waiting.runId)).toMatchObject({ state: "cancelled" });
    await queue.close(1000);
    await second.close(1000);
  });

  test("a run whose harness reported its end is left as the harness said", async () => {
    const journal = new MemoryRunJournal();
    const reporter = new JournalReporter(journal);
    const journaling = new RunJournaling(journal, reporter);
    const queue = journaling.queue(
      new InProcessRunQueue(
        journaling.processor((request) => {
          reporter.emit(started(request.runId) as Parameters<JournalReporter["emit"]>[0]);
          reporter.emit(finished(request.runId) as Parameters<JournalReporter["emit"]>[0]);
          return Promise.resolve();
        }),
        { concurrency: 1 },
      ),
    );
    const request = runRequest();
    await queue.enqueue(request);
    await queue.idle();
    expect(await journal.get(request.runId)).toMatchObject({
      state: "succeeded",
      prUrl: "https://github.com/acme/widgets/pull/3",
    });
    expect((await journal.events(request.runId, 0)).map((entry) => entry.event.type)).toEqual([
      "run.started",
      "run.finished",
    ]);
    await queue.close(1000);
  });

  test("a run the durable queue gives up on is closed as interrupted", async () => {
    const journal = new MemoryRunJournal();
    const { queue, journaling } = build(journal, () => Promise.resolve());
    const request = runRequest();
    await journaling.interrupted(request, "its worker stopped 3 times");
    expect(await journal.get(request.runId)).toMatchObject({
      state: "interrupted",
      errorKind: "interrupted",
      error: "The run was interrupted: its worker stopped 3 times",
    });
    await queue.close(1000);
  });
});

describe("the harness into the journal", () => {
  let dir: { path: string; cleanup: () => Promise<void> };
  beforeAll(async () => {
    dir = await scratchDir("harness-journal-e2e-");
  });
  afterAll(async () => {
    await dir.cleanup();
  });

  test("a real run's steps, output (redacted, whole lines) and outcome land in the journal", async () => {
    const repo = await makeRepo(join(dir.path, "repo"));
    const journal = new MemoryRunJournal();
    const request = runRequest();
    await journal.accepted(request);
    const reporter = new JournalReporter(journal);
    const secret = fakeToken("sk-ant-api03-", 24);
    const blueprint = validateBlueprint(
      {
        name: "print",
        nodes: [
          {
            id: "print",
            kind: "exec",
            title: "Print",
            argv: [
              "sh",
              "-c",
              `printf '\\033[31mred\\033[0m <b>\\n'; echo "using ${secret}"; for i in 1 2 3; do echo "n $i"; done`,
            ],
          },
        ],
      },
      "test",
    );
    const report = await runHarness({
      request: { runId: request.runId, repo, branch: "harness/j", intent: "print" },
      blueprint,
      sandbox: { create: createLocalSandbox },
      output: { reporter, logMs: 20 },
    });
    await reporter.settled(request.runId);
    expect(report.status).toBe("no_changes");
    const entries = await journal.events(request.runId, 0);
    const text = entries.map((entry) => (entry.event.type === "node.log" ? entry.event.text : "")).join("");
    expect(text).toBe("\x1b[31mred\x1b[0m <b>\nusing [REDACTED]\nn 1\nn 2\nn 3\n");
    expect(entries.map((entry) => entry.event.type).filter((type) => type !== "node.log")).toEqual([
      "run.started",
      "sandbox.ready",
      "node.started",
      "node.finished",
      "commit.finished",
      "run.finished",
    ]);
    expect(await journal.get(request.runId)).toMatchObject({ state: "failed", errorKind: "no_changes" });
  });
});
