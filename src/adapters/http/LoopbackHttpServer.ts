import {
  HttpApi,
  HttpApiBuilder,
  HttpApiError,
  HttpApiScalar,
  type HttpApp,
  HttpServer,
  HttpServerError,
  HttpServerRequest,
  HttpServerResponse
} from "@effect/platform"
import { NodeHttpServer } from "@effect/platform-node"
import { Cause, Clock, Context, Data, Effect, Layer, Metric, Option } from "effect"
import { createServer, type Server } from "node:http"
import type { Socket } from "node:net"
import { Metrics } from "../../app/Metrics.js"
import { describeCause } from "../../domain/errors.js"
import { truncate } from "../../domain/JsonInput.js"
import { Ids } from "../../ports/Ids.js"
import { Supervisor } from "../../ports/Supervisor.js"
import { connectionLedger } from "./ConnectionLedger.js"
import { OperationsHttpApi } from "./OperationsHttpApi.js"
import {
  InvalidRequest,
  MethodNotAllowed,
  NotFound,
  ProblemContentType,
  PublicationHttpApi
} from "./PublicationHttpApi.js"

/**
 * A client gets this long (ms) to send a whole request (Node's `requestTimeout`; its
 * default is 300 s). Past it Node answers 408.
 */
export const RequestTimeoutMs = 30_000

/**
 * How long a shutdown lets requests in progress finish, in ms. The listener closes at
 * once and idle keep-alive connections with it; a connection that gets a request
 * meanwhile reads no further one and closes after the last answer it owes, which carries
 * `Connection: close`; what is still open after this is closed.
 */
export const DrainTimeoutMs = 4_000

/**
 * 127.0.0.1:`port` could not be listened on: another process holds it (`EADDRINUSE`),
 * this user may not bind it (`EACCES`: below 1024 without the capability), or another
 * `code` of Node's `listen`. `setting` is the variable that chose the port, when the role
 * named it (`namingPortSetting`), so that the line a role stops with says what to change.
 */
export class PortUnavailable extends Data.TaggedError("PortUnavailable")<{
  readonly host: string
  readonly port: number
  readonly code: string
  readonly setting?: string
}> {
  override get message() {
    const what = this.code === "EADDRINUSE"
      ? `port ${this.port} is in use on ${this.host}`
      : this.code === "EACCES"
      ? `port ${this.port} on ${this.host} may not be listened on by this user`
      : `port ${this.port} on ${this.host} cannot be listened on (${this.code})`
    return this.setting === undefined
      ? what
      : `${this.setting}=${this.port}: ${what}; set ${this.setting} to a free port`
  }
}

/** `layer` with its `PortUnavailable` naming `setting`, the variable that chose the port. */
export const namingPortSetting = (setting: string) => <A, E, R>(layer: Layer.Layer<A, E, R>) =>
  Layer.mapError(
    layer,
    (error) =>
      error instanceof PortUnavailable
        ? new PortUnavailable({ host: error.host, port: error.port, code: error.code, setting })
        : error
  )

/** A listen failure (`ServeError`, its cause Node's error) as `PortUnavailable`. */
const portUnavailable = (port: number) => (error: HttpServerError.ServeError) => {
  const code = (error.cause as { code?: unknown } | undefined)?.code
  return new PortUnavailable({ host: "127.0.0.1", port, code: typeof code === "string" ? code : describeCause(error) })
}

/** What the loopback server offers beside `HttpServer`. */
export class LoopbackServer extends Context.Tag("dostavka/LoopbackServer")<LoopbackServer, {
  /** Graceful stop: see `DrainTimeoutMs`. */
  readonly drain: Effect.Effect<void>
  /**
   * Serves requests that carry `Upgrade` (`h2c`, `websocket`) as the plain HTTP/1.1
   * requests they also are (RFC 9110 §7.8 lets a server ignore `Upgrade`): the platform
   * would otherwise hand their socket to a WebSocket handler and never read the body.
   */
  readonly ignoreUpgrades: Effect.Effect<void>
}>() {}

