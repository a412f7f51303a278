import { z } from "zod";
import { TEMPLATE_VARIABLES, templateVariablesIn } from "./template.js";

/** Retry loops are always bounded; this is the most any one node may be attempted. */
export const MAX_ATTEMPTS_LIMIT = 20;

const nodeId = z
  .string()
  .regex(
    /^[a-z][a-z0-9_-]{0,39}$/,
    "must be lowercase letters, digits, '-' or '_', starting with a letter (at most 40)",
  );

const onFailure = z
  .object({
    /** The node to run before trying the failed node again (itself for a plain retry). */
    retry: nodeId,
    /** How many times the failing node may run in total, first attempt included. */
    maxAttempts: z.number().int().min(1).max(MAX_ATTEMPTS_LIMIT),
  })
  .strict();

const common = {
  id: nodeId,
  /** Short human title: the line users see in the checklist. */
  title: z.string().trim().min(1).max(80),
  /** Per-node wall-clock limit in minutes (fractions allowed); the run budget still applies. */
  timeoutMinutes: z
    .number()
    .positive()
    .max(24 * 60)
    .optional(),
  /** `on-failure` nodes are skipped in order and run only as another node's retry target. */
  runs: z.enum(["always", "on-failure"]).default("always"),
  onFailure: onFailure.optional(),
};

const execNode = z
  .object({
    kind: z.literal("exec"),
    /** Program and arguments; templates are substituted per element, never through a shell. */
    argv: z.array(z.string()).min(1, "must name at least the program to run"),
    /** When true, a failure is recorded but the run continues. */
    allowFailure: z.boolean().default(false),
    /**
     * Setup secrets this step needs, by name (e.g. a private registry token for `npm ci`), as
     * environment variables. Only deterministic steps may ask: agent steps never receive one.
     * The operator decides which repositories may have which (HARNESS_SETUP_SECRETS).
     */
    secrets: z
      .array(
        z
          .string()
          .regex(/^[A-Z_][A-Z0-9_]{0,63}$/, "must be an environment variable name in capitals (e.g. NPM_TOKEN)"),
      )
      .max(20)
      .optional(),
    ...common,
  })
  .strict();

const agentNode = z
  .object({
    kind: z.literal("agent"),
    /** Prompt template handed to the agent driver. */
    prompt: z.string().trim().min(1, "must not be empty"),
    allowFailure: z.boolean().default(false),
    ...common,
  })
  .strict();

const blueprintNode = z.discriminatedUnion("kind", [execNode, agentNode]);

export const blueprintSchema = z
  .object({
    name: z.string().trim().min(1).max(60),
    description: z.string().max(500).optional(),
    nodes: z.array(blueprintNode).min(1, "a blueprint needs at least one node"),
  })
  .strict()
  .superRefine((blueprint, ctx) => {
    const ids = new Map<string, number>();
    blueprint.nodes.forEach((node, index) => {
      if (ids.has(node.id)) {
        ctx.addIssue({
          code: "custom",
          path: ["nodes", index, "id"],
          message: `duplicates the id of nodes[${String(ids.get(node.id))}]`,
        });
      }
      ids.set(node.id, index);
    });
    blueprint.nodes.forEach((node, index) => {
      const templated =
        node.kind === "agent"
          ? [["prompt", node.prompt] as const]
          : node.argv.map((arg, i) => [`argv.${String(i)}`, arg] as const);
      for (const [field, text] of templated) {
        for (const name of templateVariablesIn(text)) {
          if (!(TEMPLATE_VARIABLES as readonly string[]).includes(name)) {
            ctx.addIssue({
              code: "custom",
              path: ["nodes", index, ...field.split(".").map((part) => (/^\d+$/.test(part) ? Number(part) : part))],
              message: `uses the unknown template variable {{${name}}} (known: ${TEMPLATE_VARIABLES.join(", ")})`,
            });
          }
        }
      }
      const retry = node.onFailure?.retry;
      if (retry === undefined) return;
      const targetIndex = ids.get(retry);
      if (targetIndex === undefined) {
        ctx.addIssue({
          code: "custom",
          path: ["nodes", index, "onFailure", "retry"],
          message: `points to "${retry}", which is not a node of this blueprint`,
        });
        return;
      }
      const target = blueprint.nodes[targetIndex];
      if (target && target.id !== node.id && target.onFailure) {
        ctx.addIssue({
          code: "custom",
          path: ["nodes", index, "onFailure", "retry"],
          message:
            `points to "${retry}", which itself retries on failure; ` +
            `retry loops must not nest, so every loop stays bounded`,
        });
      }
    });
    blueprint.nodes.forEach((node, index) => {
      if (
        node.runs === "on-failure" &&
        !blueprint.nodes.some((other) => other.onFailure?.retry === node.id && other.id !== node.id)
      ) {
        ctx.addIssue({
          code: "custom",
          path: ["nodes", index, "runs"],
          message: "is 'on-failure' but no other node retries through it, so it would never run",
        });
      }
    });
  });

/** A blueprint as written (YAML or code): defaults not yet applied. */
export type BlueprintInput = z.input<typeof blueprintSchema>;
/** A validated blueprint, defaults applied. */
export type Blueprint = z.output<typeof blueprintSchema>;
export type BlueprintNode = Blueprint["nodes"][number];
export type ExecNode = Extract<BlueprintNode, { kind: "exec" }>;
export type AgentNode = Extract<BlueprintNode, { kind: "agent" }>;
