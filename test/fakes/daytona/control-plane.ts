import { createHash, randomUUID } from "node:crypto";
import { mkdir, rm } from "node:fs/promises";
import { join } from "node:path";
import type { FakeWorld, RequestContext } from "./context.js";
import { apiError, field, isRecord, num, present, sendEmpty, sendJson, str, stringMap } from "./http-util.js";
import type { AttachedSecret, FakeSandbox, FakeSnapshot, OrgSecret } from "./state.js";
import { killSandboxProcesses } from "./toolbox-process.js";

/** Placeholder the sandbox sees instead of an org secret's value (format from the SDK docs: `dtn_secret_<id>`). */
export function secretPlaceholder(id: string): string {
  return `dtn_secret_${id.replace(/-/g, "")}`;
}

export function addOrgSecret(world: FakeWorld, name: string, value: string, hosts: string[] = []): OrgSecret {
  const id = randomUUID();
  const secret: OrgSecret = { id, name, value, hosts, placeholder: secretPlaceholder(id), createdAt: Date.now() };
  world.secrets.set(id, secret);
  return secret;
}

export function addSnapshot(world: FakeWorld, name: string, extra: Partial<FakeSnapshot> = {}): FakeSnapshot {
  const snapshot: FakeSnapshot = {
    id: randomUUID(),
    name,
    state: "active",
    general: true,
    pendingPolls: 0,
    createdAt: Date.now(),
    ...extra,
  };
  world.snapshots.set(snapshot.id, snapshot);
  return snapshot;
}

/**
 * The API's BuildInfo for a Dockerfile build. guess: `snapshotRef` is the image the build produced; the fake
 * builds nothing, so it names one after a hash of the Dockerfile.
 */
function buildInfoDto(request: unknown, at: number): Record<string, unknown> | undefined {
  const dockerfile = str(request, "dockerfileContent");
  if (dockerfile === undefined) return undefined;
  const hashes = field(request, "contextHashes");
  const time = new Date(at).toISOString();
  return {
    dockerfileContent: dockerfile,
    ...(Array.isArray(hashes) ? { contextHashes: hashes } : {}),
    createdAt: time,
    updatedAt: time,
    snapshotRef: `fake-daytona/build:${createHash("sha256").update(dockerfile).digest("hex").slice(0, 12)}`,
  };
}

function findSnapshot(world: FakeWorld, idOrName: string): FakeSnapshot | undefined {
  return world.snapshots.get(idOrName) ?? [...world.snapshots.values()].find((s) => s.name === idOrName);
}

/**
 * `creating` turns `started` once `readyAt` passes, `stopping` and `starting` turn `stopped` and
 * `started` once their transition's time passes (lets the SDK exercise its polling waits).
 */
function refreshState(sandbox: FakeSandbox): void {
  if (sandbox.state === "creating" && sandbox.readyAt !== undefined && Date.now() >= sandbox.readyAt) {
    sandbox.state = "started";
    sandbox.updatedAt = Date.now();
  }
  if (sandbox.transition && Date.now() >= sandbox.transition.at) {
    sandbox.state = sandbox.transition.to;
    delete sandbox.transition;
    sandbox.updatedAt = Date.now();
  }
}

/** Live (not destroyed) sandbox by id or name. */
export function findSandbox(world: FakeWorld, idOrName: string): FakeSandbox | undefined {
  const sandbox =
    world.sandboxes.get(idOrName) ??
    [...world.sandboxes.values()].find((s) => s.name === idOrName && s.state !== "destroyed");
  if (!sandbox || sandbox.state === "destroyed") return undefined;
  refreshState(sandbox);
  return sandbox;
}

/**
 * The Sandbox DTO. `full` = GET/create shape; list items (SandboxListItem) lack env, volumes, buildInfo and the
 * network fields. Defaults (cpu 1, memory 1 GiB, disk 3 GiB, autoStop 15, autoArchive 7 days, autoDelete -1) are
 * the documented server defaults.
 */
