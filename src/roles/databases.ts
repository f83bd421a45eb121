import { Context, Effect, Layer } from "effect"
import { existsSync } from "node:fs"
import { AuditLogSqlite } from "../adapters/sqlite/AuditLogSqlite.js"
import { CatalogStoreSqlite } from "../adapters/sqlite/CatalogStoreSqlite.js"
import { CoalescingTransaction } from "../adapters/sqlite/CoalescingTransaction.js"
import { databaseFile, databaseLayer, readerLayer } from "../adapters/sqlite/Database.js"
import {
  ApiDb,
  ApiDbReader,
  AuditDb,
  AuditDbReader,
  CatalogDb,
  CatalogDbReader,
  type DatabaseTag,
  type ServiceDatabase
} from "../adapters/sqlite/DatabaseTags.js"
import { InboxSqlite } from "../adapters/sqlite/InboxSqlite.js"
import { MaterialStoreSqlite } from "../adapters/sqlite/MaterialStoreSqlite.js"
import { OutboxSqlite } from "../adapters/sqlite/OutboxSqlite.js"
import { PublicationRequestsSqlite } from "../adapters/sqlite/PublicationRequestsSqlite.js"
import { persistence } from "../adapters/sqlite/SqliteFailures.js"
import { TransactionSqlite } from "../adapters/sqlite/TransactionSqlite.js"
import { Settings } from "../config.js"
import { PersistenceError } from "../domain/errors.js"
import type { HandlerName } from "../domain/HandlerName.js"
import { HandlerInboxes } from "../ports/HandlerInboxes.js"
import { Inbox } from "../ports/Inbox.js"
import { Outbox, type OutboxShape } from "../ports/Outbox.js"

const writer = <Self, S extends ServiceDatabase>(database: DatabaseTag<Self, S>, service: NoInfer<S>) =>
  Layer.unwrapEffect(
    Effect.map(Settings, (s) => databaseLayer(database, service, databaseFile(s.dataDir, service), s.storeBusyTimeout))
  )

const transaction = <Self, S extends ServiceDatabase>(database: DatabaseTag<Self, S>) =>
  Layer.unwrapEffect(Effect.map(Settings, (s) => TransactionSqlite(database, s.storeBusyTimeout)))

// Each is one value, so that roles of one process that use the same database share one
// connection (Layers are memoized by reference). Two better-sqlite3 connections writing
// one file in one process would block each other: a busy wait is synchronous.
const ApiDatabase = writer(ApiDb, "api")
const CatalogDatabase = writer(CatalogDb, "catalog")
const AuditDatabase = writer(AuditDb, "audit")

/** The API owner's stores over `api.db`: materials, requests, outbox, and its Transaction (group commit, see `CoalescingTransaction`). */
export const ApiStores = Layer.mergeAll(
  // Requests that arrive together commit together: one fsync for many 202s.
  CoalescingTransaction.pipe(Layer.provide(transaction(ApiDb))),
  OutboxSqlite(ApiDb),
  MaterialStoreSqlite(ApiDb),
  PublicationRequestsSqlite(ApiDb)
).pipe(
  Layer.provide(ApiDatabase)
)

/** The catalog's stores over `catalog.db`: entries, inbox, Transaction. */
export const CatalogStores = Layer.mergeAll(
  transaction(CatalogDb),
  InboxSqlite(CatalogDb),
  CatalogStoreSqlite(CatalogDb)
)
  .pipe(Layer.provide(CatalogDatabase))

/** The audit receiver's stores over `audit.db`: records, inbox, Transaction. */
export const AuditStores = Layer.mergeAll(transaction(AuditDb), InboxSqlite(AuditDb), AuditLogSqlite(AuditDb)).pipe(
  Layer.provide(AuditDatabase)
)

const reader = <Self, S extends ServiceDatabase>(database: DatabaseTag<Self, S>, service: NoInfer<S>) =>
  Layer.unwrapEffect(Effect.map(Settings, (s) => readerLayer(database, service, databaseFile(s.dataDir, service))))

