import { Ajv, _, type ErrorObject, type ValidateFunction } from "ajv";
import addFormatsModule from "ajv-formats";
import standaloneCodeModule from "ajv/dist/standalone/index.js";
import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";
import {
  buildClientCatalog,
  clientVersions,
  MODELS_ID,
  type ClientCatalog,
  type ClientName,
  type ClientOperation,
  type JsonSchema,
} from "./client-models.js";
import { DESCRIBED_ROUTES, NOT_DESCRIBED, type FakeRoute, type UndescribedRoute } from "./routes.js";

/*
 * Holds the fake Daytona to Daytona's generated client models: the route table (routes.ts) is joined
 * to the clients' operations once, at test set-up, and every request body the fake receives and every
 * JSON answer it sends on a described route is checked against the operation's models. A problem is
 * returned as text naming the route, the operation, the model and the field path.
 */

// ajv-formats and ajv's standalone are CommonJS with a default export; under ESM interop they may arrive wrapped.
const addFormats = ((addFormatsModule as unknown as { default?: unknown }).default ?? addFormatsModule) as unknown as (
  ajv: Ajv,
) => Ajv;
const standaloneCode = ((standaloneCodeModule as unknown as { default?: unknown }).default ??
  standaloneCodeModule) as unknown as (ajv: Ajv, refs: Record<string, string>) => string;
const require = createRequire(import.meta.url);

/** A described route with the models the client gives it. */
export interface ResolvedRoute extends FakeRoute {
  client: ClientName;
  /** `SandboxApi.createSandbox`. */
  operation: string;
  /** The client's own template, e.g. `/sandbox/{sandboxIdOrName}`. */
  clientPath: string;
  /** The JSON body the client sends; absent when it sends none (or multipart). */
  request?: { model: string; required: boolean };
  response: { model: string; kind: "json" | "void" | "binary" };
}

interface ModelCache {
  versions: string;
  routes: ResolvedRoute[];
  /** Only the definitions the routes reach. */
  definitions: Record<string, JsonSchema>;
  /** `<METHOD> <path> request|response` → schema. */
  schemas: Record<string, JsonSchema>;
}

const PREFIXES: { client: ClientName; prefix: RegExp }[] = [
  { client: "api", prefix: /^\/api(?=\/)/ },
  { client: "toolbox", prefix: /^\/toolbox\/\{sandboxId\}(?=\/)/ },
];

function schemaKey(route: FakeRoute, part: "request" | "response"): string {
  return `${route.method} ${route.path} ${part}`;
}

/** The same path shape: the same literal segments, a parameter wherever the other has one. */
function sameShape(a: string, b: string): boolean {
  const left = a.split("/");
  const right = b.split("/");
  return (
    left.length === right.length &&
    left.every((segment, index) => {
      const other = right[index] ?? "";
      const param = /^\{.+\}$/;
      return param.test(segment) ? param.test(other) : segment === other;
    })
  );
}

function splitPlane(route: FakeRoute): { client: ClientName; clientPath: string } | undefined {
  for (const { client, prefix } of PREFIXES) {
    if (prefix.test(route.path)) return { client, clientPath: route.path.replace(prefix, "") };
  }
  return undefined;
}

function findOperations(operations: readonly ClientOperation[], route: FakeRoute): ClientOperation[] {
  const plane = splitPlane(route);
  if (!plane) return [];
  return operations.filter(
    (op) => op.client === plane.client && op.method === route.method && sameShape(op.path, plane.clientPath),
  );
}

/** Names of the definitions a schema reaches, following `$ref`s through the definitions. */
function reachable(schemas: readonly JsonSchema[], definitions: Record<string, JsonSchema>): Set<string> {
  const seen = new Set<string>();
  const visit = (node: unknown): void => {
    if (Array.isArray(node)) {
      node.forEach(visit);
      return;
    }
    if (node === null || typeof node !== "object") return;
    for (const [key, value] of Object.entries(node)) {
      if (key === "$ref" && typeof value === "string") {
        const name = value.slice(`${MODELS_ID}#/definitions/`.length);
        if (!seen.has(name)) {
          seen.add(name);
          visit(definitions[name]);
        }
      } else {
        visit(value);
      }
    }
  };
  schemas.forEach(visit);
  return seen;
}

