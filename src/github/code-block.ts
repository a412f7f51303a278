/**
 * Text shown exactly as written, inside a fenced code block: GitHub renders nothing in it — no
 * Markdown that hides a line (`[//]: # (…)`, an HTML comment), no image, no mention. The fence
 * is longer than any run of backticks in the text, so no line of it can close the block early.
 */
export function codeBlock(text: string): string {
  let longest = 0;
  for (const run of text.match(/`+/g) ?? []) longest = Math.max(longest, run.length);
  const fence = "`".repeat(Math.max(3, longest + 1));
  return `${fence}text\n${text}\n${fence}`;
}
