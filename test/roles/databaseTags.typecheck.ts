/**
 * Checked by `tsc --noEmit` (npm run typecheck, run by .ci/run), never run: each line under
 * `@ts-expect-error` is an adapter built over another service's database, and the check
 * fails if one of them ever compiles (see `DatabaseConnection` in src/adapters/sqlite/Database.ts).
 */
import { CatalogStoreSqlite } from "../../src/adapters/sqlite/CatalogStoreSqlite.js"
import { ApiDb, AuditDb, CatalogDb, CatalogDbReader } from "../../src/adapters/sqlite/DatabaseTags.js"
import { InboxSqlite } from "../../src/adapters/sqlite/InboxSqlite.js"
import { OutboxSqlite } from "../../src/adapters/sqlite/OutboxSqlite.js"

export const mistakes = [
  // @ts-expect-error the outbox's tables are in api.db, not catalog.db
  OutboxSqlite(CatalogDb),
  // @ts-expect-error an inbox belongs to a receiver's database
  InboxSqlite(ApiDb),
  // @ts-expect-error catalog entries are in catalog.db
  CatalogStoreSqlite(AuditDb)
]

// The same adapters over their own databases compile.
export const fine = [OutboxSqlite(ApiDb), InboxSqlite(AuditDb), CatalogStoreSqlite(CatalogDbReader)]
