import { commandAgent } from "../../src/agents/command.js";
import type { AgentDriver } from "../../src/agents/types.js";

/**
 * An agent that reports where its prompt file is (`FILE=`, `WHERE=inside|outside` the
 * checkout), whether the file holds the prompt it was given (`READ=same`), and which files of
 * the checkout contain `marker` (`FOUND=`), then changes one file so the run has a commit.
 */
export function promptProbeAgent(marker: string): AgentDriver {
  return commandAgent({
    argv: [
      "sh",
      "-c",
      [
        'echo "FILE=$HARNESS_PROMPT_FILE"',
        'case "$HARNESS_PROMPT_FILE" in "$PWD"/*) echo "WHERE=inside";; *) echo "WHERE=outside";; esac',
        'if printf "%s" "$HARNESS_PROMPT" | cmp -s - "$HARNESS_PROMPT_FILE"; ' +
          'then echo "READ=same"; else echo "READ=different"; fi',
        `echo "FOUND=$(grep -rlF ${marker} . 2>/dev/null | tr "\\n" " ")"`,
        "echo done > done.txt",
      ].join("\n"),
    ],
  });
}