/**
 * Joins the route table to the clients. Throws naming every described route no client operation
 * matches (or more than one does), and every "not described" plain route a client now describes.
 */
export function buildModelCache(
  routes: readonly FakeRoute[] = DESCRIBED_ROUTES,
  undescribed: readonly UndescribedRoute[] = NOT_DESCRIBED,
  catalog: ClientCatalog = buildClientCatalog(),
): ModelCache {
  const problems: string[] = [];
  const resolved: ResolvedRoute[] = [];
  const schemas: Record<string, JsonSchema> = {};
  for (const route of routes) {
    const plane = splitPlane(route);
    const found = findOperations(catalog.operations, route);
    const [operation] = found;
    if (!plane || !operation || found.length > 1) {
      const which = found.map((op) => `${op.api}.${op.name}`).join(", ");
      problems.push(
        `${route.method} ${route.path}: ${
          !plane
            ? "is under neither /api nor /toolbox/{sandboxId}"
            : found.length === 0
              ? "no operation in the generated clients has this method and path"
              : `several operations match (${which})`
        }`,
      );
      continue;
    }
    const entry: ResolvedRoute = {
      ...route,
      client: operation.client,
      operation: `${operation.api}.${operation.name}`,
      clientPath: operation.path,
      response: {
        model: operation.response.model,
        kind: operation.response.schema === null ? "void" : operation.response.schema === "binary" ? "binary" : "json",
      },
    };
    const body = operation.body;
    if (body && body.schema !== null && body.schema !== "binary") {
      entry.request = { model: body.model, required: body.required };
      schemas[schemaKey(route, "request")] = body.schema;
    }
    const response = operation.response.schema;
    if (response !== null && response !== "binary") schemas[schemaKey(route, "response")] = response;
    resolved.push(entry);
  }
  for (const route of undescribed.filter((r) => !r.upgrade)) {
    const found = findOperations(catalog.operations, route);
    if (route.method !== "*" && found.length > 0) {
      problems.push(`${route.method} ${route.path}: listed as not described, but the clients describe it`);
    }
  }
  if (problems.length > 0) {
    throw new Error(
      `the fake Daytona's route table (test/fakes/daytona/models/routes.ts) disagrees with ${catalog.versions}:\n` +
        problems.map((p) => `- ${p}`).join("\n") +
        "\nFix the route's method or path, or list it as not described with the reason.",
    );
  }
  const keep = reachable(Object.values(schemas), catalog.definitions);
  const definitions = Object.fromEntries(Object.entries(catalog.definitions).filter(([name]) => keep.has(name)));
  return { versions: catalog.versions, routes: resolved, definitions, schemas };
}

function cacheDir(): string {
  return join(dirname(require.resolve("vitest/package.json")), "..", ".cache", "harness-daytona-models");
}

/** Keyed by the client versions and by this checker's own sources, which decide what the cache holds. */
function cachePath(): string {
  const key = createHash("sha256");
  for (const file of ["./client-models.ts", "./routes.ts", "./validator.ts"]) {
    key.update(readFileSync(new URL(file, import.meta.url)));
  }
  const versions = clientVersions().replace(/[^A-Za-z0-9.@-]+/g, "_");
  return join(cacheDir(), `${versions}-${key.digest("hex").slice(0, 16)}.json`);
}

function writeAtomically(path: string, text: string): void {
  mkdirSync(dirname(path), { recursive: true });
  const partial = `${path}.${String(process.pid)}.tmp`;
  writeFileSync(partial, text);
  renameSync(partial, path);
}

