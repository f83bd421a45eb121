import { Data, Duration, Effect, Redacted } from "effect"
import { describeCause } from "../../domain/errors.js"
import { AmqpClient, type AmqpConnection } from "./AmqpClient.js"

/**
 * The broker cannot be reached now: connection refused or reset, a timeout, a lost
 * connection. It can pass; the caller retries with `reconnectPolicy`.
 */
export class BrokerUnavailable extends Data.TaggedError("BrokerUnavailable")<{
  readonly detail: string
}> {
  override get message() {
    return `broker unavailable: ${this.detail}`
  }
}

/**
 * The broker answered, and refused us for a reason that will not pass by itself: the
 * login (403 ACCESS_REFUSED), the vhost (530 NOT_ALLOWED), TLS against a port that does
 * not speak it, or the user's permissions (403 on a declaration). At a role's start this ends the process with one line; later, it is
 * logged at error level on each attempt (an operator may be fixing it).
 */
export class BrokerRefused extends Data.TaggedError("BrokerRefused")<{
  readonly reason: "authentication" | "vhost" | "tls" | "permissions"
  readonly detail: string
}> {
  override get message() {
    return `broker refused the connection (${this.reason}): ${this.detail}`
  }
}

/** Where the broker is and how long to wait for it: one attempt's TCP connect and handshake, and the heartbeat. */
export interface BrokerAccess {
  readonly url: Redacted.Redacted<string>
  readonly connectTimeout: Duration.Duration
  readonly heartbeat: Duration.Duration
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
 * Tells a refusal that will not pass from a failure that may: amqplib reports the
 * broker's `connection.close` during the handshake with its reply code and text, and a
 * TLS handshake against a plain port as an SSL error.
 */
export const classifyConnectError = (cause: unknown, url: Redacted.Redacted<string>): BrokerUnavailable | BrokerRefused => {
  const detail = scrubCredentials(describeCause(cause), url)
  const code = typeof cause === "object" && cause !== null ? String((cause as { code?: unknown }).code ?? "") : ""
  if (/ACCESS[-_]REFUSED|\b403\b/.test(detail)) return new BrokerRefused({ reason: "authentication", detail })
  if (/NOT[-_]ALLOWED|\b530\b|vhost/i.test(detail)) return new BrokerRefused({ reason: "vhost", detail })
  if (code.startsWith("ERR_SSL") || code === "EPROTO" || /SSL|TLS|wrong version number/i.test(detail)) {
    return new BrokerRefused({ reason: "tls", detail })
  }
  return new BrokerUnavailable({ detail })
}

/**
 * Opens one AMQP connection named `name` (shown as `connection_name` in the management
 * UI) and closes it when the scope closes. Publishers and consumers each open their own:
 * a publisher throttled by the broker's flow control must not stall a consumer's acks
 * (RabbitMQ "Connections", "Flow Control").
 *
 * An attempt ends: the socket may stay idle at most `connectTimeout` until the AMQP
 * handshake completes, and the whole attempt takes at most twice that. It is
 * interruptible: a role being stopped never waits for a broker that accepted TCP and
 * says nothing; a connection that opens after the interruption is closed at once. Fails
 * with `BrokerUnavailable` or `BrokerRefused`; no message contains the password.
 */
export const openConnection = (access: BrokerAccess, name: string) =>
  Effect.uninterruptibleMask((restore) =>
    Effect.gen(function*() {
      const client = yield* AmqpClient
      const timeoutMs = Math.round(Duration.toMillis(access.connectTimeout))
      const connection = yield* restore(
        Effect.async<AmqpConnection, BrokerUnavailable | BrokerRefused>((resume) => {
          let abandoned = false
          client.connect(Redacted.value(access.url), {
            name,
            timeoutMs,
            heartbeatS: Math.max(1, Math.round(Duration.toSeconds(access.heartbeat)))
          }).then(
            (connection) => {
              if (abandoned) connection.close().catch(() => undefined)
              else resume(Effect.succeed(connection))
            },
            (cause) => {
              if (!abandoned) resume(Effect.fail(classifyConnectError(cause, access.url)))
            }
          )
          return Effect.sync(() => {
            abandoned = true
          })
        }).pipe(
          Effect.timeoutFail({
            duration: Duration.millis(2 * timeoutMs),
            onTimeout: () => new BrokerUnavailable({ detail: `no AMQP handshake within ${2 * timeoutMs} ms` })
          })
        )
      )
      // Without a listener an 'error' event would be thrown and end the process; the
      // 'close' that follows it is what the owner reacts to.
      connection.on("error", () => {})
      yield* Effect.addFinalizer(() => closeQuietly(() => connection.close()))
      return connection
    })
  )

/**
 * Closes an amqplib connection or channel that may already be closed: amqplib then
 * rejects, or throws `IllegalOperationError` before returning a promise; either way
 * there is nothing left to do, and a release must not fail.
 */
export const closeQuietly = (close: () => Promise<void>) => Effect.ignore(Effect.try(close).pipe(Effect.flatMap((p) => Effect.tryPromise(() => p))))

/** The broker access of the settings: the URL, the connect timeout and the heartbeat. */
export const brokerAccessOf = (settings: {
  readonly amqpUrl: Redacted.Redacted<string>
  readonly connectTimeout: Duration.Duration
  readonly heartbeat: Duration.Duration
}): BrokerAccess => ({ url: settings.amqpUrl, connectTimeout: settings.connectTimeout, heartbeat: settings.heartbeat })
