import { randomBytes } from "node:crypto";
import { join } from "node:path";
import type { CallToolResult } from "@modelcontextprotocol/sdk/types.js";
import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { MAX_TRANSFER_BYTES } from "../../src/sandboxes/manager.js";
import { testEngine, testImage, type TestEngine } from "../helpers/docker-engine.js";
import { fakeToken } from "../helpers/fake-secrets.js";
import { git, makeRepo, scratchDir } from "../helpers/git.js";
import { startMcpChild, textOf, type McpChild } from "./child-client.js";
import { removeSandboxContainers, sandboxContainers } from "./docker-leftovers.js";

// `harness mcp` driven by the official SDK client over stdio, making Docker sandboxes from a
// repository on this machine on a real engine (the suite's).
const engine: TestEngine = await testEngine();
if (!engine.available) console.warn(`harness mcp on Docker: skipped: ${engine.reason}`);
const live = engine.available ? engine : undefined;

/** This file's sandboxes, and only they, start with it: the engine may hold others'. */
const PREFIX = `mcp-${randomBytes(3).toString("hex")}`;
/** A secret of the server's: its environment's, by a name that says so; shaped like no known token. */
const SECRET = fakeToken("mcp", 40);

let dir: { path: string; cleanup: () => Promise<void> };
let repo = "";
let server: McpChild | undefined;

beforeAll(async () => {
  dir = await scratchDir();
  repo = await makeRepo(join(dir.path, "repo"));
  if (!live) return;
  const image = await testImage(live.docker);
  server = await startMcpChild({
    PATH: process.env["PATH"],
    HOME: process.env["HOME"],
    DOCKER_HOST: live.host,
    HARNESS_DOCKER_IMAGE: image,
    HARNESS_SANDBOX: "docker",
    HARNESS_TEST_API_KEY: SECRET,
  });
}, 300_000);

afterAll(async () => {
  await server?.client.close();
  await server?.exited;
  if (live) await removeSandboxContainers(live.docker, PREFIX);
  await dir.cleanup();
}, 60_000);

async function call(name: string, args: Record<string, unknown> = {}): Promise<CallToolResult> {
  if (!server) throw new Error("the server did not start");
  return (await server.client.callTool({ name, arguments: args })) as CallToolResult;
}

/** A call that must succeed: its text is the failure message when it did not. */
async function ok(name: string, args: Record<string, unknown> = {}): Promise<CallToolResult> {
  const result = await call(name, args);
  expect(result.isError, `${name}: ${textOf(result)}`).toBeFalsy();
  return result;
}

/** A call that must fail as a tool error; returns its one readable line. */
async function refused(name: string, args: Record<string, unknown> = {}): Promise<string> {
  const result = await call(name, args);
  expect(result.isError, `${name} should have failed: ${textOf(result)}`).toBe(true);
  const text = textOf(result);
  expect(text).not.toMatch(/\n\s+at /);
  return text;
}

