/**
 * The identity of a database's files, checked before each commit, so that a file removed
 * or replaced under a running process stops it instead of taking its writes unseen.
 */
import { Data, Effect } from "effect"
import { statSync } from "node:fs"

/** The database file this process opened is gone from its path, or another file took its place. */
export class DatabaseFileLost
  extends Data.TaggedError("DatabaseFileLost")<{ readonly filename: string; readonly detail: string }>
{
  override get message() {
    return `${this.detail}; writes would go to a file nobody will read again`
  }
}

/**
 * The identity (device and inode) of the files a connection opened, and a check that
 * their paths still name them: the database, its write-ahead log (`-wal`) and its
 * shared-memory index (`-shm`), which SQLite keeps while any connection is open. A file
 * removed or replaced under a running process (`rm`, a restore copied over it) keeps
 * receiving that process's writes unseen, and a log removed takes every transaction not
 * yet checkpointed with it at the next start; the check, made before each commit, turns
 * either into `DatabaseFileLost`.
 */
export interface SqliteFile {
  readonly filename: string
  readonly verify: Effect.Effect<void, DatabaseFileLost>
}

const identityOf = (path: string): string | undefined => {
  try {
    const stat = statSync(path)
    return `${stat.dev}:${stat.ino}`
  } catch {
    return undefined
  }
}

/** The `SqliteFile` of `filename`, its files' identities taken now (those that exist). */
export const openedFile = (filename: string): Effect.Effect<SqliteFile> =>
  Effect.sync(() => {
    const paths = [filename, `${filename}-wal`, `${filename}-shm`]
    const opened = paths.map(identityOf)
    return {
      filename,
      verify: Effect.suspend(() => {
        for (const [i, path] of paths.entries()) {
          if (opened[i] === undefined) continue
          const now = identityOf(path)
          if (now === undefined) return Effect.fail(new DatabaseFileLost({ filename, detail: `${path} was removed` }))
          if (now !== opened[i]) {
            return Effect.fail(new DatabaseFileLost({ filename, detail: `${path} was replaced by another file` }))
          }
        }
        return Effect.void
      })
    }
  })
