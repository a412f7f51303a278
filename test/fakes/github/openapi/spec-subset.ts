import { createHash } from "node:crypto";
import { existsSync, mkdirSync, readFileSync, renameSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname, join } from "node:path";

/*
 * The part of GitHub's own OpenAPI description (`@octokit/openapi`) that the fake GitHub serves.
 * The full descriptions are 11–13 MB of JSON each; parsing them in every test file would cost
 * more than the tests, so the operations the fake serves, and every component they reach, are
 * copied once into a small file keyed by the package version and the route list. References are
 * rewritten to point into one shared schema per description (`SPEC_ID-<name>`), so ajv compiles
 * each component once.
 */

/** The descriptions every request and response is held to: github.com and the oldest GHES shipped. */
export const DESCRIPTIONS = ["api.github.com", "ghes-3.17"] as const;
export type DescriptionName = (typeof DESCRIPTIONS)[number];

export const SPEC_ID = "github-openapi";

export interface RouteKey {
  method: string;
  /** The fake's template, e.g. `/repos/{owner}/{repo}/contents/{path*}`. */
  template: string;
}

export interface SubsetParameter {
  name: string;
  in: "path" | "query" | "header" | "cookie";
  required: boolean;
  schema: unknown;
}

export interface SubsetOperation {
  operationId: string;
  parameters: SubsetParameter[];
  /** JSON request body schema, when the operation takes one. */
  body?: { required: boolean; schema: unknown };
  /** Status → JSON schema; `null` when that status has no JSON body (204, 304, 302). */
  responses: Record<string, unknown>;
}

export interface DescriptionSubset {
  /** `METHOD /spec/template` → operation. */
  operations: Record<string, SubsetOperation>;
  components: { schemas: Record<string, unknown> };
}

export interface SpecSubset {
  packageVersion: string;
  /** Where the subset is cached; compiled validators are written beside it. */
  cacheFile?: string;
  descriptions: Record<DescriptionName, DescriptionSubset>;
}

const require = createRequire(import.meta.url);

function packageRoot(): string {
  return dirname(require.resolve("@octokit/openapi/package.json"));
}

export function openapiPackageVersion(): string {
  const pkg = JSON.parse(readFileSync(join(packageRoot(), "package.json"), "utf8")) as { version: string };
  return pkg.version;
}

/** The description's template for a fake template: `{path*}` (may hold slashes) is `{path}` there. */
export function specTemplate(template: string): string {
  return template.replace(/\{([a-z_]+)\*\}/g, "{$1}");
}

export function operationKey(method: string, template: string): string {
  return `${method.toUpperCase()} ${specTemplate(template)}`;
}

type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** Resolves a local `$ref` (`#/components/...`) against the whole description. */
function resolvePointer(document: Json, ref: string): Json {
  if (!ref.startsWith("#/")) throw new Error(`unsupported $ref ${ref}`);
  let node: Json = document;
  for (const raw of ref.slice(2).split("/")) {
    const part = raw.replace(/~1/g, "/").replace(/~0/g, "~");
    if (node === null || typeof node !== "object" || Array.isArray(node) || !(part in node)) {
      throw new Error(`dangling $ref ${ref}`);
    }
    node = node[part] as Json;
  }
  return node;
}

/** Follows `$ref`s at the top of a parameter/response/requestBody object (not inside schemas). */
function deref(document: Json, node: Json): Json {
  let current = node;
  for (let hops = 0; hops < 10; hops++) {
    if (current && typeof current === "object" && !Array.isArray(current) && typeof current["$ref"] === "string") {
      current = resolvePointer(document, current["$ref"]);
    } else {
      return current;
    }
  }
  throw new Error("$ref chain too long");
}

/**
 * Copies a schema, collecting the component schemas it references and rewriting each reference
 * into the shared schema's id.
 */
function copySchema(document: Json, schema: Json, schemas: Record<string, Json>, base: string): Json {
  if (Array.isArray(schema)) return schema.map((item) => copySchema(document, item, schemas, base));
  if (schema === null || typeof schema !== "object") return schema;
  const copied = copyObject(document, schema, schemas, base);
  return schema["nullable"] === true ? allowNull(copied) : copied;
}

/**
 * OpenAPI 3.0's `nullable: true` in JSON Schema terms: GitHub's description also puts it beside
 * `allOf`/`anyOf` without a `type`, which ajv refuses, so such a schema becomes "null or this".
 */
function allowNull(copied: Record<string, Json>): Json {
  const type = copied["type"];
  if (typeof type === "string" && !copied["enum"]) return { ...copied, type: [type, "null"] };
  return { anyOf: [{ type: "null" }, copied] };
}

function copyObject(document: Json, schema: { [key: string]: Json }, schemas: Record<string, Json>, base: string) {
  const out: Record<string, Json> = {};
  for (const [key, value] of Object.entries(schema)) {
    if (key === "$ref" && typeof value === "string") {
      const match = /^#\/components\/schemas\/(.+)$/.exec(value);
      if (!match?.[1]) throw new Error(`unsupported schema $ref ${value}`);
      const name = match[1];
      if (!(name in schemas)) {
        schemas[name] = true; // placeholder: breaks cycles before the copy below recurses
        schemas[name] = copySchema(document, resolvePointer(document, value), schemas, base);
      }
      out[key] = `${base}#/components/schemas/${name}`;
    } else if (key === "example" || key === "examples" || key === "description" || key === "nullable") {
      continue; // prose and samples only make the cached subset large
    } else {
      out[key] = copySchema(document, value, schemas, base);
    }
  }
  return out;
}

