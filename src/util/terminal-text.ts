/**
 * Text from a sandbox on its way to a person's terminal: escape sequences and every control
 * character but line feed and tab are dropped, so nothing printed can move the cursor, retitle
 * the window, rewrite what was printed before or hide itself.
 */
export function terminalText(text: string): string {
  return (
    text
      // eslint-disable-next-line no-control-regex -- escape sequences (CSI, OSC and the rest) are what is removed
      .replace(/\x1b(?:\[[0-?]*[ -/]*[@-~]|\][^\x07\x1b]*(?:\x07|\x1b\\)?|[@-Z\\-_])?/g, "")
      // eslint-disable-next-line no-control-regex -- so are the C0 and C1 control characters
      .replace(/[\x00-\x08\x0b-\x1f\x7f-\x9f]/g, "")
  );
}