function newAjv(cache: ModelCache, source: boolean): Ajv {
  const ajv = new Ajv({
    strict: false,
    allErrors: true,
    // The compiled module requires ajv-formats itself rather than carrying the format functions inline.
    ...(source ? { code: { source: true, formats: _`require("ajv-formats/dist/formats").fullFormats` } } : {}),
  });
  addFormats(ajv);
  ajv.addSchema({ $id: MODELS_ID, definitions: cache.definitions });
  return ajv;
}

type CompiledModule = Record<string, ValidateFunction> & { __keys: Record<string, string> };

/**
 * Compiles every schema into one CommonJS module beside the cache (ajv standalone code), so a test
 * file loads ready validators instead of compiling the models itself.
 */
function writeCompiled(cache: ModelCache, path: string): void {
  const ajv = newAjv(cache, true);
  const exports: Record<string, string> = {};
  const names: Record<string, string> = {};
  Object.entries(cache.schemas).forEach(([key, schema], index) => {
    const id = `v${String(index)}`;
    ajv.addSchema(schema, id);
    exports[id] = id;
    names[key] = id;
  });
  writeAtomically(path, `${standaloneCode(ajv, exports)}\nmodule.exports.__keys = ${JSON.stringify(names)};\n`);
}

/** Builds (or finds) the cache and its compiled validators; the test set-up calls this once per run. */
export function prepareModelCache(): { path: string; cache: ModelCache } {
  const path = cachePath();
  let cache: ModelCache;
  if (existsSync(path)) {
    cache = JSON.parse(readFileSync(path, "utf8")) as ModelCache;
  } else {
    cache = buildModelCache();
    writeAtomically(path, JSON.stringify(cache));
  }
  const compiled = path.replace(/\.json$/, ".cjs");
  if (!existsSync(compiled)) writeCompiled(cache, compiled);
  return { path, cache };
}

export type RouteMatch =
  { described: true; route: ResolvedRoute } | { described: false; route: UndescribedRoute } | undefined;

/** `{name}` is one segment; a trailing `/{name*}` is the rest of the path, which may be empty or absent. */
function patternOf(path: string): RegExp {
  const source = path
    .split("/")
    .map((segment, index) => {
      if (/^\{[A-Za-z]+\*\}$/.test(segment)) return "(?:/.*)?";
      if (/^\{[A-Za-z]+\}$/.test(segment)) return `${index === 0 ? "" : "/"}[^/]+`;
      return `${index === 0 ? "" : "/"}${segment.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")}`;
    })
    .join("");
  return new RegExp(`^${source}$`);
}

/** Literal segments first: `/secret/paginated` must win over `/secret/{secretId}`. */
function specificity(path: string): number {
  return path.split("/").filter((segment) => !segment.startsWith("{")).length;
}

function describeErrors(errors: readonly ErrorObject[] | null | undefined, topModel: string): string {
  return (errors ?? [])
    .slice(0, 6)
    .map((error) => {
      const params = error.params as { missingProperty?: string; additionalProperty?: string; allowedValues?: [] };
      let where = `body${error.instancePath}`;
      let message = error.message ?? "is invalid";
      if (error.keyword === "required" && params.missingProperty !== undefined) {
        where += `/${params.missingProperty}`;
        message = "is required but missing";
      } else if (error.keyword === "additionalProperties" && params.additionalProperty !== undefined) {
        where += `/${params.additionalProperty}`;
        message = "is not a field of the model";
      } else if (error.keyword === "enum" && Array.isArray(params.allowedValues)) {
        message += ` (${params.allowedValues.map(String).join(", ")})`;
      }
      const definitions = [...error.schemaPath.matchAll(/definitions\/([^/]+)/g)];
      const model = definitions.at(-1)?.[1] ?? topModel;
      return `${where} ${message} [model ${model}]`;
    })
    .join("; ");
}

export class DaytonaModelValidator {
  private readonly routes: { pattern: RegExp; match: NonNullable<RouteMatch>; specificity: number }[];
  private readonly compiledModule: CompiledModule | undefined;
  private fallback: Ajv | undefined;
  private readonly compiled = new Map<string, ValidateFunction>();

