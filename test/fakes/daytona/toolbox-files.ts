import busboy from "busboy";
import { randomBytes } from "node:crypto";
import { createReadStream, createWriteStream, type Stats } from "node:fs";
import { chmod, mkdir, readdir, rm, stat } from "node:fs/promises";
import { basename, dirname, join } from "node:path";
import { pipeline } from "node:stream/promises";
import type { ToolboxContext } from "./context.js";
import { daemonError, HttpError, resolveSandboxPath, sendEmpty, sendJson, stringArray } from "./http-util.js";

function sandboxPath(ctx: ToolboxContext, requested: string | null | undefined): string {
  if (requested === null || requested === undefined || requested === "")
    throw daemonError(400, "path is required", "INVALID_FILE_PATH", ctx);
  return resolveSandboxPath(ctx.sandbox.dir, ctx.sandbox.workDir, requested, ctx);
}

async function statOrNotFound(ctx: ToolboxContext, path: string, requested: string): Promise<Stats> {
  try {
    return await stat(path);
  } catch {
    throw daemonError(404, `file not found: ${requested}`, "FILE_NOT_FOUND", ctx);
  }
}

/**
 * FileInfo as the toolbox client types it. guess: `mode` is Go's `FileMode.String()` (e.g. `-rw-r--r--`),
 * `permissions` the octal bits (`0644`), owner/group the numeric ids as strings.
 */
function fileInfo(name: string, path: string, info: Stats): Record<string, unknown> {
  const modTime = info.mtime.toISOString();
  return {
    name,
    path,
    isDir: info.isDirectory(),
    size: info.size,
    mode: modeString(info),
    permissions: `0${(info.mode & 0o777).toString(8).padStart(3, "0")}`,
    modTime,
    modifiedAt: modTime,
    owner: String(info.uid),
    group: String(info.gid),
  };
}

function modeString(info: Stats): string {
  const bits = info.mode & 0o777;
  const chars = "rwxrwxrwx";
  let out = info.isDirectory() ? "d" : info.isSymbolicLink() ? "L" : "-";
  for (let i = 0; i < 9; i++) out += bits & (1 << (8 - i)) ? chars.charAt(i) : "-";
  return out;
}

async function listDir(dir: string, depth: number): Promise<Record<string, unknown>[]> {
  const out: Record<string, unknown>[] = [];
  for (const name of (await readdir(dir)).sort()) {
    const full = join(dir, name);
    let info: Stats;
    try {
      info = await stat(full);
    } catch {
      continue;
    }
    out.push(fileInfo(name, full, info));
    if (depth > 1 && info.isDirectory()) out.push(...(await listDir(full, depth - 1)));
  }
  return out;
}

/** `POST /files/bulk-upload`: multipart, field `files[i].path` = destination, part `files[i].file` = content. */
async function bulkUpload(ctx: ToolboxContext): Promise<void> {
  const multipart: NonNullable<typeof ctx.record.multipart> = { fields: {}, files: [] };
  ctx.record.multipart = multipart;
  const writes: Promise<void>[] = [];
  await new Promise<void>((resolve, reject) => {
    let parser: busboy.Busboy;
    try {
      parser = busboy({ headers: ctx.req.headers, preservePath: true });
    } catch (error) {
      reject(daemonError(400, `invalid multipart request: ${String(error)}`, undefined, ctx));
      return;
    }
    parser.on("field", (name, value) => {
      multipart.fields[name] = value;
    });
    parser.on("file", (name, stream, info) => {
      // The SDK sends `files[i].path` before `files[i].file`; the file part's filename is the destination too.
      const index = /^files\[(\d+)\]\.file$/.exec(name)?.[1];
      const filename = info.filename ?? "";
      const destination = (index === undefined ? undefined : multipart.fields[`files[${index}].path`]) ?? filename;
      const entry = { field: name, filename, destination, size: 0 };
      multipart.files.push(entry);
      let target: string;
      try {
        target = sandboxPath(ctx, destination);
      } catch (error) {
        stream.resume();
        reject(error instanceof Error ? error : new Error(String(error)));
        return;
      }
      writes.push(
        (async () => {
          await mkdir(dirname(target), { recursive: true });
          // Count bytes inside the pipeline: a separate 'data' listener would start the flow before the file is open.
          await pipeline(
            stream,
            async function* (source: AsyncIterable<Buffer>) {
              for await (const chunk of source) {
                entry.size += chunk.length;
                yield chunk;
              }
            },
            createWriteStream(target),
          );
        })(),
      );
    });
    parser.on("error", (error) => {
      reject(daemonError(400, `invalid multipart request: ${String(error)}`, undefined, ctx));
    });
    parser.on("close", resolve);
    ctx.req.pipe(parser);
  });
  await Promise.all(writes);
  sendEmpty(ctx.res, 200);
}

