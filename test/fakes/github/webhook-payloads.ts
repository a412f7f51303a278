import { createRequire } from "node:module";
import { Ajv, type ErrorObject, type ValidateFunction } from "ajv";
import addFormatsModule from "ajv-formats";

/*
 * Every webhook payload a test delivers is held to GitHub's own description of it
 * (`@octokit/webhooks-schemas`: one JSON Schema per event and action). A test that builds a
 * payload GitHub would never send fails where it sends it, naming the field, instead of proving
 * the app against a delivery that cannot happen.
 */

const addFormats = ((addFormatsModule as unknown as { default?: unknown }).default ?? addFormatsModule) as unknown as (
  ajv: Ajv,
) => Ajv;
const require = createRequire(import.meta.url);
const SCHEMA_ID = "github-webhooks";

let ajv: Ajv | undefined;
const validators = new Map<string, ValidateFunction>();

function validatorFor(event: string, action: string | undefined): ValidateFunction {
  const key = `${event}.${action ?? ""}`;
  let validate = validators.get(key);
  if (validate) return validate;
  if (!ajv) {
    const schema = require("@octokit/webhooks-schemas") as { definitions: Record<string, unknown> };
    ajv = new Ajv({ strict: false, allErrors: true });
    addFormats(ajv);
    ajv.addSchema({ $id: SCHEMA_ID, definitions: schema.definitions });
  }
  const definitions = (ajv.getSchema(SCHEMA_ID)?.schema as { definitions: Record<string, unknown> }).definitions;
  // Events with actions have one definition per action; the others (ping, push) one `<event>$event`.
  const name = [`${event}$${action ?? ""}`, `${event}$event`].find((candidate) => candidate in definitions);
  if (name === undefined) {
    throw new Error(
      `${event}${action === undefined ? "" : `.${action}`}: GitHub's webhook description has no such event ` +
        "and action (see @octokit/webhooks-schemas)",
    );
  }
  validate = ajv.compile({ $ref: `${SCHEMA_ID}#/definitions/${name.replace("$", "%24")}` });
  validators.set(key, validate);
  return validate;
}

function describe(errors: readonly ErrorObject[] | null | undefined): string {
  return (errors ?? [])
    .slice(0, 5)
    .map((error) => `${error.instancePath || "/"} ${error.message ?? "is invalid"} [schema ${error.schemaPath}]`)
    .join("; ");
}

/** The problem with `payload` as a delivery of `event`, or undefined when GitHub could send it. */
export function webhookPayloadProblem(event: string, payload: unknown): string | undefined {
  const action =
    typeof payload === "object" && payload !== null && typeof (payload as { action?: unknown }).action === "string"
      ? (payload as { action: string }).action
      : undefined;
  const validate = validatorFor(event, action);
  if (validate(payload)) return undefined;
  return `${event}${action === undefined ? "" : `.${action}`}: ${describe(validate.errors)}`;
}

/** Throws, naming the event, action and field, when GitHub would never send `payload`. */
export function assertValidWebhookPayload(event: string, payload: unknown): void {
  const problem = webhookPayloadProblem(event, payload);
  if (problem !== undefined) {
    throw new Error(
      `this test delivers a webhook GitHub's description does not allow (see docs/testing.md): ${problem}`,
    );
  }
}
