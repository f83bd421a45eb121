/** Posting the main job's data set to the API, one line at a time, and judging each answer. */
import { type HttpClient, HttpClientRequest } from "@effect/platform"
import { Effect, Option, Schema } from "effect"
import { type Answer, DeliveryJobFailed, type Outcome } from "./DeliveryReport.js"

/** One line of `data/materials.jsonl`: a publication request and the answer it must get. */
const DatasetLine = Schema.parseJson(Schema.Struct({
  idempotency_key: Schema.String,
  material_id: Schema.String,
  revision: Schema.Number,
  title: Schema.String,
  summary: Schema.String,
  body: Schema.String,
  expect: Schema.Literal("accepted", "replay", "stale")
}))

const Accepted = Schema.Struct({ request_id: Schema.String, event_id: Schema.String, status: Schema.String })

/**
 * Posts line `index` of the data set to the API at `baseUrl` with its idempotency key, and
 * judges the answer against the line's `expect`; an unexpected one is logged with its line.
 */
export const post = (
  client: HttpClient.HttpClient,
  baseUrl: string,
  datasetPath: string
) =>
(text: string, index: number) =>
  Effect.gen(function*() {
    const line = yield* Schema.decodeUnknown(DatasetLine)(text).pipe(
      Effect.mapError((e) => new DeliveryJobFailed({ detail: `${datasetPath}:${index + 1}: ${e.message}` }))
    )
    const { idempotency_key, expect, ...command } = line
    const response = yield* HttpClientRequest.post(`${baseUrl}/v1/publications`).pipe(
      HttpClientRequest.setHeader("idempotency-key", idempotency_key),
      HttpClientRequest.bodyUnsafeJson(command),
      client.execute
    )
    const isReplay = response.headers["idempotent-replayed"] === "true"
    const outcome: Outcome = response.status === 202
      ? (isReplay ? "replay" : "accepted")
      : response.status === 409
      ? "stale"
      : `HTTP ${response.status}`
    const eventId = response.status === 202
      ? Option.some((yield* Effect.flatMap(response.json, Schema.decodeUnknown(Accepted))).event_id)
      : Option.none()
    // A second run finds every request already accepted: "accepted" lines come back as replays.
    const expected = outcome === expect || (expect === "accepted" && outcome === "replay")
    if (!expected) {
      yield* Effect.logError("unexpected answer").pipe(
        Effect.annotateLogs({ line: index + 1, expected: expect, got: outcome, body: yield* response.text })
      )
    }
    return { outcome, eventId, expected } satisfies Answer
  })