function jsonSchemaOf(document: Json, content: Json): Json | undefined {
  if (!content || typeof content !== "object" || Array.isArray(content)) return undefined;
  for (const [type, media] of Object.entries(content)) {
    if (!/json/.test(type) || !media || typeof media !== "object" || Array.isArray(media)) continue;
    return media["schema"] ?? null;
  }
  return undefined;
}

function extractOperation(
  document: Json,
  operation: Json,
  schemas: Record<string, Json>,
  base: string,
): SubsetOperation {
  const op = operation as Record<string, Json>;
  const parameters: SubsetParameter[] = [];
  for (const raw of (op["parameters"] ?? []) as Json[]) {
    const parameter = deref(document, raw) as Record<string, Json>;
    parameters.push({
      name: typeof parameter["name"] === "string" ? parameter["name"] : "",
      in: parameter["in"] as SubsetParameter["in"],
      required: parameter["required"] === true,
      schema: copySchema(document, parameter["schema"] ?? {}, schemas, base),
    });
  }
  const operationId = typeof op["operationId"] === "string" ? op["operationId"] : "";
  const subset: SubsetOperation = { operationId, parameters, responses: {} };
  if (op["requestBody"]) {
    const body = deref(document, op["requestBody"]) as Record<string, Json>;
    const schema = jsonSchemaOf(document, body["content"] ?? null);
    if (schema !== undefined) {
      subset.body = { required: body["required"] === true, schema: copySchema(document, schema, schemas, base) };
    }
  }
  for (const [status, raw] of Object.entries((op["responses"] ?? {}) as Record<string, Json>)) {
    const response = deref(document, raw) as Record<string, Json>;
    const schema = jsonSchemaOf(document, response["content"] ?? null);
    subset.responses[status] = schema === undefined ? null : copySchema(document, schema, schemas, base);
  }
  return subset;
}

/** Builds the subset for `routes` from the installed package; throws naming any route a description lacks. */
export function buildSpecSubset(routes: readonly RouteKey[]): SpecSubset {
  const descriptions = {} as Record<DescriptionName, DescriptionSubset>;
  const missing: string[] = [];
  for (const name of DESCRIPTIONS) {
    const document = JSON.parse(readFileSync(join(packageRoot(), "generated", `${name}.json`), "utf8")) as Json;
    const paths = (document as Record<string, Json>)["paths"] as Record<string, Record<string, Json>>;
    const schemas: Record<string, Json> = {};
    const operations: Record<string, SubsetOperation> = {};
    for (const route of routes) {
      const operation = paths[specTemplate(route.template)]?.[route.method.toLowerCase()];
      if (!operation) {
        missing.push(`${route.method} ${route.template} (${name})`);
        continue;
      }
      const base = `${SPEC_ID}-${name}`;
      operations[operationKey(route.method, route.template)] = extractOperation(document, operation, schemas, base);
    }
    descriptions[name] = { operations, components: { schemas } };
  }
  if (missing.length > 0) {
    throw new Error(
      `the fake GitHub serves routes GitHub's API description does not have: ${missing.join(", ")}. ` +
        "Check the route's spelling against docs.github.com/rest, or drop it from the fake.",
    );
  }
  return { packageVersion: openapiPackageVersion(), descriptions };
}

function cachePath(routes: readonly RouteKey[]): string {
  const key = createHash("sha256")
    .update(routes.map((r) => `${r.method} ${r.template}`).join("\n"))
    .update(readFileSync(new URL(import.meta.url)))
    // The compiled validators are cached beside the subset, so their compiler is part of the key.
    .update(readFileSync(new URL("./validator.ts", import.meta.url)))
    .digest("hex")
    .slice(0, 16);
  const root = join(dirname(require.resolve("vitest/package.json")), "..", ".cache", "harness-openapi");
  return join(root, `${openapiPackageVersion()}-${key}.json`);
}

/**
 * The subset for `routes`, from the cache when it was built for this package version, route list
 * and extractor; otherwise built and cached (written whole, then renamed, so a parallel reader
 * never sees half a file).
 */
export function loadSpecSubset(routes: readonly RouteKey[]): SpecSubset {
  const path = cachePath(routes);
  if (existsSync(path)) return { ...(JSON.parse(readFileSync(path, "utf8")) as SpecSubset), cacheFile: path };
  const subset = buildSpecSubset(routes);
  mkdirSync(dirname(path), { recursive: true });
  const partial = `${path}.${String(process.pid)}.tmp`;
  writeFileSync(partial, JSON.stringify(subset));
  renameSync(partial, path);
  return { ...subset, cacheFile: path };
}

export function subsetCachePath(subset: SpecSubset): string {
  if (!subset.cacheFile) throw new Error("the subset was not loaded through loadSpecSubset");
  return subset.cacheFile;
}
