import { createPrivateKey } from "node:crypto";
import { Octokit } from "@octokit/core";
import { RequestError } from "@octokit/request-error";
import { createProbotAuth } from "octokit-auth-probot";
import type { AppModeSettings } from "../../runtime/app-settings.js";
import { describeError } from "../../util/errors.js";
import { failed, passed, skipped, type Check, type CheckResult } from "../check.js";
import { appSettings, type DoctorContext } from "../context.js";

/**
 * The App's side of GitHub, as the server will meet it: its credentials (a JWT call), what each
 * installation granted against what `app.yml` asks for, and whether GitHub's webhooks arrive.
 */

/** GitHub's permission levels, least first. */
const LEVELS = ["read", "write", "admin"];
/** At most this many pages of installations or deliveries are read (100 a page). */
const MAX_PAGES = 10;
const DAY_MS = 24 * 60 * 60 * 1000;

/**
 * A client authenticated as the App with Probot's own strategy (a JWT from APP_ID and the
 * private key), without the server's retries and pacing: a doctor reports the first answer.
 */
export function appClient(settings: AppModeSettings, fetch: typeof globalThis.fetch): Octokit {
  return new Octokit({
    authStrategy: createProbotAuth,
    auth: { appId: settings.appId, privateKey: settings.privateKey },
    baseUrl: settings.apiBaseUrl,
    userAgent: "harness-doctor",
    request: { fetch },
  });
}

/** The App as `GET /app` describes it: who it is, and what its registration asks of owners. */
interface AppAnswer {
  id: number;
  slug?: string;
  name: string;
  html_url?: string;
  permissions?: Record<string, string | undefined>;
  events?: string[];
}

/**
 * `GET /app`, once per doctor run: the App check and the installations check (which runs only
 * after it passed) read the same answer.
 */
const appAnswers = new WeakMap<DoctorContext, Promise<AppAnswer | null>>();

function appOf(context: DoctorContext, settings: AppModeSettings, signal: AbortSignal): Promise<AppAnswer | null> {
  let answer = appAnswers.get(context);
  if (!answer) {
    answer = appClient(settings, context.fetch)
      .request("GET /app", { request: { signal } })
      .then(({ data }) => data as AppAnswer | null);
    appAnswers.set(context, answer);
  }
  return answer;
}

export function githubAppCheck(): Check<DoctorContext> {
  return {
    id: "github-app",
    name: "GitHub App credentials",
    needs: ["settings"],
    fixWhenStuck: (context) => reachFix(appSettings(context)),
    async run(context, signal) {
      const settings = appSettings(context);
      try {
        createPrivateKey(settings.privateKey);
      } catch (error) {
        return failed(
          `the private key is not a usable PEM private key (${describeError(error)})`,
          "set PRIVATE_KEY to the .pem GitHub generated for this App (or PRIVATE_KEY_PATH to its file)",
        );
      }
      try {
        const data = await appOf(context, settings, signal);
        if (!data) return failed("GitHub answered GET /app with no App", reachFix(settings));
        return passed(`signed in as ${data.slug ?? data.name} (App ${String(data.id)}) at ${settings.apiBaseUrl}`);
      } catch (error) {
        return failure(error, settings, {
          401:
            "APP_ID and the private key must belong to the same App (its settings page: App ID, and " +
            "Private keys → generate one); this machine's clock must be right within a minute",
          404: "APP_ID names no App on this GitHub: correct APP_ID (or GHE_HOST for GitHub Enterprise Server)",
        });
      }
    },
  };
}

interface Installation {
  id: number;
  account?: { login?: string } | null;
  html_url?: string;
  permissions?: Record<string, string | undefined>;
  events?: string[];
  suspended_at?: string | null;
}

/**
 * For each installation, the permissions and events app.yml asks for that it has not granted;
 * and the ones the App's registration itself lacks, which no installation can grant.
 */