function quote(value: string): string {
  return value.replace(/\\/g, "\\\\").replace(/"/g, '\\"');
}

/**
 * `POST /files/bulk-download {paths}` → multipart/form-data; per path a part named `file` (content) or `error`
 * (JSON), with `filename` = the requested path string exactly (the SDK matches parts to requests by filename).
 */
async function bulkDownload(ctx: ToolboxContext): Promise<void> {
  const paths = stringArray(ctx.body, "paths");
  if (!paths) throw daemonError(400, "paths is required", undefined, ctx);
  const boundary = `fake-daytona-${randomBytes(12).toString("hex")}`;
  const parts: { head: string; file?: string; body?: Buffer }[] = [];
  for (const requested of paths) {
    const disposition = (name: string) =>
      `Content-Disposition: form-data; name="${name}"; filename="${quote(requested)}"`;
    let failure: HttpError | undefined;
    let target = "";
    let info: Stats | undefined;
    try {
      target = sandboxPath(ctx, requested);
      info = await statOrNotFound(ctx, target, requested);
      // guess
      if (info.isDirectory()) failure = daemonError(400, `path is a directory: ${requested}`, "INVALID_FILE_PATH", ctx);
    } catch (error) {
      failure = error instanceof HttpError ? error : daemonError(500, String(error), "FILE_READ_FAILED", ctx);
    }
    if (failure || !info) {
      const body = Buffer.from(JSON.stringify(failure?.body ?? {}));
      parts.push({
        head: `${disposition("error")}\r\nContent-Type: application/json\r\nContent-Length: ${String(body.length)}`,
        body,
      });
    } else {
      parts.push({
        head:
          `${disposition("file")}\r\nContent-Type: application/octet-stream\r\n` +
          `Content-Length: ${String(info.size)}`,
        file: target,
      });
    }
  }
  ctx.res.writeHead(200, { "Content-Type": `multipart/form-data; boundary=${boundary}` });
  for (const part of parts) {
    ctx.res.write(`--${boundary}\r\n${part.head}\r\n\r\n`);
    if (part.body) ctx.res.write(part.body);
    if (part.file) await pipeline(createReadStream(part.file), ctx.res, { end: false });
    ctx.res.write("\r\n");
  }
  ctx.res.end(`--${boundary}--\r\n`);
}

/** `/files...` routes. Returns false when the route is not a files route. */
export async function handleFiles(ctx: ToolboxContext): Promise<boolean> {
  const { segments: seg, method, query } = ctx;
  if (seg[0] !== "files") return false;
  const route = `${method} ${seg.slice(1).join("/")}`;
  switch (route) {
    case "POST bulk-upload":
      await bulkUpload(ctx);
      return true;
    case "POST bulk-download":
      await bulkDownload(ctx);
      return true;
    case "POST folder": {
      const target = sandboxPath(ctx, query.get("path"));
      const mode = query.get("mode");
      if (!mode || !/^[0-7]{3,4}$/.test(mode))
        throw daemonError(400, "mode is required (octal, e.g. 755)", undefined, ctx); // guess: text
      await mkdir(target, { recursive: true, mode: Number.parseInt(mode, 8) });
      await chmod(target, Number.parseInt(mode, 8));
      sendEmpty(ctx.res, 201);
      return true;
    }
    case "POST permissions": {
      // `fs.setFilePermissions(path, {mode, owner, group})`: query parameters, octal mode without a leading 0.
      const requested = query.get("path");
      const target = sandboxPath(ctx, requested);
      await statOrNotFound(ctx, target, requested ?? "");
      const mode = query.get("mode");
      // guess: text
      if (mode !== null && !/^[0-7]{3,4}$/.test(mode)) throw daemonError(400, `invalid mode: ${mode}`, undefined, ctx);
      // Every fake sandbox runs as the test's own user, so ownership is not modelled: say so rather than pretend.
      if (query.get("owner") !== null || query.get("group") !== null)
        throw daemonError(501, "fake-daytona: changing owner or group is not modelled", undefined, ctx);
      if (mode !== null) await chmod(target, Number.parseInt(mode, 8));
      sendEmpty(ctx.res, 200); // guess: status and empty body
      return true;
    }
    case "GET ": {
      const requested = query.get("path");
      const target = sandboxPath(ctx, requested);
      const info = await statOrNotFound(ctx, target, requested ?? "");
      const depth = Number(query.get("depth") ?? "1");
      if (!info.isDirectory()) {
        sendJson(ctx.res, 200, [fileInfo(basename(target), target, info)]);
        return true;
      }
      sendJson(ctx.res, 200, await listDir(target, Number.isInteger(depth) && depth >= 1 ? depth : 1));
      return true;
    }
    case "GET info": {
      const requested = query.get("path");
      const target = sandboxPath(ctx, requested);
      sendJson(ctx.res, 200, fileInfo(basename(target), target, await statOrNotFound(ctx, target, requested ?? "")));
      return true;
    }
    case "GET download": {
      const requested = query.get("path");
      const target = sandboxPath(ctx, requested);
      const info = await statOrNotFound(ctx, target, requested ?? "");
      ctx.res.writeHead(200, { "Content-Type": "application/octet-stream", "Content-Length": info.size });
      await pipeline(createReadStream(target), ctx.res);
      return true;
    }
    case "DELETE ": {
      const requested = query.get("path");
      const target = sandboxPath(ctx, requested);
      const info = await statOrNotFound(ctx, target, requested ?? "");
      if (target === ctx.sandbox.dir)
        throw daemonError(403, "refusing to delete the sandbox root", "FILE_ACCESS_DENIED", ctx);
      if (info.isDirectory() && query.get("recursive") !== "true") {
        throw daemonError(400, `${requested ?? ""} is a directory; pass recursive=true`, undefined, ctx); // guess
      }
      await rm(target, { recursive: true, force: true });
      sendEmpty(ctx.res, 204);
      return true;
    }
    default:
      return false;
  }
}
