import { describe, expect, it } from "@effect/vitest"
import { Effect } from "effect"
import { spawn } from "node:child_process"
import { join } from "node:path"
import { eventually, tempDataDir, uniquePrefix } from "../support/broker.js"
import { MaterialMother } from "../support/MaterialMother.js"
import { freePort } from "../support/privateBroker.js"

const root = join(import.meta.dirname, "..", "..")

/** Starts `npm run main -- --role api` as its own process (node directly, as a supervisor would); resolves once it listens. */
const startApiProcess = (dataDir: string, port: number) =>
  Effect.acquireRelease(
    Effect.async<
      {
        readonly pid: number
        readonly exited: Promise<{ code: number | null; at: number }>
        readonly stderr: () => string
      }
    >((resume) => {
      const child = spawn(process.execPath, ["--import", "tsx", "src/main.ts", "--role", "api"], {
        cwd: root,
        env: {
          ...process.env,
          DOSTAVKA_DATA_DIR: dataDir,
          DOSTAVKA_HTTP_PORT: String(port),
          DOSTAVKA_PREFIX: uniquePrefix("stop")
        },
        stdio: ["ignore", "ignore", "pipe"]
      })
      let stderr = ""
      const exited = new Promise<{ code: number | null; at: number }>((done) =>
        child.once("exit", (code) => done({ code, at: Date.now() }))
      )
      child.stderr.on("data", (chunk) => {
        stderr += String(chunk)
        if (stderr.includes("Listening on")) resume(Effect.succeed({ pid: child.pid!, exited, stderr: () => stderr }))
      })
    }),
    (api) =>
      Effect.sync(() => {
        try {
          process.kill(api.pid, "SIGKILL")
        } catch {
          // already gone
        }
      })
  )

describe("stopping the API", () => {
  it.scopedLive("SIGTERM during a burst of 50 POSTs: each client gets an answer or a refused connection, idle keep-alive sockets close, the process exits 0 within 5 s", () =>
    Effect.gen(function*() {
      const dir = yield* tempDataDir
      const port = yield* freePort
      const api = yield* startApiProcess(dir, port)
      const base = `http://127.0.0.1:${port}`
      // One request first, so that a kept-alive connection sits idle when the signal comes.
      expect((yield* Effect.promise(() => fetch(`${base}/v1/materials/none`))).status).toBe(404)

      // 50 clients, each POSTing again as soon as it has its answer, on its kept-alive
      // connection, until the server stops answering; the signal comes mid-stream.
      let sent = 0
      const client = async (c: number) => {
        const statuses: Array<number | string> = []
        for (let i = 0;; i++) {
          sent++
          const outcome = await fetch(`${base}/v1/publications`, {
            method: "POST",
            headers: { "content-type": "application/json", "idempotency-key": `burst-${c}-${i}` },
            body: JSON.stringify(
              MaterialMother.wire(MaterialMother.command({ materialId: `burst/m${c}`, revision: i + 1 }))
            )
          }).then(
            (r) => r.status,
            (e: Error) => `refused: ${(e.cause as { code?: string } | undefined)?.code ?? e.message}`
          )
          statuses.push(outcome)
          if (typeof outcome === "string") return statuses
        }
      }
      const clients = Array.from({ length: 50 }, (_, c) => client(c))
      // The signal comes once 100 requests have been sent, whatever the machine's load.
      yield* Effect.sleep("20 millis").pipe(Effect.repeat({ until: () => sent >= 100 }))
      const signalledAt = Date.now()
      process.kill(api.pid, "SIGTERM")

      const settled = (yield* Effect.promise(() => Promise.all(clients))).flat()
      const endedAt = Date.now()
      const exit = yield* Effect.promise(() => api.exited)
      expect(exit.code).toBe(0)
      expect(exit.at - signalledAt).toBeLessThan(5_000)
      expect(endedAt - signalledAt).toBeLessThan(5_000)
      expect(settled).toHaveLength(sent)
      const answered = settled.filter((o) => typeof o === "number")
      expect(new Set(answered)).toEqual(new Set([202]))
      expect(answered.length).toBeGreaterThanOrEqual(50)
      for (const refusal of settled.filter((o) => typeof o === "string")) {
        expect(["refused: ECONNREFUSED", "refused: ECONNRESET", "refused: UND_ERR_SOCKET"]).toContain(refusal)
      }
      // Node emits "exit" before the child's stderr has been read to its end: the last lines may come after.
      expect(yield* eventually(Effect.sync(api.stderr), (text) => text.includes("api stopped"))).toContain(
        "api stopped"
      )
    }))
})
