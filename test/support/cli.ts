import { Effect } from "effect"
import { execFile } from "node:child_process"
import { join } from "node:path"

/** The repository's root, where `src/main.ts` is. */
export const projectRoot = join(import.meta.dirname, "..", "..")

/** Runs the CLI as a user would (`node --import tsx src/main.ts …`), with `env` added; returns its exit code and output. */
export const dostavka = (args: ReadonlyArray<string>, env: Record<string, string> = {}) =>
  Effect.async<{ code: number; stdout: string; stderr: string }>((resume) => {
    execFile(
      process.execPath,
      ["--import", "tsx", "src/main.ts", ...args],
      {
        cwd: projectRoot,
        env: { ...process.env, ...env },
        timeout: 60_000
      },
      (error, stdout, stderr) =>
        resume(
          Effect.succeed({ code: error === null ? 0 : typeof error.code === "number" ? error.code : 1, stdout, stderr })
        )
    )
  })
