import { HttpServer, HttpServerResponse } from "@effect/platform"
import { describe, expect, it } from "@effect/vitest"
import { Context, Effect, Layer } from "effect"
import fc from "fast-check"
import { loopbackHttpServer } from "../../src/adapters/http/LoopbackHttpServer.js"
import { MaxRequestBytes } from "../../src/adapters/http/PublicationHttpApi.js"
import { ApiRole } from "../../src/roles/api.js"
import { tempDataDir, uniquePrefix } from "../support/broker.js"
import { MaterialMother } from "../support/MaterialMother.js"
import { deepJson, manyUnknownKeys, nestedJson, propertyParameters } from "../support/properties.js"
import { baseUrl, countRows, post, rawHttp, startRoles, testSettings } from "../support/roles.js"

const valid = MaterialMother.wire(MaterialMother.command({ materialId: "news/hostile", revision: 1 }))
const portOf = (base: string) => Number(new URL(base).port)

/** POSTs raw bytes as JSON; returns status, content type and the body as text. */
const postBytes = (base: string, key: string, body: Uint8Array) =>
  Effect.promise(async () => {
    const response = await fetch(`${base}/v1/publications`, {
      method: "POST",
      headers: { "content-type": "application/json", "idempotency-key": key },
      body
    })
    return {
      status: response.status,
      contentType: response.headers.get("content-type"),
      replayed: response.headers.get("idempotent-replayed") === "true",
      text: await response.text()
    }
  })

const startApi = Effect.gen(function*() {
  const dir = yield* tempDataDir
  const { context } = yield* startRoles(ApiRole, testSettings(uniquePrefix("hostile"), dir))
  return { dir, base: baseUrl(context) }
})

/** What a client may send: valid commands, any JSON, deep nesting, many unknown keys, any bytes. */
const requestBodies = fc.oneof(
  fc.record({
    material_id: fc.stringMatching(/^[a-z]{1,8}(\/[a-z0-9]{1,8}){0,2}$/),
    revision: fc.integer({ min: 1, max: 1_000_000 }),
    title: fc.string({ minLength: 1, maxLength: 40 }),
    summary: fc.string({ maxLength: 40 }),
    body: fc.string({ maxLength: 200 })
  }).map((command) => Buffer.from(JSON.stringify(command))),
  fc.jsonValue().map((value) => Buffer.from(JSON.stringify(value))),
  fc.tuple(fc.constantFrom("material_id", "revision", "title", "summary", "body", "extra"), deepJson)
    .map(([field, deep]) =>
      Buffer.from(JSON.stringify({ ...valid, [field]: "PLACEHOLDER" }).replace("\"PLACEHOLDER\"", deep))
    ),
  manyUnknownKeys(20_000).map((text) => Buffer.from(text)),
  fc.uint8Array({ maxLength: 2_000 })
)

