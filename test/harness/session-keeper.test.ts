import { describe, expect, test } from "vitest";
import type { SessionLocation } from "../../src/agents/types.js";
import type { ExecOptions, ExecResult } from "../../src/contracts/types.js";
import { maskRecord, SessionKeeper, type SessionKeeperOptions } from "../../src/harness/session-keeper.js";
import type { SessionHeartbeat } from "../../src/harness/session-store.js";
import { MemorySessionStore } from "../../src/runs/sessions/memory.js";
import { createRedactor, REDACTED } from "../../src/util/redact.js";
import { fakeToken } from "../helpers/fake-secrets.js";
import { SandboxFileTooLargeError } from "../../src/util/errors.js";

const WORK = "/sandbox/work";
const DIR = `${WORK}/.harness-run1/agent-session`;

/** A sandbox holding files by path relative to the checkout, read the way the adapters read them. */
class FakeSandbox {
  readonly workDir = WORK;
  readonly files = new Map<string, Buffer>();
  readonly searches: string[][] = [];

  write(relative: string, text: string | Buffer): void {
    this.files.set(relative, Buffer.isBuffer(text) ? text : Buffer.from(text, "utf8"));
  }

  append(relative: string, text: string): void {
    this.write(relative, Buffer.concat([this.files.get(relative) ?? Buffer.alloc(0), Buffer.from(text, "utf8")]));
  }

  downloadBytes(path: string, maxBytes: number): Promise<Buffer> {
    const bytes = this.files.get(path);
    if (!bytes) return Promise.reject(new Error(`Could not read ${path} from the sandbox: ENOENT`));
    if (bytes.length > maxBytes)
      return Promise.reject(
        new SandboxFileTooLargeError(
          `${path} in the sandbox is ${String(bytes.length)} bytes, over the ${String(maxBytes)}-byte limit`,
          maxBytes,
        ),
      );
    return Promise.resolve(Buffer.from(bytes));
  }

  /** `find <under> -type f -name <glob>`, over the files it holds. */
  exec(options: ExecOptions): Promise<ExecResult> {
    this.searches.push(options.argv);
    const [, under = "", , , , glob = ""] = options.argv;
    const pattern = new RegExp(`/${glob.replace(/[.]/g, "\\.").replace(/\*/g, "[^/]*")}$`);
    const found = [...this.files.keys()]
      .map((relative) => `${WORK}/${relative}`)
      .filter((path) => path.startsWith(`${under}/`) && pattern.test(path));
    return Promise.resolve({
      exitCode: 0,
      stdout: found.map((path) => `${path}\n`).join(""),
      stderr: "",
      durationMs: 1,
      timedOut: false,
      cancelled: false,
      truncated: false,
    });
  }
}

/** A heartbeat driven by the test: `tick()` runs one copy and resolves when it is done. */
class FakeHeartbeat {
  tickFn: (() => Promise<void>) | undefined;
  stopped = false;
  intervalMs: number | undefined;

  readonly every = (intervalMs: number, tick: () => Promise<void>): (() => void) => {
    this.intervalMs = intervalMs;
    this.tickFn = tick;
    return () => {
      this.stopped = true;
    };
  };

  async tick(): Promise<void> {
    if (!this.tickFn) throw new Error("the keeper never started its heartbeat");
    await this.tickFn();
  }
}

/** Claude's layout: the transcript's name is its session id, known once the CLI says it. */
const byId: SessionLocation = {
  file: (id) => (id === undefined ? undefined : { path: `${DIR}/projects/-w/${id}.jsonl` }),
};
const claudeFacts = (line: string): { id: string } | undefined => {
  const match = /"session_id":"([a-z0-9-]+)"/.exec(line);
  return match?.[1] !== undefined ? { id: match[1] } : undefined;
};

