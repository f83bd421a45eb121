import { Context, Effect, Option, Tracer } from "effect"

/**
 * Whether this process exports traces (`OTEL_EXPORTER_OTLP_ENDPOINT` is set, or a test
 * installed an exporter). When it does not, the kit neither records a trace context in the
 * outbox nor opens a span per message, so tracing costs nothing. False by default.
 */
export class TracingEnabled
  extends Context.Reference<TracingEnabled>()("dostavka/TracingEnabled", { defaultValue: () => false })
{}

const TraceparentPattern = /^00-([0-9a-f]{32})-([0-9a-f]{16})-([0-9a-f]{2})$/

/** The W3C `traceparent` of `span` (W3C Trace Context, version 00: `00-<trace id>-<span id>-<flags>`). */
export const traceparentOf = (span: Tracer.AnySpan): string =>
  `00-${span.traceId}-${span.spanId}-${span.sampled ? "01" : "00"}`

/**
 * The W3C `traceparent` of the current span, or `undefined` when tracing is off or there is no
 * span. It travels in the outbox row and the message's `traceparent` header.
 */
export const currentTraceparent: Effect.Effect<string | undefined> = Effect.flatMap(TracingEnabled, (enabled) =>
  enabled
    ? Effect.map(
      Effect.option(Effect.currentSpan),
      (span) => (Option.isSome(span) ? traceparentOf(span.value) : undefined)
    )
    : Effect.succeed(undefined))

/** The span a `traceparent` names, or `None` when it is not a valid version-00 value (all-zero ids included). */
export const parseTraceparent = (value: unknown): Option.Option<Tracer.ExternalSpan> => {
  if (typeof value !== "string") return Option.none()
  const match = TraceparentPattern.exec(value.trim())
  if (match === null || /^0+$/.test(match[1]!) || /^0+$/.test(match[2]!)) return Option.none()
  return Option.some(
    Tracer.externalSpan({ traceId: match[1]!, spanId: match[2]!, sampled: (parseInt(match[3]!, 16) & 1) === 1 })
  )
}

/**
 * Runs `effect` in a span named `name` whose parent is the span `traceparent` names (from
 * another process, through the broker), when tracing is on; otherwise runs it as it is.
 */
export const withRemoteParent =
  (name: string, traceparent: unknown, attributes: Record<string, unknown> = {}) =>
  <A, E, R>(effect: Effect.Effect<A, E, R>): Effect.Effect<A, E, R> =>
    Effect.flatMap(TracingEnabled, (enabled) => {
      if (!enabled) return effect
      const parent = parseTraceparent(traceparent)
      return Effect.withSpan(effect, name, {
        attributes,
        kind: "consumer",
        ...(Option.isSome(parent) ? { parent: parent.value } : {})
      })
    })