export function installationsCheck(): Check<DoctorContext> {
  return {
    id: "github-installations",
    name: "App installations",
    needs: ["github-app"],
    fixWhenStuck: (context) => reachFix(appSettings(context)),
    async run(context, signal) {
      const settings = appSettings(context);
      const manifest = await context.manifest();
      const client = appClient(settings, context.fetch);
      let app: Partial<AppAnswer>;
      const installations: Installation[] = [];
      try {
        app = (await appOf(context, settings, signal)) ?? {};
        for (let page = 1; page <= MAX_PAGES; page += 1) {
          const { data } = await client.request("GET /app/installations", { per_page: 100, page, request: { signal } });
          installations.push(...(data as Installation[]));
          if (data.length < 100) break;
        }
      } catch (error) {
        return failure(error, settings, {});
      }

      const registrationLacks = [
        ...missingPermissions(manifest.permissions, app.permissions ?? {}),
        ...missingEvents(manifest.events, app.events ?? []),
      ];
      if (registrationLacks.length > 0)
        return failed(
          `the App's registration lacks what app.yml asks for: ${registrationLacks.join(", ")}`,
          `add ${registrationLacks.length > 1 ? "them" : "it"} in the App's settings (Permissions & events` +
            `${app.html_url ? `, ${app.html_url}` : ""}), then each owner accepts the change; ` +
            "if GitHub offers no such permission or event, take it out of app.yml",
        );
      if (installations.length === 0)
        return failed(
          "the App is not installed on any account",
          "install it on the repositories Harness should serve" +
            (app.html_url ? ` (${app.html_url}/installations/new)` : ""),
        );

      const problems: string[] = [];
      const fixes: string[] = [];
      for (const installation of installations) {
        const who = `${installation.account?.login ?? "?"} (installation ${String(installation.id)})`;
        if (installation.suspended_at) {
          problems.push(`${who} is suspended`);
          fixes.push(`unsuspend ${who}${installation.html_url ? ` at ${installation.html_url}` : ""}`);
          continue;
        }
        const gaps = [
          ...missingPermissions(manifest.permissions, installation.permissions ?? {}),
          ...missingEvents(manifest.events, installation.events ?? []),
        ];
        if (gaps.length === 0) continue;
        problems.push(`${who} has not granted ${gaps.join(", ")}`);
        fixes.push(
          `the owner of ${installation.account?.login ?? "that account"} accepts the App's requested permissions` +
            (installation.html_url ? ` at ${installation.html_url}` : ""),
        );
      }
      if (problems.length > 0) return failed(problems.join("; "), fixes.join("; "));
      const count = installations.length;
      return passed(
        `${String(count)} installation${count === 1 ? "" : "s"}, each with every permission and event app.yml asks for`,
      );
    },
  };
}

interface Delivery {
  guid: string;
  delivered_at: string;
  status: string;
  status_code: number;
  event: string;
  action?: string | null;
}

/**
 * Webhook deliveries of the last day that never got through: a delivery later redelivered with
 * success is not counted. A failing one means GitHub cannot reach this server, or its secret or
 * path differ from what the App sends.
 */