function toDto(world: FakeWorld, sandbox: FakeSandbox, full: boolean): Record<string, unknown> {
  const dto: Record<string, unknown> = {
    id: sandbox.id,
    organizationId: sandbox.organizationId,
    name: sandbox.name,
    snapshot: sandbox.snapshot,
    user: sandbox.user,
    labels: { ...sandbox.labels },
    public: sandbox.public,
    target: sandbox.target,
    cpu: 1,
    gpu: 0,
    memory: 1,
    disk: 3,
    state: sandbox.state,
    desiredState:
      sandbox.transition?.to ??
      (sandbox.state === "stopped" ? "stopped" : sandbox.state === "destroyed" ? "destroyed" : "started"),
    recoverable: false,
    backupState: "None",
    autoStopInterval: sandbox.intervals.autoStopInterval,
    autoArchiveInterval: sandbox.intervals.autoArchiveInterval,
    autoDeleteInterval: sandbox.intervals.autoDeleteInterval,
    autoPauseInterval: sandbox.intervals.autoPauseInterval,
    createdAt: new Date(sandbox.createdAt).toISOString(),
    updatedAt: new Date(sandbox.updatedAt).toISOString(),
    lastActivityAt: new Date(sandbox.lastActivityAt).toISOString(),
    daemonVersion: "fake-daytona",
    runnerId: "fake-runner",
    networkBlockAll: sandbox.networkBlockAll,
  };
  if (sandbox.networkAllowList !== undefined) dto["networkAllowList"] = sandbox.networkAllowList;
  if (sandbox.domainAllowList !== undefined) dto["domainAllowList"] = sandbox.domainAllowList;
  // The model requires the field; an empty one still sends the SDK to `GET …/toolbox-proxy-url` (it tests truthiness).
  dto["toolboxProxyUrl"] = world.config.includeToolboxProxyUrl ? world.toolboxUrl : "";
  if (full) {
    // guess: secrets are not echoed in `env` (the placeholders live in the sandbox's process env only).
    dto["env"] = { ...sandbox.env };
    dto["volumes"] = [];
    const buildInfo = buildInfoDto(sandbox.buildInfo, sandbox.createdAt);
    if (buildInfo) dto["buildInfo"] = buildInfo;
  }
  return dto;
}

function snapshotDto(snapshot: FakeSnapshot): Record<string, unknown> {
  const now = new Date(snapshot.createdAt).toISOString();
  return {
    id: snapshot.id,
    organizationId: snapshot.general ? undefined : "fake-org",
    general: snapshot.general,
    name: snapshot.name,
    imageName: snapshot.imageName ?? snapshot.name,
    state: snapshot.state,
    size: null,
    entrypoint: snapshot.entrypoint ?? null,
    cpu: 1,
    gpu: 0,
    mem: 1,
    disk: 3,
    errorReason: null,
    createdAt: now,
    updatedAt: now,
    lastUsedAt: null,
    sourceSandboxId: null,
    ...(snapshot.dockerfile === undefined
      ? {}
      : { buildInfo: buildInfoDto({ dockerfileContent: snapshot.dockerfile }, snapshot.createdAt) }),
  };
}

function secretDto(secret: OrgSecret): Record<string, unknown> {
  const at = new Date(secret.createdAt).toISOString();
  return {
    id: secret.id,
    name: secret.name,
    placeholder: secret.placeholder,
    hosts: secret.hosts,
    createdAt: at,
    updatedAt: at,
  };
}

/** `secrets: [{ENV: secretName}, …]` → attached secrets; unknown names are a 400 (guess: text and status). */
function resolveSecrets(ctx: RequestContext, value: unknown): AttachedSecret[] {
  if (value === undefined || value === null) return [];
  if (!Array.isArray(value))
    throw apiError(400, "secrets must be an array of {ENV_NAME: secretName} objects", ctx.path);
  const attached: AttachedSecret[] = [];
  for (const item of value) {
    const map = stringMap(item);
    if (!map) throw apiError(400, "secrets must be an array of {ENV_NAME: secretName} objects", ctx.path);
    for (const [env, secretName] of Object.entries(map)) {
      const secret = [...ctx.world.secrets.values()].find((s) => s.name === secretName);
      if (!secret) throw apiError(400, `Secret ${secretName} not found`, ctx.path);
      attached.push({ env, secretName, placeholder: secret.placeholder });
    }
  }
  return attached;
}

