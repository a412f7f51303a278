import { isAbsolute, join } from "node:path";
import type { ScriptedWrite } from "./script.js";

/**
 * Turning "write this file" into a call of the tool a CLI declared. CLIs name and shape their
 * write tools differently (Claude Code `Write` with `file_path`, pi `write` with `path`, Codex
 * `apply_patch` taking a patch), so the call is built from the request's own `tools` list.
 */

/** One tool as the request declared it, reduced to what choosing and calling it needs. */
export interface DeclaredTool {
  name: string;
  /** `function` for JSON-argument tools (every Anthropic tool); `custom` for free-form input. */
  type: string;
  /** Names of the JSON properties it takes; empty for free-form tools. */
  properties: string[];
  description: string;
}

/** A tool call ready to encode: JSON arguments, or free-form text for a `custom` tool. */
export type PlannedCall =
  { name: string; type: "function"; input: Record<string, unknown> } | { name: string; type: "custom"; input: string };

/**
 * The tools an Anthropic Messages or OpenAI Responses request declares: its `tools` list, plus
 * Codex's `additional_tools` input items, with namespaces flattened.
 */
export function declaredTools(body: unknown): DeclaredTool[] {
  if (!isRecord(body)) return [];
  const lists: unknown[] = [body["tools"]];
  if (Array.isArray(body["input"]))
    for (const item of body["input"] as unknown[])
      if (isRecord(item) && item["type"] === "additional_tools") lists.push(item["tools"]);
  return lists.flatMap((list) => (Array.isArray(list) ? flatten(list as unknown[]) : []));
}

function flatten(tools: unknown[]): DeclaredTool[] {
  return tools.flatMap((tool): DeclaredTool[] => {
    if (!isRecord(tool)) return [];
    if (tool["type"] === "namespace" && Array.isArray(tool["tools"])) return flatten(tool["tools"] as unknown[]);
    // Responses API function tools are flat; Chat Completions nests them under `function`.
    const fn = isRecord(tool["function"]) ? tool["function"] : tool;
    const name = fn["name"];
    if (typeof name !== "string") return [];
    const schema = fn["input_schema"] ?? fn["parameters"];
    const properties = isRecord(schema) && isRecord(schema["properties"]) ? Object.keys(schema["properties"]) : [];
    const type = tool["type"] === "custom" ? "custom" : "function";
    const description = typeof fn["description"] === "string" ? fn["description"] : "";
    return [{ name, type, properties, description }];
  });
}

/** The names of the declared tools, for assertions on what a CLI offered the model. */
export function toolNames(body: unknown): string[] {
  return declaredTools(body).map((tool) => tool.name);
}

/**
 * The call that writes `write` with one of `tools`: a dedicated write tool when there is one, else
 * a patch tool, else a shell tool. Throws when the CLI declared none of them, which a test should
 * see rather than a model that silently does nothing.
 */
