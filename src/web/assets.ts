import type { ServerResponse } from "node:http";
import { SECURITY_HEADERS } from "./html.js";

/**
 * The run page's script: follows the run's event stream and updates the page in place — output
 * appended, steps flipped, the outcome shown at the end. It only ever sets `textContent` and
 * attributes it chose, never markup, so output cannot become code. Served from here (no CDN),
 * which is all the Content-Security-Policy allows. Long lines are split into `+`-joined pieces so
 * that no source line passes 120 characters; the served text is the same as one literal's.
 */
export const RUN_SCRIPT =
  String.raw`(function () {
  "use strict";
  var body = document.body;
  var runId = body.getAttribute("data-run");
  if (!runId || body.getAttribute("data-live") !== "true" || typeof EventSource === "undefined") return;
  var output = document.getElementById("output");
  var steps = document.getElementById("steps");
  var badge = document.getElementById("run-state");
  var LABELS = { queued: "Queued", running: "Running", succeeded: "Succeeded", failed: "Failed", ` +
  String.raw`cancelled: "Cancelled", interrupted: "Interrupted" };
  var KINDS = { timed_out: "Timed out", no_changes: "No changes", step_failed: "A step failed", ` +
  String.raw`interrupted: "Interrupted", pull_request: "Pull request failed" };
  // The page keeps at most this much output; older text leaves from the top.
  var MAX_CHARS = 4 * 1024 * 1024;
  var chars = output.textContent.length;
  var outputSinceHeading = chars > 0;
  var after = body.getAttribute("data-after") || "0";
  var source = new EventSource("/runs/" + encodeURIComponent(runId) + "/events?after=" + encodeURIComponent(after));

  function formatDuration(ms) {
    if (ms < 60000) return (ms / 1000).toFixed(1) + " s";
    var s = Math.floor(ms / 1000);
    if (s < 3600) return Math.floor(s / 60) + " min " + String(s % 60).padStart(2, "0") + " s";
    return Math.floor(s / 3600) + " h " + String(Math.floor((s % 3600) / 60)).padStart(2, "0") + " min";
  }
  function el(tag, className, text) {
    var node = document.createElement(tag);
    if (className) node.className = className;
    if (text) node.textContent = text;
    return node;
  }
  function atBottom() {
    return output.scrollHeight - output.scrollTop - output.clientHeight < 40;
  }
  function trim() {
    while (chars > MAX_CHARS && output.firstChild) {
      chars -= (output.firstChild.textContent || "").length;
      output.removeChild(output.firstChild);
    }
  }
  function append(segments, className) {
    var stick = atBottom();
    var fragment = document.createDocumentFragment();
    segments.forEach(function (segment) {
      var cls = className || segment[0];
      fragment.appendChild(cls ? el("span", cls, segment[1]) : document.createTextNode(segment[1]));
      chars += segment[1].length;
    });
    output.appendChild(fragment);
    trim();
    if (stick) output.scrollTop = output.scrollHeight;
  }
  function setState(state) {
    badge.className = "badge state-" + state;
    badge.textContent = LABELS[state] || state;
  }
  function stepItem(id, title) {
    var items = steps.querySelectorAll("li.step");
    for (var i = 0; i < items.length; i++) if (items[i].getAttribute("data-step") === id) return items[i];
    var li = el("li", "step");
    li.setAttribute("data-step", id);
    li.appendChild(el("span", "step-state"));
    li.appendChild(document.createTextNode(" "));
    li.appendChild(el("span", "step-title", title));
    li.appendChild(el("span", "step-attempt"));
    li.appendChild(document.createTextNode(" "));
    li.appendChild(el("span", "step-duration"));
    li.appendChild(el("div", "step-error"));
    steps.appendChild(li);
    return li;
  }
  function setStep(step) {
    var li = stepItem(step.id, step.title);
    li.setAttribute("data-state", step.state);
    if (step.onFailureOnly) li.setAttribute("data-on-failure-only", "true");
    li.querySelector(".step-state").textContent = step.state.replace("_", " ");
    li.querySelector(".step-attempt").textContent = step.attempt > 1 ? " (attempt " + step.attempt + ")" : "";
    li.querySelector(".step-duration").textContent = typeof step.durationMs === "number" ? ` +
  String.raw`formatDuration(step.durationMs) : "";
    li.querySelector(".step-error").textContent = step.error || "";
  }
  function showOutcome(end) {
    var box = document.getElementById("outcome");
    box.textContent = "";
    box.className = "outcome outcome-" + end.state;
    box.appendChild(el("h2", "", "Outcome"));
    if (end.prUrl && /^https?:\/\//.test(end.prUrl)) {
      var p = el("p", "pr", "Pull request: ");
      var a = el("a", "", end.prUrl);
      a.id = "pr-link";
      a.href = end.prUrl;
      p.appendChild(a);
      box.appendChild(p);
    }
    if (end.error) {
      var error = el("div", "error");
      var line = el("p");
      line.appendChild(el("strong", "", end.errorKind ? ` +
  String.raw`(KINDS[end.errorKind] || "Push failed (" + end.errorKind.replace(/_/g, " ") + ")") + ": " : ""));
      var message = el("span", "", end.error);
      message.id = "run-error";
      line.appendChild(message);
      error.appendChild(line);
      if (end.remedy) error.appendChild(el("p", "remedy", "What to do: " + end.remedy));
      box.appendChild(error);
    }
    box.appendChild(el("p", "muted", "Reload the page for the full report."));
    box.hidden = false;
  }

  // The duration of a running run counts up; it stops at the end, where the server's figure wins.
  var started = Date.parse(body.getAttribute("data-started") || "");
  var ticker = setInterval(function () {
    if (!isNaN(started)) document.getElementById("run-duration").textContent = ` +
  String.raw`formatDuration(Math.max(0, Date.now() - started));
  }, 1000);

  source.addEventListener("plan", function (event) {
    var plan = JSON.parse(event.data);
    if (steps.children.length > 0) append([["", "▶ The run started again\n"]], "log-step");
    steps.textContent = "";
    var none = document.getElementById("no-steps");
    if (none) none.remove();
    plan.steps.forEach(setStep);
    setState("running");
    if (isNaN(started)) started = Date.now();
  });
  source.addEventListener("step", function (event) {
    var step = JSON.parse(event.data);
    setStep(step);
    if (step.heading) {
      append([["", step.heading]], "log-step");
      outputSinceHeading = false;
    }
    if (step.tail && !outputSinceHeading) append(step.tail);
  });
  source.addEventListener("output", function (event) {
    append(JSON.parse(event.data).segments);
    outputSinceHeading = true;
  });
  source.addEventListener("end", function (event) {
    source.close();
    clearInterval(ticker);
    var end = JSON.parse(event.data);
    setState(end.state);
    steps.querySelectorAll("li.step").forEach(function (li) {
      var state = li.getAttribute("data-state");
      var next = state === "running" ? (end.state === "cancelled" ? "cancelled" : "failed") : ` +
  String.raw`state === "pending" && li.getAttribute("data-on-failure-only") !== "true" ? "skipped" : "";
      if (!next) return;
      li.setAttribute("data-state", next);
      li.querySelector(".step-state").textContent = next;
    });
    if (typeof end.durationMs === "number") document.getElementById("run-duration").textContent = ` +
  String.raw`formatDuration(end.durationMs);
    showOutcome(end);
    var note = document.getElementById("live-note");
    if (note) note.remove();
    body.setAttribute("data-live", "false");
  });
})();
`;

