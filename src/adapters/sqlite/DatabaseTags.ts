/**
 * The service databases and the tags of their connections: which database an adapter is
 * built over is part of its type.
 */
import type { SqlClient } from "@effect/sql"
import { Context } from "effect"
import type { SqliteFile } from "./SqliteFile.js"

/** The three service databases: one SQLite file each, never shared between services. */
export type ServiceDatabase = "api" | "catalog" | "audit"

/**
 * One connection to one service's database, as the adapters over it see it: the SQL
 * client, and the file it opened (a read-only connection's `file.verify` always succeeds,
 * as it commits nothing). `service` names the database in the type, so that an
 * adapter that needs the API owner's tables (`OutboxSqlite`) cannot be built over a
 * receiver's database: that mistake does not compile.
 */
export interface DatabaseConnection<S extends ServiceDatabase> {
  readonly service: S
  readonly sql: SqlClient.SqlClient
  readonly file: SqliteFile
}

/**
 * Every connection a process may open has a tag of its own: the writing connection of
 * each service database (`ApiDb`, `CatalogDb`, `AuditDb`) and the read-only one beside
 * it (`ApiDbReader`, ...). An adapter is built over a tag (`InboxSqlite(CatalogDb)`), so
 * two adapters over two databases are two Layers with two requirements: Layer memoisation
 * can never hand one database's adapter to a user of another.
 */
export class ApiDb extends Context.Tag("dostavka/ApiDb")<ApiDb, DatabaseConnection<"api">>() {}
/** The read-only connection to `api.db` (see `ApiDb`). */
export class ApiDbReader extends Context.Tag("dostavka/ApiDbReader")<ApiDbReader, DatabaseConnection<"api">>() {}
/** The writing connection to `catalog.db` (see `ApiDb`). */
export class CatalogDb extends Context.Tag("dostavka/CatalogDb")<CatalogDb, DatabaseConnection<"catalog">>() {}
/** The read-only connection to `catalog.db` (see `ApiDb`). */
export class CatalogDbReader
  extends Context.Tag("dostavka/CatalogDbReader")<CatalogDbReader, DatabaseConnection<"catalog">>()
{}
/** The writing connection to `audit.db` (see `ApiDb`). */
export class AuditDb extends Context.Tag("dostavka/AuditDb")<AuditDb, DatabaseConnection<"audit">>() {}
/** The read-only connection to `audit.db` (see `ApiDb`). */
export class AuditDbReader
  extends Context.Tag("dostavka/AuditDbReader")<AuditDbReader, DatabaseConnection<"audit">>()
{}

/** A tag of a connection to the database of `S`, e.g. `DatabaseTag<Self, "catalog" | "audit">` for an inbox. */
export type DatabaseTag<Self, S extends ServiceDatabase> = Context.Tag<Self, DatabaseConnection<S>>