/**
 * An HTTP/1.1 server on 127.0.0.1:`port` (0 picks a free one) with `LoopbackServer`.
 * Node's parser errors are answered with a problem (400, 408, 431) in their turn: on a
 * pipelined connection, after every request received before the refused bytes has its
 * answer, in order (RFC 9112 §9.3.2), then the connection closes (`connectionLedger`).
 * CONNECT gets a 405. A request whose headers or body take over `requestTimeoutMs` (ms)
 * gets its 408 within a second of it, or of the last earlier answer on its connection.
 * Every request is counted, so that `drain` can wait for those in progress. Fails with
 * `PortUnavailable` when the port cannot be listened on.
 */
export const loopbackHttpServer = (port: number, requestTimeoutMs: number = RequestTimeoutMs) =>
  Layer.unwrapEffect(Effect.gen(function*() {
    const supervisor = yield* Effect.serviceOption(Supervisor)
    // Node checks these timeouts every `connectionsCheckingInterval` (30 s by default),
    // which would let a stalled request wait up to 60 s for its 408.
    const server: Server = createServer({
      requestTimeout: requestTimeoutMs,
      headersTimeout: requestTimeoutMs,
      connectionsCheckingInterval: 1_000
    })
    const connections = connectionLedger(requestTimeoutMs)
    server.on("clientError", connections.refused)
    // CONNECT asks for a tunnel, which this server never opens (RFC 9110 §9.3.6).
    server.on("connect", (_request, socket: Socket) => {
      const body = JSON.stringify({
        type: "urn:dostavka:problem:method-not-allowed",
        title: "Method not allowed",
        status: 405,
        detail: "CONNECT is not served here"
      })
      socket.end(
        `HTTP/1.1 405 Method Not Allowed\r\nAllow: GET, POST\r\nContent-Type: ${ProblemContentType}\r\n` +
          `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`
      )
    })
    server.on("request", connections.received)
    const drain = Effect.async<void>((resume) => {
      // Writes waiting for a database lock give up now, so their requests are answered (503) within the drain.
      if (Option.isSome(supervisor)) Effect.runSync(supervisor.value.beginStop)
      // Stops listening and, on Node ≥ 19, closes keep-alive connections that are idle.
      server.close()
      server.closeIdleConnections()
      let finished = false
      const finish = () => {
        if (finished) return
        finished = true
        clearTimeout(timer)
        server.closeAllConnections()
        resume(Effect.void)
      }
      const timer = setTimeout(finish, DrainTimeoutMs)
      connections.beginDraining(finish)
      if (connections.inFlight() === 0) finish()
    })
    const ignoreUpgrades = Effect.sync(() => {
      server.removeAllListeners("upgrade")
    })
    return Layer.merge(
      NodeHttpServer.layer(() => server, { host: "127.0.0.1", port }).pipe(Layer.mapError(portUnavailable(port))),
      Layer.succeed(LoopbackServer, { drain, ignoreUpgrades })
    )
  }))

/** A route of an API: its path as a pattern, its template (the metric label), its method. */
interface Route {
  readonly pattern: RegExp
  readonly template: string
  readonly method: string
}

/** Every route `api` declares, plus `extra` ones (the documentation routes). */
const routesOf = (api: HttpApi.HttpApi.Any, extra: ReadonlyArray<string>): ReadonlyArray<Route> => {
  const routes: Array<Route> = extra.map((path) => ({
    pattern: new RegExp(`^${path.replace(/\./g, "\\.")}$`),
    template: path,
    method: "GET"
  }))
  HttpApi.reflect(api as HttpApi.HttpApi.AnyWithProps, {
    onGroup: () => {},
    onEndpoint: ({ endpoint }) => {
      const pattern = endpoint.path
        .split("/")
        .map((
          segment
        ) => (segment === "*"
          ? ".*"
          : segment.startsWith(":")
          ? "[^/]+"
          : segment.replace(/[.*+?^${}()|[\]\\]/g, "\\$&"))
        )
        .join("/")
      routes.push({ pattern: new RegExp(`^${pattern}$`), template: endpoint.path, method: endpoint.method })
    }
  })
  return routes
}

