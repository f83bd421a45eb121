import { Context, type Effect, type Option } from "effect"
import type { PersistenceError } from "../domain/errors.js"

/** One stored revision of a material, as the API owner keeps it (with its body). */
export interface MaterialRevision {
  readonly materialId: string
  readonly revision: number
  readonly title: string
  readonly summary: string
  readonly body: string
  /** The id of the `material.published.v1` event this revision caused. */
  readonly eventId: string
  readonly publishedAtMs: number
}

/**
 * The API owner's materials: every accepted revision, body included.
 *
 * Contract: `latest` returns the highest stored revision; `insert` adds a revision and
 * fails with `PersistenceError` if that `(materialId, revision)` exists. Callers check
 * the revision rule inside the same `Transaction` as the insert.
 */
export interface MaterialStoreShape {
  readonly latest: (materialId: string) => Effect.Effect<Option.Option<MaterialRevision>, PersistenceError>
  readonly insert: (revision: MaterialRevision) => Effect.Effect<void, PersistenceError>
}

export class MaterialStore extends Context.Tag("dostavka/MaterialStore")<MaterialStore, MaterialStoreShape>() {}
