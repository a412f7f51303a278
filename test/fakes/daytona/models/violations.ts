/*
 * Violations the fake Daytona found, per process: the fake answers the app asynchronously, so it
 * cannot throw into the test; the test set-up's afterEach reads this list and fails the test that
 * was running when they were recorded.
 */

interface Violation {
  source: number;
  text: string;
}

const recorded: Violation[] = [];
let sources = 0;

/** A fresh id for one fake, so it can take back only the violations it recorded. */
export function newViolationSource(): number {
  sources += 1;
  return sources;
}

export function recordViolation(source: number, text: string): void {
  recorded.push({ source, text });
}

/** Removes and returns the violations one fake recorded, or all of them without a source. */
export function takeViolations(source?: number): string[] {
  const taken: string[] = [];
  for (let index = recorded.length - 1; index >= 0; index--) {
    const violation = recorded[index];
    if (violation && (source === undefined || violation.source === source)) {
      taken.unshift(violation.text);
      recorded.splice(index, 1);
    }
  }
  return taken;
}

export function violationReport(violations: readonly string[]): string {
  return (
    `the fake Daytona saw ${String(violations.length)} exchange(s) Daytona's client models do not allow ` +
    "(fix the fake's answer or the app's request; see docs/testing.md):\n" +
    violations.map((text) => `- ${text}`).join("\n")
  );
}
