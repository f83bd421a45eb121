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
import { Cause, Context, Effect, Layer, Option } from "effect"
import { createServer, type Server } from "node:http"
import type { Socket } from "node:net"
import { truncate } from "../../domain/JsonInput.js"
import { InvalidRequest, MethodNotAllowed, NotFound, ProblemContentType, PublicationHttpApi } from "./PublicationHttpApi.js"

/**
 * A client gets this long (ms) to send a whole request (Node's `requestTimeout`; its
 * default is 300 s). Past it Node answers 408.
 */
export const RequestTimeoutMs = 30_000

/**
 * How long a shutdown lets requests in progress finish, in ms. The listener closes at
 * once and idle keep-alive connections with it; answers written meanwhile carry
 * `Connection: close`; what is still open after this is closed.
 */
export const DrainTimeoutMs = 4_000

/** Graceful stop of the loopback server: see `DrainTimeoutMs`. */
export class HttpDrain extends Context.Tag("dostavka/HttpDrain")<HttpDrain, { readonly drain: Effect.Effect<void> }>() {}

const reasonPhrase: Record<number, string> = { 400: "Bad Request", 408: "Request Timeout", 431: "Request Header Fields Too Large" }

/**
 * Answers what Node's HTTP parser refuses before any handler runs (RFC 9457 bodies here
 * too): 431 for headers over Node's 16 KiB limit, 408 when the request did not arrive in
 * time, 400 for anything else malformed. Sent only while the socket is writable and no
 * answer has begun, as Node's own default does (Node, http.Server 'clientError').
 */
const answerClientError = (error: Error & { readonly code?: string }, socket: Socket) => {
  const pending = (socket as Socket & { _httpMessage?: { headersSent?: boolean } })._httpMessage
  if (error.code === "ECONNRESET" || !socket.writable || pending?.headersSent) {
    socket.destroy()
    return
  }
  const status = error.code === "HPE_HEADER_OVERFLOW" ? 431 : error.code === "ERR_HTTP_REQUEST_TIMEOUT" ? 408 : 400
  const body = JSON.stringify({
    type: `urn:dostavka:problem:${status === 431 ? "headers-too-large" : status === 408 ? "request-timeout" : "malformed-request"}`,
    title: reasonPhrase[status],
    status,
    detail: status === 431
      ? "the request's headers exceed 16 KiB"
      : status === 408
      ? `the request did not arrive within ${RequestTimeoutMs} ms`
      : `the request is not valid HTTP/1.1 (${truncate(error.code ?? error.message, 100)})`
  })
  socket.end(
    `HTTP/1.1 ${status} ${reasonPhrase[status]}\r\nContent-Type: ${ProblemContentType}\r\n` +
      `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`
  )
}

/**
 * An HTTP/1.1 server on 127.0.0.1:`port` (0 picks a free one) with `HttpDrain`. Node's
 * parser errors are answered by `answerClientError`; every request is counted, so that
 * `drain` can wait for those in progress.
 */
export const loopbackHttpServer = (port: number) =>
  Layer.unwrapEffect(Effect.sync(() => {
    const server: Server = createServer({ requestTimeout: RequestTimeoutMs })
    let inFlight = 0
    let draining = false
    let idle: (() => void) | undefined
    server.on("clientError", answerClientError)
    server.on("request", (_request, response) => {
      inFlight++
      if (draining) response.setHeader("connection", "close")
      response.once("close", () => {
        inFlight--
        if (inFlight === 0) idle?.()
      })
    })
    const drain = Effect.async<void>((resume) => {
      draining = true
      // Stops listening and, on Node ≥ 19, closes keep-alive connections that are idle.
      server.close()
      server.closeIdleConnections()
      const finish = () => {
        clearTimeout(timer)
        idle = undefined
        server.closeAllConnections()
        resume(Effect.void)
      }
      const timer = setTimeout(finish, DrainTimeoutMs)
      idle = finish
      if (inFlight === 0) finish()
    })
    return Layer.merge(
      NodeHttpServer.layer(() => server, { host: "127.0.0.1", port }),
      Layer.succeed(HttpDrain, { drain })
    )
  }))

