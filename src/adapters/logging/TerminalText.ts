/**
 * Characters a terminal may act on instead of showing: C0 controls (ESC starts an ANSI
 * sequence, CR rewrites the line, BEL rings), DEL, C1 controls (U+009B is a one-character
 * CSI on terminals that take 8-bit controls, U+009D starts an OSC such as a hyperlink),
 * the line and paragraph separators, and the bidirectional overrides and isolates that
 * reorder what follows them (Unicode UAX #9; "Trojan Source", CVE-2021-42574).
 */
// eslint-disable-next-line no-control-regex -- matching control characters is the point
const unsafe = /[\u0000-\u001f\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g

const escaped = (c: string) => {
  const code = c.charCodeAt(0)
  return code < 0x100 ? `\\x${code.toString(16).padStart(2, "0")}` : `\\u${code.toString(16).padStart(4, "0")}`
}

/**
 * `text` safe to print to a terminal: every character of `unsafe` written as an escape
 * (`\x1b`, `\x0d`, `\u202e`), everything else as it is. Whatever a message from the bus
 * carries (an id, an error, a body), printing it cannot colour, move, rewrite or link the
 * operator's screen.
 */
export const printable = (text: string): string => text.replace(unsafe, escaped)

const jsonUnsafe = /[\u007f-\u009f\u2028\u2029\u202a-\u202e\u2066-\u2069]/g

/**
 * JSON text (from `JSON.stringify`, which escapes only C0 controls) with the other
 * characters of `unsafe` written as `\uXXXX` escapes too: the same JSON value, safe to
 * print to a terminal.
 */
export const printableJson = (json: string): string =>
  json.replace(jsonUnsafe, (c) => `\\u${c.charCodeAt(0).toString(16).padStart(4, "0")}`)
