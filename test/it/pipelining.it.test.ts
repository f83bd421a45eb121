import { HttpServer, HttpServerRequest, HttpServerResponse } from "@effect/platform"
import { describe, expect, it } from "@effect/vitest"
import { Context, Effect, Fiber, Layer } from "effect"
import { createConnection, type Socket } from "node:net"
import { loopbackHttpServer, LoopbackServer } from "../../src/adapters/http/LoopbackHttpServer.js"
import { ApiRole } from "../../src/roles/api.js"
import { tempDataDir, uniquePrefix } from "../support/broker.js"
import { MaterialMother } from "../support/MaterialMother.js"
import { baseUrl, countRows, query, startRoles, testSettings } from "../support/roles.js"

/** One answer read off the wire: status, headers (lower-cased names), body as text. */
interface WireResponse {
  readonly status: number
  readonly headers: Record<string, string>
  readonly body: string
}

/** Every answer in `bytes`, in the order they came, and what is left after the last complete one. */
const responsesIn = (bytes: Buffer): { responses: Array<WireResponse>; rest: Buffer } => {
  const responses: Array<WireResponse> = []
  let at = 0
  for (;;) {
    const headEnd = bytes.indexOf("\r\n\r\n", at)
    if (headEnd < 0) break
    const [statusLine = "", ...lines] = bytes.subarray(at, headEnd).toString("latin1").split("\r\n")
    const headers = Object.fromEntries(lines.map((line) => {
      const colon = line.indexOf(":")
      return [line.slice(0, colon).trim().toLowerCase(), line.slice(colon + 1).trim()]
    }))
    const length = Number(headers["content-length"] ?? 0)
    if (headEnd + 4 + length > bytes.length) break
    responses.push({
      status: Number(statusLine.split(" ")[1]),
      headers,
      body: bytes.subarray(headEnd + 4, headEnd + 4 + length).toString("utf8")
    })
    at = headEnd + 4 + length
  }
  return { responses, rest: bytes.subarray(at) }
}

/**
 * Writes `requests` back to back on one TCP connection (a pipelining client) and reads
 * until the server closes it. `onConnected` gets the socket, for a test that hangs up itself.
 */
const pipeline = (port: number, requests: string | Buffer, onConnected: (socket: Socket) => void = () => {}) =>
  Effect.async<{ responses: Array<WireResponse>; rest: Buffer }>((resume) => {
    const socket = createConnection({ host: "127.0.0.1", port })
    const chunks: Array<Buffer> = []
    socket.on("data", (chunk) => chunks.push(chunk))
    socket.on("error", () => {})
    socket.on("close", () => resume(Effect.succeed(responsesIn(Buffer.concat(chunks)))))
    socket.write(requests)
    onConnected(socket)
    return Effect.sync(() => socket.destroy())
  })

const publication = (i: number) =>
  JSON.stringify(MaterialMother.wire(MaterialMother.command({ materialId: `pipe/m${i}` })))

/** A valid `POST /v1/publications` with Idempotency-Key `pipe-<i>`; `extraHeader` goes in as it is. */
const post = (i: number, extraHeader = "") => {
  const body = publication(i)
  return `POST /v1/publications HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nIdempotency-Key: pipe-${i}\r\n${extraHeader}Content-Length: ${
    Buffer.byteLength(body)
  }\r\n\r\n${body}`
}

/** `count` POSTs, the one at `bad` carrying `badHeader` (a header line Node's parser refuses). */
const posts = (count: number, bad: number, badHeader: string) =>
  Array.from({ length: count }, (_, i) => post(i, i === bad ? badHeader : "")).join("")

const startApi = Effect.gen(function*() {
  const dir = yield* tempDataDir
  const { context } = yield* startRoles(ApiRole, testSettings(uniquePrefix("pipelining"), dir))
  return { dir, port: Number(new URL(baseUrl(context)).port) }
})

/** The request id api.db holds for each idempotency key. */
const requestIdsByKey = (dir: string) =>
  new Map(
    query<{ idempotency_key: string; request_id: string }>(
      dir,
      "api",
      "SELECT idempotency_key, request_id FROM publication_requests"
    ).map((row) => [row.idempotency_key, row.request_id])
  )

/**
 * Asserts the answer to a pipeline whose request `bad` was refused by the parser with
 * `status`: a 202 for each request before it, in its own slot (its request id is the one
 * api.db holds for its key), then the problem, then the connection closed; nothing after.
 */
