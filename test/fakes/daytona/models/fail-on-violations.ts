import { afterAll, afterEach } from "vitest";
import { takeViolations, violationReport } from "./violations.js";

// Registered before any test file's own hooks, so with vitest's stacked hook order it runs after
// them: requests a test's clean-up makes are counted against that test too.
afterEach(() => {
  const violations = takeViolations();
  if (violations.length > 0) throw new Error(violationReport(violations));
});

// Requests made in beforeAll/afterAll have no test to blame; they fail the file.
afterAll(() => {
  const violations = takeViolations();
  if (violations.length > 0) throw new Error(violationReport(violations));
});
