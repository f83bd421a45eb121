import {
  FetchHttpClient,
  HttpClient,
  type HttpClientError,
  HttpClientRequest,
  HttpClientResponse
} from "@effect/platform"
import { Context, Duration, Effect, Either, Layer, Option, Redacted, Schema, Stream } from "effect"
import { Settings, type SettingsShape } from "../../config.js"
import { describeCause } from "../../domain/errors.js"
import { parseJsonBytes } from "../../domain/JsonInput.js"
import { brokerUrlsOf, decodeUrlPart, scrubCredentials } from "./AmqpConnection.js"

/** The management API refreshes queue figures every `collect_statistics_interval`, 5000 ms by default. */
export const ManagementSampleMs = 5_000

/** How long one management API request may take: 2 s. */
export const ManagementTimeout = Duration.seconds(2)

/** Where the management API is and who logs in to it: its base URL without user info, and the user's credentials. */
export interface ManagementAccess {
  readonly baseUrl: string
  readonly vhost: string
  readonly user: string
  readonly password: Redacted.Redacted<string>
}

/**
 * The management API of the settings: `DOSTAVKA_MANAGEMENT_URL` when set, else the
 * broker's host on 15672 (`http`), or on 15671 (`https`) for an `amqps` broker. The user
 * is the management URL's when it names one, else the broker URL's (`guest` when that
 * names none, as amqplib does); the vhost is the broker URL's (`/` by default). With a
 * cluster's list, the first node's.
 */
export const managementAccessOf = (settings: Pick<SettingsShape, "amqpUrl" | "managementUrl">): ManagementAccess => {
  const amqp = new URL(brokerUrlsOf(settings.amqpUrl)[0]!)
  const management = Option.match(settings.managementUrl, {
    onNone: () =>
      new URL(amqp.protocol === "amqps:" ? `https://${amqp.hostname}:15671` : `http://${amqp.hostname}:15672`),
    onSome: (url) => new URL(Redacted.value(url))
  })
  const from = management.username === "" ? amqp : management
  return {
    baseUrl: `${management.protocol}//${management.host}${management.pathname.replace(/\/+$/, "")}`,
    vhost: amqp.pathname.length > 1 ? decodeUrlPart(amqp.pathname.slice(1)) : "/",
    user: from.username === "" ? "guest" : decodeUrlPart(from.username),
    password: Redacted.make(from.username === "" ? "guest" : decodeUrlPart(from.password))
  }
}

/**
 * A queue's figures as the management API gives them; absent until the broker has sampled
 * the queue. `head_message_timestamp` is the AMQP `timestamp` (seconds) of the message at
 * its head, `null` when it is empty or that message has none (classic queues only).
 */
export const QueueInfo = Schema.Struct({
  messages_ready: Schema.optional(Schema.Number),
  messages_unacknowledged: Schema.optional(Schema.Number),
  messages: Schema.optional(Schema.Number),
  consumers: Schema.optional(Schema.Number),
  head_message_timestamp: Schema.optional(Schema.NullOr(Schema.Number))
})

/** The most the kit reads of one management API answer, in bytes: a queue's JSON is a few KiB. */
export const MaxManagementAnswerBytes = 1024 * 1024

/**
 * The JSON value of an answer, read as the kit reads any JSON it is given: at most
 * `MaxManagementAnswerBytes` (a longer answer is not read further), strict UTF-8, nested at
 * most 32 levels (`parseJsonBytes`). Fails with `ManagementUnanswered` saying which rule it broke.
 */
const boundedJson = (response: HttpClientResponse.HttpClientResponse) =>
  Effect.gen(function*() {
    const chunks: Array<Uint8Array> = []
    let size = 0
    yield* Stream.runForEachWhile(response.stream, (chunk) =>
      Effect.sync(() => {
        size += chunk.length
        if (size <= MaxManagementAnswerBytes) chunks.push(chunk)
        return size <= MaxManagementAnswerBytes
      }))
    if (size > MaxManagementAnswerBytes) {
      return yield* new ManagementUnanswered({ detail: `the answer is over ${MaxManagementAnswerBytes} bytes` })
    }
    return yield* Either.match(parseJsonBytes(Buffer.concat(chunks, size)), {
      onLeft: (refusal) => Effect.fail(new ManagementUnanswered({ detail: `the answer ${refusal.message}` })),
      onRight: (document) => Effect.succeed(document.value)
    })
  }).pipe(Effect.catchTag("ResponseError", (error) => Effect.fail(new ManagementUnanswered({ detail: error.message }))))

const Bindings = Schema.Array(Schema.Struct({ routing_key: Schema.String }))

/** The management API's body for a missing object: `{"error": "Object Not Found", "reason": "Not Found"}`. */
const isObjectNotFound = (body: unknown) =>
  typeof body === "object" && body !== null && (body as { readonly error?: unknown }).error === "Object Not Found"

