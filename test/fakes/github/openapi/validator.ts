import { Ajv, _, type ErrorObject, type ValidateFunction } from "ajv";
import addFormatsModule from "ajv-formats";
import standaloneCodeModule from "ajv/dist/standalone/index.js";
import { existsSync, mkdirSync, renameSync, writeFileSync } from "node:fs";
import { createRequire } from "node:module";
import { dirname } from "node:path";
import {
  DESCRIPTIONS,
  loadSpecSubset,
  operationKey,
  SPEC_ID,
  type DescriptionName,
  type RouteKey,
  type SpecSubset,
  type SubsetOperation,
  subsetCachePath,
} from "./spec-subset.js";

/*
 * Holds the fake GitHub to GitHub's own description: every request it accepts and every answer
 * it sends is checked against the operation's parameters, request body and response schema in
 * each description. A problem is returned as text naming the route, the description and the
 * schema path, so the test that caused it can say exactly what is wrong.
 */

// ajv-formats and ajv's standalone are CommonJS with a default export; under ESM interop they may arrive wrapped.
const addFormats = ((addFormatsModule as unknown as { default?: unknown }).default ?? addFormatsModule) as unknown as (
  ajv: Ajv,
) => Ajv;
const standaloneCode = ((standaloneCodeModule as unknown as { default?: unknown }).default ??
  standaloneCodeModule) as unknown as (ajv: Ajv, refs: Record<string, string>) => string;
const require = createRequire(import.meta.url);

export interface ValidationProblem {
  /** `POST /repos/{owner}/{repo}/issues/comments/{comment_id}/reactions`. */
  route: string;
  description: DescriptionName;
  part: "request" | "response";
  status?: number;
  message: string;
}

export function formatProblem(problem: ValidationProblem): string {
  const status = problem.status === undefined ? "" : ` ${String(problem.status)}`;
  return `${problem.route}: ${problem.part}${status} violates ${problem.description}'s description: ${problem.message}`;
}

/** Formats GitHub's description uses that only annotate (ajv-formats does not know them). */
const ANNOTATION_FORMATS = ["int32", "int64", "binary", "repo.nwo", "ssh-key", "ssh-key fingerprint"];

/**
 * `email` as ajv-formats reads it, plus the noreply addresses GitHub gives app bots
 * (`41898282+github-actions[bot]@users.noreply.github.com`): GitHub's own answers carry them
 * in commit authors, and RFC 5321's dot-atom has no brackets, so the strict format alone would
 * call GitHub's real data a violation.
 */
const EMAIL_SOURCE = (() => {
  const { email } = (require("ajv-formats/dist/formats") as { fullFormats: { email: RegExp } }).fullFormats;
  const plain = email.source.replace(/^\^/, "").replace(/\$$/, "");
  return `^(?:${plain}|\\d+\\+[a-z0-9-]+\\[bot\\]@users\\.noreply\\.[a-z0-9.-]+)$`;
})();

function newAjv(subset: SpecSubset, coerceTypes: boolean, source: boolean): Ajv {
  const email = _`new RegExp(${EMAIL_SOURCE}, "i")`;
  const formats = _`Object.assign({}, require("ajv-formats/dist/formats").fullFormats, { email: ${email} })`;
  const ajv = new Ajv({
    strict: false,
    allErrors: true,
    coerceTypes,
    ...(source ? { code: { source: true, formats } } : {}),
  });
  addFormats(ajv);
  ajv.addFormat("email", new RegExp(EMAIL_SOURCE, "i"));
  for (const format of ANNOTATION_FORMATS) ajv.addFormat(format, true);
  for (const name of DESCRIPTIONS) {
    ajv.addSchema({ $id: `${SPEC_ID}-${name}`, components: subset.descriptions[name].components });
  }
  return ajv;
}

/**
 * Every schema a check can need, by key. Path and query values arrive as text, so a parameter's
 * schema is wrapped in an object for ajv to coerce the text into the type it means.
 */