describe("the API under hostile input", () => {
  it.scopedLive(
    "any JSON, any nesting, any bytes: a 202 or a bounded problem+json 4xx, never a 5xx, and api.db holds exactly the accepted requests",
    () =>
      Effect.gen(function*() {
        const { base, dir } = yield* startApi
        let accepted = 0
        let key = 0
        yield* Effect.promise(() =>
          fc.assert(
            fc.asyncProperty(requestBodies, async (body) => {
              const response = await Effect.runPromise(postBytes(base, `prop-${key++}`, body))
              if (response.status === 202) {
                if (!response.replayed) accepted++
                return
              }
              expect(response.status).toBeGreaterThanOrEqual(400)
              expect(response.status).toBeLessThan(500)
              expect(response.contentType).toBe("application/problem+json")
              expect(response.text.length).toBeLessThan(16_384)
              expect(JSON.parse(response.text)).toMatchObject({
                status: response.status,
                type: expect.stringMatching(/^urn:dostavka:problem:/)
              })
            }),
            propertyParameters()
          )
        )
        expect(countRows(dir, "api", "publication_requests")).toBe(accepted)
        expect(countRows(dir, "api", "outbox")).toBe(accepted)
      }),
    300_000
  )

  it.scopedLive("a title nested 10,000 levels deep is a 400 naming the body, not a 500", () =>
    Effect.gen(function*() {
      const { base, dir } = yield* startApi
      const text = JSON.stringify({ ...valid, title: "PLACEHOLDER" }).replace(
        "\"PLACEHOLDER\"",
        nestedJson(10_000, "array")
      )
      const response = yield* post(base, "deep-1", undefined, text)
      expect(response.status).toBe(400)
      expect(response.headers.get("content-type")).toBe("application/problem+json")
      expect(response.body.errors).toEqual([{
        field: "(body)",
        message: "nests arrays or objects deeper than 32 levels"
      }])
      expect(countRows(dir, "api", "outbox")).toBe(0)
    }))

  it.scopedLive("a 2.3 MB body of 200,000 unknown keys gets a small 400", () =>
    Effect.gen(function*() {
      const { base } = yield* startApi
      const text = `{${Array.from({ length: 200_000 }, (_, i) => `"unknown_key_${i}":${i}`).join(",")}}`
      expect(text.length).toBeGreaterThan(2_300_000)
      const response = yield* postBytes(base, "keys-1", Buffer.from(text))
      expect(response.status).toBe(400)
      expect(response.text.length).toBeLessThan(1_000)
      expect(JSON.parse(response.text).errors).toEqual([{
        field: "(body)",
        message: "has an object or array of more than 1000 members"
      }])
    }))

  it.scopedLive("raw Latin-1 bytes in a title are a 400 naming the body; nothing is stored", () =>
    Effect.gen(function*() {
      const { base, dir } = yield* startApi
      const [before, after] = JSON.stringify({ ...valid, title: "PLACEHOLDER" }).split("PLACEHOLDER")
      const body = Buffer.concat([
        Buffer.from(before!),
        Buffer.from("caf"),
        Buffer.from([0xe9, 0x20, 0xff, 0xfe]),
        Buffer.from(after!)
      ])
      const response = yield* postBytes(base, "latin-1", body)
      expect(response.status).toBe(400)
      expect(JSON.parse(response.text).errors).toEqual([{ field: "(body)", message: "is not valid UTF-8" }])
      expect(countRows(dir, "api", "materials")).toBe(0)
    }))

  it.scopedLive("answers outside the handlers: 405 with Allow, 404, 431 and 400 from the parser, 413 for a chunked body, all problem+json", () =>
    Effect.gen(function*() {
      const { base } = yield* startApi
      const port = portOf(base)

      const wrongMethod = yield* Effect.promise(() => fetch(`${base}/v1/publications`, { method: "DELETE" }))
      expect(wrongMethod.status).toBe(405)
      expect(wrongMethod.headers.get("allow")).toBe("POST")
      expect(wrongMethod.headers.get("content-type")).toBe("application/problem+json")
      const getPublish = yield* Effect.promise(() => fetch(`${base}/v1/materials/a/b`, { method: "PUT" }))
      expect(getPublish.status).toBe(405)
      expect(getPublish.headers.get("allow")).toBe("GET")
      const unknown = yield* Effect.promise(() => fetch(`${base}/v2/nothing`))
      expect(unknown.status).toBe(404)
      expect(yield* Effect.promise(() => unknown.json())).toMatchObject({
        type: "urn:dostavka:problem:not-found",
        status: 404
      })

      const bigHeaders = yield* rawHttp(
        port,
        `GET /v1/materials/x HTTP/1.1\r\nHost: x\r\nX-Big: ${"a".repeat(20_000)}\r\n\r\n`
      )
      expect(bigHeaders.status).toBe(431)
      expect(bigHeaders.headers["content-type"]).toBe("application/problem+json")
      expect(JSON.parse(bigHeaders.body)).toMatchObject({ status: 431, type: "urn:dostavka:problem:headers-too-large" })

      const malformed = yield* rawHttp(port, "BLAH /\x01 HTTP/9\r\n\r\n")
      expect(malformed.status).toBe(400)
      expect(JSON.parse(malformed.body)).toMatchObject({ status: 400, type: "urn:dostavka:problem:malformed-request" })

      // A body over the limit sent without Content-Length: a 413, not a reset connection.
      const chunk = Buffer.alloc(1024 * 1024, 0x20)
      const chunks = Array.from(
        { length: Math.ceil(MaxRequestBytes / chunk.length) + 1 },
        () => Buffer.concat([Buffer.from(`${chunk.length.toString(16)}\r\n`), chunk, Buffer.from("\r\n")])
      )
      const chunked = yield* rawHttp(
        port,
        Buffer.concat([
          Buffer.from(
            "POST /v1/publications HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nIdempotency-Key: chunked-1\r\nTransfer-Encoding: chunked\r\n\r\n"
          ),
          ...chunks,
          Buffer.from("0\r\n\r\n")
        ])
      )
      expect(chunked.status).toBe(413)
      expect(chunked.headers["content-type"]).toBe("application/problem+json")
    }))

  it.scopedLive("serves its OpenAPI document and an interactive page that needs no CDN", () =>
    Effect.gen(function*() {
      const { base } = yield* startApi
      // eslint-disable-next-line @typescript-eslint/no-explicit-any -- the OpenAPI document, read by shape
      const spec: any = yield* Effect.promise(() => fetch(`${base}/openapi.json`).then((r) => r.json()))
      expect(spec.info.title).toBe("Dostavka publication API")
      const publish = spec.paths["/v1/publications"].post
      expect(Object.keys(publish.responses).sort()).toEqual([
        "202",
        "400",
        "404",
        "405",
        "409",
        "413",
        "415",
        "422",
        "503"
      ])
      expect(Object.keys(publish.responses["409"].content)).toEqual(["application/problem+json"])
      expect(JSON.stringify(spec)).not.toContain("HttpApiDecodeError")
      const docs = yield* Effect.promise(() =>
        fetch(`${base}/docs`).then(async (r) => ({
          status: r.status,
          type: r.headers.get("content-type"),
          text: await r.text()
        }))
      )
      expect(docs.status).toBe(200)
      expect(docs.type).toContain("text/html")
      expect(docs.text).toContain("api-reference")
      expect(docs.text).not.toMatch(/<script[^>]+src=/)
    }))
})