const expectAnsweredUpTo = (
  dir: string,
  got: { responses: Array<WireResponse>; rest: Buffer },
  bad: number,
  status: number,
  type: string
) => {
  expect(got.responses.map((r) => r.status)).toEqual([...Array.from({ length: bad }, () => 202), status])
  const ids = requestIdsByKey(dir)
  expect([...ids.keys()].sort()).toEqual(Array.from({ length: bad }, (_, i) => `pipe-${i}`).sort())
  got.responses.slice(0, bad).forEach((response, i) => {
    expect({ slot: i, requestId: JSON.parse(response.body).request_id }).toEqual({
      slot: i,
      requestId: ids.get(`pipe-${i}`)
    })
  })
  const refusal = got.responses[bad]!
  expect(refusal.headers["content-type"]).toBe("application/problem+json")
  expect(refusal.headers["connection"]).toBe("close")
  expect(JSON.parse(refusal.body)).toMatchObject({ status, type })
  expect(got.rest.length).toBe(0)
  expect(countRows(dir, "api", "publication_requests")).toBe(bad)
  expect(countRows(dir, "api", "outbox")).toBe(bad)
}

describe("pipelined requests on one connection, one of them malformed", () => {
  it.scopedLive("30 POSTs with a header line without a colon at #15: 15 × 202 in their slots, then the 400, then the connection closes", () =>
    Effect.gen(function*() {
      const { dir, port } = yield* startApi
      const got = yield* pipeline(port, posts(30, 15, "X-Broken header without a colon\r\n"))
      expectAnsweredUpTo(dir, got, 15, 400, "urn:dostavka:problem:malformed-request")
    }))

  it.scopedLive("100 POSTs with a space before a header's colon at #50: 50 × 202, then the 400", () =>
    Effect.gen(function*() {
      const { dir, port } = yield* startApi
      const got = yield* pipeline(port, posts(100, 50, "X-Spaced : no\r\n"))
      expectAnsweredUpTo(dir, got, 50, 400, "urn:dostavka:problem:malformed-request")
    }))

  it.scopedLive("headers over 16 KiB at #5 of 10: 5 × 202, then the 431", () =>
    Effect.gen(function*() {
      const { dir, port } = yield* startApi
      const got = yield* pipeline(port, posts(10, 5, `X-Big: ${"a".repeat(20_000)}\r\n`))
      expectAnsweredUpTo(dir, got, 5, 431, "urn:dostavka:problem:headers-too-large")
    }))

  it.scopedLive("the malformed one first: the 400 at once, and none of the 9 after it is served", () =>
    Effect.gen(function*() {
      const { dir, port } = yield* startApi
      const got = yield* pipeline(port, posts(10, 0, "X-Broken\r\n"))
      expectAnsweredUpTo(dir, got, 0, 400, "urn:dostavka:problem:malformed-request")
    }))
})

/**
 * A loopback server (request timeout `requestTimeoutMs`) whose handler answers
 * `GET /slow/<ms>` after that many ms and anything else at once, each with its path
 * as the body; a POST's body is read first. `started` counts the handlers begun, `ended`
 * those over (answered or interrupted).
 */
const startSlowServer = (requestTimeoutMs = 30_000) =>
  Effect.gen(function*() {
    const context = yield* Layer.build(loopbackHttpServer(0, requestTimeoutMs))
    const started = { count: 0 }
    const ended = { count: 0 }
    const app = Effect.gen(function*() {
      const request = yield* HttpServerRequest.HttpServerRequest
      started.count++
      if (request.method === "POST") yield* request.text
      const slow = /^\/slow\/(\d+)$/.exec(request.url)
      if (slow) yield* Effect.sleep(Number(slow[1]))
      return HttpServerResponse.text(request.url)
    }).pipe(
      Effect.catchAll(() => Effect.succeed(HttpServerResponse.empty({ status: 500 }))),
      Effect.ensuring(Effect.sync(() => ended.count++))
    )
    yield* HttpServer.serveEffect(app).pipe(Effect.provide(context))
    const address = Context.get(context, HttpServer.HttpServer).address
    return {
      port: address._tag === "TcpAddress" ? address.port : 0,
      drain: Context.get(context, LoopbackServer).drain,
      started,
      ended
    }
  })

const get = (path: string) => `GET ${path} HTTP/1.1\r\nHost: x\r\n\r\n`
/** Whether a new connection to `port` is refused: the listener has closed, so a drain has begun. */
const refusesConnections = (port: number) =>
  Effect.async<boolean>((resume) => {
    const probe = createConnection({ host: "127.0.0.1", port })
    probe.on("connect", () => {
      probe.destroy()
      resume(Effect.succeed(false))
    })
    probe.on("error", () => resume(Effect.succeed(true)))
  })