/**
 * A 404 is "no such object" only in the management API's own words: any other server
 * answering 404 (a wrong `DOSTAVKA_MANAGEMENT_URL`) is not the management API, and its
 * answer says nothing about the broker's queues.
 */
const notFound = <A>(
  error: HttpClientError.ResponseError,
  baseUrl: string
): Effect.Effect<Option.Option<A>, HttpClientError.ResponseError | ManagementUnanswered> =>
  error.response.status !== 404
    ? Effect.fail(error)
    : Effect.flatMap(
      Effect.orElseSucceed(boundedJson(error.response), () => undefined),
      (body) =>
        isObjectNotFound(body)
          ? Effect.succeed(Option.none<A>())
          : Effect.fail(
            new ManagementUnanswered({
              detail: `${baseUrl} answered 404 without the management API's error body: is it the management API?`
            })
          )
    )

/** The management API did not answer in time, refused the user, or answered something else; `detail` carries no password. */
export class ManagementUnanswered
  extends Schema.TaggedError<ManagementUnanswered>()("ManagementUnanswered", { detail: Schema.String })
{}

/**
 * The few reads the kit makes of the RabbitMQ management HTTP API (RabbitMQ "HTTP API
 * Reference"), each bounded by `ManagementTimeout`, logged in as `managementAccessOf`:
 * - `queue(name)`: `GET /api/queues/{vhost}/{name}`; `None` when the queue does not exist;
 * - `bindingKeys(exchange, queue)`: `GET /api/bindings/{vhost}/e/{exchange}/q/{queue}`,
 *   the routing keys that bind them;
 * - `exchangeBindingKeys(source, destination)`: `GET /api/bindings/{vhost}/e/{source}/e/{destination}`,
 *   the routing keys that bind one exchange to the other.
 * Both fail with `ManagementUnanswered`. The user needs the `management` or
 * `monitoring` tag.
 */
export class ManagementApi extends Context.Tag("dostavka/ManagementApi")<ManagementApi, {
  readonly queue: (name: string) => Effect.Effect<Option.Option<typeof QueueInfo.Type>, ManagementUnanswered>
  readonly bindingKeys: (exchange: string, queue: string) => Effect.Effect<ReadonlyArray<string>, ManagementUnanswered>
  readonly exchangeBindingKeys: (
    source: string,
    destination: string
  ) => Effect.Effect<ReadonlyArray<string>, ManagementUnanswered>
}>() {
  /** Over `fetch`. Needs `Settings`. */
  static readonly live = Layer.effect(
    ManagementApi,
    Effect.gen(function*() {
      const settings = yield* Settings
      const http = (yield* HttpClient.HttpClient).pipe(HttpClient.filterStatusOk)
      const access = managementAccessOf(settings)
      const vhost = encodeURIComponent(access.vhost)
      const scrub = (text: string) =>
        scrubCredentials(text, settings.amqpUrl).split(Redacted.value(access.password)).join("***")
      const get = <A, I>(path: string, schema: Schema.Schema<A, I>) =>
        http.execute(
          HttpClientRequest.get(`${access.baseUrl}${path}`).pipe(
            HttpClientRequest.acceptJson,
            HttpClientRequest.basicAuth(access.user, Redacted.value(access.password))
          )
        ).pipe(
          Effect.flatMap(boundedJson),
          Effect.flatMap(Schema.decodeUnknown(schema, { errors: "first" })),
          Effect.map(Option.some),
          Effect.catchTag("ResponseError", (error) => notFound<A>(error, access.baseUrl)),
          Effect.timeoutFail({
            duration: ManagementTimeout,
            onTimeout: () =>
              new ManagementUnanswered({ detail: `no answer within ${Duration.format(ManagementTimeout)}` })
          }),
          Effect.catchAll((error) =>
            Effect.fail(
              error instanceof ManagementUnanswered
                ? error
                : new ManagementUnanswered({ detail: scrub(describeCause(error)) })
            )
          )
        )
      const keysAt = (path: string) =>
        Effect.map(
          get(path, Bindings),
          (found) => Option.match(found, { onNone: () => [], onSome: (bindings) => bindings.map((b) => b.routing_key) })
        )
      return {
        queue: (name) => get(`/api/queues/${vhost}/${encodeURIComponent(name)}`, QueueInfo),
        bindingKeys: (exchange, queue) =>
          keysAt(`/api/bindings/${vhost}/e/${encodeURIComponent(exchange)}/q/${encodeURIComponent(queue)}`),
        exchangeBindingKeys: (source, destination) =>
          keysAt(`/api/bindings/${vhost}/e/${encodeURIComponent(source)}/e/${encodeURIComponent(destination)}`)
      }
    })
  ).pipe(Layer.provide(FetchHttpClient.layer))
}