describe.skipIf(!live)("harness mcp over stdio, on Docker", { timeout: 120_000 }, () => {
  test("offers the sandbox tools", async () => {
    const { tools } = await server!.client.listTools();
    expect(tools.map((tool) => tool.name).sort()).toEqual([
      "sandbox_create",
      "sandbox_delete",
      "sandbox_diff",
      "sandbox_download",
      "sandbox_exec",
      "sandbox_list",
      "sandbox_pause",
      "sandbox_read_file",
      "sandbox_resume",
      "sandbox_upload",
      "sandbox_write_file",
    ]);
  });

  test("a sandbox from a local repository: run, write, read, diff, pause, resume, delete", async () => {
    const name = `${PREFIX}-work`;
    const created = await ok("sandbox_create", { repo, name, provider: "docker" });
    expect(created.structuredContent).toMatchObject({
      name,
      provider: "docker",
      state: "running",
      branch: `harness/sandbox/${name}`,
    });

    const readme = await ok("sandbox_exec", { name, command: ["cat", "README.md"] });
    expect(readme.structuredContent).toMatchObject({
      exit_code: 0,
      stdout: "# test repo\n",
      stderr: "",
      timed_out: false,
      truncated: false,
    });
    const failing = await ok("sandbox_exec", { name, shell: "echo to-stderr >&2; exit 3" });
    expect(failing.structuredContent).toMatchObject({ exit_code: 3, stderr: "to-stderr\n" });
    expect(textOf(failing)).toBe("exit code 3\nstderr:\nto-stderr\n");
    const piped = await ok("sandbox_exec", { name, command: ["wc", "-c"], stdin: "four" });
    expect(piped.structuredContent).toMatchObject({ exit_code: 0, stdout: "4\n" });

    await ok("sandbox_write_file", { name, path: "src/hello.txt", content: "hello from MCP\n" });
    expect(textOf(await ok("sandbox_read_file", { name, path: "src/hello.txt" }))).toBe("hello from MCP\n");
    const inFolder = await ok("sandbox_exec", { name, command: ["cat", "hello.txt"], cwd: "src" });
    expect(inFolder.structuredContent).toMatchObject({ stdout: "hello from MCP\n" });

    const diff = await ok("sandbox_diff", { name });
    expect(textOf(diff)).toContain("+++ b/src/hello.txt");
    expect(textOf(diff)).toContain("+hello from MCP");
    expect(diff.structuredContent).toMatchObject({ truncated: false });
    // The user's repository is untouched: the change is the sandbox's.
    expect(git(repo, "status", "--porcelain")).toBe("");

    await ok("sandbox_pause", { name });
    expect(await refused("sandbox_exec", { name, command: ["true"] })).toBe(
      `The sandbox ${name} is paused: sandbox_resume it before running anything in it`,
    );
    const paused = await ok("sandbox_list");
    expect(paused.structuredContent?.["sandboxes"]).toContainEqual(expect.objectContaining({ name, state: "paused" }));
    await ok("sandbox_resume", { name });
    expect((await ok("sandbox_exec", { name, command: ["true"] })).structuredContent).toMatchObject({ exit_code: 0 });

    expect(textOf(await ok("sandbox_delete", { name }))).toBe(`Deleted the sandbox ${name}`);
    const after = await ok("sandbox_list");
    const mine = (after.structuredContent?.["sandboxes"] as Array<{ name: string }>).filter((entry) =>
      entry.name.startsWith(PREFIX),
    );
    expect(mine).toEqual([]);
    expect(await sandboxContainers(live!.docker, PREFIX)).toEqual([]);
  });

  test("upload and download carry any bytes", async () => {
    const name = `${PREFIX}-bytes`;
    await ok("sandbox_create", { repo, name });
    const bytes = Buffer.from(Array.from({ length: 512 }, (_, index) => index % 256));
    await ok("sandbox_upload", { name, path: "data/all.bin", content_base64: bytes.toString("base64") });
    const size = await ok("sandbox_exec", { name, command: ["wc", "-c", "data/all.bin"] });
    expect(size.structuredContent).toMatchObject({ stdout: "512 data/all.bin\n" });
    const downloaded = await ok("sandbox_download", { name, path: "data/all.bin" });
    expect(Buffer.from(textOf(downloaded), "base64")).toEqual(bytes);
    expect(await refused("sandbox_read_file", { name, path: "data/all.bin" })).toBe(
      "data/all.bin is not UTF-8 text: sandbox_download gives its bytes (base64)",
    );
    expect(await refused("sandbox_upload", { name, path: "x.bin", content_base64: "not base64!" })).toMatch(
      /^content_base64 is not base64/,
    );
    await ok("sandbox_delete", { name });
  });

  test("the server's own secrets are masked in what it returns; other text comes back as it is", async () => {
    const name = `${PREFIX}-secret`;
    await ok("sandbox_create", { repo, name });
    const content = `token ${SECRET}\npassword=hunter2hunter2\n`;
    await ok("sandbox_write_file", { name, path: "notes.txt", content });
    const masked = "token [REDACTED]\npassword=hunter2hunter2\n";
    expect(textOf(await ok("sandbox_read_file", { name, path: "notes.txt" }))).toBe(masked);
    const cat = await ok("sandbox_exec", { name, command: ["cat", "notes.txt"] });
    expect(cat.structuredContent).toMatchObject({ stdout: masked });
    expect(textOf(cat)).not.toContain(SECRET);
    expect(textOf(await ok("sandbox_diff", { name }))).not.toContain(SECRET);
    expect(await refused("sandbox_download", { name, path: "notes.txt" })).toBe(
      "notes.txt holds a secret of this server's: it is not handed out",
    );
    await ok("sandbox_delete", { name });
  });

  test("mistakes are tool errors with one readable line, and leave nothing behind", async () => {
    const nope = `${PREFIX}-nope`;
    for (const [tool, args] of [
      ["sandbox_exec", { name: nope, command: ["true"] }],
      ["sandbox_read_file", { name: nope, path: "README.md" }],
      ["sandbox_diff", { name: nope }],
      ["sandbox_pause", { name: nope }],
      ["sandbox_delete", { name: nope }],
    ] as const)
      expect(await refused(tool, args)).toBe(`No sandbox is named ${nope}: sandbox_list shows them`);
    expect(await refused("sandbox_create", { repo, name: "Not_A_Name" })).toMatch(
      /^A sandbox name is 1 to 40 lower-case letters, digits and '-'/,
    );
    expect(await refused("sandbox_create", { repo: join(dir.path, "missing"), name: `${PREFIX}-missing` })).toMatch(
      /^The repository at .*missing has no commit to start from \(or is not a repository\)$/,
    );
    expect(await refused("sandbox_create", { repo: "not a repo" })).toMatch(
      /^"not a repo" is neither a local path .* nor a GitHub repository/,
    );

    // An image the engine does not have (no registry is reachable): said, and no container left.
    const noImage = `${PREFIX}-noimage`;
    expect(await refused("sandbox_create", { repo, name: noImage, image: "harness-no-such-image:never" })).toMatch(
      /The Docker image "harness-no-such-image:never" is not on the Docker Engine/,
    );
    expect(await sandboxContainers(live!.docker, noImage)).toEqual([]);

    const name = `${PREFIX}-bad`;
    await ok("sandbox_create", { repo, name });
    expect(await refused("sandbox_create", { repo, name })).toMatch(
      new RegExp(`^A sandbox named ${name} already exists`),
    );
    expect(await refused("sandbox_read_file", { name, path: "../../etc/passwd" })).toMatch(
      /^path confinement: .*\.\.\/\.\.\/etc\/passwd/,
    );
    expect(await refused("sandbox_write_file", { name, path: "../outside.txt", content: "x" })).toMatch(
      /^path confinement:/,
    );
    expect(await refused("sandbox_exec", { name, command: ["pwd"], cwd: "../.." })).toMatch(/^path confinement:/);
    expect(await refused("sandbox_exec", { name, command: ["true"], shell: "true" })).toBe(
      'Give exactly one of command (an argv list, e.g. ["npm", "test"]) or shell (a line for sh -c)',
    );
    expect(await refused("sandbox_exec", { name })).toMatch(/^Give exactly one of command/);

    // Files too large: to read as text, to download, and to write.
    await ok("sandbox_exec", {
      name,
      shell: "head -c 1048577 /dev/zero > big.txt; head -c 7340033 /dev/zero > huge.bin",
    });
    expect(await refused("sandbox_read_file", { name, path: "big.txt" })).toMatch(
      /big\.txt .*1048577.*over the 1048576-byte limit/,
    );
    expect(await refused("sandbox_download", { name, path: "huge.bin" })).toMatch(
      /huge\.bin .*7340033.*over the 7340032-byte limit/,
    );
    expect(
      await refused("sandbox_write_file", { name, path: "x.txt", content: "x".repeat(MAX_TRANSFER_BYTES + 1) }),
    ).toMatch(/sandbox_write_file: Too big: expected string to have <=16777216 characters at content/);

    await ok("sandbox_delete", { name });
    expect(await sandboxContainers(live!.docker, PREFIX)).toEqual([]);
  });
});