function schemaKeys(subset: SpecSubset): { key: string; schema: object; coerce: boolean }[] {
  const keys: { key: string; schema: object; coerce: boolean }[] = [];
  for (const name of DESCRIPTIONS) {
    for (const [opKey, operation] of Object.entries(subset.descriptions[name].operations)) {
      for (const parameter of operation.parameters) {
        keys.push({
          key: paramKey(name, opKey, parameter.in, parameter.name),
          schema: { type: "object", properties: { value: parameter.schema } },
          coerce: true,
        });
      }
      if (operation.body)
        keys.push({ key: `${name} ${opKey} body`, schema: operation.body.schema as object, coerce: false });
      for (const [status, schema] of Object.entries(operation.responses)) {
        if (schema !== null) keys.push({ key: `${name} ${opKey} ${status}`, schema: schema as object, coerce: false });
      }
    }
  }
  return keys;
}

function paramKey(name: DescriptionName, opKey: string, where: string, parameter: string): string {
  return `${name} ${opKey} ${where}:${parameter}`;
}

function compiledModulePath(subset: SpecSubset, coerce: boolean): string {
  return subsetCachePath(subset).replace(/\.json$/, coerce ? ".coercing.cjs" : ".cjs");
}

/**
 * Compiles every schema once into CommonJS modules beside the cached subset (ajv's standalone
 * code): compiling GitHub's schemas takes about two seconds, which each test file would otherwise
 * pay, with 100–200 ms pauses inside tests that measure the event loop.
 */
export function writeCompiledValidators(subset: SpecSubset): void {
  for (const coerce of [false, true]) {
    const path = compiledModulePath(subset, coerce);
    if (existsSync(path)) continue;
    const ajv = newAjv(subset, coerce, true);
    const exports: Record<string, string> = {};
    const names: Record<string, string> = {};
    schemaKeys(subset)
      .filter((entry) => entry.coerce === coerce)
      .forEach((entry, index) => {
        const id = `v${String(index)}`;
        ajv.addSchema(entry.schema, id);
        exports[id] = id;
        names[entry.key] = id;
      });
    const code = `${standaloneCode(ajv, exports)}\nmodule.exports.__keys = ${JSON.stringify(names)};\n`;
    mkdirSync(dirname(path), { recursive: true });
    const partial = `${path}.${String(process.pid)}.tmp`;
    writeFileSync(partial, code);
    renameSync(partial, path);
  }
}

type CompiledModule = Record<string, ValidateFunction> & { __keys: Record<string, string> };

function loadCompiled(subset: SpecSubset, coerce: boolean): CompiledModule | undefined {
  const path = compiledModulePath(subset, coerce);
  return existsSync(path) ? (require(path) as CompiledModule) : undefined;
}

function describeErrors(errors: readonly ErrorObject[] | null | undefined, prefix: string): string {
  const lines = (errors ?? []).slice(0, 5).map((error) => {
    const where = `${prefix}${error.instancePath}` || prefix || "/";
    const allowed =
      error.keyword === "enum" && Array.isArray((error.params as { allowedValues?: unknown }).allowedValues)
        ? ` (${(error.params as { allowedValues: unknown[] }).allowedValues.map(String).join(", ")})`
        : "";
    return `${where} ${error.message ?? "is invalid"}${allowed} [schema ${error.schemaPath}]`;
  });
  return lines.join("; ");
}

export class OpenApiValidator {
  private readonly modules: { plain?: CompiledModule; coercing?: CompiledModule } = {};
  private readonly fallback: { plain?: Ajv; coercing?: Ajv } = {};
  private readonly compiled = new Map<string, ValidateFunction>();

  constructor(private readonly subset: SpecSubset) {
    const plain = loadCompiled(subset, false);
    const coercing = loadCompiled(subset, true);
    if (plain) this.modules.plain = plain;
    if (coercing) this.modules.coercing = coercing;
  }

  static forRoutes(routes: readonly RouteKey[]): OpenApiValidator {
    return new OpenApiValidator(loadSpecSubset(routes));
  }

  /** The validator for `key`: precompiled when the test set-up wrote it, else compiled here once. */
  private validator(key: string, schema: unknown, coerce: boolean): ValidateFunction {
    const module = coerce ? this.modules.coercing : this.modules.plain;
    const id = module?.__keys[key];
    const precompiled = id === undefined ? undefined : module?.[id];
    if (precompiled) return precompiled;
    let validate = this.compiled.get(`${coerce ? "c" : "p"} ${key}`);
    if (!validate) {
      const which = coerce ? "coercing" : "plain";
      const ajv = (this.fallback[which] ??= newAjv(this.subset, coerce, false));
      validate = ajv.compile(schema as object);
      this.compiled.set(`${coerce ? "c" : "p"} ${key}`, validate);
    }
    return validate;
  }