describe("the API's edges, found by a break-it session", () => {
  it.scopedLive("a path the router cannot decode is a 400, a dot segment is refused, CONNECT gets a 405, and Upgrade is ignored", () =>
    Effect.gen(function*() {
      const { base, dir } = yield* startApi
      const port = portOf(base)
      for (
        const path of [
          "/v1/materials/%zz",
          "/v1/materials/%ed%a0%80",
          "/v1/publications/%zz",
          `/v1/publications/${"x".repeat(101)}`
        ]
      ) {
        const response = yield* Effect.promise(() => fetch(`${base}${path}`))
        expect({ path, status: response.status, type: response.headers.get("content-type") }).toEqual({
          path,
          status: 400,
          type: "application/problem+json"
        })
      }
      // Sent as is: a client library would resolve the dot segments itself.
      const dotted = yield* rawHttp(
        port,
        "GET /v1/materials/a/%2e%2e/b HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n"
      )
      expect(dotted.status).toBe(400)
      expect(JSON.parse(dotted.body)).toMatchObject({ errors: [{ field: "material_id" }] })

      const connect = yield* rawHttp(port, "CONNECT 127.0.0.1:443 HTTP/1.1\r\nHost: 127.0.0.1:443\r\n\r\n")
      expect(connect.status).toBe(405)
      expect(JSON.parse(connect.body)).toMatchObject({ status: 405, type: "urn:dostavka:problem:method-not-allowed" })

      const body = JSON.stringify({ ...valid, material_id: "news/upgrade" })
      const upgraded = yield* rawHttp(
        port,
        `POST /v1/publications HTTP/1.1\r\nHost: x\r\nConnection: Upgrade, HTTP2-Settings, close\r\nUpgrade: h2c\r\nHTTP2-Settings: AAMAAABkAARAAAAAAAIAAAAA\r\nContent-Type: application/json\r\nIdempotency-Key: upgrade-1\r\nContent-Length: ${
          Buffer.byteLength(body)
        }\r\n\r\n${body}`
      )
      expect(upgraded.status).toBe(202)
      expect(countRows(dir, "api", "materials")).toBe(1)
    }))

  it.scopedLive("a request that stalls gets its 408 problem within a second of the request timeout", () =>
    Effect.gen(function*() {
      const context = yield* Layer.build(loopbackHttpServer(0, 1_000))
      yield* HttpServer.serveEffect(Effect.succeed(HttpServerResponse.text("ok"))).pipe(Effect.provide(context))
      const server = Context.get(context, HttpServer.HttpServer)
      const port = server.address._tag === "TcpAddress" ? server.address.port : 0
      const startedAt = Date.now()
      const stalled = yield* rawHttp(port, "GET / HTTP/1.1\r\nHost: x\r\n")
      expect(stalled.status).toBe(408)
      expect(Date.now() - startedAt).toBeLessThan(2_500)
      expect(JSON.parse(stalled.body)).toMatchObject({ status: 408, type: "urn:dostavka:problem:request-timeout" })
    }))
})
