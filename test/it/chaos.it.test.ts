import { spawn } from "node:child_process"
import { join } from "node:path"
import { describe, expect, it } from "vitest"
import { hasPrivateBrokerSupport, privateBrokerUnsupportedReason } from "../support/privateBroker.js"

/**
 * The quick chaos run (`npm run chaos -- --quick`) as one test: about 1,500 requests
 * through four role processes on a private broker node, one fault of each kind, and every
 * invariant checked at the end (nothing lost, nothing applied twice, no regression, no
 * role died, clean logs). It takes about four minutes. The run prints its seed; a
 * failure shows the end of its report, and `npm run chaos -- --quick --seed N` replays it.
 */

const root = join(import.meta.dirname, "..", "..")
const timeoutMs = 20 * 60_000

if (!hasPrivateBrokerSupport) console.log(`chaos.it.test.ts skipped: ${privateBrokerUnsupportedReason}`)

describe.skipIf(!hasPrivateBrokerSupport)("chaos, quick", () => {
  it("survives one fault of each kind with every invariant holding (exit 0)", async () => {
    const { code, output } = await new Promise<{ code: number | null; output: string }>((resolve) => {
      const child = spawn(process.execPath, ["--import", "tsx", "scripts/chaos.ts", "--quick"], {
        cwd: root,
        stdio: ["ignore", "pipe", "pipe"]
      })
      let output = ""
      child.stdout.on("data", (c: Buffer) => (output += c.toString("utf8")))
      child.stderr.on("data", (c: Buffer) => (output += c.toString("utf8")))
      // Should vitest give up first, the run's own SIGTERM handler stops its roles and node.
      const timer = setTimeout(() => child.kill("SIGTERM"), timeoutMs - 30_000)
      child.once("exit", (code) => {
        clearTimeout(timer)
        resolve({ code, output })
      })
    })
    const lines = output.split("\n")
    console.log(
      code === 0 ? `${lines[0]}\n${lines.find((l) => l.startsWith("PASSED")) ?? ""}` : lines.slice(-80).join("\n")
    )
    expect(output).toMatch(/PASSED: every invariant holds/)
    expect(code).toBe(0)
  }, timeoutMs)
})
