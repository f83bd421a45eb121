import { Data, Duration, Effect, Redacted } from "effect"
import { connect } from "node:net"
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

/** What an operator does about each kind of refusal: the line a role stops with ends with it. */
const refusalHints = {
  authentication: "check the user and password in DOSTAVKA_AMQP_URL",
  vhost:
    "create the vhost (rabbitmqctl add_vhost) and give the user permissions on it, or fix the vhost in DOSTAVKA_AMQP_URL",
  tls: "use amqps:// with the broker's TLS port (5671) or amqp:// with its plain one (5672)",
  permissions: "give the user the permissions its role needs (scripts/broker-users.sh)",
  protocol: ""
} as const

/**
 * The broker answered, and refused us for a reason that will not pass by itself: the
 * login (403 ACCESS_REFUSED), the vhost (530 NOT_ALLOWED, or the broker closing the
 * connection at `connection.open`), TLS against a port that does not speak it, the
 * user's permissions (403 on a declaration), or `protocol`: what answered is not an AMQP
 * broker (an HTTP server, such as the management plugin's port). At a role's start this
 * ends the process with one line, ending with what to do; later, it is logged at error
 * level on each attempt (an operator may be fixing it).
 */
export class BrokerRefused extends Data.TaggedError("BrokerRefused")<{
  readonly reason: keyof typeof refusalHints
  readonly detail: string
}> {
  override get message() {
    return this.reason === "protocol"
      ? this.detail
      : `broker refused the connection (${this.reason}): ${this.detail}; ${refusalHints[this.reason]}`
  }
}

/**
 * Where the broker is and how long to wait for it: one attempt's TCP connect and
 * handshake, and the heartbeat. `url` is `DOSTAVKA_AMQP_URL` as set: one URL, or a
 * cluster's nodes separated by commas (`brokerUrlsOf`).
 */
export interface BrokerAccess {
  readonly url: Redacted.Redacted<string>
  readonly connectTimeout: Duration.Duration
  readonly heartbeat: Duration.Duration
}

/**
 * The broker URLs of a `DOSTAVKA_AMQP_URL` value: one URL, or several separated by
 * commas, the nodes of one RabbitMQ cluster, tried in turn.
 */
export const brokerUrlsOf = (url: Redacted.Redacted<string>): ReadonlyArray<string> =>
  Redacted.value(url).split(",").map((u) => u.trim()).filter((u) => u !== "")

/** `host:port` of a broker URL, to name a node in a message without its credentials. */
export const nodeOf = (url: string): string => {
  try {
    const parsed = new URL(url)
    return `${parsed.hostname}:${parsed.port === "" ? (parsed.protocol === "amqps:" ? "5671" : "5672") : parsed.port}`
  } catch {
    return "(a broker URL)"
  }
}

/**
 * A URL's user, password or vhost as the broker sees it: percent-escapes decoded (RFC 3986,
 * section 2.1), and a `%` that does not start a valid escape kept as it is, as amqplib
 * does, so a password such as `50%off` works rather than failing with "URI malformed".
 */
export const decodeUrlPart = (part: string): string => {
  try {
    return decodeURIComponent(part)
  } catch {
    return part.replace(/(?:%[0-9a-fA-F]{2})+/g, (run) => {
      try {
        return decodeURIComponent(run)
      } catch {
        return run
      }
    })
  }
}

/**
 * Removes from `text` the password of every URL in `url` (a list is allowed), as given
 * and URL-decoded, so that no log line carries a credential.
 */
export const scrubCredentials = (text: string, url: Redacted.Redacted<string>): string => {
  let scrubbed = text
  for (const one of brokerUrlsOf(url)) {
    try {
      const raw = new URL(one).password
      for (const password of [raw, decodeUrlPart(raw)]) {
        if (password !== "") scrubbed = scrubbed.split(password).join("***")
      }
    } catch {
      // not a URL: nothing of it to find
    }
  }
  return scrubbed
}

/** The vhost a broker URL opens, as amqplib sends it in `connection.open`: the decoded path, `/` when empty. */
const vhostOf = (url: string): string => {
  try {
    const path = new URL(url).pathname
    return path === "" || path === "/" ? "/" : decodeUrlPart(path.slice(1))
  } catch {
    return "(the URL's vhost)"
  }
}

/** The user a broker URL logs in as: amqplib's default `guest` when it names none. */
const userOf = (url: string): string => {
  try {
    const user = new URL(url).username
    return user === "" ? "guest" : decodeUrlPart(user)
  } catch {
    return "(the URL's user)"
  }
}

