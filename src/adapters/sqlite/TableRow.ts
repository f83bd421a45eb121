import { Schema } from "effect"

/**
 * A port's record (`record`, a Struct with the port's field names and domain types) as
 * the row of a table: the same fields, each in the column `columns` names for it, or in a
 * column of its own name when `columns` leaves it out. Decoding a row
 * (`SqlSchema.findOne`/`findAll`'s `Result`) checks every field, brands included, and
 * leaves out the columns the record does not name; encoding a record (`SqlSchema.void`'s
 * `Request`) gives `sql.insert` the row. The fields are declared once, by the port.
 *
 * E.g. `tableRow(CatalogEntry, { materialId: "material_id" })`: a
 * `Schema<CatalogEntry, { material_id: string, revision: number, … }>`.
 */
export const tableRow = <
  A,
  I extends object,
  R,
  const M extends { readonly [K in keyof I]?: string } & { readonly [K in Exclude<keyof M, keyof I>]: never }
>(record: Schema.Schema<A, I, R>, columns: M) => {
  const encoded = Schema.encodedSchema(record)
  const row = Schema.typeSchema(Schema.rename(encoded, columns))
  const toField: Record<string, string> = {}
  for (const [field, column] of Object.entries(columns)) toField[column as string] = field
  const renamed = (object: object, names: Readonly<Record<string, string | undefined>>) => {
    const out: Record<string, unknown> = {}
    for (const [key, value] of Object.entries(object)) out[names[key] ?? key] = value
    return out
  }
  return Schema.compose(
    Schema.transform(row, encoded, {
      strict: false,
      decode: (fromRow) => renamed(fromRow, toField),
      encode: (fromRecord) => renamed(fromRecord, columns)
    }),
    record
  )
}

/** The one row of `SELECT COUNT(*) AS n …`. */
export const CountRow = Schema.Struct({ n: Schema.Number })
