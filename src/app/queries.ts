import { Context, Effect, Layer, Option } from "effect"
import type { PersistenceError } from "../domain/errors.js"
import type { MaterialId } from "../domain/Material.js"
import type { MaterialRevision } from "../ports/MaterialStore.js"
import { MaterialStore } from "../ports/MaterialStore.js"
import { type Outbox } from "../ports/Outbox.js"
import type { PublicationRequest } from "../ports/PublicationRequests.js"
import { PublicationRequests } from "../ports/PublicationRequests.js"
import { type PublicationStatus, publicationStatus } from "./publishMaterial.js"

/** The latest revision of a material and whether its event has been published; `None` if unknown. */
export const findMaterial = (materialId: MaterialId) =>
  Effect.gen(function*() {
    const latest = yield* Effect.flatMap(MaterialStore, (store) => store.latest(materialId))
    if (Option.isNone(latest)) return Option.none()
    const status = yield* publicationStatus(latest.value.eventId)
    const { body: _, ...material } = latest.value
    return Option.some({ ...material, status })
  }).pipe(Effect.withSpan("Api.findMaterial"))

/** An accepted request by its `request_id`, with its publication status; `None` if unknown. */
export const findPublication = (requestId: string) =>
  Effect.gen(function*() {
    const request = yield* Effect.flatMap(PublicationRequests, (requests) => requests.byId(requestId))
    if (Option.isNone(request)) return Option.none()
    const status = yield* publicationStatus(request.value.eventId)
    return Option.some({ ...request.value, status })
  }).pipe(Effect.withSpan("Api.findPublication"))

/**
 * The API's read side: the two queries above, bound to the stores in context when the
 * layer is built. A role builds it over a read-only connection, so that reads never
 * wait for a writer. Both fail with `PersistenceError` only.
 */
export class PublicationQueries extends Context.Tag("dostavka/PublicationQueries")<PublicationQueries, {
  readonly findMaterial: (
    materialId: MaterialId
  ) => Effect.Effect<
    Option.Option<Omit<MaterialRevision, "body"> & { readonly status: PublicationStatus }>,
    PersistenceError
  >
  readonly findPublication: (
    requestId: string
  ) => Effect.Effect<Option.Option<PublicationRequest & { readonly status: PublicationStatus }>, PersistenceError>
}>() {
  static readonly layer = Layer.effect(
    PublicationQueries,
    Effect.map(Effect.context<MaterialStore | PublicationRequests | Outbox>(), (stores) => ({
      findMaterial: (materialId) => Effect.provide(findMaterial(materialId), stores),
      findPublication: (requestId) => Effect.provide(findPublication(requestId), stores)
    }))
  )
}