// Split into `+`-joined pieces like RUN_SCRIPT, so that no source line passes 120 characters.
export const RUN_STYLES =
  `
:root { color-scheme: light dark; --bg: #fff; --fg: #1f2328; --muted: #59636e; --line: #d1d9e0; ` +
  `--panel: #f6f8fa; --log-bg: #0d1117; --log-fg: #e6edf3;
  --ok: #1a7f37; --bad: #cf222e; --run: #9a6700; --idle: #59636e; --link: #0969da; }
@media (prefers-color-scheme: dark) { :root { --bg: #0d1117; --fg: #e6edf3; --muted: #9198a1; --line: #3d444d; ` +
  `--panel: #151b23; --log-bg: #010409; --ok: #3fb950; ` +
  `--bad: #f85149; --run: #d29922; --link: #4493f8; } }
* { box-sizing: border-box; }
body { margin: 0; font: 14px/1.5 system-ui, -apple-system, "Segoe UI", sans-serif; ` +
  `background: var(--bg); color: var(--fg); }
a { color: var(--link); }
header.top { padding: 10px 24px; border-bottom: 1px solid var(--line); background: var(--panel); }
header.top .brand { font-weight: 600; color: var(--fg); text-decoration: none; }
main { max-width: 1100px; margin: 0 auto; padding: 16px 24px 48px; }
h1 { font-size: 20px; margin: 8px 0 12px; }
h2 { font-size: 16px; margin: 24px 0 8px; }
.muted, .crumbs { color: var(--muted); }
.badge { display: inline-block; padding: 1px 10px; border-radius: 999px; font-size: 12px; font-weight: 600; ` +
  `color: #fff; background: var(--idle); text-decoration: none; vertical-align: middle; }
.state-running { background: var(--run); }
.state-succeeded { background: var(--ok); }
.state-failed, .state-interrupted { background: var(--bad); }
.facts { display: grid; grid-template-columns: max-content 1fr; gap: 2px 16px; margin: 0; }
.facts dt { color: var(--muted); }
.facts dd { margin: 0; }
.outcome { border: 1px solid var(--line); border-radius: 6px; padding: 4px 16px 8px; margin-top: 16px; ` +
  `background: var(--panel); }
.outcome-succeeded { border-left: 4px solid var(--ok); }
.outcome-failed, .outcome-interrupted { border-left: 4px solid var(--bad); }
.error strong { color: var(--bad); }
.steps { list-style: none; padding: 0; margin: 0; border: 1px solid var(--line); border-radius: 6px; }
.step { padding: 6px 12px; border-top: 1px solid var(--line); }
.step:first-child { border-top: 0; }
.step-state { display: inline-block; min-width: 90px; font-size: 12px; ` +
  `font-weight: 600; text-transform: uppercase; color: var(--idle); }
.step[data-state="running"] .step-state { color: var(--run); }
.step[data-state="succeeded"] .step-state { color: var(--ok); }
.step[data-state="failed"] .step-state, .step[data-state="timed_out"] .step-state { color: var(--bad); }
.step[data-state="running"] .step-state::before { content: "● "; animation: pulse 1s infinite alternate; }
@keyframes pulse { from { opacity: 1; } to { opacity: .3; } }
.step-duration { color: var(--muted); float: right; }
.step-error { color: var(--bad); font-size: 13px; }
.step-error:empty { display: none; }
table.runs { width: 100%; border-collapse: collapse; }
table.runs th, table.runs td { text-align: left; padding: 6px 8px; ` +
  `border-bottom: 1px solid var(--line); vertical-align: top; }
table.runs th { color: var(--muted); font-weight: 600; font-size: 12px; }
table.audit { width: 100%; border-collapse: collapse; font-size: 13px; }
table.audit th, table.audit td { text-align: left; padding: 4px 8px; ` +
  `border-bottom: 1px solid var(--line); vertical-align: top; }
table.audit th { color: var(--muted); font-weight: 600; font-size: 12px; }
table.audit td:first-child { white-space: nowrap; }
.audit-details { list-style: none; margin: 0; padding: 0; word-break: break-word; }
pre.log { background: var(--log-bg); color: var(--log-fg); padding: 12px; border-radius: 6px; ` +
  `overflow: auto; max-height: 70vh; white-space: pre-wrap; word-break: break-word; ` +
  `font: 12px/1.45 ui-monospace, SFMono-Regular, Menlo, Consolas, monospace; }
.log-step { color: #8cb4ff; font-weight: 600; }
.ansi-bold { font-weight: 700; } .ansi-dim { opacity: .7; } ` +
  `.ansi-italic { font-style: italic; } .ansi-underline { text-decoration: underline; }
.ansi-black { color: #6e7681; } .ansi-red { color: #ff7b72; } ` +
  `.ansi-green { color: #3fb950; } .ansi-yellow { color: #d29922; }
.ansi-blue { color: #58a6ff; } .ansi-magenta { color: #bc8cff; } ` +
  `.ansi-cyan { color: #39c5cf; } .ansi-white { color: #b1bac4; }
.ansi-bright-black { color: #8b949e; } .ansi-bright-red { color: #ffa198; } ` +
  `.ansi-bright-green { color: #56d364; } .ansi-bright-yellow { color: #e3b341; }
.ansi-bright-blue { color: #79c0ff; } .ansi-bright-magenta { color: #d2a8ff; } ` +
  `.ansi-bright-cyan { color: #56d4dd; } .ansi-bright-white { color: #f0f6fc; }
.ansi-bg-black { background: #484f58; } .ansi-bg-red { background: #8e1519; } ` +
  `.ansi-bg-green { background: #0f5323; } .ansi-bg-yellow { background: #693e00; }
.ansi-bg-blue { background: #0c2d6b; } .ansi-bg-magenta { background: #5a1e8c; } ` +
  `.ansi-bg-cyan { background: #0b4a54; } .ansi-bg-white { background: #6e7681; }
`;

/** Serves the script and the stylesheet; true when `path` was one of them. */
export function serveAsset(path: string, res: ServerResponse): boolean {
  const asset =
    path === "/runs/assets/run.js"
      ? { body: RUN_SCRIPT, type: "text/javascript; charset=utf-8" }
      : path === "/runs/assets/run.css"
        ? { body: RUN_STYLES, type: "text/css; charset=utf-8" }
        : undefined;
  if (!asset) return false;
  res.writeHead(200, { ...SECURITY_HEADERS, "content-type": asset.type, "cache-control": "public, max-age=300" });
  res.end(asset.body);
  return true;
}