  private operation(name: DescriptionName, method: string, template: string): SubsetOperation | undefined {
    return this.subset.descriptions[name].operations[operationKey(method, template)];
  }

  /** Problems with a request the fake's route `template` matched; `body` is undefined when none was sent. */
  checkRequest(call: {
    method: string;
    template: string;
    params: Record<string, string>;
    query: URLSearchParams;
    body: unknown;
  }): ValidationProblem[] {
    const route = `${call.method} ${call.template.replace(/\{([a-z_]+)\*\}/g, "{$1}")}`;
    const problems: ValidationProblem[] = [];
    for (const name of DESCRIPTIONS) {
      const operation = this.operation(name, call.method, call.template);
      const problem = (message: string): void => {
        problems.push({ route, description: name, part: "request", message });
      };
      if (!operation) {
        problem("the description has no such operation");
        continue;
      }
      for (const parameter of operation.parameters) {
        if (parameter.in !== "path" && parameter.in !== "query") continue;
        const raw = parameter.in === "path" ? call.params[parameter.name] : call.query.get(parameter.name);
        if (raw === undefined || raw === null) {
          if (parameter.required) problem(`${parameter.in} parameter ${parameter.name} is required`);
          continue;
        }
        // Wrapped in an object so ajv's type coercion can replace the text with the number it means.
        const holder = { value: raw as unknown };
        const wrapped = this.validator(
          paramKey(name, operationKey(call.method, call.template), parameter.in, parameter.name),
          { type: "object", properties: { value: parameter.schema } },
          true,
        );
        if (!wrapped(holder)) {
          problem(describeErrors(wrapped.errors, `${parameter.in}/${parameter.name}`).replace("/value", ""));
        }
      }
      const known = new Set(operation.parameters.filter((p) => p.in === "query").map((p) => p.name));
      for (const key of call.query.keys()) {
        if (!known.has(key)) problem(`query parameter ${key} is not one the operation takes`);
      }
      if (operation.body) {
        if (call.body === undefined) {
          if (operation.body.required) problem("a JSON body is required");
        } else {
          const key = `${name} ${operationKey(call.method, call.template)} body`;
          const validate = this.validator(key, operation.body.schema, false);
          if (!validate(call.body)) problem(describeErrors(validate.errors, "body"));
        }
      } else if (call.body !== undefined && call.method !== "GET" && call.method !== "DELETE") {
        problem("the operation takes no body");
      }
    }
    return problems;
  }

  /** Problems with an answer the fake sends; `body` is undefined when it sends none. */
  checkResponse(call: { method: string; template: string; status: number; body: unknown }): ValidationProblem[] {
    const route = `${call.method} ${call.template.replace(/\{([a-z_]+)\*\}/g, "{$1}")}`;
    const problems: ValidationProblem[] = [];
    for (const name of DESCRIPTIONS) {
      const operation = this.operation(name, call.method, call.template);
      const problem = (message: string): void => {
        problems.push({ route, description: name, part: "response", status: call.status, message });
      };
      if (!operation) {
        problem("the description has no such operation");
        continue;
      }
      const statusKey = String(call.status);
      if (!(statusKey in operation.responses)) {
        if (call.status >= 400 && isGitHubError(call.body)) continue;
        problem(
          call.status >= 400
            ? "an undocumented error status must carry GitHub's error body ({ message, documentation_url })"
            : `status ${statusKey} is not documented (documented: ${Object.keys(operation.responses).join(", ")})`,
        );
        continue;
      }
      const schema = operation.responses[statusKey];
      if (schema === null) {
        if (call.body !== undefined && call.status < 300) problem("the description documents no body for this status");
        continue;
      }
      if (call.body === undefined) {
        problem("a JSON body is documented for this status but none was sent");
        continue;
      }
      const key = `${name} ${operationKey(call.method, call.template)} ${statusKey}`;
      const validate = this.validator(key, schema, false);
      if (!validate(call.body)) problem(describeErrors(validate.errors, "body"));
    }
    return problems;
  }
}

function isGitHubError(body: unknown): boolean {
  return (
    typeof body === "object" &&
    body !== null &&
    typeof (body as { message?: unknown }).message === "string" &&
    ["undefined", "string"].includes(typeof (body as { documentation_url?: unknown }).documentation_url)
  );
}
