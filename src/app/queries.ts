import { Effect, Option } from "effect"
import { MaterialStore } from "../ports/MaterialStore.js"
import { PublicationRequests } from "../ports/PublicationRequests.js"
import { publicationStatus } from "./publishMaterial.js"

/** The latest revision of a material and whether its event has been published; `None` if unknown. */
export const findMaterial = (materialId: string) =>
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
