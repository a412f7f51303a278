import { meetsPermission } from "../config/repo-config.js";
import { intentFromIssue } from "./command.js";
import { parseIssuesLabeled } from "./payload.js";
import { cachedPermission, isIgnoredBot, loadConfigOrReport, refuseBelowBar } from "./authorise.js";
import { guard, names, type HandlerDeps, type WebhookContext } from "./context.js";
import { startRun } from "./start-run.js";

/** `issues.labeled` with the trigger label: the issue's title and body are the request. */
export async function onIssueLabeled(context: WebhookContext, deps: HandlerDeps): Promise<void> {
  const event = parseIssuesLabeled(context.payload);
  if (!event?.label) return;
  await guard(context, async () => {
    const { owner, repo } = names(event.repository);
    const [config, permission] = await Promise.all([
      loadConfigOrReport(context, event.repository, event.issue, undefined, deps.configCache),
      cachedPermission(context.octokit, deps, event.repository.id, owner, repo, event.sender.login),
    ]);
    if (!config || event.label?.name !== config.label) return;
    if (isIgnoredBot(event.sender, event.sender, config)) return;
    // Adding a label needs only triage access, so the labeller's permission is checked as for a comment.
    if (!meetsPermission(permission, config.permission)) {
      await refuseBelowBar(
        context,
        deps,
        { repository: event.repository, issueNumber: event.issue.number, login: event.sender.login },
        { trigger: "label", required: config.permission },
        `@${event.sender.login} the \`${config.label}\` label starts a Harness run only when added by someone ` +
          `with **${config.permission}** access. ` +
          `A maintainer can start it with \`${config.command} <what should change>\`.`,
      );
      return;
    }
    // The request is the issue's text, so it is an instruction only when its author could have
    // asked: a maintainer labelling an outsider's issue does not make the outsider's words theirs.
    const author = event.issue.user?.login;
    const authorTrusted =
      author !== undefined &&
      (author.toLowerCase() === event.sender.login.toLowerCase() ||
        meetsPermission(
          await cachedPermission(context.octokit, deps, event.repository.id, owner, repo, author),
          config.permission,
        ));
    await startRun(context, deps, {
      repository: event.repository,
      issue: event.issue,
      intent: intentFromIssue(event.issue.title, event.issue.body),
      intentTrusted: authorTrusted,
      requester: { login: event.sender.login, id: event.sender.id },
      trigger: { kind: "label", label: config.label },
      key: `${String(event.repository.id)}:issue:${String(event.issue.number)}:label:${context.id}`,
    });
  });
}
