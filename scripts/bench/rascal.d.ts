/**
 * The part of rascal (a devDependency used by the bench only; it ships no types) that
 * the bench calls: the promise API's broker, its publications and its subscriptions.
 */
declare module "rascal" {
  import type { EventEmitter } from "node:events"

  /** Emits `success` (messageId) once the broker confirmed, `error` (err, messageId), `return` (message). */
  export type PublicationSession = EventEmitter

  /** Emits `message` (message, content, ackOrNack), `error`, `invalid_content`, `redeliveries_exceeded`. */
  export interface SubscriberSession extends EventEmitter {
    cancel(): Promise<void>
  }

  export interface BrokerAsPromised extends EventEmitter {
    publish(name: string, message: unknown, overrides?: unknown): Promise<PublicationSession>
    subscribe(name: string, overrides?: unknown): Promise<SubscriberSession>
    shutdown(): Promise<void>
  }

  const rascal: {
    readonly BrokerAsPromised: { create(config: object): Promise<BrokerAsPromised> }
    withDefaultConfig(config: object): object
  }
  export default rascal
}
