import { describe, expect, it } from "vitest";
import { failed, passed, skipped, type Check } from "../../src/doctor/check.js";
import { allPassed, renderJson, renderText } from "../../src/doctor/render.js";
import { runChecks, type CheckReport } from "../../src/doctor/runner.js";
import { createRedactor } from "../../src/util/redact.js";

type Context = { secret: string };
const context: Context = { secret: "s3cr3t-value-for-the-test" };
const redact = createRedactor([context.secret]);

function check(id: string, run: Check<Context>["run"], extra: Partial<Check<Context>> = {}): Check<Context> {
  return { id, name: `check ${id}`, run, ...extra };
}

describe("runChecks", () => {
  it("answers in the order given, whatever order the checks finish in", async () => {
    // The slow check finishes only once the fast one has been reported.
    let releaseSlow: () => void = () => undefined;
    const released = new Promise<void>((resolve) => {
      releaseSlow = resolve;
    });
    const finishedOrder: string[] = [];
    const reports = await runChecks(
      [
        check("slow", async () => {
          await released;
          return passed("slow one");
        }),
        check("fast", () => Promise.resolve(passed("fast one"))),
      ],
      context,
      {
        timeoutMs: 1_000,
        redact,
        onReport: (report) => {
          finishedOrder.push(report.id);
          if (report.id === "fast") releaseSlow();
        },
      },
    );
    expect(reports.map((report) => report.id)).toEqual(["slow", "fast"]);
    expect(finishedOrder).toEqual(["fast", "slow"]);
  });

  it("fails a check that outlives its limit, aborts its signal and does not wait for it", async () => {
    let seenSignal: AbortSignal | undefined;
    const started = Date.now();
    const [report] = await runChecks(
      [
        check(
          "stuck",
          (_context, signal) => {
            seenSignal = signal;
            return new Promise(() => undefined);
          },
          { fixWhenStuck: () => "look at the stuck thing" },
        ),
      ],
      context,
      { timeoutMs: 50, redact },
    );
    expect(Date.now() - started).toBeLessThan(2_000);
    expect(report).toMatchObject({ status: "fail", detail: "no answer within 50 ms", fix: "look at the stuck thing" });
    expect(seenSignal?.aborted).toBe(true);
  });

  it("a check's own limit wins over the default", async () => {
    const [report] = await runChecks([check("own", () => new Promise(() => undefined), { timeoutMs: 30 })], context, {
      timeoutMs: 60_000,
      redact,
    });
    expect(report?.detail).toBe("no answer within 30 ms");
  });

  it("turns a throw into a failure with the check's fix", async () => {
    const [report] = await runChecks(
      [check("throws", () => Promise.reject(new Error("boom")), { fixWhenStuck: () => "do the thing" })],
      context,
      { timeoutMs: 1_000, redact },
    );
    expect(report).toMatchObject({ status: "fail", detail: "boom", fix: "do the thing" });
  });

  it("skips a check whose needs failed or were skipped, and runs one whose needs passed", async () => {
    let ranAfterFailure = false;
    const reports = await runChecks(
      [
        check("base", () => Promise.resolve(failed("base is broken", "mend base"))),
        check("off", () => Promise.resolve(skipped("not used here"))),
        check("good", () => Promise.resolve(passed("fine"))),
        check(
          "after-base",
          () => {
            ranAfterFailure = true;
            return Promise.resolve(passed("ran"));
          },
          { needs: ["base"] },
        ),
        check("after-off", () => Promise.resolve(passed("ran")), { needs: ["off"] }),
        check("after-good", () => Promise.resolve(passed("ran")), { needs: ["good"] }),
        check("unknown-need", () => Promise.resolve(passed("ran")), { needs: ["later"] }),
        check("later", () => Promise.resolve(passed("ran"))),
      ],
      context,
      { timeoutMs: 1_000, redact },
    );
    const byId = new Map(reports.map((report) => [report.id, report]));
    expect(ranAfterFailure).toBe(false);
    expect(byId.get("after-base")).toMatchObject({
      status: "skip",
      detail: "not checked: needs check base, which failed",
    });
    expect(byId.get("after-off")).toMatchObject({
      status: "skip",
      detail: "not checked: needs check off, which was not checked",
    });
    expect(byId.get("after-good")).toMatchObject({ status: "ok", detail: "ran" });
    expect(byId.get("unknown-need")?.status).toBe("fail");
  });

  it("answers even when the listener throws", async () => {
    const reports = await runChecks([check("one", () => Promise.resolve(passed("fine")))], context, {
      timeoutMs: 1_000,
      redact,
      onReport: () => {
        throw new Error("the log is full");
      },
    });
    expect(reports).toMatchObject([{ id: "one", status: "ok" }]);
  });

  it("redacts secrets and keeps each answer on one bounded line", async () => {
    const [report] = await runChecks(
      [
        check("leaky", () =>
          Promise.resolve(
            failed(`refused ${context.secret}\nsecond line ${"x".repeat(1_000)}`, `set KEY=${context.secret}`),
          ),
        ),
      ],
      context,
      { timeoutMs: 1_000, redact },
    );
    expect(JSON.stringify(report)).not.toContain(context.secret);
    expect(report?.detail).not.toContain("\n");
    expect(report?.detail.length).toBeLessThanOrEqual(400);
  });
});

describe("render", () => {
  const reports: CheckReport[] = [
    { id: "a", name: "Node.js", status: "ok", detail: "22.1.0", durationMs: 1 },
    { id: "b", name: "Redis", status: "fail", detail: "does not answer", fix: "start Redis", durationMs: 2 },
    { id: "c", name: "Daytona", status: "skip", detail: "not used", durationMs: 0 },
  ];

  it("prints ✓, ✗ with its fix indented below, and – for what does not apply", () => {
    expect(renderText(reports)).toBe(
      [
        "✓ Node.js: 22.1.0",
        "✗ Redis: does not answer",
        "    fix: start Redis",
        "– Daytona: not used",
        "",
        "1 of 3 checks failed.",
        "",
      ].join("\n"),
    );
    expect(allPassed(reports)).toBe(false);
    expect(allPassed(reports.filter((report) => report.status !== "fail"))).toBe(true);
  });

  it("prints JSON with an overall verdict", () => {
    const parsed = JSON.parse(renderJson(reports)) as { ok: boolean; checks: CheckReport[] };
    expect(parsed.ok).toBe(false);
    expect(parsed.checks).toEqual(reports);
  });
});
