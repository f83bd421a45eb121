/**
 * WriteLockHolder: another process that takes a SQLite file's write lock (`BEGIN
 * IMMEDIATE` with better-sqlite3) and keeps it for a while, as a backup tool or a stuck
 * writer would. The role that owns the file sees its transactions fail as busy: a
 * transient store failure, which a receiver routes through its retry queues.
 */
import { type ChildProcess, spawn } from "node:child_process"

const program = `
  const Database = require("better-sqlite3")
  const db = new Database(process.argv[1], { timeout: 30000 })
  db.exec("BEGIN IMMEDIATE")
  process.stdout.write("locked\\n")
  setTimeout(() => { db.exec("ROLLBACK"); db.close(); process.stdout.write("released\\n") }, Number(process.argv[2]))
`

export interface HeldLock {
  /** When the lock was taken. */
  readonly lockedAt: number
  /** Resolves once the holder released the lock and exited, with that time. */
  readonly released: Promise<number>
}

export class WriteLockHolder {
  private child: ChildProcess | undefined

  /** Takes `file`'s write lock from a new process and keeps it `holdMs`; resolves once it is held. */
  hold(cwd: string, file: string, holdMs: number): Promise<HeldLock> {
    return new Promise((resolve, reject) => {
      const child = spawn(process.execPath, ["-e", program, file, String(holdMs)], {
        cwd,
        stdio: ["ignore", "pipe", "pipe"]
      })
      this.child = child
      let stderr = ""
      let locked = false
      const released = new Promise<number>((done) =>
        child.once("exit", () => {
          this.child = undefined
          done(Date.now())
        })
      )
      child.stderr?.on("data", (c: Buffer) => (stderr += c.toString("utf8")))
      child.stdout?.on("data", (c: Buffer) => {
        if (!locked && c.toString("utf8").includes("locked")) {
          locked = true
          resolve({ lockedAt: Date.now(), released })
        }
      })
      child.once("exit", (code) => {
        if (!locked) {
          reject(
            new Error(
              `the lock holder exited with ${code} before taking the lock: ${stderr.trim().split("\n").at(-1) ?? ""}`
            )
          )
        }
      })
    })
  }

  /** Ends a holder still running (the run is being aborted). */
  kill() {
    this.child?.kill("SIGKILL")
  }
}
