import type { SqlClient } from "@effect/sql"
import type { Effect } from "effect"

/** One schema migration: statements run once, in order, by `@effect/sql`'s Migrator, in a transaction of its own. */
export type Migration = Effect.Effect<void, unknown, SqlClient.SqlClient>