/** Every method the contract allows on `path`, plus the two documentation routes. */
const allowedMethods = (() => {
  const routes: Array<readonly [RegExp, string]> = [[/^\/openapi\.json$/, "GET"], [/^\/docs$/, "GET"]]
  HttpApi.reflect(PublicationHttpApi, {
    onGroup: () => {},
    onEndpoint: ({ endpoint }) => {
      const pattern = endpoint.path
        .split("/")
        .map((segment) => (segment === "*" ? ".*" : segment.startsWith(":") ? "[^/]+" : segment.replace(/[.*+?^${}()|[\]\\]/g, "\\$&")))
        .join("/")
      routes.push([new RegExp(`^${pattern}$`), endpoint.method])
    }
  })
  return (path: string) => [...new Set(routes.filter(([pattern]) => pattern.test(path)).map(([, method]) => method))]
})()

const problem = (status: number, body: NotFound | MethodNotAllowed, headers: Record<string, string> = {}) => {
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
const edge = <E, R>(app: HttpApp.Default<E, R>): HttpApp.Default<E, R> =>
  app.pipe(
    Effect.catchAllCause((cause) =>
      Option.match(failureIf(cause, isRouteNotFound), {
        onNone: () => Effect.failCause(cause),
        onSome: (error) => {
          const path = new URL(error.request.url, "http://localhost").pathname
          const allowed = allowedMethods(path)
          const what = `${error.request.method} ${truncate(path, 200)}`
          return Effect.succeed(
            allowed.length === 0
              ? problem(404, new NotFound({ detail: `${what} is not known here` }))
              : problem(405, new MethodNotAllowed({ detail: `${what}: use ${allowed.join(", ")}` }), { allow: allowed.join(", ") })
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
    )
  )

const isDecodeError = (error: unknown): error is HttpApiError.HttpApiDecodeError => error instanceof HttpApiError.HttpApiDecodeError

/**
 * The platform decodes the declared headers before a handler runs; its refusal becomes
 * our `InvalidRequest`, naming the header as a client spells it.
 */
const headerProblems = HttpApiBuilder.middleware(PublicationHttpApi, (app) =>
  Effect.catchAllCause(app, (cause) =>
    Option.match(failureIf(cause, isDecodeError), {
      onNone: () => Effect.failCause(cause),
      onSome: (error) =>
        Effect.gen(function*() {
          const request = yield* HttpServerRequest.HttpServerRequest
          const missing = request.headers["idempotency-key"] === undefined
          const issues = error.issues.some((issue) => issue.path[0] === "idempotency-key")
            ? [{ field: "Idempotency-Key", message: missing ? "header is required" : "must be 1–200 printable ASCII characters" }]
            : error.issues.slice(0, 20).map((i) => ({ field: i.path.map(String).join(".") || "(request)", message: truncate(i.message) }))
          return yield* new InvalidRequest({ detail: issues.map((i) => `${i.field}: ${i.message}`).join("; "), errors: issues })
        })
    })))

/**
 * Serves the `HttpApi` in context (`HttpApiBuilder.api(PublicationHttpApi)` with its
 * handlers) with `/openapi.json` and an interactive page at `/docs` (Scalar, its script
 * served inline: no CDN), on the loopback server in context. At shutdown it drains
 * (`HttpDrain`) before the handler is taken off the server, so a request that arrives on
 * a kept-alive connection meanwhile is still answered.
 */
export const servePublicationApi = Layer.scopedDiscard(Effect.gen(function*() {
  const app = yield* HttpApiBuilder.httpApp
  yield* HttpServer.serveEffect(edge(app))
  const { drain } = yield* HttpDrain
  yield* Effect.addFinalizer(() => drain)
})).pipe(
  Layer.provide([
    HttpApiScalar.layer({ path: "/docs" }),
    HttpApiBuilder.middlewareOpenApi({ path: "/openapi.json" }),
    headerProblems
  ]),
  Layer.provide([HttpApiBuilder.Router.Live, HttpApiBuilder.Middleware.layer])
)
