/**
 * DeliveryFacts: what the three SQLite files of a run hold, read through read-only
 * connections (as an operator with sqlite3 would; the roles may still be running): the
 * API's accepted requests and outbox, each receiver's inbox, the catalog's entries and
 * the audit records. The run's invariants and recovery times are computed from these.
 */
import Database from "better-sqlite3"
import { existsSync } from "node:fs"
import { join } from "node:path"

export interface Receipt {
  readonly outcome: "applied" | "stale"
  readonly receivedAt: number
  readonly duplicates: number
}

export interface AcceptedEvent {
  readonly eventId: string
  readonly materialId: string
  readonly revision: number
  readonly acceptedAt: number
}

export interface DeliveryFacts {
  readonly accepted: ReadonlyArray<AcceptedEvent>
  readonly outbox: {
    readonly total: number
    readonly pending: number
    readonly parked: number
    readonly published: number
  }
  /** Confirm times of published outbox rows, ascending. */
  readonly publishedTimes: ReadonlyArray<number>
  /** The newest revision the API accepted per material, with its event id. */
  readonly newestAccepted: ReadonlyMap<string, { readonly revision: number; readonly eventId: string }>
  readonly catalog: {
    readonly receipts: ReadonlyMap<string, Receipt>
    readonly entries: ReadonlyMap<string, { readonly revision: number; readonly eventId: string }>
    /** (handler, message_id) keys present more than once. */
    readonly repeatedKeys: number
  }
  readonly audit: {
    readonly receipts: ReadonlyMap<string, Receipt>
    /** Audit records per event id. */
    readonly records: ReadonlyMap<string, number>
    readonly repeatedKeys: number
  }
}

const open = (dataDir: string, service: string) => {
  const file = join(dataDir, `${service}.db`)
  return existsSync(file) ? new Database(file, { readonly: true, fileMustExist: true }) : undefined
}

const withDb = <A>(dataDir: string, service: string, fallback: A, read: (db: Database.Database) => A): A => {
  const db = open(dataDir, service)
  if (db === undefined) return fallback
  try {
    return read(db)
  } catch (e) {
    // A file the role has not migrated yet has no tables.
    if (e instanceof Error && /no such table/.test(e.message)) return fallback
    throw e
  } finally {
    db.close()
  }
}

const receiptsOf = (db: Database.Database, handler: string) => {
  const receipts = new Map<string, Receipt>()
  for (
    const row of db.prepare("SELECT message_id, outcome, received_at, duplicates FROM inbox WHERE handler = ?").iterate(
      handler
    ) as Iterable<{ message_id: string; outcome: "applied" | "stale"; received_at: number; duplicates: number }>
  ) {
    receipts.set(row.message_id, { outcome: row.outcome, receivedAt: row.received_at, duplicates: row.duplicates })
  }
  const repeated =
    (db.prepare("SELECT COUNT(*) AS n FROM (SELECT 1 FROM inbox GROUP BY handler, message_id HAVING COUNT(*) > 1)")
      .get() as { n: number }).n
  return { receipts, repeated }
}

export const readDeliveryFacts = (dataDir: string): DeliveryFacts => {
  const api = withDb(dataDir, "api", undefined, (db) => {
    const accepted =
      (db.prepare("SELECT event_id, material_id, revision, accepted_at FROM publication_requests").all() as Array<
        { event_id: string; material_id: string; revision: number; accepted_at: number }
      >)
        .map((r) => ({
          eventId: r.event_id,
          materialId: r.material_id,
          revision: r.revision,
          acceptedAt: r.accepted_at
        }))
    const outbox = db.prepare(`SELECT COUNT(*) AS total,
        COUNT(*) FILTER (WHERE published_at IS NULL AND parked_at IS NULL) AS pending,
        COUNT(*) FILTER (WHERE published_at IS NULL AND parked_at IS NOT NULL) AS parked,
        COUNT(*) FILTER (WHERE published_at IS NOT NULL) AS published
      FROM outbox`).get() as { total: number; pending: number; parked: number; published: number }
    const publishedTimes = db.prepare(
      "SELECT published_at FROM outbox WHERE published_at IS NOT NULL ORDER BY published_at"
    ).pluck().all() as Array<number>
    const newestAccepted = new Map<string, { revision: number; eventId: string }>()
    for (
      const row of db.prepare(
        "SELECT material_id, revision, event_id FROM materials m WHERE revision = (SELECT MAX(revision) FROM materials WHERE material_id = m.material_id)"
      ).iterate() as Iterable<{ material_id: string; revision: number; event_id: string }>
    ) {
      newestAccepted.set(row.material_id, { revision: row.revision, eventId: row.event_id })
    }
    return { accepted, outbox, publishedTimes, newestAccepted }
  })
  const empty = { receipts: new Map<string, Receipt>(), repeated: 0 }
  const catalog = withDb(dataDir, "catalog", {
    ...empty,
    entries: new Map<string, { revision: number; eventId: string }>()
  }, (db) => {
    const entries = new Map<string, { revision: number; eventId: string }>()
    for (
      const row of db.prepare("SELECT material_id, revision, event_id FROM catalog_entries").iterate() as Iterable<
        { material_id: string; revision: number; event_id: string }
      >
    ) {
      entries.set(row.material_id, { revision: row.revision, eventId: row.event_id })
    }
    return { ...receiptsOf(db, "catalog"), entries }
  })
  const audit = withDb(dataDir, "audit", { ...empty, records: new Map<string, number>() }, (db) => {
    const records = new Map<string, number>()
    for (
      const row of db.prepare("SELECT event_id, COUNT(*) AS n FROM audit_records GROUP BY event_id")
        .iterate() as Iterable<{ event_id: string; n: number }>
    ) {
      records.set(row.event_id, row.n)
    }
    return { ...receiptsOf(db, "audit"), records }
  })
  return {
    accepted: api?.accepted ?? [],
    outbox: api?.outbox ?? { total: 0, pending: 0, parked: 0, published: 0 },
    publishedTimes: api?.publishedTimes ?? [],
    newestAccepted: api?.newestAccepted ?? new Map(),
    catalog: { receipts: catalog.receipts, entries: catalog.entries, repeatedKeys: catalog.repeated },
    audit: { receipts: audit.receipts, records: audit.records, repeatedKeys: audit.repeated }
  }
}

/** The cheap part of the facts, for polling until the run is quiet: outbox counts and how many accepted events each receiver still lacks. */
export const readProgress = (dataDir: string) => {
  const facts = readDeliveryFacts(dataDir)
  const ids = facts.accepted.map((a) => a.eventId)
  return {
    accepted: ids.length,
    pending: facts.outbox.pending,
    parked: facts.outbox.parked,
    missingAtCatalog: ids.filter((id) => !facts.catalog.receipts.has(id)).length,
    missingAtAudit: ids.filter((id) => !facts.audit.receipts.has(id) || !facts.audit.records.has(id)).length
  }
}

/** The latest confirmed publish and the latest receipt at each receiver (ms), for telling whether the flow moves. */
export const readLatest = (dataDir: string) => ({
  published: withDb(
    dataDir,
    "api",
    0,
    (db) => (db.prepare("SELECT MAX(published_at) FROM outbox").pluck().get() as number | null) ?? 0
  ),
  catalog: withDb(
    dataDir,
    "catalog",
    0,
    (db) => (db.prepare("SELECT MAX(received_at) FROM inbox").pluck().get() as number | null) ?? 0
  ),
  audit: withDb(
    dataDir,
    "audit",
    0,
    (db) => (db.prepare("SELECT MAX(received_at) FROM inbox").pluck().get() as number | null) ?? 0
  )
})
