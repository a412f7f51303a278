import type { Corpus, Unit } from "./corpus.js";

/*
 * Reading a diff into a corpus: added lines of each file, and paths that are new. Commit messages
 * and text to mask are read whole (`addText`).
 */

const HUNK_HEADER = /@@ -(\d{1,10})(?:,(\d{1,10}))? \+(\d{1,10})(?:,(\d{1,10}))? @@/y;

export function addPatch(corpus: Corpus, source: number): void {
  const text = corpus.sources[source] ?? "";
  let file: string | undefined;
  let inHeader = false;
  let isNewPath = false;
  let pathPiece: [number, number] | undefined;
  let oldLeft = 0;
  let newLeft = 0;
  let nextLine = 0;
  let runOpen = false;
  let previousLine = 0;

  const unitForFile = (): void => {
    corpus.unit({ where: "diff", file, message: undefined, key: `diff\0${file ?? ""}` });
  };
  const added = (start: number, end: number, line: number): void => {
    if (!runOpen || (line !== 0 && line !== previousLine + 1)) unitForFile();
    corpus.piece(source, start, end, line);
    runOpen = true;
    previousLine = line;
  };
  // A file's name is pushed too: scan it when the diff creates, renames or copies it.
  const finishHeader = (): void => {
    if (inHeader && isNewPath && pathPiece) {
      unitForFile();
      corpus.piece(source, pathPiece[0], pathPiece[1], 0);
    }
    inHeader = false;
    isNewPath = false;
    pathPiece = undefined;
    runOpen = false;
  };

  let pos = 0;
  while (pos < text.length) {
    const newline = text.indexOf("\n", pos);
    const end = newline < 0 ? text.length : newline;
    const start = pos;
    pos = end + 1;
    const first = text.charCodeAt(start);

    // Inside a hunk its counts, not the first characters, tell lines apart: an added line
    // `++ x` is written `+++ x` and must not be read as a header.
    if (oldLeft > 0 || newLeft > 0) {
      if (first === PLUS) {
        added(start + 1, end, nextLine);
        nextLine++;
        newLeft--;
        continue;
      }
      if (first === MINUS) {
        oldLeft--;
        runOpen = false;
        continue;
      }
      if (first === SPACE || start === end) {
        oldLeft--;
        newLeft--;
        nextLine++;
        runOpen = false;
        continue;
      }
      if (first === BACKSLASH) continue; // "\ No newline at end of file"
      oldLeft = 0; // the counts were wrong: read on as if the hunk had ended
      newLeft = 0;
    }

    if (text.startsWith("diff --git ", start)) {
      finishHeader();
      inHeader = true;
      file = diffGitNewPath(text.slice(start + 11, end));
      pathPiece = [start + 11, end];
    } else if (text.startsWith("@@ ", start)) {
      finishHeader();
      HUNK_HEADER.lastIndex = start;
      const hunk = HUNK_HEADER.exec(text);
      oldLeft = hunk ? Number(hunk[2] ?? "1") : 0;
      newLeft = hunk ? Number(hunk[4] ?? "1") : 0;
      nextLine = hunk ? Number(hunk[3] ?? "0") : 0;
    } else if (!inHeader && text.startsWith("--- ", start) && text.startsWith("+++ ", end + 1)) {
      finishHeader(); // a plain unified diff, without git's "diff --git" line
      inHeader = true;
      file = undefined;
    } else if (inHeader && text.startsWith("+++ ", start)) {
      const path = text.slice(start + 4, end);
      if (path !== "/dev/null") {
        file = headerPath(path);
        pathPiece = [start + 4, end];
      }
    } else if (inHeader && (text.startsWith("rename to ", start) || text.startsWith("copy to ", start))) {
      const at = text.indexOf(" to ", start) + 4;
      file = unquote(text.slice(at, end));
      pathPiece = [at, end];
      isNewPath = true;
    } else if (inHeader && text.startsWith("new file mode", start)) {
      isNewPath = true;
    } else if (first === PLUS) {
      // Not where git writes content, but it would be pushed if it were: read it as added.
      added(start + 1, end, nextLine);
      if (nextLine > 0) nextLine++;
    } else {
      runOpen = false;
    }
  }
  finishHeader();
}

export const PLUS = 0x2b;
export const MINUS = 0x2d;
export const SPACE = 0x20;
const BACKSLASH = 0x5c;

/** `b/path` from `diff --git a/path b/path`, quoted or not, with spaces or not. */
function diffGitNewPath(rest: string): string {
  if (rest.endsWith('"')) {
    const open = rest.lastIndexOf(' "');
    return headerPath(rest.slice(open + 1));
  }
  // Unrenamed paths are the same on both sides, which settles where a path with spaces splits.
  if (rest.length % 2 === 1) {
    const half = (rest.length - 1) / 2;
    const a = rest.slice(0, half);
    const b = rest.slice(half + 1);
    if (a.startsWith("a/") && b.startsWith("b/") && a.slice(2) === b.slice(2)) return b.slice(2);
  }
  const at = rest.lastIndexOf(" b/");
  return at >= 0 ? rest.slice(at + 3) : rest;
}

function headerPath(raw: string): string {
  // git ends a `+++` path that has a space in it with a tab.
  const path = unquote(raw.endsWith("\t") ? raw.slice(0, -1) : raw);
  return path.startsWith("b/") ? path.slice(2) : path;
}

const C_ESCAPES: Readonly<Record<string, number>> = { a: 7, b: 8, t: 9, n: 10, v: 11, f: 12, r: 13, '"': 34, "\\": 92 };

/** git's C-style quoting of unusual paths: `"dir/\303\251t\303\251.txt"` (octal bytes of UTF-8). */
function unquote(raw: string): string {
  if (raw.length < 2 || !raw.startsWith('"') || !raw.endsWith('"')) return raw;
  const chunks: Buffer[] = [];
  let plain = 1;
  let i = 1;
  while (i < raw.length - 1) {
    if (raw.charAt(i) !== "\\") {
      i++;
      continue;
    }
    chunks.push(Buffer.from(raw.slice(plain, i), "utf8"));
    const octal = raw.slice(i + 1, i + 4);
    if (/^[0-7]{3}$/.test(octal)) {
      chunks.push(Buffer.from([parseInt(octal, 8)]));
      i += 4;
    } else {
      const next = raw.charAt(i + 1);
      chunks.push(Buffer.from([C_ESCAPES[next] ?? next.charCodeAt(0)]));
      i += 2;
    }
    plain = i;
  }
  chunks.push(Buffer.from(raw.slice(plain, raw.length - 1), "utf8"));
  return Buffer.concat(chunks).toString("utf8");
}

export function addText(corpus: Corpus, source: number, unit: Unit, dropDiffMarker: boolean): void {
  const text = corpus.sources[source] ?? "";
  corpus.unit(unit);
  let pos = 0;
  let line = 1;
  while (pos <= text.length) {
    const newline = text.indexOf("\n", pos);
    const end = newline < 0 ? text.length : newline;
    const first = text.charCodeAt(pos);
    const skip = dropDiffMarker && pos < end && (first === PLUS || first === MINUS || first === SPACE) ? 1 : 0;
    corpus.piece(source, pos + skip, end, line);
    if (newline < 0) break;
    pos = newline + 1;
    line++;
  }
}
