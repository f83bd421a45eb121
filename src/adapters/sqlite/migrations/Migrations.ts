/**
 * The migrations of each service database, one file each under `migrations/<service>/`
 * (`<id>_<name>.ts`, as `@effect/sql`'s Migrator names them), keyed `<id>_<name>` as the
 * Migrator's `effect_sql_migrations` table records them. A receiver's database holds its
 * handler's own tables and the kit's inbox tables (`receiverMigrations`).
 */
import { Effect } from "effect"
import type { ServiceDatabase } from "../DatabaseTags.js"
import apiInit from "./api/0001_init.js"
import apiOutboxRejections from "./api/0002_outbox_rejections.js"
import apiOutboxTraceparent from "./api/0003_outbox_traceparent.js"
import auditRecords from "./audit/0001_audit_records.js"
import catalogEntries from "./catalog/0001_catalog_entries.js"
import { deliveryFailuresTable, inboxTable, writeLockTable } from "./kitTables.js"
import type { Migration } from "./Migration.js"

/**
 * A receiver's migrations: `1_init` creates the handler's own tables (`ownTables`) with
 * the inbox and the write lock, `2_delivery_failures` the table of routed failures. Kept
 * in this order and under these ids, which databases written by earlier versions record.
 */
export const receiverMigrations = (ownTables: Migration): Record<string, Migration> => ({
  "1_init": Effect.all([ownTables, inboxTable, writeLockTable], { discard: true }),
  "2_delivery_failures": deliveryFailuresTable
})

/** Every service database's migrations, oldest first. */
export const migrations: Record<ServiceDatabase, Record<string, Migration>> = {
  api: {
    "1_init": apiInit,
    "2_outbox_rejections": apiOutboxRejections,
    "3_outbox_traceparent": apiOutboxTraceparent
  },
  catalog: receiverMigrations(catalogEntries),
  audit: receiverMigrations(auditRecords)
}

/** The migrations of one service's database, oldest first, as `<id>_<name>` (the Migrator's record keys). */
export const migrationsOf = (service: ServiceDatabase): ReadonlyArray<string> => Object.keys(migrations[service])
