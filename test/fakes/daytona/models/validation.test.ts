import { afterAll, beforeAll, describe, expect, test } from "vitest";
import { startFakeDaytona, type FakeDaytona } from "../server.js";
import { buildClientCatalog, parseApiJs, type ClientCatalog } from "./client-models.js";
import { DESCRIBED_ROUTES } from "./routes.js";
import { buildModelCache, DaytonaModelValidator, type ResolvedRoute } from "./validator.js";

/*
 * The fake Daytona is held to Daytona's generated client models: what the check refuses and how the
 * refusal reads. Tests that provoke violations take them, so the set-up's afterEach stays quiet.
 */

const validator = DaytonaModelValidator.shared();

function described(method: string, path: string): ResolvedRoute {
  const match = validator.match(method, path, false);
  if (!match?.described) throw new Error(`no described route for ${method} ${path}`);
  return match.route;
}

let fake: FakeDaytona;

async function call(method: string, path: string, body?: unknown): Promise<{ status: number; json: unknown }> {
  const response = await fetch(`http://127.0.0.1:${String(fake.port)}${path}`, {
    method,
    headers: {
      Authorization: `Bearer ${fake.apiKey}`,
      ...(body === undefined ? {} : { "Content-Type": "application/json" }),
    },
    ...(body === undefined ? {} : { body: JSON.stringify(body) }),
  });
  const text = await response.text();
  return { status: response.status, json: text === "" ? undefined : (JSON.parse(text) as unknown) };
}

async function newSandbox(): Promise<Record<string, unknown>> {
  const created = await call("POST", "/api/sandbox", { labels: { app: "models-test" } });
  expect(created.status).toBe(200);
  return created.json as Record<string, unknown>;
}

beforeAll(async () => {
  fake = await startFakeDaytona();
});

afterAll(async () => {
  await fake.close();
});

describe("the route table is taken from the generated clients", () => {
  let catalog: ClientCatalog;
  beforeAll(() => {
    catalog = buildClientCatalog();
  });

  test("every described route resolves to one client operation with its request and response models", () => {
    expect(validator.describedRoutes.map((r) => `${r.method} ${r.path}`)).toEqual(
      DESCRIBED_ROUTES.map((r) => `${r.method} ${r.path}`),
    );
    expect(described("POST", "/api/sandbox")).toMatchObject({
      operation: "SandboxApi.createSandbox",
      request: { model: "CreateSandbox", required: true },
      response: { model: "Sandbox", kind: "json" },
    });
    expect(described("GET", "/api/secret/paginated").operation).toBe("SecretApi.listSecretsPaginated");
    expect(described("GET", "/api/secret/abc").operation).toBe("SecretApi.getSecret");
    expect(described("POST", "/toolbox/sb-1/process/session/s1/exec")).toMatchObject({
      operation: "ProcessApi.sessionExecuteCommand",
      clientPath: "/process/session/{sessionId}/exec",
      request: { model: "SessionExecuteRequest" },
      response: { model: "SessionExecuteResponse" },
    });
    expect(described("GET", "/toolbox/sb-1/files/download").response.kind).toBe("binary");
    expect(described("POST", "/toolbox/sb-1/git/clone").response.kind).toBe("void");
  });

  test("a route the clients do not have stops the suite before it starts", () => {
    expect(() => buildModelCache([{ method: "GET", path: "/api/sandbox/{id}/flux" }], [], catalog)).toThrow(
      /GET \/api\/sandbox\/\{id\}\/flux: no operation in the generated clients has this method and path/,
    );
    expect(() => buildModelCache([{ method: "GET", path: "/flux" }], [], catalog)).toThrow(
      /GET \/flux: is under neither \/api nor \/toolbox\/\{sandboxId\}/,
    );
  });

  test("a route listed as not described that a client does describe is refused", () => {
    const undescribed = [{ method: "POST", path: "/api/sandbox", upgrade: false, reason: "none" }];
    expect(() => buildModelCache([], undescribed, catalog)).toThrow(
      /POST \/api\/sandbox: listed as not described, but the clients describe it/,
    );
  });

  test("operations are read from the generated axios parameter creator", () => {
    const source = [
      "const FooApiAxiosParamCreator = function (configuration) {",
      "    return {",
      "        doThing: async (thingId, thingRequest, verbose, options = {}) => {",
      "            const localVarPath = `/things/{thingId}`",
      "            const localVarRequestOptions = { method: 'PUT', ...baseOptions, ...options };",
      "            localVarQueryParameter['verbose'] = verbose;",
      "            localVarRequestOptions.data = (0, common_1.serializeDataIfNeeded)(thingRequest, x, configuration);",
      "        },",
      "    };",
      "};",
      "const FooApiFp = function (configuration) {};",
    ].join("\n");
    expect(parseApiJs(source)).toEqual([
      {
        name: "doThing",
        method: "PUT",
        path: "/things/{thingId}",
        bodyParam: "thingRequest",
        form: false,
        query: ["verbose"],
      },
    ]);
  });

  test("schemas follow the .d.ts: `?` is optional, the rest required, enums their literal values", () => {
    const sandbox = catalog.definitions["api.Sandbox"] as { required: string[]; properties: Record<string, unknown> };
    expect(sandbox.required).toEqual(expect.arrayContaining(["id", "toolboxProxyUrl", "cpu"]));
    // `'state'?: SandboxState` in the .d.ts.
    expect(sandbox.required).not.toContain("state");
    expect(sandbox.required).not.toContain("errorReason");
    const state = sandbox.properties["state"] as { enum: string[] };
    expect(state.enum).toEqual(expect.arrayContaining(["started", "stopped", "destroyed"]));
    const snapshot = catalog.definitions["api.SnapshotDto"] as { properties: Record<string, unknown> };
    expect(snapshot.properties["size"]).toEqual({ type: ["number", "null"] });
    expect(snapshot.properties["createdAt"]).toEqual({ type: "string", format: "date-time" });
  });
});