const until = (done: () => boolean) => Effect.sleep("10 millis").pipe(Effect.repeat({ until: done }))

describe("the loopback server answers a parser error in its turn", () => {
  it.scopedLive("behind answers that finish out of order (400 ms, at once, 100 ms): all three in order, then the 400", () =>
    Effect.gen(function*() {
      const { port } = yield* startSlowServer()
      const got = yield* pipeline(
        port,
        get("/slow/400") + get("/now") + get("/slow/100") + "GET / HTTP/1.1\r\nBroken\r\n\r\n"
      )
      expect(got.responses.map((r) => [r.status, r.body])).toEqual([
        [200, "/slow/400"],
        [200, "/now"],
        [200, "/slow/100"],
        [400, expect.stringContaining("malformed-request")]
      ])
    }))

  it.scopedLive("a request whose headers stall behind a 3 s answer: that answer first, then the 408, and the stalled one is never served", () =>
    Effect.gen(function*() {
      const { port, started } = yield* startSlowServer(1_000)
      const startedAt = Date.now()
      // The client finishes the stalled request once it has its 408: too late to be served.
      const finishLate = (socket: Socket) =>
        socket.on("data", (chunk: Buffer) => chunk.includes(" 408 ") && socket.write("\r\n"))
      const got = yield* pipeline(port, get("/slow/3000") + "GET /stalled HTTP/1.1\r\nHost: x\r\n", finishLate)
      expect(got.responses.map((r) => [r.status, r.body])).toEqual([
        [200, "/slow/3000"],
        [408, expect.stringContaining("request-timeout")]
      ])
      expect(Date.now() - startedAt).toBeLessThan(4_500)
      expect(started.count).toBe(1)
    }))

  it.scopedLive("a POST whose body stalls behind a 2 s answer gets its 408 after that answer, and does not wait for itself", () =>
    Effect.gen(function*() {
      const { port } = yield* startSlowServer(1_000)
      const startedAt = Date.now()
      const got = yield* pipeline(
        port,
        get("/slow/2000") + "POST /stalled HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n0123456789"
      )
      expect(got.responses.map((r) => r.status)).toEqual([200, 408])
      expect(Date.now() - startedAt).toBeLessThan(3_500)
    }))

  it.scopedLive("a drain that begins while a 400 waits for an earlier answer: the answer, then the 400, then the drain ends", () =>
    Effect.gen(function*() {
      const { drain, port, started } = yield* startSlowServer()
      const client = yield* Effect.fork(pipeline(port, get("/slow/500") + "GET / HTTP/1.1\r\nBroken\r\n\r\n"))
      yield* until(() => started.count >= 1)
      const drainStartedAt = Date.now()
      yield* drain
      expect(Date.now() - drainStartedAt).toBeLessThan(2_000)
      const got = yield* Fiber.join(client)
      expect(got.responses.map((r) => r.status)).toEqual([200, 400])
    }))

  it.scopedLive("two requests pipelined during a drain behind a slow one: all three answered, only the last says Connection: close", () =>
    Effect.gen(function*() {
      const { drain, port, started } = yield* startSlowServer()
      let socket: Socket | undefined
      const client = yield* Effect.fork(pipeline(port, get("/slow/500"), (s) => (socket = s)))
      yield* until(() => started.count >= 1)
      const draining = yield* Effect.fork(drain)
      yield* refusesConnections(port).pipe(Effect.repeat({ until: (refused) => refused }))
      socket!.write(get("/slow/10") + get("/slow/0"))
      const got = yield* Fiber.join(client)
      yield* Fiber.join(draining)
      expect(got.responses.map((r) => [r.body, r.headers["connection"] === "close"])).toEqual([
        ["/slow/500", false],
        ["/slow/10", false],
        ["/slow/0", true]
      ])
    }))

  it.scopedLive("a client that hangs up with answers still queued behind a slow one does not hold a drain up", () =>
    Effect.gen(function*() {
      const { drain, ended, port, started } = yield* startSlowServer()
      let socket: Socket | undefined
      const client = yield* Effect.fork(pipeline(port, get("/slow/300") + get("/slow/300"), (s) => (socket = s)))
      yield* until(() => started.count >= 2)
      socket!.destroy()
      yield* Fiber.join(client)
      // The second handler's answer has no connection left to go to once it ends.
      yield* until(() => ended.count >= 2)
      const startedAt = Date.now()
      yield* drain
      expect(Date.now() - startedAt).toBeLessThan(1_000)
    }))
})
