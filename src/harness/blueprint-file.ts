import { readFile } from "node:fs/promises";
import { parse as parseYaml, YAMLParseError } from "yaml";
import type { z } from "zod";
import { HarnessError } from "../util/errors.js";
import { blueprintSchema, type Blueprint } from "./blueprint.js";

/** A blueprint that cannot be used: the message names the source, the node and the field. */
export class BlueprintError extends HarnessError {
  constructor(message: string) {
    super("invalid_blueprint", message);
  }
}

/**
 * Validates a blueprint object, turning zod's issues into sentences such as
 * `blueprint ci.yml: node "verify" (nodes[2]), field onFailure.retry: points to "fixx", …`.
 */
export function validateBlueprint(input: unknown, source: string): Blueprint {
  const parsed = blueprintSchema.safeParse(input);
  if (parsed.success) return parsed.data;
  const lines = parsed.error.issues.map(
    (issue) => `${source}: ${describeLocation(input, issue.path)}${describeIssue(issue)}`,
  );
  throw new BlueprintError(lines.join("\n"));
}

/** Reads and validates a YAML (or JSON) blueprint file. */
export async function loadBlueprintFile(path: string): Promise<Blueprint> {
  let text: string;
  try {
    text = await readFile(path, "utf8");
  } catch (error) {
    const code = (error as NodeJS.ErrnoException).code;
    throw new BlueprintError(
      `blueprint ${path}: cannot read the file${code === "ENOENT" ? " (it does not exist)" : code ? ` (${code})` : ""}`,
    );
  }
  let data: unknown;
  try {
    data = parseYaml(text, { prettyErrors: true });
  } catch (error) {
    if (error instanceof YAMLParseError) {
      const where = error.linePos?.[0]
        ? ` at line ${String(error.linePos[0].line)}, column ${String(error.linePos[0].col)}`
        : "";
      throw new BlueprintError(`blueprint ${path}: not valid YAML${where}: ${error.message.split("\n")[0] ?? ""}`);
    }
    throw error;
  }
  return validateBlueprint(data, `blueprint ${path}`);
}

function describeLocation(input: unknown, path: readonly PropertyKey[]): string {
  if (path[0] !== "nodes" || typeof path[1] !== "number") {
    return path.length > 0 ? `field ${path.map(String).join(".")}: ` : "";
  }
  const index = path[1];
  const nodes = (input as { nodes?: unknown } | null)?.nodes;
  const node: unknown = Array.isArray(nodes) ? nodes[index] : undefined;
  const id =
    typeof node === "object" && node !== null && "id" in node && typeof node.id === "string" ? node.id : undefined;
  const field = path.slice(2).map(String).join(".");
  return `node ${id ? `"${id}" ` : ""}(nodes[${String(index)}])${field ? `, field ${field}` : ""}: `;
}

function describeIssue(issue: z.core.$ZodIssue): string {
  if (issue.code === "invalid_union" || issue.code === "invalid_value") {
    if (issue.path.at(-1) === "kind") return `kind must be "exec" or "agent"`;
  }
  if (issue.code === "unrecognized_keys")
    return `unknown field${issue.keys.length > 1 ? "s" : ""} ${issue.keys.join(", ")}`;
  if (issue.code === "invalid_type" && issue.input === undefined) return "is required";
  return issue.message;
}