export function webhookDeliveriesCheck(): Check<DoctorContext> {
  return {
    id: "webhook-deliveries",
    name: "webhook deliveries",
    needs: ["github-app"],
    fixWhenStuck: (context) => reachFix(appSettings(context)),
    async run(context, signal) {
      const settings = appSettings(context);
      const since = context.now() - DAY_MS;
      const deliveries: Delivery[] = [];
      try {
        const client = appClient(settings, context.fetch);
        let cursor: string | undefined;
        for (let page = 0; page < MAX_PAGES; page += 1) {
          const answer = await client.request("GET /app/hook/deliveries", {
            per_page: 100,
            ...(cursor ? { cursor } : {}),
            request: { signal },
          });
          const batch = answer.data as Delivery[];
          deliveries.push(...batch);
          cursor = nextCursor(answer.headers.link);
          const oldest = batch.at(-1);
          if (!cursor || !oldest || Date.parse(oldest.delivered_at) < since) break;
        }
      } catch (error) {
        if (error instanceof RequestError && error.status === 404)
          return skipped("this GitHub does not list webhook deliveries");
        return failure(error, settings, {});
      }
      const recent = deliveries.filter((delivery) => Date.parse(delivery.delivered_at) >= since);
      const succeeded = new Set(recent.filter(deliveredOk).map((delivery) => delivery.guid));
      const failures = recent.filter((delivery) => !deliveredOk(delivery) && !succeeded.has(delivery.guid));
      const events = new Set(recent.map((delivery) => delivery.guid)).size;
      if (failures.length === 0)
        return passed(
          events === 0 ? "none in the last day" : `${String(events)} in the last day, none failed for good`,
        );
      const latest = failures.reduce((a, b) => (Date.parse(b.delivered_at) > Date.parse(a.delivered_at) ? b : a));
      const refused = failures.every((delivery) => delivery.status_code >= 400 && delivery.status_code < 500);
      return failed(
        `${String(new Set(failures.map((delivery) => delivery.guid)).size)} of ${String(events)} in the last day ` +
          `failed; latest ${latest.event}${latest.action ? `.${latest.action}` : ""} at ${latest.delivered_at}: ` +
          `${latest.status} (${String(latest.status_code)})`,
        refused
          ? "this server refused them: WEBHOOK_SECRET must equal the App's webhook secret, and the App's webhook " +
              `URL must end in ${settings.webhookPath}; then redeliver from the App's settings (Advanced)`
          : "GitHub could not reach this server: the App's webhook URL (its settings) must reach it from the " +
              "internet and the server must be running; then redeliver from the App's settings (Advanced)",
      );
    },
  };
}

function deliveredOk(delivery: Delivery): boolean {
  return delivery.status_code >= 200 && delivery.status_code < 400;
}

/** The `cursor` of a Link header's `rel="next"`, as GitHub pages deliveries. */
function nextCursor(link: string | undefined): string | undefined {
  const next = /<([^>]+)>;\s*rel="next"/.exec(link ?? "")?.[1];
  if (!next) return undefined;
  try {
    return new URL(next).searchParams.get("cursor") ?? undefined;
  } catch {
    return undefined;
  }
}

/** `name: level` entries `asked` wants that `granted` does not cover. */
function missingPermissions(
  asked: Readonly<Record<string, string>>,
  granted: Readonly<Record<string, string | undefined>>,
): string[] {
  return Object.entries(asked)
    .filter(([name, level]) => !covers(granted[name], level))
    .map(([name, level]) => `${name}: ${level}`);
}

function missingEvents(asked: readonly string[], granted: readonly string[]): string[] {
  return asked.filter((event) => !granted.includes(event)).map((event) => `event ${event}`);
}

/** A level no one knows covers nothing, and asking for one is never covered. */
function covers(granted: string | undefined, asked: string): boolean {
  const have = LEVELS.indexOf(granted ?? "");
  const want = LEVELS.indexOf(asked);
  return have >= 0 && want >= 0 && have >= want;
}

function reachFix(settings: AppModeSettings): string {
  return `check that this machine reaches ${settings.apiBaseUrl} (a proxy, a firewall, GHE_HOST)`;
}

/** GitHub's refusal or the network's failure, with the fix for the statuses a check expects. */
function failure(error: unknown, settings: AppModeSettings, fixes: Record<number, string>): CheckResult {
  if (error instanceof RequestError && error.response) {
    const fix =
      fixes[error.status] ??
      (error.status === 403
        ? "the App lacks access to this endpoint on this GitHub; see the message"
        : reachFix(settings));
    return failed(`GitHub answered ${String(error.status)}: ${error.message}`, fix);
  }
  const cause = error instanceof Error && error.cause !== undefined ? `: ${describeError(error.cause)}` : "";
  return failed(`${settings.apiBaseUrl} did not answer (${describeError(error)}${cause})`, reachFix(settings));
}
