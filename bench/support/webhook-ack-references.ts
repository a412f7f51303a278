/**
 * The two apps the webhook-ack benchmark holds Harness against (see bench/webhook-ack.ts), each
 * making, on a `/harness` comment, GitHub requests Harness makes too, so that a difference in
 * CPU is a difference in how the work is done, not in what is asked of GitHub:
 *
 * - `minimalProbotApp`: a plain Probot app as a user would write one, `app.on` and
 *   `context.octokit`, making every request Harness makes for the webhook (the config files and
 *   the permission, kept 30 s as Harness keeps them; the status comment and the 👀) and nothing
 *   else: no validation, audit, journal, queue or rendering.
 * - `startWritesAlone`: no framework: a `node:http` server that checks the signature and answers,
 *   then sends the two writes (the status comment and the 👀) on keep-alive `node:http` requests
 *   with the installation's token, fetched once. No reads, no Octokit: the least it can cost to
 *   acknowledge with those writes at all.
 *
 * The fake GitHub tells their requests from Harness's by their user agents.
 */
import { createHmac, timingSafeEqual } from "node:crypto";
import { Agent, createServer, request, type IncomingMessage } from "node:http";
import type { AddressInfo } from "node:net";
import type { Probot } from "probot";
import { appJwt } from "../../test/fakes/github/app-jwt.js";

export const REFERENCE_AGENTS = { minimal: "bench-minimal", writes: "bench-writes" } as const;

/** How long the minimal app keeps a config or a permission it read: Harness's caches' TTL. */
const KEEP_MS = 30_000;
const CONFIG_PATH = ".github/harness.yml";

/**
 * A status comment the size and shape of the one Harness posts for a queued run, so that the
 * request and its answer weigh what Harness's do.
 */
function queuedComment(commentBody: string, login: string, deliveryId: string): string {
  const intent = commentBody.replace(/^\/harness\s*/, "");
  return [
    `<!-- harness:run=${deliveryId} -->`,
    "### 👀 Harness heard you — queued",
    "",
    `> ${intent}`,
    `> — requested by @${login}`,
    "",
    `<sub>Run \`${deliveryId}\`</sub>`,
  ].join("\n");
}

/** Work a handler started and did not await, so that a CPU sample can wait for it. */
export type Track = (work: Promise<unknown>) => void;

export function minimalProbotApp(track: Track) {
  const kept = new Map<string, { at: number; value: Promise<unknown> }>();
  const cached = (key: string, load: () => Promise<unknown>): Promise<unknown> => {
    const hit = kept.get(key);
    if (hit && Date.now() - hit.at < KEEP_MS) return hit.value;
    // A failed read is not kept, as Harness keeps none: the next webhook asks again.
    const value = load().catch((error: unknown) => {
      kept.delete(key);
      throw error;
    });
    kept.set(key, { at: Date.now(), value });
    return value;
  };
  return (app: Probot): void => {
    app.on("issue_comment.created", (context) => {
      const { comment, repository, sender } = context.payload;
      if (!comment.body.startsWith("/harness")) return;
      const owner = repository.owner.login;
      // Neither file exists here (404), as for a repository that has not configured Harness.
      const configFile = (repo: string) =>
        context.octokit.rest.repos.getContent({ owner, repo, path: CONFIG_PATH }).catch(() => undefined);
      const work = (async () => {
        await Promise.all([
          cached(`config:${String(repository.id)}`, () =>
            Promise.all([configFile(".github"), configFile(repository.name)]),
          ),
          cached(`permission:${String(repository.id)}:${sender.login}`, () =>
            context.octokit.rest.repos.getCollaboratorPermissionLevel({
              owner,
              repo: repository.name,
              username: sender.login,
            }),
          ),
        ]);
        await Promise.all([
          context.octokit.rest.issues.createComment(
            context.issue({ body: queuedComment(comment.body, sender.login, context.id) }),
          ),
          context.octokit.rest.reactions.createForIssueComment(
            context.repo({ comment_id: comment.id, content: "eyes" as const }),
          ),
        ]);
      })();
      track(work);
      // The handler returns at once, so the webhook is answered before the acknowledgement is done,
      // as Harness answers.
    });
  };
}

interface WritesSetup {
  secret: string;
  appId: number;
  privateKey: string;
  apiUrl: string;
}

interface Answer {
  status: number;
  body: string;
}

