import { request } from "node:http";
import { afterEach, describe, expect, test } from "vitest";
import { fail, hang, say, writeFile, type Turn } from "./script.js";
import { startModelServer, type ModelServer } from "./server.js";
import { planWrite, workingDirectory } from "./tools.js";

let server: ModelServer | undefined;
afterEach(async () => {
  await server?.close();
  server = undefined;
});

async function start(script: Turn[]): Promise<ModelServer> {
  server = await startModelServer({ script });
  return server;
}

const WRITE_TOOL = {
  name: "Write",
  description: "Writes a file",
  input_schema: { type: "object", properties: { file_path: { type: "string" }, content: { type: "string" } } },
};

function post(url: string, body: unknown, headers: Record<string, string> = {}): Promise<Response> {
  return fetch(url, {
    method: "POST",
    headers: { "content-type": "application/json", ...headers },
    body: JSON.stringify(body),
  });
}

/** The `data:` payloads of an SSE body, in order. */
async function events(response: Response): Promise<Array<Record<string, unknown>>> {
  const text = await response.text();
  return text
    .split("\n")
    .filter((line) => line.startsWith("data: "))
    .map((line) => JSON.parse(line.slice("data: ".length)) as Record<string, unknown>);
}

describe("scripted model server: Anthropic Messages", () => {
  test("a write turn streams a call of the declared Write tool at the prompt's working directory", async () => {
    const model = await start([
      writeFile("notes/a.txt", "hi\n", { text: "Writing.", usage: { inputTokens: 7, outputTokens: 3 } }),
    ]);
    const response = await post(
      `${model.url}/v1/messages`,
      {
        model: "claude-x",
        stream: true,
        system: [{ type: "text", text: "Primary working directory: /work/repo\nIs a git repo: yes" }],
        messages: [{ role: "user", content: "go" }],
        tools: [WRITE_TOOL],
      },
      { "x-api-key": "sk-ant-secret" },
    );
    expect(response.headers.get("content-type")).toBe("text/event-stream");
    const data = await events(response);
    expect(data.map((event) => event["type"])).toEqual([
      "message_start",
      "ping",
      "content_block_start",
      "content_block_delta",
      "content_block_stop",
      "content_block_start",
      "content_block_delta",
      "content_block_stop",
      "message_delta",
      "message_stop",
    ]);
    expect(data[0]).toMatchObject({ message: { model: "claude-x", usage: { input_tokens: 7 } } });
    expect(data[3]).toMatchObject({ delta: { type: "text_delta", text: "Writing." } });
    expect(data[5]).toMatchObject({ content_block: { type: "tool_use", name: "Write" } });
    const delta = data[6]?.["delta"] as { partial_json: string };
    expect(JSON.parse(delta.partial_json)).toEqual({ file_path: "/work/repo/notes/a.txt", content: "hi\n" });
    expect(data[8]).toMatchObject({ delta: { stop_reason: "tool_use" }, usage: { output_tokens: 3 } });

    expect(model.modelCalls()).toHaveLength(1);
    expect(model.requests[0]).toMatchObject({ api: "anthropic", turn: 0, headers: { "x-api-key": "[redacted]" } });
    expect(JSON.stringify(model.requests)).not.toContain("sk-ant-secret");
    expect(model.receivedCredential("sk-ant-secret")).toBe(true);
    expect(model.receivedCredential("sk-ant-other")).toBe(false);
  });

  test("calls without tools are side calls: answered, recorded, not counted as turns", async () => {
    const model = await start([say("scripted answer")]);
    const side = await post(`${model.url}/v1/messages`, { model: "m", max_tokens: 1, messages: [] });
    expect(await side.json()).toMatchObject({ type: "message", content: [{ type: "text", text: "ok" }] });
    const turn = await post(`${model.url}/v1/messages`, { model: "m", messages: [], tools: [WRITE_TOOL] });
    expect(await turn.json()).toMatchObject({
      content: [{ type: "text", text: "scripted answer" }],
      stop_reason: "end_turn",
    });
    expect(model.requests).toHaveLength(2);
    expect(model.modelCalls()).toHaveLength(1);
  });

  test("an error turn answers `repeat` calls with the provider's body, then the script moves on", async () => {
    const model = await start([fail(529, { repeat: 2, retryAfterSeconds: 0 }), say("recovered")]);
    const call = () => post(`${model.url}/v1/messages`, { model: "m", messages: [], tools: [WRITE_TOOL] });
    for (let attempt = 0; attempt < 2; attempt++) {
      const response = await call();
      expect(response.status).toBe(529);
      expect(response.headers.get("retry-after")).toBe("0");
      expect(await response.json()).toEqual({
        type: "error",
        error: { type: "overloaded_error", message: "Overloaded" },
      });
    }
    expect(await (await call()).json()).toMatchObject({ content: [{ text: "recovered" }] });
    expect(model.modelCalls().map((recorded) => recorded.turn)).toEqual([0, 0, 1]);
  });

  test("past the end of the script every call gets a plain closing answer", async () => {
    const model = await start([]);
    const response = await post(`${model.url}/v1/messages`, { model: "m", messages: [], tools: [WRITE_TOOL] });
    expect(await response.json()).toMatchObject({ content: [{ text: "The script has no more turns." }] });
  });

  test("a hang turn never answers; once the client goes, the server knows", async () => {
    const model = await start([hang]);
    const abort = new AbortController();
    const body = JSON.stringify({ model: "m", messages: [], tools: [WRITE_TOOL] });
    const pending = fetch(`${model.url}/v1/messages`, { method: "POST", body, signal: abort.signal }).then(
      () => "answered",
      () => "aborted",
    );
    await model.hangStarted();
    expect(model.openHangs()).toBe(1);
    abort.abort();
    expect(await pending).toBe("aborted");
    await model.hangsClosed();
    expect(model.openHangs()).toBe(0);
  });

  test("unknown routes get a 404 in Anthropic's error shape", async () => {
    const model = await start([]);
    const response = await fetch(`${model.url}/api/hello`, { method: "HEAD" });
    expect(response.status).toBe(404);
    expect(model.requests[0]).toMatchObject({ method: "HEAD", path: "/api/hello", api: "other" });
  });
});