function setUp(overrides: Partial<SessionKeeperOptions> = {}) {
  const sandbox = new FakeSandbox();
  const store = new MemorySessionStore();
  const heartbeat = new FakeHeartbeat();
  const logs: string[] = [];
  let clock = Date.parse("2026-11-28T10:00:00Z");
  const key = fakeToken("sk-ant-api03-", 48);
  const keeper = new SessionKeeper({
    sandbox,
    store,
    runId: "run1",
    nodeId: "implement",
    attempt: 1,
    agent: "claude-code",
    location: byId,
    facts: claudeFacts,
    mask: createRedactor([key]),
    now: () => new Date(clock),
    every: heartbeat.every,
    log: (message) => logs.push(message),
    ...overrides,
  });
  keeper.start();
  return {
    sandbox,
    store,
    heartbeat,
    logs,
    keeper,
    key,
    advance: (ms: number) => {
      clock += ms;
    },
  };
}

/** `text` with every character as a JSON `\\uXXXX` escape. */
function escaped(text: string): string {
  return Array.from(text, (char) => `\\u${char.charCodeAt(0).toString(16).padStart(4, "0")}`).join("");
}

const RECORD = ".harness-run1/agent-session/projects/-w/abc-123.jsonl";

describe("the session keeper", () => {
  test("copies the record every heartbeat once the CLI names its session, and says whether it grew", async () => {
    const { sandbox, store, heartbeat, keeper, advance } = setUp();
    expect(heartbeat.intervalMs).toBe(5_000);
    // Before the CLI said which session it is, there is nothing to look for.
    await heartbeat.tick();
    expect(await store.get("run1")).toBeUndefined();

    keeper.line('{"type":"system","subtype":"init","session_id":"abc-123"}');
    sandbox.write(RECORD, '{"type":"user","n":1}\n');
    await heartbeat.tick();
    const first = await store.get("run1");
    expect(first).toMatchObject({ sessionId: "abc-123", agent: "claude-code", nodeId: "implement", truncated: false });
    expect(first?.content.toString()).toBe('{"type":"user","n":1}\n');
    expect(first?.heartbeat).toEqual<SessionHeartbeat>({
      copiedAt: "2026-11-28T10:00:00.000Z",
      grew: true,
      changedAt: "2026-11-28T10:00:00.000Z",
    });

    // Unchanged: the copy time moves, the change time does not ("still thinking" or "dead").
    advance(5_000);
    await heartbeat.tick();
    expect((await store.get("run1"))?.heartbeat).toEqual<SessionHeartbeat>({
      copiedAt: "2026-11-28T10:00:05.000Z",
      grew: false,
      changedAt: "2026-11-28T10:00:00.000Z",
    });

    // A line half written waits for the next copy; the complete ones are kept.
    advance(5_000);
    sandbox.append(RECORD, '{"type":"assistant","n":2}\n{"type":"us');
    await heartbeat.tick();
    const grown = await store.get("run1");
    expect(grown?.content.toString()).toBe('{"type":"user","n":1}\n{"type":"assistant","n":2}\n');
    expect(grown?.heartbeat).toMatchObject({ copiedAt: "2026-11-28T10:00:10.000Z", grew: true });
  });

  test("the step's end: the heartbeat stops and one last copy takes what the CLI wrote last", async () => {
    const { sandbox, store, heartbeat, keeper } = setUp();
    keeper.line('{"session_id":"abc-123"}');
    sandbox.write(RECORD, '{"n":1}\n');
    await heartbeat.tick();
    sandbox.append(RECORD, '{"n":2,"type":"result"}\n');
    await keeper.finish();
    expect(heartbeat.stopped).toBe(true);
    expect((await store.get("run1"))?.content.toString()).toBe('{"n":1}\n{"n":2,"type":"result"}\n');
  });

  test("a known secret in the record is masked; JSON stays JSON, other lines stay byte for byte", async () => {
    const { sandbox, store, keeper, key } = setUp();
    keeper.line('{"session_id":"abc-123"}');
    const untouched = '{"type":"user","message":{"content":"add a greeting file \\u00e9"}}';
    const lines = [
      untouched,
      JSON.stringify({ type: "tool_result", content: `cat .env\nANTHROPIC_API_KEY=${key}\n` }),
      // Written with escapes only: the text as written does not hold the value.
      `{"type":"echo","text":"${escaped(key)}"}`,
      `not json: ${key}`,
    ];
    sandbox.write(RECORD, `${lines.join("\n")}\n`);
    await keeper.finish();
    const kept = (await store.get("run1"))?.content.toString() ?? "";
    expect(kept).not.toContain(key);
    const keptLines = kept.split("\n");
    expect(keptLines[0]).toBe(untouched);
    expect(JSON.parse(keptLines[1] ?? "")).toEqual({
      type: "tool_result",
      content: `cat .env\nANTHROPIC_API_KEY=${REDACTED}\n`,
    });
    expect(JSON.parse(keptLines[2] ?? "")).toEqual({ type: "echo", text: REDACTED });
    expect(keptLines[3]).toBe(`not json: ${REDACTED}`);
  });

  test("lines appended since the last copy are masked too, the earlier ones kept as masked", async () => {
    const { sandbox, store, heartbeat, keeper, key } = setUp();
    keeper.line('{"session_id":"abc-123"}');
    sandbox.write(RECORD, `{"n":1,"text":"${key}"}\n`);
    await heartbeat.tick();
    sandbox.append(RECORD, `{"n":2,"text":"again ${key}"}\n`);
    await keeper.finish();
    expect((await store.get("run1"))?.content.toString()).toBe(
      `{"n":1,"text":"${REDACTED}"}\n{"n":2,"text":"again ${REDACTED}"}\n`,
    );
  });

  test("over the bound: the last copy that fitted is kept, marked truncated, said once", async () => {
    const { sandbox, store, heartbeat, keeper, logs } = setUp({ maxBytes: 64 });
    keeper.line('{"session_id":"abc-123"}');
    sandbox.write(RECORD, '{"type":"session","n":1}\n');
    await heartbeat.tick();
    sandbox.append(RECORD, `${JSON.stringify({ type: "message", text: "x".repeat(100) })}\n`);
    await heartbeat.tick();
    await heartbeat.tick();
    await keeper.finish();
    const record = await store.get("run1");
    expect(record?.content.toString()).toBe('{"type":"session","n":1}\n');
    expect(record?.truncated).toBe(true);
    expect(logs.filter((line) => line.includes("grew past 64 bytes"))).toHaveLength(1);
  });

  test("a record over the bound from the first copy: nothing is kept, and the step is told why", async () => {
    const { sandbox, store, keeper, logs } = setUp({ maxBytes: 64 });
    keeper.line('{"session_id":"abc-123"}');
    sandbox.write(RECORD, `${"y".repeat(200)}\n`);
    await expect(keeper.finish()).resolves.toBeUndefined();
    expect(await store.get("run1")).toBeUndefined();
    expect(logs).toContain(
      "no session record of the claude-code agent was kept: it was over 64 bytes from the first copy",
    );
  });

  test("a corrupt record (not UTF-8, broken and deeply nested JSON) is kept masked, never thrown", async () => {
    const { sandbox, store, keeper, key } = setUp();
    keeper.line('{"session_id":"abc-123"}');
    const deep = `${"[".repeat(10_000)}"${key}"${"]".repeat(10_000)}`;
    sandbox.write(
      RECORD,
      Buffer.concat([Buffer.from([0xff, 0xfe, 0x00, 0x0a]), Buffer.from(`{"broken": "${key}\n${deep}\n`, "utf8")]),
    );
    await expect(keeper.finish()).resolves.toBeUndefined();
    const kept = (await store.get("run1"))?.content.toString() ?? "";
    expect(kept).not.toContain(key);
    expect(kept.split("\n")).toHaveLength(4);
  });

  test("a session id that could leave the folder is not used; a facts reader that throws is ignored", async () => {
    const { store, keeper, logs } = setUp({
      facts: (line) => {
        if (line.includes("throw")) throw new Error("hostile line");
        return { id: "../../../etc/passwd" };
      },
      location: { file: (id) => (id === undefined ? undefined : { path: `${DIR}/${id}` }) },
    });
    keeper.line("throw");
    keeper.line("{}");
    await keeper.finish();
    expect(await store.get("run1")).toBeUndefined();
    expect(logs.join("\n")).toMatch(/outside the checkout/);
  });

  test("a record that disappears: the last copy stays, the heartbeat stops moving, the step goes on", async () => {
    const { sandbox, store, heartbeat, keeper, logs, advance } = setUp();
    keeper.line('{"session_id":"abc-123"}');
    sandbox.write(RECORD, '{"n":1}\n');
    await heartbeat.tick();
    sandbox.files.delete(RECORD);
    advance(5_000);
    await heartbeat.tick();
    await heartbeat.tick();
    await expect(keeper.finish()).resolves.toBeUndefined();
    const record = await store.get("run1");
    expect(record?.content.toString()).toBe('{"n":1}\n');
    expect(record?.heartbeat.copiedAt).toBe("2026-11-28T10:00:00.000Z");
    expect(logs.filter((line) => line.includes("can no longer be read"))).toHaveLength(1);
  });

  test("a record whose path the sandbox decides (Codex's dated folders) is looked for once, by name", async () => {
    const { sandbox, store, heartbeat, keeper } = setUp({
      agent: "codex",
      location: {
        file: (id) => (id === undefined ? undefined : { under: `${DIR}/sessions`, name: `rollout-*-${id}.jsonl` }),
      },
      facts: (line) => {
        const meta = /"cli_version":"([0-9.]+)"/.exec(line)?.[1];
        const id = /"thread_id":"([a-z0-9-]+)"/.exec(line)?.[1];
        return { ...(id !== undefined ? { id } : {}), ...(meta !== undefined ? { cliVersion: meta } : {}) };
      },
    });
    keeper.line('{"type":"thread.started","thread_id":"t-1"}');
    const path = ".harness-run1/agent-session/sessions/2026/11/28/rollout-2026-11-28T10-00-00-t-1.jsonl";
    sandbox.write(path, '{"type":"session_meta","payload":{"cli_version":"0.169.0"}}\n');
    await heartbeat.tick();
    sandbox.append(path, '{"type":"response_item"}\n');
    await keeper.finish();
    expect(sandbox.searches).toHaveLength(1);
    expect(await store.get("run1")).toMatchObject({ agent: "codex", sessionId: "t-1", cliVersion: "0.169.0" });
    expect((await store.get("run1"))?.content.toString().split("\n")).toHaveLength(3);
  });

  test("a store that fails: said, not thrown", async () => {
    const store = new MemorySessionStore();
    store.put = () => Promise.reject(new Error("disk full"));
    const { sandbox, keeper, logs } = setUp({ store });
    keeper.line('{"session_id":"abc-123"}');
    sandbox.write(RECORD, '{"n":1}\n');
    await expect(keeper.finish()).resolves.toBeUndefined();
    expect(logs.join("\n")).toMatch(/could not be kept: disk full/);
  });
});