function applySecretEnv(sandbox: FakeSandbox, previous: AttachedSecret[], next: AttachedSecret[]): void {
  for (const old of previous) {
    if (sandbox.processEnv[old.env] === old.placeholder) Reflect.deleteProperty(sandbox.processEnv, old.env);
  }
  for (const secret of next) sandbox.processEnv[secret.env] = secret.placeholder;
  sandbox.secrets = next;
}

function intervalParam(ctx: RequestContext, raw: string | undefined): number {
  const value = Number(raw);
  if (raw === undefined || !Number.isInteger(value))
    throw apiError(400, `Validation failed (numeric string is expected)`, ctx.path);
  return value;
}

/** Stops everything the sandbox runs (delete and stop). */
async function haltSandbox(sandbox: FakeSandbox): Promise<void> {
  sandbox.sessions.clear();
  await killSandboxProcesses(sandbox);
}

/**
 * The real API answers at once and destroys asynchronously (state destroying → destroyed); the fake is done before it
 * answers: processes killed, directory gone, later GET → 404.
 */
async function destroySandbox(sandbox: FakeSandbox): Promise<void> {
  sandbox.state = "destroyed";
  delete sandbox.transition;
  sandbox.deletedAt = Date.now();
  sandbox.updatedAt = sandbox.deletedAt;
  await haltSandbox(sandbox);
  await rm(sandbox.dir, { recursive: true, force: true });
}

async function createSandbox(ctx: RequestContext): Promise<void> {
  const { world, body } = ctx;
  if (!isRecord(body)) throw apiError(400, "request body must be a JSON object", ctx.path);
  const snapshotName =
    str(body, "snapshot") ?? (body["buildInfo"] === undefined ? world.config.defaultSnapshot : undefined);
  if (snapshotName !== undefined) {
    // Text and status from daytonaio/daytona apps/api sandbox.service.ts (BadRequestError).
    const snapshot = findSnapshot(world, snapshotName);
    if (!snapshot)
      throw apiError(
        400,
        `Snapshot ${snapshotName} not found. Did you add it through the Daytona Dashboard?`,
        ctx.path,
      );
    if (snapshot.state !== "active") throw apiError(400, `Snapshot ${snapshotName} is ${snapshot.state}`, ctx.path);
  }
  const labels = body["labels"] === undefined ? {} : stringMap(body["labels"]);
  const env = body["env"] === undefined ? {} : stringMap(body["env"]);
  if (!labels || !env) throw apiError(400, "labels and env must map strings to strings", ctx.path); // guess: text
  const secrets = resolveSecrets(ctx, body["secrets"]);
  const id = randomUUID();
  // guess: the name defaults to the id, and names are unique per organization (409 on reuse).
  const name = str(body, "name") ?? id;
  if (findSandbox(world, name)) throw apiError(409, `Sandbox with name ${name} already exists`, ctx.path);

  const dir = join(world.rootDir, id);
  const user = str(body, "user") ?? "daytona";
  const homeDir = join(dir, "home", user);
  await mkdir(homeDir, { recursive: true });
  await mkdir(join(dir, "tmp"), { recursive: true });
  const now = Date.now();
  const sandbox: FakeSandbox = {
    id,
    name,
    organizationId: world.config.organizationId,
    ...(snapshotName === undefined ? {} : { snapshot: snapshotName }),
    user,
    target: str(body, "target") ?? "us",
    labels,
    env,
    // A real sandbox starts from the image's env, not the host's: only the configured base env, plus the usual
    // login variables pointing inside the sandbox.
    processEnv: { ...world.config.baseEnv, HOME: homeDir, USER: user, TMPDIR: join(dir, "tmp"), ...env },
    secrets: [],
    public: field(body, "public") === true,
    networkBlockAll: field(body, "networkBlockAll") === true,
    ...present("networkAllowList", str(body, "networkAllowList")),
    ...present("domainAllowList", str(body, "domainAllowList")),
    ...(body["buildInfo"] === undefined ? {} : { buildInfo: body["buildInfo"] }),
    intervals: {
      autoStopInterval: num(body, "autoStopInterval") ?? 15,
      autoArchiveInterval: num(body, "autoArchiveInterval") ?? 7 * 24 * 60,
      autoDeleteInterval: num(body, "autoDeleteInterval") ?? -1,
      autoPauseInterval: num(body, "autoPauseInterval") ?? 0,
      ...present("ttlMinutes", num(body, "ttlMinutes")),
    },
    state: world.config.startDelayMs > 0 ? "creating" : "started",
    ...(world.config.startDelayMs > 0 ? { readyAt: now + world.config.startDelayMs } : {}),
    createdAt: now,
    updatedAt: now,
    lastActivityAt: now,
    activityRefreshes: [],
    dir,
    homeDir,
    workDir: homeDir,
    createBody: body,
    sessions: new Map(),
    commands: new Map(),
    processes: new Map(),
  };
  applySecretEnv(sandbox, [], secrets);
  world.sandboxes.set(id, sandbox);
  const live = [...world.sandboxes.values()].filter((s) => s.state !== "destroyed").length;
  world.maxLiveSandboxes = Math.max(world.maxLiveSandboxes, live);
  sendJson(ctx.res, 200, toDto(world, sandbox, true));
}