describe("scripted model server: OpenAI Responses", () => {
  const codeModeTools = [
    {
      type: "additional_tools",
      tools: [
        {
          type: "namespace",
          name: "functions",
          tools: [
            {
              type: "custom",
              name: "exec",
              description: "declare const tools: { apply_patch(input: string): Promise<unknown>; };",
            },
          ],
        },
      ],
    },
    { type: "message", role: "user", content: [{ type: "input_text", text: "<cwd>/w</cwd>" }] },
  ];

  test("a write in Codex's code mode is an `exec` call running apply_patch; usage comes at the end", async () => {
    const model = await start([
      writeFile("a.txt", "one\ntwo\n", { usage: { inputTokens: 11, outputTokens: 5, cacheReadTokens: 2 } }),
    ]);
    const response = await post(`${model.openaiBaseUrl}/responses`, {
      model: "gpt-x",
      stream: true,
      input: codeModeTools,
    });
    const data = await events(response);
    expect(data.map((event) => event["type"])).toEqual([
      "response.created",
      "response.in_progress",
      "response.output_item.added",
      "response.output_item.done",
      "response.completed",
    ]);
    const item = data[3]?.["item"] as { type: string; name: string; input: string };
    expect(item).toMatchObject({ type: "custom_tool_call", name: "exec" });
    const patch = "*** Begin Patch\n*** Add File: a.txt\n+one\n+two\n*** End Patch";
    expect(item.input).toBe(`text(await tools.apply_patch(${JSON.stringify(patch)}));\n`);
    expect(data[4]).toMatchObject({
      response: {
        status: "completed",
        usage: { input_tokens: 11, output_tokens: 5, input_tokens_details: { cached_tokens: 2 } },
      },
    });
  });

  test("text streams as output_text deltas inside a message item", async () => {
    const model = await start([say("done")]);
    const response = await post(`${model.openaiBaseUrl}/responses`, {
      model: "gpt-x",
      stream: true,
      input: codeModeTools,
    });
    const data = await events(response);
    expect(data.find((event) => event["type"] === "response.output_text.delta")).toMatchObject({ delta: "done" });
    expect(data.find((event) => event["type"] === "response.output_item.done")).toMatchObject({
      item: { type: "message", role: "assistant", content: [{ type: "output_text", text: "done" }] },
    });
  });

  test("errors carry OpenAI's error body", async () => {
    const model = await start([fail(401)]);
    const response = await post(`${model.openaiBaseUrl}/responses`, { model: "gpt-x", input: codeModeTools });
    expect(response.status).toBe(401);
    expect(await response.json()).toMatchObject({ error: { code: "invalid_api_key", type: "invalid_request_error" } });
  });

  test("a WebSocket upgrade is refused with a plain HTTP status and recorded", async () => {
    const model = await start([]);
    const status = await new Promise<number | undefined>((resolve, reject) => {
      const req = request(`${model.openaiBaseUrl}/responses`, {
        headers: { connection: "Upgrade", upgrade: "websocket", authorization: "Bearer sk-secret" },
      });
      req.on("response", (res) => {
        res.resume();
        resolve(res.statusCode);
      });
      req.on("upgrade", () => {
        reject(new Error("the server accepted the upgrade"));
      });
      req.on("error", reject);
      req.end();
    });
    expect(status).toBe(426);
    expect(model.requests[0]).toMatchObject({ upgrade: true, headers: { authorization: "[redacted]" } });
    expect(model.receivedCredential("sk-secret")).toBe(true);
  });
});

describe("write planning", () => {
  const tool = (name: string, properties: string[], type = "function") => ({ name, type, properties, description: "" });

  test("pi's write tool takes `path`", () => {
    expect(planWrite({ path: "a.txt", content: "x" }, [tool("write", ["path", "content"])], "/w")).toEqual({
      name: "write",
      type: "function",
      input: { path: "/w/a.txt", content: "x" },
    });
  });

  test("a shell tool gets a heredoc when there is no write or patch tool", () => {
    const call = planWrite({ path: "a b.txt", content: "x" }, [tool("exec_command", ["cmd"])], "/w");
    expect(call).toEqual({
      name: "exec_command",
      type: "function",
      input: { cmd: "cat > '/w/a b.txt' <<'SCRIPTED_EOF'\nx\nSCRIPTED_EOF" },
    });
  });

  test("no tool that can write is an error, not a silent no-op", () => {
    expect(() => planWrite({ path: "a", content: "" }, [tool("read", ["path"])], undefined)).toThrow(
      /declares no tool/,
    );
  });

  test("the working directory is read from each CLI's prompt", () => {
    expect(workingDirectory({ system: "Primary working directory: /a/b\n" })).toBe("/a/b");
    expect(workingDirectory({ system: "Current working directory: /c" })).toBe("/c");
    expect(workingDirectory({ input: "<cwd>/d</cwd>" })).toBe("/d");
    expect(workingDirectory({ system: "nothing" })).toBeUndefined();
    // A continued session: the folder it continues in is told last.
    expect(
      workingDirectory({
        messages: ["Primary working directory: /old\n", "Primary working directory: /new (was /old)\n"],
      }),
    ).toBe("/new");
    expect(workingDirectory({ input: "<cwd>/old</cwd> … <cwd>/new</cwd>" })).toBe("/new");
  });
});
