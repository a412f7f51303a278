import { upstreamsFromEnvironment, type Upstream } from "../../gateway/upstreams.js";
import { describeError } from "../../util/errors.js";
import { failed, passed, skipped, type Check } from "../check.js";
import type { DoctorContext } from "../context.js";

/** Where each upstream lists its models: the gateway forwards `GET` there too. */
const MODELS_PATH: Record<Upstream["name"], string> = { anthropic: "/v1/models", openai: "/models" };
/** Which variables hold each upstream's credential, for the fix. */
const KEY_NAMES: Record<Upstream["name"], string> = {
  anthropic: "ANTHROPIC_API_KEY (or ANTHROPIC_AUTH_TOKEN, CLAUDE_CODE_OAUTH_TOKEN)",
  openai: "CODEX_API_KEY or OPENAI_API_KEY",
};
/** Below the check's own limit. */
const UPSTREAM_TIMEOUT_MS = 10_000;
const BASE_NAMES: Record<Upstream["name"], string> = { anthropic: "ANTHROPIC_BASE_URL", openai: "OPENAI_BASE_URL" };

/**
 * Each model API the gateway forwards to, asked for its model list with the operator's
 * credential: a call that costs nothing and proves the key and the address. Only the status is
 * read; the key goes in a header and never into what is shown.
 */
export function modelUpstreamsCheck(): Check<DoctorContext> {
  return {
    id: "model-upstreams",
    name: "model gateway upstreams",
    timeoutMs: 15_000,
    fixWhenStuck: () => "check that this machine reaches the model APIs (ANTHROPIC_BASE_URL, OPENAI_BASE_URL)",
    async run(context, signal) {
      let upstreams: Upstream[];
      try {
        upstreams = upstreamsFromEnvironment(context.env);
      } catch (error) {
        return failed(describeError(error), "correct that variable");
      }
      if (upstreams.length === 0)
        return skipped(
          "no model key is set: the gateway is off and agents call their providers as configured",
          "set ANTHROPIC_API_KEY or OPENAI_API_KEY for the agents' models",
        );
      const answers = await Promise.all(upstreams.map((upstream) => ask(upstream, context.fetch, signal)));
      const failures = answers.filter((answer) => !answer.ok);
      const detail = answers.map((answer) => answer.detail).join("; ");
      return failures.length === 0 ? passed(detail) : failed(detail, failures.map((answer) => answer.fix).join("; "));
    },
  };
}

async function ask(
  upstream: Upstream,
  fetch: typeof globalThis.fetch,
  signal: AbortSignal,
): Promise<{ ok: boolean; detail: string; fix: string }> {
  const url = new URL(upstream.baseUrl);
  url.pathname = `${url.pathname.replace(/\/+$/, "")}${MODELS_PATH[upstream.name]}`;
  const where = `${upstream.name} (${upstream.baseUrl.origin})`;
  let status: number;
  try {
    const response = await fetch(url, {
      headers: {
        ...upstream.extraHeaders,
        ...upstream.authHeaders,
        ...(upstream.name === "anthropic" ? { "anthropic-version": "2023-06-01" } : {}),
      },
      // Each upstream within its own limit, so a silent one is named rather than the whole check timing out.
      signal: AbortSignal.any([signal, AbortSignal.timeout(UPSTREAM_TIMEOUT_MS)]),
    });
    status = response.status;
    await response.body?.cancel();
  } catch (error) {
    const cause = error instanceof Error && error.cause !== undefined ? `: ${describeError(error.cause)}` : "";
    return {
      ok: false,
      detail: `${where} did not answer (${describeError(error)}${cause})`,
      fix: `check ${BASE_NAMES[upstream.name]} and that this machine reaches it`,
    };
  }
  if (status >= 200 && status < 300) return { ok: true, detail: `${where} answers (${String(status)})`, fix: "" };
  if (status === 401 || status === 403)
    return {
      ok: false,
      detail: `${where} refused the key (${String(status)})`,
      fix: `set ${KEY_NAMES[upstream.name]} to a valid key for ${upstream.baseUrl.origin}`,
    };
  return {
    ok: false,
    detail: `${where} answered ${String(status)} to a model list`,
    fix: `check ${BASE_NAMES[upstream.name]} points at the provider's API (or a gateway that lists models)`,
  };
}
