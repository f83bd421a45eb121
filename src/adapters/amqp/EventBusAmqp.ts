import { Effect, Layer, type Redacted, Schedule } from "effect"
import { Settings } from "../../config.js"
import { type Envelope, SchemaVersionHeader } from "../../domain/Envelope.js"
import { registerConnectionCheck } from "../../ports/BrokerConnections.js"
import { EventBus } from "../../ports/EventBus.js"
import { brokerAccessOf, brokerUrlsOf, decodeUrlPart } from "./AmqpConnection.js"
import { makeAmqpPublisher, type RawPublish } from "./AmqpPublisher.js"
import { namesOf, topologyPlanOf } from "./Topology.js"

/** The application header that carries the W3C trace context of the span that published the message. */
export const TraceparentHeader = "traceparent"

/**
 * The AMQP properties of an envelope: persistent (delivery_mode 2), message_id,
 * correlation_id, type, content_type, timestamp in seconds (AMQP 0-9-1 `timestamp` is
 * POSIX time), app_id, the `x-schema-version` header and, when the envelope has one, the
 * W3C `traceparent` header (W3C "Trace Context: AMQP protocol"); with `userId`, also `user_id`,
 * which RabbitMQ checks against the publishing connection's user ("Validated User-ID"),
 * so a receiver can tell the relay's events from anyone else's.
 */
export const toPublish = (exchange: string, envelope: Envelope, userId?: string): RawPublish => ({
  exchange,
  routingKey: envelope.type,
  content: Buffer.from(envelope.body, "utf8"),
  options: {
    persistent: true,
    messageId: envelope.messageId,
    correlationId: envelope.correlationId,
    type: envelope.type,
    contentType: envelope.contentType,
    contentEncoding: "utf-8",
    timestamp: Math.floor(envelope.timestampMs / 1000),
    appId: envelope.appId,
    headers: {
      [SchemaVersionHeader]: envelope.schemaVersion,
      ...(envelope.traceparent === undefined ? {} : { [TraceparentHeader]: envelope.traceparent })
    },
    ...(userId === undefined ? {} : { userId })
  }
})

/** The user name of a broker URL, the first of a cluster's list (`guest` when it names none, as amqplib then logs in). */
export const brokerUserOf = (url: Redacted.Redacted<string>): string => {
  const parsed = new URL(brokerUrlsOf(url)[0]!)
  return parsed.username === "" ? "guest" : decodeUrlPart(parsed.username)
}

/** How often the relay's publisher checks that its connection is up, reconnecting if not: 2 s. */
export const KeepConnectedEvery = "2 seconds"

/**
 * The `EventBus` port over amqplib: publishes to `<prefix>.events` on a connection of its
 * own, named `<prefix>-<connectionName>`, with `user_id` set to the connection's user.
 * Keeps the connection up (`KeepConnectedEvery`) and registers it as the readiness check
 * `broker:<prefix>-<connectionName>`.
 */
export const EventBusAmqp = (connectionName: string) =>
  Layer.scoped(
    EventBus,
    Effect.gen(function*() {
      const settings = yield* Settings
      const exchange = namesOf(settings.prefix).exchange
      const name = `${settings.prefix}-${connectionName}`
      const publisher = yield* makeAmqpPublisher({
        access: brokerAccessOf(settings),
        connectionName: name,
        role: "relay",
        topology: topologyPlanOf(settings, "relay"),
        confirmTimeout: settings.confirmTimeout
      })
      // Connected from the start, and again soon after a loss even with nothing to
      // publish: readiness then tells the truth, and the first event after a broker
      // outage does not wait for the connection.
      yield* publisher.connect.pipe(Effect.repeat(Schedule.spaced(KeepConnectedEvery)), Effect.forkScoped)
      yield* registerConnectionCheck(name)
      const user = brokerUserOf(settings.amqpUrl)
      return { publish: (messages) => publisher.publish(messages.map((m) => toPublish(exchange, m, user))) }
    })
  )