function listSandboxes(ctx: RequestContext): void {
  const { world, query } = ctx;
  let labelFilter: Record<string, string> = {};
  const rawLabels = query.get("labels");
  if (rawLabels) {
    let parsed: unknown;
    try {
      parsed = JSON.parse(rawLabels);
    } catch {
      parsed = undefined;
    }
    const map = stringMap(parsed);
    if (!map) throw apiError(400, "labels must be a JSON object of strings", ctx.path); // guess: text
    labelFilter = map;
  }
  const states = query.getAll("states").flatMap((s) => s.split(","));
  const snapshots = query.getAll("snapshots").flatMap((s) => s.split(","));
  const id = query.get("id");
  const name = query.get("name");
  const matches = [...world.sandboxes.values()]
    .filter((s) => s.state !== "destroyed")
    .map((s) => {
      refreshState(s);
      return s;
    })
    .filter((s) => Object.entries(labelFilter).every(([key, value]) => s.labels[key] === value))
    .filter((s) => states.length === 0 || states.includes(s.state))
    .filter((s) => snapshots.length === 0 || (s.snapshot !== undefined && snapshots.includes(s.snapshot)))
    .filter((s) => !id || s.id === id)
    .filter((s) => !name || s.name === name)
    .sort((a, b) => a.createdAt - b.createdAt);
  // Cursor = offset into the filtered list (opaque to the SDK, which only checks it for truthiness).
  const offset = Number(query.get("cursor") ?? "0") || 0;
  const limit = Number(query.get("limit") ?? "100") || 100;
  const page = matches.slice(offset, offset + limit);
  const next = offset + limit < matches.length ? String(offset + limit) : null;
  sendJson(ctx.res, 200, { items: page.map((s) => toDto(world, s, false)), nextCursor: next });
}