describe("the validator names the route, the model and the field", () => {
  test("a Sandbox answer with a wrong state, a missing id, a text cpu and an unknown field", async () => {
    const dto = await newSandbox();
    const route = described("GET", "/api/sandbox/x");
    expect(validator.checkResponse(route, 200, dto)).toEqual([]);
    const withoutId: Record<string, unknown> = { ...dto };
    delete withoutId["id"];
    const problems = validator.checkResponse(route, 200, { ...withoutId, state: "running", cpu: "1", flux: true });
    expect(problems).toHaveLength(1);
    const [problem] = problems;
    expect(problem).toMatch(
      /^GET \/api\/sandbox\/\{sandboxIdOrName\} \(SandboxApi\.getSandbox\): response 200 does not match Sandbox: /,
    );
    expect(problem).toContain("body/id is required but missing [model Sandbox]");
    expect(problem).toContain("body/state must be equal to one of the allowed values (");
    expect(problem).toContain("body/cpu must be number [model Sandbox]");
    expect(problem).toContain("body/flux is not a field of the model [model Sandbox]");
  });

  test("a nested model is named where the field fails", () => {
    const route = described("GET", "/toolbox/sb-1/process/session/s1");
    expect(validator.checkResponse(route, 200, { sessionId: "s1", commands: [{ id: "c1", command: "ls" }] })).toEqual(
      [],
    );
    expect(validator.checkResponse(route, 200, { sessionId: "s1", commands: [{ id: "c1", exitCode: 0 }] })).toEqual([
      "GET /toolbox/{sandboxId}/process/session/{sessionId} (ProcessApi.getSession): response 200 does not match " +
        "Session: body/commands/0/command is required but missing [model toolbox.Command]",
    ]);
  });

  test("request bodies, empty answers where a model is expected, and bodies where none is", () => {
    const execute = described("POST", "/toolbox/sb-1/process/execute");
    expect(validator.checkRequest(execute, { command: "ls", timeout: "10" })).toEqual([
      "POST /toolbox/{sandboxId}/process/execute (ProcessApi.executeCommand): request does not match " +
        "ExecuteRequest: body/timeout must be number [model toolbox.ExecuteRequest]",
    ]);
    expect(validator.checkRequest(execute, undefined)).toEqual([
      "POST /toolbox/{sandboxId}/process/execute (ProcessApi.executeCommand): request has no JSON body; " +
        "the client sends ExecuteRequest",
    ]);
    const remove = described("DELETE", "/api/sandbox/x");
    expect(validator.checkResponse(remove, 200, undefined)).toEqual([
      "DELETE /api/sandbox/{sandboxIdOrName} (SandboxApi.deleteSandbox): response 200 has no body; " +
        "the client expects Sandbox",
    ]);
    const clone = described("POST", "/toolbox/sb-1/git/clone");
    expect(validator.checkResponse(clone, 200, {})).toEqual([
      "POST /toolbox/{sandboxId}/git/clone (GitApi.cloneRepository): response 200 carries a JSON body, " +
        "but the client expects none (void)",
    ]);
    // Error answers have no model in the generated clients.
    expect(validator.checkResponse(remove, 404, { statusCode: 404, message: "gone" })).toEqual([]);
  });
});