  constructor(
    private readonly cache: ModelCache,
    compiledPath?: string,
  ) {
    this.compiledModule =
      compiledPath !== undefined && existsSync(compiledPath) ? (require(compiledPath) as CompiledModule) : undefined;
    const all: NonNullable<RouteMatch>[] = [
      ...cache.routes.map((route) => ({ described: true as const, route })),
      ...NOT_DESCRIBED.map((route) => ({ described: false as const, route })),
    ];
    this.routes = all
      .map((match) => ({ pattern: patternOf(match.route.path), match, specificity: specificity(match.route.path) }))
      .sort((a, b) => b.specificity - a.specificity);
  }

  /** The process-wide validator: from the cache the test set-up wrote, else built here once. */
  static shared(): DaytonaModelValidator {
    if (!sharedValidator) {
      const { path, cache } = prepareModelCache();
      sharedValidator = new DaytonaModelValidator(cache, path.replace(/\.json$/, ".cjs"));
    }
    return sharedValidator;
  }

  get versions(): string {
    return this.cache.versions;
  }

  get describedRoutes(): readonly ResolvedRoute[] {
    return this.cache.routes;
  }

  /** The route a request (or upgrade) takes; undefined when the table has none. */
  match(method: string, path: string, upgrade: boolean): RouteMatch {
    for (const { pattern, match } of this.routes) {
      const route = match.route;
      const upgradeOk = match.described ? !upgrade : match.route.upgrade === upgrade;
      if (upgradeOk && (route.method === "*" || route.method === method) && pattern.test(path)) return match;
    }
    return undefined;
  }

  private validator(key: string): ValidateFunction | undefined {
    const id = this.compiledModule?.__keys[key];
    const precompiled = id === undefined ? undefined : this.compiledModule?.[id];
    if (precompiled) return precompiled;
    const schema = this.cache.schemas[key];
    if (schema === undefined) return undefined;
    let validate = this.compiled.get(key);
    if (!validate) {
      this.fallback ??= newAjv(this.cache, false);
      validate = this.fallback.compile(schema as object);
      this.compiled.set(key, validate);
    }
    return validate;
  }

  private label(route: ResolvedRoute): string {
    return `${route.method} ${route.path} (${route.operation})`;
  }

  /** Problems with a request body; `body` is the parsed JSON, undefined when none (or not JSON) was sent. */
  checkRequest(route: ResolvedRoute, body: unknown): string[] {
    const label = `${this.label(route)}: request`;
    if (!route.request) {
      return body === undefined ? [] : [`${label} carries a JSON body, but the client sends none on this route`];
    }
    if (body === undefined) {
      return route.request.required ? [`${label} has no JSON body; the client sends ${route.request.model}`] : [];
    }
    const validate = this.validator(schemaKey(route, "request"));
    if (!validate || validate(body)) return [];
    return [`${label} does not match ${route.request.model}: ${describeErrors(validate.errors, route.request.model)}`];
  }

  /**
   * Problems with a success answer; `body` is undefined when the fake sent none. Error answers are not
   * checked: the generated clients carry no error models.
   */
  checkResponse(route: ResolvedRoute, status: number, body: unknown): string[] {
    if (status < 200 || status >= 300) return [];
    const label = `${this.label(route)}: response ${String(status)}`;
    const { model, kind } = route.response;
    if (kind === "void") {
      return body === undefined ? [] : [`${label} carries a JSON body, but the client expects none (void)`];
    }
    if (kind === "binary") return body === undefined ? [] : [`${label} is JSON, but the client expects a file`];
    if (body === undefined) return [`${label} has no body; the client expects ${model}`];
    const validate = this.validator(schemaKey(route, "response"));
    if (!validate || validate(body)) return [];
    return [`${label} does not match ${model}: ${describeErrors(validate.errors, model)}`];
  }
}

let sharedValidator: DaytonaModelValidator | undefined;
