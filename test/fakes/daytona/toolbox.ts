import type { RequestContext, ToolboxContext } from "./context.js";
import { findSandbox } from "./control-plane.js";
import { field, HttpError, sendJson, str, stringArray, stringMap } from "./http-util.js";
import type { FakeSandbox } from "./state.js";
import { handleFiles } from "./toolbox-files.js";
import { handleGit } from "./toolbox-git.js";
import { handleProcess } from "./toolbox-process.js";

/**
 * Resolves the sandbox a toolbox request addresses. guess: the toolbox proxy answers an unknown/deleted sandbox with
 * 404. One that is not running (stopping, stopped, starting, creating) gets the 400 Daytona's own issue tracker
 * reports from its toolbox for a stopped sandbox ("…no IP address found. Is the Sandbox started?").
 */
export function toolboxSandbox(ctx: Pick<RequestContext, "world" | "path">, sandboxId: string): FakeSandbox {
  const sandbox = findSandbox(ctx.world, sandboxId);
  if (!sandbox)
    throw new HttpError(404, { statusCode: 404, message: `Sandbox ${sandboxId} not found`, source: "DAYTONA_PROXY" });
  if (sandbox.state !== "started") {
    throw new HttpError(400, {
      statusCode: 400,
      message:
        "bad request: failed to resolve container IP after 3 attempts: no IP address found. Is the Sandbox started?",
      source: "DAYTONA_PROXY",
    });
  }
  return sandbox;
}

const ENV_NAME = /^[^=\0]+$/;

/** `POST /env {set?, unset?, unsetValuePrefix?}`: changes the env of processes spawned from now on. */
function updateEnv(ctx: ToolboxContext): void {
  const { body, sandbox } = ctx;
  const set = field(body, "set") === undefined ? {} : stringMap(field(body, "set"));
  const unset = field(body, "unset") === undefined ? [] : stringArray(body, "unset");
  const prefix = str(body, "unsetValuePrefix");
  if (!set || !unset)
    throw new HttpError(400, {
      statusCode: 400,
      message: "set must map strings to strings and unset must list names",
      source: "DAYTONA_DAEMON",
    });
  for (const name of [...Object.keys(set), ...unset]) {
    // guess: the daemon rejects names the OS cannot hold (it may accept more than a shell can `export`).
    if (!ENV_NAME.test(name))
      throw new HttpError(400, {
        statusCode: 400,
        message: `invalid environment variable name: ${JSON.stringify(name)}`,
        source: "DAYTONA_DAEMON",
      });
  }
  // Order per the toolbox model docs: unset, then the value-prefix sweep (sparing keys of `set`), then set.
  for (const name of unset) Reflect.deleteProperty(sandbox.processEnv, name);
  if (prefix) {
    for (const [name, value] of Object.entries(sandbox.processEnv)) {
      if (value.startsWith(prefix) && !(name in set)) Reflect.deleteProperty(sandbox.processEnv, name);
    }
  }
  Object.assign(sandbox.processEnv, set);
  // The client types the answer as a string map; guess: what the daemon puts in it (the SDK ignores it).
  sendJson(ctx.res, 200, {});
}

/** `/toolbox/{sandboxId}/...` routes. */
export async function handleToolbox(base: RequestContext, sandboxId: string): Promise<boolean> {
  const sandbox = toolboxSandbox(base, sandboxId);
  sandbox.lastToolboxRequestAt = Date.now();
  const ctx: ToolboxContext = { ...base, sandbox };
  const route = `${ctx.method} ${ctx.segments.join("/")}`;
  if (route === "GET work-dir") {
    sendJson(ctx.res, 200, { dir: sandbox.workDir });
    return true;
  }
  if (route === "GET user-home-dir") {
    sendJson(ctx.res, 200, { dir: sandbox.homeDir });
    return true;
  }
  if (route === "GET version") {
    sendJson(ctx.res, 200, { version: "fake-daytona" });
    return true;
  }
  if (route === "POST env") {
    updateEnv(ctx);
    return true;
  }
  return (await handleGit(ctx)) || (await handleProcess(ctx)) || (await handleFiles(ctx));
}
