import type { IncomingMessage, ServerResponse } from "node:http"
import type { Socket } from "node:net"
import { truncate } from "../../domain/JsonInput.js"
import { ProblemContentType } from "./PublicationHttpApi.js"

const reasonPhrase: Record<number, string> = {
  400: "Bad Request",
  408: "Request Timeout",
  431: "Request Header Fields Too Large"
}

/** What Node's HTTP parser hands `clientError`: `code` is llhttp's (`HPE_…`) or Node's own. */
type ParserError = Error & { readonly code?: string }

/** A connection as Node's server holds it: `_httpMessage` is the response being written on it now. */
type ServerSocket = Socket & { _httpMessage?: ServerResponse | null }

/**
 * The whole answer, as bytes for the socket, to what Node's HTTP parser refuses before any
 * handler runs (RFC 9457 bodies here too): 431 for headers over Node's 16 KiB limit, 408
 * when the request did not arrive within `requestTimeoutMs`, 400 for anything else
 * malformed. It says `Connection: close`: nothing after the refused bytes is served.
 */
const refusalOf = (error: ParserError, requestTimeoutMs: number): string => {
  const status = error.code === "HPE_HEADER_OVERFLOW" ? 431 : error.code === "ERR_HTTP_REQUEST_TIMEOUT" ? 408 : 400
  const body = JSON.stringify({
    type: `urn:dostavka:problem:${
      status === 431 ? "headers-too-large" : status === 408 ? "request-timeout" : "malformed-request"
    }`,
    title: reasonPhrase[status],
    status,
    detail: status === 431
      ? "the request's headers exceed 16 KiB"
      : status === 408
      ? `the request did not arrive within ${requestTimeoutMs} ms`
      : `the request is not valid HTTP/1.1 (${truncate(error.code ?? error.message, 100)})`
  })
  return `HTTP/1.1 ${status} ${reasonPhrase[status]}\r\nContent-Type: ${ProblemContentType}\r\n` +
    `Content-Length: ${Buffer.byteLength(body)}\r\nConnection: close\r\n\r\n${body}`
}

/** A parser error's answer on one connection, from the moment it is decided until it is flushed. */
interface Refusal {
  readonly answer: string
  /** The responses to the requests received whole before the refused bytes: the answer waits for them. */
  readonly before: Set<ServerResponse>
  state: "waiting" | "sent" | "done"
  /** Whether llhttp itself failed (an `HPE_…` code), rather than Node's request timeout firing. */
  readonly parserFailed: boolean
  /** Undoes `stopReading`. */
  readonly readAgain: () => void
}

/** What one connection still owes its client. */
interface Owed {
  /** Responses not yet settled (finished, or their connection gone). */
  readonly responses: Set<ServerResponse>
  refusal: Refusal | undefined
  /** Set while draining, once a request came: the connection closes after its last answer. */
  closing: boolean
}

/**
 * Reads nothing more from `socket` until the returned function is called: bytes after a
 * refused request are not parsed, and a request whose headers stalled cannot complete
 * and be served after its 408. Node resumes a socket it paused for back-pressure
 * (`socketOnDrain`), so it is paused again whenever that happens.
 */
const stopReading = (socket: Socket): () => void => {
  const pauseAgain = () => socket.pause()
  socket.pause()
  socket.on("resume", pauseAgain)
  return () => {
    socket.off("resume", pauseAgain)
    socket.resume()
  }
}

/**
 * Tracks, per connection (a `WeakMap` keyed by its socket), the responses it still owes
 * and a parser error's answer, so that this answer takes its turn: RFC 9112 §9.3.2 has a
 * server answer pipelined requests in the order it received them, and Node's
 * `ServerResponse` keeps its own answers in that order, but `clientError` hands over the
 * bare socket. A refusal therefore waits until every request received whole before the
 * refused bytes has been answered (a request whose headers came but whose body is what
 * failed or stalled is not waited for: it is the one refused), is then written, and the
 * connection closes. Until then nothing more is read.
 *
 * `inFlight` counts owed responses and refusals not yet flushed, across connections, for
 * `drain`; `whenIdle` is called each time it falls to 0. No timer is set; a connection's
 * listeners go with it.
 */
