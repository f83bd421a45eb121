import { Data, Effect, Redacted } from "effect"
import * as amqp from "amqplib"

/** The broker cannot be reached, refused the login, or closed the connection. Retried with `reconnectPolicy`. */
export class BrokerUnavailable extends Data.TaggedError("BrokerUnavailable")<{
  readonly detail: string
}> {
  override get message() {
    return `broker unavailable: ${this.detail}`
  }
}

/** Removes the password of `url` from `text`, so that no log line carries a credential. */
export const scrubCredentials = (text: string, url: Redacted.Redacted<string>): string => {
  try {
    const password = decodeURIComponent(new URL(Redacted.value(url)).password)
    return password === "" ? text : text.split(password).join("***")
  } catch {
    return text
  }
}

/**
 * Opens one AMQP connection named `name` (shown as `connection_name` in the management
 * UI) and closes it when the scope closes. Publishers and consumers each open their own:
 * a publisher throttled by the broker's flow control must not stall a consumer's acks
 * (RabbitMQ "Connections", "Flow Control"). Fails with `BrokerUnavailable`; the message
 * never contains the password.
 */
export const openConnection = (url: Redacted.Redacted<string>, name: string) =>
  Effect.acquireRelease(
    Effect.tryPromise({
      try: () => amqp.connect(Redacted.value(url), { clientProperties: { connection_name: name } }),
      catch: (cause) =>
        new BrokerUnavailable({ detail: scrubCredentials(cause instanceof Error ? cause.message : String(cause), url) })
    }).pipe(
      Effect.tap((connection) =>
        Effect.sync(() => {
          // Without a listener an 'error' event would be thrown and end the process; the
          // 'close' that follows it is what the owner reacts to.
          connection.on("error", () => {})
        })
      )
    ),
    (connection) => closeQuietly(() => connection.close())
  )

/**
 * Closes an amqplib connection or channel that may already be closed: amqplib then
 * rejects, or throws `IllegalOperationError` before returning a promise; either way
 * there is nothing left to do, and a release must not fail.
 */
export const closeQuietly = (close: () => Promise<void>) => Effect.ignore(Effect.tryPromise(close))
