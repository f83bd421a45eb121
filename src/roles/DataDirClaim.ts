import { FileSystem } from "@effect/platform"
import { Data, Effect, Option } from "effect"
import { join } from "node:path"
import { Settings } from "../config.js"

/**
 * The file in `DOSTAVKA_DATA_DIR` that names the prefix whose databases the folder holds:
 * the outbox, inboxes and catalog of one deployment belong with its queues, and two
 * prefixes on one folder would mix them.
 */
export const PrefixMarkerFile = "prefix"

/**
 * `DOSTAVKA_DATA_DIR` holds the databases of another `DOSTAVKA_PREFIX` (its marker file
 * says `holds`). A role or command that writes stops at start with this one line; a
 * command that only reads warns with it.
 */
export class DataDirOfAnotherPrefix extends Data.TaggedError("DataDirOfAnotherPrefix")<{
  readonly dataDir: string
  readonly holds: string
  readonly prefix: string
}> {
  override get message() {
    return `DOSTAVKA_DATA_DIR=${this.dataDir} holds the databases of prefix ${this.holds}, and this is prefix ${this.prefix}: ` +
      `set DOSTAVKA_DATA_DIR to a folder of its own for ${this.prefix} (or DOSTAVKA_PREFIX=${this.holds})`
  }
}

/**
 * The prefix `DOSTAVKA_DATA_DIR`'s marker names (`PrefixMarkerFile`), or `None` when the
 * folder or its marker does not exist yet, or the marker is empty. Reads only.
 */
export const dataDirPrefix = Effect.gen(function*() {
  const { dataDir } = yield* Settings
  const fs = yield* FileSystem.FileSystem
  const marker = join(dataDir, PrefixMarkerFile)
  if (!(yield* fs.exists(marker))) return Option.none<string>()
  return Option.some((yield* fs.readFileString(marker)).trim()).pipe(Option.filter((holds) => holds !== ""))
})

/**
 * Claims `DOSTAVKA_DATA_DIR` for `DOSTAVKA_PREFIX` before anything opens a database in
 * it: creates the folder, and writes the prefix into its marker file unless one is there
 * (created exclusively, so two processes starting together agree). A folder of an
 * earlier version, with databases and no marker, is claimed as it is. Fails with
 * `DataDirOfAnotherPrefix` when the marker names another prefix, or `PlatformError` when
 * the folder cannot be written.
 */
export const claimDataDir = Effect.gen(function*() {
  const { dataDir, prefix } = yield* Settings
  const fs = yield* FileSystem.FileSystem
  yield* fs.makeDirectory(dataDir, { recursive: true })
  const holds = yield* dataDirPrefix
  if (Option.isSome(holds)) {
    if (holds.value !== prefix) return yield* new DataDirOfAnotherPrefix({ dataDir, holds: holds.value, prefix })
    return
  }
  yield* fs.writeFileString(join(dataDir, PrefixMarkerFile), `${prefix}\n`, { flag: "wx" }).pipe(
    Effect.catchIf((error) => error._tag === "SystemError" && error.reason === "AlreadyExists", () => Effect.void)
  )
  // Another process may have written its own prefix first.
  const claimed = yield* dataDirPrefix
  if (Option.isSome(claimed) && claimed.value !== prefix) {
    return yield* new DataDirOfAnotherPrefix({ dataDir, holds: claimed.value, prefix })
  }
})