const allowedMethods = (
  routes: ReadonlyArray<Route>,
  path: string
) => [...new Set(routes.filter((r) => r.pattern.test(path)).map((r) => r.method))]

const templateOf = (routes: ReadonlyArray<Route>, path: string) =>
  routes.find((r) => r.pattern.test(path))?.template ?? "(none)"

const problem = (
  status: number,
  body: NotFound | MethodNotAllowed | InvalidRequest,
  headers: Record<string, string> = {}
) => {
  const { _tag: _, ...wire } = body
  return HttpServerResponse.unsafeJson(wire, { status, contentType: ProblemContentType, headers })
}

/** The failure of `cause` when it is a failure of type `T`, told by `is`. */
const failureIf = <T>(cause: Cause.Cause<unknown>, is: (error: unknown) => error is T): Option.Option<T> =>
  Option.filter(Cause.failureOption(cause), is)

const isRouteNotFound = (error: unknown): error is HttpServerError.RouteNotFound =>
  HttpServerError.isServerError(error) && error._tag === "RouteNotFound"

/**
 * What the contract's router does not answer: an unknown path is a 404 problem, a known
 * path with another method a 405 problem with `Allow` (RFC 9110 §15.5.6). Every 503
 * carries `Retry-After: 1`; a 413 closes the connection, since the rest of its body was
 * not read.
 */
const edge = (routes: ReadonlyArray<Route>) => <E, R>(app: HttpApp.Default<E, R>): HttpApp.Default<E, R | Ids> =>
  app.pipe(
    Effect.catchAllCause((cause) =>
      Option.match(failureIf(cause, isRouteNotFound), {
        onNone: () => Effect.failCause(cause),
        onSome: (error) => {
          const path = error.request.url.split("?")[0] ?? ""
          const allowed = allowedMethods(routes, path)
          const what = `${error.request.method} ${truncate(path, 200)}`
          if (allowed.length === 0) {
            return Effect.succeed(problem(404, new NotFound({ detail: `${what} is not known here` })))
          }
          // The path has a route for this method, and the router still refused it: a
          // segment's percent-encoding does not decode (`%zz`, bytes that are not UTF-8),
          // or it is over the router's 100 characters.
          if (allowed.includes(error.request.method)) {
            const issue = {
              field: "(path)",
              message: "has a segment that is not valid percent-encoded UTF-8, or is over 100 characters"
            }
            return Effect.succeed(
              problem(400, new InvalidRequest({ detail: `(path): ${issue.message}`, errors: [issue] }))
            )
          }
          return Effect.succeed(
            problem(405, new MethodNotAllowed({ detail: `${what}: use ${allowed.join(", ")}` }), {
              allow: allowed.join(", ")
            })
          )
        }
      })
    ),
    Effect.map((response) =>
      response.status === 503
        ? HttpServerResponse.setHeader(response, "retry-after", "1")
        : response.status === 413
        ? HttpServerResponse.setHeader(response, "connection", "close")
        : response
    ),
    requestLog(routes)
  )

/**
 * One log line per request (method, path, status, duration in ms, the request id it
 * answers with in `X-Request-Id`), and the `dostavka_http_requests` counter by status
 * and route template. The path is cut to 200 characters; no header, query or body is
 * logged.
 */
