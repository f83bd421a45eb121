/**
 * RawCatalogStore: the catalog receiver's SQLite work written straight on better-sqlite3,
 * for the baselines: the same tables as the kit's `catalog.db` (`catalog_entries`,
 * `inbox`), WAL and `synchronous = FULL` like the kit's, and per message ONE immediate
 * transaction that looks up the receipt, applies the revision if it is newer, and
 * records the receipt. No schema validation beyond `JSON.parse`.
 */
import Sqlite from "better-sqlite3"

interface EventJson {
  readonly event_id: string
  readonly material_id: string
  readonly revision: number
  readonly title: string
  readonly summary: string
  readonly published_at: string
}

export interface RawCatalogStore {
  /** Applies one message's event in its own transaction (one fsync). */
  readonly apply: (messageId: string, event: EventJson) => void
  readonly close: () => void
}

export const openRawCatalogStore = (filename: string): RawCatalogStore => {
  const db = new Sqlite(filename)
  db.pragma("journal_mode = WAL")
  db.pragma("synchronous = FULL")
  db.exec(`
    CREATE TABLE IF NOT EXISTS catalog_entries (
      material_id TEXT PRIMARY KEY, revision INTEGER NOT NULL, title TEXT NOT NULL,
      summary TEXT NOT NULL, published_at INTEGER NOT NULL, event_id TEXT NOT NULL);
    CREATE TABLE IF NOT EXISTS inbox (
      handler TEXT NOT NULL, message_id TEXT NOT NULL, outcome TEXT NOT NULL,
      received_at INTEGER NOT NULL, duplicates INTEGER NOT NULL DEFAULT 0,
      PRIMARY KEY (handler, message_id));`)
  const findReceipt = db.prepare("SELECT outcome FROM inbox WHERE handler = 'catalog' AND message_id = ?")
  const noteDuplicate = db.prepare(
    "UPDATE inbox SET duplicates = duplicates + 1 WHERE handler = 'catalog' AND message_id = ?"
  )
  const held = db.prepare<[string], { revision: number }>("SELECT revision FROM catalog_entries WHERE material_id = ?")
  const put = db.prepare(`INSERT INTO catalog_entries (material_id, revision, title, summary, published_at, event_id)
    VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (material_id) DO UPDATE SET revision = excluded.revision, title = excluded.title,
    summary = excluded.summary, published_at = excluded.published_at, event_id = excluded.event_id`)
  const record = db.prepare("INSERT INTO inbox (handler, message_id, outcome, received_at) VALUES ('catalog', ?, ?, ?)")
  const applyOne = db.transaction((messageId: string, e: EventJson) => {
    if (findReceipt.get(messageId) !== undefined) {
      noteDuplicate.run(messageId)
      return
    }
    const current = held.get(e.material_id)
    const newer = current === undefined || e.revision > current.revision
    if (newer) put.run(e.material_id, e.revision, e.title, e.summary, Date.parse(e.published_at), e.event_id)
    record.run(messageId, newer ? "applied" : "stale", Date.now())
  })
  return {
    apply: (messageId, event) => applyOne.immediate(messageId, event),
    close: () => db.close()
  }
}
