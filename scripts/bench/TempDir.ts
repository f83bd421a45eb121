/** TempDir: a folder of its own for one round's databases and logs, removed when the scope closes. */
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"
import { Effect } from "effect"

export const tempDir = (name: string) =>
  Effect.acquireRelease(
    Effect.sync(() => mkdtempSync(join(tmpdir(), `dostavka-bench-${name}-`))),
    (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
  )