export const connectionLedger = (requestTimeoutMs: number) => {
  const owedBy = new WeakMap<Socket, Owed>()
  let inFlight = 0
  let draining = false
  let whenIdle: (() => void) | undefined

  const release = () => {
    inFlight--
    if (inFlight === 0) whenIdle?.()
  }

  const refusalDone = (refusal: Refusal) => {
    if (refusal.state === "done") return
    refusal.state = "done"
    release()
  }

  /** Writes the refusal, or, when the refused request's own handler has begun an answer, lets that one be its answer. */
  const sendRefusal = (socket: ServerSocket, refusal: Refusal) => {
    refusal.state = "sent"
    // An answer before it said `Connection: close`, so Node is closing the connection already;
    // its 'close' settles the refusal.
    if (socket.destroyed || !socket.writable) return
    const end = (answer: string) => {
      socket.end(answer, () => {
        refusalDone(refusal)
        if (!refusal.parserFailed) socket.destroy()
      })
      // llhttp parses nothing after its error, so reading again only lets the socket see the
      // client's FIN and close instead of lingering half-open. A timeout leaves the parser
      // mid-request: the rest of that request must never be read, so the connection is
      // closed once the answer is out, as Node's own default does.
      if (refusal.parserFailed) refusal.readAgain()
    }
    const current = socket._httpMessage
    if (current === null || current === undefined || !current.headersSent) end(refusal.answer)
    else if (current.writableEnded) end("")
    else current.once("finish", () => end(""))
  }

  const settle = (socket: ServerSocket, owed: Owed, response: ServerResponse) => {
    if (!owed.responses.delete(response)) return
    release()
    const refusal = owed.refusal
    if (refusal?.state === "waiting" && refusal.before.delete(response) && refusal.before.size === 0) {
      sendRefusal(socket, refusal)
    }
  }

  const owedOn = (socket: ServerSocket): Owed => {
    const known = owedBy.get(socket)
    if (known !== undefined) return known
    const owed: Owed = { responses: new Set(), refusal: undefined, closing: false }
    owedBy.set(socket, owed)
    // Node tells only the response being written that its connection closed; those queued
    // behind it hear nothing, so they are settled here.
    socket.once("close", () => {
      for (const response of [...owed.responses]) settle(socket, owed, response)
      if (owed.refusal !== undefined) refusalDone(owed.refusal)
    })
    return owed
  }

  /**
   * While draining, a connection closes after the last answer it owes (RFC 9112 §9.6) and
   * reads no further request. Only that answer says `Connection: close`: Node closes the
   * connection after any answer that does, under the answers queued behind it.
   */
  const closeAfter = (socket: ServerSocket, owed: Owed, response: ServerResponse) => {
    for (const earlier of owed.responses) {
      if (earlier !== response && !earlier.headersSent && earlier.hasHeader("connection")) {
        earlier.removeHeader("connection")
      }
    }
    response.setHeader("connection", "close")
    if (!owed.closing) stopReading(socket)
    owed.closing = true
  }

  /** Node's 'request': `response` is owed on its connection until it settles. */
  const received = (request: IncomingMessage, response: ServerResponse) => {
    const socket = request.socket as ServerSocket
    const owed = owedOn(socket)
    owed.responses.add(response)
    inFlight++
    response.once("close", () => settle(socket, owed, response))
    if (draining) closeAfter(socket, owed, response)
  }

  /**
   * Node's 'clientError'. A reset or no longer writable connection is destroyed; otherwise
   * the refusal is decided once (llhttp repeats its error on every later read) and sent in
   * its turn. A later error once the refusal is flushed (more bytes, or the request timeout
   * of a client that never closed its side) destroys the connection, as before.
   */
  const refused = (error: ParserError, socket: ServerSocket) => {
    if (error.code === "ECONNRESET" || !socket.writable) {
      socket.destroy()
      return
    }
    const owed = owedOn(socket)
    if (owed.refusal !== undefined) {
      if (owed.refusal.state === "done") socket.destroy()
      return
    }
    const before = new Set([...owed.responses].filter((response) => response.req.complete))
    const refusal: Refusal = {
      answer: refusalOf(error, requestTimeoutMs),
      before,
      parserFailed: error.code !== "ERR_HTTP_REQUEST_TIMEOUT",
      state: "waiting",
      readAgain: stopReading(socket)
    }
    owed.refusal = refusal
    inFlight++
    if (before.size === 0) sendRefusal(socket, refusal)
  }

  return {
    received,
    refused,
    inFlight: () => inFlight,
    /** From now on every connection that gets a request closes after its last answer (`closeAfter`); `idle` is called whenever nothing is in flight. */
    beginDraining: (idle: () => void) => {
      draining = true
      whenIdle = idle
    }
  }
}