const requestLog = (routes: ReadonlyArray<Route>) => <E, R>(app: HttpApp.Default<E, R>): HttpApp.Default<E, R | Ids> =>
  Effect.gen(function*() {
    const request = yield* HttpServerRequest.HttpServerRequest
    const startedAt = yield* Clock.currentTimeMillis
    const requestId = yield* Effect.flatMap(Ids, (ids) => ids.uuid)
    const path = request.url.split("?")[0] ?? ""
    const finish = (status: number) =>
      Effect.gen(function*() {
        const durationMs = (yield* Clock.currentTimeMillis) - startedAt
        yield* Metric.increment(
          Metric.tagged(
            Metric.tagged(Metrics.httpRequests, "status", String(status)),
            "route",
            templateOf(routes, path)
          )
        )
        yield* Effect.logInfo("request").pipe(
          Effect.annotateLogs({ method: request.method, path: truncate(path, 200), status, durationMs, requestId })
        )
      })
    const response = yield* app.pipe(Effect.onError(() => finish(500)))
    yield* finish(response.status)
    return HttpServerResponse.setHeader(response, "x-request-id", requestId)
  })

const isDecodeError = (error: unknown): error is HttpApiError.HttpApiDecodeError =>
  error instanceof HttpApiError.HttpApiDecodeError

/**
 * The platform decodes the declared headers before a handler runs; its refusal becomes
 * our `InvalidRequest`, naming the header as a client spells it.
 */
const headerProblems = HttpApiBuilder.middleware(
  PublicationHttpApi,
  (app) =>
    Effect.catchAllCause(app, (cause) =>
      Option.match(failureIf(cause, isDecodeError), {
        onNone: () => Effect.failCause(cause),
        onSome: (error) =>
          Effect.gen(function*() {
            const request = yield* HttpServerRequest.HttpServerRequest
            const missing = request.headers["idempotency-key"] === undefined
            const issues = error.issues.some((issue) => issue.path[0] === "idempotency-key")
              ? [{
                field: "Idempotency-Key",
                message: missing ? "header is required" : "must be 1–200 printable ASCII characters"
              }]
              : error.issues.slice(0, 20).map((i) => ({
                field: i.path.map(String).join(".") || "(request)",
                message: truncate(i.message)
              }))
            return yield* new InvalidRequest({
              detail: issues.map((i) => `${i.field}: ${i.message}`).join("; "),
              errors: issues
            })
          })
      }))
)

/**
 * Serves the `HttpApi` in context (`HttpApiBuilder.api(api)` with its handlers) on the
 * loopback server in context, with `extras` (documentation routes, middleware) built on
 * the same router. At shutdown it drains (`LoopbackServer`) before the handler is taken
 * off the server, so a request that arrives on a kept-alive connection meanwhile is
 * still answered.
 */
const serveApi = <E, R>(
  api: HttpApi.HttpApi.Any,
  extras: Layer.Layer<never, E, R>,
  extraRoutes: ReadonlyArray<string>
) => {
  const routes = routesOf(api, extraRoutes)
  return Layer.scopedDiscard(Effect.gen(function*() {
    const app = yield* HttpApiBuilder.httpApp
    yield* HttpServer.serveEffect(edge(routes)(app))
    const server = yield* LoopbackServer
    yield* server.ignoreUpgrades
    yield* Effect.addFinalizer(() => server.drain)
  })).pipe(
    Layer.provide(extras),
    Layer.provide([HttpApiBuilder.Router.Live, HttpApiBuilder.Middleware.layer])
  )
}

/**
 * The publication API, with `/openapi.json` and an interactive page at `/docs` (Scalar,
 * its script served inline: no CDN). Needs its `HttpApiBuilder.api(PublicationHttpApi)`
 * with the handlers.
 */
export const servePublicationApi = serveApi(
  PublicationHttpApi,
  Layer.mergeAll(
    HttpApiScalar.layer({ path: "/docs" }),
    HttpApiBuilder.middlewareOpenApi({ path: "/openapi.json" }),
    headerProblems
  ),
  ["/openapi.json", "/docs"]
)

/** The operations API alone (`/healthz`, `/readyz`, `/metrics`), for a role's health port. Needs `HttpApiBuilder.api(OperationsHttpApi)`. */
export const serveOperationsApi = serveApi(OperationsHttpApi, Layer.empty, [])