/**
 * Tells a refusal that will not pass from a failure that may: amqplib reports the
 * broker's `connection.close` during the start handshake with its reply code and text,
 * and a TLS handshake against a plain port as an SSL error. RabbitMQ answers a
 * `connection.open` of a vhost that does not exist, or that the user may not use, with
 * `connection.close` (530 NOT_ALLOWED), which amqplib reports only as "Expected
 * ConnectionOpenOk; got <ConnectionClose channel:0>", without the code: that is the
 * vhost, named from `node` (the URL tried; by default the first of `url`). RabbitMQ
 * "Virtual Hosts", "Access Control".
 */
export const classifyConnectError = (
  cause: unknown,
  url: Redacted.Redacted<string>,
  node: string = brokerUrlsOf(url)[0] ?? ""
): BrokerUnavailable | BrokerRefused => {
  const detail = scrubCredentials(describeCause(cause), url)
  const code = typeof cause === "object" && cause !== null ? String((cause as { code?: unknown }).code ?? "") : ""
  if (/ACCESS[-_]REFUSED|\b403\b/.test(detail)) return new BrokerRefused({ reason: "authentication", detail })
  if (/Expected ConnectionOpenOk; got <ConnectionClose/.test(detail)) {
    return new BrokerRefused({
      reason: "vhost",
      detail: `the broker closed the connection at connection.open of vhost ${JSON.stringify(vhostOf(node))}: ` +
        `it does not exist, or user ${JSON.stringify(userOf(node))} may not use it`
    })
  }
  if (/NOT[-_]ALLOWED|\b530\b|vhost/i.test(detail)) return new BrokerRefused({ reason: "vhost", detail })
  if (code.startsWith("ERR_SSL") || code === "EPROTO" || /SSL|TLS|wrong version number/i.test(detail)) {
    return new BrokerRefused({ reason: "tls", detail })
  }
  return new BrokerUnavailable({ detail })
}

/**
 * amqplib's failures of a connection on which no AMQP came back: its own socket timeout
 * (exactly "connect ETIMEDOUT", without the address Node's own error carries), the peer
 * closing during the handshake, or bytes that are no AMQP frame. Only after one of these
 * is the port asked whether it speaks HTTP (`answersHttp`).
 */
const noAmqpCameBack =
  /^(connect ETIMEDOUT|Socket closed abruptly during opening handshake|Invalid frame)$|^(Frame size \d+ exceeds maxFrameSize|Unknown frame type|Expected ConnectionStart|Frame on channel != 0 during handshake)/

/**
 * Whether `host:port` answers an HTTP request with an HTTP status line. Asked only after
 * an AMQP handshake got no AMQP back, to tell a web server (the management plugin's
 * port 15672, which waits for a request line and says nothing to AMQP's protocol header)
 * from a broker that is slow or away. The socket may stay idle at most `timeout`; the
 * probe is interruptible, and any failure is `false`.
 */
const answersHttp = (host: string, port: number, timeout: Duration.Duration) =>
  Effect.async<boolean>((resume) => {
    const socket = connect({ host: host.replace(/^\[(.*)\]$/, "$1"), port })
    let seen = ""
    let settled = false
    const settle = () => {
      if (settled) return
      settled = true
      socket.destroy()
      resume(Effect.succeed(/^HTTP\/\d/.test(seen)))
    }
    socket.setTimeout(Math.round(Duration.toMillis(timeout)), settle)
    socket.once("connect", () => socket.write(`HEAD / HTTP/1.1\r\nHost: ${host}:${port}\r\nConnection: close\r\n\r\n`))
    socket.on("data", (chunk: Buffer) => {
      seen += chunk.toString("latin1")
      if (seen.length >= 6) settle()
    })
    socket.once("error", settle)
    socket.once("close", settle)
    return Effect.sync(() => {
      settled = true
      socket.destroy()
    })
  })

/**
 * `failure` as `BrokerRefused` (`protocol`) when `url`'s port answered HTTP instead of
 * AMQP (`answersHttp`); as it is otherwise, and for `amqps:` (TLS is told apart by
 * `classifyConnectError`).
 */
const unlessHttp = (failure: BrokerUnavailable | BrokerRefused, url: string, timeout: Duration.Duration) => {
  const parsed = URL.canParse(url) ? new URL(url) : undefined
  if (failure._tag !== "BrokerUnavailable" || parsed?.protocol !== "amqp:" || !noAmqpCameBack.test(failure.detail)) {
    return Effect.fail(failure)
  }
  return Effect.flatMap(
    answersHttp(parsed.hostname, parsed.port === "" ? 5672 : Number(parsed.port), timeout),
    (http) =>
      Effect.fail(
        http
          ? new BrokerRefused({
            reason: "protocol",
            detail: `${nodeOf(url)} answered HTTP, not AMQP: is DOSTAVKA_AMQP_URL the management port?`
          })
          : failure
      )
  )
}