describe("maskRecord", () => {
  test("a value spread over a JSON key and its value is masked as text", () => {
    const mask = createRedactor([]);
    const line = JSON.stringify({ OPENAI_API_KEY: "abcdefghijklmnopqrstu" });
    expect(maskRecord(line, mask)).not.toContain("abcdefghijklmnopqrstu");
  });

  test("a count after a secret-sounding name, at the end of its object, stays the number it is", () => {
    // Codex's rollout: `"total_tokens":1000010}`. Masked, the line would no longer be JSON and
    // the record could not be continued.
    const line = JSON.stringify({ info: { last_token_usage: { input_tokens: 1000000, total_tokens: 1000010 } } });
    expect(maskRecord(line, createRedactor([]))).toBe(line);
  });

  test("a number that is a known secret is masked as a string: the line stays JSON", () => {
    const line = JSON.stringify({ type: "event", payload: { pin: 73914682 } });
    const masked = maskRecord(line, createRedactor(["73914682"]));
    expect(masked).not.toContain("73914682");
    expect(JSON.parse(masked)).toEqual({ type: "event", payload: { pin: "[REDACTED]" } });
  });

  test("as a run masks a record: its known secrets and token shapes go, a tool's own words stay", () => {
    const secret = fakeToken("sk-ant-api03-", 48);
    // Codex's tool description holds `load(key: string)`; a guess after `key:` would change it.
    const line = JSON.stringify({ tools: "load(key: string): returns the stored value", auth: secret });
    const masked = maskRecord(line, createRedactor([secret], { assignments: false }));
    expect(masked).toContain("load(key: string): returns the stored value");
    expect(masked).not.toContain(secret);
    expect(JSON.parse(masked)).toMatchObject({ auth: "[REDACTED]" });
  });
});
