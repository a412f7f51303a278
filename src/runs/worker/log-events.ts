import type { HarnessEvent, Reporter } from "../../contracts/events.js";
import type { Log } from "../../util/log.js";

/** A reporter that logs the run's step boundaries. */
export function logReporter(log: Log): Reporter {
  return {
    emit: (event) => {
      logEvent(log, event);
    },
  };
}

/** One structured log line per step boundary, with the run id bound by the child logger. */
function logEvent(log: Log, event: HarnessEvent): void {
  switch (event.type) {
    case "node.started":
      log.info({ node: event.nodeId, attempt: event.attempt }, "step started");
      break;
    case "node.finished":
      log.info(
        {
          node: event.report.nodeId,
          attempt: event.report.attempt,
          status: event.report.status,
          durationMs: event.report.durationMs,
        },
        "step finished",
      );
      break;
    case "run.notice":
      log.warn({ notice: event.text }, "run notice");
      break;
    case "push.finished":
      log.info(
        { pushed: event.result.pushed, prUrl: event.result.prUrl, errorKind: event.result.errorKind },
        "push finished",
      );
      break;
    default:
      break;
  }
}