/** `/api/...` routes. Returns false when nothing matched. */
export async function handleControlPlane(ctx: RequestContext): Promise<boolean> {
  const { world, method, segments: seg, body } = ctx;
  const notFound = (idOrName: string) => apiError(404, `Sandbox with ID or name ${idOrName} not found`, ctx.path);

  if (seg[0] === "config" && seg.length === 1 && method === "GET") {
    // Only `sandbox.getMetrics()` reads this (for analyticsApiUrl); the rest is what the model requires, with
    // values that point nowhere real (guess: shapes of the OIDC and proxy values).
    const origin = world.apiUrl.replace(/\/api$/, "");
    sendJson(ctx.res, 200, {
      version: "fake-daytona",
      oidc: { issuer: `${origin}/oidc`, clientId: "fake-daytona", audience: "fake-daytona", provider: "auth0" },
      linkedAccountsEnabled: false,
      announcements: {},
      proxyTemplateUrl: `${origin}/preview/{{PORT}}-{{sandboxId}}`,
      proxyToolboxUrl: world.toolboxUrl,
      defaultSnapshot: world.config.defaultSnapshot,
      dashboardUrl: `${origin}/dashboard`,
      maxAutoArchiveInterval: 30 * 24 * 60,
      maintananceMode: false,
      environment: "fake",
      analyticsApiUrl: `${world.apiUrl}/analytics`,
    });
    return true;
  }

  if (seg[0] === "sandbox") {
    if (seg.length === 1 && method === "POST") {
      await createSandbox(ctx);
      return true;
    }
    if (seg.length === 1 && method === "GET") {
      listSandboxes(ctx);
      return true;
    }
    const idOrName = seg[1];
    if (idOrName === undefined) return false;
    const sandbox = findSandbox(world, idOrName);
    const action = seg[2];

    if (seg.length === 2 && method === "GET") {
      if (!sandbox) throw notFound(idOrName);
      sendJson(ctx.res, 200, toDto(world, sandbox, true));
      return true;
    }
    if (seg.length === 2 && method === "DELETE") {
      if (!sandbox) throw notFound(idOrName);
      // Daytona's sandbox.service destroy(): a sandbox mid-stop or mid-start is pending, and refused.
      if (sandbox.transition) throw apiError(409, "Sandbox state change in progress", ctx.path);
      await destroySandbox(sandbox);
      // The client expects the Sandbox; the SDK takes it in (Sandbox.js delete()), so it must be a whole DTO.
      sendJson(ctx.res, 200, toDto(world, sandbox, true));
      return true;
    }
    if (!sandbox) throw notFound(idOrName);

    if (action === "labels" && seg.length === 3 && method === "PUT") {
      const labels = stringMap(field(body, "labels"));
      if (!labels) throw apiError(400, "labels must map strings to strings", ctx.path); // guess: text
      sandbox.labels = labels; // replaces the whole set
      sandbox.updatedAt = Date.now();
      sendJson(ctx.res, 200, { labels });
      return true;
    }
    if (
      seg.length === 4 &&
      method === "POST" &&
      ["autostop", "autoarchive", "autodelete", "autopause", "ttl"].includes(action ?? "")
    ) {
      const value = intervalParam(ctx, seg[3]);
      const key = (
        {
          autostop: "autoStopInterval",
          autoarchive: "autoArchiveInterval",
          autodelete: "autoDeleteInterval",
          autopause: "autoPauseInterval",
          ttl: "ttlMinutes",
        } as const
      )[action as "autostop" | "autoarchive" | "autodelete" | "autopause" | "ttl"];
      sandbox.intervals[key] = value;
      sandbox.updatedAt = Date.now();
      sendJson(ctx.res, 200, toDto(world, sandbox, true)); // guess: the API answers with the DTO; the SDK ignores it
      return true;
    }
    if (action === "last-activity" && seg.length === 3 && method === "POST") {
      const now = Date.now();
      sandbox.lastActivityAt = now;
      sandbox.activityRefreshes.push(now);
      sendEmpty(ctx.res, 201);
      return true;
    }
    // Start and stop follow Daytona's sandbox.service (apps/api): a started sandbox's start answers it as it is;
    // anything mid-transition is a 409 "state change in progress"; a stop of what is not started, or a start of what
    // is not stopped, is a 400; a stop of an ephemeral sandbox (auto-delete 0) destroys it. guess: the 400 texts.
    if (action === "start" && seg.length === 3 && method === "POST") {
      if (sandbox.transition) throw apiError(409, "Sandbox state change in progress", ctx.path);
      if (sandbox.state !== "started") {
        if (sandbox.state !== "stopped") throw apiError(400, "Sandbox is not in valid state", ctx.path);
        sandbox.state = "starting";
        sandbox.transition = { to: "started", at: Date.now() + world.config.stateChangeMs };
        sandbox.updatedAt = Date.now();
      }
      sendJson(ctx.res, 200, toDto(world, sandbox, true));
      return true;
    }
    if (action === "stop" && seg.length === 3 && method === "POST") {
      if (sandbox.transition) throw apiError(409, "Sandbox state change in progress", ctx.path);
      if (sandbox.state !== "started") throw apiError(400, "Sandbox is not in a stoppable state", ctx.path);
      if (sandbox.intervals.autoDeleteInterval === 0) {
        await destroySandbox(sandbox);
      } else {
        // Stopping a real sandbox stops its container: every process and session is gone, the files stay.
        await haltSandbox(sandbox);
        sandbox.state = "stopping";
        sandbox.transition = { to: "stopped", at: Date.now() + world.config.stateChangeMs };
        sandbox.updatedAt = Date.now();
      }
      sendJson(ctx.res, 200, toDto(world, sandbox, true));
      return true;
    }
    if (action === "toolbox-proxy-url" && seg.length === 3 && method === "GET") {
      sendJson(ctx.res, 200, { url: world.toolboxUrl });
      return true;
    }
    if (action === "secrets" && seg.length === 3 && method === "PUT") {
      // Deviation: the SDK docs say a sandbox created without secrets needs a restart before new ones work; the fake
      // applies the placeholders to processes spawned from now on.
      applySecretEnv(sandbox, sandbox.secrets, resolveSecrets(ctx, field(body, "secrets")));
      sandbox.updatedAt = Date.now();
      sendJson(ctx.res, 200, toDto(world, sandbox, true));
      return true;
    }
    return false;
  }

  if (seg[0] === "snapshots") {
    if (seg.length === 1 && method === "POST") {
      const name = str(body, "name");
      if (!name) throw apiError(400, "name is required", ctx.path);
      // guess: text
      if (findSnapshot(world, name)) throw apiError(409, `Snapshot with name ${name} already exists`, ctx.path);
      const buildInfo = field(body, "buildInfo");
      const dockerfile = str(buildInfo, "dockerfileContent");
      const imageName = str(body, "imageName");
      const pendingPolls = world.config.snapshotPendingPolls;
      const snapshot = addSnapshot(world, name, {
        general: false,
        state: pendingPolls > 0 ? "pending" : "active",
        pendingPolls,
        ...(dockerfile === undefined ? {} : { dockerfile }),
        ...(imageName === undefined ? {} : { imageName }),
        ...(field(body, "entrypoint") === undefined ? {} : { entrypoint: field(body, "entrypoint") }),
        createBody: body,
      });
      sendJson(ctx.res, 200, snapshotDto(snapshot));
      return true;
    }
    if (seg.length === 1 && method === "GET") {
      const items = [...world.snapshots.values()].map(snapshotDto);
      sendJson(ctx.res, 200, { items, total: items.length, page: 1, totalPages: 1 });
      return true;
    }
    const snapshot = seg[1] === undefined ? undefined : findSnapshot(world, seg[1]);
    if (seg.length === 2 && (method === "GET" || method === "DELETE")) {
      if (!snapshot) throw apiError(404, `Snapshot ${seg[1] ?? ""} not found`, ctx.path); // guess: text
      if (method === "DELETE") {
        world.snapshots.delete(snapshot.id);
        sendEmpty(ctx.res, 200);
        return true;
      }
      // `pendingPolls` = GETs still to come before the build "finishes"; the GET that brings it to 0 says active.
      if (snapshot.state === "pending") {
        snapshot.pendingPolls -= 1;
        if (snapshot.pendingPolls <= 0) snapshot.state = "active";
      }
      sendJson(ctx.res, 200, snapshotDto(snapshot));
      return true;
    }
    return false;
  }

  if (seg[0] === "secret") {
    if (seg.length === 1 && method === "POST") {
      const name = str(body, "name");
      const value = str(body, "value");
      if (!name || value === undefined) throw apiError(400, "name and value are required", ctx.path);
      const hosts = field(body, "hosts");
      const secret = addOrgSecret(
        world,
        name,
        value,
        Array.isArray(hosts) ? hosts.filter((h): h is string => typeof h === "string") : [],
      );
      sendJson(ctx.res, 200, secretDto(secret));
      return true;
    }
    if ((seg.length === 1 || (seg.length === 2 && seg[1] === "paginated")) && method === "GET") {
      const items = [...world.secrets.values()].map(secretDto);
      sendJson(ctx.res, 200, seg.length === 1 ? items : { items, total: items.length, nextCursor: null });
      return true;
    }
    const secret = seg[1] === undefined ? undefined : world.secrets.get(seg[1]);
    if (seg.length === 2 && (method === "GET" || method === "DELETE")) {
      if (!secret) throw apiError(404, `Secret ${seg[1] ?? ""} not found`, ctx.path); // guess: text
      if (method === "DELETE") world.secrets.delete(secret.id);
      if (method === "DELETE") sendEmpty(ctx.res, 200);
      else sendJson(ctx.res, 200, secretDto(secret));
      return true;
    }
  }
  return false;
}
