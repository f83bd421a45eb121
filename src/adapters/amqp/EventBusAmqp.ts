import { Effect, Layer } from "effect"
import { type Envelope, SchemaVersionHeader } from "../../domain/Envelope.js"
import { Settings } from "../../config.js"
import { EventBus } from "../../ports/EventBus.js"
import { makeAmqpPublisher, type RawPublish } from "./AmqpPublisher.js"
import { brokerAccessOf } from "./AmqpConnection.js"
import { namesOf, topologyOf } from "./Topology.js"

/**
 * The AMQP properties of an envelope: persistent (delivery_mode 2), message_id,
 * correlation_id, type, content_type, timestamp in seconds (AMQP 0-9-1 `timestamp` is
 * POSIX time), app_id and the `x-schema-version` header.
 */
export const toPublish = (exchange: string, envelope: Envelope): RawPublish => ({
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
    headers: { [SchemaVersionHeader]: envelope.schemaVersion }
  }
})

/** The `EventBus` port over amqplib: publishes to `<prefix>.events` on a connection of its own, named `<prefix>-<connectionName>`. */
export const EventBusAmqp = (connectionName: string) =>
  Layer.scoped(
    EventBus,
    Effect.gen(function*() {
      const settings = yield* Settings
      const exchange = namesOf(settings.prefix).exchange
      const publisher = yield* makeAmqpPublisher({
        access: brokerAccessOf(settings),
        connectionName: `${settings.prefix}-${connectionName}`,
        topology: topologyOf(settings),
        confirmTimeout: settings.confirmTimeout
      })
      return { publish: (messages) => publisher.publish(messages.map((m) => toPublish(exchange, m))) }
    })
  )