describe("the fake Daytona checks what passes through it", () => {
  test("an answer that breaks its model is recorded against the fake, naming route and field", async () => {
    const dto = await newSandbox();
    const sandbox = fake.sandbox(String(dto["id"]));
    // A state the model does not have, as a fake bug would produce.
    (sandbox as { state: string }).state = "running";
    const got = await call("GET", `/api/sandbox/${String(dto["id"])}`);
    expect(got.status).toBe(200);
    sandbox.state = "started";
    const violations = fake.takeViolations();
    expect(violations).toHaveLength(1);
    expect(violations[0]).toMatch(
      /^GET \/api\/sandbox\/\{sandboxIdOrName\} \(SandboxApi\.getSandbox\): response 200 does not match Sandbox: /,
    );
    expect(violations[0]).toContain("body/state must be equal to one of the allowed values");
  });

  test("a request that breaks its model is recorded, and the fake still answers", async () => {
    const dto = await newSandbox();
    const ran = await call("POST", `/toolbox/${String(dto["id"])}/process/execute`, { command: "true", cwd: 7 });
    expect(ran.status).toBe(200);
    expect(fake.takeViolations()).toEqual([
      "POST /toolbox/{sandboxId}/process/execute (ProcessApi.executeCommand): request does not match " +
        "ExecuteRequest: body/cwd must be string [model toolbox.ExecuteRequest]",
    ]);
  });

  test("a route outside the table fails loudly", async () => {
    const got = await call("GET", "/api/flux-capacitor");
    expect(got.status).toBe(404);
    expect(fake.takeViolations()).toEqual([
      "GET /api/flux-capacitor: the fake Daytona has no such route: it is neither in DESCRIBED_ROUTES nor in " +
        "NOT_DESCRIBED (test/fakes/daytona/models/routes.ts)",
    ]);
  });

  test("routes the app does not use yet answer in their models too", async () => {
    const dto = await newSandbox();
    const id = String(dto["id"]);
    const ok = async (method: string, path: string, body?: unknown): Promise<unknown> => {
      const got = await call(method, path, body);
      expect(got.status, `${method} ${path}`).toBeLessThan(300);
      return got.json;
    };
    await ok("GET", "/api/config");
    await ok("POST", `/api/sandbox/${id}/autoarchive/60`);
    await ok("POST", `/api/sandbox/${id}/autodelete/120`);
    await ok("POST", `/api/sandbox/${id}/autopause/30`);
    await ok("POST", `/api/sandbox/${id}/ttl/90`);
    const secret = (await ok("POST", "/api/secret", { name: "models-key", value: "not-a-real-value" })) as {
      id: string;
    };
    await ok("GET", "/api/secret");
    await ok("GET", "/api/secret/paginated");
    await ok("GET", `/api/secret/${secret.id}`);
    await ok("PUT", `/api/sandbox/${id}/secrets`, { secrets: [{ MODELS_KEY: "models-key" }] });
    await ok("DELETE", `/api/secret/${secret.id}`);
    await ok("POST", "/api/snapshots", {
      name: "models-snapshot",
      buildInfo: { dockerfileContent: "FROM node:22\n" },
    });
    await ok("GET", "/api/snapshots");
    await ok("DELETE", "/api/snapshots/models-snapshot");
    await ok("GET", `/toolbox/${id}/version`);
    await ok("POST", `/toolbox/${id}/git/init`, { path: "repo", initial_branch: "main" });
    await ok("POST", `/toolbox/${id}/git/commit`, {
      path: "repo",
      message: "empty",
      author: "Harness",
      email: "harness@example.invalid",
      allow_empty: true,
    });
    expect(fake.takeViolations()).toEqual([]);
  });
});