/** One connect to one node, bounded and interruptible (see `openConnection`). */
const connectOnce = (client: AmqpClient["Type"], url: string, access: BrokerAccess, name: string) => {
  const timeoutMs = Math.round(Duration.toMillis(access.connectTimeout))
  return Effect.async<AmqpConnection, BrokerUnavailable | BrokerRefused>((resume) => {
    let abandoned = false
    client.connect(url, {
      name,
      timeoutMs,
      heartbeatS: Math.max(1, Math.round(Duration.toSeconds(access.heartbeat)))
    }).then(
      (connection) => {
        if (abandoned) connection.close().catch(() => undefined)
        else resume(Effect.succeed(connection))
      },
      (cause) => {
        if (!abandoned) resume(Effect.fail(classifyConnectError(cause, access.url, url)))
      }
    )
    return Effect.sync(() => {
      abandoned = true
    })
  }).pipe(
    Effect.timeoutFail({
      duration: Duration.millis(2 * timeoutMs),
      onTimeout: () => new BrokerUnavailable({ detail: `no AMQP handshake within ${2 * timeoutMs} ms` })
    }),
    Effect.catchAll((failure) => unlessHttp(failure, url, access.connectTimeout))
  )
}

// Per access (one per connection owner): the node to try first on the next connect.
const nextNode = new WeakMap<BrokerAccess, number>()

/**
 * Opens one AMQP connection named `name` (shown as `connection_name` in the management
 * UI) and closes it when the scope closes. Publishers and consumers each open their own:
 * a publisher throttled by the broker's flow control must not stall a consumer's acks
 * (RabbitMQ "Connections", "Flow Control").
 *
 * With several broker URLs (a cluster), one call tries them in turn, starting after the
 * node the previous connect of this `access` reached, so each reconnect moves on to the
 * next node, and a dead node costs one refused connect. Each node's attempt ends: the
 * socket may stay idle at most `connectTimeout` until the AMQP handshake completes, and
 * the attempt takes at most twice that (and the HTTP question below as long again). It is interruptible: a role being stopped never
 * waits for a broker that accepted TCP and says nothing; a connection that opens after the
 * interruption is closed at once. A node on which no AMQP came back is asked whether it
 * speaks HTTP; one that does (the management port given as the broker's) is refused
 * (`protocol`), not waited for. Fails, when no node took it, with `BrokerRefused` if one
 * refused (a login is the cluster's), else `BrokerUnavailable` naming each node's error;
 * no message contains a password.
 */
export const openConnection = (access: BrokerAccess, name: string) =>
  Effect.uninterruptibleMask((restore) =>
    Effect.gen(function*() {
      const client = yield* AmqpClient
      const urls = brokerUrlsOf(access.url)
      const start = nextNode.get(access) ?? 0
      const failures: Array<BrokerUnavailable | BrokerRefused> = []
      let connection: AmqpConnection | undefined
      for (let k = 0; k < urls.length && connection === undefined; k++) {
        const i = (start + k) % urls.length
        const attempt = yield* Effect.either(restore(connectOnce(client, urls[i]!, access, name)))
        if (attempt._tag === "Right") {
          connection = attempt.right
          nextNode.set(access, (i + 1) % urls.length)
        } else {
          const failure = attempt.left
          const detail = urls.length === 1 || failure.detail.startsWith(nodeOf(urls[i]!))
            ? failure.detail
            : `${nodeOf(urls[i]!)}: ${failure.detail}`
          failures.push(
            failure._tag === "BrokerRefused"
              ? new BrokerRefused({ reason: failure.reason, detail })
              : new BrokerUnavailable({ detail })
          )
        }
      }
      if (connection === undefined) {
        const refused = failures.find((f) => f._tag === "BrokerRefused")
        return yield* (refused ?? (failures.length === 1
          ? failures[0]!
          : new BrokerUnavailable({ detail: failures.map((f) => f.detail).join("; ") })))
      }
      // Without a listener an 'error' event would be thrown and end the process; the
      // 'close' that follows it is what the owner reacts to.
      const opened = connection
      opened.on("error", () => {})
      yield* Effect.addFinalizer(() => closeQuietly(() => opened.close()))
      return opened
    })
  )

/**
 * Closes an amqplib connection or channel that may already be closed: amqplib then
 * rejects, or throws `IllegalOperationError` before returning a promise; either way
 * there is nothing left to do, and a release must not fail.
 */
export const closeQuietly = (close: () => Promise<void>) =>
  Effect.ignore(Effect.try(close).pipe(Effect.flatMap((p) => Effect.tryPromise(() => p))))

/** The broker access of the settings: the URL, the connect timeout and the heartbeat. */
export const brokerAccessOf = (settings: {
  readonly amqpUrl: Redacted.Redacted<string>
  readonly connectTimeout: Duration.Duration
  readonly heartbeat: Duration.Duration
}): BrokerAccess => ({ url: settings.amqpUrl, connectTimeout: settings.connectTimeout, heartbeat: settings.heartbeat })