/**
 * `HandlerInboxes` over the receivers' databases in `DOSTAVKA_DATA_DIR`: each opened
 * read-only for the caller's scope. A database not created yet (its receiver never ran
 * here) fails with `PersistenceError` (`unavailable`) instead of being created empty.
 */
export const HandlerInboxesSqlite = Layer.effect(
  HandlerInboxes,
  Effect.map(Effect.context<Settings>(), (context) => ({
    of: (handler: HandlerName) =>
      Effect.gen(function*() {
        const file = databaseFile(Context.get(context, Settings).dataDir, handler)
        if (!existsSync(file)) {
          return yield* new PersistenceError({
            operation: "inbox.open",
            kind: "unavailable",
            cause: new Error(`${file} does not exist`)
          })
        }
        const inbox = handler === "catalog"
          ? InboxSqlite(CatalogDbReader).pipe(Layer.provide(readerLayer(CatalogDbReader, "catalog", file)))
          : InboxSqlite(AuditDbReader).pipe(Layer.provide(readerLayer(AuditDbReader, "audit", file)))
        const built = yield* Layer.build(inbox).pipe(persistence("inbox.open"))
        return Context.get(built, Inbox)
      })
  }))
)

/**
 * Read-only views of the three databases, for observers in any process (the main job's
 * report): outbox stats from `api.db`, inbox and entries from `catalog.db`, inbox and
 * records from `audit.db`. Each is its own connection, opened read-only.
 */
export const ApiReader = OutboxSqlite(ApiDbReader).pipe(Layer.provide(reader(ApiDbReader, "api")))
/**
 * An `Outbox` for a machine without `api.db` (a receiver's): every operation fails with
 * `PersistenceError` (`unavailable`) naming the file, so the status view shows the outbox
 * as unknown, and why, instead of failing as a whole.
 */
const absentOutbox = (file: string): OutboxShape => {
  const absent = Effect.fail(
    new PersistenceError({ operation: "outbox.open", kind: "unavailable", cause: new Error(`${file} does not exist`) })
  )
  return {
    enqueue: () => absent,
    pending: () => absent,
    markPublished: () => absent,
    reject: () => absent,
    parked: () => absent,
    release: () => absent,
    publishedAt: () => absent,
    stats: () => absent,
    publishedPage: () => absent,
    find: () => absent,
    acquireLease: () => absent,
    releaseLease: () => absent
  }
}

/** `ApiReader` when `api.db` exists in `DOSTAVKA_DATA_DIR`; otherwise an outbox that says it is not there (see `absentOutbox`). */
export const ApiReaderIfPresent = Layer.unwrapEffect(Effect.map(Settings, (s) => {
  const file = databaseFile(s.dataDir, "api")
  return existsSync(file) ? ApiReader : Layer.succeed(Outbox, absentOutbox(file))
}))

export const CatalogReader = Layer.mergeAll(InboxSqlite(CatalogDbReader), CatalogStoreSqlite(CatalogDbReader)).pipe(
  Layer.provide(reader(CatalogDbReader, "catalog"))
)
export const AuditReader = Layer.mergeAll(InboxSqlite(AuditDbReader), AuditLogSqlite(AuditDbReader)).pipe(
  Layer.provide(reader(AuditDbReader, "audit"))
)

/**
 * What the API's GETs read, over a read-only connection to `api.db` of their own: a
 * writer holding the lock (another process, or this one's own transaction waiting for
 * it) never holds up a GET. Built after `ApiStores`, which creates and migrates the file.
 */
export const ApiQueryStores = Layer.mergeAll(
  OutboxSqlite(ApiDbReader),
  MaterialStoreSqlite(ApiDbReader),
  PublicationRequestsSqlite(ApiDbReader)
).pipe(
  Layer.provide(reader(ApiDbReader, "api")),
  Layer.provide(Layer.discard(ApiDatabase))
)
