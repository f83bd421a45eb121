/** TempDir: a folder of its own for one round's databases and logs, removed when the scope closes. */
import { Effect } from "effect"
import { mkdtempSync, rmSync } from "node:fs"
import { tmpdir } from "node:os"
import { join } from "node:path"

export const tempDir = (name: string) =>
  Effect.acquireRelease(
    Effect.sync(() => mkdtempSync(join(tmpdir(), `dostavka-bench-${name}-`))),
    (dir) => Effect.sync(() => rmSync(dir, { recursive: true, force: true }))
  )
