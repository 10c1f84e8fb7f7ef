import t from 'tap'
import { csvField, encodeConsent, toCsv } from '../../src/segments/csv.ts'

t.test('fields are quoted only when needed, RFC 4180 style', async (t) => {
  t.equal(csvField('plain'), 'plain')
  t.equal(csvField(null), '')
  t.equal(csvField(''), '')
  t.equal(csvField('a,b'), '"a,b"')
  t.equal(csvField('say "hi"'), '"say ""hi"""')
  t.equal(csvField('two\nlines'), '"two\nlines"')
  t.equal(csvField('cr\rhere'), '"cr\rhere"')
  t.equal(csvField(' padded'), '" padded"')
  t.equal(csvField('+39 333 1234'), '+39 333 1234')
})

t.test('consent is channel:1|0 sorted by channel, ; separated', async (t) => {
  t.equal(encodeConsent({}), '')
  t.equal(encodeConsent({ sms: { granted: true, at: null }, email: { granted: false, at: '2026-01-01T00:00:00Z' }, push: { granted: true, at: null } }), 'email:0;push:1;sms:1')
})

t.test('a page is a header row plus one CRLF line per member', async (t) => {
  t.equal(toCsv([]), 'external_id,email,phone,name,consent,country\r\n')
  t.equal(
    toCsv([{ external_id: 'p1', email: null, phone: null, name: 'Ann, B', consent: { email: { granted: true, at: null } }, country: 'IT' }]),
    'external_id,email,phone,name,consent,country\r\np1,,,"Ann, B",email:1,IT\r\n',
  )
})