export async function startWritesAlone(
  setup: WritesSetup,
  track: Track,
): Promise<{ url: string; close: () => Promise<void> }> {
  const agent = new Agent({ keepAlive: true, maxSockets: 64 });
  const api = new URL(setup.apiUrl);
  const post = (path: string, headers: Record<string, string>, body: string, retried = false): Promise<Answer> =>
    new Promise((resolve, reject) => {
      const sent = request(
        {
          host: api.hostname,
          port: api.port,
          path: `${api.pathname.replace(/\/$/, "")}${path}`,
          method: "POST",
          agent,
          headers: {
            ...headers,
            accept: "application/vnd.github+json",
            "content-type": "application/json",
            "content-length": String(Buffer.byteLength(body)),
            "user-agent": REFERENCE_AGENTS.writes,
          },
        },
        (response) => {
          void readAll(response).then((text) => {
            const status = response.statusCode ?? 0;
            if (status >= 300) reject(new Error(`POST ${path}: ${String(status)} ${text}`));
            else resolve({ status, body: text });
          }, reject);
        },
      );
      sent.on("error", (error: NodeJS.ErrnoException) => {
        // A kept-alive socket the server closed while idle fails the next request before the
        // server read it (Node's documented keep-alive race): any client sends it once more.
        if (!retried && sent.reusedSocket && error.code === "ECONNRESET") resolve(post(path, headers, body, true));
        else reject(error);
      });
      sent.end(body);
    });

  const tokens = new Map<number, Promise<string>>();
  const tokenFor = (installationId: number): Promise<string> => {
    const known = tokens.get(installationId);
    if (known) return known;
    const token = post(
      `/app/installations/${String(installationId)}/access_tokens`,
      { authorization: `Bearer ${appJwt(setup.privateKey, setup.appId)}` },
      "{}",
    ).then((answer) => (JSON.parse(answer.body) as { token: string }).token);
    tokens.set(installationId, token);
    return token;
  };

  const acknowledge = async (payload: CommentCreated, deliveryId: string): Promise<void> => {
    const { comment, issue, repository, installation, sender } = payload;
    const headers = { authorization: `token ${await tokenFor(installation.id)}` };
    const repo = `/repos/${repository.full_name}`;
    const [status] = await Promise.all([
      post(
        `${repo}/issues/${String(issue.number)}/comments`,
        headers,
        JSON.stringify({ body: queuedComment(comment.body, sender.login, deliveryId) }),
      ),
      post(`${repo}/issues/comments/${String(comment.id)}/reactions`, headers, JSON.stringify({ content: "eyes" })),
    ]);
    // The comment's id is what a client keeps, to edit the comment later.
    JSON.parse(status.body);
  };

  const secret = Buffer.from(setup.secret);
  const server = createServer((req, res) => {
    void readAll(req).then((body) => {
      const signature = Buffer.from(String(req.headers["x-hub-signature-256"] ?? ""));
      const expected = Buffer.from(`sha256=${createHmac("sha256", secret).update(body).digest("hex")}`);
      if (signature.length !== expected.length || !timingSafeEqual(signature, expected)) {
        res.writeHead(401).end();
        return;
      }
      res.writeHead(202).end();
      if (req.headers["x-github-event"] !== "issue_comment") return;
      const payload = JSON.parse(body) as Partial<CommentCreated> & { action?: string };
      if (payload.action !== "created" || !payload.comment?.body.startsWith("/harness")) return;
      track(acknowledge(payload as CommentCreated, String(req.headers["x-github-delivery"])));
    });
  });
  await new Promise<void>((resolve) => server.listen(0, "127.0.0.1", resolve));
  return {
    url: `http://127.0.0.1:${String((server.address() as AddressInfo).port)}`,
    close: () =>
      new Promise((resolve) => {
        agent.destroy();
        server.close(() => {
          resolve();
        });
      }),
  };
}

/** The fields of an `issue_comment.created` payload the writes need. */
interface CommentCreated {
  comment: { id: number; body: string };
  issue: { number: number };
  repository: { full_name: string };
  installation: { id: number };
  sender: { login: string };
}

function readAll(stream: IncomingMessage): Promise<string> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    stream.on("data", (chunk: Buffer) => chunks.push(chunk));
    stream.on("end", () => {
      resolve(Buffer.concat(chunks).toString("utf8"));
    });
    stream.on("error", reject);
  });
}