export function planWrite(write: ScriptedWrite, tools: DeclaredTool[], cwd: string | undefined): PlannedCall {
  const path = cwd !== undefined && !isAbsolute(write.path) ? join(cwd, write.path) : write.path;
  const byName = (pattern: RegExp) => tools.find((tool) => pattern.test(tool.name));

  const writer = byName(/^write$/i);
  if (writer) {
    const pathKey = ["file_path", "path", "filePath", "filename"].find((key) => writer.properties.includes(key));
    const contentKey = ["content", "contents", "text"].find((key) => writer.properties.includes(key));
    if (pathKey !== undefined && contentKey !== undefined)
      return { name: writer.name, type: "function", input: { [pathKey]: path, [contentKey]: write.content } };
  }

  const patcher = byName(/^apply_patch$/);
  if (patcher) {
    const patch = addFilePatch(write.path, write.content);
    if (patcher.type === "custom") return { name: patcher.name, type: "custom", input: patch };
    return { name: patcher.name, type: "function", input: { input: patch } };
  }

  // Codex's "code mode": one free-form `exec` tool running JavaScript that calls nested tools.
  const codeMode = tools.find((tool) => tool.name === "exec" && tool.type === "custom");
  if (codeMode && /apply_patch\(input: string\)/.test(codeMode.description)) {
    const patch = addFilePatch(write.path, write.content);
    return { name: codeMode.name, type: "custom", input: `text(await tools.apply_patch(${JSON.stringify(patch)}));\n` };
  }

  const body = write.content.endsWith("\n") ? write.content : `${write.content}\n`;
  const script = `cat > ${shellQuote(path)} <<'SCRIPTED_EOF'\n${body}SCRIPTED_EOF`;
  const shell = byName(/^(bash|shell|exec_command|shell_command)$/i);
  if (shell) {
    if (shell.properties.includes("cmd")) return { name: shell.name, type: "function", input: { cmd: script } };
    if (shell.name === "shell" && shell.properties.includes("command"))
      return { name: shell.name, type: "function", input: { command: ["bash", "-lc", script] } };
    return { name: shell.name, type: "function", input: { command: script } };
  }
  throw new Error(`the request declares no tool that writes a file (tools: ${tools.map((t) => t.name).join(", ")})`);
}

/**
 * The call that runs `command` in the CLI's shell tool (Claude Code's `Bash`, pi's `bash`,
 * Codex's `exec_command` or `shell`). Throws when the CLI declared none.
 */
export function planShell(command: string, tools: DeclaredTool[]): PlannedCall {
  const shell = tools.find((tool) => /^(bash|shell|exec_command|shell_command)$/i.test(tool.name));
  if (shell) {
    if (shell.properties.includes("cmd")) return { name: shell.name, type: "function", input: { cmd: command } };
    if (shell.name === "shell" && shell.properties.includes("command"))
      return { name: shell.name, type: "function", input: { command: ["bash", "-lc", command] } };
    return { name: shell.name, type: "function", input: { command } };
  }
  // Codex's "code mode": one free-form `exec` tool running JavaScript that calls nested tools.
  const codeMode = tools.find((tool) => tool.name === "exec" && tool.type === "custom");
  if (codeMode && /exec_command\(/.test(codeMode.description))
    return {
      name: codeMode.name,
      type: "custom",
      input: `text(JSON.stringify(await tools.exec_command({ cmd: ${JSON.stringify(command)} })));\n`,
    };
  throw new Error(`the request declares no shell tool (tools: ${tools.map((t) => t.name).join(", ")})`);
}

/**
 * The agent's working directory as the CLI told the model in its prompt: Claude Code
 * ("Primary working directory: …"), pi ("Current working directory: …"), Codex (`<cwd>…</cwd>`).
 * The last one told: a continued session names the folder it worked in before and then, later
 * in the conversation, the one it continues in.
 */
export function workingDirectory(body: unknown): string | undefined {
  const text = JSON.stringify(body);
  const patterns = [
    /Primary working directory: ([^\\"<(]+)/g,
    /Current working directory: ([^\\"<]+)/g,
    /Working directory: ([^\\"<]+)/g,
    /<cwd>([^<]+)<\/cwd>/g,
  ];
  let last: { at: number; path: string } | undefined;
  for (const pattern of patterns) {
    for (const match of text.matchAll(pattern)) {
      const path = match[1]?.trim();
      if (path !== undefined && (last === undefined || match.index > last.at)) last = { at: match.index, path };
    }
  }
  return last?.path;
}

/** Codex's patch format for a new file; paths are relative to the session's working directory. */
function addFilePatch(path: string, content: string): string {
  const lines = content.replace(/\n$/, "").split("\n");
  return ["*** Begin Patch", `*** Add File: ${path}`, ...lines.map((line) => `+${line}`), "*** End Patch"].join("\n");
}

function shellQuote(text: string): string {
  return `'${text.replace(/'/g, `'\\''`)}'`;
}

export function isRecord(value: unknown): value is Record<string, unknown> {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}
